//! Against real processes over a real WebSocket: a `move` is
//! applied while the held thread's queue is still filling (partial reorders), and every
//! command of a scenario that is refused stops the scenario at its line (numbered
//! commands, one verdict each).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Command;
use support::{attached_and_held, cont, is_held, Session};

/// Recvs on `thread` between positions `from` and `to` of `seen`.
fn recvs_between(seen: &[Value], thread: &str, from: usize, to: usize) -> usize {
    seen[from..to]
        .iter()
        .filter(|v| v["event"] == "recv" && v["thread"] == thread)
        .count()
}

fn position(seen: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    seen.iter().position(pred).expect("seen")
}

/// The merge of `farm` is held (a breakpoint on `Sum`) at its first input while the other
/// leaf results keep arriving; a `move` is issued at once, twice (to the back, then to the
/// front). Before partial reorders the controller's full order missed the arrivals and
/// was refused (10 runs out of 10); now every move must be applied, in 20 runs of 20.
#[test]
fn a_move_is_applied_while_the_held_queue_is_still_filling() {
    let runs = 20;
    let mut arrivals_during_moves = 0;
    for run in 0..runs {
        let mut s = Session::run("farm", &["--threads", "4", "--tasks", "40", "--work-us", "3000"]);
        attached_and_held(&mut s);
        s.send(json!({"cmd":"break","op":"Sum","thread":"main[0]","on":true}));
        s.send(cont());
        let held = s.expect("held Sum", |v| {
            v["event"] == "start" && v["op"] == "Sum" && is_held(v)
        });
        let m = held["msg"].as_str().unwrap().to_owned();
        // The controller prints an event before its model takes it: let it see the hold.
        s.send(json!({"cmd":"wait","until":"held","thread":"main[0]","op":"Sum"}));
        s.send(json!({"cmd":"move","thread":"main[0]","msg":m,"to":"back"}));
        let waited = s.expect("waited", |v| v["event"] == "waited");
        // The reorder's reply (the new queue), then its verdict.
        let q = s.expect("the first move's reply", |v| {
            v["event"] == "queue" || v["event"] == "error"
        });
        assert_eq!(
            q["event"], "queue",
            "run {run}: the move to the back was refused: {q}"
        );
        let verdict = s.expect("the first move's verdict", |v| {
            (v["event"] == "ok" && v["cmd"] == "reorder") || v["event"] == "error"
        });
        assert_eq!(
            verdict["event"], "ok",
            "run {run}: the move to the back was refused: {verdict}"
        );
        // The reply lists the queue: the held message went back, behind every message
        // received before the move was sent (and behind those that arrived after the
        // controller looked but before the reorder; later ones are pushed behind it).
        let ids: Vec<&str> = q["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_str().unwrap())
            .collect();
        let at_m = ids
            .iter()
            .position(|i| *i == m)
            .expect("the moved message is listed");
        let at_waited = position(&s.seen, |v| v == &waited);
        for r in &s.seen[..at_waited] {
            if r["event"] == "recv" && r["thread"] == "main[0]" && r["op"] == "Sum" && r["msg"] != m.as_str()
            {
                let k = r["msg"].as_str().unwrap();
                let at_k = ids.iter().position(|i| *i == k);
                assert!(
                    at_k.is_some_and(|p| p < at_m),
                    "run {run}: {k} is not before {m}: {q}"
                );
            }
        }
        let at_hold = position(&s.seen, |v| v == &held);
        let at_ok = position(&s.seen, |v| v == &verdict);
        arrivals_during_moves += recvs_between(&s.seen, "main[0]", at_hold, at_ok);

        // The thread starts the new head and is held again; move the first message
        // back to the front.
        s.send(json!({"cmd":"wait","until":"held","thread":"main[0]","op":"Sum"}));
        s.expect("waited", |v| v["event"] == "waited");
        s.send(json!({"cmd":"move","thread":"main[0]","msg":m,"to":"front"}));
        let q = s.expect("the second move's reply", |v| {
            v["event"] == "queue" || v["event"] == "error"
        });
        assert_eq!(
            q["event"], "queue",
            "run {run}: the move to the front was refused: {q}"
        );
        let verdict = s.expect("the second move's verdict", |v| {
            (v["event"] == "ok" && v["cmd"] == "reorder") || v["event"] == "error"
        });
        assert_eq!(
            verdict["event"], "ok",
            "run {run}: the move to the front was refused: {verdict}"
        );
        assert_eq!(q["messages"][0]["id"], m.as_str(), "run {run}: {q}");
        let next = s.expect("the moved message starts", |v| {
            v["event"] == "start" && v["op"] == "Sum" && is_held(v)
        });
        assert_eq!(next["msg"], m.as_str(), "run {run}");

        s.send(json!({"cmd":"break","op":"Sum","thread":"main[0]","on":false}));
        s.send(cont());
        s.finish_correctly();
        assert!(s.all("error").is_empty(), "run {run}: {:?}", s.all("error"));
    }
    println!("{arrivals_during_moves} leaf results arrived at the held merge from its hold to the first move's reply, over {runs} runs");
    assert!(
        arrivals_during_moves > 0,
        "no result arrived while the merge was held: the test did not exercise a filling queue"
    );
}

/// Run `script` (written to a temporary file) on `program ARGS`; returns (the controller's
/// exit code, every event it printed).
fn scenario(name: &str, script: &str, program: &str, args: &[&str]) -> (Option<i32>, Vec<Value>) {
    let path: PathBuf = std::env::temp_dir().join(format!("racetrack-{}-{name}.jsonl", std::process::id()));
    std::fs::write(&path, script).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_racetrack"))
        .args(["run", "--ctl", "--script"])
        .arg(&path)
        .arg("--")
        .arg(support::example_bin(program))
        .args(args)
        .output()
        .expect("racetrack runs");
    let _ = std::fs::remove_file(&path);
    let events = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    (out.status.code(), events)
}

/// The scenario stopped at `line`: the controller's error names it (after the agent's
/// refusal, which carries the line as its request number), no later line ran, the
/// controller exited 3, and the program still finished (its exit printed).
fn stopped_at(name: &str, code: Option<i32>, ev: &[Value], line: u64, refusal: &str) {
    let dump = || {
        ev.iter()
            .filter(|e| !matches!(e["event"].as_str(), Some("send" | "recv" | "start" | "stop")))
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    };
    let agent = ev
        .iter()
        .find(|e| e["event"] == "error" && e["req"] == line)
        .unwrap_or_else(|| panic!("{name}: no refusal of line {line}:\n{}", dump()));
    assert!(
        agent["message"].as_str().unwrap().contains(refusal),
        "{name}: {agent}"
    );
    let stop = format!("scenario line {line}: ");
    let ours = ev
        .iter()
        .find(|e| e["event"] == "error" && e["message"].as_str().unwrap().starts_with(&stop))
        .unwrap_or_else(|| panic!("{name}: no `{stop}` error:\n{}", dump()));
    let msg = ours["message"].as_str().unwrap();
    assert!(
        msg.contains(refusal) && msg.ends_with("stopping the scenario"),
        "{name}: {msg}"
    );
    assert!(
        !ev.iter().any(|e| e["req"].as_u64().is_some_and(|r| r > line)),
        "{name}: a line after {line} ran:\n{}",
        dump()
    );
    let exit = ev
        .iter()
        .find(|e| e["event"] == "exit")
        .unwrap_or_else(|| panic!("{name}: no exit:\n{}", dump()));
    assert_eq!(exit["code"], 0, "{name}: the program finishes once detached");
    let outcome = ev.last().unwrap();
    assert_eq!(outcome["event"], "outcome", "{name}");
    assert_eq!(code, Some(3), "{name}: the controller exits non-zero (3)");
}

/// Every line before the refused one that went to the agent got its `ok`, numbered.
fn ok_for(name: &str, ev: &[Value], lines: &[u64]) {
    for l in lines {
        assert!(
            ev.iter().any(|e| e["event"] == "ok" && e["req"] == *l),
            "{name}: no ok for line {l}"
        );
    }
}

#[test]
fn a_refused_break_stops_the_scenario() {
    let script = r#"{"cmd":"wait","until":"held","timeout_ms":20000}
# A misspelt operation.
{"cmd":"break","op":"Summ","on":true}
{"cmd":"pause","thread":"main[0]","on":true}
{"cmd":"continue"}
"#;
    let (code, ev) = scenario("break", script, "farm", &["--tasks", "50"]);
    stopped_at("break", code, &ev, 3, "unknown operation `Summ`");
}

#[test]
fn a_refused_reorder_stops_the_scenario() {
    // A partial move first (applied), then a reorder naming a message that is not
    // pending.
    let script = r#"{"cmd":"wait","until":"held","timeout_ms":20000}
{"cmd":"break","op":"Sum","thread":"main[0]","on":true}
{"cmd":"continue"}
{"cmd":"wait","until":"held","thread":"main[0]","op":"Sum","timeout_ms":20000}
{"cmd":"move","thread":"main[0]","op":"Sum","to":"back"}
{"cmd":"wait","until":"held","thread":"main[0]","op":"Sum","timeout_ms":20000}
{"cmd":"reorder","thread":"main[0]","order":["9.9"],"rest":"after"}
{"cmd":"break","op":"Sum","thread":"main[0]","on":false}
{"cmd":"continue"}
"#;
    let (code, ev) = scenario(
        "reorder",
        script,
        "farm",
        &["--threads", "4", "--tasks", "40", "--work-us", "2000"],
    );
    stopped_at("reorder", code, &ev, 7, "`9.9` is not pending");
    ok_for("reorder", &ev, &[2, 3, 5]);
}

#[test]
fn a_refused_edit_stops_the_scenario() {
    // Hold main[0] at its first send and give the chunk a routing field of the wrong type.
    let script = r#"{"cmd":"wait","until":"held","timeout_ms":20000}
{"cmd":"pause","thread":"main[0]","on":true}
{"cmd":"continue"}
{"cmd":"wait","until":"held","thread":"main[0]","event":"send","timeout_ms":20000}
{"cmd":"edit_field","thread":"main[0]","field":"target","value":"not a number"}
{"cmd":"pause","thread":"main[0]","on":false}
{"cmd":"continue"}
"#;
    let (code, ev) = scenario(
        "edit",
        script,
        "mergesort",
        &["--threads", "4", "--size", "400", "--chunks", "4"],
    );
    stopped_at("edit", code, &ev, 5, "not applied");
    ok_for("edit", &ev, &[2, 3]);
}

#[test]
fn a_refused_set_state_stops_the_scenario() {
    let script = r#"{"cmd":"wait","until":"held","timeout_ms":20000}
{"cmd":"break","op":"Work","thread":"proc[1]","on":true}
{"cmd":"continue"}
{"cmd":"wait","until":"held","thread":"proc[1]","op":"Work","timeout_ms":20000}
{"cmd":"state","thread":"proc[1]"}
{"cmd":"set_state","thread":"proc[1]","content":{"tasks_run":"many"}}
{"cmd":"break","op":"Work","thread":"proc[1]","on":false}
{"cmd":"continue"}
"#;
    let (code, ev) = scenario("set_state", script, "farm", &["--threads", "2", "--tasks", "20"]);
    stopped_at("set_state", code, &ev, 6, "set_state of proc[1] not applied");
    // `state` answers its reply, then its verdict.
    ok_for("set_state", &ev, &[2, 3, 5]);
    let st = position(&ev, |e| e["event"] == "state");
    let ok = position(&ev, |e| e["event"] == "ok" && e["req"] == 5);
    assert!(st < ok, "the state comes before its ok");
}
