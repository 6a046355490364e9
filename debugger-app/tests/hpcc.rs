//! A real MPI program nobody here wrote, under the debugger as a new user would run it:
//! Debian's `hpcc` (HPC Challenge, linked to Open MPI), 4 ranks, in a
//! directory holding its input, under `racetrack mpirun --ctl -n 4 -- hpcc` in a free run.
//! It must pass its own checks (`Success=1` in `hpccoutf.txt`), exit 0, and every rank
//! must report as many `stop`s as `start`s.
//!
//! Needs `hpcc` (and Open MPI, which it brings). Without it the test fails naming the
//! package, unless `RACETRACK_NO_MPI=1` is set. The MPI library must be beside `racetrack`
//! (`cargo build -p racetrack-mpi`, which `cargo test --workspace` does).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Start to exit, under a debug build of the debugger (a plain run takes about 2 s).
const JOB_LIMIT: Duration = Duration::from_secs(180);
const RANKS: usize = 4;

/// The repository's input with a smaller problem (N = 64, NB = 16): every test of hpcc
/// still runs, in seconds, under a debug build.
fn tiny_input() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/mpi/hpcc/hpccinf.txt");
    let input = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<String> = input
        .lines()
        .map(|l| match l.split_whitespace().nth(1) {
            Some("Ns") => "64           Ns".to_owned(),
            Some("NBs") => "16           NBs".to_owned(),
            _ => l.to_owned(),
        })
        .collect();
    assert_ne!(
        lines.join("\n"),
        input.trim_end(),
        "the Ns and NBs lines were found"
    );
    lines.join("\n") + "\n"
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// Calls per call name, per rank (a polling step's `stop` counts its `polls`); `start`s
/// and `stop`s per rank. The ranks' first `start`s may be in the snapshot (held before it
/// was taken).
type Counts = (
    BTreeMap<String, BTreeMap<String, usize>>,
    BTreeMap<String, usize>,
    BTreeMap<String, usize>,
);

fn counts(seen: &[Value]) -> Counts {
    let (mut calls, mut starts, mut stops): Counts = Default::default();
    let events = seen.iter().flat_map(|v| match v["event"].as_str() {
        Some("snapshot") => v["held"].as_array().unwrap().iter().collect(),
        _ => vec![v],
    });
    for v in events {
        let thread = v["thread"].as_str().unwrap_or_default().to_owned();
        match v["event"].as_str() {
            Some("start") => *starts.entry(thread).or_default() += 1,
            Some("stop") => {
                // A run of polls that found nothing is one step: its stop counts its calls.
                let op = v["op"].as_str().unwrap().to_owned();
                let polls = v["call"]["polls"].as_u64().unwrap_or(1) as usize;
                *calls.entry(thread.clone()).or_default().entry(op).or_default() += polls;
                *stops.entry(thread).or_default() += 1;
            }
            _ => {}
        }
    }
    (calls, starts, stops)
}

#[test]
fn hpcc_free_run() {
    if !on_path("hpcc") || !on_path("mpiexec.openmpi") {
        if std::env::var("RACETRACK_NO_MPI").is_ok_and(|v| v == "1") {
            return println!("left out: hpcc not installed (RACETRACK_NO_MPI=1)");
        }
        panic!("hpcc not found: scripts/test.sh installs it (the Debian package hpcc), or set RACETRACK_NO_MPI=1");
    }
    let dir = std::env::temp_dir().join(format!("racetrack-hpcc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("hpccinf.txt"), tiny_input()).unwrap();

    let mut child = Command::new(env!("CARGO_BIN_EXE_racetrack"))
        .args(["mpirun", "--ctl", "-n", &RANKS.to_string(), "--", "hpcc"])
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0)
        .spawn()
        .expect("racetrack starts");
    let rx = support::json_lines(child.stdout.take().unwrap());
    let mut stdin = child.stdin.take().unwrap();
    for cmd in [
        json!({"cmd":"continue"}),
        json!({"cmd":"wait","until":"exit","timeout_ms": JOB_LIMIT.as_millis() as u64}),
    ] {
        writeln!(stdin, "{cmd}").unwrap();
    }
    let deadline = Instant::now() + JOB_LIMIT;
    let mut seen = Vec::new();
    while seen.last().is_none_or(|v: &Value| v["event"] != "exit") {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(v) => seen.push(v),
            Err(_) => break,
        }
    }
    drop(stdin);
    let status = loop {
        match child.try_wait().unwrap() {
            Some(st) => break st.code(),
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            None => break None,
        }
    };
    // Whatever happened, nothing of the job outlives the test.
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stderr(Stdio::null())
        .status();
    let _ = child.wait();
    let exit = seen.last().cloned().unwrap_or(Value::Null);
    assert_eq!(
        exit,
        json!({"event":"exit","code":0}),
        "hpcc's exit under the debugger"
    );
    assert_eq!(status, Some(0), "racetrack's exit code");
    let alarms: Vec<&Value> = seen.iter().filter(|v| v["event"] == "deadlock").collect();
    assert!(
        alarms.is_empty(),
        "a job that finished was never deadlocked: {alarms:?}"
    );

    let out = std::fs::read_to_string(dir.join("hpccoutf.txt")).expect("hpcc wrote hpccoutf.txt");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.lines().any(|l| l == "Success=1"),
        "hpcc's own checks failed:\n{}",
        out.lines()
            .filter(|l| l.contains("FAIL") || l.starts_with("Success"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let errors: Vec<&Value> = seen.iter().filter(|v| v["event"] == "error").collect();
    assert!(errors.is_empty(), "errors: {errors:?}");

    let (calls, starts, stops) = counts(&seen);
    println!("hpcc's calls per rank: {calls:#?}");
    println!("steps (start, stop) per rank: {starts:?}");
    assert_eq!(calls.len(), RANKS, "every rank reported: {:?}", calls.keys());
    for (rank, calls) in &calls {
        let n: usize = calls.values().sum();
        assert_eq!(
            starts.get(rank),
            stops.get(rank),
            "{rank}: as many stops as starts"
        );
        // Every test of hpcc communicates; RandomAccess alone sends thousands of messages.
        for (call, min) in [
            ("MPI_Init", 1),
            ("MPI_Finalize", 1),
            ("MPI_Isend", 1000),
            ("MPI_Irecv", 1000),
        ] {
            let got = calls.get(call).copied().unwrap_or(0);
            assert!(
                got >= min,
                "{rank}: {got} {call}, expected at least {min}: {calls:?}"
            );
        }
        assert!(n >= 10_000, "{rank}: {n} calls");
    }
}

/// `racetrack ARGS` in `dir` to its end (its process group killed at the deadline): its
/// exit code and stderr.
fn racetrack_in(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_racetrack"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("racetrack starts");
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let deadline = Instant::now() + JOB_LIMIT;
    let status = loop {
        match child.try_wait().unwrap() {
            Some(st) => break st.code(),
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            None => break None,
        }
    };
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stderr(Stdio::null())
        .status();
    let _ = child.wait();
    (status, reader.join().unwrap())
}

/// hpcc's report without what a replay does not reproduce: the CPU times it reads with
/// `getrusage` (`CPU time used`, and PTRANS's rows by CPU time).
fn replayable(report: &str) -> Vec<&str> {
    report
        .lines()
        .filter(|l| !l.contains("CPU time") && !l.starts_with("CPU "))
        .collect()
}

/// hpcc recorded with `racetrack mpirun --record`, then replayed twice: its report, wall
/// times and rates included (it sizes loops and picks ranks by `MPI_Wtime` and
/// `time(NULL)`), comes out line for line as recorded, CPU times aside. A free run's
/// differs, so the comparison can fail.
#[test]
fn hpcc_replay() {
    if !on_path("hpcc") || !on_path("mpiexec.openmpi") {
        if std::env::var("RACETRACK_NO_MPI").is_ok_and(|v| v == "1") {
            return println!("left out: hpcc not installed (RACETRACK_NO_MPI=1)");
        }
        panic!("hpcc not found: scripts/test.sh installs it (the Debian package hpcc), or set RACETRACK_NO_MPI=1");
    }
    let dir = std::env::temp_dir().join(format!("racetrack-hpcc-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("hpccinf.txt"), tiny_input()).unwrap();
    let report = |what: &str| {
        let out = std::fs::read_to_string(dir.join("hpccoutf.txt"))
            .unwrap_or_else(|e| panic!("{what}: no hpccoutf.txt ({e})"));
        std::fs::remove_file(dir.join("hpccoutf.txt")).unwrap();
        assert!(
            out.lines().any(|l| l == "Success=1"),
            "{what}: hpcc's own checks failed"
        );
        out
    };

    let n = RANKS.to_string();
    let (code, err) = racetrack_in(
        &dir,
        &["mpirun", "--record", "hpcc.rtrec", "-n", &n, "--", "hpcc"],
    );
    assert_eq!(code, Some(0), "the recorded run: {err}");
    let recorded = report("the recorded run");
    let log = racetrack_protocol::replay_log::ReplayLog::read(&dir.join("hpcc.rtrec")).unwrap();
    println!("{}", err.lines().last().unwrap_or_default());
    assert!(log.complete(), "every rank reached MPI_Finalize");
    assert!(log.choices() > 1000, "{} choices", log.choices());
    assert!(
        log.ranks.iter().all(|r| !r.clocks.is_empty()),
        "every rank read the clock"
    );

    let (code, err) = racetrack_in(
        &dir,
        &["mpirun", "-n", &n, "--record", "other.rtrec", "--", "hpcc"],
    );
    assert_eq!(code, Some(0), "a free run: {err}");
    let free = report("a free run");
    assert_ne!(
        replayable(&free),
        replayable(&recorded),
        "a free run reports other times"
    );

    for i in 0..2 {
        let (code, err) = racetrack_in(&dir, &["replay", "hpcc.rtrec", "--", "hpcc"]);
        assert_eq!(code, Some(0), "replay {i}: {err}");
        assert!(!err.contains("diverged"), "replay {i}: {err}");
        let replayed = report(&format!("replay {i}"));
        let (a, b) = (replayable(&recorded), replayable(&replayed));
        let differ: Vec<(&&str, &&str)> = a.iter().zip(&b).filter(|(x, y)| x != y).collect();
        assert!(
            a.len() == b.len() && differ.is_empty(),
            "replay {i}: lines differ: {differ:?}"
        );
        println!(
            "replay {i}: {} of {} lines as recorded",
            b.len(),
            replayed.lines().count()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
