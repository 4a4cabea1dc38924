/* Two streams kept busy while a checkpoint is taken: each iteration puts
 * many kernels and an asynchronous copy to page-locked memory on two
 * non-blocking streams, makes sure they were sent (a query), prints
 * "PROGRESS i" while they still run, and only then waits for them. A
 * checkpoint taken after a PROGRESS line finds both streams busy; the run
 * restored from it must print exactly what a native run prints.
 * Usage: checkpoint_streams IMAGE [ITERATIONS] [PAUSE_MS] */
#include <unistd.h>

#include "common.h"

#define STREAMS 2

static char *read_file(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) { perror(path); exit(1); }
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *data = calloc(1, len + 1);
    if (fread(data, 1, len, fp) != (size_t)len) { perror("read"); exit(1); }
    fclose(fp);
    return data;
}

int main(int argc, char **argv) {
    const char *image = argc > 1 ? argv[1] : "kernels.ptx";
    int iterations = argc > 2 ? atoi(argv[2]) : 20;
    int pause_ms = argc > 3 ? atoi(argv[3]) : 20;
    CUdevice dev;
    CUmodule mod;
    setup(&dev, NULL, NULL);
    CHECK(cuModuleLoadData(&mod, read_file(image)));
    CUfunction scale;
    CHECK(cuModuleGetFunction(&scale, mod, "scale"));
    /* x = x * 1 + 1 per pass stays exact in floats below 2^24. */
    const int n = 8 << 20, passes = 1000, sample = 4096;
    size_t bytes = (size_t)n * sizeof(float);
    CUstream s[STREAMS];
    CUdeviceptr x[STREAMS];
    float *h[STREAMS];
    float *init = malloc(bytes);
    for (int k = 0; k < STREAMS; k++) {
        CHECK(cuStreamCreate(&s[k], CU_STREAM_NON_BLOCKING));
        CHECK(cuMemAlloc(&x[k], bytes));
        CHECK(cuMemAllocHost((void **)&h[k], sample * sizeof(float)));
        for (int i = 0; i < n; i++) init[i] = (float)((i * (k + 3)) % 101);
        CHECK(cuMemcpyHtoD(x[k], init, bytes));
    }
    float one = 1.0f;
    unsigned blocks = (n + 255) / 256;
    for (int it = 0; it < iterations; it++) {
        for (int k = 0; k < STREAMS; k++) {
            void *args[] = {&x[k], &one, (void *)&n};
            for (int p = 0; p < passes; p++)
                CHECK(cuLaunchKernel(scale, blocks, 1, 1, 256, 1, 1, 0, s[k], args, NULL));
            CHECK(cuMemcpyDtoHAsync(h[k], x[k] + (size_t)it * sample * sizeof(float),
                                    sample * sizeof(float), s[k]));
        }
        /* Sends the work (through vgpu the launches are batched until a
         * call needs the device); the answer depends on timing. */
        (void)cuStreamQuery(s[0]);
        printf("PROGRESS %d\n", it + 1);
        fflush(stdout);
        usleep(pause_ms * 1000);
        for (int k = 0; k < STREAMS; k++) CHECK(cuStreamSynchronize(s[k]));
        if (it % 5 == 4)
            printf("SAMPLE %d %.1f %.1f %016llx %016llx\n", it + 1, h[0][7], h[1][7],
                   checksum(h[0], sample), checksum(h[1], sample));
    }
    for (int k = 0; k < STREAMS; k++) {
        CHECK(cuMemcpyDtoH(init, x[k], bytes));
        printf("RESULT stream %d checksum=%016llx x[12345]=%.1f\n", k, checksum(init, n),
               init[12345]);
        CHECK(cuStreamDestroy(s[k]));
        CHECK(cuMemFree(x[k]));
        CHECK(cuMemFreeHost(h[k]));
    }
    free(init);
    printf("ok\n");
    return 0;
}
