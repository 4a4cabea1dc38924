/* Native only: synchronous copies of 1 and 4 MiB to and from three kinds of
 * page-locked memory: cuMemAllocHost, a memfd shared mapping registered
 * with cuMemHostRegister (what vgpu's loopback heap is), and an anonymous
 * mapping registered the same way. Says whether DMA into registered memfd
 * memory is itself slower. */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define CHECK(x) do { CUresult r = (x); if (r) { printf("%s: %d\n", #x, r); exit(1); } } while (0)
static double now_s(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

static void bw(const char *kind, void *host, CUdeviceptr dev, size_t bytes) {
    int iters = 300;
    CHECK(cuMemcpyHtoD(dev, host, bytes));
    double t = now_s();
    for (int i = 0; i < iters; i++) CHECK(cuMemcpyHtoD(dev, host, bytes));
    double h = bytes * (double)iters / (now_s() - t) / 1e9;
    CHECK(cuMemcpyDtoH(host, dev, bytes));
    t = now_s();
    for (int i = 0; i < iters; i++) CHECK(cuMemcpyDtoH(host, dev, bytes));
    double d = bytes * (double)iters / (now_s() - t) / 1e9;
    printf("%-10s %zu MiB  htod %.2f GB/s  dtoh %.2f GB/s\n", kind, bytes >> 20, h, d);
}

int main(void) {
    CUdevice d; CUcontext c; CUdeviceptr dev;
    CHECK(cuInit(0)); CHECK(cuDeviceGet(&d, 0)); CHECK(cuDevicePrimaryCtxRetain(&c, d)); CHECK(cuCtxSetCurrent(c));
    size_t max = 4 << 20;
    CHECK(cuMemAlloc(&dev, max));
    void *alloc_host; CHECK(cuMemAllocHost(&alloc_host, max)); memset(alloc_host, 1, max);
    int fd = memfd_create("heap", 0); if (ftruncate(fd, max)) return 1;
    void *memfd = mmap(NULL, max, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0); memset(memfd, 1, max);
    CHECK(cuMemHostRegister(memfd, max, 0));
    void *anon = mmap(NULL, max, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); memset(anon, 1, max);
    CHECK(cuMemHostRegister(anon, max, 0));
    for (size_t b = 1 << 20; b <= max; b <<= 2) {
        bw("allochost", alloc_host, dev, b);
        bw("memfd-reg", memfd, dev, b);
        bw("anon-reg", anon, dev, b);
    }
    return 0;
}
