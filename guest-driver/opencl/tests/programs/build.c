/* Builds one OpenCL program and reports what the application sees.
 *
 *   build [-H NAME=FILE]... SOURCE_FILE [OPTIONS]
 *
 * Without -H: clBuildProgram(OPTIONS). With -H: clCompileProgram with each
 * FILE as an embedded header named NAME, then clLinkProgram. Prints the
 * platform name, the status, the build log, and, when kernel `k` exists,
 * the int it stores through its one buffer argument. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(2); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc(n + 1);
    if (fread(text, 1, n, f) != (size_t)n) { perror(path); exit(2); }
    text[n] = 0;
    fclose(f);
    return text;
}

int main(int argc, char **argv) {
    const char *names[16];
    cl_program headers[16];
    int n_headers = 0, arg = 1;
    cl_platform_id platform;
    cl_device_id device;
    cl_int err;
    char name[256];
    if (clGetPlatformIDs(1, &platform, NULL) != CL_SUCCESS) { puts("no platform"); return 2; }
    clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof name, name, NULL);
    printf("platform: %s\n", name);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL);
    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    while (arg + 1 < argc && strcmp(argv[arg], "-H") == 0 && n_headers < 16) {
        char *spec = argv[arg + 1];
        char *eq = strchr(spec, '=');
        if (!eq) return 2;
        *eq = 0;
        const char *text = slurp(eq + 1);
        names[n_headers] = spec;
        headers[n_headers++] = clCreateProgramWithSource(context, 1, &text, NULL, &err);
        arg += 2;
    }
    if (arg >= argc) return 2;
    const char *source = slurp(argv[arg]);
    const char *options = arg + 1 < argc ? argv[arg + 1] : "";
    cl_program program = clCreateProgramWithSource(context, 1, &source, NULL, &err);
    printf("create: %d\n", err);
    if (n_headers > 0) {
        err = clCompileProgram(program, 1, &device, options, n_headers, headers, names, NULL, NULL);
        printf("compile: %d\n", err);
    } else {
        err = clBuildProgram(program, 1, &device, options, NULL, NULL);
        printf("build: %d\n", err);
    }
    size_t size = 0;
    clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, NULL, &size);
    char *log = calloc(size + 1, 1);
    clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log, NULL);
    printf("log: %s\n", log);
    if (err != CL_SUCCESS) return 0;
    if (n_headers > 0) {
        program = clLinkProgram(context, 1, &device, "", 1, &program, NULL, NULL, &err);
        printf("link: %d\n", err);
        if (err != CL_SUCCESS) return 0;
    }
    cl_kernel kernel = clCreateKernel(program, "k", &err);
    if (err != CL_SUCCESS) return 0;
    cl_command_queue queue = clCreateCommandQueueWithProperties(context, device, NULL, &err);
    cl_mem buffer = clCreateBuffer(context, CL_MEM_READ_WRITE, sizeof(cl_int), NULL, &err);
    clSetKernelArg(kernel, 0, sizeof buffer, &buffer);
    size_t global = 1;
    clEnqueueNDRangeKernel(queue, kernel, 1, NULL, &global, NULL, 0, NULL, NULL);
    cl_int result = -1;
    err = clEnqueueReadBuffer(queue, buffer, CL_TRUE, 0, sizeof result, &result, 0, NULL, NULL);
    printf("result: %d (%d)\n", result, err);
    return 0;
}
