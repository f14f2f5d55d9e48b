#!/usr/bin/env python3
"""Compares every prepared GPU case (tests/gpu/run.sh) with the interpreter's reference.

For each DIR/cases/NAME: status SKIP -> skipped with its reason; else drkrun's exit code and
outputs (out/) against the interpreter (ref/) under DESIGN.md's tolerances
(compare_outputs.py). Prints one line per case and `N passed, N failed, N skipped`."""
import argparse
import contextlib
import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_outputs  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--results", help="write a markdown summary here")
    a = ap.parse_args()
    cases = sorted(os.listdir(os.path.join(a.dir, "cases")))
    npass = nfail = nskip = 0
    lines = []
    for name in cases:
        c = os.path.join(a.dir, "cases", name)
        status = open(os.path.join(c, "status")).read().strip() if os.path.exists(os.path.join(c, "status")) else "SKIP no status"
        if status.startswith("SKIP"):
            nskip += 1
            lines.append(f"SKIP {name}: {status[5:]}")
            continue
        rc = open(os.path.join(c, "rc")).read().strip() if os.path.exists(os.path.join(c, "rc")) else "?"
        if rc != "0":
            log = open(os.path.join(c, "run.log")).read().strip().splitlines() if os.path.exists(os.path.join(c, "run.log")) else []
            nfail += 1
            lines.append(f"FAIL {name}: drkrun exit {rc}: {(log[-1] if log else '')[:300]}")
            continue
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            ok = compare_outputs.compare_dirs(os.path.join(c, "ref"), os.path.join(c, "out"), quiet=True)
        if ok:
            npass += 1
            lines.append(f"PASS {name}")
        else:
            nfail += 1
            lines.append(f"FAIL {name}: {' | '.join(buf.getvalue().strip().splitlines())[:400]}")
    for l in lines:
        print(l)
    summary = f"{npass} passed, {nfail} failed, {nskip} skipped"
    print(summary)
    if a.results:
        with open(a.results, "w") as f:
            f.write("\n".join(lines) + "\n" + summary + "\n")
    return 0 if nfail == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
