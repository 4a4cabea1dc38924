/* Synchronous copies through cuMemAllocHost memory, by size. */
#include "common.h"
int main(int argc, char **argv) {
    CUdevice dev; CUmodule mod;
    setup(&dev, NULL, &mod);
    unsigned char *h; CUdeviceptr d;
    CHECK(cuMemAllocHost((void **)&h, 16 << 20));
    CHECK(cuMemAlloc(&d, 16 << 20));
    size_t sizes[] = {256 << 10, 1 << 20, 2 << 20, 4 << 20, 16 << 20};
    for (int k = 0; k < 5; k++) {
        size_t n = sizes[k]; int it = n <= (1 << 20) ? 2000 : 300;
        double t = now_s();
        for (int i = 0; i < it; i++) CHECK(cuMemcpyDtoH(h, d, n));
        double a = (now_s() - t) / it * 1e6; t = now_s();
        for (int i = 0; i < it; i++) CHECK(cuMemcpyHtoD(d, h, n));
        printf("%6zu KiB dtoh %8.2f us htod %8.2f us\n", n >> 10, a, (now_s() - t) / it * 1e6);
    }
    return 0;
}
