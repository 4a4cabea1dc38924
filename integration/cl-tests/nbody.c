/* nbody: all-pairs gravitational N-body, O(n^2) work per step, -i steps.
 * Each work-item integrates one body (softened gravity, leapfrog-like
 * update) reading positions from one buffer and writing the next, so the
 * summation order is fixed and the device output is deterministic for a
 * given device and compiler. Compared with a CPU reference (float, same
 * order) within a tolerance; the checksum is over the device's bytes. */
#include <math.h>
#include "cltest.h"

#define LOCAL 64

static const char *src =
    "__kernel __attribute__((reqd_work_group_size(64, 1, 1)))\n"
    "void nbody_step(__global const float4 *pos, __global float4 *vel,\n"
    "          __global float4 *pos_out, uint n, float dt, float eps2)\n"
    "{\n"
    "    size_t i = get_global_id(0);\n"
    "    if (i >= n)\n"
    "        return;\n"
    "    float4 p = pos[i];\n"
    "    float ax = 0.0f, ay = 0.0f, az = 0.0f;\n"
    "    for (uint j = 0; j < n; j++) {\n"
    "        float4 q = pos[j];\n"
    "        float dx = q.x - p.x, dy = q.y - p.y, dz = q.z - p.z;\n"
    "        float r2 = dx * dx + dy * dy + dz * dz + eps2;\n"
    "        float inv = 1.0f / sqrt(r2);\n"
    "        float s = q.w * inv * inv * inv;\n"
    "        ax += dx * s; ay += dy * s; az += dz * s;\n"
    "    }\n"
    "    float4 v = vel[i];\n"
    "    v.x += ax * dt; v.y += ay * dt; v.z += az * dt;\n"
    "    vel[i] = v;\n"
    "    p.x += v.x * dt; p.y += v.y * dt; p.z += v.z * dt;\n"
    "    pos_out[i] = p;\n"
    "}\n";

static void cpu_step(const cl_float4 *pos, cl_float4 *vel, cl_float4 *out, size_t n, float dt, float eps2)
{
    for (size_t i = 0; i < n; i++) {
        float px = pos[i].s[0], py = pos[i].s[1], pz = pos[i].s[2];
        float ax = 0, ay = 0, az = 0;
        for (size_t j = 0; j < n; j++) {
            float dx = pos[j].s[0] - px, dy = pos[j].s[1] - py, dz = pos[j].s[2] - pz;
            float r2 = dx * dx + dy * dy + dz * dz + eps2;
            float inv = 1.0f / sqrtf(r2);
            float s = pos[j].s[3] * inv * inv * inv;
            ax += dx * s; ay += dy * s; az += dz * s;
        }
        vel[i].s[0] += ax * dt; vel[i].s[1] += ay * dt; vel[i].s[2] += az * dt;
        out[i] = pos[i];
        out[i].s[0] += vel[i].s[0] * dt;
        out[i].s[1] += vel[i].s[1] * dt;
        out[i].s[2] += vel[i].s[2] * dt;
    }
}

int main(int argc, char **argv)
{
    cltest_env env;
    cltest_init("nbody");
    cltest_args_check(argc, argv, "ni", "[-n BODIES] [-i STEPS]");
    size_t n = (size_t)cltest_arg(argc, argv, "-n", cltest_quick() ? 512 : 4096);
    long steps = cltest_arg(argc, argv, "-i", cltest_quick() ? 2 : 10);
    if (n == 0 || n > (1u << 24) || steps < 1)
        cltest_fail("bad -n or -i");
    const float dt = 0.001f, eps2 = 0.01f;

    size_t bytes = n * sizeof(cl_float4);
    cl_float4 *pos = cltest_xmalloc(bytes), *vel = cltest_xmalloc(bytes);
    cl_float4 *rpos = cltest_xmalloc(bytes), *rvel = cltest_xmalloc(bytes);
    cl_float4 *rtmp = cltest_xmalloc(bytes), *dpos = cltest_xmalloc(bytes), *dvel = cltest_xmalloc(bytes);
    /* Deterministic pseudo-random cloud in a unit cube, masses 1..4 / n. */
    uint32_t s = 12345u;
    for (size_t i = 0; i < n; i++) {
        for (int c = 0; c < 3; c++) {
            s = s * 1664525u + 1013904223u;
            pos[i].s[c] = (float)(s >> 8) / 16777216.0f - 0.5f;
            vel[i].s[c] = 0.0f;
        }
        pos[i].s[3] = (float)(1 + i % 4) / (float)n;
        vel[i].s[3] = 0.0f;
    }

    cltest_setup(&env, 0);
    cl_program prog = cltest_build(&env, src, NULL);
    cl_kernel k = cltest_kernel(prog, "nbody_step");
    cl_mem dp[2], dv;
    dp[0] = cltest_buffer(&env, CL_MEM_READ_WRITE, bytes, NULL);
    dp[1] = cltest_buffer(&env, CL_MEM_READ_WRITE, bytes, NULL);
    dv = cltest_buffer(&env, CL_MEM_READ_WRITE, bytes, NULL);
    cl_uint nn = (cl_uint)n;
    size_t local = LOCAL, global = (n + LOCAL - 1) / LOCAL * LOCAL;
    CL_CHECK(clSetKernelArg(k, 1, sizeof(cl_mem), &dv));
    CL_CHECK(clSetKernelArg(k, 4, sizeof(float), &dt));
    CL_CHECK(clSetKernelArg(k, 5, sizeof(float), &eps2));

    /* Untimed warm-up: one work-group with n = 0 (writes nothing). */
    cl_uint zero = 0;
    CL_CHECK(clSetKernelArg(k, 0, sizeof(cl_mem), &dp[0]));
    CL_CHECK(clSetKernelArg(k, 2, sizeof(cl_mem), &dp[1]));
    CL_CHECK(clSetKernelArg(k, 3, sizeof(cl_uint), &zero));
    CL_CHECK(clEnqueueNDRangeKernel(env.queue, k, 1, NULL, &local, &local, 0, NULL, NULL));
    CL_CHECK(clFinish(env.queue));
    CL_CHECK(clSetKernelArg(k, 3, sizeof(cl_uint), &nn));

    double t0 = cltest_now();
    CL_CHECK(clEnqueueWriteBuffer(env.queue, dp[0], CL_FALSE, 0, bytes, pos, 0, NULL, NULL));
    CL_CHECK(clEnqueueWriteBuffer(env.queue, dv, CL_FALSE, 0, bytes, vel, 0, NULL, NULL));
    for (long it = 0; it < steps; it++) {
        CL_CHECK(clSetKernelArg(k, 0, sizeof(cl_mem), &dp[it & 1]));
        CL_CHECK(clSetKernelArg(k, 2, sizeof(cl_mem), &dp[(it + 1) & 1]));
        CL_CHECK(clEnqueueNDRangeKernel(env.queue, k, 1, NULL, &global, &local, 0, NULL, NULL));
    }
    CL_CHECK(clEnqueueReadBuffer(env.queue, dp[steps & 1], CL_FALSE, 0, bytes, dpos, 0, NULL, NULL));
    CL_CHECK(clEnqueueReadBuffer(env.queue, dv, CL_TRUE, 0, bytes, dvel, 0, NULL, NULL));
    double t = cltest_now() - t0;

    memcpy(rpos, pos, bytes);
    memcpy(rvel, vel, bytes);
    for (long it = 0; it < steps; it++) {
        cpu_step(rpos, rvel, rtmp, n, dt, eps2);
        memcpy(rpos, rtmp, bytes);
    }
    /* Positions move by ~1e-3 per step: compare in absolute terms against
     * the cube's scale, velocities relative to their magnitude. */
    double maxdp = 0, maxdv = 0, vscale = 1e-6;
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < 3; c++) {
            double ev = fabs((double)rvel[i].s[c]);
            if (ev > vscale)
                vscale = ev;
        }
    for (size_t i = 0; i < n; i++) {
        for (int c = 0; c < 4; c++) {
            if (!isfinite(dpos[i].s[c]) || !isfinite(dvel[i].s[c]))
                cltest_fail("body %zu component %d not finite", i, c);
            double e = fabs((double)dpos[i].s[c] - rpos[i].s[c]);
            double ev = fabs((double)dvel[i].s[c] - rvel[i].s[c]) / vscale;
            if (e > maxdp) maxdp = e;
            if (ev > maxdv) maxdv = ev;
        }
    }
    printf("n=%zu steps=%ld max |dpos|=%.3g max |dvel|/vmax=%.3g, %.2f Ginteractions/s\n", n, steps,
           maxdp, maxdv, (double)n * n * steps / t * 1e-9);
    if (maxdp > 1e-4 || maxdv > 1e-3)
        cltest_fail("differs from CPU reference: dpos %.3g dvel %.3g", maxdp, maxdv);
    cltest_print_time(t);
    uint64_t h = cltest_fnv1a(CLTEST_FNV_INIT, dpos, bytes);
    h = cltest_fnv1a(h, dvel, bytes);

    CL_CHECK(clReleaseMemObject(dp[0]));
    CL_CHECK(clReleaseMemObject(dp[1]));
    CL_CHECK(clReleaseMemObject(dv));
    CL_CHECK(clReleaseKernel(k));
    CL_CHECK(clReleaseProgram(prog));
    cltest_teardown(&env);
    free(pos); free(vel); free(rpos); free(rvel); free(rtmp); free(dpos); free(dvel);
    cltest_pass(h);
}
