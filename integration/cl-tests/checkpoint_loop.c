/* checkpoint_loop: a long-running iterative program for checkpoint and
 * migration tests. Holds K buffers (-m MiB in total) and runs -i iterations
 * of a deterministic integer update kernel over each buffer, with the
 * iteration's constant passed as a kernel argument, printing "PROGRESS <i>"
 * (after a clFinish) every -p iterations. At the end every element of every
 * buffer is checked against a closed form computed on the CPU, and the
 * checksum covers all buffers. With -a N only the first N buffers are
 * updated (the others keep their initial contents): a guest that writes
 * part of its state, for checkpoints and migrations that copy while it runs.
 * With -r 1 no buffer is updated: each iteration reads every buffer whole
 * and writes only a small result (checkpoint_digest.h), checked and
 * covered by the checksum too; the buffers are created read-only, as a
 * guest declares weights it only reads.
 *
 * Update, per element j of buffer k, ROUNDS times per launch:
 *     v = v * A + (c + r) + j * g_k          (mod 2^32)
 * so after all steps v = P * v0 + Q_k + R * (j * g_k), where P, Q_k and R
 * follow from the step constants alone. */
#include "cltest.h"
#include "checkpoint_digest.h"

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
    cltest_args_check(argc, argv, "mipar",
                      "[-m MIB_TOTAL] [-i ITERATIONS] [-p PROGRESS_EVERY] [-a ACTIVE_BUFFERS] "
                      "[-r READ_MOSTLY (0|1)]");
    long mib = cltest_arg(argc, argv, "-m", cltest_quick() ? 8 : 64);
    long iters = cltest_arg(argc, argv, "-i", cltest_quick() ? 30 : 130);
    long every = cltest_arg(argc, argv, "-p", iters >= 20 ? iters / 20 : 1);
    long active = cltest_arg(argc, argv, "-a", NBUF);
    long read_mostly = cltest_arg(argc, argv, "-r", 0);
    if (mib < 1 || mib > 65536 || iters < 1 || every < 1 || active < 0 || active > NBUF ||
        read_mostly > 1)
        cltest_fail("-m must be 1..65536, -i and -p >= 1, -a 0..8, -r 0 or 1");
    if (read_mostly && cltest_arg(argc, argv, "-a", -1) != -1)
        cltest_fail("-r 1 updates no buffer: -a does not apply");
    if (read_mostly)
        active = 0;

    size_t bytes = (size_t)mib * 1024 * 1024 / NBUF;
    size_t elems = bytes / sizeof(cl_uint);
    cl_uint *host = cltest_xmalloc(bytes);

    cltest_setup(&env, 0);
    char opts[128];
    snprintf(opts, sizeof opts, "-D ROUNDS=%d -D MULT=%uu -D FNV32_BASIS=%uu -D FNV32_PRIME=%uu",
             ROUNDS, MULT, FNV32_BASIS, FNV32_PRIME);
    cl_program prog = cltest_build(&env, read_mostly ? digest_src : src, opts);
    cl_kernel k = cltest_kernel(prog, read_mostly ? "digest" : "update");
    cl_mem buf[NBUF];
    cl_mem_flags flags = read_mostly ? CL_MEM_READ_ONLY : CL_MEM_READ_WRITE;
    for (unsigned b = 0; b < NBUF; b++) {
        for (size_t j = 0; j < elems; j++)
            host[j] = initial(b, (uint32_t)j);
        buf[b] = cltest_buffer(&env, flags | CL_MEM_COPY_HOST_PTR, bytes, host);
    }
    cl_uint result_host[DIGEST_ITEMS];
    cl_mem result = NULL;
    if (read_mostly) {
        for (uint32_t i = 0; i < DIGEST_ITEMS; i++)
            result_host[i] = initial(NBUF, i);
        result = cltest_buffer(&env, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                               sizeof result_host, result_host);
    }
    printf("buffers %d x %zu bytes, %ld iterations, %d rounds\n", NBUF, bytes, iters, ROUNDS);

    double t0 = cltest_now();
    size_t global = elems;
    for (long it = 0; it < iters; it++) {
        for (unsigned b = 0; read_mostly && b < NBUF; b++) {
            cl_uint n = (cl_uint)elems, slice = (cl_uint)digest_slice(elems), c = step_const(b, it);
            size_t items = DIGEST_ITEMS;
            CL_CHECK(clSetKernelArg(k, 0, sizeof(cl_mem), &buf[b]));
            CL_CHECK(clSetKernelArg(k, 1, sizeof(cl_mem), &result));
            CL_CHECK(clSetKernelArg(k, 2, sizeof(cl_uint), &n));
            CL_CHECK(clSetKernelArg(k, 3, sizeof(cl_uint), &slice));
            CL_CHECK(clSetKernelArg(k, 4, sizeof(cl_uint), &c));
            CL_CHECK(clEnqueueNDRangeKernel(env.queue, k, 1, NULL, &items, NULL, 0, NULL, NULL));
        }
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
    static uint32_t slice_hash[NBUF][DIGEST_ITEMS];
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
        for (size_t i = 0; read_mostly && i < DIGEST_ITEMS; i++)
            slice_hash[b][i] = digest_of_slice(host, elems, i);
    }
    if (read_mostly) {
        CL_CHECK(clEnqueueReadBuffer(env.queue, result, CL_TRUE, 0, sizeof result_host, result_host,
                                     0, NULL, NULL));
        for (uint32_t i = 0; i < DIGEST_ITEMS; i++) {
            uint32_t want = initial(NBUF, i);
            for (long it = 0; it < iters; it++)
                for (unsigned b = 0; b < NBUF; b++)
                    want = want * MULT + (slice_hash[b][i] ^ step_const(b, it));
            if (result_host[i] != want)
                cltest_fail("result word %u: %08x expected %08x", i, result_host[i], want);
        }
        h = cltest_fnv1a(h, result_host, sizeof result_host);
    }
    printf("%ld iterations x %d buffers verified, %.2f ms/iteration\n", iters, NBUF, t / iters * 1e3);
    cltest_print_time(t);

    for (unsigned b = 0; b < NBUF; b++)
        CL_CHECK(clReleaseMemObject(buf[b]));
    if (result)
        CL_CHECK(clReleaseMemObject(result));
    CL_CHECK(clReleaseKernel(k));
    CL_CHECK(clReleaseProgram(prog));
    cltest_teardown(&env);
    free(host);
    cltest_pass(h);
}
