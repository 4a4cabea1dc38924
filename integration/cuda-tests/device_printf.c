/* What kernels print (device printf) reaches the program's standard output
 * at the points the driver flushes it: context, stream and event
 * synchronization and the context's release; host lines printed between
 * stay in order with the kernels'. One kernel prints more than one reply
 * of the backend carries (about 200 KiB). */
#include "common.h"

static void say(CUfunction f, int tag, int lines, CUstream stream) {
    void *args[] = {&tag, &lines};
    CHECK(cuLaunchKernel(f, 2, 1, 1, 32, 1, 1, 0, stream, args, NULL));
}

int main(int argc, char **argv) {
    const char *module = argc > 1 ? argv[1] : "kernels.ptx";
    CUdevice dev;
    CUmodule mod;
    setup(&dev, module, &mod);
    CUfunction f;
    CHECK(cuModuleGetFunction(&f, mod, "say"));
    printf("host: before\n");
    say(f, 1, 3, NULL);
    CHECK(cuCtxSynchronize());
    printf("host: after a context synchronization\n");
    CUstream stream;
    CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    say(f, 2, 2000, stream);
    CHECK(cuStreamSynchronize(stream));
    printf("host: after a stream synchronization\n");
    CUevent event;
    CHECK(cuEventCreate(&event, 0));
    say(f, 3, 2, stream);
    CHECK(cuEventRecord(event, stream));
    CHECK(cuEventSynchronize(event));
    printf("host: after an event synchronization\n");
    say(f, 4, 2, NULL);
    CHECK(cuEventDestroy(event));
    CHECK(cuStreamDestroy(stream));
    CHECK(cuModuleUnload(mod));
    CHECK(cuDevicePrimaryCtxRelease(dev));
    printf("host: after the context's release\nok\n");
    return 0;
}
