"""Compares tapi_check.py results: two native runs and one through vgpu.

    compare.py NATIVE1.json NATIVE2.json VGPU.json

Per operation: "same" when the vgpu digest equals the native one (and
both ran on OpenCL). Where the two native runs differ from each other (an
operation whose result varies run to run on that device, such as a float
reduction whose work-groups finish in any order), the vgpu result is held
to the native ones' sum, min and max within a relative TOLERANCE instead:
"close". Anything else is a difference. Prints a Markdown table and the
totals. Exit status: 0 when every operation that ran on OpenCL natively
gives the same (or close) result through vgpu, also on OpenCL; 1 otherwise.
"""

import json
import sys

TOLERANCE = 1e-5


def close(a, b):
    """Whether two statistics agree within TOLERANCE (relative)."""
    if a is None or b is None:
        return a is b
    return abs(a - b) <= TOLERANCE * max(1.0, abs(a), abs(b))


def verdict(n1, n2, v):
    """One operation's outcome, and the note that explains it."""
    if not n1.get("opencl"):
        return "native CPU", "OpenCV's OpenCL path did not run natively: " + (
            n1.get("error") or " ".join(n1.get("opencl_errors", []))[:160] or
            "its program was not built")
    if v is None:
        return "DIFFERENT", "missing through vgpu"
    if v.get("error"):
        return "DIFFERENT", "error through vgpu: " + v["error"][:200]
    if not v.get("opencl"):
        return "DIFFERENT", "CPU fallback through vgpu: " + (
            " ".join(v.get("opencl_errors", []))[:200] or "its program was not built")
    if v["digest"] == n1["digest"]:
        return "same", ""
    if n2 is not None and n2.get("digest") != n1["digest"]:
        if all(close(n1[k], v[k]) and close(n2[k], v[k]) for k in ("sum", "min", "max")):
            return "close", "varies natively too; sum/min/max within %g" % TOLERANCE
    return "DIFFERENT", "sum %r vs native %r" % (v.get("sum"), n1.get("sum"))


def main():
    n1, n2, v = (json.load(open(p)) for p in sys.argv[1:4])
    print(f"native device: {n1['info']['device']} ({n1['info']['device_version']})")
    print(f"vgpu device:   {v['info']['device']} ({v['info']['device_version']})")
    print(f"OpenCV {n1['info']['opencv']}, image {n1['info']['size'][0]}x{n1['info']['size'][1]}")
    print()
    print("| operation | native digest | vgpu | native s | vgpu s | note |")
    print("|---|---|---|---:|---:|---|")
    counts = {}
    for name, a in n1["ops"].items():
        b = n2["ops"].get(name)
        c = v["ops"].get(name)
        result, note = verdict(a, b, c)
        counts[result] = counts.get(result, 0) + 1
        print(f"| {name} | `{(a.get('digest') or '-')[:16]}` | {result} | "
              f"{a.get('seconds', '-')} | {(c or {}).get('seconds', '-')} | {note} |")
    print()
    total = sum(counts.values())
    print(f"{total} operations: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))
    return 1 if counts.get("DIFFERENT") else 0


if __name__ == "__main__":
    sys.exit(main())
