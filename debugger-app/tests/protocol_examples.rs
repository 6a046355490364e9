//! Every command `docs/PROTOCOL.md` shows is accepted exactly as documented.
//! The command examples are read out of the document (every code span that is a JSON
//! object with a `cmd` field) and each is sent, numbered, to a real controller attached
//! to a real program (`mergesort`, whose operations and threads the examples mostly
//! name): none may be refused as malformed, unknown or missing a field. Those that can
//! apply in the session's state must apply; the others (an event that is not held, an
//! MPI operation in a runtime program) get a clear `error` that says why and change
//! nothing: the program still sorts correctly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{json, Value};
use std::path::Path;
use support::{attached_and_held, Session};

/// The command examples of `docs/PROTOCOL.md`, in document order, each once.
fn documented_commands() -> Vec<String> {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/PROTOCOL.md");
    let text = std::fs::read_to_string(&doc).expect("docs/PROTOCOL.md");
    let mut out: Vec<String> = Vec::new();
    for (i, span) in text.split('`').enumerate() {
        // Odd pieces are inside a code span.
        let span = span.trim();
        if i % 2 == 1 && span.starts_with("{\"cmd\"") && !out.iter().any(|o| o == span) {
            out.push(span.to_owned());
        }
    }
    out
}

/// What a refusal for the shape of a command (rather than for the session's state) says.
const SHAPE_ERRORS: &[&str] = &[
    "malformed JSON",
    "unknown field",
    "missing field",
    "unknown variant",
    "unknown command",
    "invalid type",
    "must be",
    "needs `",
    "bad `",
];

/// Examples that must apply in this session: the program held at its first step (and
/// `proc[1]` paused from the `pause` example on). The rest are refused for the state
/// (named here with why), never for their shape.
fn must_apply(cmd: &Value) -> bool {
    let name = cmd["cmd"].as_str().unwrap();
    match name {
        "continue" => cmd.get("event_id").is_none() && cmd.get("thread").is_none(),
        "break" => cmd["op"] == "Sort",
        "step_mode" | "pause" | "queue" | "ack_all" | "content" | "save_scenario" | "wait" | "detach" => true,
        // Not held (event 42, proc[1] running), an MPI program's (rank[0], MPI_Send),
        // not a replay (take_over), nothing to move or edit at main[0]'s start.
        _ => false,
    }
}

#[test]
fn every_command_example_in_the_protocol_document_is_accepted_as_written() {
    let examples = documented_commands();
    // Every command of the protocol and of the controller is shown at least once.
    let own = ["wait", "move", "edit_field"];
    for name in racetrack_protocol::Command::NAMES.iter().chain(&own) {
        assert!(
            examples
                .iter()
                .any(|e| e.starts_with(&format!("{{\"cmd\":\"{name}\""))),
            "docs/PROTOCOL.md shows no `{name}` command: {examples:#?}"
        );
    }
    // Every example as written, but for where `save_scenario` writes.
    let scenario = std::env::temp_dir().join(format!("racetrack-{}-doc.rtrec", std::process::id()));
    let scenario_s = scenario.display().to_string();
    let mut lines: Vec<Value> = examples
        .iter()
        .map(|e| {
            let e = e.replace("race.rtrec", &scenario_s);
            serde_json::from_str(&e).unwrap_or_else(|err| panic!("not JSON as documented ({err}): {e}"))
        })
        .collect();
    // The ones that let the program run, or end the session, last: the `continue`s, then
    // `detach` with the `wait` for the program's exit (sent together, so that the
    // controller has the wait before the program can end).
    let is_exit_wait = |v: &Value| v["cmd"] == "wait" && v["until"] == "exit";
    let rank = |v: &Value| match v["cmd"].as_str() {
        Some("continue") if must_apply(v) => 1,
        Some("detach") => 2,
        _ if is_exit_wait(v) => 3,
        _ => 0,
    };
    lines.sort_by_key(rank);
    assert!(
        lines.iter().filter(|v| rank(v) >= 2).count() == 2,
        "one detach and one wait until exit: {lines:#?}"
    );

    let mut s = Session::run(
        "mergesort",
        &["--threads", "4", "--size", "4000", "--chunks", "8"],
    );
    attached_and_held(&mut s);
    let mut shape = Vec::new();
    let mut refused = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let req = 100 + n as u64;
        // (the exit wait went out with `detach`, with its own number)
        let mut numbered = line.clone();
        // An example that carries its own number keeps it (its verdict carries it).
        let req = match numbered.get("req").and_then(Value::as_u64) {
            Some(r) => r,
            None => {
                numbered["req"] = json!(req);
                req
            }
        };
        if line["cmd"] == "detach" {
            // With the exit wait after it, in one write.
            let wait = lines.last().unwrap();
            s.send_raw(&format!("{numbered}\n{wait}"));
        } else if !is_exit_wait(line) {
            s.send(numbered);
        }
        let verdict = s.expect(&format!("the verdict of {line}"), |v| {
            v["req"] == req && (v["event"] == "ok" || v["event"] == "error")
        });
        println!("{line} → {verdict}");
        if verdict["event"] == "error" {
            let message = verdict["message"].as_str().unwrap().to_owned();
            if SHAPE_ERRORS.iter().any(|w| message.contains(w)) {
                shape.push(format!("{line}: {message}"));
            } else if must_apply(line) {
                refused.push(format!("{line}: {message}"));
            }
        } else {
            assert!(!must_apply(line) || verdict["event"] == "ok");
        }
        if line["cmd"] == "ack_all" || line["cmd"] == "step_mode" {
            // Not to hold every event of the rest of the run.
            s.send(json!({"cmd": line["cmd"], "on": false}));
        }
    }
    assert!(shape.is_empty(), "refused for their shape: {shape:#?}");
    assert!(refused.is_empty(), "refused though they apply here: {refused:#?}");
    // Detached: the program ran free to its end, and nothing a refused command said
    // changed it.
    assert!(s
        .seen
        .iter()
        .any(|v| v["event"] == "waited" && v["until"] == "exit"));
    s.close();
    s.finish_correctly();
    assert!(scenario.is_file(), "save_scenario wrote {}", scenario.display());
    let _ = std::fs::remove_file(&scenario);
}
