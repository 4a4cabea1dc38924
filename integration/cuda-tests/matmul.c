/* Tiled matrix multiply; one launch per form (kernelParams and extra). */
#include "common.h"

int main(int argc, char **argv) {
    const char *image = argc > 1 ? argv[1] : "kernels.ptx";
    CUdevice dev;
    CUmodule mod;
    setup(&dev, image, &mod);
    const int n = 512;
    size_t bytes = (size_t)n * n * sizeof(float);
    float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
    for (int i = 0; i < n * n; i++) { a[i] = (i % 17) * 0.25f; b[i] = (i % 13) * 0.5f - 1.0f; }
    CUdeviceptr da, db, dc;
    CHECK(cuMemAlloc(&da, bytes));
    CHECK(cuMemAlloc(&db, bytes));
    CHECK(cuMemAlloc(&dc, bytes));
    CHECK(cuMemcpyHtoD(da, a, bytes));
    CHECK(cuMemcpyHtoD(db, b, bytes));
    CUfunction f;
    CHECK(cuModuleGetFunction(&f, mod, "matmul"));
    void *args[] = {&da, &db, &dc, (void *)&n};
    CHECK(cuLaunchKernel(f, n / 16, n / 16, 1, 16, 16, 1, 0, NULL, args, NULL));
    CHECK(cuMemcpyDtoH(c, dc, bytes));
    printf("matmul params n=%d checksum=%016llx c[7]=%.3f\n", n, checksum(c, (size_t)n * n), c[7]);

    /* The same launch through the `extra` buffer form. */
    struct { CUdeviceptr a, b, c; int n; int pad; } packed = {da, db, dc, n, 0};
    size_t size = 28;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    CHECK(cuMemsetD8(dc, 0, bytes));
    CHECK(cuLaunchKernel(f, n / 16, n / 16, 1, 16, 16, 1, 0, NULL, NULL, extra));
    CHECK(cuMemcpyDtoH(c, dc, bytes));
    printf("matmul extra  n=%d checksum=%016llx\n", n, checksum(c, (size_t)n * n));

    /* Reference on the host for a few entries. */
    int bad = 0;
    for (int k = 0; k < 64; k++) {
        int i = (k * 37) % n, j = (k * 91) % n;
        double acc = 0;
        for (int t = 0; t < n; t++) acc += (double)a[i * n + t] * b[t * n + j];
        if (acc - c[i * n + j] > 1e-2 || c[i * n + j] - acc > 1e-2) bad++;
    }
    int blocks, min_grid, block;
    CHECK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, 256, 0));
    CHECK(cuOccupancyMaxPotentialBlockSize(&min_grid, &block, f, NULL, 0, 0));
    printf("host check mismatches=%d occupancy blocks/SM=%d suggested block=%d\n", bad, blocks, block);
    printf("ok\n");
    return 0;
}
