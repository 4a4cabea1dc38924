"""CuPy through the CUDA runtime: elementwise, reduction, a RawKernel
(NVRTC-compiled PTX/cubin loaded with cuModuleLoadData). Stages: reduce
(the first two), all, and matmul (elementwise and a cuBLAS matmul alone,
kept out of "all" so that a cuBLAS failure hides none of the rest), fft
(cuFFT) and random (cuRAND), each alone too."""
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
if stage == "fft":
    f = cp.fft.fft(cp.cos(cp.arange(1024, dtype=cp.float32) * (2 * 3.141592653589793 * 8 / 1024)))
    peak = int(cp.argmax(cp.abs(f[:512])))
    print("fft peak bin %d magnitude %.1f" % (peak, float(cp.abs(f[peak]))), flush=True)
    sys.exit(0)
if stage == "random":
    g = cp.random.Generator(cp.random.XORWOW(seed=1234))
    r = cp.random.RandomState(seed=1234).standard_normal(1 << 16, dtype=cp.float32)
    print("random mean %.4f first %.6f" % (float(r.mean()), float(r[0])), flush=True)
    u = g.random(8, dtype=cp.float64)
    print("generator first %.6f" % float(u[0]), flush=True)
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
