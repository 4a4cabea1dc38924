/* What basic steps cost on this host: a clock read, sched_yield, a bare
 * system call, and a shared-memory ping-pong between two threads (pure
 * spinning, and yielding between looks, as the vgpu poll loops do). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static _Atomic long ball; static int yielding; static long rounds = 200000;

static void *partner(void *arg)
{
    (void)arg;
    for (long i = 0; i < rounds; i++) {
        while (atomic_load_explicit(&ball, memory_order_acquire) != 2 * i + 1)
            if (yielding) sched_yield(); else __builtin_ia32_pause();
        atomic_store_explicit(&ball, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

static void pingpong(int y)
{
    yielding = y; atomic_store(&ball, 0);
    pthread_t t; pthread_create(&t, NULL, partner, NULL);
    double t0 = now();
    for (long i = 0; i < rounds; i++) {
        atomic_store_explicit(&ball, 2 * i + 1, memory_order_release);
        while (atomic_load_explicit(&ball, memory_order_acquire) != 2 * i + 2)
            if (yielding) sched_yield(); else __builtin_ia32_pause();
    }
    double el = now() - t0;
    pthread_join(t, NULL);
    printf("ping-pong %s: %.3f us a round trip\n", y ? "yielding" : "spinning", el / rounds * 1e6);
}

int main(void)
{
    long n = 1000000; struct timespec ts; double t0 = now();
    for (long i = 0; i < n; i++) clock_gettime(CLOCK_MONOTONIC, &ts);
    printf("clock_gettime: %.1f ns\n", (now() - t0) / n * 1e9);
    t0 = now(); for (long i = 0; i < n; i++) sched_yield();
    printf("sched_yield: %.1f ns\n", (now() - t0) / n * 1e9);
    t0 = now(); for (long i = 0; i < n; i++) syscall(SYS_getppid);
    printf("getppid syscall: %.1f ns\n", (now() - t0) / n * 1e9);
    pingpong(0); pingpong(1); pingpong(0); pingpong(1);
    return 0;
}
