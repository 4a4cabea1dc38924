"""CuPy through the CUDA runtime: elementwise, reduction, a RawKernel
(NVRTC-compiled PTX/cubin loaded with cuModuleLoadData). Stages: reduce
(the first two), all, and matmul (elementwise and a cuBLAS matmul alone,
kept out of "all" so that a cuBLAS failure hides none of the rest)."""
import sys
import cupy as cp

stage = sys.argv[1] if len(sys.argv) > 1 else "all"
x = cp.arange(1 << 20, dtype=cp.float32)
y = x * 2 + 1
print("elementwise", float(y[12345]), flush=True)
if stage == "matmul":
    a = cp.arange(256 * 256, dtype=cp.float32).reshape(256, 256) % 17 - 8
    b = cp.arange(256 * 256, dtype=cp.float32).reshape(256, 256).T % 13 - 6
    c = cp.matmul(a, b)
    print("matmul sum %.1f c[3,5] %.1f" % (float(c.sum()), float(c[3, 5])), flush=True)
    sys.exit(0)
print("reduce %.1f" % float(y.sum()), flush=True)
if stage == "reduce":
    sys.exit(0)
k = cp.RawKernel(r'''
extern "C" __global__ void twice(const float *a, float *b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) b[i] = 2 * a[i];
}''', 'twice')
out = cp.empty_like(x)
k(((x.size + 255) // 256,), (256,), (x, out, cp.int32(x.size)))
print("rawkernel", bool(cp.allclose(out, 2 * x)), float(out[777]), flush=True)
cp.cuda.Device().synchronize()
print("cupy: PASS")
