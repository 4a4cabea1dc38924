/* A long-running program on sub-devices, for checkpoint and restart: the
 * device partitioned equally, a context on the sub-devices, one queue and
 * one buffer per sub-device, and ITERATIONS launches of an update kernel on
 * each, printing "PROGRESS <i>" after each round (then pausing briefly, so
 * a test can checkpoint mid-run). At the end the buffers are checked
 * against the same update computed on the CPU.
 *
 * Prints "sub-devices: <n>", the PROGRESS lines, then "sub 0 units: <n>",
 * "queue devices: yes|no" and "result: ok" or "result: <k> wrong". */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define N 4096
#define ITERATIONS 12
#define MAX_SUBS 8

static const char *SOURCE =
    "kernel void update(global uint *x, uint c) {\n"
    "    uint j = get_global_id(0);\n"
    "    x[j] = x[j] * 1664525u + c + j;\n"
    "}\n";

static cl_uint host[MAX_SUBS][N], back[N];

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    cl_platform_id platform;
    cl_device_id root, subs[MAX_SUBS];
    cl_int err;
    clGetPlatformIDs(1, &platform, NULL);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &root, NULL);
    const cl_device_partition_property equally[] = {CL_DEVICE_PARTITION_EQUALLY, 1, 0};
    cl_uint n = 0;
    err = clCreateSubDevices(root, equally, MAX_SUBS, subs, &n);
    printf("sub-devices: %d %u\n", err, n);
    if (err != CL_SUCCESS || n == 0)
        return 1;
    cl_context ctx = clCreateContext(NULL, n, subs, NULL, NULL, &err);
    cl_program prog = clCreateProgramWithSource(ctx, 1, &SOURCE, NULL, &err);
    if (clBuildProgram(prog, 0, NULL, NULL, NULL, NULL) != CL_SUCCESS)
        return 1;
    cl_kernel kernel = clCreateKernel(prog, "update", &err);
    cl_command_queue queues[MAX_SUBS];
    cl_mem bufs[MAX_SUBS];
    for (cl_uint s = 0; s < n; s++) {
        for (cl_uint j = 0; j < N; j++)
            host[s][j] = j * 7 + s;
        queues[s] = clCreateCommandQueueWithProperties(ctx, subs[s], NULL, &err);
        bufs[s] = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof host[s], host[s], &err);
    }
    /* The application's own handles on the sub-devices go: the context
     * and queues hold them. */
    for (cl_uint s = 1; s < n; s++)
        clReleaseDevice(subs[s]);
    for (cl_uint i = 0; i < ITERATIONS; i++) {
        for (cl_uint s = 0; s < n; s++) {
            cl_uint c = i * 31 + s;
            size_t global = N;
            clSetKernelArg(kernel, 0, sizeof bufs[s], &bufs[s]);
            clSetKernelArg(kernel, 1, sizeof c, &c);
            err = clEnqueueNDRangeKernel(queues[s], kernel, 1, NULL, &global, NULL, 0, NULL, NULL);
            if (err != CL_SUCCESS || clFinish(queues[s]) != CL_SUCCESS) {
                printf("launch failed: %d\n", err);
                return 1;
            }
            for (cl_uint j = 0; j < N; j++)
                host[s][j] = host[s][j] * 1664525u + c + j;
        }
        printf("PROGRESS %u\n", i);
        struct timespec pause = {0, 150 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    cl_uint units = 0;
    clGetDeviceInfo(subs[0], CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL);
    printf("sub 0 units: %u\n", units);
    int same = 1, wrong = 0;
    for (cl_uint s = 0; s < n; s++) {
        cl_device_id d = NULL;
        clGetCommandQueueInfo(queues[s], CL_QUEUE_DEVICE, sizeof d, &d, NULL);
        same &= s == 0 ? d == subs[0] : d != NULL && d != root;
        memset(back, 0, sizeof back);
        clEnqueueReadBuffer(queues[s], bufs[s], CL_TRUE, 0, sizeof back, back, 0, NULL, NULL);
        for (cl_uint j = 0; j < N; j++)
            wrong += back[j] != host[s][j];
    }
    printf("queue devices: %s\n", same ? "yes" : "no");
    if (wrong)
        printf("result: %d wrong\n", wrong);
    else
        printf("result: ok\n");
    return 0;
}
