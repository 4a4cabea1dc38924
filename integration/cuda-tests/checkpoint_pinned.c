/* Synchronous copies through page-locked memory (the signalled path) in a
 * loop a checkpoint interrupts: each iteration copies a page-locked buffer
 * in, scales it on the device and copies it back into another page-locked
 * buffer, in sizes from 100 KiB to 16 MiB. The restored program must print
 * what a native run prints. Usage: checkpoint_pinned IMAGE ITERATIONS PAUSE_MS */
#include "common.h"
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s IMAGE ITERATIONS PAUSE_MS\n", argv[0]);
        return 2;
    }
    CUdevice dev;
    CUmodule mod;
    setup(&dev, argv[1], &mod);
    int iterations = atoi(argv[2]), pause_ms = atoi(argv[3]);
    CUfunction scale;
    CHECK(cuModuleGetFunction(&scale, mod, "scale"));
    size_t most = (16 << 20) / sizeof(float);
    float *in, *out;
    CUdeviceptr x;
    CHECK(cuMemAllocHost((void **)&in, most * sizeof(float)));
    CHECK(cuMemAllocHost((void **)&out, most * sizeof(float)));
    CHECK(cuMemAlloc(&x, most * sizeof(float)));
    size_t counts[] = {25600, 262144, 1048576 + 1024, most};
    float two = 2.0f;
    unsigned long long total = 0;
    for (int it = 0; it < iterations; it++) {
        for (int k = 0; k < 4; k++) {
            int n = (int)counts[k];
            for (int i = 0; i < n; i++) in[i] = (float)((i * (it + k + 3)) % 1009);
            CHECK(cuMemcpyHtoD(x, in, n * sizeof(float)));
            memset(in, 0, n * sizeof(float));
            void *args[] = {&x, &two, &n};
            CHECK(cuLaunchKernel(scale, (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
            CHECK(cuMemcpyDtoH(out, x, n * sizeof(float)));
            total ^= checksum(out, n) + (unsigned long long)k;
        }
        printf("PROGRESS %d\n", it + 1);
        fflush(stdout);
        if (it % 5 == 4) printf("SAMPLE %d %.1f %016llx\n", it + 1, out[7], total);
        usleep(pause_ms * 1000);
    }
    printf("RESULT %016llx\nok\n", total);
    CHECK(cuMemFreeHost(in));
    CHECK(cuMemFreeHost(out));
    CHECK(cuMemFree(x));
    return 0;
}
