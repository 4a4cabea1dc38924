/* idle: a program that holds a context and a queue and does nothing.
 *
 * It makes one call that must reach the device (a blocking read), prints
 *   IDLE-BEGIN
 * sleeps -s SECONDS, prints
 *   IDLE-END
 * and releases everything. Whoever runs it measures, between the two
 * lines, what the backend spends on a VM whose program is idle (it must
 * stay near zero: no polling thread may keep running once the guest has
 * gone quiet).
 */
#include "bench.h"

#include <unistd.h>

int main(int argc, char **argv)
{
    cltest_env env;
    cltest_init("idle");
    cltest_args_check(argc, argv, "s", "[-s SECONDS]");
    long seconds = cltest_arg(argc, argv, "-s", 10);

    cltest_setup(&env, 0);
    cl_mem buf = cltest_buffer(&env, CL_MEM_READ_WRITE, 64, NULL);
    cl_uint value = 0;
    CL_CHECK(clEnqueueReadBuffer(env.queue, buf, CL_TRUE, 0, sizeof value, &value, 0, NULL, NULL));
    printf("IDLE-BEGIN\n");
    fflush(stdout);
    sleep((unsigned)seconds);
    printf("IDLE-END\n");
    fflush(stdout);
    CL_CHECK(clReleaseMemObject(buf));
    cltest_teardown(&env);
    bench_done();
}
