/* Which part of the backend's CUDA set-up makes its calls slower than a
 * plain program's? Each step adds one thing the backend does, cumulatively,
 * then times cuCtxSynchronize on an idle context and 1 MiB pinned copies. */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>

#define CHECK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
    const char *s_; cuGetErrorName(r_, &s_); fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_); exit(1); } } while (0)

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void *host; static CUdeviceptr dev; static size_t n = 1 << 20;
static CUcontext ctx;

static void measure(const char *step, int setcur)
{
    double best_s = 1e9, best_d = 1e9, best_h = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        double t = now();
        for (int i = 0; i < 2000; i++) { if (setcur) { CUcontext c; CHECK(cuCtxGetCurrent(&c)); } CHECK(cuCtxSynchronize()); }
        double s = (now() - t) / 2000 * 1e6;
        t = now();
        for (int i = 0; i < 500; i++) CHECK(cuMemcpyDtoH(host, dev, n));
        double d = (now() - t) / 500 * 1e6;
        t = now();
        for (int i = 0; i < 500; i++) CHECK(cuMemcpyHtoD(dev, host, n));
        double h = (now() - t) / 500 * 1e6;
        if (s < best_s) best_s = s; if (d < best_d) best_d = d; if (h < best_h) best_h = h;
    }
    printf("%-58s sync %6.2f us  dtoh 1MiB %6.2f us  htod 1MiB %6.2f us\n", step, best_s, best_d, best_h);
}

static volatile int stop_spin;
static void *spinner(void *arg) { (void)arg; CHECK(cuCtxSetCurrent(ctx)); while (!stop_spin) __asm__ volatile("pause"); return NULL; }

int main(void)
{
    CUdevice d;
    CHECK(cuInit(0)); CHECK(cuDeviceGet(&d, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, d)); CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuMemAllocHost(&host, n)); CHECK(cuMemAlloc(&dev, n));
    memset(host, 1, n);
    measure("1 primary context, cuMemAlloc, cuMemAllocHost", 0);
    measure("1b same, cuCtxGetCurrent before each sync", 1);

    CUcontext own;
#if CUDA_VERSION >= 13000
    CHECK(cuCtxCreate(&own, NULL, 0, d));
#else
    CHECK(cuCtxCreate(&own, 0, d));
#endif
    ctx = own; CHECK(cuCtxSetCurrent(own));
    CHECK(cuMemAllocHost(&host, n)); CHECK(cuMemAlloc(&dev, n)); memset(host, 1, n);
    measure("2 + a created context (cuCtxCreate) beside the primary", 0);

    size_t big = 512u << 20;
    void *region = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset(region, 0, big);
    double t = now();
    CHECK(cuMemHostRegister(region, big, CU_MEMHOSTREGISTER_PORTABLE));
    printf("   (512 MiB registered in %.1f ms)\n", (now() - t) * 1e3);
    measure("3 + 512 MiB of shared memory registered (unused)", 0);

    int fd = memfd_create("heap", 0); ftruncate(fd, 64 << 20);
    void *heap = mmap(NULL, 64 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    memset(heap, 1, n);
    CHECK(cuMemHostRegister(heap, n, CU_MEMHOSTREGISTER_PORTABLE));
    host = heap;
    measure("4 + host buffer: memfd pages registered (cuMemHostRegister)", 0);
    void *inside = (char *)region + (8 << 20);
    memset(inside, 1, n); host = inside;
    measure("4b host buffer inside the 512 MiB registered region", 0);

    size_t gran; CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED; prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE; prop.location.id = 0;
    CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUdeviceptr arena; CHECK(cuMemAddressReserve(&arena, 1ull << 40, 0, 0x200000000000ull, 0));
    CUmemGenericAllocationHandle h; CHECK(cuMemCreate(&h, 2 << 20, &prop, 0));
    CHECK(cuMemMap(arena, 2 << 20, 0, h, 0));
    CUmemAccessDesc acc = {0}; acc.location = prop.location; acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK(cuMemSetAccess(arena, 2 << 20, &acc, 1));
    dev = arena;
    measure("5 + device memory from a 1 TiB VMM arena (cuMemCreate/Map)", 0);

    CUstream s[8]; for (int i = 0; i < 8; i++) CHECK(cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING));
    measure("6 + 8 streams created", 0);

    pthread_t th; pthread_create(&th, NULL, spinner, NULL); usleep(1000);
    measure("7 + a second thread current on the context, spinning", 0);
    stop_spin = 1; pthread_join(th, NULL);
    measure("8 spinner gone", 0);
    return 0;
}
