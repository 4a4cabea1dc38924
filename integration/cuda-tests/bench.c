/* Native vs vgpu figures: call round trip, kernel launch rate, and
 * host<->device bandwidth from pageable (malloc) and page-locked
 * (cuMemAllocHost) memory, and the cost of querying an idle stream. Prints one "bench key value unit" line each. */
#include "common.h"

static void bandwidth(const char *what, void *host, CUdeviceptr dev, size_t bytes, int iters) {
    double t = now_s();
    for (int i = 0; i < iters; i++) CHECK(cuMemcpyHtoD(dev, host, bytes));
    CHECK(cuCtxSynchronize());
    double up = bytes * (double)iters / (now_s() - t) / 1e9;
    t = now_s();
    for (int i = 0; i < iters; i++) CHECK(cuMemcpyDtoH(host, dev, bytes));
    double down = bytes * (double)iters / (now_s() - t) / 1e9;
    printf("bench htod_%s %.2f GB/s\n", what, up);
    printf("bench dtoh_%s %.2f GB/s\n", what, down);
}

int main(int argc, char **argv) {
    const char *image = argc > 1 ? argv[1] : "kernels.ptx";
    CUdevice dev;
    CUmodule mod;
    setup(&dev, image, &mod);
    CUfunction empty, scale;
    CHECK(cuModuleGetFunction(&empty, mod, "empty"));
    CHECK(cuModuleGetFunction(&scale, mod, "scale"));

    /* A synchronize with nothing pending: the driver answers it from its
     * own bookkeeping, and so does vgpu's library once a synchronization
     * covered all the work put before it. */
    const int calls = 20000;
    CHECK(cuCtxSynchronize());
    double t = now_s();
    for (int i = 0; i < calls; i++) CHECK(cuCtxSynchronize());
    printf("bench idle_sync %.2f us\n", (now_s() - t) / calls * 1e6);

    /* A synchronize that waits for work (one empty launch before each):
     * through vgpu, a round trip to the backend. */
    CHECK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    CHECK(cuCtxSynchronize());
    t = now_s();
    for (int i = 0; i < calls / 4; i++) {
        CHECK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
        CHECK(cuCtxSynchronize());
    }
    printf("bench launch_then_sync %.2f us\n", (now_s() - t) / (calls / 4) * 1e6);

    /* Launch rate: many small launches, then one synchronize. */
    const int launches = 200000;
    for (int i = 0; i < 1000; i++) CHECK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    CHECK(cuCtxSynchronize());
    t = now_s();
    for (int i = 0; i < launches; i++) CHECK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    CHECK(cuCtxSynchronize());
    printf("bench launch_rate_noargs %.0f launches/s\n", launches / (now_s() - t));
    CUdeviceptr x;
    int n = 1024;
    float f = 1.0f;
    CHECK(cuMemAlloc(&x, n * sizeof(float)));
    void *args[] = {&x, &f, &n};
    t = now_s();
    for (int i = 0; i < launches; i++) CHECK(cuLaunchKernel(scale, 4, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    CHECK(cuCtxSynchronize());
    printf("bench launch_rate_3args %.0f launches/s\n", launches / (now_s() - t));

    /* Queries of an idle stream and of a completed event: the driver
     * answers them from its own bookkeeping. */
    CUstream idle;
    CUevent done;
    CHECK(cuStreamCreate(&idle, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
    CHECK(cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, idle, NULL, NULL));
    CHECK(cuEventRecord(done, idle));
    CHECK(cuStreamSynchronize(idle));
    t = now_s();
    for (int i = 0; i < calls; i++) CHECK(cuStreamQuery(idle));
    printf("bench stream_query_idle %.3f us\n", (now_s() - t) / calls * 1e6);
    t = now_s();
    for (int i = 0; i < calls; i++) CHECK(cuEventQuery(done));
    printf("bench event_query_done %.3f us\n", (now_s() - t) / calls * 1e6);
    CHECK(cuEventDestroy(done));
    CHECK(cuStreamDestroy(idle));

    size_t sizes[] = {1 << 20, 4 << 20, 16 << 20, 64 << 20};
    for (int k = 0; k < 4; k++) {
        size_t bytes = sizes[k];
        int iters = (int)((1024ull << 20) / bytes) + 10;
        CUdeviceptr d;
        CHECK(cuMemAlloc(&d, bytes));
        void *pageable = malloc(bytes);
        memset(pageable, 1, bytes);
        void *pinned;
        CHECK(cuMemAllocHost(&pinned, bytes));
        memset(pinned, 2, bytes);
        char tag[64];
        snprintf(tag, sizeof tag, "pageable_%zuMiB", bytes >> 20);
        bandwidth(tag, pageable, d, bytes, iters);
        snprintf(tag, sizeof tag, "pinned_%zuMiB", bytes >> 20);
        bandwidth(tag, pinned, d, bytes, iters);
        CHECK(cuMemFreeHost(pinned));
        free(pageable);
        CHECK(cuMemFree(d));
    }
    printf("ok\n");
    return 0;
}
