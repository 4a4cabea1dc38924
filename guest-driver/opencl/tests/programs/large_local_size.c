/* A launch whose local size is over the kernel's CL_KERNEL_WORK_GROUP_SIZE
 * but within CL_DEVICE_MAX_WORK_ITEM_SIZES: the spec's answer is
 * CL_INVALID_WORK_GROUP_SIZE, yet NVIDIA's driver runs such launches (it
 * reports 256 for kernels it runs 1024-wide). The device decides, and the
 * call itself gives its answer: nothing is left for clFinish to report.
 * Then a launch within the limit runs.
 *
 * Prints "<case>: <status>" lines. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <string.h>

static const char *SOURCE = "kernel void k(global int *d) { d[get_global_id(0)] = 7; }\n";

int main(void) {
    cl_platform_id platform;
    cl_device_id device;
    cl_int err;
    clGetPlatformIDs(1, &platform, NULL);
    char name[256] = "";
    clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof name, name, NULL);
    printf("platform: %s\n", strstr(name, "vgpu") ? "vgpu" : name);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueueWithProperties(ctx, device, NULL, &err);
    cl_program prog = clCreateProgramWithSource(ctx, 1, &SOURCE, NULL, &err);
    printf("build: %d\n", clBuildProgram(prog, 0, NULL, NULL, NULL, NULL));
    cl_kernel k = clCreateKernel(prog, "k", &err);
    size_t group = 0, items[3] = {0, 0, 0};
    clGetKernelWorkGroupInfo(k, device, CL_KERNEL_WORK_GROUP_SIZE, sizeof group, &group, NULL);
    clGetDeviceInfo(device, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof items, items, NULL);
    /* Twice the kernel's limit, spread over two dimensions that each stay
     * within the device's work-item sizes. */
    size_t local[2] = {group, 2};
    printf("fits the work-item sizes: %d\n", local[0] <= items[0] && local[1] <= items[1]);
    cl_mem buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 2 * group * sizeof(cl_int), NULL, &err);
    clSetKernelArg(k, 0, sizeof buf, &buf);
    size_t global[2] = {group, 2};
    printf("over the kernel's work-group size: %d\n",
           clEnqueueNDRangeKernel(q, k, 2, NULL, global, local, 0, NULL, NULL));
    printf("finish after it: %d\n", clFinish(q));
    size_t within[2] = {group, 1};
    printf("within it: %d\n", clEnqueueNDRangeKernel(q, k, 2, NULL, global, within, 0, NULL, NULL));
    cl_int first = 0;
    printf("read: %d\n", clEnqueueReadBuffer(q, buf, CL_TRUE, 0, sizeof first, &first, 0, NULL, NULL));
    printf("value: %d\n", first);
    return 0;
}
