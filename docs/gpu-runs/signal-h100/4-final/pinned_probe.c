/* 1 MiB pinned copies and empty synchronizations, for the profiles. */
#include "common.h"
int main(int argc, char **argv) {
    CUdevice dev; CUmodule mod;
    setup(&dev, NULL, &mod);
    size_t n = 1 << 20;
    void *h; CUdeviceptr d;
    CHECK(cuMemAllocHost(&h, n));
    CHECK(cuMemAlloc(&d, n));
    memset(h, 1, n);
    for (int k = 0; k < 2; k++) {
        double t = now_s();
        for (int i = 0; i < 2000; i++) CHECK(cuMemcpyDtoH(h, d, n));
        printf("dtoh 1MiB %.2f us\n", (now_s() - t) / 2000 * 1e6);
        t = now_s();
        for (int i = 0; i < 2000; i++) CHECK(cuMemcpyHtoD(d, h, n));
        printf("htod 1MiB %.2f us\n", (now_s() - t) / 2000 * 1e6);
        t = now_s();
        for (int i = 0; i < 2000; i++) CHECK(cuCtxSynchronize());
        printf("sync %.2f us\n", (now_s() - t) / 2000 * 1e6);
    }
    return 0;
}
