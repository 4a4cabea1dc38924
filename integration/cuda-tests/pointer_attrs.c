/* Every pointer attribute (cuPointerGetAttribute, and cuPointerGetAttributes
 * one at a time and all at once) of device memory, page-locked, mapped,
 * registered and pageable host memory: the status, the bytes written and
 * what the value is (its own address, the range's start or size, the
 * context, zero or a small number), so native and vgpu runs compare.
 * Left out, as the README says vgpu answers them differently: whether
 * device memory suits legacy IPC, GPUDirect RDMA or hardware decompression
 * (10, 15, 21), and the driver's mapping behind the memory (18, 19). */
#include "common.h"

static CUcontext ctx;

static const char *what(int attribute, unsigned long long v, unsigned long long ptr,
                        unsigned long long base, unsigned long long size,
                        unsigned long long dev) {
    static char buf[32];
    if (attribute == CU_POINTER_ATTRIBUTE_CONTEXT) return v == (unsigned long long)ctx ? "ctx" : "other";
    if (attribute == CU_POINTER_ATTRIBUTE_BUFFER_ID || attribute == 20) return v ? "id" : "0";
    if (v == 0) return "0";
    /* Natively a mapped range's device copy is the host memory itself. */
    if (attribute == CU_POINTER_ATTRIBUTE_DEVICE_POINTER && dev && v == dev) return "device copy";
    if (v == ptr) return "ptr";
    if (v == base) return "base";
    if (v == size) return "size";
    if (v == 0xfffffffeull) return "-2";
    if (v < 64) { snprintf(buf, sizeof buf, "%llu", v); return buf; }
    return "other";
}

static int skipped(int a) { return a == 10 || a == 15 || a == 18 || a == 19 || a == 21; }

/* Bytes written: the last one that differs from either of two fills. */
static int written(const unsigned char *a, const unsigned char *b) {
    int w = 0;
    for (int i = 0; i < 16; i++) if (a[i] != 0xAA || b[i] != 0x55) w = i + 1;
    return w;
}

static void probe(const char *kind, unsigned long long ptr, unsigned long long base,
                  unsigned long long size, unsigned long long dev) {
    for (int a = 1; a <= 21; a++) {
        if (skipped(a)) continue;
        unsigned char b1[16], b2[16];
        memset(b1, 0xAA, 16);
        memset(b2, 0x55, 16);
        CUresult r = cuPointerGetAttribute(b1, a, ptr);
        cuPointerGetAttribute(b2, a, ptr);
        int w = written(b1, b2);
        unsigned long long v = 0;
        memcpy(&v, b1, w > 8 ? 8 : w);
        unsigned char c1[16], c2[16];
        memset(c1, 0xAA, 16);
        memset(c2, 0x55, 16);
        void *d1[1] = {c1}, *d2[1] = {c2};
        CUpointer_attribute at[1] = {(CUpointer_attribute)a};
        CUresult rb = cuPointerGetAttributes(1, at, d1, ptr);
        cuPointerGetAttributes(1, at, d2, ptr);
        int wb = written(c1, c2);
        unsigned long long vb = 0;
        memcpy(&vb, c1, wb > 8 ? 8 : wb);
        /* Bytes count only on success: the driver may write on failure. */
        printf("%s %2d: alone rc %d, %d bytes, %s; in a batch rc %d, %d bytes, %s\n", kind, a,
               r, r ? 0 : w, r ? "-" : what(a, v, ptr, base, size, dev), rb, rb ? 0 : wb,
               rb ? "-" : what(a, vb, ptr, base, size, dev));
    }
    /* What cudart asks for cudaPointerGetAttributes, at once. */
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                                   CU_POINTER_ATTRIBUTE_HOST_POINTER,
                                   CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
    unsigned long long out[6];
    void *data[6];
    for (int i = 0; i < 6; i++) { out[i] = 0xAAAAAAAAAAAAAAAAull; data[i] = &out[i]; }
    CUresult r = cuPointerGetAttributes(6, attrs, data, ptr);
    printf("%s batch of six: rc %d", kind, r);
    for (int i = 0; i < 6 && r == CUDA_SUCCESS; i++) {
        unsigned long long v = out[i];
        if (attrs[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE || attrs[i] == CU_POINTER_ATTRIBUTE_IS_MANAGED ||
            attrs[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
            v &= 0xffffffffull;
        printf(", %s", what(attrs[i], v, ptr, base, size, dev));
    }
    printf("\n");
}

int main(void) {
    CUdevice d;
    ctx = setup(&d, NULL, NULL);
    CUdeviceptr dp;
    CHECK(cuMemAlloc(&dp, 4096));
    probe("device", dp + 16, dp, 4096, 0);
    void *pinned;
    CHECK(cuMemAllocHost(&pinned, 4096));
    probe("page-locked", (unsigned long long)pinned + 16, (unsigned long long)pinned, 4096, 0);
    void *mapped;
    CHECK(cuMemHostAlloc(&mapped, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
    CUdeviceptr mdev;
    CHECK(cuMemHostGetDevicePointer(&mdev, mapped, 0));
    probe("mapped", (unsigned long long)mapped + 16, (unsigned long long)mapped, 4096, mdev + 16);
    char *pageable = malloc(1 << 20);
    probe("pageable", (unsigned long long)pageable + 16, 0, 0, 0);
    void *registered = aligned_alloc(4096, 8192);
    CHECK(cuMemHostRegister(registered, 8192, 0));
    probe("registered", (unsigned long long)registered + 16, (unsigned long long)registered, 8192, 0);
    CHECK(cuMemHostUnregister(registered));
    CHECK(cuMemFreeHost(mapped));
    CHECK(cuMemFreeHost(pinned));
    CHECK(cuMemFree(dp));
    free(registered);
    free(pageable);
    return 0;
}
