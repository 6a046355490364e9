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
            orders.entry(s.thread.to_string()).or_default().push(format!(
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

    // Fewer chunks: main ends short of its logged steps, or (as the replay's timing goes)
    // waits at one for a message that never comes.
    let short: &[&str] = &[
        "the program ended with main[0] at its step",
        "must take the next message from proc",
    ];
    let cases: [(&[&str], &[&str]); 4] = [
        (&[s, "--threads", "3"], &["collection proc has 3 threads"]),
        (
            &[heat.to_str().unwrap()],
            &["operation 0 is Scatter, the recorded run's was Split"],
        ),
        (&[s, "--chunks", "12"], short),
        (&[s, "--chunks", "20"], &["and the recorded run made only"]),
    ];
    for (program, says) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_racetrack"))
            .args(["replay", l, "--"])
            .args(program)
            .env("RACETRACK_REPLAY_STALL_MS", "1000")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{program:?}: {stderr}");
        assert!(stderr.contains("replay diverged from the log"), "{stderr}");
        assert!(
            says.iter().any(|s| stderr.contains(s)),
            "{program:?}: expected one of {says:?} in: {stderr}"
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

/// `racetrack run --ctl --script SCRIPT -- PROGRAM ARGS` (or `replay LOG --ctl`): every
/// event printed, after checking it reported no error.
fn ctl(cmd: &[&str], script: &str, program: &str, args: &[&str]) -> Vec<Value> {
    let file = scratch(&format!("script-{}.jsonl", script.len()));
    std::fs::write(&file, script).unwrap();
    let bin = support::example_bin(program);
    let mut all: Vec<&str> = cmd.to_vec();
    all.extend([
        "--ctl",
        "--script",
        file.to_str().unwrap(),
        "--",
        bin.to_str().unwrap(),
    ]);
    all.extend(args);
    let out = racetrack(&all);
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let errors: Vec<&Value> = events.iter().filter(|e| e["event"] == "error").collect();
    assert!(errors.is_empty(), "{cmd:?}: errors {errors:?}");
    assert!(out.status.success(), "{cmd:?}: exit {:?}", out.status);
    events
}

fn outcome(events: &[Value]) -> Value {
    let last = events.last().expect("events").clone();
    assert_eq!(last["event"], "outcome", "{last}");
    let mut r = last["result"].clone();
    r.as_object_mut().unwrap().remove("elapsed_ms");
    r
}

/// The reference race provoked in a `ctl` session (examples/scenarios/heat_race.jsonl),
/// saved with `save_scenario` once provoked, replays with no commands: the race shows
/// every time, where free runs do not show it.
#[test]
fn a_provoked_heat_race_saves_and_replays() {
    let log = scratch("heat-race.rtrec");
    let l = log.to_str().unwrap();
    let race = heat_race_script();
    let off = r#"{"cmd":"break","op":"BorderReq","thread":"proc[1]","on":false}"#;
    assert!(race.contains(off), "the scenario still turns its breakpoint off");
    let save = format!(r#"{{"cmd":"save_scenario","path":"{l}"}}"#);
    let script = race.replace(off, &format!("{save}\n{off}"));
    let events = ctl(&["run"], &script, "heat", &["--threads", "4"]);
    assert_eq!(
        outcome(&events)["matches_reference"],
        false,
        "the session provoked the race"
    );
    let saved = events
        .iter()
        .find(|e| e["event"] == "ok" && e["cmd"] == "save_scenario")
        .expect("an ok for save_scenario");
    assert!(
        saved["target"].as_str().unwrap().contains(" steps in "),
        "{saved}"
    );
    let parsed = ReplayLog::read(&log).unwrap();
    assert!(
        parsed.end.as_ref().is_some_and(|e| e.prefix),
        "a scenario is a prefix"
    );

    let heat = support::example_bin("heat");
    // Free runs show it rarely: on a loaded machine one in a few can (seen once in a
    // full test run while a release build ran beside it). One of five that does not is
    // the contrast to the replays below, which show it every time.
    let free =
        (0..5).any(|_| report(&example("heat", &["--threads", "4"], &[]))["matches_reference"] == true);
    assert!(free, "a free run does not show the race: all of five did");
    for i in 0..REPLAYS {
        let out = racetrack(&["replay", l, "--", heat.to_str().unwrap(), "--threads", "4"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "replay {i}: {stderr}");
        assert_eq!(report(&out)["matches_reference"], false, "replay {i}: {stderr}");
    }
}

/// The shipped heat race scenario, its thread `proc[1]`.
fn heat_race_script() -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/scenarios/heat_race.jsonl"),
    )
    .unwrap()
    .replace("${THREAD-1}", "proc[0]")
    .replace("${THREAD+1}", "proc[2]")
    .replace("${THREAD}", "proc[1]")
}

/// The same race, saved by the debugger after the program exited (from the session as
/// it ended, which the agent sent as its runtime was dropped): it replays the race too.
#[test]
fn a_race_saved_after_the_program_exited_replays() {
    let log = scratch("heat-race-after-exit.rtrec");
    let l = log.to_str().unwrap();
    let race = heat_race_script();
    let script = format!(
        "{race}\n{{\"cmd\":\"wait\",\"until\":\"exit\",\"timeout_ms\":30000}}\n\
         {{\"cmd\":\"save_scenario\",\"path\":\"{l}\"}}\n"
    );
    let events = ctl(&["run"], &script, "heat", &["--threads", "4"]);
    let exit = events.iter().position(|e| e["event"] == "exit").expect("an exit");
    let saved = events
        .iter()
        .position(|e| e["event"] == "ok" && e["cmd"] == "save_scenario")
        .expect("an ok for save_scenario");
    let target = events[saved]["target"].as_str().unwrap();
    assert!(
        target.contains(" steps in ") && target.ends_with("(the session as the program ended)"),
        "{target}"
    );
    assert!(
        saved < exit,
        "saved while the controller waited to print the exit"
    );
    assert_eq!(
        outcome(&events)["matches_reference"],
        false,
        "the session provoked the race"
    );
    let heat = support::example_bin("heat");
    for i in 0..5 {
        let out = racetrack(&["replay", l, "--", heat.to_str().unwrap(), "--threads", "4"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "replay {i}: {stderr}");
        assert_eq!(report(&out)["matches_reference"], false, "replay {i}: {stderr}");
    }
}

/// A replay under the controller: held at its start, a breakpoint holds during the replay,
/// and the result is the recording's; `take_over` ends the replay (once).
#[test]
fn a_replay_under_ctl_holds_and_takes_over() {
    let log = scratch("search-ctl.rtrec");
    let args = ["--jitter-us", "3000"];
    let lost = (0..40)
        .find_map(|_| {
            let out = example("search", &args, &[("RACETRACK_RECORD", &log)]);
            let r = report(&out);
            (r["matches_reference"] == false).then_some(r)
        })
        .expect("one of 40 runs lost the race");
    let l = log.to_str().unwrap();
    let script = r#"{"cmd":"wait","until":"held","timeout_ms":20000}
{"cmd":"break","op":"Pick","on":true}
{"cmd":"continue"}
{"cmd":"wait","until":"held","op":"Pick","timeout_ms":20000}
{"cmd":"break","op":"Pick","on":false}
{"cmd":"continue"}
{"cmd":"wait","until":"exit","timeout_ms":60000}
"#;
    let events = ctl(&["replay", l], script, "search", &args);
    let mut got = outcome(&events);
    got.as_object_mut().unwrap().remove("elapsed_ms");
    assert_eq!(got, lost, "the replay under ctl has the recording's result");
    assert!(events
        .iter()
        .any(|e| e["event"] == "start" && e["op"] == "Pick" && e["held"] == true));

    let script = r#"{"cmd":"wait","until":"held","timeout_ms":20000}
{"cmd":"take_over"}
{"cmd":"continue"}
{"cmd":"wait","until":"exit","timeout_ms":60000}
"#;
    let events = ctl(&["replay", l], script, "search", &args);
    // Held at its first step's start, which the replay had already let through.
    let ok = events
        .iter()
        .find(|e| e["event"] == "ok" && e["cmd"] == "take_over")
        .expect("take_over answered");
    assert!(
        ok["target"]
            .as_str()
            .unwrap()
            .contains("taken over after 1 of the"),
        "{ok}"
    );
    outcome(&events);
}
