/* smith_waterman: local sequence alignment (linear gap penalty) of two
 * pseudo-random DNA sequences. The score matrix H lives on the device and
 * is filled one anti-diagonal per kernel launch: n + m - 1 short kernels,
 * each with the diagonal as a kernel argument and the first row as the
 * NDRange global offset. Latency-bound by design. -i aligns the query
 * against that many different database sequences (a database search), each
 * on the same device matrix. Integer scores; every matrix is compared with
 * the CPU's and checksummed. */
#include "cltest.h"

#define LOCAL 64
#define MATCH 3
#define MISMATCH (-3)
#define GAP 2

static const char *src =
    "__kernel __attribute__((reqd_work_group_size(64, 1, 1)))\n"
    "void sw_diag(__global int *h, __global const uchar *a, __global const uchar *b,\n"
    "             uint m, uint d, uint i_end)\n"
    "{\n"
    "    uint i = (uint)get_global_id(0);\n"
    "    if (i > i_end)\n"
    "        return;\n"
    "    uint j = d - i;\n"
    "    uint w = m + 1;\n"
    "    int s = a[i - 1] == b[j - 1] ? MATCH : MISMATCH;\n"
    "    int v = h[(i - 1) * w + (j - 1)] + s;\n"
    "    v = max(v, h[(i - 1) * w + j] - GAP);\n"
    "    v = max(v, h[i * w + (j - 1)] - GAP);\n"
    "    h[i * w + j] = max(v, 0);\n"
    "}\n";

static void make_seq(unsigned char *s, size_t len, uint32_t seed)
{
    static const char acgt[4] = { 'A', 'C', 'G', 'T' };
    for (size_t i = 0; i < len; i++) {
        seed = seed * 1103515245u + 12345u;
        s[i] = (unsigned char)acgt[(seed >> 16) & 3];
    }
}

static int imax(int a, int b) { return a > b ? a : b; }

int main(int argc, char **argv)
{
    cltest_env env;
    cltest_init("smith_waterman");
    cltest_args_check(argc, argv, "nmi", "[-n QUERY_LENGTH] [-m DATABASE_LENGTH] [-i SEQUENCES]");
    size_t n = (size_t)cltest_arg(argc, argv, "-n", cltest_quick() ? 200 : 1500);
    size_t m = (size_t)cltest_arg(argc, argv, "-m", cltest_quick() ? 300 : 2000);
    long iters = cltest_arg(argc, argv, "-i", cltest_quick() ? 1 : 12);
    if (n == 0 || m == 0 || n > 65536 || m > 65536 || iters < 1)
        cltest_fail("-n and -m must be 1..65536, -i >= 1");

    unsigned char *a = cltest_xmalloc(n), *b = cltest_xmalloc(m);
    make_seq(a, n, 1);
    size_t w = m + 1, cells = (n + 1) * w;
    cl_int *h = cltest_xmalloc(cells * sizeof(cl_int)), *ref = cltest_xmalloc(cells * sizeof(cl_int));

    cltest_setup(&env, 0);
    char opts[128];
    snprintf(opts, sizeof opts, "-D MATCH=%d -D MISMATCH=%d -D GAP=%d", MATCH, MISMATCH, GAP);
    cl_program prog = cltest_build(&env, src, opts);
    cl_kernel k = cltest_kernel(prog, "sw_diag");
    cl_mem dh = cltest_buffer(&env, CL_MEM_READ_WRITE, cells * sizeof(cl_int), NULL);
    cl_mem da = cltest_buffer(&env, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n, a);
    cl_mem db = cltest_buffer(&env, CL_MEM_READ_ONLY, m, NULL);
    cl_uint mm = (cl_uint)m;
    CL_CHECK(clSetKernelArg(k, 0, sizeof(cl_mem), &dh));
    CL_CHECK(clSetKernelArg(k, 1, sizeof(cl_mem), &da));
    CL_CHECK(clSetKernelArg(k, 2, sizeof(cl_mem), &db));
    CL_CHECK(clSetKernelArg(k, 3, sizeof(cl_uint), &mm));

    /* Untimed warm-up: one group, nothing in range (i_end = 0). */
    size_t local = LOCAL, offset = 1;
    cl_uint zero = 0, two = 2;
    CL_CHECK(clSetKernelArg(k, 4, sizeof(cl_uint), &two));
    CL_CHECK(clSetKernelArg(k, 5, sizeof(cl_uint), &zero));
    CL_CHECK(clEnqueueNDRangeKernel(env.queue, k, 1, &offset, &local, &local, 0, NULL, NULL));
    CL_CHECK(clFinish(env.queue));

    double t = 0;
    unsigned launches = 0;
    uint64_t hs = CLTEST_FNV_INIT;
    for (long it = 0; it < iters; it++) {
        /* Database sequence it, with a stretch of the query planted in it
         * so there is a real local alignment to find. */
        make_seq(b, m, 2 + (uint32_t)it);
        size_t at = (size_t)it * 97 % m;
        for (size_t i = 0; i < n / 3 && at + i < m; i++)
            b[at + i] = a[n / 3 + i];

        double t0 = cltest_now();
        cl_int zeros = 0;
        CL_CHECK(clEnqueueWriteBuffer(env.queue, db, CL_FALSE, 0, m, b, 0, NULL, NULL));
        CL_CHECK(clEnqueueFillBuffer(env.queue, dh, &zeros, sizeof zeros, 0, cells * sizeof(cl_int), 0,
                                     NULL, NULL));
        for (size_t d = 2; d <= n + m; d++) {
            size_t i_start = d > m ? d - m : 1;
            size_t i_end = d - 1 < n ? d - 1 : n;
            size_t count = i_end - i_start + 1;
            size_t global = (count + LOCAL - 1) / LOCAL * LOCAL;
            cl_uint dd = (cl_uint)d, ie = (cl_uint)i_end;
            CL_CHECK(clSetKernelArg(k, 4, sizeof(cl_uint), &dd));
            CL_CHECK(clSetKernelArg(k, 5, sizeof(cl_uint), &ie));
            CL_CHECK(clEnqueueNDRangeKernel(env.queue, k, 1, &i_start, &global, &local, 0, NULL, NULL));
            launches++;
        }
        CL_CHECK(clEnqueueReadBuffer(env.queue, dh, CL_TRUE, 0, cells * sizeof(cl_int), h, 0, NULL, NULL));
        t += cltest_now() - t0;

        int best = 0;
        memset(ref, 0, cells * sizeof(cl_int));
        for (size_t i = 1; i <= n; i++)
            for (size_t j = 1; j <= m; j++) {
                int s = a[i - 1] == b[j - 1] ? MATCH : MISMATCH;
                int v = imax(ref[(i - 1) * w + j - 1] + s,
                             imax(ref[(i - 1) * w + j] - GAP, ref[i * w + j - 1] - GAP));
                ref[i * w + j] = imax(v, 0);
                best = imax(best, ref[i * w + j]);
            }
        for (size_t c = 0; c < cells; c++)
            if (h[c] != ref[c])
                cltest_fail("sequence %ld: H[%zu][%zu]=%d expected %d", it, c / w, c % w, h[c], ref[c]);
        printf("sequence %ld: best score %d\n", it, best);
        hs = cltest_fnv1a(hs, h, cells * sizeof(cl_int));
    }
    printf("n=%zu m=%zu sequences=%ld launches=%u verified, %.1f us/launch\n", n, m, iters, launches,
           t / launches * 1e6);
    cltest_print_time(t);

    CL_CHECK(clReleaseMemObject(dh));
    CL_CHECK(clReleaseMemObject(da));
    CL_CHECK(clReleaseMemObject(db));
    CL_CHECK(clReleaseKernel(k));
    CL_CHECK(clReleaseProgram(prog));
    cltest_teardown(&env);
    free(a); free(b); free(h); free(ref);
    cltest_pass(hs);
}
