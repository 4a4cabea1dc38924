/* Streams with events and asynchronous copies: chunks of a vector go
 * through copy-in, kernel and copy-out on 4 streams; events time it and
 * order a second stream after the first, and the first after the second
 * again before it copies its chunk out. Correct only where the driver
 * honours those events: the streams run concurrently natively. */
#include "common.h"

int main(int argc, char **argv) {
    const char *image = argc > 1 ? argv[1] : "kernels.ptx";
    CUdevice dev;
    CUmodule mod;
    CUcontext ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
#if CUDA_VERSION >= 13000
    CHECK(cuCtxCreate(&ctx, NULL, 0, dev));
#else
    CHECK(cuCtxCreate(&ctx, 0, dev));
#endif
    CHECK(cuModuleLoad(&mod, image));
    CUfunction f;
    CHECK(cuModuleGetFunction(&f, mod, "scale"));
    const int nstreams = 4, chunk = 1 << 18, n = nstreams * chunk;
    size_t bytes = (size_t)n * sizeof(float);
    float *h;
    CHECK(cuMemAllocHost((void **)&h, bytes));
    for (int i = 0; i < n; i++) h[i] = (float)(i % 1000);
    CUdeviceptr d;
    CHECK(cuMemAlloc(&d, bytes));
    CUstream s[4];
    CUevent start, stop, done0, again0;
    for (int i = 0; i < nstreams; i++) CHECK(cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CHECK(cuEventCreate(&stop, CU_EVENT_DEFAULT));
    CHECK(cuEventCreate(&done0, CU_EVENT_DISABLE_TIMING));
    CHECK(cuEventCreate(&again0, CU_EVENT_DISABLE_TIMING));
    CHECK(cuEventRecord(start, s[0]));
    float factor = 3.0f;
    for (int i = 0; i < nstreams; i++) {
        CUdeviceptr part = d + (size_t)i * chunk * sizeof(float);
        float *hp = h + (size_t)i * chunk;
        CHECK(cuMemcpyHtoDAsync(part, hp, chunk * sizeof(float), s[i]));
        void *args[] = {&part, &factor, (void *)&chunk};
        CHECK(cuLaunchKernel(f, chunk / 256, 1, 1, 256, 1, 1, 0, s[i], args, NULL));
        if (i == 0) CHECK(cuEventRecord(done0, s[0]));
    }
    /* Stream 1 runs a second pass over chunk 0 once stream 0 is done with it. */
    CHECK(cuStreamWaitEvent(s[1], done0, 0));
    void *again[] = {&d, &factor, (void *)&chunk};
    CHECK(cuLaunchKernel(f, chunk / 256, 1, 1, 256, 1, 1, 0, s[1], again, NULL));
    /* Chunk 0 goes back to the host only after that second pass. */
    CHECK(cuEventRecord(again0, s[1]));
    CHECK(cuStreamWaitEvent(s[0], again0, 0));
    for (int i = 0; i < nstreams; i++) {
        CUdeviceptr part = d + (size_t)i * chunk * sizeof(float);
        CHECK(cuMemcpyDtoHAsync(h + (size_t)i * chunk, part, chunk * sizeof(float), s[i]));
    }
    CHECK(cuEventRecord(stop, s[1]));
    for (int i = 0; i < nstreams; i++) CHECK(cuStreamSynchronize(s[i]));
    CHECK(cuEventSynchronize(stop));
    CUresult q = cuEventQuery(stop);
    float ms = -1;
    CHECK(cuEventElapsedTime(&ms, start, stop));
    int bad = 0;
    for (int i = 0; i < n; i++) {
        float x = (float)(i % 1000) * 3.0f + 1.0f;
        if (i < chunk) x = x * 3.0f + 1.0f;
        if (h[i] != x) bad++;
    }
    printf("streams=%d n=%d mismatches=%d checksum=%016llx query=%d elapsed_positive=%d\n",
           nstreams, n, bad, checksum(h, n), (int)q, ms > 0);
    for (int i = 0; i < nstreams; i++) CHECK(cuStreamDestroy(s[i]));
    CHECK(cuEventDestroy(start));
    CHECK(cuEventDestroy(stop));
    CHECK(cuEventDestroy(done0));
    CHECK(cuEventDestroy(again0));
    CHECK(cuMemFree(d));
    CHECK(cuMemFreeHost(h));
    CHECK(cuCtxDestroy(ctx));
    printf("ok\n");
    return 0;
}
