//! The agent's debugging features end to end: real example processes with the agent,
//! controlled by a real `racetrack ctl` over a real WebSocket.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use support::{attached_and_held, cont, is_held, Session};

#[test]
fn start_hold_waits_for_continue_then_farm_completes() {
    let mut s = Session::run("farm", &["--threads", "4", "--tasks", "200"]);
    attached_and_held(&mut s);
    let wait_hold = s.seen.iter().find_map(|v| match v["event"].as_str() {
        Some("snapshot") => v["held"].get(0).cloned(),
        Some("start") if is_held(v) => Some(v.clone()),
        _ => None,
    });
    let wait_hold = wait_hold.expect("the first operation is held");
    assert_eq!(
        (wait_hold["reason"].as_str(), wait_hold["op"].as_str()),
        (Some("wait"), Some("Split")),
        "{wait_hold}"
    );
    // Nothing runs while held: no step starts and no output for a while.
    std::thread::sleep(Duration::from_millis(300));
    s.send(json!({"cmd":"queue","thread":"proc[0]"}));
    s.expect("queue reply", |v| v["event"] == "queue");
    let started: Vec<Value> = s
        .all("start")
        .into_iter()
        .filter(|v| v["reason"] != "wait")
        .collect();
    assert!(started.is_empty(), "a step started before continue: {started:?}");
    assert!(s.all("output").is_empty());
    s.send(cont());
    s.expect("release", |v| v["event"] == "released");
    let (code, last) = s.finish();
    assert_eq!(code, Some(0));
    assert_eq!(last["matches_reference"], true, "{last}");
    let in_snapshot = usize::from(
        s.all("snapshot")[0]["held"]
            .as_array()
            .is_some_and(|h| !h.is_empty()),
    );
    assert_eq!(
        s.all("start").len() + in_snapshot,
        1 + 200 + 200 + 1,
        "every step is reported"
    );
}

#[test]
fn a_wait_the_last_events_satisfy_is_answered_before_exit() {
    // The matching event comes in the program's last frame, just before the connection
    // closes: the answers must not lose the race with `exit` (under `run --ctl` the first
    // one lost it in every run, `exit` printed and the process gone before the wait looked
    // at the last events). Two waits sent together: the session does not end between
    // them. Under `run --ctl` and under `ctl URL`, several runs each, to give the race its
    // chances.
    let args = ["--threads", "4", "--tasks", "2000", "--work-us", "1"];
    for run in 0..6 {
        let launched = run % 2 == 0;
        let prog = (!launched).then(|| support::Program::start("farm", &args, &[("RACETRACK_WAIT", "1")]));
        let mut s = match &prog {
            None => Session::run("farm", &args),
            Some(p) => Session::ctl(&p.url),
        };
        attached_and_held(&mut s);
        s.send(cont());
        s.send_raw(concat!(
            r#"{"cmd":"wait","until":"event","match":{"event":"stop","step":"final"},"timeout_ms":30000}"#,
            "\n",
            r#"{"cmd":"wait","until":"exit","timeout_ms":30000}"#,
            "\n"
        ));
        match prog {
            None => s.finish_correctly(),
            Some(p) => {
                let (_, report) = p.finish(Duration::from_secs(30));
                assert_eq!(report["matches_reference"], true, "{report}");
                s.finish();
            }
        }
        let at = |pred: &dyn Fn(&Value) -> bool| s.seen.iter().position(pred);
        let waited =
            |until: &'static str| at(&move |v: &Value| v["event"] == "waited" && v["until"] == until);
        let exit = at(&|v| v["event"] == "exit");
        for until in ["event", "exit"] {
            assert!(
                waited(until).is_some() && waited(until) < exit,
                "run {run} (launched: {launched}): `waited {until}` ({:?}) before exit ({exit:?}); last lines:\n{}",
                waited(until),
                s.tail(5)
            );
        }
        assert!(s.all("error").is_empty(), "{:?}", s.all("error"));
    }
}

#[test]
fn wait_until_event_counts_since_the_previous_command_or_since_continue() {
    // The event a scenario waits for may come before a later command goes out (heat's
    // neighbour served before the `move`): by default it no longer counts, with
    // `"since":"continue"` it does.
    let mut s = Session::run("farm", &["--threads", "2", "--tasks", "20"]);
    attached_and_held(&mut s);
    s.send(json!({"cmd":"break","op":"Work","thread":"proc[0]","on":true}));
    s.send(cont());
    let held = s.expect("proc[0] held at Work", |v| {
        v["event"] == "start" && is_held(v) && v["op"] == "Work" && v["thread"] == "proc[0]"
    });
    let recv = json!({"event":"recv","thread":"proc[0]","msg":held["msg"]});
    // The recv of the held message came before the hold; a command is sent after it.
    s.send(json!({"cmd":"queue","thread":"proc[0]"}));
    s.expect("queue reply", |v| v["event"] == "queue");
    let reply = |s: &mut Session| s.expect("an answer", |v| v["event"] == "waited" || v["event"] == "error");
    s.send(json!({"cmd":"wait","until":"event","match":recv,"timeout_ms":500}));
    let default = reply(&mut s);
    assert!(
        default["event"] == "error" && default["message"].as_str().unwrap().contains("timed out"),
        "an event before the previous command does not count by default: {default}"
    );
    s.send(json!({"cmd":"wait","until":"event","match":recv,"since":"continue","timeout_ms":5000}));
    let since = reply(&mut s);
    assert_eq!(since["event"], "waited", "since the continue, it counts: {since}");
    // Bad `since` values get a clear error.
    s.send(json!({"cmd":"wait","until":"event","match":recv,"since":"start"}));
    let bad = reply(&mut s);
    assert!(
        bad["event"] == "error"
            && bad["message"]
                .as_str()
                .unwrap()
                .contains("unknown `since` value \"start\""),
        "{bad}"
    );
    s.send(json!({"cmd":"wait","until":"held","since":"continue"}));
    let misplaced = reply(&mut s);
    assert!(
        misplaced["event"] == "error"
            && misplaced["message"]
                .as_str()
                .unwrap()
                .contains("only for until event"),
        "{misplaced}"
    );
    s.send(json!({"cmd":"break","op":"Work","thread":"proc[0]","on":false}));
    s.send(cont());
    s.finish_correctly();
}

#[test]
fn global_step_releases_one_event_per_thread_in_consistent_order() {
    let mut s = Session::run("mergesort", &["--threads", "2", "--size", "64", "--chunks", "4"]);
    attached_and_held(&mut s);
    s.send(json!({"cmd":"step_mode","on":true}));
    s.send(cont());
    let mut outstanding: HashMap<String, u64> = HashMap::new();
    let mut continues = 0;
    while let Some(v) = s.next_or_exit(|v| is_held(v) || v["event"] == "released") {
        let thread = v["thread"].as_str().unwrap_or_default().to_owned();
        if v["event"] == "released" {
            outstanding.remove(&thread);
            continue;
        }
        assert_eq!(v["reason"], "step", "{v}");
        // A thread never has two held events: a continue releases at most one per thread.
        assert!(
            outstanding
                .insert(thread.clone(), v["event_id"].as_u64().unwrap())
                .is_none(),
            "{thread} held twice"
        );
        s.send(cont());
        continues += 1;
        assert!(continues < 1000, "stepping does not end");
    }
    s.finish_correctly();
    assert!(continues > 20, "only {continues} steps");
    // Per thread: recv before the start consuming it; start and stop alternate. What the
    // snapshot showed (queued or already taken) needs no recv; a step already taken when
    // the debugger attached may have its start reported just after the snapshot.
    let snap = s.all("snapshot")[0].clone();
    let mut known: HashSet<(String, String, String)> = HashSet::new();
    let mut taken: HashMap<String, String> = HashMap::new();
    for t in snap["threads"].as_array().unwrap() {
        let name = t["thread"].as_str().unwrap().to_owned();
        for m in t["queue"].as_array().unwrap() {
            known.insert((
                name.clone(),
                m["op"].as_str().unwrap().to_owned(),
                m["id"].to_string(),
            ));
        }
        if let Some(c) = t.get("current") {
            known.insert((
                name.clone(),
                c["op"].as_str().unwrap().to_owned(),
                c["msg"].to_string(),
            ));
            taken.insert(name, c["msg"].to_string());
        }
    }
    let mut in_step: HashMap<String, bool> = taken.keys().map(|t| (t.clone(), true)).collect();
    for v in &s.seen {
        let t = v["thread"].as_str().unwrap_or_default().to_owned();
        let key = (
            t.clone(),
            v["op"].as_str().unwrap_or_default().to_owned(),
            v["msg"].to_string(),
        );
        match v["event"].as_str().unwrap() {
            "recv" => {
                known.insert(key);
            }
            "start" => {
                if v["step"] != "final" {
                    assert!(known.contains(&key), "start before its recv: {v}");
                }
                if taken.get(&t) == Some(&v["msg"].to_string()) {
                    taken.remove(&t); // the start of the step the snapshot showed taken
                    continue;
                }
                taken.remove(&t);
                assert!(
                    !in_step.insert(t, true).unwrap_or(false),
                    "two starts without a stop: {v}"
                );
            }
            "stop" => {
                taken.remove(&t);
                assert!(
                    in_step.insert(t, false).unwrap_or(false),
                    "stop without start: {v}"
                );
            }
            _ => {}
        }
    }
}

#[test]
fn breakpoint_holds_only_its_operation_and_thread() {
    let mut s = Session::run(
        "mergesort",
        &["--threads", "4", "--size", "200000", "--chunks", "16"],
    );
    attached_and_held(&mut s);
    s.send(json!({"cmd":"break","op":"Sort","thread":"proc[2]","on":true}));
    s.send(cont());
    let mut hits = 0;
    while let Some(h) = s.next_or_exit(is_held) {
        assert_eq!(
            (&h["event"], &h["op"], &h["thread"], &h["reason"]),
            (
                &json!("start"),
                &json!("Sort"),
                &json!("proc[2]"),
                &json!("break")
            ),
            "{h}"
        );
        hits += 1;
        if hits == 1 {
            // Other threads keep running while proc[2] is held: all twelve of their sorts
            // finish (some may have before the hold).
            let others_sorted = |s: &Session| {
                s.all("stop")
                    .iter()
                    .filter(|v| v["op"] == "Sort" && v["thread"] != "proc[2]")
                    .count()
            };
            while others_sorted(&s) < 12 {
                s.expect("another thread's sort", |v| {
                    v["event"] == "stop" && v["op"] == "Sort" && v["thread"] != "proc[2]"
                });
            }
            assert_eq!(others_sorted(&s), 12, "and no more");
        }
        s.send(json!({"cmd":"continue","event_id":h["event_id"]}));
    }
    assert_eq!(hits, 4, "chunks 2, 6, 10 and 14 are sorted on proc[2]");
    s.finish_correctly();
}

#[test]
fn a_hit_count_holds_from_the_threads_nth_start_on() {
    let mut s = Session::run(
        "mergesort",
        &["--threads", "4", "--size", "200000", "--chunks", "16"],
    );
    attached_and_held(&mut s);
    s.send(json!({"cmd":"break","op":"Sort","thread":"proc[2]","on":true,"when":{"tag":1}}));
    let e = s.expect("the refusal", |v| v["event"] == "error");
    assert_eq!(
        e["message"],
        "break: a condition on `tag` needs MPI calls: this program's steps carry no call parameters"
    );
    s.send(json!({"cmd":"break","op":"Sort","thread":"proc[2]","on":true,"hit":3}));
    s.send(cont());
    let mut held = Vec::new();
    while let Some(h) = s.next_or_exit(is_held) {
        assert_eq!(
            (&h["event"], &h["op"], &h["thread"], &h["reason"]),
            (
                &json!("start"),
                &json!("Sort"),
                &json!("proc[2]"),
                &json!("break")
            ),
            "{h}"
        );
        held.push(h["msg"].clone());
        s.send(json!({"cmd":"continue","event_id":h["event_id"]}));
    }
    let sorts: Vec<Value> = s
        .all("start")
        .iter()
        .filter(|v| v["op"] == "Sort" && v["thread"] == "proc[2]")
        .map(|v| v["msg"].clone())
        .collect();
    assert_eq!(sorts.len(), 4, "chunks 2, 6, 10 and 14 are sorted on proc[2]");
    assert_eq!(held, sorts[2..], "its 3rd and 4th sorts hold, not the first two");
    s.finish_correctly();
}

#[test]
fn tracing_from_the_first_split_holds_every_consumer() {
    let mut s = Session::run("mergesort", &["--threads", "2", "--size", "100", "--chunks", "3"]);
    attached_and_held(&mut s);
    s.send(json!({"cmd":"break","op":"Split","thread":"main[0]","on":true,"trace":true}));
    s.send(cont());
    let mut traced_holds = Vec::new();
    while let Some(h) = s.next_or_exit(is_held) {
        assert_eq!(h["reason"], "trace", "{h}");
        traced_holds.push(format!(
            "{}:{}",
            h["op"].as_str().unwrap(),
            h["msg"].as_str().unwrap()
        ));
        s.send(json!({"cmd":"continue","event_id":h["event_id"]}));
    }
    s.finish_correctly();
    traced_holds.sort();
    assert_eq!(
        traced_holds,
        [
            "Merge:0.0",
            "Merge:0.1",
            "Merge:0.2",
            "Sort:0.0",
            "Sort:0.1",
            "Sort:0.2"
        ]
    );
    // Outputs of traced steps are traced; so are the split's.
    for send in s.all("send") {
        if send["op"] == "Split" || send["op"] == "Sort" {
            assert_eq!(send["traced"], true, "{send}");
        }
    }
}

#[test]
fn reorder_at_a_held_start_puts_the_message_back_and_starts_the_new_head() {
    let mut s = Session::run("farm", &["--threads", "2", "--tasks", "10"]);
    attached_and_held(&mut s);
    s.send(json!({"cmd":"break","op":"Work","thread":"proc[0]","on":true}));
    s.send(cont());
    let h = s.expect("held Work start", is_held);
    assert_eq!(
        (h["op"].as_str(), h["msg"].as_str()),
        (Some("Work"), Some("0.0")),
        "{h}"
    );
    s.send(json!({"cmd":"wait","until":"queue","thread":"proc[0]","count":4}));
    s.expect("waited", |v| v["event"] == "waited");
    // A reorder that is not a permutation is refused and changes nothing.
    s.send(json!({"cmd":"reorder","thread":"proc[0]","order":["0.4","0.0"]}));
    let e = s.expect("error", |v| v["event"] == "error");
    assert!(e["message"].as_str().unwrap().contains("missing"), "{e}");
    // An extra id, and a duplicate, are refused the same way.
    s.send(json!({"cmd":"reorder","thread":"proc[0]","order":["0.4","0.0","0.2","0.6","0.8","0.9"]}));
    let e = s.expect("error", |v| v["event"] == "error");
    assert!(
        e["message"].as_str().unwrap().contains("`0.9` is not pending"),
        "{e}"
    );
    s.send(json!({"cmd":"reorder","thread":"proc[0]","order":["0.4","0.4","0.0","0.2","0.6","0.8"]}));
    let e = s.expect("error", |v| v["event"] == "error");
    assert!(e["message"].as_str().unwrap().contains("twice"), "{e}");
    s.send(json!({"cmd":"reorder","thread":"proc[0]","order":["0.4","0.0","0.2","0.6","0.8"]}));
    // The new queue, then the verdict.
    let q = s.expect("queue", |v| v["event"] == "queue");
    s.expect("ok", |v| v["event"] == "ok" && v["cmd"] == "reorder");
    let ids: Vec<&str> = q["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["0.4", "0.0", "0.2", "0.6", "0.8"]);
    s.expect("the put-back start is released", |v| {
        v["event"] == "released" && v["event_id"] == h["event_id"]
    });
    let next = s.expect("next start on proc[0]", |v| {
        v["event"] == "start" && v["thread"] == "proc[0]"
    });
    assert_eq!(
        (next["msg"].as_str(), next["held"].as_bool()),
        (Some("0.4"), Some(true)),
        "the new head starts: {next}"
    );
    s.send(json!({"cmd":"break","op":"Work","thread":"proc[0]","on":false}));
    s.send(cont());
    s.finish_correctly();
    let order: Vec<String> = s
        .all("start")
        .iter()
        .filter(|v| v["thread"] == "proc[0]" && v["op"] == "Work")
        .map(|v| v["msg"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(order, ["0.0", "0.4", "0.0", "0.2", "0.6", "0.8"]);
}

#[test]
fn edit_changes_where_a_message_goes_and_bad_edits_are_refused() {
    let mut s = Session::run("mergesort", &["--threads", "4", "--size", "400", "--chunks", "4"]);
    attached_and_held(&mut s);
    s.send(json!({"cmd":"pause","thread":"main[0]","on":true}));
    s.send(cont());
    let h = s.expect("held send", |v| is_held(v) && v["event"] == "send");
    assert_eq!(
        (h["msg"].as_str(), h["to_thread"].as_str(), h["reason"].as_str()),
        (Some("0.0"), Some("proc[0]"), Some("pause"))
    );
    let mut content = h["content"].clone();
    assert_eq!(content["target"], 0, "{content}");
    s.send(json!({"cmd":"edit","event_id":h["event_id"],"content":{"target":"three"}}));
    let e = s.expect("error", |v| v["event"] == "error");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("does not deserialize as Chunk"),
        "{e}"
    );
    content["target"] = json!(3);
    s.send(json!({"cmd":"edit","event_id":h["event_id"],"content":content}));
    s.expect("ok", |v| v["event"] == "ok" && v["cmd"] == "edit");
    s.send(json!({"cmd":"pause","thread":"main[0]","on":false}));
    s.send(cont());
    let r = s.expect("recv of 0.0", |v| {
        v["event"] == "recv" && v["msg"] == "0.0" && v["op"] == "Sort"
    });
    assert_eq!(r["thread"], "proc[3]", "the edited target routes it to proc[3]");
    s.finish_correctly();
}

#[test]
fn state_get_and_set_on_a_suspended_heat_thread() {
    let mut s = Session::run(
        "heat",
        &["--fixed", "--threads", "3", "--iters", "3", "--cells", "12"],
    );
    attached_and_held(&mut s);
    s.send(json!({"cmd":"state","thread":"proc[1]"}));
    let e = s.expect("error", |v| v["event"] == "error");
    assert!(e["message"].as_str().unwrap().contains("running"), "{e}");
    s.send(json!({"cmd":"break","op":"Update","thread":"proc[1]","on":true}));
    s.send(cont());
    let h = s.expect("held Update", is_held);
    assert_eq!(
        (h["op"].as_str(), h["thread"].as_str()),
        (Some("Update"), Some("proc[1]"))
    );
    s.send(json!({"cmd":"state","thread":"proc[1]"}));
    let st = s.expect("state", |v| v["event"] == "state");
    let mut state = st["content"].clone();
    assert_eq!(state["cells"].as_array().unwrap().len(), 4, "{state}");
    s.send(json!({"cmd":"set_state","thread":"proc[1]","content":{"cells":"not a list"}}));
    let e = s.expect("error", |v| v["event"] == "error");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("set_state of proc[1] not applied"),
        "{e}"
    );
    for c in state["cells"].as_array_mut().unwrap() {
        *c = json!(c.as_f64().unwrap() + 1000.0);
    }
    s.send(json!({"cmd":"set_state","thread":"proc[1]","content":state}));
    s.expect("ok", |v| v["event"] == "ok" && v["cmd"] == "set_state");
    s.send(json!({"cmd":"break","op":"Update","thread":"proc[1]","on":false}));
    s.send(cont());
    let (code, last) = s.finish();
    assert_eq!(code, Some(0));
    assert_eq!(
        last["matches_reference"], false,
        "the edited state must change the result: {last}"
    );
    let (got, want) = (
        last["result"]["sum"].as_f64().unwrap(),
        last["reference"]["sum"].as_f64().unwrap(),
    );
    assert!(got > want + 3000.0, "{got} vs {want}");
}

#[test]
fn late_attach_gets_a_consistent_snapshot() {
    let prog = support::Program::start(
        "farm",
        &["--threads", "2", "--tasks", "12000", "--work-us", "300"],
        &[],
    );
    let url = prog.url.clone();
    std::thread::sleep(Duration::from_millis(200));
    let mut s = Session::ctl(&url);
    let snap = s.expect("snapshot", |v| v["event"] == "snapshot");
    // A second debugger is refused with the reason.
    let mut second = Session::ctl(&url);
    let refusal = second.expect("refusal", |v| v["event"] == "error");
    assert!(
        refusal["message"].as_str().unwrap().contains("already attached"),
        "{refusal}"
    );
    // Replay the stream over the snapshot: nothing may refer to the unknown.
    let mut queues: HashMap<String, Vec<(String, String)>> = HashMap::new();
    let mut running: HashMap<String, bool> = HashMap::new();
    for t in snap["threads"].as_array().unwrap() {
        let name = t["thread"].as_str().unwrap().to_owned();
        let q = t["queue"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["id"].as_str().unwrap().to_owned(),
                    m["op"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        queues.insert(name.clone(), q);
        if let Some(c) = t.get("current") {
            // Taken from the queue: its start may or may not have been reported yet.
            queues.get_mut(&name).unwrap().insert(
                0,
                (
                    c["msg"].as_str().unwrap().to_owned(),
                    c["op"].as_str().unwrap().to_owned(),
                ),
            );
            running.insert(name, true);
        }
    }
    let next_id = snap["next_event_id"].as_u64().unwrap();
    // Steps started after the attach, per thread and message.
    let mut started: HashSet<(String, String)> = HashSet::new();
    let mut checked = 0;
    while checked < 3000 {
        let v = s.expect("event", |v| v.get("event_id").is_some());
        assert!(v["event_id"].as_u64().unwrap() >= next_id, "{v}");
        let t = v["thread"].as_str().unwrap_or_default().to_owned();
        let msg = (
            v["msg"].as_str().unwrap_or_default().to_owned(),
            v["op"].as_str().unwrap_or_default().to_owned(),
        );
        match v["event"].as_str().unwrap() {
            "recv" => queues.entry(t).or_default().push(msg),
            "start" if v["step"] != "final" => {
                let q = queues.entry(t.clone()).or_default();
                let i = q
                    .iter()
                    .position(|m| *m == msg)
                    .unwrap_or_else(|| panic!("start of a message never announced: {v}"));
                q.remove(i);
                started.insert((t.clone(), msg.0.clone()));
                running.insert(t, true);
            }
            "start" => {
                running.insert(t, true);
            }
            "stop" => assert_eq!(
                running.insert(t, false),
                Some(true),
                "stop of a step never announced: {v}"
            ),
            // Outside a step: an output the thread gathered before the attach, delivered
            // now (a leaf's output keeps its input's id: that step was never seen).
            "send" => assert!(
                running.get(&t) == Some(&true) || !started.contains(&(t.clone(), msg.0.clone())),
                "send outside a known step: {v}"
            ),
            _ => {}
        }
        checked += 1;
    }
    s.close();
    let exit = s.expect("exit", |v| v["event"] == "exit");
    assert!(exit.get("code").is_none() || exit["code"].is_null() || exit["code"] == 0);
    let (_, last) = prog.finish(Duration::from_secs(30));
    assert_eq!(last["matches_reference"], true, "{last}");
}

#[test]
fn ack_every_event_mode_round_trips_each_event_and_stays_correct() {
    let mut s = Session::run("farm", &["--threads", "2", "--tasks", "50"]);
    attached_and_held(&mut s);
    s.send(json!({"cmd":"ack_all","on":true}));
    s.send(cont());
    s.finish_correctly();
    let held: Vec<Value> = s
        .seen
        .iter()
        .filter(|v| is_held(v) && v["reason"] == "ack_all")
        .cloned()
        .collect();
    // Every send, start and stop after the switch waits for the controller's ack.
    assert!(
        held.len() >= 3 * 50 * 2,
        "only {} events were acknowledged",
        held.len()
    );
    let released: HashSet<u64> = s
        .all("released")
        .iter()
        .map(|v| v["event_id"].as_u64().unwrap())
        .collect();
    assert!(held
        .iter()
        .all(|h| released.contains(&h["event_id"].as_u64().unwrap())));
}

#[test]
fn detach_releases_every_hold_and_the_program_runs_free() {
    let mut s = Session::run(
        "mergesort",
        &["--threads", "4", "--size", "1000", "--chunks", "8"],
    );
    attached_and_held(&mut s);
    s.send(json!({"cmd":"break","op":"Sort","on":true}));
    s.send(json!({"cmd":"step_mode","on":false}));
    s.send(cont());
    s.expect("a held Sort", |v| is_held(v) && v["op"] == "Sort");
    s.send(json!({"cmd":"detach"}));
    s.finish_correctly();
}

#[test]
fn bad_commands_get_errors_and_change_nothing() {
    let mut s = Session::run("farm", &["--threads", "2", "--tasks", "20"]);
    attached_and_held(&mut s);
    let cases = [
        ("{not json", "malformed JSON"),
        (r#"{"cmd":"explode"}"#, "unknown command `explode`"),
        (r#"{"cmd":"step_mode","on":"yes"}"#, "invalid type"),
        (
            r#"{"cmd":"break","op":"Nope","on":true}"#,
            "unknown operation `Nope`",
        ),
        (
            r#"{"cmd":"break","op":"Work","thread":"main[0]","on":true}"#,
            "runs on collection `proc`",
        ),
        (
            r#"{"cmd":"pause","thread":"proc[9]","on":true}"#,
            "unknown thread `proc[9]`",
        ),
        (
            r#"{"cmd":"continue","event_id":999999}"#,
            "event 999999 is not held",
        ),
        (r#"{"cmd":"edit","event_id":999999,"content":{}}"#, "is not held"),
        (r#"{"cmd":"reorder","thread":"proc[1]","order":[]}"#, "is running"),
        (
            r#"{"cmd":"set_state","thread":"proc[1]","content":{}}"#,
            "is running",
        ),
        (r#"{"cmd":"wait","until":"never"}"#, "unknown `until`"),
    ];
    for (line, want) in cases {
        let stdin_line: Value = serde_json::from_str(line).unwrap_or(Value::Null);
        if stdin_line.is_null() {
            s.send_raw(line);
        } else {
            s.send(stdin_line);
        }
        let e = s.expect("error", |v| v["event"] == "error");
        assert!(e["message"].as_str().unwrap().contains(want), "{line} → {e}");
    }
    // The start hold is still there and the program still completes correctly.
    s.send(cont());
    s.finish_correctly();
}

/// What a raw client saw of a run.
struct RawRun {
    /// Text frames and binary frames that carried the `Work` leaf's events.
    texts: usize,
    bins: usize,
    /// Every event of the `Work` leaf as kind and message id, sorted.
    work: Vec<(String, String)>,
    /// Every numbered event, in order.
    numbered: Vec<serde_json::Value>,
}

/// One run of a farm (`args`) watched by a raw WebSocket client that asks for binary
/// packed frames or not, and continues the start hold. Events before the start hold may
/// come before the attach or after it; the leaf's all come after.
fn raw_client_run(binary: bool, args: &[&str]) -> RawRun {
    use racetrack_protocol::{Decoded, Decoder, BINARY_HEADER};
    use tokio_tungstenite::tungstenite::{self, client::IntoClientRequest, stream::MaybeTlsStream, Message};
    let prog = support::Program::start("farm", args, &[("RACETRACK_WAIT", "1")]);
    let mut req = prog.url.as_str().into_client_request().unwrap();
    if binary {
        req.headers_mut().insert(BINARY_HEADER, "binary".parse().unwrap());
    }
    let (mut ws, _) = tungstenite::connect(req).unwrap();
    if let MaybeTlsStream::Plain(s) = ws.get_ref() {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    }
    let mut d = Decoder::default();
    let (mut texts, mut bins, mut seen, mut numbered) = (0, 0, Vec::new(), Vec::new());
    loop {
        let (text, decoded) = match ws.read() {
            Ok(Message::Text(t)) => (true, d.decode_frame(&t)),
            Ok(Message::Binary(b)) => (false, d.decode_binary(&b)),
            Ok(Message::Close(_)) | Err(tungstenite::Error::ConnectionClosed) => break,
            Ok(_) => continue,
            Err(e) => panic!("reading from the agent: {e}"),
        };
        let events = match decoded.expect("every frame decodes") {
            Decoded::Events(evs) => evs,
            Decoded::Packed(names, ps) => ps.into_iter().map(|p| names.expand(p).unwrap()).collect(),
        };
        let work = |ev: &racetrack_protocol::Event| serde_json::to_value(ev).unwrap()["op"] == "Work";
        if events.iter().any(work) {
            *(if text { &mut texts } else { &mut bins }) += 1;
        }
        for ev in events {
            let v = serde_json::to_value(&ev).unwrap();
            // The start hold: in the snapshot if the program got there first, else
            // streamed after it.
            let snapshot_hold =
                v["event"] == "snapshot" && v["held"].as_array().is_some_and(|h| !h.is_empty());
            if snapshot_hold || is_held(&v) {
                ws.send(Message::Text(cont().to_string().into())).unwrap();
            }
            if ev.event_id().is_some() {
                if v["op"] == "Work" {
                    let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
                    seen.push((s("event"), s("msg")));
                }
                numbered.push(v);
            }
        }
    }
    let (_, report) = prog.finish(Duration::from_secs(30));
    assert_eq!(report["matches_reference"], true);
    seen.sort();
    RawRun {
        texts,
        bins,
        work: seen,
        numbered,
    }
}

/// A text client gets every streamed event as JSON in `batch` frames; one that asks for
/// binary gets the same events in binary packed frames.
#[test]
fn streamed_events_are_json_text_unless_the_debugger_asks_for_binary() {
    let args = ["--threads", "2", "--tasks", "300"];
    let RawRun {
        texts,
        bins,
        work: as_text,
        ..
    } = raw_client_run(false, &args);
    assert!(
        texts > 0 && bins == 0,
        "the leaf's events in {texts} text frames, {bins} binary"
    );
    let RawRun {
        texts,
        bins,
        work: as_binary,
        ..
    } = raw_client_run(true, &args);
    assert!(
        texts == 0 && bins > 0,
        "the leaf's events in {texts} text frames, {bins} binary"
    );
    // 300 tasks: a recv, start, stop and send at the leaf for each.
    assert_eq!(as_text.len(), 4 * 300);
    let differ = as_text.iter().zip(&as_binary).find(|(a, b)| a != b);
    assert!(
        as_text.len() == as_binary.len() && differ.is_none(),
        "the same events either way: {} and {} events, first difference {differ:?}",
        as_text.len(),
        as_binary.len()
    );
}

/// Attached in free run (nothing can hold), messages travel in batches and the stream still
/// tells every message's send, receive, start and stop, in that order, numbered without a
/// gap, with receive positions a debugger can follow: inserting each message at its
/// position and removing it at its start, every worker starts its queue's head.
#[test]
fn a_free_run_stream_tells_every_batched_message_in_order() {
    let run = raw_client_run(true, &["--threads", "4", "--tasks", "5000"]);
    let ids: Vec<u64> = run
        .numbered
        .iter()
        .filter_map(|v| v["event_id"].as_u64())
        .collect();
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "numbered without a gap");
    let mut kinds: HashMap<(String, String), String> = HashMap::new();
    let mut queues: HashMap<String, Vec<String>> = HashMap::new();
    for v in &run.numbered {
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
        let (kind, msg) = (s("event"), s("msg"));
        let op = if kind == "send" { s("to_op") } else { s("op") };
        // The split's input (its start is the start hold, which may come before the
        // attach), the merge's final step and its output to the caller.
        if op == "Split" || op.is_empty() || v["step"] == "final" {
            continue;
        }
        let k = kinds.entry((op.clone(), msg.clone())).or_default();
        k.push_str(&kind);
        k.push(' ');
        if op != "Work" {
            continue;
        }
        let q = queues.entry(s("thread")).or_default();
        match kind.as_str() {
            "recv" => {
                let at = usize::try_from(v["position"].as_u64().unwrap()).unwrap();
                q.insert(at.min(q.len()), msg);
            }
            "start" => {
                assert_eq!(
                    q.first(),
                    Some(&msg),
                    "{} starts {msg}, its queue's head is {:?}",
                    s("thread"),
                    q.first()
                );
                q.remove(0);
            }
            _ => {}
        }
    }
    let left: Vec<(&String, usize)> = queues
        .iter()
        .map(|(t, q)| (t, q.len()))
        .filter(|(_, n)| *n > 0)
        .collect();
    assert!(left.is_empty(), "never started: {left:?}");
    // 5000 tasks and their results (the sum goes back to the caller: no receive).
    assert_eq!(kinds.len(), 2 * 5000);
    let odd: Vec<_> = kinds
        .iter()
        .filter(|(_, k)| k.as_str() != "send recv start stop ")
        .take(3)
        .collect();
    assert!(odd.is_empty(), "send, recv, start, stop for each: {odd:?}");
}

/// A step that schedules a graph whose messages come back to busy workers can never end:
/// the debugger is told which threads wait in which steps, and for what (a runtime
/// deadlock, with a cycle; told again as more get stuck), and the program is left as it
/// is. The same program with its refinement on a collection of its own finishes, and
/// nothing is told.
#[test]
fn a_nested_schedule_onto_busy_workers_is_told_a_deadlock() {
    let mut s = Session::run("nested", &["--threads", "3", "--tasks", "6", "--on-workers"]);
    let pid = s.expect("hello", |v| v["event"] == "hello")["pid"]
        .as_i64()
        .unwrap();
    attached_and_held(&mut s);
    s.send(cont());
    // Told as threads get stuck (one may be before the others): wait for all three.
    let d = s.expect("a deadlock of the three workers", |v| {
        v["event"] == "deadlock" && v["waits"].as_array().is_some_and(|w| w.len() == 3)
    });
    // Left as it is: ended here by hand.
    let _ = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status();
    let waits = d["waits"].as_array().unwrap();
    let mut threads: Vec<&str> = waits.iter().map(|w| w["thread"].as_str().unwrap()).collect();
    threads.sort_unstable();
    assert_eq!(threads, ["proc[0]", "proc[1]", "proc[2]"], "{d}");
    for w in waits {
        assert_eq!(w["call"], "Work", "{d}");
        let why = w["why"].as_str().unwrap();
        assert!(
            why.contains("called schedule") && why.contains("for Refine at proc["),
            "{why}"
        );
        assert!(!w["waits_for"].as_array().unwrap().is_empty(), "{d}");
    }
    // Each in the cycle waits for the next, the last for the first.
    let cycle: Vec<&str> = d["cycle"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert!(!cycle.is_empty(), "{d}");
    for (i, t) in cycle.iter().enumerate() {
        let next = cycle[(i + 1) % cycle.len()];
        let w = waits.iter().find(|w| w["thread"] == *t).unwrap();
        assert!(
            w["waits_for"].as_array().unwrap().iter().any(|x| x == next),
            "{d}"
        );
    }

    let mut s = Session::run("nested", &["--threads", "3", "--tasks", "6"]);
    attached_and_held(&mut s);
    s.send(cont());
    s.finish_correctly();
    assert!(s.all("deadlock").is_empty(), "no deadlock told: {}", s.tail(5));
}
