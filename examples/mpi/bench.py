#!/usr/bin/env python3
"""What the debugger costs an MPI job in a free run (BENCHMARKS.md, "MPI jobs").

Runs each workload under three configurations, interleaved (0 1 2, 0 1 2, ...), and
prints the medians and their ratios to configuration 0 as a Markdown table:

0. plain `mpiexec.openmpi -n 4 PROGRAM`;
1. the same with Racetrack's MPI library preloaded (`LD_PRELOAD`), no debugger: the
   wrappers run, the agent stays idle;
2. `racetrack mpirun --ctl -n 4 -- PROGRAM`, `continue`, then a free run to the exit,
   the controller printing every event as a JSON line to a file this script counts
   afterwards;
3. `racetrack mpirun --record LOG -n 4 -- PROGRAM`: a free run recording a replay log
   (the log's bytes and choices are printed with it);
4. with `--gui` (hpcc only): the debugger's real window under `xvfb-run`, driven by a GUI
   script (`continue`, then wait for the exit), the message-passing graph drawing the
   whole job. The window's own start-up is taken out: its wall time is the GUI run's
   less the GUI's fixed cost, measured as a GUI run of `ring --rounds 1` less a plain one.

Workloads: Debian's `hpcc` on `hpcc/hpccinf.txt` (wall time of the whole job, and hpcc's
own HPL and MPIRandomAccess times from `hpccoutf.txt`), and `ring --rounds R` (4 ranks,
`MPI_Send`/`MPI_Recv`: µs per call, each rank making 2 R calls).

With `--scale 2,4,8,16`: how the attached cost grows with the ranks instead, ring and hpcc
at each count (oversubscribed on a small machine; hpcc's process grid as square as the
count allows), plain (configuration 0) against attached (configuration 2), interleaved.

Usage: examples/mpi/bench.py [--reps N] [--rounds R] [--only hpcc|ring] [--gui] [--n N]
                             [--scale RANKS,...]
(`--n`: hpcc's problem size, default 200; `--gui` needs `xvfb-run`)
Needs the release build: `cargo build --release -p racetrack -p racetrack-mpi`
(`$CARGO_TARGET_DIR`, else `target/`), `hpcc`, Open MPI and `mpicc.openmpi`.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
RANKS = 4
CONFIGS = ["0. plain mpiexec", "1. library preloaded, idle", "2. ctl attached, free run",
           "3. recording (mpirun --record)", "4. GUI attached, free run"]
GUI_SCRIPT = ('{"cmd":"wait","until":"held","timeout_ms":60000}\n{"cmd":"continue"}\n'
              '{"cmd":"wait","until":"exit","timeout_ms":600000}\n{"cmd":"quit"}\n')
CTL_INPUT = '{"cmd":"continue"}\n{"cmd":"wait","until":"exit","timeout_ms":600000}\n'


def release_dir():
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
    d = os.path.join(target, "release")
    for f in ["racetrack", "libracetrack_mpi.so", "libracetrack_mpi_openmpi.so"]:
        if not os.path.exists(os.path.join(d, f)):
            sys.exit(f"{d}/{f} missing: cargo build --release -p racetrack -p racetrack-mpi")
    return d


def mpiexec(preload=None):
    cmd = ["mpiexec.openmpi", "--allow-run-as-root", "--oversubscribe", "-n", str(RANKS)]
    if preload:
        cmd += ["-x", "LD_PRELOAD=" + preload]
    return cmd


def run(config, rel, prog, cwd):
    """One run of `prog` (a list) under `config`; (seconds, events the ctl printed, or for
    a recording (log bytes, choices, clock readings))."""
    preload = f"{rel}/libracetrack_mpi.so:{rel}/libracetrack_mpi_openmpi.so"
    quiet = dict(cwd=cwd, stderr=subprocess.DEVNULL)
    t0 = time.perf_counter()
    events = None
    if config == 0:
        subprocess.run(mpiexec() + prog, stdout=subprocess.DEVNULL, check=True, **quiet)
    elif config == 1:
        subprocess.run(mpiexec(preload) + prog, stdout=subprocess.DEVNULL, check=True, **quiet)
    elif config == 3:
        log = os.path.join(cwd, "bench.rtrec")
        cmd = [f"{rel}/racetrack", "mpirun", "--record", log, "--impl", "openmpi", "-n", str(RANKS), "--"]
        p = subprocess.run(cmd + prog, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd, check=True)
        elapsed = time.perf_counter() - t0
        m = re.search(rb"\((\d+) bytes: (\d+) choices in \d+ calls of \d+ ranks, (\d+) clock readings", p.stderr)
        if not m:
            sys.exit(f"the recorded job wrote no log: {p.stderr!r}")
        return elapsed, tuple(int(g) for g in m.groups())
    elif config == 4:
        script = os.path.join(cwd, "bench-gui.jsonl")
        with open(script, "w") as f:
            f.write(GUI_SCRIPT)
        cmd = ["xvfb-run", "-a", "-s", "-screen 0 1600x1000x24", f"{rel}/racetrack", "mpirun",
               "--impl", "openmpi", "--script", script, "-n", str(RANKS), "--"]
        subprocess.run(cmd + prog, stdout=subprocess.DEVNULL, check=True, **quiet)
    else:
        # The events go to a file, counted after the run: a script reading them as they
        # come would take CPU from the job on this machine's two cores, and be measured
        # with it.
        cmd = [f"{rel}/racetrack", "mpirun", "--ctl", "--impl", "openmpi", "-n", str(RANKS), "--"]
        with tempfile.TemporaryFile() as out:
            p = subprocess.Popen(cmd + prog, stdin=subprocess.PIPE, stdout=out, **quiet)
            p.stdin.write(CTL_INPUT.encode())
            p.stdin.close()
            p.wait()
            elapsed = time.perf_counter() - t0
            out.seek(0)
            events, last = 0, b""
            for line in out:
                events += 1
                last = line
        if p.returncode != 0 or b'"exit","code":0' not in last:
            sys.exit(f"the job under the debugger failed: {last!r}")
        return elapsed, events
    return time.perf_counter() - t0, events


def hpcc_figures(cwd):
    """hpcc's own HPL and MPIRandomAccess times (s) from the run just made."""
    out = open(os.path.join(cwd, "hpccoutf.txt")).read()
    if "\nSuccess=1\n" not in out:
        sys.exit("hpcc did not report Success=1")
    get = lambda k: float(re.search(rf"^{k}=(\S+)$", out, re.M).group(1))
    return get("HPL_time"), get("MPIRandomAccess_time")


def table(rows, headers):
    print("| " + " | ".join(headers) + " |")
    print("|" + "|".join("---" if i < 2 else "---:" for i in range(len(headers))) + "|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


def gui_fixed_cost(rel, ring):
    """The GUI's own cost on a job that does nothing: a GUI run of `ring --rounds 1` less
    a plain one (s)."""
    work = os.path.dirname(ring)
    gui, _ = run(4, rel, [ring, "--rounds", "1"], work)
    plain, _ = run(0, rel, [ring, "--rounds", "1"], work)
    return gui - plain


def grid(ranks):
    """hpcc's process grid for `ranks`: P x Q = ranks, P the largest factor <= sqrt."""
    p = max(d for d in range(1, int(ranks ** 0.5) + 1) if ranks % d == 0)
    return p, ranks // p


def hpcc_input(work, n, ranks=4):
    """Write hpcc's input into `work`: problem size `n`, a grid for `ranks`."""
    p, q = grid(ranks)
    inf = open(os.path.join(HERE, "hpcc", "hpccinf.txt")).read()
    inf = re.sub(r"^200( +Ns)$", rf"{n}\1", inf, count=1, flags=re.M)
    inf = re.sub(r"^2( +Ps)$", rf"{p}\1", inf, count=1, flags=re.M)
    inf = re.sub(r"^2( +Qs)$", rf"{q}\1", inf, count=1, flags=re.M)
    with open(os.path.join(work, "hpccinf.txt"), "w") as f:
        f.write(inf)


def bench_hpcc(rel, reps, n, gui):
    work = tempfile.mkdtemp(prefix="racetrack-bench-hpcc-")
    hpcc_input(work, n)
    configs = list(range(5 if gui else 4))
    ring = None
    if gui:
        subprocess.run(["bash", os.path.join(HERE, "build.sh"), "openmpi", work], check=True,
                       stdout=subprocess.DEVNULL)
        ring = os.path.join(work, "ring")
    samples = {c: [] for c in configs}
    for _ in range(reps):
        for c in configs:
            out = os.path.join(work, "hpccoutf.txt")
            if os.path.exists(out):
                os.remove(out)
            secs, events = run(c, rel, ["hpcc"], work)
            if c == 4:
                secs -= gui_fixed_cost(rel, ring)
            samples[c].append((secs, *hpcc_figures(work), events))
    shutil.rmtree(work)
    base = [statistics.median(s[i] for s in samples[0]) for i in range(3)]
    rows = []
    for c in configs:
        med = [statistics.median(s[i] for s in samples[c]) for i in range(3)]
        ev = "-" if c in (0, 1, 4) else (f"{statistics.median(s[3] for s in samples[c]):.0f}" if c == 2
                                         else log_figures(s[3] for s in samples[c]))
        spread = [s[0] / base[0] for s in samples[c]]
        rows.append([f"hpcc, N = {n}", CONFIGS[c], f"{med[0]:.2f}", f"{med[0] / base[0]:.2f}",
                     f"{med[1] * 1e3:.0f}", f"{med[1] / base[1]:.2f}",
                     f"{med[2]:.2f}", f"{med[2] / base[2]:.2f}", ev,
                     f"{min(spread):.2f}–{max(spread):.2f}"])
    table(rows, ["workload", "configuration", "wall s", "ratio", "HPL ms", "ratio",
                 "RandomAccess s", "ratio", "events / log", "wall ratios, each rep"])


def log_figures(logs):
    """Medians of a recording's log: bytes, choices, clock readings."""
    logs = list(logs)
    med = [statistics.median(l[i] for l in logs) for i in range(3)]
    return f"{med[0]:.0f} B: {med[1]:.0f} choices, {med[2]:.0f} clocks"


def bench_ring(rel, reps, rounds):
    build = tempfile.mkdtemp(prefix="racetrack-bench-ring-")
    subprocess.run(["bash", os.path.join(HERE, "build.sh"), "openmpi", build], check=True,
                   stdout=subprocess.DEVNULL)
    prog = [os.path.join(build, "ring"), "--rounds", str(rounds)]
    short = [os.path.join(build, "ring"), "--rounds", "1"]
    samples = {c: [] for c in range(4)}
    for _ in range(reps):
        for c in range(4):
            # The job's fixed cost (launch, MPI_Init, attach) is the 1-round run's; the
            # calls' cost is what the long run takes beyond it.
            full, events = run(c, rel, prog, build)
            fixed, _ = run(c, rel, short, build)
            samples[c].append((full - fixed, events))
    shutil.rmtree(build)
    calls = 2 * (rounds - 1)
    base = statistics.median(s[0] for s in samples[0])
    rows = []
    for c in range(4):
        med = statistics.median(s[0] for s in samples[c])
        ev = "-" if c < 2 else (f"{statistics.median(s[1] for s in samples[c]):.0f}" if c == 2
                                else log_figures(s[1] for s in samples[c]))
        rows.append([f"ring, {rounds} rounds", CONFIGS[c], f"{med * 1e6 / calls:.2f}",
                     f"{med / base:.2f}", ev])
    table(rows, ["workload", "configuration", "µs per call", "ratio", "events / log"])


def bench_scale(rel, reps, rounds, n, counts):
    """Plain against attached, ring and hpcc, at each rank count in `counts`."""
    global RANKS
    build = tempfile.mkdtemp(prefix="racetrack-bench-scale-")
    subprocess.run(["bash", os.path.join(HERE, "build.sh"), "openmpi", build], check=True,
                   stdout=subprocess.DEVNULL)
    prog = [os.path.join(build, "ring"), "--rounds", str(rounds)]
    short = [os.path.join(build, "ring"), "--rounds", "1"]
    ring = {(r, c): [] for r in counts for c in (0, 2)}
    hpcc = {(r, c): [] for r in counts for c in (0, 2)}
    events = {r: [] for r in counts}
    for _ in range(reps):
        for r in counts:
            RANKS = r
            hpcc_input(build, n, r)
            for c in (0, 2):
                full, ev = run(c, rel, prog, build)
                fixed, _ = run(c, rel, short, build)
                ring[(r, c)].append(full - fixed)
                out = os.path.join(build, "hpccoutf.txt")
                if os.path.exists(out):
                    os.remove(out)
                secs, hev = run(c, rel, ["hpcc"], build)
                hpcc_figures(build)
                hpcc[(r, c)].append(secs)
                if c == 2:
                    events[r].append((ev, hev))
    shutil.rmtree(build)
    rows = []
    for r in counts:
        med = {k: statistics.median(v) for k, v in ring.items() if k[0] == r}
        hmed = {k: statistics.median(v) for k, v in hpcc.items() if k[0] == r}
        ratios = [a / p for a, p in zip(ring[(r, 2)], ring[(r, 0)])]
        hratios = [a / p for a, p in zip(hpcc[(r, 2)], hpcc[(r, 0)])]
        calls = 2 * (rounds - 1)
        rows.append([str(r), "%dx%d" % grid(r),
                     f"{med[(r, 0)] * 1e6 / calls:.2f}", f"{med[(r, 2)] * 1e6 / calls:.2f}",
                     f"{med[(r, 2)] / med[(r, 0)]:.2f} ({min(ratios):.2f}–{max(ratios):.2f})",
                     f"{hmed[(r, 0)]:.2f}", f"{hmed[(r, 2)]:.2f}",
                     f"{hmed[(r, 2)] / hmed[(r, 0)]:.2f} ({min(hratios):.2f}–{max(hratios):.2f})",
                     f"{statistics.median(e[0] for e in events[r]):.0f}",
                     f"{statistics.median(e[1] for e in events[r]):.0f}"])
    table(rows, ["ranks", "hpcc grid", f"ring µs/call, plain", "ring µs/call, attached",
                 "ring ratio (each rep)", "hpcc s, plain", "hpcc s, attached",
                 "hpcc ratio (each rep)", "ring events", "hpcc events"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=20000)
    ap.add_argument("--only", choices=["hpcc", "ring"])
    ap.add_argument("--gui", action="store_true")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--scale", help="rank counts, e.g. 2,4,8,16: plain against attached at each")
    a = ap.parse_args()
    rel = release_dir()
    print(f"load average before: {os.getloadavg()[0]:.2f}; {a.reps} reps, interleaved")
    if a.scale:
        counts = [int(r) for r in a.scale.split(",")]
        bench_scale(rel, a.reps, a.rounds, a.n, counts)
        print(f"\nload average after: {os.getloadavg()[0]:.2f}")
        return
    if a.only in (None, "hpcc"):
        bench_hpcc(rel, a.reps, a.n, a.gui)
        print()
    if a.only in (None, "ring"):
        bench_ring(rel, a.reps, a.rounds)
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
