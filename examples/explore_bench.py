#!/usr/bin/env python3
"""`racetrack explore` on the runtime examples against plain random testing, side by side.

    examples/explore_bench.py [--racetrack PATH] [--bin DIR] [--plain-runs N]
                              [--jitter-us US] [--max-runs N] [--budget-s S] [--only REGEX]
                              [--orders ROUNDS]

For each program: plain random testing runs the example binary N times in a row with
`--jitter-us US` (a random sleep in every operation) and counts the runs whose report
says `"matches_reference":false`, with the time to the first; exploration runs
`racetrack explore -- PROGRAM ARGS` once, and times its first failing run (read off its
stderr as it goes) and its whole walk. Prints a markdown table of both, and one of the
explorer's counts (runs, delivered messages, states merged) beside the thesis' tables.
With `--orders ROUNDS` it compares the walk's orders instead (`--order depth`,
`breadth`, `random` with seeds 1, 2, ...), interleaved, ROUNDS walks of each per
program: when each found its first wrong outcome, and how many outcomes each found
within the budget.
Nothing here asserts: it reports what it saw.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (program, args): the runtime examples with their races, and race-free ones.
PROGRAMS = [
    ("heat", ["--threads", "2", "--iters", "1", "--cells", "8", "--local-us", "0"]),
    ("heat", ["--threads", "2", "--iters", "1", "--cells", "8", "--local-us", "0", "--fixed"]),
    ("heat", ["--threads", "2", "--iters", "2", "--cells", "8", "--local-us", "0"]),
    ("heat", ["--threads", "2", "--iters", "2", "--cells", "8", "--local-us", "0", "--fixed"]),
    ("heat", ["--threads", "4", "--iters", "1", "--cells", "8", "--local-us", "0"]),
    ("heat", ["--threads", "4", "--iters", "1", "--cells", "8", "--local-us", "0", "--fixed"]),
    ("heat", ["--threads", "4", "--iters", "2", "--cells", "8", "--local-us", "0"]),
    ("heat", ["--threads", "4", "--iters", "2", "--cells", "8", "--local-us", "0", "--fixed"]),
    ("search", ["--threads", "2"]),
    ("search", ["--threads", "2", "--fixed"]),
    ("search", ["--threads", "4"]),
    ("gather", ["--inputs", "4"]),
    ("gather", ["--inputs", "6"]),
    ("gather", ["--inputs", "8"]),
    ("gather", ["--inputs", "10"]),
    ("gather", ["--inputs", "4", "--first"]),
    ("gather", ["--inputs", "8", "--first"]),
    ("mergesort", ["--threads", "2", "--size", "256", "--chunks", "4"]),
    ("mergesort", ["--threads", "4", "--size", "4096", "--chunks", "8"]),
]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--racetrack", default=os.path.join(ROOT, "target/release/racetrack"))
    p.add_argument("--bin", default=os.path.join(ROOT, "target/release"), help="the example binaries")
    p.add_argument("--plain-runs", type=int, default=50)
    p.add_argument("--jitter-us", type=int, default=200)
    p.add_argument("--max-runs", type=int, default=20000)
    p.add_argument("--budget-s", type=int, default=300)
    p.add_argument("--only", help="a regex on `program args`")
    p.add_argument("--orders", type=int, metavar="ROUNDS",
                   help="compare --order depth, breadth and random, ROUNDS walks each")
    return p.parse_args()


def wrong(line):
    """Whether a report line says the result is wrong (`None`: no report)."""
    try:
        return json.loads(line).get("matches_reference") is False
    except (ValueError, AttributeError):
        return None


def plain(binary, args, runs, jitter_us):
    """Random testing: (failing runs, seconds to the first, seconds in all)."""
    failing, first, t0 = 0, None, time.monotonic()
    for _ in range(runs):
        out = subprocess.run([binary, *args, "--jitter-us", str(jitter_us)],
                             capture_output=True, text=True)
        lines = out.stdout.strip().splitlines()
        if out.returncode != 0 or not lines or wrong(lines[-1]):
            failing += 1
            if first is None:
                first = time.monotonic() - t0
    return failing, first, time.monotonic() - t0


def explore(racetrack, binary, args, max_runs, budget_s, extra=()):
    """One walk: (first failing run and its second, the summary, seconds in all)."""
    out_dir = tempfile.mkdtemp(prefix="racetrack-explore-bench-")
    cmd = [racetrack, "explore", "--out", out_dir, "--max-runs", str(max_runs),
           "--budget-s", str(budget_s), *extra, "--", binary, *args]
    t0 = time.monotonic()
    # The summary goes to a file: a pipe read only after stderr ends would fill up (a
    # summary can be larger than a pipe holds) and stop the walk.
    summary_file = tempfile.TemporaryFile(mode="w+")
    p = subprocess.Popen(cmd, stdout=summary_file, stderr=subprocess.PIPE, text=True)
    first = None
    run_line = re.compile(r"^racetrack: run (\d+): .*-> (.*)$")
    for line in p.stderr:
        m = run_line.match(line.rstrip("\n"))
        if first is None and m:
            outcome = m.group(2)
            report = outcome.split(": ", 1)[1] if ": " in outcome else ""
            if not outcome.startswith("exit 0") or wrong(report):
                first = (int(m.group(1)), time.monotonic() - t0)
    p.wait()
    summary_file.seek(0)
    stdout = summary_file.read()
    took = time.monotonic() - t0
    subprocess.run(["rm", "-rf", out_dir])
    lines = stdout.strip().splitlines()
    summary = json.loads(lines[-1]) if lines else {}
    return first, summary, took


def fmt_s(s):
    return "never" if s is None else f"{s:.1f} s"


def orders(a, programs):
    """--orders: each order's walks on each program, interleaved; a table."""
    names = ["depth", "breadth", "random"]
    print(f"\n`--max-runs {a.max_runs} --budget-s {a.budget_s}`, {a.orders} walks of each "
          "order, interleaved; random with seeds 1, 2, ...; first failure: median (range) "
          "of the walks that found one.\n")
    print("| program | order | walks that found a wrong outcome | first failure: run "
          "| first failure: s | outcomes | runs | complete |")
    print("|---|---|---|---|---|---|---|---|")
    for shown, binary, args in programs:
        seen = {n: [] for n in names}
        for r in range(a.orders):
            for n in names:
                extra = ["--order", n] + (["--seed", str(r + 1)] if n == "random" else [])
                first, s, took = explore(a.racetrack, binary, args, a.max_runs, a.budget_s, extra)
                seen[n].append((first, s, took))
                print(f"{shown} --order {n}: first {first}, {s.get('runs')} runs, "
                      f"{len(s.get('outcomes', []))} outcomes, {took:.1f} s", file=sys.stderr)
        for n in names:
            walks = seen[n]
            found = sorted(f for f, _, _ in walks if f is not None)
            runs = sorted(f[0] for f in found)
            secs = sorted(f[1] for f in found)
            mid = lambda v: v[len(v) // 2]
            first_run = f"{mid(runs)} ({runs[0]}–{runs[-1]})" if runs else "never"
            first_s = f"{mid(secs):.1f} ({secs[0]:.1f}–{secs[-1]:.1f})" if secs else "never"
            outs = sorted(len(s.get("outcomes", [])) for _, s, _ in walks)
            all_runs = sorted(s.get("runs", 0) for _, s, _ in walks)
            complete = sum(1 for _, s, _ in walks if s.get("complete"))
            print(f"| `{shown}` | {n} | {len(found)} / {len(walks)} | {first_run} | {first_s} "
                  f"| {outs[0]}–{outs[-1]} | {all_runs[0]}–{all_runs[-1]} | {complete} / {len(walks)} |")


def main():
    a = parse_args()
    if not os.path.exists(a.racetrack):
        sys.exit(f"explore_bench.py: {a.racetrack} not found (cargo build --release -p racetrack -p racetrack-examples)")
    if a.orders:
        chosen = [(" ".join([n, *args]), os.path.join(a.bin, n), args) for n, args in PROGRAMS
                  if not a.only or re.search(a.only, " ".join([n, *args]))]
        return orders(a, chosen)
    rows = []
    for name, args in PROGRAMS:
        shown = " ".join([name, *args])
        if a.only and not re.search(a.only, shown):
            continue
        binary = os.path.join(a.bin, name)
        failing, p_first, p_all = plain(binary, args, a.plain_runs, a.jitter_us)
        first, s, took = explore(a.racetrack, binary, args, a.max_runs, a.budget_s)
        rows.append((shown, failing, p_first, p_all, first, s, took))
        print(f"{shown}: plain {failing}/{a.plain_runs} failing; explore {s.get('runs')} runs, "
              f"complete {s.get('complete')}, {took:.1f} s", file=sys.stderr)

    print(f"\nPlain: {a.plain_runs} runs with `--jitter-us {a.jitter_us}`. "
          f"Explore: `--max-runs {a.max_runs} --budget-s {a.budget_s}`.\n")
    print("| program | plain: failing runs | plain: first failure | plain: all runs "
          "| explore: first failure | explore: walk | outcomes |")
    print("|---|---|---|---|---|---|---|")
    for shown, failing, p_first, p_all, first, s, took in rows:
        ex_first = "never" if first is None else f"run {first[0]}, {first[1]:.1f} s"
        walk = "complete" if s.get("complete") else f"not: {s.get('stopped')}"
        print(f"| `{shown}` | {failing} / {a.plain_runs} | {fmt_s(p_first)} | {p_all:.1f} s "
              f"| {ex_first} | {s.get('runs')} runs, {walk}, {took:.1f} s "
              f"| {len(s.get('outcomes', []))} |")

    print("\n| program | runs | orderings | delivered | after the forced steps "
          "| to new states | branches merged | walk |")
    print("|---|---|---|---|---|---|---|---|")
    for shown, _, _, _, _, s, took in rows:
        walk = "complete" if s.get("complete") else "not complete"
        print(f"| `{shown}` | {s.get('runs')} | {s.get('orderings')} | {s.get('delivered')} "
              f"| {s.get('delivered_after_forced')} | {s.get('delivered_to_new_states')} "
              f"| {s.get('merged')} | {walk}, {took:.1f} s |")


if __name__ == "__main__":
    main()
