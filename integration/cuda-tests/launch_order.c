/* Long runs of launches, as a training loop issues them: each launch
 * depends on the one before (x = x * f + 1 on the same buffer), on the
 * NULL stream and on two streams, with copies and event waits between
 * runs; then an impossible launch (more threads per block than any GPU
 * allows) at the end of a run. Prints exact checksums and the failed
 * launch's error, reported natively by cuLaunchKernel itself, through a
 * backend that batches launches by the next synchronizing call; either way
 * the program sees it once, and the valid launches around it run. */
#include "common.h"

static void run(CUfunction scale, CUdeviceptr x, int n, CUstream s, int launches) {
    float f = 1.0001f;
    void *args[] = {&x, &f, &n};
    for (int i = 0; i < launches; i++)
        CHECK(cuLaunchKernel(scale, (n + 255) / 256, 1, 1, 256, 1, 1, 0, s, args, NULL));
}

int main(int argc, char **argv) {
    const char *ptx = argc > 1 ? argv[1] : "kernels.ptx";
    CUdevice dev;
    CUmodule mod;
    setup(&dev, ptx, &mod);
    CUfunction scale;
    CHECK(cuModuleGetFunction(&scale, mod, "scale"));
    const int n = 4096;
    size_t bytes = n * sizeof(float);
    float *host = malloc(bytes);
    for (int i = 0; i < n; i++) host[i] = (float)(i % 97) * 0.01f;
    CUdeviceptr a, b;
    CHECK(cuMemAlloc(&a, bytes));
    CHECK(cuMemAlloc(&b, bytes));
    CHECK(cuMemcpyHtoD(a, host, bytes));
    CHECK(cuMemcpyHtoD(b, host, bytes));

    /* NULL stream: runs of launches, each run ended by a copy back. */
    for (int round = 0; round < 5; round++) {
        run(scale, a, n, NULL, 1 + round * 37);
        CHECK(cuMemcpyDtoH(host, a, bytes));
        printf("null stream round %d checksum=%016llx\n", round, checksum(host, n));
    }

    /* Two streams, b waits for a's run through an event, then both run. */
    CUstream s1, s2;
    CUevent done;
    CHECK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
    for (int round = 0; round < 3; round++) {
        run(scale, a, n, s1, 200);
        CHECK(cuEventRecord(done, s1));
        CHECK(cuStreamWaitEvent(s2, done, 0));
        CHECK(cuMemcpyDtoDAsync(b, a, bytes, s2));
        run(scale, b, n, s2, 100);
        run(scale, a, n, s1, 50);
        CHECK(cuStreamSynchronize(s2));
        CHECK(cuMemcpyDtoH(host, b, bytes));
        printf("streams round %d b=%016llx", round, checksum(host, n));
        CHECK(cuStreamSynchronize(s1));
        CHECK(cuMemcpyDtoH(host, a, bytes));
        printf(" a=%016llx\n", checksum(host, n));
    }

    /* An impossible launch at the end of a run. */
    float f = 2.0f;
    int count = n;
    void *args[] = {&a, &f, &count};
    run(scale, a, n, NULL, 20);
    CUresult at_launch = cuLaunchKernel(scale, 1, 1, 1, 1 << 16, 1, 1, 0, NULL, args, NULL);
    CUresult at_sync = cuCtxSynchronize();
    CUresult reported = at_launch != CUDA_SUCCESS ? at_launch : at_sync;
    const char *name = NULL;
    cuGetErrorName(reported, &name);
    printf("impossible launch reported: %s\n", name ? name : "?");
    CHECK(cuCtxSynchronize());
    CHECK(cuMemcpyDtoH(host, a, bytes));
    printf("after the failed launch checksum=%016llx\n", checksum(host, n));
    run(scale, a, n, NULL, 10);
    CHECK(cuMemcpyDtoH(host, a, bytes));
    printf("and then checksum=%016llx\n", checksum(host, n));
    return 0;
}
