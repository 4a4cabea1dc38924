/* Run through vgpu only: device addresses that are not the program's own
 * must be refused (a kernel parameter, a copy source), where a native run
 * would read whatever lies there. */
#include "common.h"

int main(int argc, char **argv) {
    const char *image = argc > 1 ? argv[1] : "kernels.ptx";
    CUdevice dev;
    CUmodule mod;
    setup(&dev, image, &mod);
    const int n = 1024;
    CUdeviceptr a, c;
    CHECK(cuMemAlloc(&a, n * sizeof(float)));
    CHECK(cuMemAlloc(&c, n * sizeof(float)));
    CUdeviceptr foreign = a + (1ull << 30); /* inside the arena, not ours */
    CUfunction f;
    CHECK(cuModuleGetFunction(&f, mod, "vec_add"));
    void *args[] = {&a, &foreign, &c, (void *)&n};
    CUresult launch = cuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 0, NULL, args, NULL);
    CUresult sync = cuCtxSynchronize();
    const char *s1 = NULL, *s2 = NULL, *s3 = NULL;
    cuGetErrorName(launch, &s1);
    cuGetErrorName(sync, &s2);
    float h[4];
    CUresult copy = cuMemcpyDtoH(h, foreign, sizeof h);
    cuGetErrorName(copy, &s3);
    printf("foreign kernel pointer: launch=%s sync=%s; foreign copy=%s\n", s1, s2, s3);
    int ok = (launch != CUDA_SUCCESS || sync != CUDA_SUCCESS) && copy != CUDA_SUCCESS;
    /* The session goes on after a refused call. */
    void *good[] = {&a, &a, &c, (void *)&n};
    CHECK(cuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 0, NULL, good, NULL));
    CHECK(cuCtxSynchronize());
    printf("%s\n", ok ? "ok" : "FAILED: a foreign address was accepted");
    return ok ? 0 : 1;
}
