/* 2D fills (cuMemsetD2D8/16/32, synchronous and on a stream) of a pitched
 * region inside a larger allocation: the bytes between the rows and around
 * the region must keep their old value. */
#include "common.h"

int main(void) {
    CUdevice dev;
    setup(&dev, NULL, NULL);
    const size_t pitch = 512, rows = 40, total = pitch * (rows + 4);
    CUdeviceptr base;
    CHECK(cuMemAlloc(&base, total));
    CUstream stream;
    CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    unsigned char *host = malloc(total);
    const struct { int bits; int on_stream; } fills[] = {{8, 0}, {16, 0}, {32, 0}, {8, 1}, {16, 1}, {32, 1}};
    for (size_t i = 0; i < sizeof fills / sizeof fills[0]; i++) {
        CHECK(cuMemsetD8(base, 0x11, total));
        CUdeviceptr at = base + 2 * pitch + 8;  /* rows 2.., 8 bytes in */
        size_t width = 100 / (fills[i].bits / 8);  /* elements per row */
        CUstream s = fills[i].on_stream ? stream : NULL;
        switch (fills[i].bits) {
        case 8:
            CHECK(s ? cuMemsetD2D8Async(at, pitch, 0xab, width, rows, s)
                    : cuMemsetD2D8(at, pitch, 0xab, width, rows));
            break;
        case 16:
            CHECK(s ? cuMemsetD2D16Async(at, pitch, 0xabcd, width, rows, s)
                    : cuMemsetD2D16(at, pitch, 0xabcd, width, rows));
            break;
        default:
            CHECK(s ? cuMemsetD2D32Async(at, pitch, 0xabcdef01u, width, rows, s)
                    : cuMemsetD2D32(at, pitch, 0xabcdef01u, width, rows));
        }
        if (s) CHECK(cuStreamSynchronize(s));
        CHECK(cuMemcpyDtoH(host, base, total));
        size_t filled = 0, untouched = 0;
        for (size_t b = 0; b < total; b++) {
            if (host[b] == 0x11) untouched++;
            else filled++;
        }
        printf("D2D%d%s: %zu bytes filled, %zu untouched, checksum %016llx\n", fills[i].bits,
               s ? " on a stream" : "", filled, untouched,
               checksum((const float *)host, total / sizeof(float)));
    }
    CHECK(cuStreamDestroy(stream));
    CHECK(cuMemFree(base));
    printf("ok\n");
    return 0;
}
