/* Enqueue rate of one-work-item kernels on the first NVIDIA platform's
 * device, with no event asked for and with one made and released per
 * command: what an event costs the driver. */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
#define CK(x) do { cl_int e_ = (x); if (e_) { fprintf(stderr, "%s: %d\n", #x, e_); exit(1); } } while (0)
int main(int argc, char **argv) {
    const char *want = argc > 1 ? argv[1] : "NVIDIA";
    cl_platform_id ps[8]; cl_uint np; CK(clGetPlatformIDs(8, ps, &np));
    cl_platform_id p = 0; char name[256];
    for (cl_uint i = 0; i < np; i++) { clGetPlatformInfo(ps[i], CL_PLATFORM_NAME, sizeof name, name, NULL); if (strstr(name, want)) { p = ps[i]; break; } }
    if (!p) { fprintf(stderr, "no platform %s\n", want); return 1; }
    cl_device_id d; CK(clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, NULL));
    cl_int e; cl_context c = clCreateContext(NULL, 1, &d, NULL, NULL, &e); CK(e);
    cl_command_queue q = clCreateCommandQueueWithProperties(c, d, NULL, &e); CK(e);
    const char *src = "__kernel void k(__global int *x) { x[get_global_id(0)] += 1; }";
    cl_program pr = clCreateProgramWithSource(c, 1, &src, NULL, &e); CK(e);
    CK(clBuildProgram(pr, 1, &d, NULL, NULL, NULL));
    cl_kernel k = clCreateKernel(pr, "k", &e); CK(e);
    cl_mem b = clCreateBuffer(c, CL_MEM_READ_WRITE, 64, NULL, &e); CK(e);
    CK(clSetKernelArg(k, 0, sizeof b, &b));
    size_t one = 1; const long n = 100000;
    for (int rep = 0; rep < 3; rep++) {
        for (int with = 0; with < 2; with++) {
            CK(clFinish(q));
            double t = now();
            for (long i = 0; i < n; i++) {
                cl_event ev;
                CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &one, &one, 0, NULL, with ? &ev : NULL));
                if (with) clReleaseEvent(ev);
            }
            double issue = now() - t;
            CK(clFinish(q));
            double all = now() - t;
            printf("%s events=%s issue %.0f kernels/s, until clFinish %.0f kernels/s\n", name, with ? "made+released" : "none", n / issue, n / all);
        }
    }
    return 0;
}
