/* A module with __device__ globals: set a table, count threads, read back.
 * Run once per image kind (PTX, fat binary, cubin). */
#include "common.h"

int main(int argc, char **argv) {
    const char *image = argc > 1 ? argv[1] : "kernels.ptx";
    CUdevice dev;
    CUmodule mod;
    CUcontext ctx = setup(&dev, NULL, NULL);
    (void)ctx;
    /* Load from memory, as programs embedding their kernels do. */
    FILE *fp = fopen(image, "rb");
    if (!fp) { perror(image); return 1; }
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *data = calloc(1, len + 1);
    if (fread(data, 1, len, fp) != (size_t)len) { perror("read"); return 1; }
    fclose(fp);
    CHECK(cuModuleLoadData(&mod, data));
    CUdeviceptr dtable, dcounter;
    size_t table_size, counter_size;
    CHECK(cuModuleGetGlobal(&dtable, &table_size, mod, "table"));
    CHECK(cuModuleGetGlobal(&dcounter, &counter_size, mod, "counter"));
    float table[256];
    for (int i = 0; i < 256; i++) table[i] = i * 0.125f;
    int zero = 0;
    CHECK(cuMemcpyHtoD(dtable, table, sizeof table));
    CHECK(cuMemcpyHtoD(dcounter, &zero, sizeof zero));
    const int n = 10000;
    CUdeviceptr out;
    CHECK(cuMemAlloc(&out, n * sizeof(float)));
    CUfunction f;
    CHECK(cuModuleGetFunction(&f, mod, "use_globals"));
    void *args[] = {&out, (void *)&n};
    CHECK(cuLaunchKernel(f, (n + 127) / 128, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
    int counter = -1;
    CHECK(cuMemcpyDtoH(&counter, dcounter, sizeof counter));
    float *h = malloc(n * sizeof(float));
    CHECK(cuMemcpyDtoH(h, out, n * sizeof(float)));
    printf("globals table=%zu bytes counter=%d (expect %d) checksum=%016llx\n",
           table_size, counter, n, checksum(h, n));
    CHECK(cuMemFree(out));
    CHECK(cuModuleUnload(mod));
    printf("ok\n");
    return 0;
}
