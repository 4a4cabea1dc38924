/* Builds one kernel from a source file with the given options on the first
 * GPU (else the first device) and prints what a launch is checked against:
 * CL_KERNEL_WORK_GROUP_SIZE, private and local memory. Run natively and
 * through vgpu: OpenCV launches canny's kernels with a 32x32 local size,
 * which a kernel allowing fewer work-items per group refuses.
 *
 *   wgprobe SOURCE KERNEL [OPTIONS] */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    FILE *f = fopen(argv[1], "rb");
    if (!f) return 2;
    static char src[1 << 20];
    size_t n = fread(src, 1, sizeof src - 1, f);
    src[n] = 0;
    fclose(f);
    cl_platform_id platform;
    cl_device_id device;
    cl_int err;
    clGetPlatformIDs(1, &platform, NULL);
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_GPU, 1, &device, NULL) != CL_SUCCESS)
        clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL);
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    const char *s = src;
    cl_program prog = clCreateProgramWithSource(ctx, 1, &s, NULL, &err);
    err = clBuildProgram(prog, 1, &device, argc > 3 ? argv[3] : "", NULL, NULL);
    cl_kernel k = clCreateKernel(prog, argv[2], &err);
    size_t wg = 0;
    cl_ulong priv = 0, local = 0;
    clGetKernelWorkGroupInfo(k, device, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
    clGetKernelWorkGroupInfo(k, device, CL_KERNEL_PRIVATE_MEM_SIZE, sizeof priv, &priv, NULL);
    clGetKernelWorkGroupInfo(k, device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
    printf("%s: create %d, work-group size %zu, private %llu, local %llu\n", argv[2], err, wg,
           (unsigned long long)priv, (unsigned long long)local);
    return 0;
}
