/* Shared helpers of the CUDA driver-API test programs. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                          \
    do {                                                                     \
        CUresult r_ = (call);                                                \
        if (r_ != CUDA_SUCCESS) {                                            \
            const char *name_ = NULL;                                        \
            cuGetErrorName(r_, &name_);                                      \
            fprintf(stderr, "%s:%d: %s failed: %d (%s)\n", __FILE__,         \
                    __LINE__, #call, (int)r_, name_ ? name_ : "?");          \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Initializes the driver, makes a context current, loads `module_path`. */
static inline CUcontext setup(CUdevice *dev, const char *module_path, CUmodule *mod) {
    CUcontext ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, *dev));
    CHECK(cuCtxSetCurrent(ctx));
    if (module_path) CHECK(cuModuleLoad(mod, module_path));
    return ctx;
}

/* Order-sensitive checksum of floats (exact: compares bit patterns). */
static inline unsigned long long checksum(const float *x, size_t n) {
    unsigned long long h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        unsigned int b;
        memcpy(&b, &x[i], 4);
        h = (h ^ b) * 1099511628211ull;
    }
    return h;
}
