/* clSetKernelArg of a sampler_t argument with the wrong size, as the CTS's
 * negative_invalid_arg_sampler_size does it: CL_INVALID_ARG_SIZE from the
 * call itself, whether or not a right-sized value came first; then a
 * right-sized sampler is accepted.
 *
 * Prints "<case>: <status>" lines. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <string.h>

static const char *SOURCE =
    "kernel void k(sampler_t s, read_only image2d_t i, global float4 *out) {\n"
    "    *out = read_imagef(i, s, (int2)(0, 0));\n"
    "}\n";

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
    cl_program prog = clCreateProgramWithSource(ctx, 1, &SOURCE, NULL, &err);
    printf("build: %d\n", clBuildProgram(prog, 0, NULL, NULL, NULL, NULL));
    cl_kernel k = clCreateKernel(prog, "k", &err);
    const cl_sampler_properties props[] = {CL_SAMPLER_NORMALIZED_COORDS, CL_FALSE, CL_SAMPLER_ADDRESSING_MODE,
                                           CL_ADDRESS_NONE, CL_SAMPLER_FILTER_MODE, CL_FILTER_NEAREST, 0};
    cl_sampler s = clCreateSamplerWithProperties(ctx, props, &err);
    cl_sampler pair[2] = {s, s};
    printf("double size: %d\n", clSetKernelArg(k, 0, sizeof pair, pair));
    printf("half size: %d\n", clSetKernelArg(k, 0, sizeof s / 2, &s));
    printf("right size: %d\n", clSetKernelArg(k, 0, sizeof s, &s));
    printf("double size after: %d\n", clSetKernelArg(k, 0, sizeof pair, pair));
    printf("finish: %d\n", clFinish(clCreateCommandQueueWithProperties(ctx, device, NULL, &err)));
    return 0;
}
