//! `racetrack-bench --only record`: what recording a replay log costs. Every workload runs
//! without any hook and with `RACETRACK_RECORD`, interleaved, medians; and once with
//! `RACETRACK_TRACE` to count the events a full trace has, against which the log's size
//! is given per event.

use crate::run::{Workload, WORKLOADS};
use racetrack_protocol::launch as env;
use racetrack_protocol::replay_log::ReplayLog;
use racetrack_protocol::trace::TraceReader;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Run `w` with `var=file` (or no variable): its own run time in ms.
fn timed(exe: &str, w: &Workload, var: Option<(&str, &Path)>) -> Result<f64, String> {
    let mut cmd = Command::new(exe);
    cmd.arg("example").arg(w.program).args(w.args);
    for v in [
        env::ENV_LISTEN,
        env::ENV_CONNECT,
        env::ENV_TRACE,
        env::ENV_RECORD,
        env::ENV_REPLAY,
    ] {
        cmd.env_remove(v);
    }
    if let Some((k, v)) = var {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut out = String::new();
    child
        .stdout
        .take()
        .ok_or("no stdout")?
        .read_to_string(&mut out)
        .map_err(|e| e.to_string())?;
    let status = child.wait().map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("exited with {status}"));
    }
    let report: serde_json::Value =
        serde_json::from_str(out.lines().last().unwrap_or("{}")).map_err(|e| e.to_string())?;
    report["elapsed_ms"]
        .as_f64()
        .ok_or_else(|| "no elapsed_ms in the report".into())
}

/// The table: run times with and without recording, and the log's size.
pub(crate) fn recording(exe: &str, reps: usize) {
    println!();
    println!("## recording a replay log (`RACETRACK_RECORD`): run time against no hook, and the log's size");
    println!("(events: those a full trace of the same run has, `RACETRACK_TRACE`; runs: changes of sender, the choices the log records)");
    println!("| workload | no hook ms | recording ms | ratio | log bytes | steps | runs | events | bytes/event | bytes/run |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let dir = std::env::temp_dir().join(format!("racetrack-bench-record-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("racetrack-bench: {}: {e}", dir.display());
        return;
    }
    let (log, trace) = (dir.join("run.rtrec"), dir.join("run.rtrace"));
    for w in WORKLOADS {
        let (mut plain, mut rec) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            match (timed(exe, w, None), timed(exe, w, Some((env::ENV_RECORD, &log)))) {
                (Ok(a), Ok(b)) => {
                    plain.push(a);
                    rec.push(b);
                }
                (Err(e), _) | (_, Err(e)) => eprintln!("{}: {e}", w.name),
            }
        }
        if plain.is_empty() {
            continue;
        }
        let parsed = match ReplayLog::read(&log) {
            Ok(l) => l,
            Err(e) => {
                eprintln!("{}: {e}", w.name);
                continue;
            }
        };
        let bytes = std::fs::metadata(&log).map_or(0, |m| m.len());
        let events = timed(exe, w, Some((env::ENV_TRACE, &trace)))
            .ok()
            .and_then(|_| TraceReader::open(&trace).ok())
            .map(|r| {
                r.filter_map(Result::ok)
                    .filter(|e| {
                        matches!(
                            e.event,
                            racetrack_protocol::Event::Send(_)
                                | racetrack_protocol::Event::Recv(_)
                                | racetrack_protocol::Event::Start(_)
                                | racetrack_protocol::Event::Stop(_)
                        )
                    })
                    .count()
            })
            .unwrap_or(0);
        let (a, b) = (median(plain), median(rec));
        let runs = parsed.runs();
        println!(
            "| {} | {a:.1} | {b:.1} | {:.3} | {bytes} | {} | {runs} | {events} | {:.3} | {:.2} |",
            w.name,
            b / a,
            parsed.steps(),
            bytes as f64 / events.max(1) as f64,
            bytes as f64 / runs.max(1) as f64,
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
