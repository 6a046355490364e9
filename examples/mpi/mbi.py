#!/usr/bin/env python3
"""Run the MPI Bugs Initiative's codes under `racetrack mpirun --ctl` and count the
deadlocks Racetrack tells, against the codes that really hang.

    examples/mpi/mbi.py --mbi PATH [--impl mpich|openmpi] [--only REGEX] [--expected REGEX]
                        [--every K] [--limit N] [--timeout S] [--json FILE]

PATH is a checkout of https://github.com/N00byKing/MpiBugsInitiative (fetched by the
user: its code is not part of Racetrack). Its generators write the codes into WORK/codes
(`--work`, default /tmp/racetrack-mbi), each is built with the implementation's `mpicc`,
then every test its header lists (the `$ mpirun -np N ${EXE}` lines) runs:

1. under `racetrack mpirun --ctl --impl IMPL -n N`, sent `continue`, until the job exits,
   a `deadlock` event comes, or `--timeout` seconds pass;
2. without Racetrack (`mpiexec -n N`, `--timeout` seconds), when the first run told a
   deadlock or hung: does the code hang on its own?

Per MBI error class it prints: tests, codes that hang without Racetrack, of those the
deadlocks told, hangs not told, false alarms (a deadlock told for a code that finishes on
its own), and runs that hung only under Racetrack. `--json FILE` keeps every test's
outcome. Nothing here asserts: it reports what it saw.
"""

import argparse
import glob
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
IMPLS = {"mpich": ("mpicc.mpich", "mpiexec.mpich", []),
         "openmpi": ("mpicc.openmpi", "mpiexec.openmpi", ["--allow-run-as-root", "--oversubscribe"])}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mbi", required=True, help="a checkout of the MPI Bugs Initiative")
    p.add_argument("--impl", default="mpich", choices=sorted(IMPLS))
    p.add_argument("--work", default="/tmp/racetrack-mbi", help="generated codes and binaries")
    p.add_argument("--racetrack", default=os.path.join(ROOT, "target/release/racetrack"))
    p.add_argument("--timeout", type=float, default=8.0, help="seconds before a run counts as hung")
    p.add_argument("--only", default="", help="codes whose file name matches this regex")
    p.add_argument("--expected", default="", help="tests whose expected outcome (OK, CallMatching, …) matches this regex")
    p.add_argument("--every", type=int, default=1, help="every Kth test only (a sample)")
    p.add_argument("--limit", type=int, default=0, help="at most this many tests (0: all)")
    p.add_argument("--json", help="write every test's outcome here")
    return p.parse_args()


def generate(mbi, work):
    """The generators' codes, in WORK/codes (generated once)."""
    codes = os.path.join(work, "codes")
    if glob.glob(os.path.join(codes, "*.c")):
        return codes
    os.makedirs(codes, exist_ok=True)
    gens = sorted(glob.glob(os.path.join(mbi, "scripts", "*Generator.py")))
    if not gens:
        sys.exit(f"mbi.py: no generators in {mbi}/scripts (is --mbi a MpiBugsInitiative checkout?)")
    for g in gens:
        r = subprocess.run([sys.executable, g], cwd=codes, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"mbi.py: {os.path.basename(g)} failed: {r.stderr.strip()[-300:]}", file=sys.stderr)
    return codes


def tests_of(path):
    """The tests a code's header lists: (ranks, extra arguments, expected detail)."""
    out = []
    lines = open(path, encoding="utf-8", errors="replace").read().split("\n")
    for i, line in enumerate(lines):
        m = re.match(r"\s+\$ ?mpirun -np (\d+) \$\{EXE\}(.*)", line)
        if not m or i + 1 >= len(lines):
            continue
        nxt = lines[i + 1]
        e = re.match(r"[ |]*ERROR: *(\w+)", nxt)
        detail = e.group(1) if e else ("OK" if re.match(r"[ |]*OK", nxt) else None)
        if detail:
            out.append((int(m.group(1)), m.group(2).split(), detail))
    return out


def build(cc, src, exe):
    if os.path.exists(exe) and os.path.getmtime(exe) >= os.path.getmtime(src):
        return True
    r = subprocess.run([cc, "-w", "-o", exe, src], capture_output=True, text=True)
    return r.returncode == 0


def kill(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()


def under_racetrack(args, exe, ranks, extra):
    """'deadlock' (with the event), 'exit', or 'hung'."""
    cmd = [args.racetrack, "mpirun", "--ctl", "--impl", args.impl, "-n", str(ranks), "--", exe] + extra
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    p.stdin.write('{"cmd":"continue"}\n')
    p.stdin.flush()
    lines = queue.Queue()

    def read():
        for line in p.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + args.timeout
    outcome, event = "hung", None
    while outcome == "hung":
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            outcome = "exit"
            break
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if v.get("event") == "deadlock":
            outcome, event = "deadlock", v
        elif v.get("event") == "exit":
            outcome = "exit"
    kill(p)
    return outcome, event


def plain_hangs(args, exe, ranks, extra):
    _, mpiexec, flags = IMPLS[args.impl]
    p = subprocess.Popen([mpiexec, "-n", str(ranks)] + flags + [exe] + extra,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        p.wait(timeout=args.timeout)
        return False
    except subprocess.TimeoutExpired:
        kill(p)
        return True


def main():
    args = parse_args()
    if not os.path.exists(args.racetrack):
        sys.exit(f"mbi.py: {args.racetrack} not found (cargo build --release -p racetrack -p racetrack-mpi)")
    cc = IMPLS[args.impl][0]
    codes = generate(args.mbi, args.work)
    bins = os.path.join(args.work, "bin-" + args.impl)
    os.makedirs(bins, exist_ok=True)
    todo = []
    for src in sorted(glob.glob(os.path.join(codes, "*.c"))):
        name = os.path.basename(src)[:-2]
        if args.only and not re.search(args.only, name):
            continue
        for ranks, extra, detail in tests_of(src):
            if not args.expected or re.fullmatch(args.expected, detail):
                todo.append((name, src, ranks, extra, detail))
    todo = todo[:: max(args.every, 1)]
    if args.limit:
        todo = todo[: args.limit]
    rows, t0 = [], time.monotonic()
    for k, (name, src, ranks, extra, detail) in enumerate(todo, 1):
        exe = os.path.join(bins, name)
        row = {"code": name, "ranks": ranks, "args": extra, "expected": detail}
        if not build(cc, src, exe):
            row["outcome"] = "not built"
        else:
            outcome, event = under_racetrack(args, exe, ranks, extra)
            row["outcome"] = outcome
            if event:
                row["deadlock"] = event
            if outcome != "exit":
                row["plain_hangs"] = plain_hangs(args, exe, ranks, extra)
        rows.append(row)
        if sys.stderr.isatty() or k % 25 == 0 or k == len(todo):
            el = time.monotonic() - t0
            print(f"\r{k}/{len(todo)} tests, {el:.0f} s", end="" if sys.stderr.isatty() else "\n",
                  file=sys.stderr, flush=True)
    print(file=sys.stderr)
    report(args, rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


def report(args, rows):
    by = defaultdict(lambda: defaultdict(int))
    for r in rows:
        c = by[r["expected"]]
        c["tests"] += 1
        if r["outcome"] == "not built":
            c["not built"] += 1
            continue
        hangs = r.get("plain_hangs", False)
        told = r["outcome"] == "deadlock"
        c["hang"] += hangs
        c["told"] += told and hangs
        c["missed"] += hangs and not told
        c["false alarm"] += told and not hangs
        c["hung only under racetrack"] += r["outcome"] == "hung" and not hangs
    cols = ["tests", "not built", "hang", "told", "missed", "false alarm", "hung only under racetrack"]
    print(f"MBI under racetrack mpirun --ctl, {args.impl}, timeout {args.timeout:g} s")
    print("| class | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    total = defaultdict(int)
    for cls in sorted(by):
        print(f"| {cls} | " + " | ".join(str(by[cls][c]) for c in cols) + " |")
        for c in cols:
            total[c] += by[cls][c]
    print("| all | " + " | ".join(str(total[c]) for c in cols) + " |")


if __name__ == "__main__":
    main()
