/* clCreateKernel by name, as CTS kernel_name_size and an application that
 * never lists a program's kernels do it: a kernel whose name is 600 bytes
 * long (NVIDIA's driver aborts listing such a name, natively too, so the
 * library must not list names to create a kernel), an unknown name
 * (CL_INVALID_KERNEL_NAME from the call itself), and the same two after
 * clCreateKernelsInProgram listed the names (the library then checks the
 * name without asking the driver). The kernels are not run: PoCL 3.1
 * aborts making a cache path for so long a name, natively too.
 *
 * Prints "<case>: <status>" lines. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <string.h>

#define LONG_NAME 600

int main(void) {
    cl_platform_id platform;
    cl_device_id device;
    cl_int err;
    clGetPlatformIDs(1, &platform, NULL);
    char pname[256] = "";
    clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof pname, pname, NULL);
    printf("platform: %s\n", strstr(pname, "vgpu") ? "vgpu" : pname);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueueWithProperties(ctx, device, NULL, &err);

    char name[LONG_NAME + 1];
    for (int i = 0; i < LONG_NAME; i++) name[i] = 'a' + i % 26;
    name[LONG_NAME] = 0;
    static char source[LONG_NAME + 200];
    snprintf(source, sizeof source, "kernel void %s(global int *d) { d[0] = 1; }\n", name);
    const char *src = source;

    for (int listed = 0; listed < 2; listed++) {
        const char *when = listed ? "after listing" : "unlisted";
        cl_program prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &err);
        printf("%s build: %d\n", when, clBuildProgram(prog, 0, NULL, NULL, NULL, NULL));
        if (listed) {
            cl_uint n = 0;
            err = clCreateKernelsInProgram(prog, 0, NULL, &n);
            printf("%s count: %d %u\n", when, err, n);
        }
        clCreateKernel(prog, "no_such_kernel", &err);
        printf("%s unknown name: %d\n", when, err);
        cl_kernel k = clCreateKernel(prog, name, &err);
        printf("%s long name: %d\n", when, err);
        clReleaseKernel(k);
        clReleaseProgram(prog);
    }
    printf("finish: %d\n", clFinish(q));
    return 0;
}
