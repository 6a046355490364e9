//! `move` can move the message a thread is held on at its step start. The merge
//! of `mergesort` is held at its first input while the sorted chunks keep arriving, and
//! the held input is moved to the back at once — as a user or a script does on seeing the
//! held `start`, without a `wait` for the controller to take it in first. The input goes
//! back into the queue behind every chunk that was pending, the merge starts the new head,
//! and the program's result is still right. Real program, real agent, real WebSocket.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{json, Value};
use support::{attached_and_held, cont, is_held, Session};

/// The result of one run: the move was applied (its verdict), and how many chunks the held
/// input went behind, and how many arrived from the hold to the verdict.
struct Run {
    applied: Result<(), String>,
    behind: usize,
    arrivals: usize,
}

fn one_run(run: usize) -> Run {
    let mut s = Session::run(
        "mergesort",
        &[
            "--threads",
            "4",
            "--size",
            "20000",
            "--chunks",
            "16",
            "--jitter-us",
            "3000",
        ],
    );
    attached_and_held(&mut s);
    s.send(json!({"cmd":"break","op":"Merge","thread":"main[0]","on":true}));
    s.send(cont());
    let held = s.expect("the held Merge", |v| {
        v["event"] == "start" && v["op"] == "Merge" && is_held(v)
    });
    let x = held["msg"].as_str().unwrap().to_owned();
    // Chunks the controller printed before the move went out: pending on main[0] (the
    // thread is held), so the moved input must end up behind each of them.
    let before: Vec<String> = s
        .seen
        .iter()
        .filter(|v| {
            v["event"] == "recv" && v["thread"] == "main[0]" && v["op"] == "Merge" && v["msg"] != x.as_str()
        })
        .map(|v| v["msg"].as_str().unwrap().to_owned())
        .collect();
    // At once, numbered: the controller waits for the verdict, which carries the number.
    s.send(json!({"cmd":"move","thread":"main[0]","msg":x,"to":"back","req":1}));
    let answer = s.expect("the move's reply or refusal", |v| {
        (v["event"] == "queue" && v["thread"] == "main[0]") || v["event"] == "error"
    });
    if answer["event"] == "error" {
        s.send(json!({"cmd":"break","op":"Merge","thread":"main[0]","on":false}));
        s.send(cont());
        s.finish_correctly();
        return Run {
            applied: Err(answer.to_string()),
            behind: 0,
            arrivals: 0,
        };
    }
    let verdict = s.expect("the move's verdict", |v| {
        v["req"] == 1 && (v["event"] == "ok" || v["event"] == "error")
    });
    assert_eq!(
        (&verdict["event"], &verdict["cmd"]),
        (&json!("ok"), &json!("reorder")),
        "run {run}: {verdict}"
    );
    let ids: Vec<String> = answer["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();
    let at_x = ids
        .iter()
        .position(|i| *i == x)
        .unwrap_or_else(|| panic!("run {run}: {x} is not back in the queue: {answer}"));
    for k in &before {
        let at_k = ids.iter().position(|i| i == k);
        assert!(
            at_k.is_some_and(|p| p < at_x),
            "run {run}: {k}, pending before the move, is not ahead of {x}: {answer}"
        );
    }
    // The hold at the moved input is over; the merge starts the new head.
    let released = s.expect("the hold's release", |v| {
        v["event"] == "released" && v["event_id"] == held["event_id"]
    });
    assert_eq!(released["thread"], "main[0]");
    let at_hold = s.seen.iter().position(|v| v == &held).unwrap();
    let at_ok = s.seen.iter().position(|v| v == &verdict).unwrap();
    let arrivals = s.seen[at_hold..at_ok]
        .iter()
        .filter(|v| v["event"] == "recv" && v["thread"] == "main[0]")
        .count();

    s.send(json!({"cmd":"break","op":"Merge","thread":"main[0]","on":false}));
    s.send(cont());
    s.finish_correctly();
    // Processed in the new order: every chunk listed ahead of the moved input started
    // (its absorb step) before the input's own, second, start.
    let starts: Vec<&str> = s
        .seen
        .iter()
        .filter(|v| v["event"] == "start" && v["op"] == "Merge" && v["step"] == "absorb")
        .map(|v| v["msg"].as_str().unwrap())
        .collect();
    let last_x = starts.iter().rposition(|m| *m == x).unwrap();
    assert_eq!(
        starts.iter().filter(|m| **m == x).count(),
        2,
        "run {run}: {x} started, went back, started again: {starts:?}"
    );
    for k in &ids[..at_x] {
        let at_k = starts.iter().position(|m| m == k);
        assert!(
            at_k.is_some_and(|p| p < last_x),
            "run {run}: {k} was ahead of {x} but did not start before it: {starts:?}"
        );
    }
    assert!(s.all("error").is_empty(), "run {run}: {:?}", s.all("error"));
    Run {
        applied: Ok(()),
        behind: at_x,
        arrivals,
    }
}

#[test]
fn the_held_input_of_a_merge_moves_to_the_back_while_inputs_arrive() {
    let runs = 20;
    let results: Vec<Run> = (0..runs).map(one_run).collect();
    let refused: Vec<String> = results
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.applied.as_ref().err().map(|e| format!("run {i}: {e}")))
        .collect();
    let applied = runs - refused.len();
    println!("{applied} of {runs} moves of the held input applied");
    assert_eq!(applied, runs, "refused: {refused:#?}");
    let behind: usize = results.iter().map(|r| r.behind).sum();
    let arrivals: usize = results.iter().map(|r| r.arrivals).sum();
    println!("the moved input went behind {behind} chunks over {runs} runs; {arrivals} arrived from a hold to its move's verdict");
    assert!(
        behind > 0,
        "the held input was never behind another chunk: the test did not exercise a put-back"
    );
    assert!(
        arrivals > 0,
        "no chunk arrived while the merge was held: the test did not exercise a filling queue"
    );
}

/// `req` on stdin: the controller's own commands get a verdict carrying it too, and a
/// refused one an `error` carrying it.
#[test]
fn every_stdin_command_may_carry_a_request_number() {
    let mut s = Session::run("farm", &["--threads", "2", "--tasks", "20"]);
    attached_and_held(&mut s);
    // The program stays held at its first step until line 5: nothing ends the session.
    s.send(json!({"cmd":"break","op":"Sum","thread":"main[0]","on":true,"req":1}));
    let ok = s.expect("break's verdict", |v| v["req"] == 1);
    assert_eq!(
        (&ok["event"], &ok["cmd"]),
        (&json!("ok"), &json!("break")),
        "{ok}"
    );
    // Refused by the controller (main[0] is held at Split: no Sum input to move), with
    // its number.
    s.send(json!({"cmd":"move","thread":"main[0]","op":"Sum","req":3}));
    let e = s.expect("move's refusal", |v| v["req"] == 3);
    assert_eq!(e["event"], "error", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("no message pending on main[0] matches"),
        "{e}"
    );
    // Refused by the agent: its `error` carries the number, printed once.
    s.send(json!({"cmd":"pause","thread":"main[7]","on":true,"req":4}));
    let e = s.expect("pause's refusal", |v| v["req"] == 4);
    assert_eq!(e["event"], "error", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("unknown thread `main[7]`"),
        "{e}"
    );
    s.send(json!({"cmd":"continue","req":5}));
    let ok = s.expect("continue's verdict", |v| v["req"] == 5);
    assert_eq!(
        (&ok["event"], &ok["cmd"]),
        (&json!("ok"), &json!("continue")),
        "{ok}"
    );
    s.send(json!({"cmd":"wait","until":"held","thread":"main[0]","op":"Sum","req":6}));
    s.expect("waited", |v| v["event"] == "waited");
    let ok = s.expect("wait's verdict", |v| v["req"] == 6);
    assert_eq!((&ok["event"], &ok["cmd"]), (&json!("ok"), &json!("wait")), "{ok}");
    s.send(json!({"cmd":"break","op":"Sum","thread":"main[0]","on":false}));
    s.send(cont());
    s.send(json!({"cmd":"wait","until":"exit","req":2}));
    let waited = s.expect("waited", |v| v["event"] == "waited");
    assert_eq!(waited["until"], "exit");
    let ok = s.expect("the last wait's verdict", |v| v["req"] == 2);
    assert_eq!((&ok["event"], &ok["cmd"]), (&json!("ok"), &json!("wait")), "{ok}");
    s.close();
    s.finish_correctly();
    let refusals: Vec<Value> = s.all("error");
    assert_eq!(refusals.len(), 2, "one error per refused line: {refusals:?}");
}
