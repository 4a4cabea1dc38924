/* Blocking transfers keep queue order: through vgpu's loopback a CPU
 * buffer lives in memory shared with the backend and a blocking read or
 * write is a memcpy in this process, which must still come after every
 * earlier command of its queue and never touch memory another buffer's
 * pending command writes.
 *
 * Prints "platform: <name>", then "<case>: ok" or "<case>: bad <detail>"
 * lines. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 65536
#define CHECK(x) do { cl_int e_ = (x); if (e_ != CL_SUCCESS) { printf("error %d at line %d\n", e_, __LINE__); exit(1); } } while (0)

static const char *source =
    "__kernel void add(__global int *a, int v) { a[get_global_id(0)] += v; }\n"
    "__kernel void slow_fill(__global int *a, int v) {\n"
    "    size_t i = get_global_id(0); int x = a[i];\n"
    "    for (int k = 0; k < 20000; k++) x = x * 1103515245 + 12345;\n"
    "    a[i] = v + (x & 0);\n"
    "}\n";

static cl_context context;
static cl_kernel add, slow_fill;

static void run(cl_command_queue q, cl_kernel k, cl_mem buf, int v, size_t n) {
    CHECK(clSetKernelArg(k, 0, sizeof buf, &buf));
    CHECK(clSetKernelArg(k, 1, sizeof v, &v));
    CHECK(clEnqueueNDRangeKernel(q, k, 1, NULL, &n, NULL, 0, NULL, NULL));
}

/* Whether every element of `h` is `base + i * step`; prints the case. */
static void expect(const char *what, const int *h, size_t n, int base, int step) {
    for (size_t i = 0; i < n; i++) {
        if (h[i] != base + (int)i * step) {
            printf("%s: bad [%zu]=%d want %d\n", what, i, h[i], base + (int)i * step);
            return;
        }
    }
    printf("%s: ok\n", what);
}

int main(void) {
    alarm(120);
    cl_platform_id platform;
    cl_device_id device;
    cl_int err;
    CHECK(clGetPlatformIDs(1, &platform, NULL));
    CHECK(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL));
    char name[256] = "";
    clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof name, name, NULL);
    printf("platform: %s\n", name);
    context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    CHECK(err);
    cl_command_queue q = clCreateCommandQueueWithProperties(context, device, NULL, &err);
    CHECK(err);
    cl_command_queue other = clCreateCommandQueueWithProperties(context, device, NULL, &err);
    CHECK(err);
    cl_program program = clCreateProgramWithSource(context, 1, &source, NULL, &err);
    CHECK(err);
    CHECK(clBuildProgram(program, 1, &device, "", NULL, NULL));
    add = clCreateKernel(program, "add", &err);
    CHECK(err);
    slow_fill = clCreateKernel(program, "slow_fill", &err);
    CHECK(err);

    int *h = malloc(N * sizeof(int)), *g = malloc(N * sizeof(int));
    size_t n = N;
    for (size_t i = 0; i < n; i++)
        h[i] = (int)i;
    cl_mem buf = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof(int), h, &err);
    CHECK(err);

    /* The initial contents, read back at once. */
    memset(g, 0, n * sizeof(int));
    CHECK(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, n * sizeof(int), g, 0, NULL, NULL));
    expect("initial contents", g, n, 0, 1);

    /* A read right after a kernel, without clFinish, sees the kernel's result. */
    run(q, add, buf, 5, n);
    CHECK(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, n * sizeof(int), g, 0, NULL, NULL));
    expect("read after kernel", g, n, 5, 1);

    /* A write the kernel after it reads; reads and writes in a row. */
    int same = 1;
    for (int round = 0; round < 4 && same; round++) {
        for (size_t i = 0; i < n; i++)
            h[i] = round * 1000 + (int)i * 2;
        CHECK(clEnqueueWriteBuffer(q, buf, CL_TRUE, 0, n * sizeof(int), h, 0, NULL, NULL));
        CHECK(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, n * sizeof(int), g, 0, NULL, NULL));
        same = memcmp(g, h, n * sizeof(int)) == 0;
    }
    printf("write then read: %s\n", same ? "ok" : "bad");
    run(q, add, buf, 1, n);
    CHECK(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, n * sizeof(int), g, 0, NULL, NULL));
    expect("kernel after write", g, n, 3001, 2);

    /* A slow kernel still running when the write is enqueued: the write
     * lands after it (in-order queue). */
    run(q, slow_fill, buf, 7, n);
    for (size_t i = 0; i < n; i++)
        h[i] = 100 + (int)i;
    CHECK(clEnqueueWriteBuffer(q, buf, CL_TRUE, 0, n * sizeof(int), h, 0, NULL, NULL));
    CHECK(clFinish(q));
    CHECK(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, n * sizeof(int), g, 0, NULL, NULL));
    expect("write after slow kernel", g, n, 100, 1);

    /* Non-blocking transfers: a write on a drained queue, and a read right
     * after a kernel; each must still land in queue order. */
    for (size_t i = 0; i < n; i++)
        h[i] = 200 + (int)i;
    CHECK(clEnqueueWriteBuffer(q, buf, CL_FALSE, 0, n * sizeof(int), h, 0, NULL, NULL));
    run(q, add, buf, 1, n);
    CHECK(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, n * sizeof(int), g, 0, NULL, NULL));
    expect("non-blocking write then kernel", g, n, 201, 1);
    run(q, add, buf, 1, n);
    memset(g, 0, n * sizeof(int));
    CHECK(clEnqueueReadBuffer(q, buf, CL_FALSE, 0, n * sizeof(int), g, 0, NULL, NULL));
    CHECK(clFinish(q));
    expect("non-blocking read after kernel", g, n, 202, 1);
    run(q, slow_fill, buf, 3, n);
    CHECK(clEnqueueWriteBuffer(q, buf, CL_FALSE, 0, n * sizeof(int), h, 0, NULL, NULL));
    CHECK(clFinish(q));
    CHECK(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, n * sizeof(int), g, 0, NULL, NULL));
    expect("non-blocking write after slow kernel", g, n, 200, 1);
    for (size_t i = 0; i < n; i++)
        h[i] = 100 + (int)i;
    CHECK(clEnqueueWriteBuffer(q, buf, CL_TRUE, 0, n * sizeof(int), h, 0, NULL, NULL));

    /* A part through a sub-buffer, and through an offset. */
    cl_uint align_bits = 0;
    CHECK(clGetDeviceInfo(device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, NULL));
    size_t origin = align_bits / 8 > 4096 ? align_bits / 8 : 4096;
    cl_buffer_region region = {origin, 4096};
    cl_mem sub = clCreateSubBuffer(buf, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
    CHECK(err);
    for (size_t i = 0; i < 1024; i++)
        h[i] = -(int)i;
    CHECK(clEnqueueWriteBuffer(q, sub, CL_TRUE, 0, 4096, h, 0, NULL, NULL));
    CHECK(clEnqueueReadBuffer(q, buf, CL_TRUE, origin, 4096, g, 0, NULL, NULL));
    expect("sub-buffer write", g, 1024, 0, -1);
    CHECK(clEnqueueReadBuffer(q, buf, CL_TRUE, origin + 4096, 16, g, 0, NULL, NULL));
    expect("beyond the sub-buffer", g, 4, 100 + (int)(origin + 4096) / 4, 1);
    CHECK(clReleaseMemObject(sub));
    for (size_t i = 0; i < n; i++)
        h[i] = 100 + (int)i;
    CHECK(clEnqueueWriteBuffer(q, buf, CL_TRUE, 0, n * sizeof(int), h, 0, NULL, NULL));

    /* A kernel on another queue, finished there, seen by a read on this one. */
    run(other, add, buf, 10, n);
    CHECK(clFinish(other));
    CHECK(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, n * sizeof(int), g, 0, NULL, NULL));
    expect("read after another queue's kernel", g, n, 110, 1);

    /* A buffer released while a slow kernel on another queue still writes
     * it: a buffer made next must not receive those writes. */
    run(other, slow_fill, buf, 9, n);
    CHECK(clFlush(other));
    CHECK(clReleaseMemObject(buf));
    cl_mem next = clCreateBuffer(context, CL_MEM_READ_WRITE, n * sizeof(int), NULL, &err);
    CHECK(err);
    for (size_t i = 0; i < n; i++)
        h[i] = 50 + (int)i;
    CHECK(clEnqueueWriteBuffer(q, next, CL_TRUE, 0, n * sizeof(int), h, 0, NULL, NULL));
    CHECK(clFinish(other));
    CHECK(clEnqueueReadBuffer(q, next, CL_TRUE, 0, n * sizeof(int), g, 0, NULL, NULL));
    expect("new buffer after a release", g, n, 50, 1);

    /* Releasing a buffer while another queue waits for a user event this
     * thread sets later must return at once (the alarm ends a hang). */
    cl_event gate = clCreateUserEvent(context, &err);
    CHECK(err);
    CHECK(clSetKernelArg(add, 0, sizeof next, &next));
    int one = 1;
    CHECK(clSetKernelArg(add, 1, sizeof one, &one));
    CHECK(clEnqueueNDRangeKernel(other, add, 1, NULL, &n, NULL, 1, &gate, NULL));
    CHECK(clFlush(other));
    cl_mem brief = clCreateBuffer(context, CL_MEM_READ_WRITE, 4096, NULL, &err);
    CHECK(err);
    CHECK(clReleaseMemObject(brief));
    CHECK(clSetUserEventStatus(gate, CL_COMPLETE));
    CHECK(clFinish(other));
    CHECK(clEnqueueReadBuffer(q, next, CL_TRUE, 0, n * sizeof(int), g, 0, NULL, NULL));
    expect("release while a user event is unset", g, n, 51, 1);
    clReleaseEvent(gate);

    CHECK(clReleaseMemObject(next));
    clReleaseKernel(add);
    clReleaseKernel(slow_fill);
    clReleaseProgram(program);
    clReleaseCommandQueue(other);
    clReleaseCommandQueue(q);
    clReleaseContext(context);
    free(h);
    free(g);
    return 0;
}
