"""Compares two pytest JUnit XML reports: native and through vgpu.

Prints passed/failed/skipped per side and every test that passes
natively but not through vgpu; writes the figures as JSON when asked.
"""

import json
import re
import sys
import xml.etree.ElementTree as ET


# pytest ids name the device and platform; the two sides differ there.
DEVICE = re.compile(r"<context factory for <pyopencl\.Device '.*?' on '.*?'>>")
PLATFORM = re.compile(r"<pyopencl\.Platform '.*?'>")


def outcomes(path):
    """test id -> passed | failed | skipped."""
    result = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        name = PLATFORM.sub("platform", DEVICE.sub("ctx", name))
        if case.find("failure") is not None or case.find("error") is not None:
            result[name] = "failed"
        elif case.find("skipped") is not None:
            result[name] = "skipped"
        else:
            result[name] = "passed"
    return result


def counts(result):
    return {k: sum(1 for v in result.values() if v == k)
            for k in ("passed", "failed", "skipped")}


def main():
    native, vgpu = outcomes(sys.argv[1]), outcomes(sys.argv[2])
    figures = {"native": counts(native), "vgpu": counts(vgpu)}
    for side in ("native", "vgpu"):
        c = figures[side]
        print(f"{side:7} passed {c['passed']:4}  failed {c['failed']:4}"
              f"  skipped {c['skipped']:4}")
    lost = sorted(t for t, v in native.items()
                  if v == "passed" and vgpu.get(t) != "passed")
    figures["passes_natively_only"] = lost
    print(f"passing natively but not through vgpu: {len(lost)}")
    for test in lost:
        print(f"  {vgpu.get(test, 'absent'):8} {test}")
    if len(sys.argv) > 3:
        with open(sys.argv[3], "w") as f:
            json.dump(figures, f, indent=2)


main()
