"""Runs one CTS suite binary with a timeout per sub-test.

    runsuite.py TIMEOUT_S LOG_DIR TSV BINARY TEST...

Starts BINARY with the TESTs as arguments (the harness runs them in order,
printing "NAME..." before each and flushing), and watches its output: a
sub-test that runs longer than TIMEOUT_S is recorded as hung and the
process killed; a process that dies in a sub-test records it as crashed.
Either way the binary is started again with the sub-tests not yet run.
With CTS_DEADLINE (a Unix time) in the environment, the sub-test running
at that time and those after it are recorded as "absent" (not run): a run
under a hard time limit still reports the sub-tests it finished.
When a run ends normally its results file (CL_CONFORMANCE_RESULTS_FILENAME)
gives the results; output lines are the fallback. Writes TSV: name,
result (pass, fail, skip, hung, crashed), seconds; and LOG_DIR/NAME.log with
each sub-test's output (LOG_DIR/_suite.log holds the suite's own lines).
"""

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time


def from_lines(name, lines):
    """A sub-test's result from its output, when no results file says it."""
    text = "\n".join(lines)
    if f"{name} passed" in text:
        return "pass"
    for skip in (f"{name} test not supported", f"{name} skipped (requires",
                 f"Subtest {name} tests is not supported",
                 f"{name} test currently not implemented"):
        if skip in text:
            return "skip"
    return "fail"


def run(timeout, binary, tests, env, results_file, progress=None):
    """One process over TESTS. Returns (ended, {name: [lines]}, {name: s},
    suite_lines, how): how is 'exit:<rc>' or 'hung:<name>' or
    'crashed:<name>'."""
    proc = subprocess.Popen(
        [binary, *tests], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        cwd=os.path.dirname(binary), env=env, start_new_session=True)
    CHILD[:] = [proc]
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    pending = set(tests)
    current, started = None, time.monotonic()
    out = {}
    LIVE["out"], LIVE["current"] = out, None
    secs = {}
    suite_lines = []
    buf = b""
    hung = False
    # Before the first sub-test the suite sets itself up: allow it the same.
    while True:
        left = timeout - (time.monotonic() - started)
        if time.time() >= DEADLINE:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return out, secs, suite_lines, f"deadline:{current or ''}"
        if left <= 0:
            hung = True
            break
        events = sel.select(timeout=max(0.0, min(left, 1.0, DEADLINE - time.time())))
        if not events:
            if proc.poll() is not None and not buf:
                # Output closed and process gone.
                pass
            continue
        chunk = os.read(proc.stdout.fileno(), 65536)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            raw, buf = buf.split(b"\n", 1)
            line = raw.decode("utf-8", "replace")
            name = line[:-3] if line.endswith("...") else None
            if name in pending:
                now = time.monotonic()
                if current is not None:
                    secs[current] = round(now - started, 1)
                pending.discard(name)
                current, started = name, now
                if progress:
                    progress.write(f"{name}\n")
                    progress.flush()
                out[current] = []
                LIVE["current"] = current
            if current is None:
                suite_lines.append(line)
            else:
                out[current].append(line)
    if hung:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if current is not None:
            secs[current] = int(timeout)
            return out, secs, suite_lines, f"hung:{current}"
        return out, secs, suite_lines, "hung:"
    rc = proc.wait()
    if current is not None:
        secs[current] = round(time.monotonic() - started, 1)
    if rc < 0 or (rc not in (0, 1) and current is not None):
        return out, secs, suite_lines, f"crashed:{current or ''}:{rc}"
    return out, secs, suite_lines, f"exit:{rc}"


CHILD = []
DEADLINE = float(os.environ.get("CTS_DEADLINE") or "inf")
# The process being watched: its sub-tests' output so far and the one
# running, for a stop from outside.
LIVE = {"out": {}, "current": None}


def main():
    timeout = float(sys.argv[1])
    log_dir, tsv, binary = sys.argv[2], sys.argv[3], sys.argv[4]
    tests = sys.argv[5:]
    os.makedirs(log_dir, exist_ok=True)
    results = {}
    seconds = {}
    todo = list(tests)

    def write_tsv():
        with open(tsv, "w") as f:
            for name in tests:
                f.write(f"{name}\t{results.get(name, 'absent')}\t{seconds.get(name, 0)}\n")

    def stop(signum, frame):
        # Stopped from outside (the run is over its time): keep what ran;
        # the sub-tests not run are "absent".
        for proc in CHILD:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
        # The sub-tests the watched process finished count; the one it was
        # running and those after it are "absent".
        for name, lines in LIVE["out"].items():
            if name != LIVE["current"] and name not in results:
                results[name] = from_lines(name, lines)
            with open(os.path.join(log_dir, f"{name}.log"), "w") as f:
                f.write("\n".join(lines) + "\n")
        write_tsv()
        sys.exit(1)

    signal.signal(signal.SIGTERM, stop)
    suite_log = open(os.path.join(log_dir, "_suite.log"), "w")
    # The sub-tests as they start, for whoever watches a long run.
    progress = open(os.path.join(log_dir, "_started.txt"), "w")
    while todo and time.time() < DEADLINE:
        fd, results_file = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        os.unlink(results_file)
        env = dict(os.environ, CL_CONFORMANCE_RESULTS_FILENAME=results_file)
        out, secs, suite_lines, how = run(timeout, binary, todo, env, results_file, progress)
        suite_log.write(f"== {' '.join(todo[:3])}{' ...' if len(todo) > 3 else ''}: {how}\n")
        suite_log.write("\n".join(suite_lines) + "\n")
        for name, lines in out.items():
            with open(os.path.join(log_dir, f"{name}.log"), "w") as f:
                f.write("\n".join(lines) + "\n")
        seconds.update(secs)
        suite_log.flush()
        json_results = {}
        if os.path.exists(results_file):
            try:
                with open(results_file) as f:
                    json_results = json.load(f).get("results", {})
            except ValueError:
                pass
            os.unlink(results_file)
        kind, _, rest = how.partition(":")
        if kind == "deadline":
            # Out of time: what finished counts, the rest stays "absent".
            for name in out:
                if name != rest:
                    results[name] = from_lines(name, out[name])
            break
        if kind == "exit":
            for name in todo:
                if name in json_results:
                    results[name] = json_results[name]
                elif name in out:
                    results[name] = from_lines(name, out[name])
                else:
                    # Setup failed or skipped the suite before any sub-test.
                    text = "\n".join(suite_lines)
                    results[name] = "skip" if rest == "0" or "skip" in text.lower() else "fail"
            todo = []
            break
        # Hung or crashed in a sub-test: those before it ended normally.
        victim = rest.split(":")[0]
        done = [n for n in todo if n in out and n != victim]
        for name in done:
            results[name] = from_lines(name, out[name])
        if not victim:
            # Hung or died before the first sub-test: all of them share it.
            for name in todo:
                results[name] = kind
                seconds.setdefault(name, 0)
            todo = []
            break
        results[victim] = kind
        todo = [n for n in todo if n not in out]
        write_tsv()
    write_tsv()


main()
