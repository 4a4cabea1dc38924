/* Copy/compute overlap: two non-blocking streams, each copy-in -> kernel
 * -> copy-out over its own half of a pinned buffer. Each stream's part is
 * first timed alone (one after the other), then both run together; where
 * the driver overlaps a copy of one stream with the kernel or the other
 * direction's copy of the other, the together time is below the sum of the
 * parts. Prints the results (compared byte for byte with a native run) on
 * stdout and the timings as JSON in the file named by argv[2] (default
 * overlap.json): timings are a benchmark, never a pass condition. */
#include "common.h"

#define HALVES 2

struct part {
    CUstream stream;
    CUdeviceptr dev;
    float *host;
};

/* The kernel runs `passes` times over the half so that it lasts about as
 * long as the copies: overlap then has something to hide. */
static void enqueue(CUfunction f, struct part *p, int n, int passes) {
    float factor = 1.0f;
    CHECK(cuMemcpyHtoDAsync(p->dev, p->host, (size_t)n * sizeof(float), p->stream));
    void *args[] = {&p->dev, &factor, &n};
    for (int k = 0; k < passes; k++)
        CHECK(cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, p->stream, args, NULL));
    CHECK(cuMemcpyDtoHAsync(p->host, p->dev, (size_t)n * sizeof(float), p->stream));
}

static void fill(struct part *parts, int n) {
    for (int h = 0; h < HALVES; h++)
        for (int i = 0; i < n; i++) parts[h].host[i] = (float)((i + h) % 977);
}

/* Every element went through `passes` kernels of x*1+1. */
static int mismatches(struct part *parts, int n, int passes) {
    int bad = 0;
    for (int h = 0; h < HALVES; h++)
        for (int i = 0; i < n; i++)
            if (parts[h].host[i] != (float)((i + h) % 977) + (float)passes) bad++;
    return bad;
}

int main(int argc, char **argv) {
    const char *image = argc > 1 ? argv[1] : "kernels.ptx";
    const char *json = argc > 2 ? argv[2] : "overlap.json";
    CUdevice dev;
    CUmodule mod;
    setup(&dev, image, &mod);
    CUfunction f;
    CHECK(cuModuleGetFunction(&f, mod, "scale"));
    const int n = 8 << 20, passes = 16, rounds = 5;
    struct part parts[HALVES];
    for (int h = 0; h < HALVES; h++) {
        CHECK(cuStreamCreate(&parts[h].stream, CU_STREAM_NON_BLOCKING));
        CHECK(cuMemAlloc(&parts[h].dev, (size_t)n * sizeof(float)));
        CHECK(cuMemAllocHost((void **)&parts[h].host, (size_t)n * sizeof(float)));
    }
    /* Warm up: module, streams and copy engines. */
    fill(parts, n);
    for (int h = 0; h < HALVES; h++) enqueue(f, &parts[h], n, passes);
    CHECK(cuCtxSynchronize());

    double alone = 1e30, together = 1e30;
    int bad_alone = 0, bad_together = 0;
    for (int r = 0; r < rounds; r++) {
        fill(parts, n);
        double t = now_s();
        for (int h = 0; h < HALVES; h++) {
            enqueue(f, &parts[h], n, passes);
            CHECK(cuStreamSynchronize(parts[h].stream));
        }
        double a = now_s() - t;
        bad_alone += mismatches(parts, n, passes);

        fill(parts, n);
        t = now_s();
        for (int h = 0; h < HALVES; h++) enqueue(f, &parts[h], n, passes);
        for (int h = 0; h < HALVES; h++) CHECK(cuStreamSynchronize(parts[h].stream));
        double b = now_s() - t;
        bad_together += mismatches(parts, n, passes);
        if (a < alone) alone = a;
        if (b < together) together = b;
    }
    printf("overlap halves=%d n=%d passes=%d rounds=%d mismatches_alone=%d mismatches_together=%d\n",
           HALVES, n, passes, rounds, bad_alone, bad_together);
    printf("overlap checksum=%016llx %016llx\n", checksum(parts[0].host, n),
           checksum(parts[1].host, n));
    FILE *out = fopen(json, "w");
    if (!out) {
        perror(json);
        return 1;
    }
    fprintf(out,
            "{\"bench\": \"overlap\", \"bytes_per_stream\": %zu, \"kernel_passes\": %d, "
            "\"rounds\": %d, \"sum_of_parts_ms\": %.3f, \"together_ms\": %.3f, "
            "\"ratio\": %.3f}\n",
            (size_t)n * sizeof(float), passes, rounds, alone * 1e3, together * 1e3,
            together / alone);
    fclose(out);
    for (int h = 0; h < HALVES; h++) {
        CHECK(cuStreamDestroy(parts[h].stream));
        CHECK(cuMemFree(parts[h].dev));
        CHECK(cuMemFreeHost(parts[h].host));
    }
    printf("ok\n");
    return 0;
}
