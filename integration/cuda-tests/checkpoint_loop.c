/* A loop over device buffers that a checkpoint interrupts: each iteration
 * scales one buffer, adds two, copies the sum back on a non-blocking stream,
 * counts threads in a __device__ global and waits on an event. Prints
 * "PROGRESS i" after each iteration (with a sample of the data every fifth)
 * and the checksums at the end, so a run through vgpu whose backend was
 * checkpointed, stopped and restarted from the checkpoint must print exactly
 * what a native run prints.
 * Usage: checkpoint_loop IMAGE [ITERATIONS] [PAUSE_MS] */
#include <unistd.h>

#include "common.h"

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
    int iterations = argc > 2 ? atoi(argv[2]) : 30;
    int pause_ms = argc > 3 ? atoi(argv[3]) : 100;
    CUdevice dev;
    CUmodule mod;
    setup(&dev, NULL, NULL);
    /* A context limit the restored context must have again. */
    CHECK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 48 << 20));
    CHECK(cuModuleLoadData(&mod, read_file(image)));
    CUfunction vec_add, scale, use_globals;
    CHECK(cuModuleGetFunction(&vec_add, mod, "vec_add"));
    CHECK(cuModuleGetFunction(&scale, mod, "scale"));
    CHECK(cuModuleGetFunction(&use_globals, mod, "use_globals"));
    CUdeviceptr dtable, dcounter;
    size_t table_size, counter_size;
    CHECK(cuModuleGetGlobal(&dtable, &table_size, mod, "table"));
    CHECK(cuModuleGetGlobal(&dcounter, &counter_size, mod, "counter"));
    float table[256];
    for (int i = 0; i < 256; i++) table[i] = i * 0.25f;
    int zero = 0;
    CHECK(cuMemcpyHtoD(dtable, table, sizeof table));
    CHECK(cuMemcpyHtoD(dcounter, &zero, sizeof zero));

    const int n = 1 << 20, gn = 4096;
    size_t bytes = (size_t)n * sizeof(float);
    CUdeviceptr a, b, c, g;
    CHECK(cuMemAlloc(&a, bytes));
    CHECK(cuMemAlloc(&b, bytes));
    CHECK(cuMemAlloc(&c, bytes));
    CHECK(cuMemAlloc(&g, gn * sizeof(float)));
    float *h = malloc(bytes);
    for (int i = 0; i < n; i++) h[i] = (i % 1000) * 0.001f;
    CHECK(cuMemcpyHtoD(a, h, bytes));
    for (int i = 0; i < n; i++) h[i] = (i % 7) * 0.5f;
    CHECK(cuMemcpyHtoD(b, h, bytes));
    CHECK(cuMemsetD32(c, 0, n));
    CUstream s;
    CUevent done;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&done, CU_EVENT_DEFAULT));

    float f = 0.5f;
    unsigned blocks = (n + 255) / 256;
    for (int it = 0; it < iterations; it++) {
        void *scale_args[] = {&a, &f, (void *)&n};
        CHECK(cuLaunchKernel(scale, blocks, 1, 1, 256, 1, 1, 0, s, scale_args, NULL));
        void *add_args[] = {&a, &b, &c, (void *)&n};
        CHECK(cuLaunchKernel(vec_add, blocks, 1, 1, 256, 1, 1, 0, s, add_args, NULL));
        CHECK(cuMemcpyDtoDAsync(b, c, bytes, s));
        void *global_args[] = {&g, (void *)&gn};
        CHECK(cuLaunchKernel(use_globals, gn / 128, 1, 1, 128, 1, 1, 0, s, global_args, NULL));
        CHECK(cuEventRecord(done, s));
        CHECK(cuEventSynchronize(done));
        if (it % 5 == 4) {
            float sample;
            int counter;
            CHECK(cuMemcpyDtoH(&sample, c + 12345 * sizeof(float), sizeof sample));
            CHECK(cuMemcpyDtoH(&counter, dcounter, sizeof counter));
            printf("PROGRESS %d sample=%.6f counter=%d\n", it + 1, sample, counter);
        } else {
            printf("PROGRESS %d\n", it + 1);
        }
        fflush(stdout);
        usleep(pause_ms * 1000);
    }
    CHECK(cuStreamSynchronize(s));
    CHECK(cuEventQuery(done));
    CHECK(cuMemcpyDtoH(h, c, bytes));
    unsigned long long hc = checksum(h, n);
    CHECK(cuMemcpyDtoH(h, g, gn * sizeof(float)));
    unsigned long long hg = checksum(h, gn);
    int counter = -1;
    CHECK(cuMemcpyDtoH(&counter, dcounter, sizeof counter));
    printf("RESULT c=%016llx g=%016llx counter=%d (expect %d)\n", hc, hg, counter,
           gn * iterations);
    CHECK(cuEventDestroy(done));
    CHECK(cuStreamDestroy(s));
    CHECK(cuMemFree(a));
    CHECK(cuMemFree(b));
    CHECK(cuMemFree(c));
    CHECK(cuMemFree(g));
    CHECK(cuModuleUnload(mod));
    free(h);
    size_t heap = 0;
    CHECK(cuCtxGetLimit(&heap, CU_LIMIT_MALLOC_HEAP_SIZE));
    printf("malloc heap limit %zu\n", heap);
    printf("ok\n");
    return 0;
}
