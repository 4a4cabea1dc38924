/* Two programs, two front-ends (through vgpu: two worker processes).
 *   cross_vm hold FILE   allocates a buffer with a secret pattern, writes
 *                        its device address to FILE, and computes on it
 *                        until FILE.done appears; then checks its result.
 *   cross_vm peek FILE   reads that address with its own kernel (its own
 *                        pointer plus an offset) and reports what it got.
 * Natively each process has its own GPU address space; through vgpu each
 * front-end has its own worker process, so the same must hold: the peek
 * faults or reads something else, never the secret, and the holder's
 * result is exact. Exit status 0 when that holds. */
#include <unistd.h>
#include "common.h"

#define N (1 << 18)

static unsigned secret_of(unsigned i) { return 0x5ec00000u ^ (i * 2654435761u); }

static int hold(const char *file, const char *image) {
    CUdevice dev;
    CUmodule mod;
    setup(&dev, image, &mod);
    CUfunction bump;
    CHECK(cuModuleGetFunction(&bump, mod, "bump"));
    unsigned *h = malloc(N * sizeof *h);
    for (unsigned i = 0; i < N; i++) h[i] = secret_of(i);
    CUdeviceptr x;
    CHECK(cuMemAlloc(&x, N * sizeof *h));
    CHECK(cuMemcpyHtoD(x, h, N * sizeof *h));
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", file);
    FILE *f = fopen(tmp, "w");
    fprintf(f, "%llx\n", (unsigned long long)x);
    fclose(f);
    rename(tmp, file);
    char done[4096];
    snprintf(done, sizeof done, "%s.done", file);
    int n = N, steps = 0;
    void *args[] = {&x, &n};
    double until = now_s() + 60;
    while (access(done, F_OK) != 0 && now_s() < until) {
        CHECK(cuLaunchKernel(bump, N / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
        CHECK(cuCtxSynchronize());
        steps++;
        usleep(2000);
    }
    CHECK(cuMemcpyDtoH(h, x, N * sizeof *h));
    int bad = 0;
    for (unsigned i = 0; i < N; i++) bad += h[i] != secret_of(i) + (unsigned)steps;
    printf("hold: %s after %s steps of computing\n", bad ? "WRONG RESULT" : "exact result",
           steps > 0 ? "some" : "no");
    return bad != 0 || steps == 0;
}

static int peek(const char *file, const char *image) {
    FILE *f = NULL;
    for (int i = 0; i < 600 && !(f = fopen(file, "r")); i++) usleep(100000);
    if (!f) { fprintf(stderr, "no address in %s\n", file); return 2; }
    unsigned long long theirs = 0;
    if (fscanf(f, "%llx", &theirs) != 1) return 2;
    fclose(f);
    CUdevice dev;
    CUmodule mod;
    setup(&dev, image, &mod);
    CUfunction peek;
    CHECK(cuModuleGetFunction(&peek, mod, "peek"));
    CUdeviceptr out;
    CHECK(cuMemAlloc(&out, 16 * sizeof(unsigned)));
    unsigned long long delta = theirs - (unsigned long long)out;
    unsigned lo = (unsigned)delta, hi = (unsigned)(delta >> 32);
    void *args[] = {&out, &out, &lo, &hi};
    CUresult launch = cuLaunchKernel(peek, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL);
    CUresult sync = cuCtxSynchronize();
    unsigned seen[16] = {0};
    CUresult copy = cuMemcpyDtoH(seen, out, sizeof seen);
    const char *s1 = "?", *s2 = "?", *s3 = "?";
    cuGetErrorName(launch, &s1);
    cuGetErrorName(sync, &s2);
    cuGetErrorName(copy, &s3);
    int leaked = launch == CUDA_SUCCESS && sync == CUDA_SUCCESS && copy == CUDA_SUCCESS;
    /* The holder adds one per step: its secret plus a small count. */
    for (unsigned i = 0; leaked && i < 16; i++) leaked = seen[i] - secret_of(i) < 1000000u;
    printf("peek: launch=%s sync=%s copy=%s: %s\n", s1, s2, s3,
           leaked ? "READ THE OTHER PROGRAM'S SECRET" : "the other program's memory is out of reach");
    return leaked;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: cross_vm hold|peek FILE [IMAGE]\n"); return 2; }
    const char *image = argc > 3 ? argv[3] : "kernels.ptx";
    if (!strcmp(argv[1], "hold")) return hold(argv[2], image);
    if (!strcmp(argv[1], "peek")) return peek(argv[2], image);
    return 2;
}
