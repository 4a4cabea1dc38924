/* big_transfer: blocking writes and reads of large buffers from memory
 * spread over ordinary 4 KiB pages, none physically next to another.
 *
 * In a VM each run of physically contiguous pages costs one virtqueue
 * descriptor, and a chain holds at most 4096: a 32 MiB chunk of scattered
 * pages needs 8192. The host buffer's pages are interleaved with a second
 * buffer's as they are first touched (and huge pages are declined), so the
 * guest library must cut transfers to fit whatever the page layout.
 *   big_transfer [-m MIB]...   sizes to move (default 64 and 256) */
#define _GNU_SOURCE
#include "cltest.h"

#include <sys/mman.h>
#include <unistd.h>

/* Two mappings of `len` bytes whose pages are faulted in alternately, so
 * neither has two physically adjacent pages (as far as the allocator
 * hands out consecutive frames); the second is unmapped again. */
static unsigned char *scattered(size_t len)
{
    unsigned char *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED || b == MAP_FAILED)
        cltest_fail("mmap of %zu bytes failed", len);
    madvise(a, len, MADV_NOHUGEPAGE);
    madvise(b, len, MADV_NOHUGEPAGE);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t off = 0; off < len; off += page) {
        a[off] = 1;
        b[off] = 1;
    }
    munmap(b, len);
    return a;
}

static void fill(unsigned char *p, size_t len, uint64_t seed)
{
    uint64_t x = seed;
    for (size_t i = 0; i + 8 <= len; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(p + i, &x, 8);
    }
}

/* FNV-1a over 64-bit words: a byte-wise hash of 256 MiB takes seconds
 * under an emulated CPU. */
static uint64_t word_hash(const unsigned char *p, size_t len)
{
    uint64_t h = CLTEST_FNV_INIT, w;
    for (size_t i = 0; i + 8 <= len; i += 8) {
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
    }
    return h;
}

int main(int argc, char **argv)
{
    cltest_env env;
    cltest_init("big_transfer");
    long sizes[8];
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-m") == 0 && i + 1 < argc && n < 8) {
            sizes[n++] = atol(argv[++i]);
        } else {
            cltest_fail("usage: big_transfer [-m MIB]...");
        }
    }
    if (n == 0) {
        sizes[n++] = 64;
        sizes[n++] = 256;
    }
    cltest_setup(&env, 0);
    uint64_t sum = CLTEST_FNV_INIT;
    for (int s = 0; s < n; s++) {
        if (sizes[s] <= 0 || sizes[s] > 4096)
            cltest_fail("bad -m %ld", sizes[s]);
        size_t len = (size_t)sizes[s] << 20;
        unsigned char *host = scattered(len);
        fill(host, len, 0x9e3779b97f4a7c15ULL + (uint64_t)s);
        uint64_t written = word_hash(host, len);
        cl_mem buf = cltest_buffer(&env, CL_MEM_READ_WRITE, len, NULL);
        double t0 = cltest_now();
        CL_CHECK(clEnqueueWriteBuffer(env.queue, buf, CL_TRUE, 0, len, host, 0, NULL, NULL));
        double t1 = cltest_now();
        memset(host, 0, len);
        CL_CHECK(clEnqueueReadBuffer(env.queue, buf, CL_TRUE, 0, len, host, 0, NULL, NULL));
        double t2 = cltest_now();
        uint64_t read = word_hash(host, len);
        if (read != written)
            cltest_fail("%zu MiB: read back %016llx, wrote %016llx", len >> 20,
                        (unsigned long long)read, (unsigned long long)written);
        printf("%zu MiB: write %.1f MB/s, read %.1f MB/s\n", len >> 20,
               len / (t1 - t0) / 1e6, len / (t2 - t1) / 1e6);
        sum = cltest_fnv1a(sum, &read, sizeof read);
        CL_CHECK(clReleaseMemObject(buf));
        munmap(host, len);
    }
    cltest_pass(sum);
    return 0;
}
