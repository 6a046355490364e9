//! Trace files (`RACETRACK_TRACE`) of real example processes: read back, they hold the
//! events a controller sees of the same run; `racetrack export --perfetto` turns them into
//! trace-event JSON that passes a schema-level check; damaged files are refused by name.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use racetrack_protocol::trace::TraceReader;
use racetrack_protocol::Event;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("racetrack-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Run an example with `RACETRACK_TRACE=trace`; returns its output.
fn traced(example: &str, args: &[&str], trace: &Path, extra_env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(support::example_bin(example));
    cmd.args(args).env("RACETRACK_TRACE", trace);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{example}: {:?}", out.status);
    out
}

/// The last stdout line, the example's report.
fn report(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().expect("a report")).unwrap()
}

/// Events of each kind in a trace file, with the first three events' kinds.
fn trace_counts(trace: &Path) -> (BTreeMap<String, usize>, Vec<String>) {
    let mut reader = TraceReader::open(trace).unwrap();
    let mut counts = BTreeMap::new();
    let mut first = Vec::new();
    let mut last_ns = 0;
    for ev in reader.by_ref() {
        let ev = ev.unwrap();
        assert!(ev.time_ns >= last_ns, "times never decrease");
        last_ns = ev.time_ns;
        let kind = serde_json::to_value(&ev.event).unwrap()["event"]
            .as_str()
            .unwrap()
            .to_owned();
        if first.len() < 3 {
            first.push(kind.clone());
        }
        if matches!(
            ev.event,
            Event::Send(_) | Event::Recv(_) | Event::Start(_) | Event::Stop(_)
        ) {
            *counts.entry(kind).or_insert(0) += 1;
        }
    }
    assert_eq!(reader.warning(), None);
    (counts, first)
}

/// The same run under `racetrack run --ctl`: the events of each kind it saw, counting
/// those before its attach from the snapshot (a pending or running step's message was
/// sent and enqueued; a held start is in `held`), which a trace file has as events.
fn ctl_counts(example: &str, args: &[&str]) -> BTreeMap<String, usize> {
    let mut s = support::Session::run(example, args);
    let snap = support::attached_and_held(&mut s);
    s.send(support::cont());
    s.finish_correctly();
    let mut counts: BTreeMap<String, usize> = ["send", "recv", "start", "stop"]
        .iter()
        .map(|k| ((*k).to_owned(), s.all(k).len()))
        .collect();
    for t in snap["threads"].as_array().unwrap() {
        let pending = t["queue"].as_array().unwrap().len()
            + t["more"].as_u64().unwrap_or(0) as usize
            + usize::from(t["current"].is_object());
        *counts.get_mut("send").unwrap() += pending;
        *counts.get_mut("recv").unwrap() += pending;
    }
    for h in snap["held"].as_array().unwrap() {
        *counts.get_mut(h["event"].as_str().unwrap()).unwrap() += 1;
    }
    counts
}

#[test]
fn a_heat_trace_holds_what_a_controller_sees() {
    let args = ["--fixed", "--threads", "4", "--iters", "6"];
    let trace = scratch("heat-counts.trace");
    let out = traced("heat", &args, &trace, &[("RACETRACK_WAIT", "1")]);
    assert_eq!(report(&out)["matches_reference"], json!(true));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("RACETRACK_WAIT is ignored"), "{stderr}");
    let (counts, first) = trace_counts(&trace);
    assert_eq!(first, ["hello", "structure", "snapshot"]);
    assert_eq!(
        counts,
        ctl_counts("heat", &args),
        "trace file vs racetrack run --ctl"
    );
    assert!(counts["start"] > 100, "{counts:?}");
    assert_eq!(counts["start"], counts["stop"], "every step stopped");
}

/// Run `racetrack export --perfetto TRACE -o OUT`.
fn export(trace: &Path, out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_racetrack"))
        .args(["export", "--perfetto"])
        .arg(trace)
        .arg("-o")
        .arg(out)
        .output()
        .unwrap()
}

/// The schema-level check of a trace-event JSON document; returns its events by phase.
fn check_perfetto(doc: &Value) -> BTreeMap<String, usize> {
    let evs = doc["traceEvents"].as_array().expect("traceEvents");
    let mut phases = BTreeMap::new();
    let mut slices: HashMap<u64, Vec<(f64, f64)>> = HashMap::new();
    let mut flows: HashMap<u64, (u32, u32)> = HashMap::new();
    let mut names: HashMap<u64, u32> = HashMap::new();
    let mut tids = HashSet::new();
    for e in evs {
        let ph = e["ph"].as_str().unwrap_or_else(|| panic!("no ph: {e}"));
        for k in ["pid", "tid", "ts"] {
            assert!(e[k].is_number(), "{k} is not a number: {e}");
        }
        let tid = e["tid"].as_u64().unwrap();
        *phases.entry(ph.to_owned()).or_insert(0) += 1;
        match ph {
            "X" => {
                let dur = e["dur"].as_f64().expect("dur");
                assert!(dur >= 0.0, "{e}");
                assert!(e["name"].is_string(), "{e}");
                slices
                    .entry(tid)
                    .or_default()
                    .push((e["ts"].as_f64().unwrap(), dur));
                tids.insert(tid);
            }
            "s" | "f" => {
                let id = e["id"].as_u64().expect("id");
                let f = flows.entry(id).or_default();
                if ph == "s" {
                    f.0 += 1;
                } else {
                    assert_eq!(e["bp"], "e", "{e}");
                    f.1 += 1;
                }
            }
            "M" if e["name"] == "thread_name" => *names.entry(tid).or_insert(0) += 1,
            "M" => {}
            other => panic!("unexpected phase {other}: {e}"),
        }
    }
    for (tid, mut s) in slices {
        s.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in s.windows(2) {
            // Within rounding to the nanosecond.
            assert!(
                w[1].0 >= w[0].0 + w[0].1 - 1e-3,
                "slices overlap on tid {tid}: {w:?}"
            );
        }
    }
    assert!(
        flows.values().all(|&f| f == (1, 1)),
        "each flow id has one s and one f"
    );
    for tid in tids {
        assert_eq!(names.get(&tid), Some(&1), "one thread_name for tid {tid}");
    }
    phases
}

#[test]
fn a_perfetto_export_of_heat_passes_the_schema_check() {
    let trace = scratch("heat-perfetto.trace");
    traced("heat", &["--threads", "4", "--iters", "6"], &trace, &[]);
    let (counts, _) = trace_counts(&trace);
    let json_path = scratch("heat-perfetto.json");
    let out = export(&trace, &json_path);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&std::fs::read(&json_path).unwrap()).unwrap();
    let phases = check_perfetto(&doc);
    assert_eq!(
        phases["X"],
        counts["stop"] + count_caller_sends(&doc),
        "a slice per step"
    );
    assert!(phases["s"] > 100, "{phases:?}");
    // The default output is the trace with `.json`.
    let out = Command::new(env!("CARGO_BIN_EXE_racetrack"))
        .args(["export", "--perfetto"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(trace.with_extension("json").exists());
}

/// The zero-length slices marking inputs the schedule caller sent.
fn count_caller_sends(doc: &Value) -> usize {
    doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"] == "schedule")
        .count()
}

#[test]
fn damaged_traces_are_refused_by_name() {
    let trace = scratch("damage.trace");
    traced("mergesort", &[], &trace, &[]);
    let good = std::fs::read(&trace).unwrap();
    let out_json = scratch("damage.json");
    let run = |bytes: &[u8]| {
        let p = scratch("damaged.trace");
        std::fs::write(&p, bytes).unwrap();
        export(&p, &out_json)
    };
    let mut bad_magic = good.clone();
    bad_magic[3] ^= 0x20;
    let out = run(&bad_magic);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("byte 0") && err.contains("bad magic"), "{err}");
    // A byte inside the last record's frame (past its head and times) turned to garbage.
    let mut flipped = good.clone();
    let n = flipped.len();
    flipped[n - 3..].copy_from_slice(&[0xff, 0xff, 0xff]);
    let out = run(&flipped);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("trace file, byte "), "{err}");
    // `racetrack open` refuses both before any window opens, by the same names.
    for (bytes, words) in [(&bad_magic, "bad magic"), (&flipped, "trace file, byte ")] {
        let p = scratch("damaged-open.trace");
        std::fs::write(&p, bytes).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_racetrack"))
            .arg("open")
            .arg(&p)
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(words), "{err}");
    }
    // Cut in the last record: every earlier event, and a warning.
    let out = run(&good[..good.len() - 2]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning") && err.contains("stopped while writing"),
        "{err}"
    );
}

#[test]
fn an_unwritable_trace_file_leaves_the_program_untraced() {
    let out = traced("heat", &[], Path::new("/nonexistent-dir/x.trace"), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("cannot write the trace file /nonexistent-dir/x.trace"),
        "{stderr}"
    );
    assert_eq!(report(&out)["matches_reference"], json!(true));
}

/// `racetrack record --full` runs the program with the trace on, passes its output and exit
/// code through, and says where the trace is; without `--full` it writes a replay log.
#[test]
fn record_full_writes_the_trace_of_a_free_run() {
    let trace = scratch("recorded.rtrace");
    let heat = support::example_bin("heat");
    let out = Command::new(env!("CARGO_BIN_EXE_racetrack"))
        .args(["record", "--full", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(&heat)
        .args(["--threads", "2", "--iters", "4"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(report(&out)["matches_reference"], json!(true));
    assert!(err.contains(&format!("trace {}", trace.display())), "{err}");
    let (counts, first) = trace_counts(&trace);
    assert_eq!(first, ["hello", "structure", "snapshot"]);
    assert!(
        counts["start"] > 0 && counts["start"] == counts["stop"],
        "{counts:?}"
    );

    // Without --full: a replay log (tests/replay.rs), not a trace.
    let log = scratch("heat.rtrec");
    let out = Command::new(env!("CARGO_BIN_EXE_racetrack"))
        .args(["record", "-o"])
        .arg(&log)
        .arg("--")
        .arg(&heat)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("replay log"), "{err}");
    assert!(TraceReader::open(&log).is_err(), "a replay log is not a trace");
}
