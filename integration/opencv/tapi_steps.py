"""The steps of the two operations that differ through vgpu on the H100.

    tapi_steps.py [--size WxH]

Canny with apertureSize=5 and matchTemplate with TM_SQDIFF gave other
results through vgpu than natively on NVIDIA (CONFORMANCE.md). This runs
the OpenCL steps OpenCV takes for them one by one, on tapi_check.py's
input, and prints one line per step: name, SHA-256 of the result (first
16 hex digits), and a few numbers. Run it natively and through vgpu and
compare the lines: the first step that differs holds the cause.

Canny(apertureSize=5) is Sobel (5x5, CV_16S, BORDER_REPLICATE) for dx and
dy, then OpenCV's canny kernels on them (what Canny(dx, dy, ...) runs);
matchTemplate SQDIFF of a large template is a DFT cross-correlation
(TM_CCORR), integrals of the image's squares and the template's square
sum, combined by one more kernel.
"""

import argparse
import hashlib
import os

os.environ["OPENCV_OPENCL_RAISE_ERROR"] = "1"

import cv2  # noqa: E402
import numpy as np  # noqa: E402

from tapi_check import synthetic_image  # noqa: E402


def line(name, result):
    """One step's fingerprint; a UMat is downloaded first."""
    if isinstance(result, (tuple, list)):
        arrays = [r.get() if isinstance(r, cv2.UMat) else np.asarray(r) for r in result]
    else:
        arrays = [result.get() if isinstance(result, cv2.UMat) else np.asarray(result)]
    digest = hashlib.sha256()
    total = 0.0
    for a in arrays:
        digest.update(np.ascontiguousarray(a).tobytes())
        total += float(np.asarray(a, np.float64).sum())
    shapes = " ".join("x".join(str(d) for d in a.shape) + ":" + str(a.dtype) for a in arrays)
    print(f"{name:32s} {digest.hexdigest()[:16]} sum={total:.9g} {shapes}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="640x480")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    cv2.ocl.setUseOpenCL(True)
    device = cv2.ocl.Device.getDefault()
    print(f"device '{device.name()}', OpenCL in use: {cv2.ocl.useOpenCL()}", flush=True)
    grey_np = cv2.cvtColor(synthetic_image(width, height), cv2.COLOR_BGR2GRAY)
    grey = cv2.UMat(grey_np)
    line("input", grey)

    # Canny, apertureSize=5.
    dx = cv2.Sobel(grey, cv2.CV_16S, 1, 0, ksize=5, borderType=cv2.BORDER_REPLICATE)
    dy = cv2.Sobel(grey, cv2.CV_16S, 0, 1, ksize=5, borderType=cv2.BORDER_REPLICATE)
    line("sobel5_dx_16s_replicate", dx)
    line("sobel5_dy_16s_replicate", dy)
    line("canny_from_dx_dy", cv2.Canny(dx, dy, 200, 600))
    line("canny_aperture5", cv2.Canny(grey, 200, 600, apertureSize=5))
    line("canny_aperture5_cpu", cv2.Canny(grey_np, 200, 600, apertureSize=5))
    # Aperture 3: one kernel (stage1_with_sobel), also 32x32.
    line("canny_aperture3", cv2.Canny(grey, 50, 150))
    line("canny_aperture3_cpu", cv2.Canny(grey_np, 50, 150))

    # matchTemplate, TM_SQDIFF.
    templ_np = grey_np[100:164, 200:280].copy()
    templ = cv2.UMat(templ_np)
    line("ccorr", cv2.matchTemplate(grey, templ, cv2.TM_CCORR))
    line("integral_32f_32f", cv2.integral2(grey, sdepth=cv2.CV_32F, sqdepth=cv2.CV_32F))
    line("integral_32f_64f", cv2.integral2(grey, sdepth=cv2.CV_32F, sqdepth=cv2.CV_64F))
    line("templ_sqsum", np.float64(cv2.norm(templ, cv2.NORM_L2SQR)))
    line("dft_32f", cv2.dft(cv2.UMat(grey_np.astype(np.float32))))
    line("sqdiff", cv2.matchTemplate(grey, templ, cv2.TM_SQDIFF))
    line("sqdiff_cpu", cv2.matchTemplate(grey_np, templ_np, cv2.TM_SQDIFF))
    cv2.ocl.finish()


if __name__ == "__main__":
    main()
