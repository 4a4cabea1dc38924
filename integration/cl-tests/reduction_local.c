/* reduction_local: sum and max of n uints with a work-group tree reduction in
 * __local memory (barriers; local buffers passed as clSetKernelArg(k, i,
 * size, NULL)), applied pass after pass until one value is left. Integer
 * arithmetic modulo 2^32, so the result does not depend on the order. */
#include "cltest.h"

static const char *src =
    "__kernel void reduce(__global const uint *in_sum, __global const uint *in_max,\n"
    "                     __global uint *out_sum, __global uint *out_max, uint n,\n"
    "                     __local uint *s_sum, __local uint *s_max)\n"
    "{\n"
    "    size_t gid = get_global_id(0), lid = get_local_id(0);\n"
    "    size_t ls = get_local_size(0);\n"
    "    s_sum[lid] = gid < n ? in_sum[gid] : 0u;\n"
    "    s_max[lid] = gid < n ? in_max[gid] : 0u;\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    for (size_t s = ls / 2; s > 0; s >>= 1) {\n"
    "        if (lid < s) {\n"
    "            s_sum[lid] += s_sum[lid + s];\n"
    "            s_max[lid] = max(s_max[lid], s_max[lid + s]);\n"
    "        }\n"
    "        barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    }\n"
    "    if (lid == 0) {\n"
    "        out_sum[get_group_id(0)] = s_sum[0];\n"
    "        out_max[get_group_id(0)] = s_max[0];\n"
    "    }\n"
    "}\n";

int main(int argc, char **argv)
{
    cltest_env env;
    cltest_init("reduction_local");
    cltest_args_check(argc, argv, "n", "[-n ELEMENTS]");
    size_t n = (size_t)cltest_arg(argc, argv, "-n", cltest_quick() ? 100000 : 4000037);
    if (n == 0 || n > 0xffffffffu)
        cltest_fail("bad -n");

    cl_uint *data = cltest_xmalloc(n * sizeof(cl_uint));
    cl_uint ref_sum = 0, ref_max = 0;
    for (size_t i = 0; i < n; i++) {
        data[i] = (cl_uint)(i * 2654435761u) ^ (cl_uint)(i >> 3);
        ref_sum += data[i];
        if (data[i] > ref_max)
            ref_max = data[i];
    }

    cltest_setup(&env, 0);
    cl_program prog = cltest_build(&env, src, NULL);
    cl_kernel k = cltest_kernel(prog, "reduce");

    /* A fixed local size where the device allows it, so the partial sums
     * (part of the checksum) are the same on every run. */
    size_t kwg = 0, local;
    CL_CHECK(clGetKernelWorkGroupInfo(k, env.device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg, NULL));
    local = cltest_pow2_floor(kwg < 128 ? kwg : 128);
    printf("local size %zu\n", local);

    size_t groups0 = (n + local - 1) / local;
    cl_mem in = cltest_buffer(&env, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * sizeof(cl_uint), data);
    cl_mem ps[2], pm[2];
    for (int i = 0; i < 2; i++) {
        ps[i] = cltest_buffer(&env, CL_MEM_READ_WRITE, groups0 * sizeof(cl_uint), NULL);
        pm[i] = cltest_buffer(&env, CL_MEM_READ_WRITE, groups0 * sizeof(cl_uint), NULL);
    }

    double t0 = cltest_now();
    cl_mem cur_s = in, cur_m = in;
    size_t count = n;
    int pass = 0, which = 0;
    cl_uint *first = cltest_xmalloc(groups0 * sizeof(cl_uint));
    while (count > 1 || pass == 0) {
        size_t groups = (count + local - 1) / local;
        size_t global = groups * local;
        cl_uint cn = (cl_uint)count;
        CL_CHECK(clSetKernelArg(k, 0, sizeof(cl_mem), &cur_s));
        CL_CHECK(clSetKernelArg(k, 1, sizeof(cl_mem), &cur_m));
        CL_CHECK(clSetKernelArg(k, 2, sizeof(cl_mem), &ps[which]));
        CL_CHECK(clSetKernelArg(k, 3, sizeof(cl_mem), &pm[which]));
        CL_CHECK(clSetKernelArg(k, 4, sizeof(cl_uint), &cn));
        CL_CHECK(clSetKernelArg(k, 5, local * sizeof(cl_uint), NULL));
        CL_CHECK(clSetKernelArg(k, 6, local * sizeof(cl_uint), NULL));
        CL_CHECK(clEnqueueNDRangeKernel(env.queue, k, 1, NULL, &global, &local, 0, NULL, NULL));
        if (pass == 0) {
            /* Check the first pass' partials against the CPU too. */
            CL_CHECK(clEnqueueReadBuffer(env.queue, ps[which], CL_TRUE, 0, groups * sizeof(cl_uint),
                                         first, 0, NULL, NULL));
        }
        cur_s = ps[which];
        cur_m = pm[which];
        which ^= 1;
        count = groups;
        pass++;
    }
    cl_uint result[2];
    CL_CHECK(clEnqueueReadBuffer(env.queue, cur_s, CL_FALSE, 0, sizeof(cl_uint), &result[0], 0, NULL, NULL));
    CL_CHECK(clEnqueueReadBuffer(env.queue, cur_m, CL_FALSE, 0, sizeof(cl_uint), &result[1], 0, NULL, NULL));
    CL_CHECK(clFinish(env.queue));
    cltest_print_time(cltest_now() - t0);

    for (size_t g = 0; g < groups0; g++) {
        cl_uint s = 0;
        for (size_t i = g * local; i < (g + 1) * local && i < n; i++)
            s += data[i];
        if (first[g] != s)
            cltest_fail("partial sum %zu: %u expected %u", g, first[g], s);
    }
    printf("passes %d, sum %u, max %u\n", pass, result[0], result[1]);
    if (result[0] != ref_sum || result[1] != ref_max)
        cltest_fail("sum %u max %u, expected %u %u", result[0], result[1], ref_sum, ref_max);

    uint64_t h = cltest_fnv1a(CLTEST_FNV_INIT, first, groups0 * sizeof(cl_uint));
    h = cltest_fnv1a(h, result, sizeof result);

    for (int i = 0; i < 2; i++) {
        CL_CHECK(clReleaseMemObject(ps[i]));
        CL_CHECK(clReleaseMemObject(pm[i]));
    }
    CL_CHECK(clReleaseMemObject(in));
    CL_CHECK(clReleaseKernel(k));
    CL_CHECK(clReleaseProgram(prog));
    cltest_teardown(&env);
    free(data);
    free(first);
    cltest_pass(h);
}
