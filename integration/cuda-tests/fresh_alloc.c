/* Allocations as libraries use them. (1) A fresh large allocation is
 * written at once by a copy on a non-blocking stream, bumped by a kernel and
 * read back: the bytes must be the program's, whatever the backend did to
 * prepare the memory (a fill it left running on the NULL stream would land
 * after the copy). (2) A kernel is given a workspace pointer past a small
 * allocation's size that it never dereferences, as cuSPARSE's SpMV does:
 * the launch must succeed. */
#include "common.h"

#define BIG (256u << 20)
#define EDGE (64u << 10)

int main(int argc, char **argv) {
    CUdevice dev;
    CUmodule mod;
    setup(&dev, argc > 1 ? argv[1] : "kernels.ptx", &mod);
    CUfunction bump;
    CHECK(cuModuleGetFunction(&bump, mod, "bump"));
    CUstream stream;
    CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    unsigned *host = malloc(EDGE), *back = malloc(EDGE);
    int n = EDGE / sizeof(unsigned), block = 256, grid = (n + block - 1) / block;
    int bad_rounds = 0;
    for (int round = 0; round < 8; round++) {
        CUdeviceptr big;
        CHECK(cuMemAlloc(&big, BIG));
        CUdeviceptr edges[2] = {big, big + BIG - EDGE};
        for (int e = 0; e < 2; e++) {
            for (int i = 0; i < n; i++) host[i] = 0x5000000u + round * 0x10000u + e * n + i;
            CHECK(cuMemcpyHtoDAsync(edges[e], host, EDGE, stream));
            void *args[] = {&edges[e], &n};
            CHECK(cuLaunchKernel(bump, grid, 1, 1, block, 1, 1, 0, stream, args, NULL));
            CHECK(cuMemcpyDtoHAsync(back, edges[e], EDGE, stream));
            CHECK(cuStreamSynchronize(stream));
            int wrong = 0;
            for (int i = 0; i < n; i++) wrong += back[i] != host[i] + 1;
            if (wrong) {
                printf("round %d, %s edge: %d of %d words wrong\n", round, e ? "last" : "first",
                       wrong, n);
                bad_rounds++;
            }
        }
        CHECK(cuMemFree(big));
    }
    printf("fresh allocations: %d wrong of 16 edges\n", bad_rounds);

    CUdeviceptr small;
    CHECK(cuMemAlloc(&small, 128));
    CUdeviceptr workspace = small + 0xc80;
    int none = 0;
    void *args[] = {&workspace, &none};
    CUresult launched = cuLaunchKernel(bump, 1, 1, 1, 32, 1, 1, 0, stream, args, NULL);
    CUresult synced = cuStreamSynchronize(stream);
    printf("workspace pointer past a 128-byte allocation: launch %d, sync %d\n", (int)launched,
           (int)synced);
    CHECK(cuMemFree(small));
    CHECK(cuStreamDestroy(stream));
    free(host);
    free(back);
    return bad_rounds || launched || synced;
}
