"""The OpenCV T-API operations tapi_check.py runs, with their OpenCL programs.

Each entry: a name, the OpenCL program (MODULE--NAME, as OpenCV's program
cache names it) that the operation's OpenCL path builds, and a function of
the inputs (UMats "colour", BGR 8-bit, and "grey") returning its result.
The program name is what proves the OpenCL path ran: OpenCV falls back to
its CPU code silently when an OpenCL path declines a case, so every case
here is one OpenCV 5.0 has an OpenCL path for (resize's INTER_CUBIC, a
3-channel LUT and a float-sum integral2 have none: they are not here).
Each operation builds its program with options no earlier one used, so
the program cache shows its build.
"""

import cv2
import numpy as np


def _maps(width, height):
    """remap's float maps: a gentle barrel distortion."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    cx, cy = width / 2.0, height / 2.0
    r2 = ((x - cx) ** 2 + (y - cy) ** 2) / (cx * cx + cy * cy)
    factor = 1 + 0.15 * r2
    return (cv2.UMat((cx + (x - cx) * factor).astype(np.float32)),
            cv2.UMat((cy + (y - cy) * factor).astype(np.float32)))


def _size(u):
    rows, cols = u.get().shape[:2]
    return cols, rows


def _rotation(u):
    w, h = _size(u)
    return cv2.getRotationMatrix2D((w / 2.0, h / 2.0), 17.0, 0.9), (w, h)


def _perspective(u):
    w, h = _size(u)
    src = np.float32([[0, 0], [w - 1, 0], [w - 1, h - 1], [0, h - 1]])
    dst = np.float32([[20, 10], [w - 40, 30], [w - 10, h - 20], [30, h - 50]])
    return cv2.getPerspectiveTransform(src, dst), (w, h)


def _template(u):
    return cv2.UMat(u.get()[100:164, 200:280].copy())


def _remap(u, interpolation):
    w, h = _size(u)
    mx, my = _maps(w, h)
    return cv2.remap(u, mx, my, interpolation, borderMode=cv2.BORDER_REFLECT)


def _float(u):
    return cv2.UMat(u.get().astype(np.float32) / 255.0)


def operations():
    """(name, program, function) for every operation, in order."""
    k3 = np.float32([[0, -1, 0], [-1, 5, -1], [0, -1, 0]])
    ellipse = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (5, 5))
    lut = np.array([(i * 7) % 256 for i in range(256)], np.float32) / 3
    return [
        # colour conversions
        ("cvtColor_BGR2GRAY", "imgproc--color_rgb",
         lambda i: cv2.cvtColor(i["colour"], cv2.COLOR_BGR2GRAY)),
        ("cvtColor_BGR2HSV", "imgproc--color_hsv",
         lambda i: cv2.cvtColor(i["colour"], cv2.COLOR_BGR2HSV)),
        ("cvtColor_BGR2Lab", "imgproc--color_lab",
         lambda i: cv2.cvtColor(i["colour"], cv2.COLOR_BGR2Lab)),
        ("cvtColor_BGR2YUV", "imgproc--color_yuv",
         lambda i: cv2.cvtColor(i["colour"], cv2.COLOR_BGR2YUV)),
        # geometry
        ("resize_nearest", "imgproc--resize",
         lambda i: cv2.resize(i["colour"], (320, 240), interpolation=cv2.INTER_NEAREST)),
        ("resize_linear", "imgproc--resize",
         lambda i: cv2.resize(i["colour"], (1088, 816), interpolation=cv2.INTER_LINEAR)),
        ("resize_linear_grey", "imgproc--resize",
         lambda i: cv2.resize(i["grey"], (500, 333), interpolation=cv2.INTER_LINEAR)),
        ("resize_area", "imgproc--resize",
         lambda i: cv2.resize(i["colour"], (256, 192), interpolation=cv2.INTER_AREA)),
        ("warpAffine_linear", "imgproc--warp_affine",
         lambda i: cv2.warpAffine(i["colour"], *_rotation(i["colour"]), flags=cv2.INTER_LINEAR)),
        ("warpAffine_cubic", "imgproc--warp_affine",
         lambda i: cv2.warpAffine(i["grey"], *_rotation(i["grey"]), flags=cv2.INTER_CUBIC)),
        ("warpAffine_nearest", "imgproc--warp_affine",
         lambda i: cv2.warpAffine(i["grey"], *_rotation(i["grey"]), flags=cv2.INTER_NEAREST)),
        ("warpPerspective", "imgproc--warp_perspective",
         lambda i: cv2.warpPerspective(i["grey"], *_perspective(i["grey"]))),
        ("remap_linear", "imgproc--remap",
         lambda i: _remap(i["colour"], cv2.INTER_LINEAR)),
        ("remap_nearest", "imgproc--remap",
         lambda i: _remap(i["grey"], cv2.INTER_NEAREST)),
        ("flip", "core--flip", lambda i: cv2.flip(i["colour"], -1)),
        ("transpose", "core--transpose", lambda i: cv2.transpose(i["grey"])),
        ("pyrDown", "imgproc--pyr_down", lambda i: cv2.pyrDown(i["colour"])),
        ("pyrUp", "imgproc--pyramid_up", lambda i: cv2.pyrUp(i["grey"])),
        # filters
        ("GaussianBlur", "imgproc--filterSepRow",
         lambda i: cv2.GaussianBlur(i["colour"], (5, 5), 1.5)),
        ("GaussianBlur_grey_7x7", "imgproc--filterSepCol",
         lambda i: cv2.GaussianBlur(i["grey"], (7, 7), 2.0)),
        ("boxFilter", "imgproc--boxFilter",
         lambda i: cv2.boxFilter(i["grey"], -1, (5, 5))),
        ("medianBlur", "imgproc--medianFilter",
         lambda i: cv2.medianBlur(i["grey"], 5)),
        ("bilateralFilter", "imgproc--bilateral",
         lambda i: cv2.bilateralFilter(i["grey"], 9, 50.0, 5.0)),
        ("filter2D", "imgproc--filter2D",
         lambda i: cv2.filter2D(i["grey"], cv2.CV_32F, k3)),
        ("Sobel_dx_16S", "imgproc--filterSepRow",
         lambda i: cv2.Sobel(i["grey"], cv2.CV_16S, 1, 0, ksize=3)),
        ("Sobel_dy_32F", "imgproc--filterSepRow",
         lambda i: cv2.Sobel(i["grey"], cv2.CV_32F, 0, 1, ksize=5)),
        ("Scharr", "imgproc--filterSepCol",
         lambda i: cv2.Scharr(i["grey"], cv2.CV_16S, 1, 0)),
        ("Laplacian", "imgproc--filter2D",
         lambda i: cv2.Laplacian(i["grey"], cv2.CV_16S, ksize=3)),
        ("Canny", "imgproc--canny",
         lambda i: cv2.Canny(i["grey"], 50, 150)),
        ("Canny_L2", "imgproc--canny",
         lambda i: cv2.Canny(i["grey"], 40, 120, L2gradient=True)),
        ("Canny_aperture5", "imgproc--canny",
         lambda i: cv2.Canny(i["grey"], 200, 600, apertureSize=5)),
        ("cornerHarris", "imgproc--corner",
         lambda i: cv2.cornerHarris(i["grey"], 3, 3, 0.04)),
        # histograms, morphology, matching, integral
        ("equalizeHist", "imgproc--histogram",
         lambda i: cv2.equalizeHist(i["grey"])),
        ("erode_3x3", "imgproc--morph",
         lambda i: cv2.erode(i["grey"], np.ones((3, 3), np.uint8))),
        ("dilate_ellipse", "imgproc--morph",
         lambda i: cv2.dilate(i["colour"], ellipse)),
        ("morph_gradient", "imgproc--morph",
         lambda i: cv2.morphologyEx(i["grey"], cv2.MORPH_GRADIENT, ellipse)),
        ("morph_open", "imgproc--morph",
         lambda i: cv2.morphologyEx(i["grey"], cv2.MORPH_OPEN, np.ones((5, 5), np.uint8))),
        ("matchTemplate_CCOEFF_NORMED", "imgproc--match_template",
         lambda i: cv2.matchTemplate(i["grey"], _template(i["grey"]), cv2.TM_CCOEFF_NORMED)),
        ("matchTemplate_SQDIFF", "imgproc--match_template",
         lambda i: cv2.matchTemplate(i["grey"], _template(i["grey"]), cv2.TM_SQDIFF)),
        ("matchTemplate_CCORR", "imgproc--match_template",
         lambda i: cv2.matchTemplate(i["colour"], _template(i["colour"]), cv2.TM_CCORR)),
        ("integral", "imgproc--integral_sum",
         lambda i: cv2.integral(i["grey"])),
        ("integral_sqsum", "imgproc--integral_sum",
         lambda i: cv2.integral2(i["grey"], sdepth=cv2.CV_32S, sqdepth=cv2.CV_32F)),
        # arithmetic
        ("add", "core--arithm",
         lambda i: cv2.add(i["colour"], i["colour"])),
        ("subtract", "core--arithm",
         lambda i: cv2.subtract(i["grey"], cv2.GaussianBlur(i["grey"], (3, 3), 0))),
        ("multiply_scale", "core--arithm",
         lambda i: cv2.multiply(i["grey"], i["grey"], scale=1.0 / 255)),
        ("absdiff", "core--arithm",
         lambda i: cv2.absdiff(i["grey"], cv2.flip(i["grey"], 1))),
        ("addWeighted", "core--arithm",
         lambda i: cv2.addWeighted(i["colour"], 0.7, cv2.flip(i["colour"], 0), 0.3, 5.0)),
        ("bitwise_and", "core--arithm",
         lambda i: cv2.bitwise_and(i["grey"], cv2.flip(i["grey"], 0))),
        ("threshold", "imgproc--threshold",
         lambda i: cv2.threshold(i["grey"], 127, 255, cv2.THRESH_BINARY)[1]),
        ("inRange", "core--inrange",
         lambda i: cv2.inRange(i["colour"], (40, 40, 40), (200, 220, 180))),
        ("LUT_float", "core--lut", lambda i: cv2.LUT(i["grey"], lut)),
        ("convertScaleAbs", "core--arithm",
         lambda i: cv2.convertScaleAbs(i["grey"], alpha=1.7, beta=-30)),
        ("magnitude_phase", "core--arithm",
         lambda i: (cv2.magnitude(_float(i["grey"]), _float(i["grey"])),
                    cv2.phase(_float(i["grey"]), _float(cv2.flip(i["grey"], 1))))),
        ("dft", "core--fft",
         lambda i: cv2.dft(_float(i["grey"]), flags=cv2.DFT_COMPLEX_OUTPUT)),
        # reductions
        ("sumElems", "core--reduce",
         lambda i: cv2.sumElems(i["colour"])),
        ("meanStdDev", "core--meanstddev",
         lambda i: cv2.meanStdDev(i["colour"])),
        ("minMaxLoc", "core--minmaxloc",
         lambda i: cv2.minMaxLoc(i["grey"])),
        ("countNonZero", "core--reduce",
         lambda i: cv2.countNonZero(cv2.threshold(i["grey"], 100, 255, cv2.THRESH_TOZERO)[1])),
        ("norm_L2", "core--reduce",
         lambda i: cv2.norm(i["grey"], cv2.NORM_L2)),
        ("norm_L1_diff", "core--reduce",
         lambda i: cv2.norm(i["grey"], cv2.flip(i["grey"], 1), cv2.NORM_L1)),
    ]
