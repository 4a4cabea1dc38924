/* 1 MiB pageable copies in a loop: per-copy time, for the profiles. */
#include "common.h"
int main(int argc, char **argv) {
    CUdevice dev; CUmodule mod;
    setup(&dev, NULL, &mod);
    size_t n = argc > 2 ? (size_t)atol(argv[2]) << 10 : 1 << 20;
    int reps = argc > 1 ? atoi(argv[1]) : 3000;
    void *h = malloc(n); CUdeviceptr d;
    CHECK(cuMemAlloc(&d, n));
    memset(h, 1, n);
    for (int k = 0; k < 2; k++) {
        double t = now_s();
        for (int i = 0; i < reps; i++) CHECK(cuMemcpyHtoD(d, h, n));
        CHECK(cuCtxSynchronize());
        printf("htod %zu KiB %.2f us\n", n >> 10, (now_s() - t) / reps * 1e6);
        t = now_s();
        for (int i = 0; i < reps; i++) CHECK(cuMemcpyDtoH(h, d, n));
        printf("dtoh %zu KiB %.2f us\n", n >> 10, (now_s() - t) / reps * 1e6);
    }
    return 0;
}
