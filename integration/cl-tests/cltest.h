/* cltest.h: tiny shared helpers for the vgpu OpenCL test programs.
 *
 * Header-only on purpose: each program is one .c file linked against libc,
 * libm and libOpenCL only, so it builds the same way on the host and for the
 * guest image.
 *
 * Conventions every program follows:
 *   - on success the last line is  "RESULT <name> <fnv1a-64 hex> PASS", exit 0;
 *   - on failure the last line is  "RESULT <name> - FAIL <why>", exit 1;
 *   - workloads print "TIME <name> <seconds>" before RESULT.
 * The checksum is taken over device output bytes, so a native run and a run
 * through the vgpu ICD can be compared byte for byte.
 */
#ifndef CLTEST_H
#define CLTEST_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *cltest_prog = "?";

/* ---- error codes ------------------------------------------------------- */

static inline const char *cltest_err_name(cl_int e)
{
    switch (e) {
#define E(x) case x: return #x;
    E(CL_SUCCESS) E(CL_DEVICE_NOT_FOUND) E(CL_DEVICE_NOT_AVAILABLE)
    E(CL_COMPILER_NOT_AVAILABLE) E(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    E(CL_OUT_OF_RESOURCES) E(CL_OUT_OF_HOST_MEMORY)
    E(CL_PROFILING_INFO_NOT_AVAILABLE) E(CL_MEM_COPY_OVERLAP)
    E(CL_IMAGE_FORMAT_MISMATCH) E(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    E(CL_BUILD_PROGRAM_FAILURE) E(CL_MAP_FAILURE)
    E(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    E(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    E(CL_COMPILE_PROGRAM_FAILURE) E(CL_LINKER_NOT_AVAILABLE)
    E(CL_LINK_PROGRAM_FAILURE) E(CL_DEVICE_PARTITION_FAILED)
    E(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    E(CL_INVALID_VALUE) E(CL_INVALID_DEVICE_TYPE) E(CL_INVALID_PLATFORM)
    E(CL_INVALID_DEVICE) E(CL_INVALID_CONTEXT) E(CL_INVALID_QUEUE_PROPERTIES)
    E(CL_INVALID_COMMAND_QUEUE) E(CL_INVALID_HOST_PTR) E(CL_INVALID_MEM_OBJECT)
    E(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR) E(CL_INVALID_IMAGE_SIZE)
    E(CL_INVALID_SAMPLER) E(CL_INVALID_BINARY) E(CL_INVALID_BUILD_OPTIONS)
    E(CL_INVALID_PROGRAM) E(CL_INVALID_PROGRAM_EXECUTABLE)
    E(CL_INVALID_KERNEL_NAME) E(CL_INVALID_KERNEL_DEFINITION)
    E(CL_INVALID_KERNEL) E(CL_INVALID_ARG_INDEX) E(CL_INVALID_ARG_VALUE)
    E(CL_INVALID_ARG_SIZE) E(CL_INVALID_KERNEL_ARGS)
    E(CL_INVALID_WORK_DIMENSION) E(CL_INVALID_WORK_GROUP_SIZE)
    E(CL_INVALID_WORK_ITEM_SIZE) E(CL_INVALID_GLOBAL_OFFSET)
    E(CL_INVALID_EVENT_WAIT_LIST) E(CL_INVALID_EVENT) E(CL_INVALID_OPERATION)
    E(CL_INVALID_GL_OBJECT) E(CL_INVALID_BUFFER_SIZE) E(CL_INVALID_MIP_LEVEL)
    E(CL_INVALID_GLOBAL_WORK_SIZE) E(CL_INVALID_PROPERTY)
    E(CL_INVALID_IMAGE_DESCRIPTOR) E(CL_INVALID_COMPILER_OPTIONS)
    E(CL_INVALID_LINKER_OPTIONS) E(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef E
    case -69: return "CL_INVALID_PIPE_SIZE";
    case -70: return "CL_INVALID_DEVICE_QUEUE";
    case -71: return "CL_INVALID_SPEC_ID";
    case -72: return "CL_MAX_SIZE_RESTRICTION_EXCEEDED";
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "CL_UNKNOWN_ERROR";
    }
}

/* ---- results ----------------------------------------------------------- */

static inline void cltest_init(const char *name)
{
    cltest_prog = name;
    /* Line-buffered even into a pipe: a crash must not swallow the log. */
    setvbuf(stdout, NULL, _IOLBF, 0);
}

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2), noreturn))
#endif
static inline void cltest_fail(const char *fmt, ...)
{
    va_list ap;
    printf("RESULT %s - FAIL ", cltest_prog);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    exit(1);
}

static inline void cltest_pass(uint64_t checksum)
{
    printf("RESULT %s %016llx PASS\n", cltest_prog, (unsigned long long)checksum);
    fflush(stdout);
    exit(0);
}

#if defined(__GNUC__)
__attribute__((noreturn))
#endif
static inline void cltest_die_cl(const char *file, int line, const char *what, cl_int e)
{
    printf("%s:%d: %s: %s (%d)\n", file, line, what, cltest_err_name(e), (int)e);
    cltest_fail("%s:%d %s", file, line, cltest_err_name(e));
}

/* CL_CHECK(clFoo(...)): any status other than CL_SUCCESS ends the program. */
#define CL_CHECK(expr)                                                     \
    do {                                                                   \
        cl_int cltest_e_ = (expr);                                         \
        if (cltest_e_ != CL_SUCCESS)                                       \
            cltest_die_cl(__FILE__, __LINE__, #expr, cltest_e_);           \
    } while (0)

/* For creators that report through errcode_ret:
 *   cl_int err; cl_mem m = clCreateBuffer(..., &err); CL_CHECK_ERR(err, "buffer"); */
#define CL_CHECK_ERR(err, what)                                            \
    do {                                                                   \
        if ((err) != CL_SUCCESS)                                           \
            cltest_die_cl(__FILE__, __LINE__, what, (err));                \
    } while (0)

/* ---- checksum: 64-bit FNV-1a ------------------------------------------ */

#define CLTEST_FNV_INIT 0xcbf29ce484222325ULL

static inline uint64_t cltest_fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = (const unsigned char *)data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* ---- time -------------------------------------------------------------- */

static inline double cltest_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void cltest_print_time(double seconds)
{
    printf("TIME %s %.6f\n", cltest_prog, seconds);
}

static inline void cltest_sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* ---- options ----------------------------------------------------------- */

/* Value of "-x N" in argv, or def. A malformed or negative value fails. */
static inline long cltest_arg(int argc, char **argv, const char *flag, long def)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], flag) == 0) {
            char *end = NULL;
            long v;
            if (i + 1 >= argc)
                cltest_fail("option %s needs a value", flag);
            v = strtol(argv[i + 1], &end, 0);
            if (end == argv[i + 1] || *end != '\0' || v < 0)
                cltest_fail("bad value for %s: %s", flag, argv[i + 1]);
            return v;
        }
    }
    return def;
}

/* Rejects anything but the given flags (each taking a value) and -h. */
static inline void cltest_args_check(int argc, char **argv, const char *flags, const char *usage)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            printf("usage: %s %s\n", argv[0], usage);
            printf("env: CLTEST_PLATFORM, CLTEST_DEVICE (indices), CLTEST_QUICK=1 (small defaults)\n");
            exit(0);
        }
        if (a[0] == '-' && a[1] != '\0' && a[2] == '\0' && strchr(flags, a[1]) && i + 1 < argc) {
            i++;
            continue;
        }
        cltest_fail("unknown argument %s (usage: %s)", a, usage);
    }
}

static inline int cltest_env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

/* CLTEST_QUICK=1 selects small default sizes (TCG guests). */
static inline int cltest_quick(void) { return cltest_env_flag("CLTEST_QUICK"); }

static inline long cltest_env_index(const char *name)
{
    const char *v = getenv(name);
    char *end = NULL;
    long i;
    if (!v || !*v)
        return 0;
    i = strtol(v, &end, 10);
    if (*end != '\0' || i < 0)
        cltest_fail("bad %s=%s", name, v);
    return i;
}

/* ---- platform, device, context, queue, program -------------------------- */

/* The first platform's first device, unless CLTEST_PLATFORM / CLTEST_DEVICE
 * give other indices. */
static inline void cltest_pick(cl_platform_id *platform, cl_device_id *device)
{
    cl_uint np = 0, nd = 0;
    cl_platform_id plats[16];
    cl_device_id devs[16];
    long pi = cltest_env_index("CLTEST_PLATFORM");
    long di = cltest_env_index("CLTEST_DEVICE");

    CL_CHECK(clGetPlatformIDs(16, plats, &np));
    if (pi >= (long)np || pi >= 16)
        cltest_fail("CLTEST_PLATFORM=%ld but %u platform(s)", pi, np);
    CL_CHECK(clGetDeviceIDs(plats[pi], CL_DEVICE_TYPE_ALL, 16, devs, &nd));
    if (di >= (long)nd || di >= 16)
        cltest_fail("CLTEST_DEVICE=%ld but %u device(s)", di, nd);
    *platform = plats[pi];
    *device = devs[di];
}

typedef struct {
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
} cltest_env;

static inline void cltest_setup(cltest_env *env, cl_command_queue_properties qprops)
{
    cl_int err;
    char name[256] = "";
    cltest_pick(&env->platform, &env->device);
    CL_CHECK(clGetDeviceInfo(env->device, CL_DEVICE_NAME, sizeof name - 1, name, NULL));
    printf("device: %s\n", name);
    env->context = clCreateContext(NULL, 1, &env->device, NULL, NULL, &err);
    CL_CHECK_ERR(err, "clCreateContext");
    env->queue = clCreateCommandQueue(env->context, env->device, qprops, &err);
    CL_CHECK_ERR(err, "clCreateCommandQueue");
}

static inline void cltest_teardown(cltest_env *env)
{
    CL_CHECK(clReleaseCommandQueue(env->queue));
    CL_CHECK(clReleaseContext(env->context));
}

static inline void cltest_print_build_log(cl_program prog, cl_device_id dev)
{
    size_t n = 0;
    char *log;
    if (clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) != CL_SUCCESS || n == 0)
        return;
    log = (char *)calloc(1, n + 1);
    if (log && clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, n, log, NULL) == CL_SUCCESS)
        printf("build log:\n%s\n", log);
    free(log);
}

/* Builds src; on failure prints the build log and fails the program. */
static inline cl_program cltest_build(cltest_env *env, const char *src, const char *options)
{
    cl_int err;
    cl_program prog = clCreateProgramWithSource(env->context, 1, &src, NULL, &err);
    CL_CHECK_ERR(err, "clCreateProgramWithSource");
    err = clBuildProgram(prog, 1, &env->device, options, NULL, NULL);
    if (err != CL_SUCCESS) {
        cltest_print_build_log(prog, env->device);
        cltest_die_cl(__FILE__, __LINE__, "clBuildProgram", err);
    }
    return prog;
}

static inline cl_kernel cltest_kernel(cl_program prog, const char *name)
{
    cl_int err;
    cl_kernel k = clCreateKernel(prog, name, &err);
    CL_CHECK_ERR(err, name);
    return k;
}

static inline cl_mem cltest_buffer(cltest_env *env, cl_mem_flags flags, size_t size, void *host)
{
    cl_int err;
    cl_mem m = clCreateBuffer(env->context, flags, size, host, &err);
    CL_CHECK_ERR(err, "clCreateBuffer");
    return m;
}

static inline void *cltest_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        cltest_fail("out of host memory (%zu bytes)", n);
    return p;
}

/* Largest power of two <= x (x >= 1). */
static inline size_t cltest_pow2_floor(size_t x)
{
    size_t p = 1;
    while (p * 2 <= x)
        p *= 2;
    return p;
}

#endif /* CLTEST_H */
