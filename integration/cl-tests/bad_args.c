/* bad_args: a hostile caller. Each check makes one invalid call and expects
 * the error code the OpenCL 1.2 specification names for it; it prints
 * "ok <what>: <code>" or "FAIL <what>: <code>, expected <code>". Where a
 * driver (PoCL) returns a different code that the specification also
 * allows, both are accepted and the line says so.
 *
 * Using a released object is undefined behaviour for a real driver (PoCL
 * may crash), so those checks run only with CLTEST_RELEASED_HANDLES=1 (the
 * vgpu run sets it: the vgpu ICD must answer them with an error).
 *
 * The checksum covers the sequence of codes returned by the checks with a
 * single right answer (released-handle checks, spec-allowed alternatives
 * and known driver deviations excluded), so a native and a vgpu run agree
 * only if every such call failed the same way. */
#include "cltest.h"

#define NOALT 1 /* no alternative code: 1 is no OpenCL status */

static int failures, passes;
static uint64_t csum = CLTEST_FNV_INIT;

static void expect_(const char *what, cl_int got, cl_int want, cl_int alt, int hashed)
{
    /* Only checks with a single right answer enter the checksum. */
    if (hashed && alt == NOALT)
        csum = cltest_fnv1a(csum, &got, sizeof got);
    if (got == want) {
        printf("ok %s: %s\n", what, cltest_err_name(got));
        passes++;
    } else if (alt != NOALT && got == alt) {
        printf("ok %s: %s (the spec also allows it; %s is the 1.2 code)\n", what, cltest_err_name(got),
               cltest_err_name(want));
        passes++;
    } else {
        printf("FAIL %s: %s (%d), expected %s\n", what, cltest_err_name(got), (int)got, cltest_err_name(want));
        failures++;
    }
}

#define EXPECT(what, got, want) expect_(what, got, want, NOALT, 1)
#define EXPECT2(what, got, want, alt) expect_(what, got, want, alt, 1)
#define EXPECT_RELEASED(what, got, want) expect_(what, got, want, NOALT, 0)
/* A known driver deviation from the spec: accepted, said so, and left out
 * of the checksum (the vgpu ICD may answer with the spec's code). */
#define EXPECT_DEVIATION(what, got, want, deviation) expect_deviation(what, got, want, deviation)

static void expect_deviation(const char *what, cl_int got, cl_int want, cl_int deviation)
{
    if (got == deviation && got != want) {
        printf("ok %s: %s (known driver deviation: the spec says %s)\n", what, cltest_err_name(got),
               cltest_err_name(want));
        passes++;
        return;
    }
    expect_(what, got, want, NOALT, 0);
}

static const char *src =
    "__kernel void k(__global uint *out, uint v)\n"
    "{\n"
    "    out[get_global_id(0)] = v;\n"
    "}\n"
    "__kernel void kl(__global uint *out, __local uint *tmp)\n"
    "{\n"
    "    tmp[get_local_id(0)] = 1;\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    out[get_global_id(0)] = tmp[0];\n"
    "}\n"
    "__kernel __attribute__((reqd_work_group_size(8, 1, 1)))\n"
    "void kr(__global uint *out)\n"
    "{\n"
    "    out[get_global_id(0)] = 2;\n"
    "}\n";

#define BUF 4096

static cltest_env A;          /* context A with its queue */
static cl_context ctxB;       /* a second context on the same device */
static cl_command_queue qB;
static cl_program progA, progB;
static cl_kernel kA, kB;
static cl_mem bufA, bufB;

static void release_mem(cl_mem m) { if (m) clReleaseMemObject(m); }

static void info_queries(void)
{
    char small[1];
    cl_platform_id plats[1];
    cl_device_id devs[1];
    cl_uint n = 0;

    EXPECT("clGetPlatformIDs(0, NULL, NULL)", clGetPlatformIDs(0, NULL, NULL), CL_INVALID_VALUE);
    EXPECT("clGetPlatformIDs num_entries 0 with a list", clGetPlatformIDs(0, plats, NULL), CL_INVALID_VALUE);
    EXPECT_DEVIATION("clGetDeviceIDs invalid device type",
                     clGetDeviceIDs(A.platform, (cl_device_type)1 << 40, 1, devs, &n), CL_INVALID_DEVICE_TYPE,
                     CL_DEVICE_NOT_FOUND);
    EXPECT("clGetDeviceIDs num_entries 0 with a list", clGetDeviceIDs(A.platform, CL_DEVICE_TYPE_ALL, 0, devs, NULL),
           CL_INVALID_VALUE);
    EXPECT("clGetPlatformInfo value too small", clGetPlatformInfo(A.platform, CL_PLATFORM_NAME, 1, small, NULL),
           CL_INVALID_VALUE);
    size_t ret = 0;
    EXPECT("clGetPlatformInfo unknown param", clGetPlatformInfo(A.platform, 0x7fff, 0, NULL, &ret), CL_INVALID_VALUE);
    EXPECT("clGetDeviceInfo value too small", clGetDeviceInfo(A.device, CL_DEVICE_NAME, 1, small, NULL),
           CL_INVALID_VALUE);
    size_t wg = 0;
    EXPECT("clGetDeviceInfo size_t value in 1 byte",
           clGetDeviceInfo(A.device, CL_DEVICE_MAX_WORK_GROUP_SIZE, 1, &wg, NULL), CL_INVALID_VALUE);
    EXPECT("clGetDeviceInfo unknown param", clGetDeviceInfo(A.device, 0x7fff, 0, NULL, &ret), CL_INVALID_VALUE);
    EXPECT("clGetDeviceInfo NULL device", clGetDeviceInfo(NULL, CL_DEVICE_NAME, 0, NULL, &ret), CL_INVALID_DEVICE);
    EXPECT("clGetMemObjectInfo value too small", clGetMemObjectInfo(bufA, CL_MEM_SIZE, 1, small, NULL),
           CL_INVALID_VALUE);
    EXPECT("clGetKernelWorkGroupInfo unknown param",
           clGetKernelWorkGroupInfo(kA, A.device, 0x7fff, sizeof wg, &wg, NULL), CL_INVALID_VALUE);
    EXPECT("clGetKernelInfo unknown param", clGetKernelInfo(kA, 0x7fff, 0, NULL, &ret), CL_INVALID_VALUE);
}

static void contexts_and_queues(void)
{
    cl_int err = 0;
    cl_context c = clCreateContext(NULL, 0, NULL, NULL, NULL, &err);
    EXPECT("clCreateContext no devices", err, CL_INVALID_VALUE);
    if (c)
        clReleaseContext(c);
    c = clCreateContext(NULL, 1, &A.device, NULL, (void *)&err, &err);
    EXPECT("clCreateContext user_data without callback", err, CL_INVALID_VALUE);
    if (c)
        clReleaseContext(c);
    cl_command_queue q = clCreateCommandQueue(A.context, A.device, (cl_command_queue_properties)1 << 20, &err);
    EXPECT("clCreateCommandQueue unknown property bit", err, CL_INVALID_VALUE);
    if (q)
        clReleaseCommandQueue(q);
    q = clCreateCommandQueue(NULL, A.device, 0, &err);
    EXPECT("clCreateCommandQueue NULL context", err, CL_INVALID_CONTEXT);
    if (q)
        clReleaseCommandQueue(q);
    EXPECT("clFinish NULL queue", clFinish(NULL), CL_INVALID_COMMAND_QUEUE);
    EXPECT("clFlush NULL queue", clFlush(NULL), CL_INVALID_COMMAND_QUEUE);
    EXPECT("clReleaseContext NULL", clReleaseContext(NULL), CL_INVALID_CONTEXT);
    EXPECT("clRetainCommandQueue NULL", clRetainCommandQueue(NULL), CL_INVALID_COMMAND_QUEUE);
}

static void buffers(void)
{
    cl_int err = 0;
    cl_uint host[16];
    cl_ulong maxalloc = 0;
    clGetDeviceInfo(A.device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof maxalloc, &maxalloc, NULL);

    cl_mem m = clCreateBuffer(A.context, CL_MEM_READ_WRITE, 0, NULL, &err);
    EXPECT("clCreateBuffer size 0", err, CL_INVALID_BUFFER_SIZE);
    release_mem(m);
    m = clCreateBuffer(NULL, CL_MEM_READ_WRITE, 64, NULL, &err);
    EXPECT("clCreateBuffer NULL context", err, CL_INVALID_CONTEXT);
    release_mem(m);
    m = clCreateBuffer(A.context, CL_MEM_COPY_HOST_PTR, 64, NULL, &err);
    EXPECT("clCreateBuffer COPY_HOST_PTR with NULL host_ptr", err, CL_INVALID_HOST_PTR);
    release_mem(m);
    m = clCreateBuffer(A.context, CL_MEM_READ_WRITE, 64, host, &err);
    EXPECT("clCreateBuffer host_ptr without USE/COPY flag", err, CL_INVALID_HOST_PTR);
    release_mem(m);
    m = clCreateBuffer(A.context, CL_MEM_READ_ONLY | CL_MEM_WRITE_ONLY, 64, NULL, &err);
    EXPECT("clCreateBuffer READ_ONLY|WRITE_ONLY", err, CL_INVALID_VALUE);
    release_mem(m);
    m = clCreateBuffer(A.context, CL_MEM_USE_HOST_PTR | CL_MEM_ALLOC_HOST_PTR, 64, host, &err);
    EXPECT("clCreateBuffer USE_HOST_PTR|ALLOC_HOST_PTR", err, CL_INVALID_VALUE);
    release_mem(m);
    m = clCreateBuffer(A.context, CL_MEM_READ_WRITE, (size_t)maxalloc + 4096, NULL, &err);
    EXPECT("clCreateBuffer above MAX_MEM_ALLOC_SIZE", err, CL_INVALID_BUFFER_SIZE);
    release_mem(m);

    cl_buffer_region r = { 1, 64 };
    m = clCreateSubBuffer(bufA, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
    EXPECT("clCreateSubBuffer misaligned origin", err, CL_MISALIGNED_SUB_BUFFER_OFFSET);
    release_mem(m);
    r.origin = 0;
    r.size = BUF + 1;
    m = clCreateSubBuffer(bufA, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
    EXPECT("clCreateSubBuffer beyond the parent", err, CL_INVALID_VALUE);
    release_mem(m);
    r.size = 0;
    m = clCreateSubBuffer(bufA, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
    EXPECT("clCreateSubBuffer size 0", err, CL_INVALID_BUFFER_SIZE);
    release_mem(m);
    r.size = 64;
    m = clCreateSubBuffer(bufA, CL_MEM_READ_WRITE, 0x7fff, &r, &err);
    EXPECT("clCreateSubBuffer unknown create type", err, CL_INVALID_VALUE);
    release_mem(m);
    cl_mem sub = clCreateSubBuffer(bufA, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
    if (err == CL_SUCCESS) {
        m = clCreateSubBuffer(sub, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &r, &err);
        EXPECT("clCreateSubBuffer of a sub-buffer", err, CL_INVALID_MEM_OBJECT);
        release_mem(m);
        clReleaseMemObject(sub);
    } else {
        EXPECT("clCreateSubBuffer (valid, for the next check)", err, CL_SUCCESS);
    }

    unsigned char big[BUF + 256];
    cl_event e = NULL, *none = NULL;
    EXPECT("clEnqueueReadBuffer beyond the buffer",
           clEnqueueReadBuffer(A.queue, bufA, CL_TRUE, BUF - 100, 200, big, 0, NULL, NULL), CL_INVALID_VALUE);
    EXPECT("clEnqueueReadBuffer offset past the end",
           clEnqueueReadBuffer(A.queue, bufA, CL_TRUE, BUF + 4, 4, big, 0, NULL, NULL), CL_INVALID_VALUE);
    EXPECT("clEnqueueReadBuffer NULL ptr",
           clEnqueueReadBuffer(A.queue, bufA, CL_TRUE, 0, 4, NULL, 0, NULL, NULL), CL_INVALID_VALUE);
    EXPECT("clEnqueueWriteBuffer beyond the buffer",
           clEnqueueWriteBuffer(A.queue, bufA, CL_TRUE, 0, BUF + 4, big, 0, NULL, NULL), CL_INVALID_VALUE);
    EXPECT("clEnqueueWriteBuffer NULL queue",
           clEnqueueWriteBuffer(NULL, bufA, CL_TRUE, 0, 4, big, 0, NULL, NULL), CL_INVALID_COMMAND_QUEUE);
    EXPECT("clEnqueueWriteBuffer NULL buffer",
           clEnqueueWriteBuffer(A.queue, NULL, CL_TRUE, 0, 4, big, 0, NULL, NULL), CL_INVALID_MEM_OBJECT);
    EXPECT("clEnqueueReadBuffer 1 event, NULL list",
           clEnqueueReadBuffer(A.queue, bufA, CL_TRUE, 0, 4, big, 1, none, NULL), CL_INVALID_EVENT_WAIT_LIST);
    EXPECT("clEnqueueReadBuffer 0 events, non-NULL list",
           clEnqueueReadBuffer(A.queue, bufA, CL_TRUE, 0, 4, big, 0, &e, NULL), CL_INVALID_EVENT_WAIT_LIST);
    EXPECT("clEnqueueCopyBuffer overlapping regions",
           clEnqueueCopyBuffer(A.queue, bufA, bufA, 0, 64, 128, 0, NULL, NULL), CL_MEM_COPY_OVERLAP);
    EXPECT("clEnqueueCopyBuffer beyond the source",
           clEnqueueCopyBuffer(A.queue, bufA, bufA, BUF - 64, 0, 128, 0, NULL, NULL), CL_INVALID_VALUE);
    cl_uint pat = 0;
    EXPECT("clEnqueueFillBuffer pattern size 3",
           clEnqueueFillBuffer(A.queue, bufA, &pat, 3, 0, 12, 0, NULL, NULL), CL_INVALID_VALUE);
    EXPECT("clEnqueueFillBuffer offset not a pattern multiple",
           clEnqueueFillBuffer(A.queue, bufA, &pat, 4, 2, 8, 0, NULL, NULL), CL_INVALID_VALUE);
    EXPECT("clEnqueueFillBuffer NULL pattern",
           clEnqueueFillBuffer(A.queue, bufA, NULL, 4, 0, 8, 0, NULL, NULL), CL_INVALID_VALUE);
    void *p = clEnqueueMapBuffer(A.queue, bufA, CL_TRUE, CL_MAP_READ, BUF - 8, 64, 0, NULL, NULL, &err);
    EXPECT("clEnqueueMapBuffer beyond the buffer", err, CL_INVALID_VALUE);
    if (p)
        clEnqueueUnmapMemObject(A.queue, bufA, p, 0, NULL, NULL);
    EXPECT("clEnqueueUnmapMemObject pointer never mapped",
           clEnqueueUnmapMemObject(A.queue, bufA, big, 0, NULL, NULL), CL_INVALID_VALUE);
    size_t o[3] = { 0, 0, 0 }, reg[3] = { 64, 2, 1 };
    EXPECT("clEnqueueReadBufferRect row pitch below region width",
           clEnqueueReadBufferRect(A.queue, bufA, CL_TRUE, o, o, reg, 32, 0, 64, 0, big, 0, NULL, NULL),
           CL_INVALID_VALUE);
    EXPECT("clReleaseMemObject NULL", clReleaseMemObject(NULL), CL_INVALID_MEM_OBJECT);
    clFinish(A.queue);
}

static void other_context(void)
{
    cl_int err = 0;
    unsigned char h[64];
    EXPECT("buffer of context B read on a queue of context A",
           clEnqueueReadBuffer(A.queue, bufB, CL_TRUE, 0, 64, h, 0, NULL, NULL), CL_INVALID_CONTEXT);
    EXPECT("copy from a buffer of context B on a queue of A",
           clEnqueueCopyBuffer(A.queue, bufB, bufA, 0, 0, 64, 0, NULL, NULL), CL_INVALID_CONTEXT);
    size_t g = 64;
    cl_uint v = 1;
    clSetKernelArg(kB, 0, sizeof bufB, &bufB);
    clSetKernelArg(kB, 1, sizeof v, &v);
    EXPECT("kernel of context B enqueued on a queue of A",
           clEnqueueNDRangeKernel(A.queue, kB, 1, NULL, &g, NULL, 0, NULL, NULL), CL_INVALID_CONTEXT);
    cl_event ueB = clCreateUserEvent(ctxB, &err);
    if (err == CL_SUCCESS) {
        err = clEnqueueMarkerWithWaitList(A.queue, 1, &ueB, NULL);
        EXPECT("event of context B in a wait list on a queue of A", err, CL_INVALID_CONTEXT);
        cl_event ueA = clCreateUserEvent(A.context, &err);
        cl_event both[2] = { ueA, ueB };
        clSetUserEventStatus(ueA, CL_COMPLETE);
        clSetUserEventStatus(ueB, CL_COMPLETE);
        EXPECT("clWaitForEvents across two contexts", clWaitForEvents(2, both), CL_INVALID_CONTEXT);
        clReleaseEvent(ueA);
        clReleaseEvent(ueB);
    } else {
        EXPECT("clCreateUserEvent in context B", err, CL_SUCCESS);
    }
    clFinish(A.queue);
}

static void programs_and_kernels(void)
{
    cl_int err = 0;
    const char *none = NULL;
    cl_program p = clCreateProgramWithSource(A.context, 0, &src, NULL, &err);
    EXPECT("clCreateProgramWithSource count 0", err, CL_INVALID_VALUE);
    if (p)
        clReleaseProgram(p);
    p = clCreateProgramWithSource(A.context, 1, &none, NULL, &err);
    EXPECT("clCreateProgramWithSource NULL string", err, CL_INVALID_VALUE);
    if (p)
        clReleaseProgram(p);

    p = clCreateProgramWithSource(A.context, 1, &src, NULL, &err);
    cl_kernel k = clCreateKernel(p, "k", &err);
    EXPECT("clCreateKernel on a program never built", err, CL_INVALID_PROGRAM_EXECUTABLE);
    if (k)
        clReleaseKernel(k);
    err = clBuildProgram(p, 1, &A.device, "-cl-no-such-option", NULL, NULL);
    EXPECT2("clBuildProgram unknown option", err, CL_INVALID_BUILD_OPTIONS, CL_BUILD_PROGRAM_FAILURE);
    clReleaseProgram(p);

    const unsigned char junk[64] = "this is not a device binary";
    const unsigned char *jp = junk;
    size_t jsize = sizeof junk;
    cl_int bstatus = 0;
    p = clCreateProgramWithBinary(A.context, 1, &A.device, &jsize, &jp, &bstatus, &err);
    if (err == CL_SUCCESS) {
        /* Accepted at creation: must fail at build. */
        err = clBuildProgram(p, 1, &A.device, NULL, NULL, NULL);
        EXPECT2("garbage binary (rejected at build)", err, CL_INVALID_BINARY, CL_BUILD_PROGRAM_FAILURE);
    } else {
        EXPECT("clCreateProgramWithBinary garbage", err, CL_INVALID_BINARY);
        EXPECT("garbage binary status", bstatus, CL_INVALID_BINARY);
    }
    if (p)
        clReleaseProgram(p);

    k = clCreateKernel(progA, "no_such_kernel", &err);
    EXPECT("clCreateKernel unknown name", err, CL_INVALID_KERNEL_NAME);
    if (k)
        clReleaseKernel(k);
    k = clCreateKernel(progA, NULL, &err);
    EXPECT("clCreateKernel NULL name", err, CL_INVALID_VALUE);
    if (k)
        clReleaseKernel(k);

    cl_uint v = 0;
    cl_ulong v8 = 0;
    EXPECT("clSetKernelArg index == NUM_ARGS", clSetKernelArg(kA, 2, sizeof v, &v), CL_INVALID_ARG_INDEX);
    EXPECT("clSetKernelArg uint with 8 bytes", clSetKernelArg(kA, 1, sizeof v8, &v8), CL_INVALID_ARG_SIZE);
    EXPECT("clSetKernelArg buffer with 4 bytes", clSetKernelArg(kA, 0, 4, &bufA), CL_INVALID_ARG_SIZE);
    EXPECT("clSetKernelArg scalar with NULL value", clSetKernelArg(kA, 1, sizeof v, NULL), CL_INVALID_ARG_VALUE);
    cl_kernel kl = clCreateKernel(progA, "kl", &err);
    EXPECT("clSetKernelArg __local size 0", clSetKernelArg(kl, 1, 0, NULL), CL_INVALID_ARG_SIZE);
    EXPECT("clSetKernelArg __local with a value", clSetKernelArg(kl, 1, 16, &v), CL_INVALID_ARG_VALUE);
    EXPECT("clRetainKernel NULL", clRetainKernel(NULL), CL_INVALID_KERNEL);

    char name[64];
    err = clGetKernelArgInfo(kA, 0, CL_KERNEL_ARG_NAME, sizeof name, name, NULL);
    EXPECT2("clGetKernelArgInfo without -cl-kernel-arg-info", err, CL_KERNEL_ARG_INFO_NOT_AVAILABLE, CL_SUCCESS);
    EXPECT("clGetKernelArgInfo bad index",
           clGetKernelArgInfo(kA, 9, CL_KERNEL_ARG_NAME, sizeof name, name, NULL), CL_INVALID_ARG_INDEX);

    /* NDRange checks: kl's args are all set, so only the launch is wrong. */
    size_t g[4] = { 64, 1, 1, 1 }, l[4] = { 8, 1, 1, 1 };
    clSetKernelArg(kl, 0, sizeof bufA, &bufA);
    clSetKernelArg(kl, 1, 64 * sizeof(cl_uint), NULL);
    EXPECT("NDRange work_dim 0", clEnqueueNDRangeKernel(A.queue, kl, 0, NULL, g, l, 0, NULL, NULL),
           CL_INVALID_WORK_DIMENSION);
    EXPECT("NDRange work_dim 4", clEnqueueNDRangeKernel(A.queue, kl, 4, NULL, g, l, 0, NULL, NULL),
           CL_INVALID_WORK_DIMENSION);
    size_t g100 = 100;
    EXPECT("NDRange local size not dividing global (1.2 program)",
           clEnqueueNDRangeKernel(A.queue, kl, 1, NULL, &g100, l, 0, NULL, NULL), CL_INVALID_WORK_GROUP_SIZE);
    size_t maxwg = 0;
    clGetDeviceInfo(A.device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof maxwg, &maxwg, NULL);
    size_t big = maxwg * 2;
    EXPECT2("NDRange local size above the maximum",
            clEnqueueNDRangeKernel(A.queue, kl, 1, NULL, &big, &big, 0, NULL, NULL), CL_INVALID_WORK_GROUP_SIZE,
            CL_INVALID_WORK_ITEM_SIZE);
    size_t g0 = 0;
    EXPECT2("NDRange global size 0", clEnqueueNDRangeKernel(A.queue, kl, 1, NULL, &g0, NULL, 0, NULL, NULL),
            CL_INVALID_GLOBAL_WORK_SIZE, CL_SUCCESS);
    EXPECT_DEVIATION("NDRange NULL global size",
                     clEnqueueNDRangeKernel(A.queue, kl, 1, NULL, NULL, NULL, 0, NULL, NULL),
                     CL_INVALID_GLOBAL_WORK_SIZE, CL_SUCCESS);
    cl_kernel kr = clCreateKernel(progA, "kr", &err);
    clSetKernelArg(kr, 0, sizeof bufA, &bufA);
    size_t l4 = 4;
    EXPECT("NDRange local size other than reqd_work_group_size",
           clEnqueueNDRangeKernel(A.queue, kr, 1, NULL, g, &l4, 0, NULL, NULL), CL_INVALID_WORK_GROUP_SIZE);
    EXPECT("NDRange NULL local size with reqd_work_group_size",
           clEnqueueNDRangeKernel(A.queue, kr, 1, NULL, g, NULL, 0, NULL, NULL), CL_INVALID_WORK_GROUP_SIZE);
    cl_kernel fresh = clCreateKernel(progA, "k", &err);
    EXPECT("NDRange with arguments not set", clEnqueueNDRangeKernel(A.queue, fresh, 1, NULL, g, NULL, 0, NULL, NULL),
           CL_INVALID_KERNEL_ARGS);
    clFinish(A.queue);
    clReleaseKernel(fresh);
    clReleaseKernel(kr);
    clReleaseKernel(kl);
}

static void events(void)
{
    cl_int err = 0;
    EXPECT("clWaitForEvents(0, NULL)", clWaitForEvents(0, NULL), CL_INVALID_VALUE);
    EXPECT("clReleaseEvent NULL", clReleaseEvent(NULL), CL_INVALID_EVENT);
    cl_event u = clCreateUserEvent(NULL, &err);
    EXPECT("clCreateUserEvent NULL context", err, CL_INVALID_CONTEXT);
    if (u)
        clReleaseEvent(u);

    u = clCreateUserEvent(A.context, &err);
    if (err != CL_SUCCESS) {
        EXPECT("clCreateUserEvent", err, CL_SUCCESS);
        return;
    }
    cl_ulong t = 0;
    EXPECT("profiling info of a user event", clGetEventProfilingInfo(u, CL_PROFILING_COMMAND_END, sizeof t, &t, NULL),
           CL_PROFILING_INFO_NOT_AVAILABLE);
    EXPECT("clSetUserEventStatus CL_SUBMITTED", clSetUserEventStatus(u, CL_SUBMITTED), CL_INVALID_VALUE);
    EXPECT("clSetEventCallback NULL callback", clSetEventCallback(u, CL_COMPLETE, NULL, NULL), CL_INVALID_VALUE);
    EXPECT("clSetUserEventStatus COMPLETE (valid)", clSetUserEventStatus(u, CL_COMPLETE), CL_SUCCESS);
    EXPECT("clSetUserEventStatus a second time", clSetUserEventStatus(u, CL_COMPLETE), CL_INVALID_OPERATION);
    clReleaseEvent(u);

    cl_event ek = NULL;
    size_t g = 64;
    cl_uint v = 3;
    clSetKernelArg(kA, 0, sizeof bufA, &bufA);
    clSetKernelArg(kA, 1, sizeof v, &v);
    if (clEnqueueNDRangeKernel(A.queue, kA, 1, NULL, &g, NULL, 0, NULL, &ek) == CL_SUCCESS) {
        clWaitForEvents(1, &ek);
        EXPECT("clSetUserEventStatus on a kernel event", clSetUserEventStatus(ek, CL_COMPLETE), CL_INVALID_EVENT);
        EXPECT("profiling info without a profiling queue",
               clGetEventProfilingInfo(ek, CL_PROFILING_COMMAND_START, sizeof t, &t, NULL),
               CL_PROFILING_INFO_NOT_AVAILABLE);
        clReleaseEvent(ek);
    }
    EXPECT("clEnqueueMarkerWithWaitList NULL queue", clEnqueueMarkerWithWaitList(NULL, 0, NULL, NULL),
           CL_INVALID_COMMAND_QUEUE);
}

/* Undefined behaviour for real drivers: only with CLTEST_RELEASED_HANDLES=1. */
static void released_handles(void)
{
    cl_int err = 0;
    unsigned char h[16];
    cl_uint v = 0;

    cl_mem m = clCreateBuffer(A.context, CL_MEM_READ_WRITE, 64, NULL, &err);
    clReleaseMemObject(m);
    EXPECT_RELEASED("read from a released buffer",
                    clEnqueueReadBuffer(A.queue, m, CL_TRUE, 0, 16, h, 0, NULL, NULL), CL_INVALID_MEM_OBJECT);
    size_t sz = 0;
    EXPECT_RELEASED("info of a released buffer", clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof sz, &sz, NULL),
                    CL_INVALID_MEM_OBJECT);
    EXPECT_RELEASED("release a released buffer", clReleaseMemObject(m), CL_INVALID_MEM_OBJECT);
    EXPECT_RELEASED("released buffer as a kernel argument", clSetKernelArg(kA, 0, sizeof m, &m),
                    CL_INVALID_MEM_OBJECT);

    cl_kernel k = clCreateKernel(progA, "k", &err);
    clReleaseKernel(k);
    EXPECT_RELEASED("clSetKernelArg on a released kernel", clSetKernelArg(k, 1, sizeof v, &v), CL_INVALID_KERNEL);
    size_t g = 64;
    EXPECT_RELEASED("enqueue a released kernel", clEnqueueNDRangeKernel(A.queue, k, 1, NULL, &g, NULL, 0, NULL, NULL),
                    CL_INVALID_KERNEL);

    cl_program p = clCreateProgramWithSource(A.context, 1, &src, NULL, &err);
    clReleaseProgram(p);
    k = clCreateKernel(p, "k", &err);
    EXPECT_RELEASED("clCreateKernel from a released program", err, CL_INVALID_PROGRAM);

    cl_event u = clCreateUserEvent(A.context, &err);
    clSetUserEventStatus(u, CL_COMPLETE);
    clReleaseEvent(u);
    EXPECT_RELEASED("wait for a released event", clWaitForEvents(1, &u), CL_INVALID_EVENT);

    cl_command_queue q = clCreateCommandQueue(A.context, A.device, 0, &err);
    clReleaseCommandQueue(q);
    EXPECT_RELEASED("clFinish on a released queue", clFinish(q), CL_INVALID_COMMAND_QUEUE);

    /* Not a released handle, but PoCL 3.1 crashes on it. */
    EXPECT_RELEASED("NDRange NULL kernel", clEnqueueNDRangeKernel(A.queue, NULL, 1, NULL, &g, NULL, 0, NULL, NULL),
                    CL_INVALID_KERNEL);

    cl_context c = clCreateContext(NULL, 1, &A.device, NULL, NULL, &err);
    clReleaseContext(c);
    m = clCreateBuffer(c, CL_MEM_READ_WRITE, 64, NULL, &err);
    EXPECT_RELEASED("clCreateBuffer in a released context", err, CL_INVALID_CONTEXT);
}

int main(int argc, char **argv)
{
    cl_int err;
    cltest_init("bad_args");
    cltest_args_check(argc, argv, "", "");

    cltest_setup(&A, 0);
    progA = cltest_build(&A, src, NULL);
    kA = cltest_kernel(progA, "k");
    bufA = cltest_buffer(&A, CL_MEM_READ_WRITE, BUF, NULL);
    ctxB = clCreateContext(NULL, 1, &A.device, NULL, NULL, &err);
    CL_CHECK_ERR(err, "clCreateContext B");
    qB = clCreateCommandQueue(ctxB, A.device, 0, &err);
    CL_CHECK_ERR(err, "clCreateCommandQueue B");
    bufB = clCreateBuffer(ctxB, CL_MEM_READ_WRITE, BUF, NULL, &err);
    CL_CHECK_ERR(err, "clCreateBuffer B");
    progB = clCreateProgramWithSource(ctxB, 1, &src, NULL, &err);
    CL_CHECK_ERR(err, "clCreateProgramWithSource B");
    CL_CHECK(clBuildProgram(progB, 1, &A.device, NULL, NULL, NULL));
    kB = cltest_kernel(progB, "k");

    info_queries();
    contexts_and_queues();
    buffers();
    other_context();
    programs_and_kernels();
    events();
    if (cltest_env_flag("CLTEST_RELEASED_HANDLES"))
        released_handles();
    else
        printf("skip released-handle checks: undefined behaviour for real drivers (set CLTEST_RELEASED_HANDLES=1)\n");

    CL_CHECK(clFinish(A.queue));
    CL_CHECK(clReleaseKernel(kA));
    CL_CHECK(clReleaseKernel(kB));
    CL_CHECK(clReleaseProgram(progA));
    CL_CHECK(clReleaseProgram(progB));
    CL_CHECK(clReleaseMemObject(bufA));
    CL_CHECK(clReleaseMemObject(bufB));
    CL_CHECK(clReleaseCommandQueue(qB));
    CL_CHECK(clReleaseContext(ctxB));
    cltest_teardown(&A);

    printf("checks: %d ok, %d failed\n", passes, failures);
    if (failures)
        cltest_fail("%d check(s) failed", failures);
    cltest_pass(csum);
}
