/* bench.h: shared helpers of the vgpu micro-benchmarks.
 *
 * Built on the OpenCL test suite's cltest.h (same device selection,
 * CLTEST_PLATFORM / CLTEST_DEVICE, same error handling). Each program prints
 *   device: <name>
 *   SAMPLE <metric> <parameter> <value>
 * one SAMPLE line per measured repetition (warm-up is never printed), then
 * the usual "RESULT <name> - PASS" line. vgpu-bench reads the SAMPLE lines
 * and computes median, min and max itself.
 */
#ifndef VGPU_BENCH_H
#define VGPU_BENCH_H

#include "cltest.h"

static inline void bench_sample(const char *metric, const char *param, double value)
{
    printf("SAMPLE %s %s %.9g\n", metric, param, value);
}

static inline void bench_sample_size(const char *metric, size_t param, double value)
{
    char p[32];
    snprintf(p, sizeof p, "%zu", param);
    bench_sample(metric, p, value);
}

static int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v). */
static inline double bench_median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static inline void bench_done(void)
{
    printf("RESULT %s - PASS\n", cltest_prog);
    fflush(stdout);
    exit(0);
}

#endif /* VGPU_BENCH_H */
