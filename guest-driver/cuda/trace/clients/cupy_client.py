"""CuPy: elementwise + reduction, a RawKernel, matmul, fft, random."""
import cupy as cp

x = cp.arange(1 << 20, dtype=cp.float32)
y = (x * 2 + 1).sum()
print("reduce", float(y))
k = cp.RawKernel(r'''
extern "C" __global__ void twice(const float *a, float *b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] = 2 * a[i];
}''', 'twice')
out = cp.empty_like(x)
k(((x.size + 255) // 256,), (256,), (x, out, cp.int32(x.size)))
print("rawkernel", bool(cp.allclose(out, 2 * x)))
a = cp.random.rand(256, 256, dtype=cp.float32)
b = cp.random.rand(256, 256, dtype=cp.float32)
c = cp.matmul(a, b)
print("matmul", float(c.sum()) > 0)
f = cp.fft.fft(cp.ones(1024, dtype=cp.complex64))
print("fft", complex(f[0]))
print("random", float(cp.random.standard_normal(1000).std()) > 0.5)
cp.cuda.Device().synchronize()
print("cupy: PASS")
