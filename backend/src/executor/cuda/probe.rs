//! The sandbox probe's CUDA workload (`vgpu-backend --probe-sandbox
//! --device cuda:N`): what a guest's first program makes the driver do
//! once the worker is confined. PTX is JIT-compiled (the driver loads its
//! PTX compiler library and writes its cache in the worker's directory),
//! memory is allocated and copied both ways, and a kernel runs.

use std::ffi::{c_void, CString};

use cudarc::driver::sys;

use super::driver::check_call;
use super::CudaExecutor;

/// `out[i] = in[i] * 3 + i`, written by hand for any GPU from sm_50 on.
const PTX: &str = r#"
.version 7.0
.target sm_50
.address_size 64

.visible .entry probe(
    .param .u64 probe_in,
    .param .u64 probe_out
)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [probe_in];
    ld.param.u64 %rd2, [probe_out];
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mad.lo.s32 %r4, %r1, %r2, %r3;
    mul.wide.u32 %rd5, %r4, 4;
    add.s64 %rd6, %rd3, %rd5;
    ld.global.u32 %r5, [%rd6];
    mul.lo.s32 %r6, %r5, 3;
    add.s32 %r7, %r6, %r4;
    add.s64 %rd7, %rd4, %rd5;
    st.global.u32 [%rd7], %r7;
    ret;
}
"#;

/// Work items, one element each.
const ELEMENTS: usize = 4096;
const BLOCK: u32 = 256;

/// What the probe allocated and loaded, freed on drop.
#[derive(Default)]
struct Objects {
    buffers: Vec<sys::CUdeviceptr>,
    module: Option<sys::CUmodule>,
}

impl Drop for Objects {
    fn drop(&mut self) {
        // SAFETY: each was made by this probe in the current context and
        // is freed once; errors at release cannot be acted on.
        unsafe {
            for ptr in self.buffers.drain(..) {
                let _ = sys::cuMemFree_v2(ptr);
            }
            if let Some(module) = self.module.take() {
                let _ = sys::cuModuleUnload(module);
            }
        }
    }
}

fn failed(e: impl std::fmt::Display) -> String {
    e.to_string()
}

impl CudaExecutor {
    /// Runs the probe's kernel on this device in its primary context; the
    /// number of elements checked on success.
    pub fn probe_workload(&self) -> Result<usize, String> {
        // SAFETY: the primary context was retained in `open` and lives as
        // long as `self`.
        check_call("cuCtxSetCurrent", unsafe {
            sys::cuCtxSetCurrent(self.shared.primary)
        })
        .map_err(failed)?;
        let mut objects = Objects::default();
        let ptx = CString::new(PTX).expect("the PTX has no NUL");
        let mut module = std::ptr::null_mut();
        // SAFETY: `ptx` is a NUL-terminated image the driver only reads.
        check_call("cuModuleLoadData", unsafe {
            sys::cuModuleLoadData(&mut module, ptx.as_ptr().cast())
        })
        .map_err(failed)?;
        objects.module = Some(module);
        let mut function = std::ptr::null_mut();
        // SAFETY: a live module and a NUL-terminated name.
        check_call("cuModuleGetFunction", unsafe {
            sys::cuModuleGetFunction(&mut function, module, c"probe".as_ptr())
        })
        .map_err(failed)?;
        let bytes = ELEMENTS * std::mem::size_of::<u32>();
        for _ in 0..2 {
            let mut ptr = 0;
            // SAFETY: `ptr` is valid for writes.
            check_call("cuMemAlloc", unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes) })
                .map_err(failed)?;
            objects.buffers.push(ptr);
        }
        let (input, output) = (objects.buffers[0], objects.buffers[1]);
        let host: Vec<u32> = (0..ELEMENTS as u32).map(|i| i ^ 0x5a5a).collect();
        // SAFETY: `host` holds `bytes` bytes; `input` is an allocation of
        // that size.
        check_call("cuMemcpyHtoD", unsafe {
            sys::cuMemcpyHtoD_v2(input, host.as_ptr().cast(), bytes)
        })
        .map_err(failed)?;
        let (mut arg_in, mut arg_out) = (input, output);
        let mut params = [
            (&mut arg_in as *mut sys::CUdeviceptr).cast::<c_void>(),
            (&mut arg_out as *mut sys::CUdeviceptr).cast::<c_void>(),
        ];
        let grid = (ELEMENTS as u32).div_ceil(BLOCK);
        // SAFETY: the kernel takes two pointers, given as `params`; its
        // grid covers exactly the two allocations.
        check_call("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                function,
                grid,
                1,
                1,
                BLOCK,
                1,
                1,
                0,
                std::ptr::null_mut(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
        .map_err(failed)?;
        // SAFETY: no arguments.
        check_call("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() }).map_err(failed)?;
        let mut result = vec![0u32; ELEMENTS];
        // SAFETY: `result` has room for `bytes`; `output` holds that many.
        check_call("cuMemcpyDtoH", unsafe {
            sys::cuMemcpyDtoH_v2(result.as_mut_ptr().cast(), output, bytes)
        })
        .map_err(failed)?;
        let wrong = host
            .iter()
            .zip(&result)
            .enumerate()
            .filter(|(i, (x, y))| x.wrapping_mul(3).wrapping_add(*i as u32) != **y)
            .count();
        if wrong != 0 {
            return Err(format!("{wrong} of {ELEMENTS} elements wrong"));
        }
        Ok(ELEMENTS)
    }
}
