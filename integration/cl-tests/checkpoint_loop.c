/* checkpoint_loop: a long-running iterative program for checkpoint and
 * migration tests. Holds K buffers (-m MiB in total) and runs -i iterations
 * of a deterministic integer update kernel over each buffer, with the
 * iteration's constant passed as a kernel argument, printing "PROGRESS <i>"
 * (after a clFinish) every -p iterations. At the end every element of every
 * buffer is checked against a closed form computed on the CPU, and the
 * checksum covers all buffers. With -a N only the first N buffers are
 * updated (the others keep their initial contents): a guest that writes
 * part of its state, for checkpoints and migrations that copy while it runs.
 *
 * Update, per element j of buffer k, ROUNDS times per launch:
 *     v = v * A + (c + r) + j * g_k          (mod 2^32)
 * so after all steps v = P * v0 + Q_k + R * (j * g_k), where P, Q_k and R
 * follow from the step constants alone. */
#include "cltest.h"

#define NBUF 8
#define ROUNDS 4
#define MULT 1664525u

static const char *src =
    "__kernel void update(__global uint *x, uint c, uint g)\n"
    "{\n"
    "    uint j = (uint)get_global_id(0);\n"
    "    uint h = j * g;\n"
    "    uint v = x[j];\n"
    "    for (uint r = 0; r < ROUNDS; r++)\n"
    "        v = v * MULT + (c + r) + h;\n"
    "    x[j] = v;\n"
    "}\n";

static uint32_t mix(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

static uint32_t step_const(unsigned k, long it) { return mix((uint32_t)it * 0x9e3779b9u + k); }
static uint32_t buf_mult(unsigned k) { return mix(k + 1000u) | 1u; }
static uint32_t initial(unsigned k, uint32_t j) { return mix(j ^ (k << 27)) + k; }

int main(int argc, char **argv)
{
    cltest_env env;
    cltest_init("checkpoint_loop");
    cltest_args_check(argc, argv, "mipa",
                      "[-m MIB_TOTAL] [-i ITERATIONS] [-p PROGRESS_EVERY] [-a ACTIVE_BUFFERS]");
    long mib = cltest_arg(argc, argv, "-m", cltest_quick() ? 8 : 64);
    long iters = cltest_arg(argc, argv, "-i", cltest_quick() ? 30 : 130);
    long every = cltest_arg(argc, argv, "-p", iters >= 20 ? iters / 20 : 1);
    long active = cltest_arg(argc, argv, "-a", NBUF);
    if (mib < 1 || mib > 65536 || iters < 1 || every < 1 || active < 0 || active > NBUF)
        cltest_fail("-m must be 1..65536, -i and -p >= 1, -a 0..8");

    size_t bytes = (size_t)mib * 1024 * 1024 / NBUF;
    size_t elems = bytes / sizeof(cl_uint);
    cl_uint *host = cltest_xmalloc(bytes);

    cltest_setup(&env, 0);
    char opts[64];
    snprintf(opts, sizeof opts, "-D ROUNDS=%d -D MULT=%uu", ROUNDS, MULT);
    cl_program prog = cltest_build(&env, src, opts);
    cl_kernel k = cltest_kernel(prog, "update");
    cl_mem buf[NBUF];
    for (unsigned b = 0; b < NBUF; b++) {
        for (size_t j = 0; j < elems; j++)
            host[j] = initial(b, (uint32_t)j);
        buf[b] = cltest_buffer(&env, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, host);
    }
    printf("buffers %d x %zu bytes, %ld iterations, %d rounds\n", NBUF, bytes, iters, ROUNDS);

    double t0 = cltest_now();
    size_t global = elems;
    for (long it = 0; it < iters; it++) {
        for (unsigned b = 0; b < (unsigned)active; b++) {
            cl_uint c = step_const(b, it), g = buf_mult(b);
            CL_CHECK(clSetKernelArg(k, 0, sizeof(cl_mem), &buf[b]));
            CL_CHECK(clSetKernelArg(k, 1, sizeof(cl_uint), &c));
            CL_CHECK(clSetKernelArg(k, 2, sizeof(cl_uint), &g));
            CL_CHECK(clEnqueueNDRangeKernel(env.queue, k, 1, NULL, &global, NULL, 0, NULL, NULL));
        }
        if ((it + 1) % every == 0 || it + 1 == iters) {
            CL_CHECK(clFinish(env.queue));
            printf("PROGRESS %ld\n", it + 1);
            fflush(stdout);
        }
    }
    double t = cltest_now() - t0;

    uint64_t h = CLTEST_FNV_INIT;
    for (unsigned b = 0; b < NBUF; b++) {
        uint32_t p = 1, q = 0, r = 0;
        for (long it = 0; b < (unsigned)active && it < iters; it++) {
            uint32_t c = step_const(b, it);
            for (uint32_t rr = 0; rr < ROUNDS; rr++) {
                p *= MULT;
                q = q * MULT + c + rr;
                r = r * MULT + 1;
            }
        }
        uint32_t g = buf_mult(b);
        CL_CHECK(clEnqueueReadBuffer(env.queue, buf[b], CL_TRUE, 0, bytes, host, 0, NULL, NULL));
        for (size_t j = 0; j < elems; j++) {
            uint32_t want = p * initial(b, (uint32_t)j) + q + r * ((uint32_t)j * g);
            if (host[j] != want)
                cltest_fail("buffer %u element %zu: %08x expected %08x", b, j, host[j], want);
        }
        h = cltest_fnv1a(h, host, bytes);
    }
    printf("%ld iterations x %d buffers verified, %.2f ms/iteration\n", iters, NBUF, t / iters * 1e3);
    cltest_print_time(t);

    for (unsigned b = 0; b < NBUF; b++)
        CL_CHECK(clReleaseMemObject(buf[b]));
    CL_CHECK(clReleaseKernel(k));
    CL_CHECK(clReleaseProgram(prog));
    cltest_teardown(&env);
    free(host);
    cltest_pass(h);
}
