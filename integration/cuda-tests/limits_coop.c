/* Context limits (cuCtxSetLimit / cuCtxGetLimit) and cooperative launches
 * (cuLaunchCooperativeKernel, cuLaunchKernelEx with the cooperative
 * attribute): values read back, a grid barrier that needs every block
 * resident, and the refusal of a grid too large to be. */
#include "common.h"

static unsigned run_grid_sum(CUfunction f, unsigned blocks, int use_ex, CUresult *status) {
    CUdeviceptr counter, sum, out;
    CHECK(cuMemAlloc(&counter, 4));
    CHECK(cuMemAlloc(&sum, 4));
    CHECK(cuMemAlloc(&out, 4));
    CHECK(cuMemsetD32(counter, 0, 1));
    CHECK(cuMemsetD32(sum, 0, 1));
    CHECK(cuMemsetD32(out, 0, 1));
    void *args[] = {&counter, &sum, &out};
    if (use_ex) {
        CUlaunchAttribute attr;
        memset(&attr, 0, sizeof attr);
        attr.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        attr.value.cooperative = 1;
        CUlaunchConfig config;
        memset(&config, 0, sizeof config);
        config.gridDimX = blocks;
        config.gridDimY = config.gridDimZ = 1;
        config.blockDimX = 64;
        config.blockDimY = config.blockDimZ = 1;
        config.attrs = &attr;
        config.numAttrs = 1;
        *status = cuLaunchKernelEx(&config, f, args, NULL);
    } else {
        *status = cuLaunchCooperativeKernel(f, blocks, 1, 1, 64, 1, 1, 0, NULL, args);
    }
    unsigned result = 0;
    if (*status == CUDA_SUCCESS) {
        CHECK(cuCtxSynchronize());
        CHECK(cuMemcpyDtoH(&result, out, 4));
    }
    CHECK(cuMemFree(counter));
    CHECK(cuMemFree(sum));
    CHECK(cuMemFree(out));
    return result;
}

int main(int argc, char **argv) {
    const char *module = argc > 1 ? argv[1] : "kernels.ptx";
    CUdevice dev;
    CUmodule mod;
    setup(&dev, module, &mod);

    const struct { CUlimit limit; const char *name; size_t value; } limits[] = {
        {CU_LIMIT_STACK_SIZE, "stack", 4096},
        {CU_LIMIT_PRINTF_FIFO_SIZE, "printf_fifo", 4 << 20},
        {CU_LIMIT_MALLOC_HEAP_SIZE, "malloc_heap", 64 << 20},
    };
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        size_t before = 0, after = 0;
        CHECK(cuCtxGetLimit(&before, limits[i].limit));
        CHECK(cuCtxSetLimit(limits[i].limit, limits[i].value));
        CHECK(cuCtxGetLimit(&after, limits[i].limit));
        printf("limit %s: default %zu, set %zu, reads %zu\n", limits[i].name, before,
               limits[i].value, after);
    }
    printf("limit bad id: %d\n", (int)cuCtxSetLimit((CUlimit)0x7fff, 1));

    int coop = 0, sms = 0, per_sm = 0;
    CHECK(cuDeviceGetAttribute(&coop, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, dev));
    CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    CUfunction f;
    CHECK(cuModuleGetFunction(&f, mod, "grid_sum"));
    CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, 64, 0));
    printf("cooperative launch attribute %d\n", coop);
    unsigned blocks = (unsigned)(sms * per_sm);
    unsigned expect = blocks * (blocks - 1) / 2;
    for (int use_ex = 0; use_ex <= 1; use_ex++) {
        CUresult status;
        unsigned got = run_grid_sum(f, blocks, use_ex, &status);
        printf("%s: every resident block: status %d sum %s\n",
               use_ex ? "cuLaunchKernelEx" : "cuLaunchCooperativeKernel", (int)status,
               got == expect ? "right" : "WRONG");
        run_grid_sum(f, blocks * 2 + 1, use_ex, &status);
        printf("  a grid too large to be resident: status %d\n", (int)status);
    }
    printf("ok\n");
    return 0;
}
