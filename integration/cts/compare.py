"""Compares the CTS results of run.sh: native and through vgpu.

    compare.py OUT

OUT holds native/SUITE.tsv and vgpu/SUITE.tsv (sub-test, result, seconds;
result is pass, fail, skip, hung, crashed or absent: not reached in a run
that was stopped). Prints a Markdown table of passed / failed / skipped /
hung per suite and side (crashes count as failed and are named in the
cell, as are sub-tests not run), then every sub-test that passes natively
but not through vgpu (suites run on both sides), and writes
OUT/results.json.
"""

import json
import os
import sys

KINDS = ("pass", "fail", "skip", "hung")


def load(out, side):
    """suite -> {sub-test: (result, seconds)}"""
    folder = os.path.join(out, side)
    suites = {}
    if not os.path.isdir(folder):
        return suites
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".tsv"):
            continue
        tests = {}
        with open(os.path.join(folder, name)) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) >= 2:
                    tests[parts[0]] = (parts[1], float(parts[2]) if len(parts) > 2 else 0.0)
        suites[name[:-4]] = tests
    return suites


def counts(tests):
    c = dict.fromkeys(KINDS, 0)
    c["crashed"] = c["not_run"] = 0
    for result, _ in tests.values():
        if result == "crashed":
            c["crashed"] += 1
            c["fail"] += 1
        elif result == "absent":
            # Not reached: the run was stopped.
            c["not_run"] += 1
        elif result in c:
            c[result] += 1
    return c


def cell(c):
    if c is None:
        return "not run"
    text = f"{c['pass']} / {c['fail']} / {c['skip']} / {c['hung']}"
    notes = []
    if c["crashed"]:
        notes.append(f"{c['crashed']} crashed")
    if c["not_run"]:
        notes.append(f"{c['not_run']} not run")
    if notes:
        text += f" ({', '.join(notes)})"
    return text


def main():
    out = sys.argv[1]
    native, vgpu = load(out, "native"), load(out, "vgpu")
    suites = sorted(set(native) | set(vgpu))
    figures = {"suites": {}, "passes_natively_only": [], "passes_through_vgpu_only": []}
    print("| suite | sub-tests | native pass / fail / skip / hung | vgpu pass / fail / skip / hung | native s | vgpu s |")
    print("|---|---:|---|---|---:|---:|")
    for suite in suites:
        n, v = native.get(suite), vgpu.get(suite)
        nc = counts(n) if n is not None else None
        vc = counts(v) if v is not None else None
        total = len(n if n is not None else v)
        ns = sum(s for _, s in n.values()) if n else 0
        vs = sum(s for _, s in v.values()) if v else 0
        print(f"| {suite} | {total} | {cell(nc)} | {cell(vc)} | {ns:.0f} | {vs:.0f} |")
        figures["suites"][suite] = {
            "native": {t: r for t, (r, _) in (n or {}).items()},
            "vgpu": {t: r for t, (r, _) in (v or {}).items()},
            "native_counts": nc, "vgpu_counts": vc,
        }
        if n is None or v is None:
            continue
        for t, (r, _) in n.items():
            vr = v.get(t, ("absent", 0))[0]
            if r == "pass" and vr != "pass":
                figures["passes_natively_only"].append([suite, t, vr])
            if r != "pass" and vr == "pass":
                figures["passes_through_vgpu_only"].append([suite, t, r])
    lost = figures["passes_natively_only"]
    one_side = [s for s in suites if s not in native or s not in vgpu]
    if one_side:
        print()
        print(f"run on one side only (not compared): {', '.join(one_side)}")
    print()
    print(f"passing natively but not through vgpu: {len(lost)}")
    for suite, t, vr in lost:
        print(f"- {suite} {t}: {vr}")
    won = figures["passes_through_vgpu_only"]
    if won:
        print()
        print(f"passing through vgpu but not natively: {len(won)}")
        for suite, t, nr in won:
            print(f"- {suite} {t}: natively {nr}")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(figures, f, indent=1)


main()
