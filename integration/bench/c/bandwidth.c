/* bandwidth: blocking clEnqueueWriteBuffer / clEnqueueReadBuffer between
 * ordinary (malloc'd, pre-touched) host memory and one device buffer, for
 * sizes from -m to -M bytes in powers of four.
 *
 * A sample moves OPS transfers of one size, OPS chosen so a sample moves at
 * least 64 MiB or makes 256 transfers; it reports GB/s (1e9 bytes/s) as
 *   SAMPLE write <bytes> <GB/s>      SAMPLE read <bytes> <GB/s>
 * Each size and direction gets one untimed sample first.
 */
#include "bench.h"

#define TARGET_BYTES (64u << 20)
#define MAX_OPS 256

static double transfer(cltest_env *env, cl_mem buf, int write, void *host, size_t size, long ops)
{
    double t0 = cltest_now();
    for (long i = 0; i < ops; i++) {
        if (write)
            CL_CHECK(clEnqueueWriteBuffer(env->queue, buf, CL_TRUE, 0, size, host, 0, NULL, NULL));
        else
            CL_CHECK(clEnqueueReadBuffer(env->queue, buf, CL_TRUE, 0, size, host, 0, NULL, NULL));
    }
    double t = cltest_now() - t0;
    return (double)size * (double)ops / t / 1e9;
}

int main(int argc, char **argv)
{
    cltest_env env;
    cltest_init("bandwidth");
    cltest_args_check(argc, argv, "rmM", "[-r REPETITIONS] [-m MIN_BYTES] [-M MAX_BYTES]");
    long reps = cltest_arg(argc, argv, "-r", 5);
    size_t min = (size_t)cltest_arg(argc, argv, "-m", 4096);
    size_t max = (size_t)cltest_arg(argc, argv, "-M", 256u << 20);
    if (reps < 1 || min < 1 || max < min)
        cltest_fail("-r must be >= 1 and 1 <= -m <= -M");

    cltest_setup(&env, 0);
    cl_mem buf = cltest_buffer(&env, CL_MEM_READ_WRITE, max, NULL);
    unsigned char *host = cltest_xmalloc(max);
    for (size_t i = 0; i < max; i++)
        host[i] = (unsigned char)(i * 7);
    /* Touch the whole device buffer once. */
    CL_CHECK(clEnqueueWriteBuffer(env.queue, buf, CL_TRUE, 0, max, host, 0, NULL, NULL));

    for (size_t size = min; size <= max; size *= 4) {
        long ops = (long)(TARGET_BYTES / size);
        ops = ops < 1 ? 1 : ops > MAX_OPS ? MAX_OPS : ops;
        for (int write = 1; write >= 0; write--) {
            const char *metric = write ? "write" : "read";
            transfer(&env, buf, write, host, size, ops);
            for (long r = 0; r < reps; r++)
                bench_sample_size(metric, size, transfer(&env, buf, write, host, size, ops));
        }
        if (size > max / 4)
            break;
    }

    /* The last read brought back what was written: check a few bytes. */
    for (size_t i = 0; i < min && i < max; i += 97)
        if (host[i] != (unsigned char)(i * 7))
            cltest_fail("byte %zu read back as %u", i, host[i]);
    CL_CHECK(clReleaseMemObject(buf));
    free(host);
    cltest_teardown(&env);
    bench_done();
}
