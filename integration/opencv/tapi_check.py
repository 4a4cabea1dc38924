"""Runs OpenCV T-API (UMat) operations on OpenCL and writes their checksums.

    tapi_check.py OUT.json [--expect-device TEXT] [--size WxH]

Every operation gets the same synthetic input (a deterministic colour image
and its grey version) as a UMat, so OpenCV takes its OpenCL path where it
has one. For each operation the result is brought back to the host and
recorded as a SHA-256 of its dtype, shape and bytes, with its sum, minimum
and maximum (for comparing results that legitimately vary run to run).

That OpenCL really ran, and not OpenCV's silent CPU fallback, is checked
three ways:
  - cv2.ocl.useOpenCL() is true after setUseOpenCL(True), and the default
    device's name contains --expect-device;
  - OPENCV_OPENCL_RAISE_ERROR=1: an OpenCL failure inside an operation
    (a build error, CL_INVALID_WORK_GROUP_SIZE at a launch) raises instead
    of falling back to the CPU; the operation is recorded as an error;
  - OpenCV's OpenCL program cache (a fresh folder per run): a program
    built from source is saved as MODULE--NAME_HASH.bin, one file per
    source holding a binary per set of build options. Each operation names
    the program its OpenCL path builds (tapi_ops.py); it counts as run on
    OpenCL only when that file appeared or grew during the operation, and
    OpenCV logged no OpenCL error (OpenCV logs some failures, such as a
    kernel argument it cannot set, and takes the CPU path without
    raising). Otherwise: "opencl": false.

The JSON holds the device, OpenCV's version, and per operation: digest,
shape, dtype, sum/min/max, programs built, seconds, opencl, and error.
Exit status: 0 when every operation ran on OpenCL without error, 1 when
the setup failed (no OpenCL, wrong device), 2 when some operation failed
or fell back to the CPU.
"""

import argparse
import ctypes
import hashlib
import json
import os
import sys
import tempfile
import time

# Before cv2 is imported: OpenCV reads these once.
os.environ["OPENCV_OPENCL_RAISE_ERROR"] = "1"
CACHE = tempfile.mkdtemp(prefix="tapi-ocl-cache-")
os.environ["OPENCV_OPENCL_CACHE_DIR"] = CACHE
os.environ["OPENCV_OPENCL_CACHE_ENABLE"] = "1"

import cv2  # noqa: E402
import numpy as np  # noqa: E402

from tapi_ops import operations  # noqa: E402


def cached_programs():
    """The program files in OpenCV's OpenCL cache: name -> size. A file
    holds one program's binaries for every set of build options, so a
    build with new options grows an existing file."""
    found = {}
    for folder, _, files in os.walk(CACHE):
        for f in files:
            if f.endswith(".bin"):
                found[f] = os.path.getsize(os.path.join(folder, f))
    return found


class OutputCapture:
    """OpenCV's messages during one operation: file descriptors 1 and 2 go
    to a temporary file while it runs. OpenCV writes from C++: its log to
    stderr, a refused kernel launch ("OpenCL error ... during call:
    clEnqueueNDRangeKernel") with printf to stdout, so C's buffers are
    flushed before the descriptors are put back."""

    FDS = (1, 2)

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self.saved = [os.dup(fd) for fd in self.FDS]
        self.file = tempfile.TemporaryFile()
        for fd in self.FDS:
            os.dup2(self.file.fileno(), fd)
        return self

    def __exit__(self, *exc):
        sys.stdout.flush()
        sys.stderr.flush()
        ctypes.CDLL(None).fflush(None)
        for fd, saved in zip(self.FDS, self.saved):
            os.dup2(saved, fd)
            os.close(saved)
        self.file.seek(0)
        self.text = self.file.read().decode(errors="replace")
        self.file.close()
        return False


def to_arrays(result):
    """An operation's result (UMat, array, tuple, scalar) as host arrays."""
    if isinstance(result, cv2.UMat):
        return [result.get()]
    if isinstance(result, np.ndarray):
        return [result]
    if isinstance(result, (tuple, list)):
        arrays = []
        for part in result:
            arrays.extend(to_arrays(part))
        return arrays
    return [np.asarray(result, dtype=np.float64)]


def summary(arrays):
    """Digest and statistics of a list of arrays."""
    digest = hashlib.sha256()
    total, low, high = 0.0, None, None
    for a in arrays:
        a = np.ascontiguousarray(a)
        digest.update(f"{a.dtype.str}{a.shape}".encode())
        digest.update(a.tobytes())
        if a.size:
            f = a.astype(np.float64)
            total += float(f.sum())
            low = float(f.min()) if low is None else min(low, float(f.min()))
            high = float(f.max()) if high is None else max(high, float(f.max()))
    return {
        "digest": digest.hexdigest(),
        "shape": [list(a.shape) for a in arrays],
        "dtype": [a.dtype.str for a in arrays],
        "sum": total,
        "min": low,
        "max": high,
    }


def synthetic_image(width, height):
    """A deterministic BGR image with edges, gradients, shapes and noise."""
    rng = np.random.RandomState(20261124)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    img = np.empty((height, width, 3), np.float32)
    img[..., 0] = 128 + 100 * np.sin(x / 37.0) * np.cos(y / 23.0)
    img[..., 1] = 255 * x / width
    img[..., 2] = 255 * y / height
    img = np.clip(img + rng.normal(0, 12, img.shape), 0, 255).astype(np.uint8)
    for i in range(12):
        centre = (int(rng.randint(0, width)), int(rng.randint(0, height)))
        colour = tuple(int(c) for c in rng.randint(0, 256, 3))
        cv2.circle(img, centre, int(rng.randint(8, 60)), colour, -1)
        corner = (int(rng.randint(0, width)), int(rng.randint(0, height)))
        cv2.rectangle(img, corner, (corner[0] + 50, corner[1] + 30), colour, 3)
    return img


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--expect-device", default="")
    parser.add_argument("--size", default="640x480")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))

    cv2.ocl.setUseOpenCL(True)
    device = cv2.ocl.Device.getDefault()
    info = {
        "opencv": cv2.__version__,
        "have_opencl": bool(cv2.ocl.haveOpenCL()),
        "use_opencl": bool(cv2.ocl.useOpenCL()),
        "device": device.name(),
        "device_version": device.version(),
        "driver_version": device.driverVersion(),
        "image_support": bool(device.imageSupport()),
        "size": [width, height],
    }
    print(f"OpenCV {info['opencv']}, device '{info['device']}' "
          f"({info['device_version']}), OpenCL in use: {info['use_opencl']}",
          flush=True)
    report = {"info": info, "ops": {}}
    if not info["use_opencl"] or args.expect_device not in info["device"]:
        print(f"setup: OpenCL is not in use on a device named "
              f"'*{args.expect_device}*'", file=sys.stderr)
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
        return 1

    colour = synthetic_image(width, height)
    inputs = {
        "colour": colour,
        "grey": cv2.cvtColor(colour, cv2.COLOR_BGR2GRAY),
    }
    bad = 0
    for name, program, op in operations():
        before = cached_programs()
        started = time.monotonic()
        entry = {"program": program}
        with OutputCapture() as log:
            try:
                result = op({k: cv2.UMat(v) for k, v in inputs.items()})
                cv2.ocl.finish()
                entry.update(summary(to_arrays(result)))
                entry["error"] = None
            except cv2.error as e:
                entry["error"] = " ".join(str(e).split())[-300:]
        entry["seconds"] = round(time.monotonic() - started, 4)
        after = cached_programs()
        entry["built"] = sorted(p for p, size in after.items() if before.get(p) != size)
        # OpenCV logs an OpenCL failure it recovers from (a kernel argument
        # it cannot set, a launch the device refuses, then the CPU path)
        # without raising: "[ERROR...] ... ocl.cpp ..." or "OpenCL error
        # CL_... during call: clEnqueueNDRangeKernel(...)".
        entry["opencl_errors"] = [
            line.strip() for line in log.text.splitlines()
            if (line.startswith("[ERROR") and "ocl" in line)
            or line.startswith("OpenCL error ")]
        entry["opencl"] = not entry["opencl_errors"] and any(
            p.startswith(program + "_") for p in entry["built"])
        if entry["error"] or not entry["opencl"]:
            bad += 1
        if entry["error"]:
            state = "ERROR " + entry["error"]
        elif entry["opencl"]:
            state = "opencl"
        else:
            state = "CPU FALLBACK " + " ".join(entry["opencl_errors"])[-200:]
        print(f"{name:24} {entry.get('digest', '-')[:16]} {state}", flush=True)
        report["ops"][name] = entry
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"{len(report['ops']) - bad} of {len(report['ops'])} operations ran on OpenCL")
    return 2 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
