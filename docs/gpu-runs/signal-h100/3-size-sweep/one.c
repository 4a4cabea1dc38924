/* Synchronous copies of one size (argv[1] KiB) through cuMemAllocHost memory. */
#include "common.h"
int main(int argc, char **argv) {
    CUdevice dev; CUmodule mod;
    setup(&dev, NULL, &mod);
    size_t n = (size_t)atoi(argv[1]) << 10; int it = 300;
    unsigned char *h; CUdeviceptr d;
    CHECK(cuMemAllocHost((void **)&h, n));
    CHECK(cuMemAlloc(&d, n));
    double t = now_s();
    for (int i = 0; i < it; i++) CHECK(cuMemcpyDtoH(h, d, n));
    double a = (now_s() - t) / it * 1e6; t = now_s();
    for (int i = 0; i < it; i++) CHECK(cuMemcpyHtoD(d, h, n));
    printf("%6zu KiB dtoh %8.2f us htod %8.2f us\n", n >> 10, a, (now_s() - t) / it * 1e6);
    return 0;
}
