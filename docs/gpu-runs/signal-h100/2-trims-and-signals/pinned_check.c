/* Synchronous copies through page-locked memory keep CUDA's rules: a
 * cuMemcpyHtoD from pinned memory has read it when it returns (the buffer
 * is overwritten at once), and a cuMemcpyDtoH has landed when it returns. */
#include "common.h"
int main(int argc, char **argv) {
    CUdevice dev; CUmodule mod;
    setup(&dev, NULL, &mod);
    size_t sizes[] = {100 << 10, 1 << 20, (4 << 20) + 4096, 32 << 20};
    unsigned char *a, *b; CUdeviceptr d;
    CHECK(cuMemAllocHost((void **)&a, 32 << 20));
    CHECK(cuMemAllocHost((void **)&b, 32 << 20));
    CHECK(cuMemAlloc(&d, 32 << 20));
    long bad = 0;
    for (int i = 0; i < 400; i++) {
        size_t n = sizes[i % 4];
        memset(a, i & 0xff, n);
        CHECK(cuMemcpyHtoD(d, a, n));
        memset(a, 0xee, n);
        memset(b, 0x11, n);
        CHECK(cuMemcpyDtoH(b, d, n));
        for (size_t k = 0; k < n; k += 511) bad += b[k] != (unsigned char)(i & 0xff);
        bad += b[n - 1] != (unsigned char)(i & 0xff);
    }
    printf("pinned_check mismatches=%ld\n", bad);
    return bad != 0;
}
