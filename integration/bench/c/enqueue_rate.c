/* enqueue_rate: how fast tiny kernels go through the queue.
 *
 * A repetition enqueues KERNELS one-work-item kernels (no events), then
 * calls clFinish. It reports
 *   enqueue_rate  kernels per second, first enqueue to the end of clFinish
 *   issue_rate    kernels per second of the enqueue calls alone
 * An untimed repetition of KERNELS/10 kernels comes first. The kernel
 * counts its launches, and the count is checked at the end.
 */
#include "bench.h"

static const char *src =
    "__kernel void tiny(__global uint *count)\n"
    "{\n"
    "    count[0] += 1;\n"
    "}\n";

static void burst(cltest_env *env, cl_kernel k, long kernels, double *issue, double *total)
{
    size_t one = 1;
    double t0 = cltest_now();
    for (long i = 0; i < kernels; i++)
        CL_CHECK(clEnqueueNDRangeKernel(env->queue, k, 1, NULL, &one, &one, 0, NULL, NULL));
    double t1 = cltest_now();
    CL_CHECK(clFinish(env->queue));
    *issue = t1 - t0;
    *total = cltest_now() - t0;
}

int main(int argc, char **argv)
{
    cltest_env env;
    cltest_init("enqueue_rate");
    cltest_args_check(argc, argv, "rk", "[-r REPETITIONS] [-k KERNELS]");
    long reps = cltest_arg(argc, argv, "-r", 5);
    long kernels = cltest_arg(argc, argv, "-k", 100000);
    if (reps < 1 || kernels < 10)
        cltest_fail("-r must be >= 1 and -k >= 10");

    cltest_setup(&env, 0);
    cl_program prog = cltest_build(&env, src, NULL);
    cl_kernel k = cltest_kernel(prog, "tiny");
    cl_uint zero = 0;
    cl_mem count = cltest_buffer(&env, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zero, &zero);
    CL_CHECK(clSetKernelArg(k, 0, sizeof count, &count));

    double issue, total;
    burst(&env, k, kernels / 10, &issue, &total);
    for (long r = 0; r < reps; r++) {
        burst(&env, k, kernels, &issue, &total);
        bench_sample_size("enqueue_rate", (size_t)kernels, (double)kernels / total);
        bench_sample_size("issue_rate", (size_t)kernels, (double)kernels / issue);
    }

    cl_uint seen = 0;
    CL_CHECK(clEnqueueReadBuffer(env.queue, count, CL_TRUE, 0, sizeof seen, &seen, 0, NULL, NULL));
    cl_uint want = (cl_uint)(kernels / 10 + reps * kernels);
    if (seen != want)
        cltest_fail("the kernel ran %u times, expected %u", seen, want);
    CL_CHECK(clReleaseMemObject(count));
    CL_CHECK(clReleaseKernel(k));
    CL_CHECK(clReleaseProgram(prog));
    cltest_teardown(&env);
    bench_done();
}
