/* Placed buffers across a checkpoint the backend resumes from: blocking
 * transfers before it, then (after a line on stdin, sent once the
 * checkpoint is taken) transfers and a kernel after it, each checked.
 *
 * Prints "platform: <name>", "before: ok|bad", "ready", then
 * "after: ok|bad" and "kernel: ok|bad". */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N (1 << 20)
#define CHECK(x) do { cl_int e_ = (x); if (e_ != CL_SUCCESS) { printf("error %d at line %d\n", e_, __LINE__); exit(1); } } while (0)

static const char *source = "__kernel void add(__global int *a) { a[get_global_id(0)] += 1; }\n";

/* Writes `base + i` to the buffer, reads it back and compares. */
static const char *round_trip(cl_command_queue q, cl_mem buf, int *h, int *g, int base) {
    for (int i = 0; i < N; i++)
        h[i] = base + i;
    CHECK(clEnqueueWriteBuffer(q, buf, CL_TRUE, 0, N * sizeof(int), h, 0, NULL, NULL));
    memset(g, 0, N * sizeof(int));
    CHECK(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, N * sizeof(int), g, 0, NULL, NULL));
    return memcmp(g, h, N * sizeof(int)) == 0 ? "ok" : "bad";
}

int main(void) {
    cl_platform_id platform;
    cl_device_id device;
    cl_int err;
    CHECK(clGetPlatformIDs(1, &platform, NULL));
    CHECK(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL));
    char name[256] = "";
    clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof name, name, NULL);
    printf("platform: %s\n", name);
    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    CHECK(err);
    cl_command_queue q = clCreateCommandQueueWithProperties(context, device, NULL, &err);
    CHECK(err);
    cl_program program = clCreateProgramWithSource(context, 1, &source, NULL, &err);
    CHECK(err);
    CHECK(clBuildProgram(program, 1, &device, "", NULL, NULL));
    cl_kernel add = clCreateKernel(program, "add", &err);
    CHECK(err);
    cl_mem buf = clCreateBuffer(context, CL_MEM_READ_WRITE, N * sizeof(int), NULL, &err);
    CHECK(err);
    int *h = malloc(N * sizeof(int)), *g = malloc(N * sizeof(int));

    printf("before: %s\n", round_trip(q, buf, h, g, 1000));
    printf("ready\n");
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin))
        return 1;

    printf("after: %s\n", round_trip(q, buf, h, g, 5000));
    size_t n = N;
    CHECK(clSetKernelArg(add, 0, sizeof buf, &buf));
    CHECK(clEnqueueNDRangeKernel(q, add, 1, NULL, &n, NULL, 0, NULL, NULL));
    CHECK(clEnqueueReadBuffer(q, buf, CL_TRUE, 0, N * sizeof(int), g, 0, NULL, NULL));
    int good = 1;
    for (int i = 0; i < N && good; i++)
        good = g[i] == 5001 + i;
    printf("kernel: %s\n", good ? "ok" : "bad");

    clReleaseMemObject(buf);
    clReleaseKernel(add);
    clReleaseProgram(program);
    clReleaseCommandQueue(q);
    clReleaseContext(context);
    free(h);
    free(g);
    return 0;
}
