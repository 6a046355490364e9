//! Record and replay of real example processes (`racetrack record`, `racetrack replay`,
//! `RACETRACK_RECORD` / `RACETRACK_REPLAY`): a run recorded with random jitter is replayed
//! 20 times, also with jitter, with the same result and the same steps in the same order
//! on every thread (read from trace files written alongside); runs that cannot follow
//! their log stop with exit code 3 and say where; damaged logs are refused by byte.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use racetrack_protocol::replay_log::{ReplayLog, LOG_MAGIC};
use racetrack_protocol::trace::TraceReader;
use racetrack_protocol::Event;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const REPLAYS: usize = 20;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("racetrack-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn example(name: &str, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(support::example_bin(name));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// The example's report (its last stdout line), without its timing.
fn report(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    let mut v: Value = serde_json::from_str(text.lines().last().expect("a report")).unwrap();
    v.as_object_mut().unwrap().remove("elapsed_ms");
    v
}

/// Each thread's step starts, in order: `op msg step`.
type Orders = BTreeMap<String, Vec<String>>;

fn step_orders(trace: &Path) -> Orders {
    let mut orders = Orders::new();
    let mut reader = TraceReader::open(trace).unwrap();
    for ev in reader.by_ref() {
        if let Event::Start(s) = ev.unwrap().event {
            let step = serde_json::to_value(s.step).unwrap();
            orders.entry(s.thread).or_default().push(format!(
                "{} {} {}",
                s.op,
                s.msg,
                step.as_str().unwrap()
            ));
        }
    }
    assert_eq!(reader.warning(), None);
    orders
}

/// Record `name args` (traced too), then replay it `REPLAYS` times with the same jitter:
/// every replay has the recording's result and step orders. Free runs, which do differ
/// from the recording, show the comparison can fail.
fn fidelity(name: &str, args: &[&str]) {
    let log = scratch(&format!("{name}.rtrec"));
    let trace = scratch(&format!("{name}-rec.rtrace"));
    let out = example(
        name,
        args,
        &[("RACETRACK_RECORD", &log), ("RACETRACK_TRACE", &trace)],
    );
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (result, orders) = (report(&out), step_orders(&trace));
    let steps: usize = orders.values().map(Vec::len).sum();
    let parsed = ReplayLog::read(&log).unwrap();
    assert!(parsed.end.is_some(), "the log is complete");
    eprintln!(
        "{name}: {steps} steps, log {} bytes, {} runs",
        std::fs::metadata(&log).unwrap().len(),
        parsed.runs()
    );

    // Free runs with the same jitter interleave differently.
    let free = scratch(&format!("{name}-free.rtrace"));
    let differs = (0..10).any(|_| {
        let out = example(name, args, &[("RACETRACK_TRACE", &free)]);
        assert!(out.status.success());
        step_orders(&free) != orders
    });
    assert!(
        differs,
        "{name}: 10 free runs all had the recording's step orders"
    );

    for i in 0..REPLAYS {
        let t = scratch(&format!("{name}-replay.rtrace"));
        let out = example(name, args, &[("RACETRACK_REPLAY", &log), ("RACETRACK_TRACE", &t)]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{name} replay {i}: {:?}: {stderr}",
            out.status
        );
        assert_eq!(report(&out), result, "{name} replay {i}: the result");
        let replayed = step_orders(&t);
        for (thread, steps) in &orders {
            let got = replayed.get(thread).map_or(&[][..], Vec::as_slice);
            if let Some(k) = (0..steps.len().max(got.len())).find(|&k| steps.get(k) != got.get(k)) {
                panic!(
                    "{name} replay {i}: {thread}'s step {k} is {:?}, the recording's {:?}",
                    got.get(k),
                    steps.get(k)
                );
            }
        }
        assert_eq!(replayed.len(), orders.len(), "{name} replay {i}: the threads");
    }
}

#[test]
fn heat_replays_exactly() {
    fidelity("heat", &["--iters", "5", "--jitter-us", "300"]);
}

#[test]
fn search_replays_exactly() {
    fidelity("search", &["--jitter-us", "2000"]);
}

#[test]
fn mergesort_replays_exactly() {
    fidelity("mergesort", &["--jitter-us", "300"]);
}

/// A racy result the recording happened to get comes back in every replay.
#[test]
fn a_lost_race_replays_lost() {
    let log = scratch("search-lost.rtrec");
    let args = ["--jitter-us", "3000"];
    let lost = (0..40).find_map(|_| {
        let out = example("search", &args, &[("RACETRACK_RECORD", &log)]);
        assert!(out.status.success());
        let r = report(&out);
        (r["matches_reference"] == false).then_some(r)
    });
    let lost = lost.expect("one of 40 runs with 3 ms of jitter lost the race");
    for i in 0..REPLAYS {
        let out = example("search", &args, &[("RACETRACK_REPLAY", &log)]);
        assert!(out.status.success(), "replay {i}");
        assert_eq!(report(&out), lost, "replay {i}");
    }
}

fn racetrack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_racetrack"))
        .args(args)
        .output()
        .unwrap()
}

/// `racetrack record` then `racetrack replay` with other arguments or another program:
/// exit code 3 and where it diverged; the right arguments replay.
#[test]
fn a_replay_that_cannot_follow_says_where() {
    let search = support::example_bin("search");
    let heat = support::example_bin("heat");
    let log = scratch("search-cli.rtrec");
    let l = log.to_str().unwrap();
    let s = search.to_str().unwrap();
    let out = racetrack(&["record", "-o", l, "--", s, "--jitter-us", "500"]);
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("replay log") && said.contains("steps in"), "{said}");

    let out = racetrack(&["replay", l, "--", s, "--jitter-us", "500"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let cases: [(&[&str], &str); 4] = [
        (&[s, "--threads", "3"], "collection proc has 3 threads"),
        (
            &[heat.to_str().unwrap()],
            "operation 0 is Scatter, the recorded run's was Split",
        ),
        (
            &[s, "--chunks", "12"],
            "the program ended with main[0] at its step",
        ),
        (&[s, "--chunks", "20"], "and the recorded run made only"),
    ];
    for (program, says) in cases {
        let mut args = vec!["replay", l, "--"];
        args.extend(program);
        let out = racetrack(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{program:?}: {stderr}");
        assert!(stderr.contains("replay diverged from the log"), "{stderr}");
        assert!(
            stderr.contains(says),
            "{program:?}: expected `{says}` in: {stderr}"
        );
    }
}

/// A log whose runs name a sender whose message never comes: the thread waits, the
/// program stalls, and after the stall time the replay says which message it waited for.
#[test]
fn a_stalled_replay_says_what_it_waited_for() {
    let log = scratch("heat-stall.rtrec");
    let out = example("heat", &["--iters", "2"], &[("RACETRACK_RECORD", &log)]);
    assert!(out.status.success());
    let bytes = std::fs::read(&log).unwrap();
    let mut parsed = ReplayLog::parse(&bytes).unwrap();
    // proc[0] (thread 1) is told its first message comes from proc[3] (thread 4), which
    // never sends it anything.
    let end = parsed.end.take().unwrap();
    assert_eq!(end.threads[1].name, "proc[0]");
    let mut forged = racetrack_protocol::replay_log::header_bytes(&parsed.header);
    for (g, runs) in parsed.threads.iter().enumerate() {
        let mut enc = Vec::new();
        for (k, r) in runs.iter().enumerate() {
            let mut r = *r;
            if g == 1 && k == 0 {
                r.sender = 5;
            }
            racetrack_protocol::replay_log::put_run(&mut enc, r);
        }
        racetrack_protocol::replay_log::put_runs_record(&mut forged, g, runs.len() as u64, &enc);
    }
    forged.extend(racetrack_protocol::replay_log::end_record(&end));
    std::fs::write(&log, forged).unwrap();
    let t0 = std::time::Instant::now();
    let out = Command::new(support::example_bin("heat"))
        .args(["--iters", "2"])
        .env("RACETRACK_REPLAY", &log)
        .env("RACETRACK_REPLAY_STALL_MS", "500")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    // proc[0] waits for proc[3], and main for proc[0]: either may be the one that says so.
    let said = [
        "proc[0]'s step 1 must take the next message from proc[3]",
        "must take the next message from proc[0]",
    ];
    assert!(said.iter().any(|s| stderr.contains(s)), "{stderr}");
    assert!(
        stderr.contains("none came in 0.5 s with the program stalled"),
        "{stderr}"
    );
    assert!(t0.elapsed().as_secs() < 30);
}

/// Damaged logs are refused before the program starts; a log cut short (a recorded run
/// that died) replays its prefix and then runs free.
#[test]
fn damaged_and_cut_logs() {
    let heat = support::example_bin("heat");
    let h = heat.to_str().unwrap();
    let log = scratch("heat-cut.rtrec");
    let l = log.to_str().unwrap();
    let out = racetrack(&["record", "-o", l, "--", h, "--iters", "3"]);
    assert!(out.status.success());
    let good = std::fs::read(&log).unwrap();

    let bad = scratch("bad.rtrec");
    let b = bad.to_str().unwrap();
    let mut flipped = good.clone();
    flipped[LOG_MAGIC.len()] = 9; // the format
    for (bytes, says) in [
        (b"not a log at all".to_vec(), "byte 0: not a replay log"),
        (flipped, "byte 8: log format 9"),
        (good[..good.len() - 3].to_vec(), "end record"),
    ] {
        std::fs::write(&bad, bytes).unwrap();
        let out = racetrack(&["replay", b, "--", h, "--iters", "3"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("damaged replay log") && stderr.contains(says),
            "{says}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "the program did not start");
    }
    let out = racetrack(&["replay", "/nonexistent.rtrec", "--", h]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read /nonexistent.rtrec"));

    // Cut before its end record: a prefix.
    let end = ReplayLog::parse(&good).unwrap().end.unwrap();
    let cut = good.len() - racetrack_protocol::replay_log::end_record(&end).len();
    std::fs::write(&bad, &good[..cut]).unwrap();
    let out = racetrack(&["replay", b, "--", h, "--iters", "3"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("the recorded run did not finish"), "{stderr}");
    assert_eq!(report(&out)["matches_reference"], true);
}
