// Kernels of the CUDA driver-API tests: built to PTX, a fat binary and a
// cubin on the GPU machine, and loaded by the C programs with cuModuleLoad*.
#include <cstdio>

extern "C" {

__global__ void vec_add(const float *a, const float *b, float *c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

#define TILE 16
__global__ void matmul(const float *a, const float *b, float *c, int n) {
    __shared__ float ta[TILE][TILE];
    __shared__ float tb[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < (n + TILE - 1) / TILE; t++) {
        int ac = t * TILE + threadIdx.x, br = t * TILE + threadIdx.y;
        ta[threadIdx.y][threadIdx.x] = (row < n && ac < n) ? a[row * n + ac] : 0.0f;
        tb[threadIdx.y][threadIdx.x] = (br < n && col < n) ? b[br * n + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; k++) acc += ta[threadIdx.y][k] * tb[k][threadIdx.x];
        __syncthreads();
    }
    if (row < n && col < n) c[row * n + col] = acc;
}

__global__ void scale(float *x, float f, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * f + 1.0f;
}

__device__ int counter;
__device__ float table[256];

__global__ void use_globals(float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = table[i % 256] * 2.0f;
        atomicAdd(&counter, 1);
    }
}

__global__ void empty(void) {}

/* cross_vm.c: one program's kernel reads at its own buffer plus an offset
 * given as two words (so no parameter looks like a foreign pointer). */
__global__ void peek(unsigned *out, const unsigned *base, unsigned lo, unsigned hi) {
    const char *at = (const char *)base + (((unsigned long long)hi << 32) | lo);
    for (int i = 0; i < 16; i++) out[i] = ((const unsigned *)at)[i];
}

__global__ void bump(unsigned *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1;
}

/* limits_coop.c: every block adds its index, then waits for all the
 * others at a barrier on a counter (sound only when every block is resident,
 * as a cooperative launch guarantees); block 0 then reads the sum. */
__global__ void grid_sum(unsigned *counter, unsigned *sum, unsigned *out) {
    if (threadIdx.x == 0) {
        atomicAdd(sum, blockIdx.x);
        __threadfence();
        atomicAdd(counter, 1u);
        while (atomicAdd(counter, 0u) < gridDim.x) {
        }
        if (blockIdx.x == 0) *out = atomicAdd(sum, 0u);
    }
}

/* device_printf.c: thread 0 of block 0 prints `lines` numbered lines. */
__global__ void say(int tag, int lines) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        for (int i = 0; i < lines; i++) {
            printf("kernel %d line %05d: the quick brown fox jumps over the lazy dog, "
                   "padding the line past eighty bytes\n", tag, i);
        }
    }
}

}
