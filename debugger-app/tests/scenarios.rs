//! The race scenarios of `examples/scenarios/`, run unattended by `racetrack run --ctl
//! --script` against real example processes: the racy variants show the race on demand,
//! the fixed variants do not; the walks do what they say.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn scenario(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/scenarios")
        .join(name)
}

/// Run a scenario; returns every event printed (the last is the outcome).
fn run(script: &Path, sets: &[String], program: &str, args: &[&str]) -> Vec<Value> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_racetrack"));
    cmd.args(["run", "--ctl", "--script"]).arg(script);
    for s in sets {
        cmd.args(["--set", s]);
    }
    cmd.arg("--").arg(support::example_bin(program)).args(args);
    let out = cmd.output().expect("racetrack runs");
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let errors: Vec<&Value> = events.iter().filter(|e| e["event"] == "error").collect();
    assert!(
        errors.is_empty(),
        "{} {args:?} {sets:?}: errors {errors:?}",
        script.display()
    );
    assert!(out.status.success(), "exit {:?}", out.status);
    events
}

fn outcome(events: &[Value]) -> &Value {
    let last = events.last().expect("events");
    assert_eq!(
        last["event"], "outcome",
        "the scenario ends with its outcome: {last}"
    );
    &last["result"]
}

#[test]
fn heat_race_on_any_interior_thread_and_thread_count() {
    let script = scenario("heat_race.jsonl");
    for (threads, thread) in [
        ("3", "proc[1]"),
        ("4", "proc[1]"),
        ("4", "proc[2]"),
        ("6", "proc[2]"),
        ("6", "proc[4]"),
    ] {
        let set = [format!("THREAD={thread}")];
        let racy = run(&script, &set, "heat", &["--threads", threads]);
        assert_eq!(
            outcome(&racy)["matches_reference"],
            false,
            "racy heat, {threads} threads, {thread}"
        );
        let fixed = run(&script, &set, "heat", &["--threads", threads, "--fixed"]);
        assert_eq!(
            outcome(&fixed)["matches_reference"],
            true,
            "fixed heat, {threads} threads, {thread}"
        );
    }
}

#[test]
fn search_race_first_answer_wins() {
    let script = scenario("search_race.jsonl");
    for threads in ["2", "4"] {
        let racy = run(&script, &[], "search", &["--threads", threads]);
        let r = outcome(&racy);
        assert_eq!(
            r["matches_reference"], false,
            "racy search, {threads} threads: {r}"
        );
        let fixed = run(&script, &[], "search", &["--threads", threads, "--fixed"]);
        assert_eq!(
            outcome(&fixed)["matches_reference"],
            true,
            "fixed search, {threads} threads"
        );
    }
}

#[test]
fn trace_walk_follows_one_branch_to_the_merge() {
    let ev = run(
        &scenario("trace_walk.jsonl"),
        &[],
        "mergesort",
        &["--threads", "1", "--size", "40", "--chunks", "2"],
    );
    assert_eq!(outcome(&ev)["matches_reference"], true);
    // (The followed branch's merge and the other branch's sort run on different threads:
    // they may be held in either order.)
    let mut holds: Vec<String> = ev
        .iter()
        .filter(|e| e["held"] == true && e["reason"] == "trace")
        .map(|e| format!("{} {}", e["op"].as_str().unwrap(), e["msg"].as_str().unwrap()))
        .collect();
    holds.sort();
    assert_eq!(
        holds,
        ["Merge 0.0", "Sort 0.0", "Sort 0.1"],
        "both sorts and the followed branch's merge"
    );
    let mut traced_sends: Vec<String> = ev
        .iter()
        .filter(|e| e["event"] == "send" && e["traced"] == true)
        .map(|e| format!("{} {}", e["op"].as_str().unwrap(), e["msg"].as_str().unwrap()))
        .collect();
    traced_sends.sort();
    // The split's two outputs and only the followed branch's sorted chunk; nothing after
    // the merge (untraced there).
    assert_eq!(traced_sends, ["Sort 0.0", "Split 0.0", "Split 0.1"]);
}

#[test]
fn edit_walk_sends_the_chunk_elsewhere() {
    let ev = run(
        &scenario("edit_walk.jsonl"),
        &[],
        "mergesort",
        &["--threads", "4", "--size", "400", "--chunks", "4"],
    );
    assert_eq!(outcome(&ev)["matches_reference"], true);
    assert!(ev.iter().any(|e| e["event"] == "ok" && e["cmd"] == "edit"));
    let recv = ev
        .iter()
        .find(|e| e["event"] == "recv" && e["op"] == "Sort" && e["msg"] == "0.0")
        .unwrap();
    assert_eq!(recv["thread"], "proc[3]");
}

/// Every scenario file runs as its header says (`#! program:`, `#! set:`, `#! expect:`).
#[test]
fn every_shipped_scenario_runs_as_its_header_says() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/scenarios");
    let mut ran = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let header = |key: &str| -> Option<String> {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("#! {key}:")).map(|v| v.trim().to_owned()))
        };
        let program =
            header("program").unwrap_or_else(|| panic!("{} has no `#! program:` line", path.display()));
        let mut words = program.split_whitespace();
        let name = words.next().unwrap().to_owned();
        let args: Vec<&str> = words.collect();
        let sets: Vec<String> = header("set")
            .map(|s| s.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default();
        let expect =
            header("expect").unwrap_or_else(|| panic!("{} has no `#! expect:` line", path.display()));
        let ev = run(&path, &sets, &name, &args);
        assert_eq!(
            outcome(&ev)["matches_reference"].to_string(),
            expect,
            "{}",
            path.display()
        );
        ran += 1;
    }
    assert!(ran >= 4, "only {ran} scenarios found");
}

/// Without the debugger the racy variants almost never show their race (the count is
/// printed for the record; what is asserted is that every run completes and reports).
#[test]
fn racy_variants_run_free_twenty_times() {
    for (program, args) in [("heat", ["--threads", "4"]), ("search", ["--threads", "4"])] {
        let mut wrong = 0;
        for _ in 0..20 {
            let out = Command::new(support::example_bin(program))
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success());
            let line = String::from_utf8_lossy(&out.stdout)
                .lines()
                .last()
                .unwrap()
                .to_owned();
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["matches_reference"] == false {
                wrong += 1;
            }
        }
        println!("{program} {args:?}: {wrong}/20 free runs showed the race");
    }
}

/// The debugger must not hide the race it looks for. `search` with more chunks than
/// threads, chunk 0 without a match: the right answer (chunk 1's) arrives first only if
/// each scan's answer leaves when its step ends. Run free, attached, and attached with a
/// breakpoint that never fires again (on the split, which has run): the outcome's
/// distribution must be the same in the three modes. (Before the delivery rule, a worker's
/// answers waited until it had scanned all its chunks while running free or attached:
/// wrong 5/5 and 3/3; the inert breakpoint delivered them one by one: right 3/3.)
#[test]
fn the_outcome_does_not_depend_on_the_debugger_or_an_inert_breakpoint() {
    const RUNS: usize = 8;
    let args = [
        "--threads",
        "2",
        "--chunks",
        "8",
        "--size",
        "20000",
        "--stagger-us",
        "20000",
    ];
    let dir = std::env::temp_dir().join(format!("racetrack-modes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = |name: &str, extra: &str| {
        let path = dir.join(name);
        let text = format!(
            "{{\"cmd\":\"wait\",\"until\":\"held\",\"timeout_ms\":20000}}\n{extra}\
             {{\"cmd\":\"continue\"}}\n{{\"cmd\":\"wait\",\"until\":\"exit\",\"timeout_ms\":60000}}\n"
        );
        std::fs::write(&path, text).unwrap();
        path
    };
    let attached = script("attached.jsonl", "");
    let inert = script(
        "inert.jsonl",
        "{\"cmd\":\"break\",\"op\":\"Split\",\"thread\":\"main[0]\",\"on\":true}\n",
    );
    let free = || {
        let out = Command::new(support::example_bin("search"))
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success());
        let last = String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap()
            .to_owned();
        serde_json::from_str::<Value>(&last).unwrap()
    };
    let mut right = [0usize; 3];
    // Interleaved, so that a slow phase of the machine weighs on every mode alike.
    for _ in 0..RUNS {
        right[0] += usize::from(free()["matches_reference"] == true);
        right[1] += usize::from(outcome(&run(&attached, &[], "search", &args))["matches_reference"] == true);
        right[2] += usize::from(outcome(&run(&inert, &[], "search", &args))["matches_reference"] == true);
    }
    std::fs::remove_dir_all(&dir).ok();
    println!(
        "right answers of {RUNS}: free {}, attached {}, inert breakpoint {}",
        right[0], right[1], right[2]
    );
    let (lo, hi) = (right.iter().min().unwrap(), right.iter().max().unwrap());
    // Eight runs per mode: a loaded machine may delay a thread past the 20 ms stagger now
    // and then, in any mode; the bias this guards against was 0 against 8. And the answers
    // do leave at the end of their steps: running free is right (it was wrong every time).
    assert!(
        right[0] >= RUNS - 3,
        "running free, {} of {RUNS} answers right: the first scan's answer did not arrive first",
        right[0]
    );
    assert!(
        hi - lo <= 3,
        "right answers of {RUNS} runs: free {}, attached {}, with an inert breakpoint {}",
        right[0],
        right[1],
        right[2]
    );
}
