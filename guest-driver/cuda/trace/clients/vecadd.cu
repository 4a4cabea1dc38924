// A plain CUDA runtime program: built with nvcc's default static cudart and
// with -cudart shared, to trace what cudart asks of the driver.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void add(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

int main()
{
    const int n = 1 << 20;
    static float a[1 << 20], b[1 << 20], c[1 << 20];
    for (int i = 0; i < n; i++) {
        a[i] = i;
        b[i] = 2 * i;
    }
    float *da, *db, *dc;
    cudaMalloc(&da, n * sizeof(float));
    cudaMalloc(&db, n * sizeof(float));
    cudaMalloc(&dc, n * sizeof(float));
    cudaMemcpy(da, a, n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(db, b, n * sizeof(float), cudaMemcpyHostToDevice);
    add<<<(n + 255) / 256, 256>>>(da, db, dc, n);
    cudaError_t e = cudaDeviceSynchronize();
    cudaMemcpy(c, dc, n * sizeof(float), cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int i = 0; i < n; i++)
        bad += c[i] != 3.0f * i;
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    int rt = 0, dv = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&dv);
    printf("vecadd: %s (sync %s, runtime %d, driver %d)\n", bad ? "FAIL" : "PASS", cudaGetErrorName(e), rt, dv);
    return bad != 0;
}
