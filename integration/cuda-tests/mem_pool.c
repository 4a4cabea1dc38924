/* Stream-ordered allocation: the default pool with a high release
 * threshold serving 64 allocate-fill-read-free rounds on a stream, its
 * figures (used back to 0, reserved until trimmed), a pool of the
 * program's own, and a block freed on one stream taken on another after a
 * synchronization. Printed figures are those any driver gives alike. */
#include "common.h"

#define MB (1u << 20)

static unsigned long long attr(CUmemoryPool pool, CUmemPool_attribute a) {
    unsigned long long v = 0;
    CHECK(cuMemPoolGetAttribute(pool, a, &v));
    return v;
}

static int filled(CUdeviceptr p, size_t words, unsigned value, CUstream s) {
    static unsigned back[MB / 4];
    CHECK(cuMemsetD32Async(p, value, words, s));
    CHECK(cuMemcpyDtoHAsync(back, p, words * 4, s));
    CHECK(cuStreamSynchronize(s));
    for (size_t i = 0; i < words; i++)
        if (back[i] != value) return 0;
    return 1;
}

int main(void) {
    CUdevice dev;
    setup(&dev, NULL, NULL);
    int supported = 0;
    CHECK(cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev));
    printf("memory pools supported: %d\n", supported);
    CUmemoryPool pool;
    CHECK(cuDeviceGetDefaultMemPool(&pool, dev));
    CUmemoryPool current;
    CHECK(cuDeviceGetMemPool(&current, dev));
    printf("default pool is current: %d\n", pool == current);
    unsigned long long keep_all = ~0ull;
    CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all));
    printf("release threshold kept: %d\n", attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) == keep_all);
    CUstream s1, s2;
    CHECK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    int good = 0;
    for (int i = 0; i < 64; i++) {
        CUdeviceptr p;
        CHECK(cuMemAllocAsync(&p, MB, s1));
        good += filled(p, MB / 4, 0x1000u + i, s1);
        CHECK(cuMemFreeAsync(p, s1));
    }
    CHECK(cuStreamSynchronize(s1));
    printf("rounds with the right bytes: %d of 64\n", good);
    printf("used after the frees: %llu\n", attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT));
    printf("used high at least 1 MiB: %d\n", attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH) >= MB);
    printf("reserved while kept: %d\n", attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) >= MB);
    unsigned long long zero = 0;
    CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
    printf("used high after reset: %llu\n", attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH));

    /* Freed on s1, taken on s2 after the synchronization above. */
    CUdeviceptr a, b;
    CHECK(cuMemAllocAsync(&a, 4 * MB, s1));
    CHECK(cuMemFreeAsync(a, s1));
    CHECK(cuStreamSynchronize(s1));
    CHECK(cuMemAllocAsync(&b, 4 * MB, s2));
    printf("other stream's block filled: %d\n", filled(b, MB / 4, 0xabcdu, s2));
    CHECK(cuMemFreeAsync(b, s2));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemPoolTrimTo(pool, 0));
    printf("reserved after trimming: %llu\n", attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT));

    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = dev;
    CUmemoryPool mine;
    CHECK(cuMemPoolCreate(&mine, &props));
    CUmemAccessDesc access = {props.location, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CHECK(cuMemPoolSetAccess(mine, &access, 1));
    CUmemAccess_flags flags;
    CHECK(cuMemPoolGetAccess(&flags, mine, &props.location));
    printf("own pool access read-write: %d\n", flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CUdeviceptr c;
    CHECK(cuMemAllocFromPoolAsync(&c, 3 * MB, mine, s2));
    printf("own pool's block filled: %d\n", filled(c, MB / 4, 0x77u, s2));
    printf("own pool used: %d\n", attr(mine, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) >= 3 * MB);
    CHECK(cuMemFreeAsync(c, s2));
    CHECK(cuStreamSynchronize(s2));
    CHECK(cuMemPoolDestroy(mine));
    printf("destroying the default pool: %d\n", cuMemPoolDestroy(pool) != CUDA_SUCCESS);
    CHECK(cuStreamDestroy(s1));
    CHECK(cuStreamDestroy(s2));
    printf("ok\n");
    return 0;
}
