/* Native: synchronous copies against queued copies followed by a stream
 * write the host watches, for cuMemAllocHost and cuMemHostRegister memory. */
#include "common.h"
#include <sys/mman.h>
static volatile unsigned *flag;
static CUdeviceptr flag_dev;
static void run(const char *kind, unsigned char *h, CUdeviceptr d, size_t n) {
    int it = n <= (1 << 20) ? 2000 : 300;
    double t = now_s();
    for (int i = 0; i < it; i++) CHECK(cuMemcpyDtoH(h, d, n));
    double sync = (now_s() - t) / it * 1e6;
    t = now_s();
    for (int i = 0; i < it; i++) { CHECK(cuMemcpyDtoHAsync(h, d, n, 0)); CHECK(cuStreamSynchronize(0)); }
    double async_sync = (now_s() - t) / it * 1e6;
    double enq = 0; t = now_s();
    for (unsigned i = 1; i <= (unsigned)it; i++) {
        double e = now_s();
        CHECK(cuMemcpyDtoHAsync(h, d, n, 0));
        CHECK(cuStreamWriteValue32(0, flag_dev, i, 0));
        enq += now_s() - e;
        while (*flag != i) ;
    }
    double signalled = (now_s() - t) / it * 1e6;
    printf("%s dtoh %zu KiB: sync %.2f us, async+sync %.2f us, async+signal %.2f us (enqueue %.2f us)\n",
           kind, n >> 10, sync, async_sync, signalled, enq / it * 1e6);
}
int main(int argc, char **argv) {
    CUdevice dev; CUmodule mod;
    setup(&dev, NULL, &mod);
    size_t big = 64 << 20;
    unsigned char *pinned; CUdeviceptr d;
    CHECK(cuMemAllocHost((void **)&pinned, big));
    unsigned char *reg = mmap(0, 512 << 20, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset(reg, 0, 512 << 20);
    CHECK(cuMemHostRegister(reg, 512 << 20, CU_MEMHOSTREGISTER_PORTABLE));
    CHECK(cuMemAlloc(&d, big));
    flag = (volatile unsigned *)(reg + (256 << 20)); *flag = 0;
    CHECK(cuMemHostGetDevicePointer(&flag_dev, (void *)flag, 0));
    size_t sizes[] = {256 << 10, 1 << 20, 2 << 20, 4 << 20, 16 << 20};
    for (int k = 0; k < 5; k++) { run("allochost", pinned, d, sizes[k]); run("registered", reg + 4096, d, sizes[k]); }
    return 0;
}
