/* Device-to-host copies that return before their data arrives, read only
 * where CUDA says the data is there: after a stream synchronization, an
 * event synchronization reached through another stream's wait, a query
 * that said CUDA_SUCCESS, a context synchronization, and a synchronous
 * copy on the legacy stream. Destinations are cuMemAllocHost memory,
 * cuMemHostRegister'ed memory and pageable memory (whose Async copies
 * CUDA completes before they return). Also checks what idle streams and
 * completed events answer to queries. */
#include "common.h"

#define N (1 << 20)

static int check(const char *what, const float *h, float expect) {
    int bad = 0;
    for (int i = 0; i < N; i++)
        if (h[i] != expect + (float)(i % 7)) bad++;
    printf("%s mismatches=%d\n", what, bad);
    return bad;
}

/* Device buffer i holds base + i % 7 after `scale` (x*1+1) ran `runs` times. */
static void prepare(CUfunction f, CUdeviceptr d, float *stage, float base, CUstream s) {
    for (int i = 0; i < N; i++) stage[i] = base - 1.0f + (float)(i % 7);
    CHECK(cuMemcpyHtoDAsync(d, stage, N * sizeof(float), s));
    float one = 1.0f;
    int n = N;
    void *args[] = {&d, &one, &n};
    CHECK(cuLaunchKernel(f, N / 256, 1, 1, 256, 1, 1, 0, s, args, NULL));
}

int main(int argc, char **argv) {
    const char *image = argc > 1 ? argv[1] : "kernels.ptx";
    CUdevice dev;
    CUmodule mod;
    setup(&dev, image, &mod);
    CUfunction f;
    CHECK(cuModuleGetFunction(&f, mod, "scale"));
    size_t bytes = N * sizeof(float);
    CUdeviceptr d[3];
    for (int i = 0; i < 3; i++) CHECK(cuMemAlloc(&d[i], bytes));
    float *pinned, *stage = malloc(bytes), *pageable = malloc(bytes);
    float *registered = NULL;
    CHECK(cuMemAllocHost((void **)&pinned, bytes));
    if (posix_memalign((void **)&registered, 4096, bytes)) return 1;
    CHECK(cuMemHostRegister(registered, bytes, 0));
    CUstream a, b;
    CHECK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CUevent ea, eb;
    CHECK(cuEventCreate(&ea, CU_EVENT_DISABLE_TIMING));
    CHECK(cuEventCreate(&eb, CU_EVENT_DISABLE_TIMING));
    int bad = 0;

    /* 1: stream synchronization. */
    prepare(f, d[0], stage, 10.0f, a);
    CHECK(cuMemcpyDtoHAsync(pinned, d[0], bytes, a));
    CHECK(cuStreamSynchronize(a));
    bad += check("stream_sync", pinned, 10.0f);

    /* 2: an event of stream b, which waited for stream a's copy. */
    prepare(f, d[1], stage, 20.0f, a);
    CHECK(cuMemcpyDtoHAsync(registered, d[1], bytes, a));
    CHECK(cuEventRecord(ea, a));
    CHECK(cuStreamWaitEvent(b, ea, 0));
    CHECK(cuEventRecord(eb, b));
    CHECK(cuEventSynchronize(eb));
    bad += check("event_via_wait", registered, 20.0f);

    /* 3: a query loop until the stream says it is done. */
    prepare(f, d[2], stage, 30.0f, b);
    CHECK(cuMemcpyDtoHAsync(pinned, d[2], bytes, b));
    CUresult q;
    while ((q = cuStreamQuery(b)) == CUDA_ERROR_NOT_READY) {
    }
    CHECK(q);
    bad += check("stream_query", pinned, 30.0f);

    /* 4: an event query loop. */
    prepare(f, d[0], stage, 40.0f, a);
    CHECK(cuMemcpyDtoHAsync(registered, d[0], bytes, a));
    CHECK(cuEventRecord(ea, a));
    while ((q = cuEventQuery(ea)) == CUDA_ERROR_NOT_READY) {
    }
    CHECK(q);
    bad += check("event_query", registered, 40.0f);

    /* 5: context synchronization, two streams at once. */
    prepare(f, d[1], stage, 50.0f, a);
    prepare(f, d[2], stage, 60.0f, b);
    CHECK(cuMemcpyDtoHAsync(pinned, d[1], bytes, a));
    CHECK(cuMemcpyDtoHAsync(registered, d[2], bytes, b));
    CHECK(cuCtxSynchronize());
    bad += check("ctx_sync_a", pinned, 50.0f);
    bad += check("ctx_sync_b", registered, 60.0f);

    /* 6: the legacy stream; a synchronous copy after it waits for it. */
    prepare(f, d[0], stage, 70.0f, NULL);
    CHECK(cuMemcpyDtoHAsync(pinned, d[0], bytes, NULL));
    CHECK(cuMemcpyDtoH(stage, d[0], sizeof(float)));
    bad += check("legacy_then_sync_copy", pinned, 70.0f);

    /* 7: pageable memory: complete when the call returns. */
    prepare(f, d[1], stage, 80.0f, a);
    CHECK(cuMemcpyDtoHAsync(pageable, d[1], bytes, a));
    bad += check("pageable_async", pageable, 80.0f);

    /* Queries of an idle stream and of completed and unrecorded events. */
    CHECK(cuCtxSynchronize());
    CUevent never;
    CHECK(cuEventCreate(&never, CU_EVENT_DEFAULT));
    printf("idle stream query=%d event query=%d never recorded=%d\n", (int)cuStreamQuery(a),
           (int)cuEventQuery(ea), (int)cuEventQuery(never));
    CUresult first = cuMemHostUnregister(registered);
    CUresult again = cuMemHostUnregister(registered);
    printf("unregister=%d again=%d\n", (int)first, (int)again);

    CHECK(cuEventDestroy(never));
    CHECK(cuEventDestroy(ea));
    CHECK(cuEventDestroy(eb));
    CHECK(cuStreamDestroy(a));
    CHECK(cuStreamDestroy(b));
    for (int i = 0; i < 3; i++) CHECK(cuMemFree(d[i]));
    CHECK(cuMemFreeHost(pinned));
    free(registered);
    free(stage);
    free(pageable);
    printf(bad ? "FAILED\n" : "ok\n");
    return bad != 0;
}
