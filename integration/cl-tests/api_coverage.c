/* api_coverage: walks the OpenCL 1.2 entry points that ordinary programs use
 * and checks each result. Every check prints "ok <what>" or
 * "FAIL <what>: <code or detail>"; "skip <what>: <why>" where the device
 * lacks an optional feature. Informational lines start with "info".
 * The checksum covers the output of every kernel and transfer whose result
 * is deterministic, not the device's info strings. */
#include "cltest.h"

static int failures, passes;
static uint64_t csum = CLTEST_FNV_INIT;

static cl_platform_id plat;
static cl_device_id dev;
static cl_context ctx;
static cl_command_queue q, q2, qp, qo;
static cl_program prog;

#define N 1024

/* ---- check helpers ------------------------------------------------------ */

static int report(int good, const char *what, const char *detail)
{
    if (good) {
        printf("ok %s\n", what);
        passes++;
    } else {
        printf("FAIL %s: %s\n", what, detail);
        failures++;
    }
    return good;
}

/* An API status that must be CL_SUCCESS. */
static int ck(cl_int err, const char *what)
{
    char d[96];
    snprintf(d, sizeof d, "%s (%d)", cltest_err_name(err), (int)err);
    return report(err == CL_SUCCESS, what, d);
}

/* A value condition; detail is printf-formatted. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int ckv(int good, const char *what, const char *fmt, ...)
{
    char d[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d, sizeof d, fmt, ap);
    va_end(ap);
    return report(good, what, d);
}

static void skip(const char *what, const char *why) { printf("skip %s: %s\n", what, why); }

static void hash(const void *p, size_t n) { csum = cltest_fnv1a(csum, p, n); }

/* Fatal: the rest cannot run without this object. */
static void need(cl_int err, const char *what)
{
    if (!ck(err, what))
        cltest_fail("%s: %s", what, cltest_err_name(err));
}

/* ---- info helpers ------------------------------------------------------- */

typedef cl_int (*info_fn)(void *obj, cl_uint param, size_t size, void *value, size_t *ret);

/* Size query, then the value; checks both and that the sizes agree. */
static char *get_info_str(info_fn fn, void *obj, cl_uint param, const char *what)
{
    size_t n = 0, n2 = 0;
    cl_int err = fn(obj, param, 0, NULL, &n);
    char name[128];
    snprintf(name, sizeof name, "%s (size query)", what);
    if (!ck(err, name) || !ckv(n >= 1, name, "size %zu", n))
        return NULL;
    char *s = cltest_xmalloc(n + 1);
    err = fn(obj, param, n, s, &n2);
    s[n] = '\0';
    if (!ck(err, what) || !ckv(n2 == n && strlen(s) + 1 == n, what, "size %zu/%zu, strlen %zu", n, n2, strlen(s))) {
        free(s);
        return NULL;
    }
    return s;
}

static cl_int plat_info(void *o, cl_uint p, size_t s, void *v, size_t *r) { return clGetPlatformInfo(o, p, s, v, r); }
static cl_int dev_info(void *o, cl_uint p, size_t s, void *v, size_t *r) { return clGetDeviceInfo(o, p, s, v, r); }
static cl_int prog_info(void *o, cl_uint p, size_t s, void *v, size_t *r) { return clGetProgramInfo(o, p, s, v, r); }
static cl_int kern_info(void *o, cl_uint p, size_t s, void *v, size_t *r) { return clGetKernelInfo(o, p, s, v, r); }

/* A fixed-size value: checks status and returned size. */
#define GET(fn, obj, param, var, what)                                         \
    do {                                                                       \
        size_t r_ = 0;                                                         \
        cl_int e_ = fn(obj, param, sizeof(var), &(var), &r_);                  \
        if (ck(e_, what))                                                      \
            ckv(r_ == sizeof(var), what " size", "%zu, expected %zu", r_, sizeof(var)); \
    } while (0)

/* The same for two-handle queries (clGetProgramBuildInfo). */
#define GET2(fn, obj, obj2, param, var, what)                                  \
    do {                                                                       \
        size_t r_ = 0;                                                         \
        cl_int e_ = fn(obj, obj2, param, sizeof(var), &(var), &r_);            \
        if (ck(e_, what))                                                      \
            ckv(r_ == sizeof(var), what " size", "%zu, expected %zu", r_, sizeof(var)); \
    } while (0)

static cl_uint ctx_refs(cl_context o) { cl_uint n = 0; clGetContextInfo(o, CL_CONTEXT_REFERENCE_COUNT, sizeof n, &n, NULL); return n; }
static cl_uint queue_refs(cl_command_queue o) { cl_uint n = 0; clGetCommandQueueInfo(o, CL_QUEUE_REFERENCE_COUNT, sizeof n, &n, NULL); return n; }
static cl_uint mem_refs(cl_mem o) { cl_uint n = 0; clGetMemObjectInfo(o, CL_MEM_REFERENCE_COUNT, sizeof n, &n, NULL); return n; }
static cl_uint prog_refs(cl_program o) { cl_uint n = 0; clGetProgramInfo(o, CL_PROGRAM_REFERENCE_COUNT, sizeof n, &n, NULL); return n; }
static cl_uint kern_refs(cl_kernel o) { cl_uint n = 0; clGetKernelInfo(o, CL_KERNEL_REFERENCE_COUNT, sizeof n, &n, NULL); return n; }
static cl_uint event_refs(cl_event o) { cl_uint n = 0; clGetEventInfo(o, CL_EVENT_REFERENCE_COUNT, sizeof n, &n, NULL); return n; }
static cl_uint sampler_refs(cl_sampler o) { cl_uint n = 0; clGetSamplerInfo(o, CL_SAMPLER_REFERENCE_COUNT, sizeof n, &n, NULL); return n; }

/* Retain, count +1, release, count back: the count is read relative to
 * its value before, since implementations may hold references of their own. */
#define REFCOUNT(kind, obj, retain, release, refs)                             \
    do {                                                                       \
        cl_uint before_ = refs(obj);                                           \
        ckv(before_ >= 1, "refcount " kind " >= 1", "%u", before_);            \
        ck(retain(obj), "retain " kind);                                       \
        cl_uint mid_ = refs(obj);                                              \
        ckv(mid_ == before_ + 1, "refcount " kind " after retain", "%u, expected %u", mid_, before_ + 1); \
        ck(release(obj), "release " kind);                                     \
        cl_uint after_ = refs(obj);                                            \
        ckv(after_ == before_, "refcount " kind " after release", "%u, expected %u", after_, before_); \
    } while (0)

static void check_event(cl_event e, cl_command_type type, cl_command_queue queue, const char *what)
{
    char w[128];
    cl_int st = 0;
    cl_command_type t = 0;
    cl_command_queue eq = NULL;
    cl_context ec = NULL;
    snprintf(w, sizeof w, "%s status", what);
    if (ck(clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL), w))
        ckv(st == CL_COMPLETE, w, "%d, expected CL_COMPLETE", st);
    snprintf(w, sizeof w, "%s command type", what);
    if (ck(clGetEventInfo(e, CL_EVENT_COMMAND_TYPE, sizeof t, &t, NULL), w))
        ckv(t == type, w, "0x%x, expected 0x%x", t, type);
    snprintf(w, sizeof w, "%s queue", what);
    if (ck(clGetEventInfo(e, CL_EVENT_COMMAND_QUEUE, sizeof eq, &eq, NULL), w))
        ckv(eq == queue, w, "%p, expected %p", (void *)eq, (void *)queue);
    snprintf(w, sizeof w, "%s context", what);
    if (ck(clGetEventInfo(e, CL_EVENT_CONTEXT, sizeof ec, &ec, NULL), w))
        ckv(ec == ctx, w, "%p, expected %p", (void *)ec, (void *)ctx);
}

static cl_mem mkbuf(cl_mem_flags flags, size_t size, void *host, const char *what)
{
    cl_int err;
    cl_mem m = clCreateBuffer(ctx, flags, size, host, &err);
    need(err, what);
    return m;
}

static cl_kernel mkkernel(cl_program p, const char *name)
{
    cl_int err;
    char w[96];
    snprintf(w, sizeof w, "clCreateKernel %s", name);
    cl_kernel k = clCreateKernel(p, name, &err);
    need(err, w);
    return k;
}

static int same_u32(const cl_uint *got, const cl_uint *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            return ckv(0, what, "element %zu: %u, expected %u", i, got[i], want[i]);
    return ckv(1, what, "-");
}

/* ---- kernels ------------------------------------------------------------ */

static const char *src =
    "#ifndef SCALE\n"
    "#error SCALE must be defined with -D\n"
    "#endif\n"
    "__kernel void fill_pattern(__global uint *out, uint seed)\n"
    "{\n"
    "    size_t i = get_global_id(0);\n"
    "    out[i] = (uint)i * SCALE + seed + OFFSET;\n"
    "}\n"
    "__kernel void add_k(__global const uint *in, __global uint *out, uint k)\n"
    "{\n"
    "    size_t i = get_global_id(0);\n"
    "    out[i] = in[i] + k;\n"
    "}\n"
    "__kernel void scale_local(__global const float *in, __global float *out,\n"
    "                          __local float *tmp, float f)\n"
    "{\n"
    "    size_t l = get_local_id(0), g = get_global_id(0);\n"
    "    tmp[l] = in[g] * f;\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    out[g] = tmp[get_local_size(0) - 1 - l];\n"
    "}\n"
    "__kernel __attribute__((reqd_work_group_size(4, 2, 1)))\n"
    "void wg_info(__global uint *out)\n"
    "{\n"
    "    size_t gx = get_global_id(0), gy = get_global_id(1);\n"
    "    size_t ox = get_global_offset(0), oy = get_global_offset(1);\n"
    "    size_t idx = ((gy - oy) * get_global_size(0) + (gx - ox)) * 8;\n"
    "    out[idx + 0] = (uint)gx;\n"
    "    out[idx + 1] = (uint)gy;\n"
    "    out[idx + 2] = (uint)get_local_id(0);\n"
    "    out[idx + 3] = (uint)get_local_id(1);\n"
    "    out[idx + 4] = (uint)get_group_id(0);\n"
    "    out[idx + 5] = (uint)get_group_id(1);\n"
    "    out[idx + 6] = (uint)(get_num_groups(0) * 100 + get_num_groups(1));\n"
    "    out[idx + 7] = (uint)(ox * 100 + oy);\n"
    "}\n";

#define BUILD_OPTIONS "-D SCALE=3 -DOFFSET=5 -cl-kernel-arg-info"

static cl_uint pattern(size_t i, cl_uint seed) { return (cl_uint)i * 3u + seed + 5u; }

/* Runs fill_pattern(seed) over n elements of buf on queue, blocking. */
static void run_fill(cl_command_queue queue, cl_kernel k, cl_mem buf, size_t n, cl_uint seed, const char *what)
{
    char w[128];
    snprintf(w, sizeof w, "%s: set args", what);
    ck(clSetKernelArg(k, 0, sizeof buf, &buf) | clSetKernelArg(k, 1, sizeof seed, &seed), w);
    snprintf(w, sizeof w, "%s: clEnqueueNDRangeKernel", what);
    ck(clEnqueueNDRangeKernel(queue, k, 1, NULL, &n, NULL, 0, NULL, NULL), w);
    snprintf(w, sizeof w, "%s: clFinish", what);
    ck(clFinish(queue), w);
}

static int read_check_pattern(cl_command_queue queue, cl_mem buf, size_t n, cl_uint seed, const char *what)
{
    cl_uint *h = cltest_xmalloc(n * sizeof(cl_uint));
    cl_uint *want = cltest_xmalloc(n * sizeof(cl_uint));
    char w[128];
    for (size_t i = 0; i < n; i++)
        want[i] = pattern(i, seed);
    snprintf(w, sizeof w, "%s: read", what);
    int good = ck(clEnqueueReadBuffer(queue, buf, CL_TRUE, 0, n * sizeof(cl_uint), h, 0, NULL, NULL), w);
    if (good) {
        good = same_u32(h, want, n, what);
        hash(h, n * sizeof(cl_uint));
    }
    free(h);
    free(want);
    return good;
}

/* ---- sections ----------------------------------------------------------- */

static void platform_and_device(void)
{
    cl_uint np = 0, nd = 0;
    if (ck(clGetPlatformIDs(0, NULL, &np), "clGetPlatformIDs count"))
        ckv(np >= 1, "at least one platform", "%u", np);
    cltest_pick(&plat, &dev);

    static const struct { cl_uint p; const char *name; } pinfo[] = {
        { CL_PLATFORM_NAME, "platform NAME" }, { CL_PLATFORM_VENDOR, "platform VENDOR" },
        { CL_PLATFORM_VERSION, "platform VERSION" }, { CL_PLATFORM_PROFILE, "platform PROFILE" },
        { CL_PLATFORM_EXTENSIONS, "platform EXTENSIONS" },
    };
    for (size_t i = 0; i < sizeof pinfo / sizeof pinfo[0]; i++) {
        char *s = get_info_str(plat_info, plat, pinfo[i].p, pinfo[i].name);
        if (s) {
            printf("info %s = %s\n", pinfo[i].name, s);
            if (pinfo[i].p == CL_PLATFORM_VERSION)
                ckv(strncmp(s, "OpenCL ", 7) == 0, "platform VERSION format", "%s", s);
        }
        free(s);
    }

    if (ck(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 0, NULL, &nd), "clGetDeviceIDs ALL count"))
        ckv(nd >= 1, "at least one device", "%u", nd);
    cl_device_id d0 = NULL;
    ck(clGetDeviceIDs(plat, CL_DEVICE_TYPE_DEFAULT, 1, &d0, NULL), "clGetDeviceIDs DEFAULT");

    static const struct { cl_uint p; const char *name; } dinfo[] = {
        { CL_DEVICE_NAME, "device NAME" }, { CL_DEVICE_VENDOR, "device VENDOR" },
        { CL_DEVICE_VERSION, "device VERSION" }, { CL_DRIVER_VERSION, "DRIVER_VERSION" },
        { CL_DEVICE_OPENCL_C_VERSION, "device OPENCL_C_VERSION" }, { CL_DEVICE_PROFILE, "device PROFILE" },
        { CL_DEVICE_EXTENSIONS, "device EXTENSIONS" },
    };
    for (size_t i = 0; i < sizeof dinfo / sizeof dinfo[0]; i++) {
        char *s = get_info_str(dev_info, dev, dinfo[i].p, dinfo[i].name);
        if (s) {
            printf("info %s = %s\n", dinfo[i].name, s);
            if (dinfo[i].p == CL_DEVICE_VERSION)
                ckv(strncmp(s, "OpenCL ", 7) == 0, "device VERSION format", "%s", s);
        }
        free(s);
    }

    cl_device_type type = 0;
    size_t maxwg = 0, sizes[3] = { 0, 0, 0 };
    cl_uint dims = 0, cus = 0, align = 0, bits = 0;
    cl_ulong gmem = 0, lmem = 0, maxalloc = 0;
    cl_bool avail = 0, compiler = 0;
    cl_command_queue_properties qprops = 0;
    cl_platform_id dplat = NULL;
    GET(clGetDeviceInfo, dev, CL_DEVICE_TYPE, type, "device TYPE");
    GET(clGetDeviceInfo, dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, maxwg, "device MAX_WORK_GROUP_SIZE");
    ckv(maxwg >= 1, "MAX_WORK_GROUP_SIZE >= 1", "%zu", maxwg);
    GET(clGetDeviceInfo, dev, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, dims, "device MAX_WORK_ITEM_DIMENSIONS");
    ckv(dims >= 3, "MAX_WORK_ITEM_DIMENSIONS >= 3", "%u", dims);
    GET(clGetDeviceInfo, dev, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizes, "device MAX_WORK_ITEM_SIZES");
    GET(clGetDeviceInfo, dev, CL_DEVICE_GLOBAL_MEM_SIZE, gmem, "device GLOBAL_MEM_SIZE");
    ckv(gmem > 0, "GLOBAL_MEM_SIZE > 0", "%llu", (unsigned long long)gmem);
    GET(clGetDeviceInfo, dev, CL_DEVICE_LOCAL_MEM_SIZE, lmem, "device LOCAL_MEM_SIZE");
    GET(clGetDeviceInfo, dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, maxalloc, "device MAX_MEM_ALLOC_SIZE");
    GET(clGetDeviceInfo, dev, CL_DEVICE_MAX_COMPUTE_UNITS, cus, "device MAX_COMPUTE_UNITS");
    GET(clGetDeviceInfo, dev, CL_DEVICE_MEM_BASE_ADDR_ALIGN, align, "device MEM_BASE_ADDR_ALIGN");
    GET(clGetDeviceInfo, dev, CL_DEVICE_ADDRESS_BITS, bits, "device ADDRESS_BITS");
    GET(clGetDeviceInfo, dev, CL_DEVICE_AVAILABLE, avail, "device AVAILABLE");
    ckv(avail == CL_TRUE, "device is available", "%u", avail);
    GET(clGetDeviceInfo, dev, CL_DEVICE_COMPILER_AVAILABLE, compiler, "device COMPILER_AVAILABLE");
    ckv(compiler == CL_TRUE, "device has a compiler", "%u", compiler);
    GET(clGetDeviceInfo, dev, CL_DEVICE_QUEUE_PROPERTIES, qprops, "device QUEUE_PROPERTIES");
    ckv(qprops & CL_QUEUE_PROFILING_ENABLE, "device supports profiling", "0x%llx", (unsigned long long)qprops);
    GET(clGetDeviceInfo, dev, CL_DEVICE_PLATFORM, dplat, "device PLATFORM");
    ckv(dplat == plat, "device PLATFORM is the platform", "%p", (void *)dplat);
    printf("info type 0x%llx, max work-group %zu, item sizes %zu/%zu/%zu, %u compute units, "
           "global %llu MiB, local %llu KiB, max alloc %llu MiB, align %u bits, %u address bits\n",
           (unsigned long long)type, maxwg, sizes[0], sizes[1], sizes[2], cus,
           (unsigned long long)(gmem >> 20), (unsigned long long)(lmem >> 10),
           (unsigned long long)(maxalloc >> 20), align, bits);
}

static void context_and_queues(void)
{
    cl_int err;
    cl_context_properties props[3] = { CL_CONTEXT_PLATFORM, (cl_context_properties)plat, 0 };
    ctx = clCreateContext(props, 1, &dev, NULL, NULL, &err);
    need(err, "clCreateContext");

    cl_uint ndev = 0;
    cl_device_id cdev = NULL;
    cl_context_properties got[3] = { 0, 0, 0 };
    size_t psize = 0;
    GET(clGetContextInfo, ctx, CL_CONTEXT_NUM_DEVICES, ndev, "context NUM_DEVICES");
    ckv(ndev == 1, "context has one device", "%u", ndev);
    GET(clGetContextInfo, ctx, CL_CONTEXT_DEVICES, cdev, "context DEVICES");
    ckv(cdev == dev, "context DEVICES is the device", "%p", (void *)cdev);
    if (ck(clGetContextInfo(ctx, CL_CONTEXT_PROPERTIES, sizeof got, got, &psize), "context PROPERTIES"))
        ckv(psize == sizeof got && got[0] == CL_CONTEXT_PLATFORM && got[1] == (cl_context_properties)plat &&
                got[2] == 0,
            "context PROPERTIES as given", "size %zu", psize);

    cl_context c2 = clCreateContextFromType(props, CL_DEVICE_TYPE_ALL, NULL, NULL, &err);
    if (ck(err, "clCreateContextFromType")) {
        GET(clGetContextInfo, c2, CL_CONTEXT_NUM_DEVICES, ndev, "context-from-type NUM_DEVICES");
        ckv(ndev >= 1, "context-from-type has devices", "%u", ndev);
        ck(clReleaseContext(c2), "release context-from-type");
    }

    q = clCreateCommandQueue(ctx, dev, 0, &err);
    need(err, "clCreateCommandQueue in-order");
    q2 = clCreateCommandQueue(ctx, dev, 0, &err);
    need(err, "clCreateCommandQueue second in-order");
    qp = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err);
    need(err, "clCreateCommandQueue profiling");

    cl_command_queue_properties dprops = 0;
    clGetDeviceInfo(dev, CL_DEVICE_QUEUE_PROPERTIES, sizeof dprops, &dprops, NULL);
    if (dprops & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) {
        qo = clCreateCommandQueue(ctx, dev, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &err);
        ck(err, "clCreateCommandQueue out-of-order");
        if (err != CL_SUCCESS)
            qo = NULL;
    } else {
        skip("out-of-order queue", "device does not support it");
    }

    cl_context qc = NULL;
    cl_device_id qd = NULL;
    cl_command_queue_properties qpp = 0;
    GET(clGetCommandQueueInfo, qp, CL_QUEUE_CONTEXT, qc, "queue CONTEXT");
    ckv(qc == ctx, "queue CONTEXT is the context", "%p", (void *)qc);
    GET(clGetCommandQueueInfo, qp, CL_QUEUE_DEVICE, qd, "queue DEVICE");
    ckv(qd == dev, "queue DEVICE is the device", "%p", (void *)qd);
    GET(clGetCommandQueueInfo, qp, CL_QUEUE_PROPERTIES, qpp, "queue PROPERTIES");
    ckv(qpp == CL_QUEUE_PROFILING_ENABLE, "queue PROPERTIES as given", "0x%llx", (unsigned long long)qpp);
}

static void program_build(void)
{
    cl_int err;
    prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    need(err, "clCreateProgramWithSource");
    err = clBuildProgram(prog, 1, &dev, BUILD_OPTIONS, NULL, NULL);
    if (!ck(err, "clBuildProgram with -D options")) {
        cltest_print_build_log(prog, dev);
        cltest_fail("build failed");
    }

    cl_build_status bs = CL_BUILD_NONE;
    GET2(clGetProgramBuildInfo, prog, dev, CL_PROGRAM_BUILD_STATUS, bs, "build STATUS");
    ckv(bs == CL_BUILD_SUCCESS, "build STATUS is SUCCESS", "%d", bs);
    char opts[256] = "";
    if (ck(clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_OPTIONS, sizeof opts, opts, NULL), "build OPTIONS"))
        ckv(strcmp(opts, BUILD_OPTIONS) == 0, "build OPTIONS as given", "'%s'", opts);
    size_t logn = 0;
    if (ck(clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &logn), "build LOG size"))
        ckv(logn >= 1, "build LOG size >= 1", "%zu", logn);
    cl_program_binary_type bt = 0;
    GET2(clGetProgramBuildInfo, prog, dev, CL_PROGRAM_BINARY_TYPE, bt, "program BINARY_TYPE");
    ckv(bt == CL_PROGRAM_BINARY_TYPE_EXECUTABLE, "BINARY_TYPE is EXECUTABLE", "%u", (unsigned)bt);

    cl_uint nd = 0;
    cl_device_id pd = NULL;
    cl_context pc = NULL;
    size_t nk = 0;
    GET(clGetProgramInfo, prog, CL_PROGRAM_NUM_DEVICES, nd, "program NUM_DEVICES");
    ckv(nd == 1, "program has one device", "%u", nd);
    GET(clGetProgramInfo, prog, CL_PROGRAM_DEVICES, pd, "program DEVICES");
    ckv(pd == dev, "program DEVICES is the device", "%p", (void *)pd);
    GET(clGetProgramInfo, prog, CL_PROGRAM_CONTEXT, pc, "program CONTEXT");
    ckv(pc == ctx, "program CONTEXT is the context", "%p", (void *)pc);
    GET(clGetProgramInfo, prog, CL_PROGRAM_NUM_KERNELS, nk, "program NUM_KERNELS");
    ckv(nk == 4, "program has 4 kernels", "%zu", nk);
    char *s = get_info_str(prog_info, prog, CL_PROGRAM_SOURCE, "program SOURCE");
    if (s)
        ckv(strcmp(s, src) == 0, "program SOURCE as given", "differs (%zu bytes)", strlen(s));
    free(s);
    s = get_info_str(prog_info, prog, CL_PROGRAM_KERNEL_NAMES, "program KERNEL_NAMES");
    if (s) {
        printf("info kernel names = %s\n", s);
        ckv(strstr(s, "fill_pattern") && strstr(s, "add_k") && strstr(s, "scale_local") && strstr(s, "wg_info"),
            "KERNEL_NAMES lists all kernels", "%s", s);
    }
    free(s);
}

static void failing_builds(void)
{
    cl_int err;
    /* The same source without -D SCALE reaches its #error. */
    cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    if (ck(err, "create program for failing build")) {
        err = clBuildProgram(p, 1, &dev, "-DOFFSET=5", NULL, NULL);
        ckv(err == CL_BUILD_PROGRAM_FAILURE, "build without -D fails with CL_BUILD_PROGRAM_FAILURE", "%s",
            cltest_err_name(err));
        cl_build_status bs = CL_BUILD_NONE;
        if (ck(clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_STATUS, sizeof bs, &bs, NULL), "failed build STATUS"))
            ckv(bs == CL_BUILD_ERROR, "failed build STATUS is ERROR", "%d", bs);
        size_t n = 0;
        if (ck(clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &n), "failed build LOG size")) {
            char *log = cltest_xmalloc(n + 1);
            log[0] = '\0';
            if (ck(clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, n, log, NULL), "failed build LOG")) {
                log[n] = '\0';
                ckv(strstr(log, "SCALE must be defined") != NULL, "failed build LOG has the #error", "%zu bytes", n);
            }
            free(log);
        }
        cl_kernel k = clCreateKernel(p, "fill_pattern", &err);
        ckv(err == CL_INVALID_PROGRAM_EXECUTABLE, "clCreateKernel on failed build: INVALID_PROGRAM_EXECUTABLE",
            "%s", cltest_err_name(err));
        if (k)
            clReleaseKernel(k);
        ck(clReleaseProgram(p), "release failed program");
    }

    /* A syntax error. */
    const char *bad = "__kernel void broken(__global int *x) { x[0] = ; }\n";
    p = clCreateProgramWithSource(ctx, 1, &bad, NULL, &err);
    if (ck(err, "create program with syntax error")) {
        err = clBuildProgram(p, 1, &dev, NULL, NULL, NULL);
        ckv(err == CL_BUILD_PROGRAM_FAILURE, "syntax error build fails", "%s", cltest_err_name(err));
        size_t n = 0;
        if (ck(clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &n), "syntax error build LOG"))
            ckv(n > 1, "syntax error build LOG not empty", "%zu bytes", n);
        ck(clReleaseProgram(p), "release syntax error program");
    }
}

static void binaries_and_linking(void)
{
    cl_int err;
    size_t bsize = 0;
    if (!ck(clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof bsize, &bsize, NULL), "program BINARY_SIZES") ||
        !ckv(bsize > 0, "binary size > 0", "%zu", bsize))
        return;
    unsigned char *bin = cltest_xmalloc(bsize);
    unsigned char *bins[1] = { bin };
    if (ck(clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL), "program BINARIES")) {
        printf("info binary %zu bytes\n", bsize);
        const unsigned char *cbin = bin;
        cl_int bstatus = -1;
        cl_program pb = clCreateProgramWithBinary(ctx, 1, &dev, &bsize, &cbin, &bstatus, &err);
        if (ck(err, "clCreateProgramWithBinary")) {
            ckv(bstatus == CL_SUCCESS, "binary status", "%s", cltest_err_name(bstatus));
            if (ck(clBuildProgram(pb, 1, &dev, NULL, NULL, NULL), "build program from binary")) {
                cl_kernel k = mkkernel(pb, "fill_pattern");
                cl_mem b = mkbuf(CL_MEM_READ_WRITE, N * sizeof(cl_uint), NULL, "buffer for binary program");
                run_fill(q, k, b, N, 77, "kernel from binary");
                read_check_pattern(q, b, N, 77, "kernel from binary output");
                clReleaseMemObject(b);
                clReleaseKernel(k);
            }
            ck(clReleaseProgram(pb), "release binary program");
        }
    }
    free(bin);

    /* Separate compilation and linking (1.2). */
    const char *lib_src = "uint helper(uint x) { return x * 7u + 1u; }\n";
    const char *main_src =
        "uint helper(uint x);\n"
        "__kernel void use_helper(__global uint *o) { size_t i = get_global_id(0); o[i] = helper((uint)i); }\n";
    cl_program pl = clCreateProgramWithSource(ctx, 1, &lib_src, NULL, &err);
    cl_program pm = clCreateProgramWithSource(ctx, 1, &main_src, NULL, &err);
    if (!ck(err, "create programs for linking"))
        return;
    int ok1 = ck(clCompileProgram(pl, 1, &dev, NULL, 0, NULL, NULL, NULL, NULL), "clCompileProgram library");
    int ok2 = ck(clCompileProgram(pm, 1, &dev, NULL, 0, NULL, NULL, NULL, NULL), "clCompileProgram main");
    if (ok1 && ok2) {
        cl_program in[2] = { pm, pl };
        cl_program linked = clLinkProgram(ctx, 1, &dev, NULL, 2, in, NULL, NULL, &err);
        if (ck(err, "clLinkProgram")) {
            cl_kernel k = mkkernel(linked, "use_helper");
            cl_mem b = mkbuf(CL_MEM_READ_WRITE, N * sizeof(cl_uint), NULL, "buffer for linked program");
            size_t g = N;
            cl_uint h[N], want[N];
            ck(clSetKernelArg(k, 0, sizeof b, &b), "linked kernel set arg");
            ck(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, NULL, 0, NULL, NULL), "linked kernel enqueue");
            ck(clEnqueueReadBuffer(q, b, CL_TRUE, 0, sizeof h, h, 0, NULL, NULL), "linked kernel read");
            for (size_t i = 0; i < N; i++)
                want[i] = (cl_uint)i * 7u + 1u;
            same_u32(h, want, N, "linked kernel output");
            hash(h, sizeof h);
            clReleaseMemObject(b);
            clReleaseKernel(k);
            ck(clReleaseProgram(linked), "release linked program");
        }
    }
    clReleaseProgram(pl);
    clReleaseProgram(pm);
}

static void kernel_objects(void)
{
    cl_uint nk = 0;
    if (!ck(clCreateKernelsInProgram(prog, 0, NULL, &nk), "clCreateKernelsInProgram count") ||
        !ckv(nk == 4, "clCreateKernelsInProgram count is 4", "%u", nk))
        return;
    cl_kernel ks[4];
    if (ck(clCreateKernelsInProgram(prog, 4, ks, NULL), "clCreateKernelsInProgram")) {
        int seen = 0;
        for (int i = 0; i < 4; i++) {
            char name[64] = "";
            ck(clGetKernelInfo(ks[i], CL_KERNEL_FUNCTION_NAME, sizeof name, name, NULL), "kernel FUNCTION_NAME");
            if (!strcmp(name, "fill_pattern")) seen |= 1;
            if (!strcmp(name, "add_k")) seen |= 2;
            if (!strcmp(name, "scale_local")) seen |= 4;
            if (!strcmp(name, "wg_info")) seen |= 8;
            ck(clReleaseKernel(ks[i]), "release kernel from clCreateKernelsInProgram");
        }
        ckv(seen == 15, "clCreateKernelsInProgram names", "mask %x", seen);
    }

    cl_kernel k = mkkernel(prog, "scale_local");
    char *s = get_info_str(kern_info, k, CL_KERNEL_FUNCTION_NAME, "kernel FUNCTION_NAME size");
    if (s)
        ckv(strcmp(s, "scale_local") == 0, "kernel FUNCTION_NAME", "%s", s);
    free(s);
    cl_uint nargs = 0;
    cl_context kc = NULL;
    cl_program kp = NULL;
    GET(clGetKernelInfo, k, CL_KERNEL_NUM_ARGS, nargs, "kernel NUM_ARGS");
    ckv(nargs == 4, "kernel NUM_ARGS is 4", "%u", nargs);
    GET(clGetKernelInfo, k, CL_KERNEL_CONTEXT, kc, "kernel CONTEXT");
    ckv(kc == ctx, "kernel CONTEXT is the context", "%p", (void *)kc);
    GET(clGetKernelInfo, k, CL_KERNEL_PROGRAM, kp, "kernel PROGRAM");
    ckv(kp == prog, "kernel PROGRAM is the program", "%p", (void *)kp);
    s = get_info_str(kern_info, k, CL_KERNEL_ATTRIBUTES, "kernel ATTRIBUTES");
    free(s);

    static const cl_kernel_arg_address_qualifier aq[4] = {
        CL_KERNEL_ARG_ADDRESS_GLOBAL, CL_KERNEL_ARG_ADDRESS_GLOBAL,
        CL_KERNEL_ARG_ADDRESS_LOCAL, CL_KERNEL_ARG_ADDRESS_PRIVATE };
    static const char *tn[4] = { "float*", "float*", "float*", "float" };
    static const char *an[4] = { "in", "out", "tmp", "f" };
    static const cl_kernel_arg_type_qualifier tq[4] = { CL_KERNEL_ARG_TYPE_CONST, 0, 0, 0 };
    for (cl_uint i = 0; i < 4; i++) {
        char w[96], str[64] = "";
        cl_kernel_arg_address_qualifier a = 0;
        cl_kernel_arg_access_qualifier acc = 0;
        cl_kernel_arg_type_qualifier t = 0;
        snprintf(w, sizeof w, "arg %u ADDRESS_QUALIFIER", i);
        if (ck(clGetKernelArgInfo(k, i, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof a, &a, NULL), w))
            ckv(a == aq[i], w, "0x%x, expected 0x%x", a, aq[i]);
        snprintf(w, sizeof w, "arg %u ACCESS_QUALIFIER", i);
        if (ck(clGetKernelArgInfo(k, i, CL_KERNEL_ARG_ACCESS_QUALIFIER, sizeof acc, &acc, NULL), w))
            ckv(acc == CL_KERNEL_ARG_ACCESS_NONE, w, "0x%x", acc);
        snprintf(w, sizeof w, "arg %u TYPE_NAME", i);
        if (ck(clGetKernelArgInfo(k, i, CL_KERNEL_ARG_TYPE_NAME, sizeof str, str, NULL), w))
            ckv(strcmp(str, tn[i]) == 0, w, "'%s', expected '%s'", str, tn[i]);
        snprintf(w, sizeof w, "arg %u TYPE_QUALIFIER", i);
        if (ck(clGetKernelArgInfo(k, i, CL_KERNEL_ARG_TYPE_QUALIFIER, sizeof t, &t, NULL), w))
            ckv(t == tq[i], w, "0x%llx, expected 0x%llx", (unsigned long long)t, (unsigned long long)tq[i]);
        snprintf(w, sizeof w, "arg %u NAME", i);
        if (ck(clGetKernelArgInfo(k, i, CL_KERNEL_ARG_NAME, sizeof str, str, NULL), w))
            ckv(strcmp(str, an[i]) == 0, w, "'%s', expected '%s'", str, an[i]);
    }

    size_t wg = 0, cwg[3] = { 9, 9, 9 }, mult = 0, maxwg = 0;
    cl_ulong lm = 0, pm = 0;
    clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof maxwg, &maxwg, NULL);
    if (ck(clGetKernelWorkGroupInfo(k, dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL), "kernel WORK_GROUP_SIZE"))
        ckv(wg >= 1 && wg <= maxwg, "kernel WORK_GROUP_SIZE in range", "%zu (device %zu)", wg, maxwg);
    if (ck(clGetKernelWorkGroupInfo(k, dev, CL_KERNEL_COMPILE_WORK_GROUP_SIZE, sizeof cwg, cwg, NULL),
           "kernel COMPILE_WORK_GROUP_SIZE"))
        ckv(cwg[0] == 0 && cwg[1] == 0 && cwg[2] == 0, "COMPILE_WORK_GROUP_SIZE is 0 without attribute",
            "%zu,%zu,%zu", cwg[0], cwg[1], cwg[2]);
    ck(clGetKernelWorkGroupInfo(k, dev, CL_KERNEL_LOCAL_MEM_SIZE, sizeof lm, &lm, NULL), "kernel LOCAL_MEM_SIZE");
    if (ck(clGetKernelWorkGroupInfo(k, dev, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE, sizeof mult, &mult, NULL),
           "kernel PREFERRED_WORK_GROUP_SIZE_MULTIPLE"))
        ckv(mult >= 1, "PREFERRED_WORK_GROUP_SIZE_MULTIPLE >= 1", "%zu", mult);
    ck(clGetKernelWorkGroupInfo(k, dev, CL_KERNEL_PRIVATE_MEM_SIZE, sizeof pm, &pm, NULL), "kernel PRIVATE_MEM_SIZE");
    printf("info scale_local: work-group %zu, multiple %zu, local mem %llu, private mem %llu\n", wg, mult,
           (unsigned long long)lm, (unsigned long long)pm);

    cl_kernel kw = mkkernel(prog, "wg_info");
    if (ck(clGetKernelWorkGroupInfo(kw, dev, CL_KERNEL_COMPILE_WORK_GROUP_SIZE, sizeof cwg, cwg, NULL),
           "wg_info COMPILE_WORK_GROUP_SIZE"))
        ckv(cwg[0] == 4 && cwg[1] == 2 && cwg[2] == 1, "COMPILE_WORK_GROUP_SIZE is reqd_work_group_size",
            "%zu,%zu,%zu", cwg[0], cwg[1], cwg[2]);
    clReleaseKernel(kw);
    clReleaseKernel(k);
}

static void buffers(void)
{
    cl_int err;
    cl_uint init[N], h[N], want[N];
    for (size_t i = 0; i < N; i++)
        init[i] = (cl_uint)(i * 2654435761u);

    /* COPY_HOST_PTR and memory object info. */
    cl_mem bc = mkbuf(CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof init, init, "clCreateBuffer COPY_HOST_PTR");
    memset(h, 0, sizeof h);
    if (ck(clEnqueueReadBuffer(q, bc, CL_TRUE, 0, sizeof h, h, 0, NULL, NULL), "read COPY_HOST_PTR buffer"))
        same_u32(h, init, N, "COPY_HOST_PTR contents");
    cl_mem_object_type mt = 0;
    cl_mem_flags mf = 0;
    size_t ms = 0, mo = 99;
    void *mhp = (void *)1;
    cl_uint mc = 99;
    cl_context mctx = NULL;
    cl_mem massoc = (cl_mem)1;
    GET(clGetMemObjectInfo, bc, CL_MEM_TYPE, mt, "mem TYPE");
    ckv(mt == CL_MEM_OBJECT_BUFFER, "mem TYPE is BUFFER", "0x%x", mt);
    GET(clGetMemObjectInfo, bc, CL_MEM_FLAGS, mf, "mem FLAGS");
    ckv(mf == (CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR), "mem FLAGS as given", "0x%llx", (unsigned long long)mf);
    GET(clGetMemObjectInfo, bc, CL_MEM_SIZE, ms, "mem SIZE");
    ckv(ms == sizeof init, "mem SIZE as given", "%zu", ms);
    GET(clGetMemObjectInfo, bc, CL_MEM_HOST_PTR, mhp, "mem HOST_PTR");
    ckv(mhp == NULL, "mem HOST_PTR is NULL for COPY_HOST_PTR", "%p", mhp);
    GET(clGetMemObjectInfo, bc, CL_MEM_MAP_COUNT, mc, "mem MAP_COUNT");
    ckv(mc == 0, "mem MAP_COUNT is 0", "%u", mc);
    GET(clGetMemObjectInfo, bc, CL_MEM_CONTEXT, mctx, "mem CONTEXT");
    ckv(mctx == ctx, "mem CONTEXT is the context", "%p", (void *)mctx);
    GET(clGetMemObjectInfo, bc, CL_MEM_ASSOCIATED_MEMOBJECT, massoc, "mem ASSOCIATED_MEMOBJECT");
    ckv(massoc == NULL, "mem ASSOCIATED_MEMOBJECT is NULL", "%p", (void *)massoc);
    GET(clGetMemObjectInfo, bc, CL_MEM_OFFSET, mo, "mem OFFSET");
    ckv(mo == 0, "mem OFFSET is 0", "%zu", mo);

    /* Write (non-blocking, event) then read waiting on it. */
    cl_mem b = mkbuf(CL_MEM_READ_WRITE, sizeof init, NULL, "clCreateBuffer plain");
    cl_event ew = NULL;
    for (size_t i = 0; i < N; i++)
        want[i] = (cl_uint)i ^ 0x5a5a5a5au;
    ck(clEnqueueWriteBuffer(q, b, CL_FALSE, 0, sizeof want, want, 0, NULL, &ew), "clEnqueueWriteBuffer non-blocking");
    if (ck(clEnqueueReadBuffer(q, b, CL_TRUE, 0, sizeof h, h, 1, &ew, NULL), "clEnqueueReadBuffer after event"))
        same_u32(h, want, N, "write/read round trip");
    check_event(ew, CL_COMMAND_WRITE_BUFFER, q, "write event");
    clReleaseEvent(ew);

    /* Copy with offsets. */
    ck(clEnqueueCopyBuffer(q, bc, b, 100 * 4, 500 * 4, 200 * 4, 0, NULL, NULL), "clEnqueueCopyBuffer");
    memcpy(want + 500, init + 100, 200 * 4);
    if (ck(clEnqueueReadBuffer(q, b, CL_TRUE, 0, sizeof h, h, 0, NULL, NULL), "read after copy"))
        same_u32(h, want, N, "copy with offsets");
    hash(h, sizeof h);

    /* Fill: 4-byte pattern over everything, 16-byte pattern over a range. */
    cl_uint p4 = 0xdeadbeefu, p16[4] = { 1, 2, 3, 4 };
    ck(clEnqueueFillBuffer(q, b, &p4, sizeof p4, 0, sizeof h, 0, NULL, NULL), "clEnqueueFillBuffer 4-byte pattern");
    ck(clEnqueueFillBuffer(q, b, p16, sizeof p16, 64 * 4, 64 * 4, 0, NULL, NULL), "clEnqueueFillBuffer 16-byte pattern");
    for (size_t i = 0; i < N; i++)
        want[i] = (i >= 64 && i < 128) ? p16[i % 4] : p4;
    if (ck(clEnqueueReadBuffer(q, b, CL_TRUE, 0, sizeof h, h, 0, NULL, NULL), "read after fill"))
        same_u32(h, want, N, "fill contents");

    /* Migrate (1.2): a hint; must succeed. */
    ck(clEnqueueMigrateMemObjects(q, 1, &b, 0, 0, NULL, NULL), "clEnqueueMigrateMemObjects");

    /* Sub-buffer at the device's base alignment. */
    cl_uint align_bits = 0;
    clGetDeviceInfo(dev, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL);
    size_t align = align_bits / 8 ? align_bits / 8 : 4;
    size_t psize = 4 * align > 4096 ? 4 * align : 4096;
    cl_uint *ph = cltest_xmalloc(psize), *pwant = cltest_xmalloc(psize);
    for (size_t i = 0; i < psize / 4; i++)
        ph[i] = pwant[i] = (cl_uint)(0x10000 + i);
    cl_mem parent = mkbuf(CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, psize, ph, "parent buffer");
    cl_buffer_region reg = { align, align };
    cl_mem sub = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &reg, &err);
    if (ck(err, "clCreateSubBuffer")) {
        cl_mem sassoc = NULL;
        size_t soff = 0, ssize = 0;
        GET(clGetMemObjectInfo, sub, CL_MEM_ASSOCIATED_MEMOBJECT, sassoc, "sub-buffer ASSOCIATED_MEMOBJECT");
        ckv(sassoc == parent, "sub-buffer ASSOCIATED_MEMOBJECT is the parent", "%p", (void *)sassoc);
        GET(clGetMemObjectInfo, sub, CL_MEM_OFFSET, soff, "sub-buffer OFFSET");
        ckv(soff == align, "sub-buffer OFFSET is the origin", "%zu", soff);
        GET(clGetMemObjectInfo, sub, CL_MEM_SIZE, ssize, "sub-buffer SIZE");
        ckv(ssize == align, "sub-buffer SIZE", "%zu", ssize);
        cl_kernel kf = mkkernel(prog, "fill_pattern");
        run_fill(q, kf, sub, align / 4, 1000, "kernel on sub-buffer");
        for (size_t i = 0; i < align / 4; i++)
            pwant[align / 4 + i] = pattern(i, 1000);
        /* A write through the sub-buffer too, at its end. */
        cl_uint tail = 0xabcdef01u;
        ck(clEnqueueWriteBuffer(q, sub, CL_TRUE, align - 4, 4, &tail, 0, NULL, NULL), "write into sub-buffer");
        pwant[align / 4 + align / 4 - 1] = tail;
        if (ck(clEnqueueReadBuffer(q, parent, CL_TRUE, 0, psize, ph, 0, NULL, NULL), "read parent of sub-buffer"))
            same_u32(ph, pwant, psize / 4, "sub-buffer writes land in the parent");
        hash(ph, psize);
        REFCOUNT("sub-buffer", sub, clRetainMemObject, clReleaseMemObject, mem_refs);
        clReleaseKernel(kf);
        ck(clReleaseMemObject(sub), "release sub-buffer");
    }
    ck(clReleaseMemObject(parent), "release parent buffer");
    free(ph);
    free(pwant);

    /* USE_HOST_PTR: kernel output visible through a read map of the host
     * pointer; host writes through a write map visible to the device. */
    cl_uint *uh = aligned_alloc(4096, 4096 > sizeof init ? 4096 : sizeof init);
    memcpy(uh, init, sizeof init);
    cl_mem bu = mkbuf(CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, sizeof init, uh, "clCreateBuffer USE_HOST_PTR");
    void *hp = NULL;
    GET(clGetMemObjectInfo, bu, CL_MEM_HOST_PTR, hp, "USE_HOST_PTR mem HOST_PTR");
    ckv(hp == uh, "mem HOST_PTR is the application's pointer", "%p vs %p", hp, (void *)uh);
    cl_kernel kf = mkkernel(prog, "fill_pattern");
    run_fill(q, kf, bu, N, 9, "kernel on USE_HOST_PTR buffer");
    cl_uint *mp = clEnqueueMapBuffer(q, bu, CL_TRUE, CL_MAP_READ, 0, sizeof init, 0, NULL, NULL, &err);
    if (ck(err, "map USE_HOST_PTR for read")) {
        ckv(mp == uh, "map of USE_HOST_PTR returns the host pointer", "%p vs %p", (void *)mp, (void *)uh);
        for (size_t i = 0; i < N; i++)
            want[i] = pattern(i, 9);
        same_u32(mp, want, N, "USE_HOST_PTR contents after kernel");
        cl_uint mcount = 0;
        GET(clGetMemObjectInfo, bu, CL_MEM_MAP_COUNT, mcount, "mem MAP_COUNT while mapped");
        ckv(mcount == 1, "MAP_COUNT is 1 while mapped", "%u", mcount);
        ck(clEnqueueUnmapMemObject(q, bu, mp, 0, NULL, NULL), "unmap read map");
    }
    mp = clEnqueueMapBuffer(q, bu, CL_TRUE, CL_MAP_WRITE, 0, sizeof init, 0, NULL, NULL, &err);
    if (ck(err, "map USE_HOST_PTR for write")) {
        for (size_t i = 0; i < N; i++)
            mp[i] = (cl_uint)(i * 11u);
        ck(clEnqueueUnmapMemObject(q, bu, mp, 0, NULL, NULL), "unmap write map");
        cl_kernel ka = mkkernel(prog, "add_k");
        cl_uint kk = 1000;
        size_t g = N;
        ck(clSetKernelArg(ka, 0, sizeof bu, &bu) | clSetKernelArg(ka, 1, sizeof b, &b) |
               clSetKernelArg(ka, 2, sizeof kk, &kk),
           "add_k set args");
        ck(clEnqueueNDRangeKernel(q, ka, 1, NULL, &g, NULL, 0, NULL, NULL), "add_k on mapped-written data");
        for (size_t i = 0; i < N; i++)
            want[i] = (cl_uint)(i * 11u) + 1000u;
        if (ck(clEnqueueReadBuffer(q, b, CL_TRUE, 0, sizeof h, h, 0, NULL, NULL), "read add_k output"))
            same_u32(h, want, N, "device sees host writes made through a write map");
        hash(h, sizeof h);
        clReleaseKernel(ka);
    }
    ck(clFinish(q), "clFinish");
    ck(clReleaseMemObject(bu), "release USE_HOST_PTR buffer");
    free(uh);

    /* ALLOC_HOST_PTR: fill through a write-invalidate map, read back, map
     * a sub-range for read without blocking. */
    cl_mem ba = mkbuf(CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, sizeof init, NULL, "clCreateBuffer ALLOC_HOST_PTR");
    mp = clEnqueueMapBuffer(q, ba, CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION, 0, sizeof init, 0, NULL, NULL, &err);
    if (ck(err, "map ALLOC_HOST_PTR WRITE_INVALIDATE_REGION")) {
        for (size_t i = 0; i < N; i++)
            mp[i] = init[i] + 1;
        ck(clEnqueueUnmapMemObject(q, ba, mp, 0, NULL, NULL), "unmap ALLOC_HOST_PTR");
        for (size_t i = 0; i < N; i++)
            want[i] = init[i] + 1;
        if (ck(clEnqueueReadBuffer(q, ba, CL_TRUE, 0, sizeof h, h, 0, NULL, NULL), "read ALLOC_HOST_PTR buffer"))
            same_u32(h, want, N, "ALLOC_HOST_PTR contents");
        cl_event em = NULL;
        mp = clEnqueueMapBuffer(q, ba, CL_FALSE, CL_MAP_READ, 256 * 4, 256 * 4, 0, NULL, &em, &err);
        if (ck(err, "non-blocking map of a range")) {
            ck(clWaitForEvents(1, &em), "wait for map event");
            check_event(em, CL_COMMAND_MAP_BUFFER, q, "map event");
            same_u32(mp, want + 256, 256, "mapped range contents");
            ck(clEnqueueUnmapMemObject(q, ba, mp, 0, NULL, NULL), "unmap range");
            clReleaseEvent(em);
        }
    }
    ck(clFinish(q), "clFinish after maps");
    ck(clReleaseMemObject(ba), "release ALLOC_HOST_PTR buffer");
    clReleaseKernel(kf);
    ck(clReleaseMemObject(b), "release plain buffer");
    ck(clReleaseMemObject(bc), "release COPY_HOST_PTR buffer");
}

/* memcmp that reports the first differing byte. */
static int same_bytes(const unsigned char *got, const unsigned char *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            return ckv(0, what, "byte %zu: 0x%02x, expected 0x%02x", i, got[i], want[i]);
    return ckv(1, what, "-");
}

/* CPU model of a rectangular copy (bytes). */
static void rect_copy(unsigned char *dst, const size_t dorg[3], size_t drow, size_t dslice,
                      const unsigned char *srcp, const size_t sorg[3], size_t srow, size_t sslice,
                      const size_t region[3])
{
    for (size_t z = 0; z < region[2]; z++)
        for (size_t y = 0; y < region[1]; y++)
            memcpy(dst + (dorg[2] + z) * dslice + (dorg[1] + y) * drow + dorg[0],
                   srcp + (sorg[2] + z) * sslice + (sorg[1] + y) * srow + sorg[0], region[0]);
}

static void rect_transfers(void)
{
    enum { BW = 64, BH = 32, BD = 2, HW = 40, HH = 20, HD = 3 };
    static unsigned char host[HW * HH * HD], model[BW * BH * BD], got[BW * BH * BD];
    static unsigned char hout[HW * HH * HD], hmodel[HW * HH * HD];
    static unsigned char m2[32 * 16 * 2], g2[32 * 16 * 2];
    for (size_t i = 0; i < sizeof host; i++)
        host[i] = (unsigned char)(i * 7 + 3);
    memset(model, 0, sizeof model);

    cl_mem rb = mkbuf(CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof model, model, "rect buffer");
    size_t borg[3] = { 8, 4, 1 }, horg[3] = { 2, 3, 0 }, region[3] = { 16, 8, 1 };
    ck(clEnqueueWriteBufferRect(q, rb, CL_TRUE, borg, horg, region, BW, BW * BH, HW, HW * HH, host, 0, NULL, NULL),
       "clEnqueueWriteBufferRect");
    rect_copy(model, borg, BW, BW * BH, host, horg, HW, HW * HH, region);
    if (ck(clEnqueueReadBuffer(q, rb, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL), "read after rect write"))
        same_bytes(got, model, sizeof got, "rect write contents");
    hash(got, sizeof got);

    /* A 3-D region back into a host array at an offset. */
    size_t borg2[3] = { 10, 6, 0 }, horg2[3] = { 1, 1, 1 }, region2[3] = { 12, 5, 2 };
    memset(hout, 0xee, sizeof hout);
    memset(hmodel, 0xee, sizeof hmodel);
    ck(clEnqueueReadBufferRect(q, rb, CL_TRUE, borg2, horg2, region2, BW, BW * BH, HW, HW * HH, hout, 0, NULL, NULL),
       "clEnqueueReadBufferRect 3-D");
    rect_copy(hmodel, horg2, HW, HW * HH, model, borg2, BW, BW * BH, region2);
    same_bytes(hout, hmodel, sizeof hout, "rect read contents");
    hash(hout, sizeof hout);

    /* Buffer to buffer with different pitches; a non-blocking read of the
     * destination waits on the copy's event. */
    memset(m2, 0, sizeof m2);
    cl_mem rb2 = mkbuf(CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof m2, m2, "rect destination buffer");
    size_t sorg[3] = { 6, 2, 0 }, dorg[3] = { 3, 1, 0 }, region3[3] = { 20, 10, 2 };
    cl_event ec = NULL, er = NULL;
    ck(clEnqueueCopyBufferRect(q, rb, rb2, sorg, dorg, region3, BW, BW * BH, 32, 32 * 16, 0, NULL, &ec),
       "clEnqueueCopyBufferRect");
    rect_copy(m2, dorg, 32, 32 * 16, model, sorg, BW, BW * BH, region3);
    ck(clEnqueueReadBuffer(q, rb2, CL_FALSE, 0, sizeof g2, g2, 1, &ec, &er), "read after rect copy");
    ck(clWaitForEvents(1, &er), "wait for read");
    check_event(ec, CL_COMMAND_COPY_BUFFER_RECT, q, "rect copy event");
    same_bytes(g2, m2, sizeof g2, "rect copy contents");
    hash(g2, sizeof g2);
    clReleaseEvent(ec);
    clReleaseEvent(er);
    ck(clReleaseMemObject(rb2), "release rect destination");
    ck(clReleaseMemObject(rb), "release rect buffer");
}

static void ndrange(void)
{
    /* wg_info: 2-D, global offset (2,1), global (16,8), local (4,2). */
    enum { GX = 16, GY = 8 };
    static cl_uint out[GX * GY * 8], want[GX * GY * 8];
    cl_mem b = mkbuf(CL_MEM_WRITE_ONLY, sizeof out, NULL, "wg_info buffer");
    cl_kernel k = mkkernel(prog, "wg_info");
    size_t off[2] = { 2, 1 }, gl[2] = { GX, GY }, lo[2] = { 4, 2 };
    ck(clSetKernelArg(k, 0, sizeof b, &b), "wg_info set arg");
    ck(clEnqueueNDRangeKernel(q, k, 2, off, gl, lo, 0, NULL, NULL), "NDRange with offset and local size");
    ck(clEnqueueReadBuffer(q, b, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL), "read wg_info");
    for (size_t y = 0; y < GY; y++)
        for (size_t x = 0; x < GX; x++) {
            cl_uint *r = want + (y * GX + x) * 8;
            r[0] = (cl_uint)(x + 2); r[1] = (cl_uint)(y + 1);
            r[2] = (cl_uint)(x % 4); r[3] = (cl_uint)(y % 2);
            r[4] = (cl_uint)(x / 4); r[5] = (cl_uint)(y / 2);
            r[6] = 4 * 100 + 4; r[7] = 2 * 100 + 1;
        }
    same_u32(out, want, GX * GY * 8, "work-item ids, group ids, offsets");
    hash(out, sizeof out);
    clReleaseKernel(k);
    ck(clReleaseMemObject(b), "release wg_info buffer");

    /* scale_local: a __local argument, explicit local size 8. */
    float fin[64], fout[64];
    for (int i = 0; i < 64; i++)
        fin[i] = (float)i;
    cl_mem bi = mkbuf(CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof fin, fin, "scale_local input");
    cl_mem bo = mkbuf(CL_MEM_WRITE_ONLY, sizeof fout, NULL, "scale_local output");
    k = mkkernel(prog, "scale_local");
    float f = 2.0f;
    size_t g = 64, l = 8;
    ck(clSetKernelArg(k, 0, sizeof bi, &bi), "scale_local arg 0");
    ck(clSetKernelArg(k, 1, sizeof bo, &bo), "scale_local arg 1");
    ck(clSetKernelArg(k, 2, 8 * sizeof(float), NULL), "scale_local __local arg");
    ck(clSetKernelArg(k, 3, sizeof f, &f), "scale_local arg 3");
    ck(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, NULL), "NDRange with __local argument");
    if (ck(clEnqueueReadBuffer(q, bo, CL_TRUE, 0, sizeof fout, fout, 0, NULL, NULL), "read scale_local")) {
        int good = 1;
        for (int i = 0; i < 64; i++)
            good &= fout[i] == 2.0f * (float)((i / 8) * 8 + 7 - i % 8);
        ckv(good, "scale_local reverses within groups", "wrong output");
        hash(fout, sizeof fout);
    }
    clReleaseKernel(k);

    /* clEnqueueTask: one work-item. */
    k = mkkernel(prog, "fill_pattern");
    cl_uint seed = 42, v = 0;
    ck(clSetKernelArg(k, 0, sizeof bo, &bo) | clSetKernelArg(k, 1, sizeof seed, &seed), "task set args");
    ck(clEnqueueTask(q, k, 0, NULL, NULL), "clEnqueueTask");
    if (ck(clEnqueueReadBuffer(q, bo, CL_TRUE, 0, 4, &v, 0, NULL, NULL), "read task output"))
        ckv(v == pattern(0, 42), "task output", "%u", v);
    clReleaseKernel(k);
    clReleaseMemObject(bi);
    clReleaseMemObject(bo);
}

struct cb_data {
    int fired;
    cl_int status;
    cl_event event;
};

static void CL_CALLBACK on_event(cl_event e, cl_int status, void *user)
{
    struct cb_data *d = user;
    d->event = e;
    d->status = status;
    __atomic_store_n(&d->fired, 1, __ATOMIC_RELEASE);
}

static int wait_fired(struct cb_data *d)
{
    for (int i = 0; i < 400 && !__atomic_load_n(&d->fired, __ATOMIC_ACQUIRE); i++)
        cltest_sleep_ms(5);
    return __atomic_load_n(&d->fired, __ATOMIC_ACQUIRE);
}

static void events(void)
{
    cl_int err;
    cl_uint in[N], h[N], want[N];
    for (size_t i = 0; i < N; i++)
        in[i] = (cl_uint)(i * 3);
    cl_mem bi = mkbuf(CL_MEM_READ_WRITE, sizeof in, NULL, "event input buffer");
    cl_mem bo = mkbuf(CL_MEM_READ_WRITE, sizeof in, NULL, "event output buffer");
    cl_kernel ka = mkkernel(prog, "add_k");
    cl_uint kk = 7;
    size_t g = N;

    /* A chain write -> kernel -> read through wait lists. */
    cl_event ew, ek, er;
    ck(clEnqueueWriteBuffer(q, bi, CL_FALSE, 0, sizeof in, in, 0, NULL, &ew), "chain: write");
    ck(clSetKernelArg(ka, 0, sizeof bi, &bi) | clSetKernelArg(ka, 1, sizeof bo, &bo) |
           clSetKernelArg(ka, 2, sizeof kk, &kk), "chain: set args");
    ck(clEnqueueNDRangeKernel(q, ka, 1, NULL, &g, NULL, 1, &ew, &ek), "chain: kernel waits on write");
    ck(clEnqueueReadBuffer(q, bo, CL_FALSE, 0, sizeof h, h, 1, &ek, &er), "chain: read waits on kernel");
    ck(clWaitForEvents(1, &er), "clWaitForEvents");
    for (size_t i = 0; i < N; i++)
        want[i] = in[i] + 7;
    same_u32(h, want, N, "chain result");
    hash(h, sizeof h);
    check_event(ew, CL_COMMAND_WRITE_BUFFER, q, "chain write event");
    check_event(ek, CL_COMMAND_NDRANGE_KERNEL, q, "chain kernel event");
    check_event(er, CL_COMMAND_READ_BUFFER, q, "chain read event");
    REFCOUNT("event", ek, clRetainEvent, clReleaseEvent, event_refs);
    clReleaseEvent(ew);
    clReleaseEvent(ek);
    clReleaseEvent(er);

    /* Profiling. */
    cl_event ep;
    if (ck(clEnqueueNDRangeKernel(qp, ka, 1, NULL, &g, NULL, 0, NULL, &ep), "kernel on profiling queue")) {
        ck(clWaitForEvents(1, &ep), "wait profiled kernel");
        cl_ulong t[4] = { 0, 0, 0, 0 };
        static const cl_profiling_info pi[4] = { CL_PROFILING_COMMAND_QUEUED, CL_PROFILING_COMMAND_SUBMIT,
                                                 CL_PROFILING_COMMAND_START, CL_PROFILING_COMMAND_END };
        int got = 1;
        for (int i = 0; i < 4; i++)
            got &= ck(clGetEventProfilingInfo(ep, pi[i], sizeof t[i], &t[i], NULL), "clGetEventProfilingInfo");
        if (got)
            ckv(t[0] <= t[1] && t[1] <= t[2] && t[2] <= t[3] && t[3] > 0, "profiling QUEUED<=SUBMIT<=START<=END",
                "%llu %llu %llu %llu", (unsigned long long)t[0], (unsigned long long)t[1],
                (unsigned long long)t[2], (unsigned long long)t[3]);
        clReleaseEvent(ep);
    }
    ck(clEnqueueNDRangeKernel(q, ka, 1, NULL, &g, NULL, 0, NULL, &ep), "kernel on plain queue");
    clWaitForEvents(1, &ep);
    cl_ulong tq = 0;
    err = clGetEventProfilingInfo(ep, CL_PROFILING_COMMAND_END, sizeof tq, &tq, NULL);
    ckv(err == CL_PROFILING_INFO_NOT_AVAILABLE, "profiling info without profiling queue: NOT_AVAILABLE", "%s",
        cltest_err_name(err));
    clReleaseEvent(ep);

    /* A user event holds back an enqueued kernel until it is set. */
    cl_event ue = clCreateUserEvent(ctx, &err);
    if (ck(err, "clCreateUserEvent")) {
        cl_int st = 0;
        cl_command_type ct = 0;
        struct cb_data ucb = { 0, 99, NULL };
        if (ck(clGetEventInfo(ue, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL), "user event status"))
            ckv(st == CL_SUBMITTED, "new user event is SUBMITTED", "%d", st);
        if (ck(clGetEventInfo(ue, CL_EVENT_COMMAND_TYPE, sizeof ct, &ct, NULL), "user event type"))
            ckv(ct == CL_COMMAND_USER, "user event type is COMMAND_USER", "0x%x", ct);
        ck(clSetEventCallback(ue, CL_COMPLETE, on_event, &ucb), "clSetEventCallback on user event");
        cl_kernel kf = mkkernel(prog, "fill_pattern");
        cl_mem bu = mkbuf(CL_MEM_READ_WRITE, sizeof in, NULL, "user event buffer");
        cl_uint seed = 5;
        cl_event eb = NULL;
        ck(clSetKernelArg(kf, 0, sizeof bu, &bu) | clSetKernelArg(kf, 1, sizeof seed, &seed), "blocked kernel args");
        ck(clEnqueueNDRangeKernel(q, kf, 1, NULL, &g, NULL, 1, &ue, &eb), "kernel waiting on user event");
        ck(clFlush(q), "clFlush");
        cltest_sleep_ms(100);
        if (ck(clGetEventInfo(eb, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL), "blocked kernel status"))
            ckv(st > CL_COMPLETE, "kernel waits while user event is unset", "status %d", st);
        ckv(!__atomic_load_n(&ucb.fired, __ATOMIC_ACQUIRE), "user event callback not fired yet", "fired");
        ck(clSetUserEventStatus(ue, CL_COMPLETE), "clSetUserEventStatus COMPLETE");
        ck(clWaitForEvents(1, &eb), "wait for unblocked kernel");
        if (ck(clGetEventInfo(eb, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL), "unblocked kernel status"))
            ckv(st == CL_COMPLETE, "kernel ran after the user event", "status %d", st);
        if (ckv(wait_fired(&ucb), "user event callback fired", "not within 2 s"))
            ckv(ucb.status == CL_COMPLETE && ucb.event == ue, "user event callback arguments", "status %d",
                ucb.status);
        read_check_pattern(q, bu, N, 5, "output of kernel released by user event");
        REFCOUNT("user event", ue, clRetainEvent, clReleaseEvent, event_refs);
        clReleaseEvent(eb);
        clReleaseEvent(ue);
        clReleaseMemObject(bu);
        clReleaseKernel(kf);
    }

    /* Callback on a kernel's completion. */
    struct cb_data kcb = { 0, 99, NULL };
    cl_event ec;
    ck(clEnqueueNDRangeKernel(q, ka, 1, NULL, &g, NULL, 0, NULL, &ec), "kernel for callback");
    ck(clSetEventCallback(ec, CL_COMPLETE, on_event, &kcb), "clSetEventCallback CL_COMPLETE");
    ck(clFinish(q), "clFinish");
    if (ckv(wait_fired(&kcb), "kernel callback fired", "not within 2 s"))
        ckv(kcb.status == CL_COMPLETE && kcb.event == ec, "kernel callback arguments", "status %d", kcb.status);
    clReleaseEvent(ec);

    /* Markers and barriers. */
    cl_event ea, em, eb2;
    ck(clEnqueueNDRangeKernel(q, ka, 1, NULL, &g, NULL, 0, NULL, &ea), "kernel before marker");
    ck(clEnqueueMarkerWithWaitList(q, 1, &ea, &em), "clEnqueueMarkerWithWaitList");
    ck(clEnqueueBarrierWithWaitList(q, 0, NULL, &eb2), "clEnqueueBarrierWithWaitList");
    ck(clWaitForEvents(1, &eb2), "wait for barrier");
    check_event(em, CL_COMMAND_MARKER, q, "marker event");
    check_event(eb2, CL_COMMAND_BARRIER, q, "barrier event");
    cl_event ems;
    ck(clEnqueueMarkerWithWaitList(q, 0, NULL, &ems), "marker without wait list");
    ck(clWaitForEvents(1, &ems), "wait for marker");
    clReleaseEvent(ea);
    clReleaseEvent(em);
    clReleaseEvent(eb2);
    clReleaseEvent(ems);

    /* Two queues: q2's kernel waits on q's write. */
    for (size_t i = 0; i < N; i++)
        in[i] = (cl_uint)(i + 100000);
    cl_event ex;
    cl_uint k2 = 3;
    ck(clEnqueueWriteBuffer(q, bi, CL_FALSE, 0, sizeof in, in, 0, NULL, &ex), "queue 1: write");
    ck(clFlush(q), "queue 1: flush");
    ck(clSetKernelArg(ka, 2, sizeof k2, &k2), "set arg for queue 2");
    ck(clEnqueueNDRangeKernel(q2, ka, 1, NULL, &g, NULL, 1, &ex, NULL), "queue 2: kernel waits on queue 1 event");
    ck(clEnqueueReadBuffer(q2, bo, CL_TRUE, 0, sizeof h, h, 0, NULL, NULL), "queue 2: read");
    for (size_t i = 0; i < N; i++)
        want[i] = in[i] + 3;
    same_u32(h, want, N, "cross-queue dependency result");
    hash(h, sizeof h);
    clReleaseEvent(ex);

    /* Out-of-order queue: independent kernels, a dependent one, a barrier. */
    if (qo) {
        cl_kernel kf1 = mkkernel(prog, "fill_pattern"), kf2 = mkkernel(prog, "fill_pattern");
        cl_kernel ka2 = mkkernel(prog, "add_k");
        cl_mem bx = mkbuf(CL_MEM_READ_WRITE, sizeof in, NULL, "ooo buffer x");
        cl_mem by = mkbuf(CL_MEM_READ_WRITE, sizeof in, NULL, "ooo buffer y");
        cl_mem bz = mkbuf(CL_MEM_READ_WRITE, sizeof in, NULL, "ooo buffer z");
        cl_uint s1 = 11, s2 = 22, add = 1;
        cl_event e1, e2, e3;
        clSetKernelArg(kf1, 0, sizeof bx, &bx);
        clSetKernelArg(kf1, 1, sizeof s1, &s1);
        clSetKernelArg(kf2, 0, sizeof by, &by);
        clSetKernelArg(kf2, 1, sizeof s2, &s2);
        clSetKernelArg(ka2, 0, sizeof bx, &bx);
        clSetKernelArg(ka2, 1, sizeof bz, &bz);
        clSetKernelArg(ka2, 2, sizeof add, &add);
        ck(clEnqueueNDRangeKernel(qo, kf1, 1, NULL, &g, NULL, 0, NULL, &e1), "ooo: kernel 1");
        ck(clEnqueueNDRangeKernel(qo, kf2, 1, NULL, &g, NULL, 0, NULL, &e2), "ooo: kernel 2");
        ck(clEnqueueNDRangeKernel(qo, ka2, 1, NULL, &g, NULL, 1, &e1, &e3), "ooo: kernel 3 waits on 1");
        ck(clEnqueueBarrierWithWaitList(qo, 0, NULL, NULL), "ooo: barrier");
        ck(clEnqueueReadBuffer(qo, bz, CL_TRUE, 0, sizeof h, h, 0, NULL, NULL), "ooo: read after barrier");
        for (size_t i = 0; i < N; i++)
            want[i] = pattern(i, 11) + 1;
        same_u32(h, want, N, "ooo dependent result");
        hash(h, sizeof h);
        read_check_pattern(qo, by, N, 22, "ooo independent result");
        ck(clFinish(qo), "ooo: clFinish");
        clReleaseEvent(e1);
        clReleaseEvent(e2);
        clReleaseEvent(e3);
        clReleaseMemObject(bx);
        clReleaseMemObject(by);
        clReleaseMemObject(bz);
        clReleaseKernel(kf1);
        clReleaseKernel(kf2);
        clReleaseKernel(ka2);
    }
    clReleaseKernel(ka);
    clReleaseMemObject(bi);
    clReleaseMemObject(bo);
}

static void refcounts(void)
{
    cl_int err;
    REFCOUNT("context", ctx, clRetainContext, clReleaseContext, ctx_refs);
    REFCOUNT("queue", q, clRetainCommandQueue, clReleaseCommandQueue, queue_refs);
    cl_mem b = mkbuf(CL_MEM_READ_WRITE, 64, NULL, "refcount buffer");
    REFCOUNT("buffer", b, clRetainMemObject, clReleaseMemObject, mem_refs);
    REFCOUNT("program", prog, clRetainProgram, clReleaseProgram, prog_refs);
    cl_kernel k = mkkernel(prog, "add_k");
    REFCOUNT("kernel", k, clRetainKernel, clReleaseKernel, kern_refs);
    ck(clRetainDevice(dev), "clRetainDevice (root device)");
    ck(clReleaseDevice(dev), "clReleaseDevice (root device)");

    cl_bool images = CL_FALSE;
    clGetDeviceInfo(dev, CL_DEVICE_IMAGE_SUPPORT, sizeof images, &images, NULL);
    if (images) {
        cl_sampler s = clCreateSampler(ctx, CL_FALSE, CL_ADDRESS_CLAMP_TO_EDGE, CL_FILTER_NEAREST, &err);
        if (ck(err, "clCreateSampler")) {
            cl_addressing_mode am = 0;
            cl_filter_mode fm = 0;
            GET(clGetSamplerInfo, s, CL_SAMPLER_ADDRESSING_MODE, am, "sampler ADDRESSING_MODE");
            ckv(am == CL_ADDRESS_CLAMP_TO_EDGE, "sampler ADDRESSING_MODE as given", "0x%x", am);
            GET(clGetSamplerInfo, s, CL_SAMPLER_FILTER_MODE, fm, "sampler FILTER_MODE");
            ckv(fm == CL_FILTER_NEAREST, "sampler FILTER_MODE as given", "0x%x", fm);
            REFCOUNT("sampler", s, clRetainSampler, clReleaseSampler, sampler_refs);
            ck(clReleaseSampler(s), "release sampler");
        }
    } else {
        skip("sampler", "device has no image support");
    }

    /* An object outlives the application's release while another holds
     * it: a kernel keeps its program, a sub-buffer its parent. */
    cl_program p2 = NULL;
    cl_kernel k2 = NULL;
    p2 = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
    if (ck(err, "program for lifetime check") && ck(clBuildProgram(p2, 1, &dev, BUILD_OPTIONS, NULL, NULL), "build it")) {
        k2 = mkkernel(p2, "fill_pattern");
        ck(clReleaseProgram(p2), "release program while its kernel lives");
        cl_mem bb = mkbuf(CL_MEM_READ_WRITE, N * sizeof(cl_uint), NULL, "buffer for lifetime check");
        run_fill(q, k2, bb, N, 3, "kernel of a released program");
        read_check_pattern(q, bb, N, 3, "kernel of a released program output");
        clReleaseMemObject(bb);
        ck(clReleaseKernel(k2), "release that kernel");
    }
    ck(clReleaseKernel(k), "release kernel");
    ck(clReleaseMemObject(b), "release buffer");
}

int main(int argc, char **argv)
{
    cltest_init("api_coverage");
    cltest_args_check(argc, argv, "", "");

    platform_and_device();
    context_and_queues();
    program_build();
    failing_builds();
    binaries_and_linking();
    kernel_objects();
    buffers();
    rect_transfers();
    ndrange();
    events();
    refcounts();

    ck(clFlush(q), "clFlush");
    ck(clFinish(q), "clFinish");
    ck(clFinish(q2), "clFinish queue 2");
    ck(clReleaseProgram(prog), "release program");
    if (qo)
        ck(clReleaseCommandQueue(qo), "release out-of-order queue");
    ck(clReleaseCommandQueue(qp), "release profiling queue");
    ck(clReleaseCommandQueue(q2), "release queue 2");
    ck(clReleaseCommandQueue(q), "release queue");
    ck(clReleaseContext(ctx), "release context");

    printf("checks: %d ok, %d failed\n", passes, failures);
    if (failures)
        cltest_fail("%d check(s) failed", failures);
    cltest_pass(csum);
}
