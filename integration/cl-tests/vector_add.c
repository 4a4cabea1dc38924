/* vector_add: the smallest complete OpenCL program.
 * Buffers created with CL_MEM_COPY_HOST_PTR, one kernel, a blocking read. */
#include "cltest.h"

static const char *src =
    "__kernel void vadd(__global const float *a, __global const float *b,\n"
    "                   __global float *c, uint n)\n"
    "{\n"
    "    size_t i = get_global_id(0);\n"
    "    if (i < n)\n"
    "        c[i] = a[i] + b[i];\n"
    "}\n";

int main(int argc, char **argv)
{
    cltest_env env;
    cltest_init("vector_add");
    cltest_args_check(argc, argv, "n", "[-n ELEMENTS]");
    size_t n = (size_t)cltest_arg(argc, argv, "-n", cltest_quick() ? 1 << 16 : 1 << 22);
    if (n == 0 || n > 0xffffffffu)
        cltest_fail("bad -n");

    float *a = cltest_xmalloc(n * sizeof(float));
    float *b = cltest_xmalloc(n * sizeof(float));
    float *c = cltest_xmalloc(n * sizeof(float));
    /* Small integers: every sum is exact. */
    for (size_t i = 0; i < n; i++) {
        a[i] = (float)(i % 1000);
        b[i] = (float)((i * 7) % 1013) - 500.0f;
        c[i] = -1.0f;
    }

    cltest_setup(&env, 0);
    cl_program prog = cltest_build(&env, src, NULL);
    cl_kernel k = cltest_kernel(prog, "vadd");
    cl_mem da = cltest_buffer(&env, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * sizeof(float), a);
    cl_mem db = cltest_buffer(&env, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * sizeof(float), b);
    cl_mem dc = cltest_buffer(&env, CL_MEM_WRITE_ONLY, n * sizeof(float), NULL);
    cl_uint nn = (cl_uint)n;

    double t0 = cltest_now();
    CL_CHECK(clSetKernelArg(k, 0, sizeof(cl_mem), &da));
    CL_CHECK(clSetKernelArg(k, 1, sizeof(cl_mem), &db));
    CL_CHECK(clSetKernelArg(k, 2, sizeof(cl_mem), &dc));
    CL_CHECK(clSetKernelArg(k, 3, sizeof(cl_uint), &nn));
    size_t global = n;
    CL_CHECK(clEnqueueNDRangeKernel(env.queue, k, 1, NULL, &global, NULL, 0, NULL, NULL));
    CL_CHECK(clEnqueueReadBuffer(env.queue, dc, CL_TRUE, 0, n * sizeof(float), c, 0, NULL, NULL));
    cltest_print_time(cltest_now() - t0);

    for (size_t i = 0; i < n; i++) {
        if (c[i] != a[i] + b[i])
            cltest_fail("c[%zu]=%g expected %g", i, (double)c[i], (double)(a[i] + b[i]));
    }
    uint64_t sum = cltest_fnv1a(CLTEST_FNV_INIT, c, n * sizeof(float));
    printf("n=%zu verified\n", n);

    CL_CHECK(clReleaseMemObject(da));
    CL_CHECK(clReleaseMemObject(db));
    CL_CHECK(clReleaseMemObject(dc));
    CL_CHECK(clReleaseKernel(k));
    CL_CHECK(clReleaseProgram(prog));
    cltest_teardown(&env);
    free(a);
    free(b);
    free(c);
    cltest_pass(sum);
}
