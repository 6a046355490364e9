//! Happens-before on a runtime program, through `ctl`'s `clock`: each message's `send`
//! precedes the step that takes it, and the sorted chunks that two threads send to one
//! merge are concurrent (the merge may take them in either order: a race). The program
//! is held at its merge while asked: a session ends with its program.

mod support;

use serde_json::{json, Value};
use support::{attached_and_held, cont, Session};

#[test]
fn runtime_sends_precede_their_steps_and_racing_sends_are_concurrent() {
    let mut s = Session::run("mergesort", &[]);
    attached_and_held(&mut s);
    s.send(json!({"cmd":"break","op":"Merge","on":true}));
    s.send(cont());
    s.send(json!({"cmd":"wait","until":"held","op":"Merge","timeout_ms":30000}));
    s.expect("waited", |v| v["event"] == "waited");
    // The sorters go on: wait for their chunks, all but the one the held merge took (16:
    // 4 per sorter), so that more than one sorter's are in (3 could all be one's).
    s.send(json!({"cmd":"wait","until":"queue","thread":"main[0]","count":15,"timeout_ms":30000}));
    s.expect("waited", |v| v["event"] == "waited" && v["until"] == "queue");
    let seen = s.seen.clone();
    let id = |e: &Value| e["event_id"].as_u64().unwrap();
    let mut order = |a: u64, b: u64| -> String {
        s.send(json!({"cmd":"clock","event_id":a,"with":b}));
        let v = s.expect("clock", |v| {
            v["event"] == "clock" && v["event_id"] == a && v["with"] == b
        });
        v["order"].as_str().unwrap().to_owned()
    };
    let sends: Vec<&Value> = seen.iter().filter(|e| e["event"] == "send").collect();
    let mut checked = 0;
    let steps = seen
        .iter()
        .filter(|e| e["event"] == "start" && e["step"] != "final" && e["held"] == false);
    for start in steps {
        let Some(send) = sends.iter().find(|s| s["msg"] == start["msg"]) else {
            panic!("no send of the message {start} takes")
        };
        assert_eq!(order(id(send), id(start)), "before", "{send} then {start}");
        assert_eq!(order(id(start), id(send)), "after");
        checked += 1;
    }
    assert!(checked >= 4, "{checked} steps checked");
    let sorted: Vec<&&Value> = sends.iter().filter(|s| s["op"] == "Sort").collect();
    let a = sorted.first().expect("a sorted chunk");
    let b = sorted
        .iter()
        .find(|s| s["thread"] != a["thread"])
        .expect("sorted chunks from two threads");
    assert_eq!(
        order(id(a), id(b)),
        "concurrent",
        "two sorters' chunks racing for the merge: {a} {b}"
    );
    let fed = sends
        .iter()
        .find(|s| s["op"] == "Split" && s["to_thread"] == b["thread"])
        .expect("the split fed the sorter");
    assert_eq!(order(id(fed), id(b)), "before", "the split fed the sorter");
    s.send(json!({"cmd":"clock","event_id":123_456_789}));
    s.expect("error", |v| {
        v["event"] == "error" && v["message"].as_str().unwrap().contains("123456789")
    });
    s.send(json!({"cmd":"break","op":"Merge","on":false}));
    s.send(cont());
    s.finish_correctly();
}
