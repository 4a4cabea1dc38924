/* Vector add through the driver API; prints device facts and a checksum. */
#include "common.h"

int main(int argc, char **argv) {
    const char *ptx = argc > 1 ? argv[1] : "kernels.ptx";
    CUdevice dev;
    CUmodule mod;
    setup(&dev, ptx, &mod);
    char name[256];
    int major, minor, count, version, sms;
    size_t total;
    CHECK(cuDeviceGetCount(&count));
    CHECK(cuDeviceGetName(name, sizeof name, dev));
    CHECK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    CHECK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    CHECK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    CHECK(cuDeviceTotalMem(&total, dev));
    CHECK(cuDriverGetVersion(&version));
    printf("devices %d: %s, sm_%d%d, %d SMs, %zu MiB\n", count, name, major, minor, sms, total >> 20);

    const int n = 1 << 20;
    size_t bytes = n * sizeof(float);
    float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
    for (int i = 0; i < n; i++) { a[i] = i * 0.5f; b[i] = 1.0f / (i + 1); }
    CUdeviceptr da, db, dc;
    CHECK(cuMemAlloc(&da, bytes));
    CHECK(cuMemAlloc(&db, bytes));
    CHECK(cuMemAlloc(&dc, bytes));
    CHECK(cuMemcpyHtoD(da, a, bytes));
    CHECK(cuMemcpyHtoD(db, b, bytes));
    CUfunction f;
    CHECK(cuModuleGetFunction(&f, mod, "vec_add"));
    int threads;
    CHECK(cuFuncGetAttribute(&threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
    void *args[] = {&da, &db, &dc, (void *)&n};
    CHECK(cuLaunchKernel(f, (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemcpyDtoH(c, dc, bytes));
    int bad = 0;
    for (int i = 0; i < n; i++) if (c[i] != a[i] + b[i]) bad++;
    printf("vec_add n=%d mismatches=%d checksum=%016llx max_threads=%d\n", n, bad, checksum(c, n), threads);

    /* Memset and device-to-device copy. */
    CHECK(cuMemsetD32(dc, 0x3f800000u, n)); /* 1.0f */
    CHECK(cuMemcpyDtoD(da, dc, bytes));
    CHECK(cuMemcpyDtoH(a, da, bytes));
    printf("memset+dtod checksum=%016llx\n", checksum(a, n));

    /* Errors a program may rely on. */
    CUdeviceptr bogus = dc + (64ull << 30);
    CUresult r = cuMemcpyDtoH(a, bogus, 16);
    const char *s = NULL;
    cuGetErrorName(r, &s);
    printf("copy from an unallocated address: %s\n", r == CUDA_SUCCESS ? "accepted" : "refused");
    CUfunction missing;
    r = cuModuleGetFunction(&missing, mod, "no_such_kernel");
    cuGetErrorName(r, &s);
    printf("missing kernel: %s\n", s);

    CHECK(cuMemFree(da));
    CHECK(cuMemFree(db));
    CHECK(cuMemFree(dc));
    CHECK(cuModuleUnload(mod));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    free(a); free(b); free(c);
    printf("ok\n");
    return 0;
}
