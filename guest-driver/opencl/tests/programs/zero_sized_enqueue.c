/* Zero-sized NDRanges (OpenCL 3.0: a global size of 0 in any dimension
 * succeeds as a no-op), in an in-order and an out-of-order queue, as the
 * CTS's zero_sized_enqueue runs them; one waits on a user event and must
 * stay CL_QUEUED until the event is set.
 *
 * A NULL global size is such a launch too (OpenCL 3.0).
 *
 * Prints "<queue> <case>: <status>" lines and "<queue> untouched: yes|no"
 * (the output buffer kept its zeros). */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <string.h>

static void run(cl_context context, cl_device_id device, cl_kernel kernel,
                const char *name, cl_command_queue_properties props) {
    cl_int err;
    cl_queue_properties list[] = {CL_QUEUE_PROPERTIES, props, 0};
    cl_command_queue queue = clCreateCommandQueueWithProperties(context, device, list, &err);
    int zeros[128];
    memset(zeros, 0, sizeof zeros);
    cl_mem out = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, sizeof zeros, NULL, &err);
    clEnqueueWriteBuffer(queue, out, CL_TRUE, 0, sizeof zeros, zeros, 0, NULL, NULL);
    clSetKernelArg(kernel, 0, sizeof out, &out);
    size_t one_d = 0, two_d[2] = {1, 0}, three_d[3] = {1, 1, 0};
    printf("%s null: %d\n", name, clEnqueueNDRangeKernel(queue, kernel, 2, NULL, NULL, NULL, 0, NULL, NULL));
    printf("%s 1d: %d\n", name, clEnqueueNDRangeKernel(queue, kernel, 1, NULL, &one_d, NULL, 0, NULL, NULL));
    printf("%s 2d: %d\n", name, clEnqueueNDRangeKernel(queue, kernel, 2, NULL, two_d, NULL, 0, NULL, NULL));
    printf("%s 3d: %d\n", name, clEnqueueNDRangeKernel(queue, kernel, 3, NULL, three_d, NULL, 0, NULL, NULL));
    printf("%s finish: %d\n", name, clFinish(queue));
    int *mapped = clEnqueueMapBuffer(queue, out, CL_TRUE, CL_MAP_READ, 0, sizeof zeros, 0, NULL, NULL, &err);
    int untouched = err == CL_SUCCESS && memcmp(mapped, zeros, sizeof zeros) == 0;
    printf("%s untouched: %s\n", name, untouched ? "yes" : "no");
    clEnqueueUnmapMemObject(queue, out, mapped, 0, NULL, NULL);
    cl_event gate = clCreateUserEvent(context, &err), done = NULL;
    size_t none[3] = {0, 0, 0};
    printf("%s gated: %d\n", name, clEnqueueNDRangeKernel(queue, kernel, 1, NULL, none, NULL, 1, &gate, &done));
    cl_int status = -1;
    clGetEventInfo(done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
    printf("%s before: %d\n", name, status);
    clSetUserEventStatus(gate, CL_COMPLETE);
    clFinish(queue);
    clGetEventInfo(done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
    printf("%s after: %d\n", name, status);
    clReleaseEvent(done);
    clReleaseEvent(gate);
    clReleaseMemObject(out);
    clReleaseCommandQueue(queue);
}

int main(void) {
    cl_platform_id platform;
    cl_device_id device;
    cl_int err;
    char name[256];
    setvbuf(stdout, NULL, _IOLBF, 0);
    clGetPlatformIDs(1, &platform, NULL);
    clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof name, name, NULL);
    printf("platform: %s\n", name);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL);
    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    const char *source = "kernel void k(global int *dst) { dst[get_global_id(0)] = 5; }";
    cl_program program = clCreateProgramWithSource(context, 1, &source, NULL, &err);
    clBuildProgram(program, 1, &device, "", NULL, NULL);
    cl_kernel kernel = clCreateKernel(program, "k", &err);
    run(context, device, kernel, "in-order", 0);
    run(context, device, kernel, "out-of-order", CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
    return 0;
}
