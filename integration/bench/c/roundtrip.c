/* roundtrip: the cost of one synchronous OpenCL call.
 *
 *   device_info   clGetDeviceInfo(CL_DEVICE_MAX_COMPUTE_UNITS)
 *   finish_empty  clFinish on an empty in-order queue
 *
 * Calls are timed in batches of BATCH; a repetition reports the median
 * per-call time of its batches, in microseconds. One untimed repetition
 * comes first. Through vgpu, clFinish always travels to the backend and
 * back; clGetDeviceInfo may be answered by the ICD from a cache.
 */
#include "bench.h"

#define BATCH 10

typedef void (*call_fn)(cltest_env *env);

static void device_info(cltest_env *env)
{
    cl_uint units = 0;
    CL_CHECK(clGetDeviceInfo(env->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL));
}

static void finish_empty(cltest_env *env)
{
    CL_CHECK(clFinish(env->queue));
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

int main(int argc, char **argv)
{
    cltest_env env;
    cltest_init("roundtrip");
    cltest_args_check(argc, argv, "rc", "[-r REPETITIONS] [-c CALLS]");
    long reps = cltest_arg(argc, argv, "-r", 5);
    long calls = cltest_arg(argc, argv, "-c", 20000);
    if (reps < 1 || calls < BATCH)
        cltest_fail("-r must be >= 1 and -c >= %d", BATCH);

    cltest_setup(&env, 0);
    double *scratch = cltest_xmalloc((size_t)(calls / BATCH) * sizeof(double));
    static const struct {
        const char *name;
        call_fn fn;
    } cases[] = { { "device_info", device_info }, { "finish_empty", finish_empty } };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        measure(&env, cases[c].fn, calls, scratch); /* warm-up */
        for (long r = 0; r < reps; r++)
            bench_sample(cases[c].name, "-", measure(&env, cases[c].fn, calls, scratch));
    }
    free(scratch);
    cltest_teardown(&env);
    bench_done();
}
