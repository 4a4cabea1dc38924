/* transpose: tiled matrix transpose through a padded __local tile.
 * O(n^2) compute and data: bandwidth-bound, transfers included in TIME.
 * -i transposes back and forth between two buffers; the result is the input
 * (even count) or its transpose (odd count), checked exactly. */
#include "cltest.h"

#define TILE 16

static const char *src =
    "#define TILE 16\n"
    "__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))\n"
    "void transpose(__global const uint *in, __global uint *out, uint n)\n"
    "{\n"
    "    __local uint tile[TILE][TILE + 1];\n"
    "    size_t bx = get_group_id(0) * TILE, by = get_group_id(1) * TILE;\n"
    "    size_t lx = get_local_id(0), ly = get_local_id(1);\n"
    "    tile[ly][lx] = in[(by + ly) * n + bx + lx];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    out[(bx + ly) * n + by + lx] = tile[lx][ly];\n"
    "}\n";

int main(int argc, char **argv)
{
    cltest_env env;
    cltest_init("transpose");
    cltest_args_check(argc, argv, "ni", "[-n SIZE (multiple of 16)] [-i ITERATIONS]");
    size_t n = (size_t)cltest_arg(argc, argv, "-n", cltest_quick() ? 256 : 4096);
    long iters = cltest_arg(argc, argv, "-i", cltest_quick() ? 3 : 12);
    if (n == 0 || n % TILE || n > 32768 || iters < 1)
        cltest_fail("-n must be a positive multiple of %d (<= 32768), -i >= 1", TILE);

    size_t bytes = n * n * sizeof(cl_uint);
    cl_uint *a = cltest_xmalloc(bytes), *out = cltest_xmalloc(bytes);
    for (size_t i = 0; i < n * n; i++)
        a[i] = (cl_uint)(i * 2654435761u + 12345u);

    cltest_setup(&env, 0);
    cl_program prog = cltest_build(&env, src, NULL);
    cl_kernel k = cltest_kernel(prog, "transpose");
    cl_mem buf[2];
    buf[0] = cltest_buffer(&env, CL_MEM_READ_WRITE, bytes, NULL);
    buf[1] = cltest_buffer(&env, CL_MEM_READ_WRITE, bytes, NULL);
    cl_uint nn = (cl_uint)n;
    size_t global[2] = { n, n }, local[2] = { TILE, TILE };
    CL_CHECK(clSetKernelArg(k, 2, sizeof(cl_uint), &nn));

    /* Untimed warm-up on one tile (per-configuration compilation). */
    CL_CHECK(clSetKernelArg(k, 0, sizeof(cl_mem), &buf[0]));
    CL_CHECK(clSetKernelArg(k, 1, sizeof(cl_mem), &buf[1]));
    CL_CHECK(clEnqueueNDRangeKernel(env.queue, k, 2, NULL, local, local, 0, NULL, NULL));
    CL_CHECK(clFinish(env.queue));

    double t0 = cltest_now();
    CL_CHECK(clEnqueueWriteBuffer(env.queue, buf[0], CL_FALSE, 0, bytes, a, 0, NULL, NULL));
    for (long it = 0; it < iters; it++) {
        CL_CHECK(clSetKernelArg(k, 0, sizeof(cl_mem), &buf[it & 1]));
        CL_CHECK(clSetKernelArg(k, 1, sizeof(cl_mem), &buf[(it + 1) & 1]));
        CL_CHECK(clEnqueueNDRangeKernel(env.queue, k, 2, NULL, global, local, 0, NULL, NULL));
    }
    CL_CHECK(clEnqueueReadBuffer(env.queue, buf[iters & 1], CL_TRUE, 0, bytes, out, 0, NULL, NULL));
    double t = cltest_now() - t0;

    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            cl_uint want = (iters & 1) ? a[j * n + i] : a[i * n + j];
            if (out[i * n + j] != want)
                cltest_fail("out[%zu][%zu]=%u expected %u", i, j, out[i * n + j], want);
        }
    printf("n=%zu iterations=%ld verified, %.2f GB/s\n", n, iters, 2.0 * bytes * iters / t * 1e-9);
    cltest_print_time(t);
    uint64_t h = cltest_fnv1a(CLTEST_FNV_INIT, out, bytes);

    CL_CHECK(clReleaseMemObject(buf[0]));
    CL_CHECK(clReleaseMemObject(buf[1]));
    CL_CHECK(clReleaseKernel(k));
    CL_CHECK(clReleaseProgram(prog));
    cltest_teardown(&env);
    free(a); free(out);
    cltest_pass(h);
}
