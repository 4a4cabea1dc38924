/* Diagnostics for differences seen on NVIDIA OpenCL through vgpu. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cl_context ctx; static cl_device_id dev; static cl_command_queue q;

static void build(const char *label, const char *src, const char *opts) {
    cl_int e; cl_program p = clCreateProgramWithSource(ctx, 1, &src, NULL, &e);
    e = clBuildProgram(p, 1, &dev, opts, NULL, NULL);
    char log[4096] = ""; clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    printf("build %-18s opts=%-36s -> %d %s\n", label, opts, e, e ? log : "");
    clReleaseProgram(p);
}

int main(int argc, char **argv) {
    cl_platform_id plat; cl_int e;
    setvbuf(stdout, NULL, _IONBF, 0);
    const char *mode = argc > 1 ? argv[1] : "all";
    int only = argc > 2 ? atoi(argv[2]) : 0;
    clGetPlatformIDs(1, &plat, NULL);
    clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL);
    char name[256]; clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL);
    printf("device %s\n", name);
    ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
    q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &e);
    const char *k = "void kernel test(){}\n";
    const char *pre = "#pragma clang diagnostic ignored \"-Wbuiltin-macro-redefined\"\n#define _Pragma(x)\n#line 1\n";
    char buf[4096];
    const char *opts[] = {"", "-cl-std=CL3.0", "-cl-kernel-arg-info", "-cl-std=CL3.0 -cl-kernel-arg-info", "-cl-std=CL2.0 -cl-kernel-arg-info", "-cl-std=CL1.2 -cl-kernel-arg-info"};
    for (int i = 0; i < 6 && (!strcmp(mode, "all") || !strcmp(mode, "build")); i++) {
        build("plain", k, opts[i]);
        snprintf(buf, sizeof buf, "%s%s", pre, k); build("full prefix", buf, opts[i]);
        snprintf(buf, sizeof buf, "#define _Pragma(x)\n%s", k); build("define only", buf, opts[i]);
        snprintf(buf, sizeof buf, "#pragma clang diagnostic ignored \"-Wbuiltin-macro-redefined\"\n%s", k); build("diag pragma only", buf, opts[i]);
        snprintf(buf, sizeof buf, "#line 1\n%s", k); build("line only", buf, opts[i]);
    }
    /* CL_PROGRAM_KERNEL_NAMES: does the size cover what is written? */
    for (int len = 32; len <= 4096 && (!strcmp(mode, "all") || !strcmp(mode, "names") || !strcmp(mode, "fnames")); len *= 2) {
        if (only && len != only) continue;
        int names = strcmp(mode, "fnames") != 0, fnames = strcmp(mode, "names") != 0;
        char *nm = malloc(len + 1); for (int i = 0; i < len; i++) nm[i] = 'a' + i % 26; nm[len] = 0;
        char *src = malloc(len + 200); sprintf(src, "__kernel void %s(int s, __global int *d){ d[0]=s; }\n", nm);
        cl_program p = clCreateProgramWithSource(ctx, 1, (const char **)&src, NULL, &e);
        e = clBuildProgram(p, 1, &dev, "", NULL, NULL);
        printf("name len %4d: built %d\n", len, e);
        size_t sz = 0; cl_int e1 = 0, e2 = 0; unsigned char *out = calloc(1, 8192); size_t over = 0;
        if (names) {
            e1 = clGetProgramInfo(p, CL_PROGRAM_KERNEL_NAMES, 0, NULL, &sz);
            printf("  KERNEL_NAMES size %zu\n", sz);
            out = realloc(out, sz + 8192); memset(out, 0xAB, sz + 8192);
            e2 = clGetProgramInfo(p, CL_PROGRAM_KERNEL_NAMES, sz, out, NULL);
            for (size_t i = sz; i < sz + 8192; i++) if (out[i] != 0xAB) over = i - sz + 1;
            printf("  KERNEL_NAMES read %d, bytes past size %zu\n", e2, over);
        }
        size_t fsz = 0; cl_kernel kk = clCreateKernel(p, nm, &e); cl_int e3 = 0; unsigned char *fo = calloc(1, 8192);
        printf("  clCreateKernel %d\n", e);
        if (fnames) {
            clGetKernelInfo(kk, CL_KERNEL_FUNCTION_NAME, 0, NULL, &fsz);
            fo = realloc(fo, fsz + 8192); memset(fo, 0xAB, fsz + 8192);
            e3 = clGetKernelInfo(kk, CL_KERNEL_FUNCTION_NAME, fsz, fo, NULL);
        }
        size_t fover = 0; for (size_t i = fsz; i < fsz + 8192; i++) if (fo[i] != 0xAB) fover = i - fsz + 1;
        printf("name len %4d: build %d; KERNEL_NAMES size %zu (%d/%d) strlen %zu, bytes written past size %zu; FUNCTION_NAME size %zu (%d) past %zu\n",
               len, e, sz, e1, e2, strnlen((char *)out, sz + 8192), over, fsz, e3, fover);
        clReleaseKernel(kk); clReleaseProgram(p);
    }
    if (strcmp(mode, "all") && strcmp(mode, "image")) return 0;
    /* A 2D image written with region depth 0 and 1. */
    cl_image_format f = {CL_RGBA, CL_UNORM_INT8};
    cl_image_desc d = {0}; d.image_type = CL_MEM_OBJECT_IMAGE2D; d.image_width = 64; d.image_height = 32;
    cl_mem img = clCreateImage(ctx, CL_MEM_READ_WRITE, &f, &d, NULL, &e);
    printf("create image2d: %d\n", e);
    static unsigned char px[64 * 32 * 4];
    size_t o[3] = {0, 0, 0}, r0[3] = {64, 32, 0}, r1[3] = {64, 32, 1};
    printf("write image2d region depth 1: %d\n", clEnqueueWriteImage(q, img, CL_TRUE, o, r1, 0, 0, px, 0, NULL, NULL));
    printf("write image2d region depth 0: %d\n", clEnqueueWriteImage(q, img, CL_TRUE, o, r0, 0, 0, px, 0, NULL, NULL));
    size_t r2[3] = {64, 16, 1}, o2[3] = {0, 16, 0};
    printf("write image2d rows 16..31: %d\n", clEnqueueWriteImage(q, img, CL_TRUE, o2, r2, 0, 0, px, 0, NULL, NULL));
    cl_mem img2 = clCreateImage(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, &f, &d, px, &e);
    printf("create image2d COPY_HOST_PTR: %d\n", e);
    cl_mem img3 = clCreateImage(ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, &f, &d, NULL, &e);
    printf("create image2d ALLOC_HOST_PTR: %d\n", e);
    (void)img2; (void)img3;
    return 0;
}
