/* matmul: C = A * B for n x n floats with 16 x 16 tiles in __local memory.
 * O(n^3) compute on O(n^2) data. The inputs are small integers, so every
 * product and sum is exact and the device result equals the CPU's bit for
 * bit. -i repeats the multiplication (same result each time). */
#include "cltest.h"

#define TILE 16

static const char *src =
    "#define TILE 16\n"
    "__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))\n"
    "void matmul(__global const float *a, __global const float *b,\n"
    "            __global float *c, uint n)\n"
    "{\n"
    "    __local float ta[TILE][TILE];\n"
    "    __local float tb[TILE][TILE];\n"
    "    size_t col = get_global_id(0), row = get_global_id(1);\n"
    "    size_t lx = get_local_id(0), ly = get_local_id(1);\n"
    "    float acc = 0.0f;\n"
    "    for (uint t = 0; t < n; t += TILE) {\n"
    "        ta[ly][lx] = a[row * n + t + lx];\n"
    "        tb[ly][lx] = b[(t + ly) * n + col];\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "        for (uint k = 0; k < TILE; k++)\n"
    "            acc += ta[ly][k] * tb[k][lx];\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    }\n"
    "    c[row * n + col] = acc;\n"
    "}\n";

int main(int argc, char **argv)
{
    cltest_env env;
    cltest_init("matmul");
    cltest_args_check(argc, argv, "ni", "[-n SIZE (multiple of 16)] [-i ITERATIONS]");
    size_t n = (size_t)cltest_arg(argc, argv, "-n", cltest_quick() ? 128 : 512);
    long iters = cltest_arg(argc, argv, "-i", cltest_quick() ? 1 : 5);
    if (n == 0 || n % TILE || n > 8192 || iters < 1)
        cltest_fail("-n must be a positive multiple of %d (<= 8192), -i >= 1", TILE);

    size_t bytes = n * n * sizeof(float);
    float *a = cltest_xmalloc(bytes), *b = cltest_xmalloc(bytes);
    float *c = cltest_xmalloc(bytes), *ref = cltest_xmalloc(bytes);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < n; j++) {
            a[i * n + j] = (float)((int)((i * 3 + j * 5) % 7) - 3);
            b[i * n + j] = (float)((int)((i * 11 + j * 2) % 5) - 2);
        }
    }

    cltest_setup(&env, 0);
    cl_program prog = cltest_build(&env, src, NULL);
    cl_kernel k = cltest_kernel(prog, "matmul");
    cl_mem da = cltest_buffer(&env, CL_MEM_READ_ONLY, bytes, NULL);
    cl_mem db = cltest_buffer(&env, CL_MEM_READ_ONLY, bytes, NULL);
    cl_mem dc = cltest_buffer(&env, CL_MEM_WRITE_ONLY, bytes, NULL);
    cl_uint nn = (cl_uint)n;
    size_t global[2] = { n, n }, local[2] = { TILE, TILE };
    CL_CHECK(clSetKernelArg(k, 0, sizeof(cl_mem), &da));
    CL_CHECK(clSetKernelArg(k, 1, sizeof(cl_mem), &db));
    CL_CHECK(clSetKernelArg(k, 2, sizeof(cl_mem), &dc));
    CL_CHECK(clSetKernelArg(k, 3, sizeof(cl_uint), &nn));

    /* Warm-up on one tile, untimed: drivers that compile per launch
     * configuration (PoCL) do it here rather than inside TIME. */
    CL_CHECK(clEnqueueNDRangeKernel(env.queue, k, 2, NULL, local, local, 0, NULL, NULL));
    CL_CHECK(clFinish(env.queue));

    double t0 = cltest_now();
    CL_CHECK(clEnqueueWriteBuffer(env.queue, da, CL_FALSE, 0, bytes, a, 0, NULL, NULL));
    CL_CHECK(clEnqueueWriteBuffer(env.queue, db, CL_FALSE, 0, bytes, b, 0, NULL, NULL));
    for (long it = 0; it < iters; it++)
        CL_CHECK(clEnqueueNDRangeKernel(env.queue, k, 2, NULL, global, local, 0, NULL, NULL));
    CL_CHECK(clEnqueueReadBuffer(env.queue, dc, CL_TRUE, 0, bytes, c, 0, NULL, NULL));
    double t = cltest_now() - t0;

    /* CPU reference, i-k-j order; exact because all values are integers. */
    memset(ref, 0, bytes);
    for (size_t i = 0; i < n; i++)
        for (size_t kk = 0; kk < n; kk++) {
            float av = a[i * n + kk];
            for (size_t j = 0; j < n; j++)
                ref[i * n + j] += av * b[kk * n + j];
        }
    for (size_t i = 0; i < n * n; i++)
        if (c[i] != ref[i])
            cltest_fail("c[%zu][%zu]=%g expected %g", i / n, i % n, (double)c[i], (double)ref[i]);
    printf("n=%zu iterations=%ld verified, %.2f GFLOP/s\n", n, iters,
           2.0 * n * n * n * iters / t * 1e-9);
    cltest_print_time(t);
    uint64_t h = cltest_fnv1a(CLTEST_FNV_INIT, c, bytes);

    CL_CHECK(clReleaseMemObject(da));
    CL_CHECK(clReleaseMemObject(db));
    CL_CHECK(clReleaseMemObject(dc));
    CL_CHECK(clReleaseKernel(k));
    CL_CHECK(clReleaseProgram(prog));
    cltest_teardown(&env);
    free(a); free(b); free(c); free(ref);
    cltest_pass(h);
}
