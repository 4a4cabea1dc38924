/* drain: how long a queue takes to drain after a burst of commands.
 *
 * A repetition enqueues KERNELS kernels of about the same length (each
 * work-item spins -w iterations), calls clFlush, then times clFinish:
 *   drain_ms  clFinish right after the burst was flushed
 *   burst_ms  first enqueue to the end of clFinish
 * Through vgpu, clFlush returns once the backend has taken the burst, so
 * drain_ms is what a snapshot's drain of the queue would wait for; with
 * the backend's --queue-depth N, at most N kernels are still in flight.
 * Also reports kernel_ms, one kernel alone (enqueue to clFinish). One
 * untimed repetition comes first.
 */
#include "bench.h"

#define ITEMS 256

static const char *src =
    "__kernel void spin(__global float *x, uint iters)\n"
    "{\n"
    "    size_t g = get_global_id(0);\n"
    "    float v = x[g];\n"
    "    for (uint i = 0; i < iters; i++)\n"
    "        v = v * 0.999f + 0.001f;\n"
    "    x[g] = v;\n"
    "}\n";

static void burst(cltest_env *env, cl_kernel k, long kernels, double *drain, double *total)
{
    size_t items = ITEMS;
    double t0 = cltest_now();
    for (long i = 0; i < kernels; i++)
        CL_CHECK(clEnqueueNDRangeKernel(env->queue, k, 1, NULL, &items, NULL, 0, NULL, NULL));
    CL_CHECK(clFlush(env->queue));
    double t1 = cltest_now();
    CL_CHECK(clFinish(env->queue));
    double t2 = cltest_now();
    *drain = (t2 - t1) * 1e3;
    *total = (t2 - t0) * 1e3;
}

int main(int argc, char **argv)
{
    cltest_env env;
    cltest_init("drain");
    cltest_args_check(argc, argv, "rkw", "[-r REPETITIONS] [-k KERNELS] [-w SPIN_ITERATIONS]");
    long reps = cltest_arg(argc, argv, "-r", 5);
    long kernels = cltest_arg(argc, argv, "-k", 200);
    long spin = cltest_arg(argc, argv, "-w", 20000);
    if (reps < 1 || kernels < 1 || spin > 0x7fffffff)
        cltest_fail("-r and -k must be >= 1, -w < 2^31");

    cltest_setup(&env, 0);
    cl_program prog = cltest_build(&env, src, NULL);
    cl_kernel k = cltest_kernel(prog, "spin");
    float init[ITEMS] = { 0 };
    cl_mem x = cltest_buffer(&env, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof init, init);
    cl_uint iters = (cl_uint)spin;
    CL_CHECK(clSetKernelArg(k, 0, sizeof x, &x));
    CL_CHECK(clSetKernelArg(k, 1, sizeof iters, &iters));

    double drain, total;
    burst(&env, k, kernels, &drain, &total);
    char param[32];
    snprintf(param, sizeof param, "%ld", kernels);
    for (long r = 0; r < reps; r++) {
        double one, one_total;
        burst(&env, k, 1, &one, &one_total);
        bench_sample("kernel_ms", "1", one_total);
        burst(&env, k, kernels, &drain, &total);
        bench_sample("drain_ms", param, drain);
        bench_sample("burst_ms", param, total);
    }

    float out[ITEMS];
    CL_CHECK(clEnqueueReadBuffer(env.queue, x, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL));
    if (!(out[0] > 0.0f && out[0] <= 1.0f))
        cltest_fail("unexpected kernel output %g", (double)out[0]);
    CL_CHECK(clReleaseMemObject(x));
    CL_CHECK(clReleaseKernel(k));
    CL_CHECK(clReleaseProgram(prog));
    cltest_teardown(&env);
    bench_done();
}
