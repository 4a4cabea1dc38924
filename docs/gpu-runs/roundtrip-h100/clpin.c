/* Does NVIDIA OpenCL move memory registered with CUDA (cuMemHostRegister,
 * PORTABLE) at pinned speed? clEnqueueWrite/ReadBuffer bandwidth from
 * ordinary malloc memory before and after registering it, and from
 * memfd-shared memory (what the backend's guest memory is). */
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static cl_command_queue q; static cl_mem buf;

static void bw(const char *what, void *host, size_t n)
{
    int reps = n >= (64 << 20) ? 8 : 64;
    clEnqueueWriteBuffer(q, buf, CL_TRUE, 0, n, host, 0, NULL, NULL);
    double t = now();
    for (int i = 0; i < reps; i++) clEnqueueWriteBuffer(q, buf, CL_TRUE, 0, n, host, 0, NULL, NULL);
    double w = n * (double)reps / (now() - t) / 1e9;
    t = now();
    for (int i = 0; i < reps; i++) clEnqueueReadBuffer(q, buf, CL_TRUE, 0, n, host, 0, NULL, NULL);
    double r = n * (double)reps / (now() - t) / 1e9;
    printf("%-44s %5zu MiB  write %6.2f GB/s  read %6.2f GB/s\n", what, n >> 20, w, r);
}

int main(void)
{
    cl_platform_id plats[4]; cl_uint np; clGetPlatformIDs(4, plats, &np);
    cl_platform_id p = NULL;
    for (cl_uint i = 0; i < np; i++) { char name[128]; clGetPlatformInfo(plats[i], CL_PLATFORM_NAME, sizeof name, name, NULL); if (strstr(name, "NVIDIA")) p = plats[i]; }
    if (!p) { printf("no NVIDIA OpenCL platform\n"); return 0; }
    cl_device_id d; clGetDeviceIDs(p, CL_DEVICE_TYPE_GPU, 1, &d, NULL);
    cl_int err; cl_context ctx = clCreateContext(NULL, 1, &d, NULL, NULL, &err);
    q = clCreateCommandQueueWithProperties(ctx, d, NULL, &err);
    size_t max = 256u << 20;
    buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, max, NULL, &err);
    char *m = malloc(max); memset(m, 1, max);
    int fd = memfd_create("guest", 0); ftruncate(fd, max);
    char *shared = mmap(NULL, max, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0); memset(shared, 1, max);
    size_t sizes[] = {1 << 20, 16 << 20, 256u << 20};
    for (int i = 0; i < 3; i++) bw("malloc, pageable", m, sizes[i]);
    for (int i = 0; i < 3; i++) bw("memfd shared, pageable", shared, sizes[i]);
    CUdevice cd; CUcontext cc;
    if (cuInit(0) || cuDeviceGet(&cd, 0) || cuDevicePrimaryCtxRetain(&cc, cd) || cuCtxSetCurrent(cc)) { printf("cuda init failed\n"); return 1; }
    CUresult r1 = cuMemHostRegister(m, max, CU_MEMHOSTREGISTER_PORTABLE);
    CUresult r2 = cuMemHostRegister(shared, max, CU_MEMHOSTREGISTER_PORTABLE);
    printf("registered: malloc %d, memfd %d\n", r1, r2);
    for (int i = 0; i < 3; i++) bw("malloc, cuMemHostRegister PORTABLE", m, sizes[i]);
    for (int i = 0; i < 3; i++) bw("memfd shared, cuMemHostRegister PORTABLE", shared, sizes[i]);
    cl_mem pinned = clCreateBuffer(ctx, CL_MEM_ALLOC_HOST_PTR, max, NULL, &err);
    void *pp = clEnqueueMapBuffer(q, pinned, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, max, 0, NULL, NULL, &err);
    memset(pp, 1, max);
    for (int i = 0; i < 3; i++) bw("CL_MEM_ALLOC_HOST_PTR mapped (OpenCL pinned)", pp, sizes[i]);
    /* Guest memory wrapped in a USE_HOST_PTR buffer, moved with buffer
     * copies: does the driver DMA straight from/to it? Each direction ends
     * with a map of the host-backed buffer (the host then sees the data). */
    munmap(shared, max); close(fd);
    fd = memfd_create("guest2", 0); if (ftruncate(fd, max)) return 1;
    shared = mmap(NULL, max, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0); memset(shared, 7, max);
    cl_mem hb = clCreateBuffer(ctx, CL_MEM_USE_HOST_PTR | CL_MEM_READ_WRITE, max, shared, &err);
    printf("USE_HOST_PTR buffer over memfd memory: %d\n", err);
    for (int i = 0; i < 3; i++) {
        size_t n = sizes[i]; int reps = n >= (64 << 20) ? 8 : 64;
        clEnqueueCopyBuffer(q, hb, buf, 0, 0, n, 0, NULL, NULL); clFinish(q);
        double t = now();
        for (int k = 0; k < reps; k++) { shared[k] = (char)k; clEnqueueCopyBuffer(q, hb, buf, 0, 0, n, 0, NULL, NULL); clFinish(q); }
        double w = n * (double)reps / (now() - t) / 1e9;
        t = now();
        for (int k = 0; k < reps; k++) {
            clEnqueueCopyBuffer(q, buf, hb, 0, 0, n, 0, NULL, NULL);
            void *mp = clEnqueueMapBuffer(q, hb, CL_TRUE, CL_MAP_READ, 0, n, 0, NULL, NULL, &err);
            clEnqueueUnmapMemObject(q, hb, mp, 0, NULL, NULL); clFinish(q);
        }
        double r = n * (double)reps / (now() - t) / 1e9;
        printf("%-44s %5zu MiB  to device %6.2f GB/s  from device+map %6.2f GB/s\n", "USE_HOST_PTR memfd, clEnqueueCopyBuffer", n >> 20, w, r);
    }
    /* Correctness: device buffer gets a pattern, copied to hb, host sees it. */
    cl_uint pat = 0xabcd1234; clEnqueueFillBuffer(q, buf, &pat, 4, 0, 1 << 20, 0, NULL, NULL);
    clEnqueueCopyBuffer(q, buf, hb, 0, 0, 1 << 20, 0, NULL, NULL);
    void *mp = clEnqueueMapBuffer(q, hb, CL_TRUE, CL_MAP_READ, 0, 1 << 20, 0, NULL, NULL, &err);
    printf("host sees the device's pattern after map: %s (map ptr %s the host memory)\n",
           ((cl_uint *)shared)[1000] == pat ? "yes" : "no", mp == (void *)shared ? "is" : "is not");
    clEnqueueUnmapMemObject(q, hb, mp, 0, NULL, NULL); clFinish(q);
    return 0;
}
