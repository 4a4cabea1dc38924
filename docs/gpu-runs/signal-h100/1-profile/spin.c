/* Cross-process spin ping-pong over shared memory: the floor for a round trip. */
#include <stdio.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>
#include <time.h>
#include <sys/wait.h>
int main(void) {
    _Atomic long *s = mmap(0, 4096, PROT_READ|PROT_WRITE, MAP_SHARED|MAP_ANONYMOUS, -1, 0);
    long n = 2000000;
    if (fork() == 0) { for (long i = 1; i <= n; i++) { while (s[0] != i) ; s[8] = i; } _exit(0); }
    struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 1; i <= n; i++) { s[0] = i; while (s[8] != i) ; }
    clock_gettime(CLOCK_MONOTONIC, &b); wait(0);
    printf("spin ping-pong %.3f us\n", ((b.tv_sec-a.tv_sec)*1e9 + (b.tv_nsec-a.tv_nsec)) / n / 1e3);
    return 0;
}
