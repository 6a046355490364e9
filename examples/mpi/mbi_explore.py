#!/usr/bin/env python3
"""Run `racetrack explore --mpi` on the MPI Bugs Initiative's codes that use wildcard
receives, and count what it finds against what each code's header expects.

    examples/mpi/mbi_explore.py (--mbi PATH | --codes DIR) [--impl mpich|openmpi]
                                [--only REGEX] [--max-runs N] [--budget-s S]
                                [--run-limit-s S] [--json FILE]

The codes come from a checkout of https://github.com/N00byKing/MpiBugsInitiative (fetched
by the user: its code is not part of Racetrack): `--mbi PATH` runs its generators, as
`mbi.py` does; `--codes DIR` takes the `.c` files of a directory instead (its hand-written
codes, `codes/` in the repository). Only codes that use `MPI_ANY_SOURCE` are explored:
the others have no match to choose. Each test its header lists (`$ mpirun -np N ${EXE}`)
is explored once; per expected class it prints the tests, those whose search found a
failing outcome (a deadlock, an abort, a nonzero exit, or results that differ), the
deadlocks among them, false reports (a failing outcome for a code expected OK that runs
correctly on its own: such a code is run once without Racetrack to tell), and the
searches that were complete. `--json FILE` keeps every test's summary. Nothing here
asserts: it reports what it saw.
"""

import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import mbi  # noqa: E402  (the same build and header reading as the deadlock benchmark)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--mbi", help="a checkout of the MPI Bugs Initiative (its generators' codes)")
    src.add_argument("--codes", help="a directory of MBI codes (e.g. its hand-written codes/)")
    p.add_argument("--impl", default="mpich", choices=sorted(mbi.IMPLS))
    p.add_argument("--work", default="/tmp/racetrack-mbi", help="generated codes and binaries")
    p.add_argument("--racetrack", default=os.path.join(mbi.ROOT, "target/release/racetrack"))
    p.add_argument("--only", default="", help="codes whose file name matches this regex")
    p.add_argument("--max-runs", type=int, default=50)
    p.add_argument("--budget-s", type=int, default=60)
    p.add_argument("--run-limit-s", type=int, default=10)
    p.add_argument("--json", help="write every test's summary here")
    return p.parse_args()


def explore(args, exe, ranks, extra):
    """The explorer's summary (its JSON line), or None when it wrote none."""
    out = tempfile.mkdtemp(prefix="racetrack-mbi-explore-")
    cmd = [args.racetrack, "explore", "--mpi", "--impl", args.impl, "-n", str(ranks),
           "--max-runs", str(args.max_runs), "--budget-s", str(args.budget_s),
           "--run-limit-s", str(args.run_limit_s), "--out", os.path.join(out, "scenarios"),
           "--", exe] + extra
    # In a directory of its own: some codes write files where they run.
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=out,
                       timeout=args.budget_s + 4 * args.run_limit_s + 60)
    subprocess.run(["rm", "-rf", out])
    for line in reversed(r.stdout.splitlines()):
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if v.get("event") == "explored":
            return v
    return None


def plain_fails(args, exe, ranks, extra):
    """Whether the code fails or hangs without Racetrack (one run)."""
    _, mpiexec, flags = mbi.IMPLS[args.impl]
    p = subprocess.Popen([mpiexec, "-n", str(ranks)] + flags + [exe] + extra,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        return p.wait(timeout=args.run_limit_s) != 0
    except subprocess.TimeoutExpired:
        mbi.kill(p)
        return True


def failing(outcome):
    res = outcome["result"]
    return "deadlock" in res or "timeout_s" in res or res.get("exit") != 0


def main():
    args = parse_args()
    if not os.path.exists(args.racetrack):
        sys.exit(f"mbi_explore.py: {args.racetrack} not found (cargo build --release -p racetrack -p racetrack-mpi)")
    codes = args.codes or mbi.generate(args.mbi, args.work)
    bins = os.path.join(args.work, "bin-explore-" + args.impl)
    os.makedirs(bins, exist_ok=True)
    todo = []
    for src in sorted(glob.glob(os.path.join(codes, "*.c"))):
        name = os.path.basename(src)[:-2]
        if args.only and not re.search(args.only, name):
            continue
        if "MPI_ANY_SOURCE" not in open(src, encoding="utf-8", errors="replace").read():
            continue
        for ranks, extra, detail in mbi.tests_of(src):
            todo.append((name, src, ranks, extra, detail))
    rows, t0 = [], time.monotonic()
    for k, (name, src, ranks, extra, detail) in enumerate(todo, 1):
        exe = os.path.join(bins, name)
        row = {"code": name, "ranks": ranks, "args": extra, "expected": detail}
        if not mbi.build(mbi.IMPLS[args.impl][0], src, exe):
            row["summary"] = "not built"
        else:
            row["summary"] = explore(args, exe, ranks, extra)
            s = row["summary"]
            if detail == "OK" and isinstance(s, dict) and any(failing(o) for o in s["outcomes"]):
                row["plain_fails"] = plain_fails(args, exe, ranks, extra)
        rows.append(row)
        s = row["summary"]
        what = "no summary" if s is None else ("not built" if s == "not built" else
               f"{s['runs']} runs, {len(s['outcomes'])} outcomes, "
               f"{'complete' if s['complete'] else 'not complete'}, {s['time_s']} s")
        print(f"[{k}/{len(todo)}, {time.monotonic() - t0:.0f} s] {name} (-np {ranks}, {detail}): {what}",
              file=sys.stderr, flush=True)
    report(args, rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


def report(args, rows):
    by = defaultdict(lambda: defaultdict(int))
    times = defaultdict(list)
    for r in rows:
        c = by[r["expected"]]
        c["tests"] += 1
        s = r["summary"]
        if s in (None, "not built"):
            c["no summary" if s is None else "not built"] += 1
            continue
        bad = [o for o in s["outcomes"] if failing(o)]
        found = bool(bad) or len(s["outcomes"]) > 1
        c["complete"] += s["complete"]
        times[r["expected"]].append(s["time_s"])
        if r["expected"] == "OK":
            c["fails without racetrack"] += found and r.get("plain_fails", False)
            c["false report"] += found and not r.get("plain_fails", False)
        else:
            c["found"] += found
            c["deadlock found"] += any("deadlock" in o["result"] for o in bad)
    cols = ["tests", "not built", "no summary", "found", "deadlock found", "false report",
            "fails without racetrack", "complete"]
    print(f"MBI codes with MPI_ANY_SOURCE under racetrack explore --mpi, {args.impl}, "
          f"--max-runs {args.max_runs} --budget-s {args.budget_s} --run-limit-s {args.run_limit_s}")
    print("| expected | " + " | ".join(cols) + " | median s |")
    print("|---|" + "---:|" * (len(cols) + 1))
    for cls in sorted(by):
        med = f"{statistics.median(times[cls]):.1f}" if times[cls] else "-"
        print(f"| {cls} | " + " | ".join(str(by[cls][c]) for c in cols) + f" | {med} |")


if __name__ == "__main__":
    main()
