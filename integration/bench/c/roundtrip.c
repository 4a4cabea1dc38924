/* roundtrip: the cost of one synchronous OpenCL call.
 *
 *   device_info        clGetDeviceInfo(CL_DEVICE_MAX_COMPUTE_UNITS)
 *   finish_empty       clFinish on an empty in-order queue
 *   read_4b            blocking clEnqueueReadBuffer of 4 bytes
 *   program_info       clGetProgramInfo(CL_PROGRAM_NUM_KERNELS), back to back
 *   program_info_idle  the same call, each after GAP µs asleep
 *
 * Back-to-back calls are timed in batches of BATCH; a repetition reports
 * the median per-call time of its batches, in microseconds. Idle calls are
 * timed one by one (IDLE_CALLS of them, default CALLS/20) and a repetition
 * reports their median. One untimed repetition of each comes first.
 *
 * Through vgpu the ICD answers clGetDeviceInfo from a cache, clFinish of a
 * queue it knows drained without asking the backend, and a small read of a
 * placed buffer on a drained queue with a memcpy: none of those need a
 * round trip. clGetProgramInfo(CL_PROGRAM_NUM_KERNELS) always travels to
 * the backend and back: it is the call whose added time is the transport's.
 * Back to back, the backend's vring thread is still polling for the next
 * request when it comes; after a gap longer than its poll budget
 * (--poll-us, 50 µs by default) the thread sleeps on the kick and must be
 * woken: "from idle". The default gap, 2 ms, is well past that budget.
 */
#include "bench.h"

#define BATCH 10

typedef void (*call_fn)(cltest_env *env);

static cl_mem small_buf;      /* read_4b's source, made by main */
static cl_program one_kernel; /* program_info's subject, built by main */

static const char *one_kernel_src = "__kernel void one(__global int *x) { x[0] = 1; }\n";

static void device_info(cltest_env *env)
{
    cl_uint units = 0;
    CL_CHECK(clGetDeviceInfo(env->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL));
}

static void finish_empty(cltest_env *env)
{
    CL_CHECK(clFinish(env->queue));
}

static void read_4b(cltest_env *env)
{
    cl_uint value = 0;
    CL_CHECK(clEnqueueReadBuffer(env->queue, small_buf, CL_TRUE, 0, sizeof value, &value, 0, NULL,
                                 NULL));
}

static void program_info(cltest_env *env)
{
    (void)env;
    size_t kernels = 0;
    CL_CHECK(clGetProgramInfo(one_kernel, CL_PROGRAM_NUM_KERNELS, sizeof kernels, &kernels, NULL));
    if (kernels != 1)
        cltest_fail("CL_PROGRAM_NUM_KERNELS is %zu, expected 1", kernels);
}

/* Median per-call time (µs) over `calls` calls. */
static double measure(cltest_env *env, call_fn fn, long calls, double *scratch)
{
    long batches = calls / BATCH;
    for (long b = 0; b < batches; b++) {
        double t0 = cltest_now();
        for (int i = 0; i < BATCH; i++)
            fn(env);
        scratch[b] = (cltest_now() - t0) * 1e6 / BATCH;
    }
    return bench_median(scratch, (size_t)batches);
}

/* Median time (µs) of `calls` single calls, each after `gap_us` asleep. */
static double measure_idle(cltest_env *env, call_fn fn, long calls, long gap_us, double *scratch)
{
    struct timespec gap = { gap_us / 1000000, (gap_us % 1000000) * 1000L };
    for (long c = 0; c < calls; c++) {
        nanosleep(&gap, NULL);
        double t0 = cltest_now();
        fn(env);
        scratch[c] = (cltest_now() - t0) * 1e6;
    }
    return bench_median(scratch, (size_t)calls);
}

int main(int argc, char **argv)
{
    cltest_env env;
    cltest_init("roundtrip");
    cltest_args_check(argc, argv, "rcgi",
                      "[-r REPETITIONS] [-c CALLS] [-g GAP_US] [-i IDLE_CALLS]");
    long reps = cltest_arg(argc, argv, "-r", 5);
    long calls = cltest_arg(argc, argv, "-c", 20000);
    long gap_us = cltest_arg(argc, argv, "-g", 2000);
    long idle_calls = cltest_arg(argc, argv, "-i", calls >= 20 ? calls / 20 : 1);
    if (reps < 1 || calls < BATCH || idle_calls < 1 || idle_calls > calls)
        cltest_fail("-r and -i must be >= 1, -c >= %d, -i <= -c", BATCH);

    cltest_setup(&env, 0);
    small_buf = cltest_buffer(&env, CL_MEM_READ_WRITE, 64, NULL);
    one_kernel = cltest_build(&env, one_kernel_src, NULL);
    double *scratch = cltest_xmalloc((size_t)calls * sizeof(double));
    static const struct {
        const char *name;
        call_fn fn;
    } cases[] = { { "device_info", device_info },
                  { "finish_empty", finish_empty },
                  { "read_4b", read_4b },
                  { "program_info", program_info } };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        measure(&env, cases[c].fn, calls, scratch); /* warm-up */
        for (long r = 0; r < reps; r++)
            bench_sample(cases[c].name, "-", measure(&env, cases[c].fn, calls, scratch));
    }
    char gap[32];
    snprintf(gap, sizeof gap, "%ld", gap_us);
    measure_idle(&env, program_info, idle_calls, gap_us, scratch); /* warm-up */
    for (long r = 0; r < reps; r++)
        bench_sample("program_info_idle", gap,
                     measure_idle(&env, program_info, idle_calls, gap_us, scratch));
    free(scratch);
    CL_CHECK(clReleaseProgram(one_kernel));
    CL_CHECK(clReleaseMemObject(small_buf));
    cltest_teardown(&env);
    bench_done();
}
