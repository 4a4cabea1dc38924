# The VM run's programs: NAME COMMAND... (sourced by guest-suite.sh and
# run-vm.sh; the working directory holds the binaries and kernels).
run vecadd-static ./vecadd_static
run vecadd-shared ./vecadd_shared
run vecadd ./vecadd kernels.ptx
run matmul-ptx ./matmul kernels.ptx
run matmul-fatbin ./matmul kernels.fatbin
run streams ./streams kernels.ptx
run async_copies ./async_copies kernels.ptx
run host_funcs ./host_funcs kernels.ptx
run overlap ./overlap kernels.ptx /dev/null
run globals-ptx ./globals kernels.ptx
run globals-cubin ./globals kernels.cubin
