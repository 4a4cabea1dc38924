/* Sub-devices as an application uses them: the partition queries of the
 * root device, clCreateSubDevices equally and by counts (counted first,
 * then created), every query of a sub-device, retain and release, a
 * context on the sub-devices with a program built for all of them and a
 * kernel run on each through its own queue; then hostile partitions and
 * (with the argument "forged") forged device handles.
 *
 * Prints "key: value" lines; the same binary runs natively and through
 * vgpu and the two outputs must agree (the "platform" line aside). */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define N 1024
#define MAX_SUBS 16

static const char *SOURCE =
    "kernel void scale(global const int *in, global int *out, int k) {\n"
    "    size_t i = get_global_id(0);\n"
    "    out[i] = in[i] * k + (int)i;\n"
    "}\n";

static cl_uint uint_info(cl_device_id d, cl_device_info p) {
    cl_uint v = 0;
    cl_int err = clGetDeviceInfo(d, p, sizeof v, &v, NULL);
    return err == CL_SUCCESS ? v : (cl_uint)err;
}

static void print_partition_list(const char *key, cl_device_id d, cl_device_info p) {
    size_t size = 0;
    cl_device_partition_property list[64];
    cl_int err = clGetDeviceInfo(d, p, sizeof list, list, &size);
    printf("%s: %d [", key, err);
    for (size_t i = 0; err == CL_SUCCESS && i < size / sizeof list[0]; i++)
        printf("%s%#lx", i ? " " : "", (long)list[i]);
    printf("]\n");
}

/* One kernel run on each sub-device through a context holding them all. */
static void run_on_each(cl_device_id *subs, cl_uint n) {
    cl_int err;
    cl_context ctx = clCreateContext(NULL, n, subs, NULL, NULL, &err);
    printf("context on subs: %d\n", err);
    cl_uint num = 0;
    clGetContextInfo(ctx, CL_CONTEXT_NUM_DEVICES, sizeof num, &num, NULL);
    printf("context devices: %u\n", num);
    cl_program prog = clCreateProgramWithSource(ctx, 1, &SOURCE, NULL, &err);
    printf("build: %d\n", clBuildProgram(prog, 0, NULL, NULL, NULL, NULL));
    clGetProgramInfo(prog, CL_PROGRAM_NUM_DEVICES, sizeof num, &num, NULL);
    printf("program devices: %u\n", num);
    cl_device_id listed[MAX_SUBS] = {0};
    clGetProgramInfo(prog, CL_PROGRAM_DEVICES, sizeof listed, listed, NULL);
    for (cl_uint s = 0; s < n; s++) {
        cl_build_status status = -42;
        err = clGetProgramBuildInfo(prog, subs[s], CL_PROGRAM_BUILD_STATUS, sizeof status, &status, NULL);
        printf("sub %u build status: %d %d, listed: %s\n", s, err, status,
               listed[s] == subs[s] ? "yes" : "no");
    }
    cl_kernel kernel = clCreateKernel(prog, "scale", &err);
    size_t wg = 0;
    printf("work-group size, no device: %d\n",
           clGetKernelWorkGroupInfo(kernel, NULL, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL));
    printf("work-group size, sub 1: %d\n",
           clGetKernelWorkGroupInfo(kernel, subs[n - 1], CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, NULL));
    int in[N], out[N];
    for (int i = 0; i < N; i++)
        in[i] = i * 3 - 500;
    cl_mem a = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof in, in, &err);
    for (cl_uint s = 0; s < n; s++) {
        cl_command_queue q = clCreateCommandQueueWithProperties(ctx, subs[s], NULL, &err);
        cl_device_id qd = NULL;
        clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof qd, &qd, NULL);
        printf("sub %u queue: %d, its device: %s\n", s, err, qd == subs[s] ? "yes" : "no");
        cl_mem b = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, sizeof out, NULL, &err);
        int k = (int)s + 2;
        clSetKernelArg(kernel, 0, sizeof a, &a);
        clSetKernelArg(kernel, 1, sizeof b, &b);
        clSetKernelArg(kernel, 2, sizeof k, &k);
        size_t global = N;
        err = clEnqueueNDRangeKernel(q, kernel, 1, NULL, &global, NULL, 0, NULL, NULL);
        memset(out, 0, sizeof out);
        cl_int read = clEnqueueReadBuffer(q, b, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL);
        int good = 0;
        for (int i = 0; i < N; i++)
            good += out[i] == in[i] * k + i;
        printf("sub %u kernel: %d %d, correct %d of %d\n", s, err, read, good, N);
        clReleaseMemObject(b);
        clReleaseCommandQueue(q);
    }
    clReleaseMemObject(a);
    clReleaseKernel(kernel);
    clReleaseProgram(prog);
    clReleaseContext(ctx);
}

static void partition(cl_device_id root, const char *name, const cl_device_partition_property *props) {
    cl_uint count = 0;
    cl_int err = clCreateSubDevices(root, props, 0, NULL, &count);
    printf("%s count: %d %u\n", name, err, count);
    if (err != CL_SUCCESS || count == 0 || count > MAX_SUBS)
        return;
    cl_device_id subs[MAX_SUBS];
    if (count > 1) {
        err = clCreateSubDevices(root, props, count - 1, subs, NULL);
        printf("%s too few slots: %d\n", name, err);
    }
    cl_uint got = 0;
    err = clCreateSubDevices(root, props, count, subs, &got);
    printf("%s create: %d %u\n", name, err, got);
    for (cl_uint s = 0; s < got; s++) {
        cl_device_id parent = NULL;
        clGetDeviceInfo(subs[s], CL_DEVICE_PARENT_DEVICE, sizeof parent, &parent, NULL);
        printf("%s sub %u: units %u, parent is root: %s, max subs %u, refs %u\n", name, s,
               uint_info(subs[s], CL_DEVICE_MAX_COMPUTE_UNITS), parent == root ? "yes" : "no",
               uint_info(subs[s], CL_DEVICE_PARTITION_MAX_SUB_DEVICES),
               uint_info(subs[s], CL_DEVICE_REFERENCE_COUNT));
        print_partition_list("  partition type", subs[s], CL_DEVICE_PARTITION_TYPE);
        cl_device_type type = 0;
        clGetDeviceInfo(subs[s], CL_DEVICE_TYPE, sizeof type, &type, NULL);
        printf("  type: %#lx\n", (unsigned long)type);
        err = clRetainDevice(subs[s]);
        printf("  retained: %d refs %u\n", err, uint_info(subs[s], CL_DEVICE_REFERENCE_COUNT));
        err = clReleaseDevice(subs[s]);
        printf("  released: %d refs %u\n", err, uint_info(subs[s], CL_DEVICE_REFERENCE_COUNT));
    }
    run_on_each(subs, got);
    for (cl_uint s = 0; s < got; s++)
        printf("%s release sub %u: %d\n", name, s, clReleaseDevice(subs[s]));
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    cl_platform_id platform;
    cl_device_id root;
    clGetPlatformIDs(1, &platform, NULL);
    char name[256] = "";
    clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof name, name, NULL);
    printf("platform: %s\n", strstr(name, "vgpu") ? "vgpu" : name);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &root, NULL);

    cl_device_id parent = (cl_device_id)1;
    clGetDeviceInfo(root, CL_DEVICE_PARENT_DEVICE, sizeof parent, &parent, NULL);
    printf("root parent is null: %s\n", parent == NULL ? "yes" : "no");
    printf("root units: %u\n", uint_info(root, CL_DEVICE_MAX_COMPUTE_UNITS));
    printf("root max subs: %u\n", uint_info(root, CL_DEVICE_PARTITION_MAX_SUB_DEVICES));
    print_partition_list("root partition properties", root, CL_DEVICE_PARTITION_PROPERTIES);
    print_partition_list("root partition type", root, CL_DEVICE_PARTITION_TYPE);
    printf("root retain: %d, release: %d, refs %u\n", clRetainDevice(root), clReleaseDevice(root),
           uint_info(root, CL_DEVICE_REFERENCE_COUNT));

    const cl_device_partition_property equally[] = {CL_DEVICE_PARTITION_EQUALLY, 1, 0};
    partition(root, "equally", equally);
    const cl_device_partition_property counts[] = {CL_DEVICE_PARTITION_BY_COUNTS, 1, 1,
                                                   CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0};
    partition(root, "by counts", counts);

    /* Hostile or wrong requests. */
    cl_uint count = 0;
    const cl_device_partition_property huge[] = {CL_DEVICE_PARTITION_EQUALLY, (cl_device_partition_property)1 << 31, 0};
    printf("equally 2^31: %d\n", clCreateSubDevices(root, huge, 0, NULL, &count));
    cl_device_partition_property many[260] = {CL_DEVICE_PARTITION_BY_COUNTS};
    for (int i = 1; i < 257; i++)
        many[i] = 1;
    many[257] = CL_DEVICE_PARTITION_BY_COUNTS_LIST_END;
    many[258] = 0;
    printf("by counts 256 parts: %d\n", clCreateSubDevices(root, many, 0, NULL, &count));
    const cl_device_partition_property affinity[] = {CL_DEVICE_PARTITION_BY_AFFINITY_DOMAIN,
                                                     CL_DEVICE_AFFINITY_DOMAIN_NUMA, 0};
    printf("affinity (not offered): %d\n", clCreateSubDevices(root, affinity, 0, NULL, &count));
    printf("null properties: %d\n", clCreateSubDevices(root, NULL, 0, NULL, &count));
    /* A forged handle: memory that starts with a real device's dispatch
     * pointer (so the loader passes it on) but is no device. A native
     * driver may crash on it, so only "forged" runs these. */
    if (argc < 2 || strcmp(argv[1], "forged") != 0)
        return 0;
    uint64_t fake[16] = {0};
    memcpy(fake, root, sizeof fake[0]);
    cl_device_id forged = (cl_device_id)fake;
    printf("forged partition: %d\n", clCreateSubDevices(forged, equally, 0, NULL, &count));
    printf("forged info: %d\n", clGetDeviceInfo(forged, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof count, &count, NULL));
    printf("forged retain: %d\n", clRetainDevice(forged));
    cl_int err;
    clCreateContext(NULL, 1, &forged, NULL, NULL, &err);
    printf("forged context: %d\n", err);
    return 0;
}
