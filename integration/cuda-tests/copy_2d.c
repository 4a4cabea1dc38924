/* Pitched allocations and 2D copies: cuMemAllocPitch's pitch for several
 * row widths; a host matrix with padded rows copied into a pitched
 * allocation, from there into a region of another (at an x/y offset), and
 * back into host rows of yet another pitch, synchronously and on a stream,
 * with unified addresses too; the bytes between and around the rows must
 * keep their values. A peer copy between two contexts' memory last. */
#include "common.h"

#define W 100  /* bytes per row */
#define H 37

static void fill(unsigned char *p, size_t n, unsigned char seed) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(seed + i * 7);
}

static CUDA_MEMCPY2D plain(void) {
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    return c;
}

int main(void) {
    CUdevice dev;
    setup(&dev, NULL, NULL);
    size_t widths[] = {1, 100, 512, 513, 4000};
    for (int i = 0; i < 5; i++) {
        CUdeviceptr p;
        size_t pitch;
        CHECK(cuMemAllocPitch(&p, &pitch, widths[i], 3, 4));
        printf("pitch for %zu-byte rows: %zu\n", widths[i], pitch);
        CHECK(cuMemFree(p));
    }
    CUstream stream;
    CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    for (int round = 0; round < 3; round++) {  /* sync, async, unified */
        CUdeviceptr a, b;
        size_t pa, pb;
        CHECK(cuMemAllocPitch(&a, &pa, W, H, 4));
        CHECK(cuMemAllocPitch(&b, &pb, W + 64, H + 5, 4));
        CHECK(cuMemsetD8(a, 0x11, pa * H));
        CHECK(cuMemsetD8(b, 0x22, pb * (H + 5)));
        size_t hp = W + 28, op = W + 300;
        unsigned char *host = malloc(hp * H), *out = malloc(op * H);
        fill(host, hp * H, (unsigned char)round);
        memset(out, 0x33, op * H);
        CUstream s = round == 1 ? stream : NULL;

        CUDA_MEMCPY2D up = plain();
        up.srcMemoryType = round == 2 ? CU_MEMORYTYPE_UNIFIED : CU_MEMORYTYPE_HOST;
        if (round == 2) up.srcDevice = (CUdeviceptr)host; else up.srcHost = host;
        up.srcPitch = hp;
        up.dstMemoryType = round == 2 ? CU_MEMORYTYPE_UNIFIED : CU_MEMORYTYPE_DEVICE;
        up.dstDevice = a;
        up.dstPitch = pa;
        up.WidthInBytes = W;
        up.Height = H;

        CUDA_MEMCPY2D across = plain();
        across.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        across.srcDevice = a;
        across.srcXInBytes = 4;
        across.srcY = 1;
        across.srcPitch = pa;
        across.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        across.dstDevice = b;
        across.dstXInBytes = 32;
        across.dstY = 3;
        across.dstPitch = pb;
        across.WidthInBytes = W - 4;
        across.Height = H - 1;

        CUDA_MEMCPY2D down = plain();
        down.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        down.srcDevice = b;
        down.srcPitch = pb;
        down.dstMemoryType = round == 2 ? CU_MEMORYTYPE_UNIFIED : CU_MEMORYTYPE_HOST;
        if (round == 2) down.dstDevice = (CUdeviceptr)out; else down.dstHost = out;
        down.dstXInBytes = 5;
        down.dstPitch = op;
        down.WidthInBytes = W + 64;
        down.Height = H;

        if (s) {
            CHECK(cuMemcpy2DAsync(&up, s));
            CHECK(cuMemcpy2DAsync(&across, s));
            CHECK(cuMemcpy2DAsync(&down, s));
            CHECK(cuStreamSynchronize(s));
        } else {
            CHECK(cuMemcpy2D(&up));
            CHECK(cuMemcpy2DUnaligned(&across));
            CHECK(cuMemcpy2D(&down));
        }
        /* Expected: b's region rows 3.., 32 bytes in, hold a's rows 1..
         * from byte 4; the rest of b is 0x22; out rows hold b's rows. */
        size_t wrong = 0;
        for (size_t r = 0; r < H; r++)
            for (size_t x = 0; x < op; x++) {
                unsigned char want = 0x33;
                if (x >= 5 && x < 5 + W + 64) {
                    size_t bx = x - 5;
                    want = 0x22;
                    if (r >= 3 && bx >= 32 && bx < 32 + W - 4 && r - 3 < H - 1)
                        want = host[(r - 3 + 1) * hp + (bx - 32 + 4)];
                }
                wrong += out[r * op + x] != want;
            }
        printf("round %d (%s): %zu wrong bytes, checksum %016llx\n", round,
               round == 0 ? "synchronous" : round == 1 ? "on a stream" : "unified addresses",
               wrong, checksum((const float *)out, op * H / 4));
        free(host);
        free(out);
        CHECK(cuMemFree(a));
        CHECK(cuMemFree(b));
    }
    CUcontext primary, other;
    CHECK(cuCtxGetCurrent(&primary));
    CHECK(cuCtxCreate(&other, NULL, 0, dev));
    CUdeviceptr theirs;
    CHECK(cuMemAlloc(&theirs, 4096));
    CHECK(cuMemsetD32(theirs, 0x5a5a5a5a, 1024));
    CHECK(cuCtxSetCurrent(primary));
    CUdeviceptr mine;
    CHECK(cuMemAlloc(&mine, 4096));
    CHECK(cuMemcpyPeer(mine, primary, theirs, other, 4096));
    CHECK(cuMemcpyPeerAsync(mine + 2048, primary, theirs, other, 16, stream));
    CHECK(cuStreamSynchronize(stream));
    unsigned words[1024];
    CHECK(cuMemcpyDtoH(words, mine, sizeof words));
    size_t good = 0;
    for (int i = 0; i < 1024; i++) good += words[i] == 0x5a5a5a5au;
    printf("peer copy: %zu of 1024 words\n", good);
    CHECK(cuMemFree(mine));
    CHECK(cuCtxDestroy(other));
    CHECK(cuStreamDestroy(stream));
    printf("ok\n");
    return 0;
}
