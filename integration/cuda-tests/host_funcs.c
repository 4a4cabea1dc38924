/* Host functions in stream order: cuLaunchHostFunc and cuStreamAddCallback
 * read page-locked memory that an asynchronous copy before them on the
 * stream filled (it must be there when they run), and work after them
 * must not have started. Also what streams report of their flags,
 * priority (asked beyond the device's range: clamped) and context. */
#include "common.h"

#define N (1 << 20)

struct seen {
    const float *host;
    float first, last;
    int calls, status;
};

static void CUDA_CB host_fn(void *data) {
    struct seen *s = data;
    s->first = s->host[0];
    s->last = s->host[N - 1];
    s->calls++;
}

static void CUDA_CB callback(CUstream stream, CUresult status, void *data) {
    struct seen *s = data;
    (void)stream;
    s->status = (int)status;
    host_fn(data);
}

int main(int argc, char **argv) {
    const char *image = argc > 1 ? argv[1] : "kernels.ptx";
    CUdevice dev;
    CUmodule mod;
    CUcontext ctx = setup(&dev, image, &mod);
    CUfunction f;
    CHECK(cuModuleGetFunction(&f, mod, "scale"));
    size_t bytes = N * sizeof(float);
    CUdeviceptr d;
    float *h1, *h2;
    CHECK(cuMemAlloc(&d, bytes));
    CHECK(cuMemAllocHost((void **)&h1, bytes));
    CHECK(cuMemAllocHost((void **)&h2, bytes));
    for (int i = 0; i < N; i++) h1[i] = (float)(i % 100);
    int least, greatest;
    CHECK(cuCtxGetStreamPriorityRange(&least, &greatest));
    CUstream s, b;
    CHECK(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, greatest - 10));
    CHECK(cuStreamCreate(&b, CU_STREAM_DEFAULT));
    CHECK(cuMemcpyHtoDAsync(d, h1, bytes, s));
    float two = 2.0f;
    int n = N;
    void *args[] = {&d, &two, &n};
    CHECK(cuLaunchKernel(f, N / 256, 1, 1, 256, 1, 1, 0, s, args, NULL));
    CHECK(cuMemcpyDtoHAsync(h1, d, bytes, s));
    struct seen a = {h1, -1, -1, 0, -1};
    CHECK(cuLaunchHostFunc(s, host_fn, &a));
    CHECK(cuLaunchKernel(f, N / 256, 1, 1, 256, 1, 1, 0, s, args, NULL));
    CHECK(cuMemcpyDtoHAsync(h2, d, bytes, s));
    struct seen c = {h2, -1, -1, 0, -1};
    CHECK(cuStreamAddCallback(s, callback, &c, 0));
    CHECK(cuStreamSynchronize(s));
    printf("host_func calls=%d first=%.1f last=%.1f\n", a.calls, a.first, a.last);
    printf("callback calls=%d status=%d first=%.1f last=%.1f\n", c.calls, c.status, c.first,
           c.last);
    unsigned flags_s, flags_b;
    int prio_s, prio_b;
    CUcontext ctx_s;
    CHECK(cuStreamGetFlags(s, &flags_s));
    CHECK(cuStreamGetFlags(b, &flags_b));
    CHECK(cuStreamGetPriority(s, &prio_s));
    CHECK(cuStreamGetPriority(b, &prio_b));
    CHECK(cuStreamGetCtx(s, &ctx_s));
    printf("flags=%u,%u priority=%s,%s ctx_same=%d\n", flags_s, flags_b,
           prio_s == greatest ? "greatest" : "other", prio_b == least ? "least" : "other",
           ctx_s == ctx);
    CHECK(cuStreamDestroy(s));
    CHECK(cuStreamDestroy(b));
    CHECK(cuMemFreeHost(h1));
    CHECK(cuMemFreeHost(h2));
    CHECK(cuMemFree(d));
    printf("ok\n");
    return 0;
}
