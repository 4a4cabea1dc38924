/* roundtrip: the cost of one synchronous OpenCL call.
 *
 *   device_info   clGetDeviceInfo(CL_DEVICE_MAX_COMPUTE_UNITS)
 *   finish_empty  clFinish on an empty in-order queue
 *   read_4b       blocking clEnqueueReadBuffer of 4 bytes
 *
 * Calls are timed in batches of BATCH; a repetition reports the median
 * per-call time of its batches, in microseconds. One untimed repetition
 * comes first. Through vgpu, clFinish always travels to the backend and
 * back unless the ICD knows the queue is drained; clGetDeviceInfo may be
 * answered by the ICD from a cache. A blocking read always travels: it is
 * the call to watch where the transport's own round trip matters (in a VM).
 */
#include "bench.h"

#define BATCH 10

typedef void (*call_fn)(cltest_env *env);

static cl_mem small_buf; /* read_4b's source, made by main */

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
    small_buf = cltest_buffer(&env, CL_MEM_READ_WRITE, 64, NULL);
    double *scratch = cltest_xmalloc((size_t)(calls / BATCH) * sizeof(double));
    static const struct {
        const char *name;
        call_fn fn;
    } cases[] = { { "device_info", device_info },
                  { "finish_empty", finish_empty },
                  { "read_4b", read_4b } };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        measure(&env, cases[c].fn, calls, scratch); /* warm-up */
        for (long r = 0; r < reps; r++)
            bench_sample(cases[c].name, "-", measure(&env, cases[c].fn, calls, scratch));
    }
    free(scratch);
    CL_CHECK(clReleaseMemObject(small_buf));
    cltest_teardown(&env);
    bench_done();
}
