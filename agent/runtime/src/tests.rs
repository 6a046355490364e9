//! Unit tests of the runtime: ids, routing, merge completion, streams, panics, hooks.
#![allow(clippy::unwrap_used, clippy::type_complexity)]

use super::hook::{Hook, RecvEvent, SendEvent, StepEvent, StepKind};
use super::*;
use crate::route::Route;
use std::sync::Mutex;
use std::time::Duration;

/// Records `op thread msg` for every step start (and `recv`/`send`), in event order.
#[derive(Default)]
struct Recorder {
    starts: Mutex<Vec<(String, String, String, StepKind)>>,
    sends: Mutex<Vec<(String, Option<String>, Option<String>)>>,
    recvs: Mutex<Vec<(String, String)>>,
}

impl Hook for Recorder {
    fn on_start(&self, ev: &mut StepEvent<'_>) {
        self.starts.lock().unwrap().push((
            ev.op.name.to_string(),
            ev.thread.name.to_string(),
            ev.msg_id.to_string(),
            ev.step,
        ));
    }
    fn on_send(&self, ev: &mut SendEvent<'_>) {
        self.sends.lock().unwrap().push((
            ev.msg_id.to_string(),
            ev.to_op.map(|o| o.name.to_string()),
            ev.to_thread.map(|t| t.name.to_string()),
        ));
    }
    fn on_recv(&self, ev: &RecvEvent<'_>) {
        self.recvs
            .lock()
            .unwrap()
            .push((ev.msg_id.to_string(), ev.thread.name.to_string()));
    }
}

impl Recorder {
    fn ids_of(&self, op: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .starts
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.0 == op)
            .map(|s| s.2.clone())
            .collect();
        v.sort();
        v
    }
}

fn recorded() -> (Runtime, Arc<Recorder>) {
    let rec = Arc::new(Recorder::default());
    (Runtime::builder().hook(rec.clone()).build(), rec)
}

fn jitter(seed: u64) {
    // Deterministic per message, different across messages: shuffles arrival order.
    let us = (seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407)
        >> 33)
        % 400;
    std::thread::sleep(Duration::from_micros(us));
}

#[test]
fn split_leaf_merge_ids_and_result() {
    let (rt, rec) = recorded();
    let main = rt.collection::<()>("main", 1);
    let procs = rt.collection::<u32>("proc", 3);
    let g = rt
        .graph(
            ops::split("Split", &main, Route::constant(0), |n: u64, _c, out| {
                (0..n).for_each(|i| out.post(i))
            }) >> ops::leaf("Work", &procs, Route::round_robin(), |x: u64, c| {
                *c.state += 1;
                jitter(x);
                x * 10
            }) >> ops::merge(
                "Sum",
                &main,
                Route::constant(0),
                |acc: &mut u64, x: u64, _c| *acc += x,
                |acc, _c| acc,
            ),
        )
        .unwrap();
    assert_eq!(rt.schedule(&g, 5).unwrap(), 100);
    assert_eq!(rec.ids_of("Split"), ["0"]);
    assert_eq!(rec.ids_of("Work"), ["0.0", "0.1", "0.2", "0.3", "0.4"]);
    // Merge: five absorb steps (input ids) and one final step (its output id).
    let starts = rec.starts.lock().unwrap().clone();
    let merge: Vec<_> = starts.iter().filter(|s| s.0 == "Sum").collect();
    assert_eq!(merge.len(), 6);
    assert_eq!(
        merge.last().map(|s| (s.2.as_str(), s.3)),
        Some(("0", StepKind::Final))
    );
    // The final result is "sent" back to the caller with the merge's output id.
    assert!(rec.sends.lock().unwrap().contains(&("0".to_owned(), None, None)));
    // Repeated schedule calls get fresh root ids.
    assert_eq!(rt.schedule(&g, 2).unwrap(), 10);
    assert_eq!(rec.ids_of("Split"), ["0", "1"]);
    assert!(rec.ids_of("Work").contains(&"1.1".to_owned()));
}

#[test]
fn nested_split_merge_ids() {
    let (rt, rec) = recorded();
    let main = rt.collection::<()>("main", 1);
    let procs = rt.collection::<()>("proc", 4);
    let g = rt
        .graph(
            ops::split("Outer", &main, Route::constant(0), |n: u32, _c, out| {
                (0..n).for_each(|i| out.post(i))
            }) >> ops::split(
                "Inner",
                &procs,
                Route::by(|i: &u32, n| *i as usize % n),
                |i: u32, _c, out| (0..3).for_each(|j| out.post(i * 10 + j)),
            ) >> ops::leaf("Leaf", &procs, Route::round_robin(), |x: u32, _c| x + 1)
                >> ops::merge(
                    "InnerMerge",
                    &procs,
                    Route::by(|x: &u32, n| ((x - 1) / 10) as usize % n),
                    |a: &mut u32, x: u32, _c| *a += x,
                    |a, _c| a,
                )
                >> ops::merge(
                    "OuterMerge",
                    &main,
                    Route::constant(0),
                    |a: &mut Vec<u32>, x: u32, _c| a.push(x),
                    |mut a, _c| {
                        a.sort_unstable();
                        a
                    },
                ),
        )
        .unwrap();
    // sums of (i*10+j+1) for j in 0..3 = 30i + 6
    assert_eq!(rt.schedule(&g, 2).unwrap(), vec![6, 36]);
    assert_eq!(rec.ids_of("Inner"), ["0.0", "0.1"]);
    assert_eq!(
        rec.ids_of("Leaf"),
        ["0.0.0", "0.0.1", "0.0.2", "0.1.0", "0.1.1", "0.1.2"]
    );
    let finals: Vec<String> = rec
        .starts
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.3 == StepKind::Final)
        .map(|s| format!("{}:{}", s.0, s.2))
        .collect();
    assert_eq!(finals.len(), 3);
    assert!(finals.contains(&"InnerMerge:0.0".to_owned()) && finals.contains(&"InnerMerge:0.1".to_owned()));
    assert_eq!(finals.last().map(String::as_str), Some("OuterMerge:0"));
}

#[test]
fn merge_completes_when_split_finishes_after_all_arrivals() {
    // The split keeps running after posting, so every output is absorbed before the merge
    // learns how many to expect: completion must come from the split's end.
    let (rt, _rec) = recorded();
    let main = rt.collection::<()>("main", 1);
    let procs = rt.collection::<()>("proc", 2);
    let g = rt
        .graph(
            ops::split("SlowSplit", &procs, Route::constant(0), |n: u32, _c, out| {
                (0..n).for_each(|i| out.post(i));
                std::thread::sleep(Duration::from_millis(50));
            }) >> ops::merge(
                "Count",
                &main,
                Route::constant(0),
                |a: &mut u32, _x: u32, _c| *a += 1,
                |a, _c| a,
            ),
        )
        .unwrap();
    for n in [1, 4] {
        assert_eq!(rt.schedule(&g, n).unwrap(), n);
    }
}

#[test]
fn merge_completion_under_shuffled_arrival_many_times() {
    let rt = Runtime::builder().build();
    let main = rt.collection::<()>("main", 1);
    let procs = rt.collection::<()>("proc", 4);
    let g = rt
        .graph(
            ops::split("S", &main, Route::constant(0), |n: u64, _c, out| {
                (0..n).for_each(|i| out.post(i))
            }) >> ops::leaf(
                "L",
                &procs,
                Route::by(|x: &u64, n| *x as usize % n),
                |x: u64, c| {
                    jitter(x + c.msg_id().components()[0]);
                    x
                },
            ) >> ops::merge(
                "M",
                &main,
                Route::constant(0),
                |a: &mut Vec<u64>, x: u64, _c| a.push(x),
                |a, _c| a,
            ),
        )
        .unwrap();
    for round in 0..30u64 {
        let mut got = rt.schedule(&g, 8 + round % 5).unwrap();
        got.sort_unstable();
        assert_eq!(got, (0..8 + round % 5).collect::<Vec<_>>(), "round {round}");
    }
}

#[test]
fn stream_outputs_ids_and_merge() {
    let (rt, rec) = recorded();
    let main = rt.collection::<()>("main", 1);
    let procs = rt.collection::<()>("proc", 2);
    let g = rt
        .graph(
            ops::split("S", &main, Route::constant(0), |n: u32, _c, out| (0..n).for_each(|i| out.post(i)))
                // Emits a pair for every two inputs, and the leftover at the end.
                >> ops::stream(
                    "Pairs",
                    &procs,
                    Route::constant(1),
                    |held: &mut Vec<u32>, x: u32, _c, out| {
                        held.push(x);
                        if held.len() == 2 {
                            out.post(std::mem::take(held));
                        }
                    },
                    |held, _c, out| {
                        if !held.is_empty() {
                            out.post(held);
                        }
                    },
                )
                >> ops::merge("Gather", &main, Route::constant(0), |a: &mut Vec<Vec<u32>>, p: Vec<u32>, _c| a.push(p), |a, _c| a),
        )
        .unwrap();
    let mut pairs = rt.schedule(&g, 5).unwrap();
    pairs.iter_mut().for_each(|p| p.sort_unstable());
    let mut flat: Vec<u32> = pairs.iter().flatten().copied().collect();
    flat.sort_unstable();
    assert_eq!(flat, [0, 1, 2, 3, 4]);
    assert_eq!(pairs.len(), 3);
    let gather: Vec<String> = rec
        .starts
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.0 == "Gather" && s.3 == StepKind::Absorb)
        .map(|s| s.2.clone())
        .collect();
    let mut gather_sorted = gather.clone();
    gather_sorted.sort();
    assert_eq!(gather_sorted, ["0.0", "0.1", "0.2"]);
}

#[test]
fn panic_becomes_error_naming_op_thread_and_message() {
    let rt = Runtime::builder().build();
    let main = rt.collection::<()>("main", 1);
    let procs = rt.collection::<()>("proc", 2);
    let g = rt
        .graph(
            ops::split("S", &main, Route::constant(0), |n: u32, _c, out| {
                (0..n).for_each(|i| out.post(i))
            }) >> ops::leaf(
                "Boom",
                &procs,
                Route::by(|x: &u32, n| *x as usize % n),
                |x: u32, _c| {
                    assert!(x != 3, "three is not allowed");
                    x
                },
            ) >> ops::merge(
                "M",
                &main,
                Route::constant(0),
                |a: &mut u32, x: u32, _c| *a += x,
                |a, _c| a,
            ),
        )
        .unwrap();
    let err = rt.schedule(&g, 5).unwrap_err();
    match &err {
        ScheduleError::Panic {
            op,
            thread,
            msg,
            message,
        } => {
            assert_eq!(
                (op.as_str(), thread.as_str(), msg.as_str()),
                ("Boom", "proc[1]", "0.3")
            );
            assert!(message.contains("three is not allowed"), "{message}");
        }
        other => panic!("expected a panic error, got {other:?}"),
    }
    // The runtime stays usable: the next call (which avoids 3) succeeds.
    assert_eq!(rt.schedule(&g, 3).unwrap(), 3);
}

#[test]
fn rule_violations_are_errors_not_hangs() {
    let rt = Runtime::builder().build();
    let main = rt.collection::<()>("main", 1);
    let procs = rt.collection::<()>("proc", 2);
    let bad_route = rt
        .graph(ops::leaf(
            "Bad",
            &procs,
            Route::by(|x: &u32, _n| *x as usize),
            |x: u32, _c| x,
        ))
        .unwrap();
    let e = rt.schedule(&bad_route, 7).unwrap_err().to_string();
    assert!(e.contains("thread index 7"), "{e}");

    let empty = rt
        .graph(
            ops::split(
                "Empty",
                &main,
                Route::constant(0),
                |_n: u32, _c, _out: &mut Outputs<'_, u32>| {},
            ) >> ops::merge(
                "M2",
                &main,
                Route::constant(0),
                |a: &mut u32, x: u32, _c| *a += x,
                |a, _c| a,
            ),
        )
        .unwrap();
    let e = rt.schedule(&empty, 1).unwrap_err().to_string();
    assert!(e.contains("Empty") && e.contains("at least one"), "{e}");

    let spread = rt
        .graph(
            ops::split("Spread", &main, Route::constant(0), |n: u32, _c, out| {
                (0..n).for_each(|i| out.post(i))
            }) >> ops::merge(
                "SpreadMerge",
                &procs,
                Route::by(|x: &u32, n| *x as usize % n),
                |a: &mut u32, x: u32, _c| *a += x,
                |a, _c| a,
            ),
        )
        .unwrap();
    let e = rt.schedule(&spread, 4).unwrap_err().to_string();
    assert!(e.contains("different threads"), "{e}");
}

#[test]
fn build_errors() {
    let rt = Runtime::builder().build();
    let main = rt.collection::<()>("main", 1);
    let leaf = || ops::leaf("L", &main, Route::constant(0), |x: u32, _c| x);
    let merge = |name: &str| {
        ops::merge(
            name,
            &main,
            Route::constant(0),
            |a: &mut u32, x: u32, _c| *a += x,
            |a, _c| a,
        )
    };
    let split = |name: &str| ops::split(name, &main, Route::constant(0), |x: u32, _c, out| out.post(x));
    assert_eq!(
        rt.graph(merge("M")).err(),
        Some(BuildError::UnmatchedMerge("M".into(), "merge"))
    );
    assert_eq!(
        rt.graph(split("S") >> leaf()).err(),
        Some(BuildError::UnclosedSplit("S".into()))
    );
    assert_eq!(
        rt.graph(split("S") >> merge("S")).err(),
        Some(BuildError::DuplicateName("S".into()))
    );
    assert!(rt.graph(split("S1") >> merge("M1")).is_ok());
    assert_eq!(
        rt.graph(split("S1") >> merge("M9")).err(),
        Some(BuildError::DuplicateName("S1".into()))
    );
    let other = Runtime::builder().build();
    let foreign = other.collection::<()>("x", 1);
    assert_eq!(
        rt.graph(ops::leaf("F", &foreign, Route::constant(0), |x: u32, _c| x))
            .err(),
        Some(BuildError::ForeignCollection("F".into()))
    );
}

#[test]
fn recv_precedes_start_and_send_names_destination() {
    let (rt, rec) = recorded();
    let procs = rt.collection::<()>("proc", 3);
    let g = rt
        .graph(ops::leaf("Only", &procs, Route::constant(2), |x: u32, _c| x))
        .unwrap();
    assert_eq!(rt.schedule(&g, 9).unwrap(), 9);
    assert_eq!(
        rec.recvs.lock().unwrap().as_slice(),
        [("0".to_owned(), "proc[2]".to_owned())]
    );
    assert_eq!(
        rec.sends.lock().unwrap()[0],
        (
            "0".to_owned(),
            Some("Only".to_owned()),
            Some("proc[2]".to_owned())
        )
    );
}

/// A hook that edits sends, puts back the first start and reorders, and touches state.
#[derive(Default)]
struct Meddler {
    put_back_done: Mutex<bool>,
    log: Mutex<Vec<String>>,
}

impl Hook for Meddler {
    fn on_send(&self, ev: &mut SendEvent<'_>) {
        // Redirect message 0.0 to the last thread by editing the field the route reads.
        if ev.msg_id.to_string() == "0.0" && ev.to_op.is_some_and(|o| &*o.name == "Work") {
            ev.replace_content(serde_json::json!(3)).unwrap();
            assert!(ev.replace_content(serde_json::json!("not a number")).is_err());
        }
    }
    fn on_start(&self, ev: &mut StepEvent<'_>) {
        self.log
            .lock()
            .unwrap()
            .push(format!("{}:{}", ev.op.name, ev.msg_id));
        if &*ev.op.name == "Work" && ev.thread.index == 3 {
            let state = ev.access.state_json().unwrap();
            ev.access
                .set_state_json(serde_json::json!(state.as_u64().unwrap() + 100))
                .unwrap();
            assert!(ev.access.set_state_json(serde_json::json!("bad")).is_err());
        }
        if &*ev.op.name == "Gate" {
            // Hold the gate thread until both of its messages are queued, then swap.
            let mut done = self.put_back_done.lock().unwrap();
            if !*done {
                while ev.access.pending().is_empty() {
                    std::thread::sleep(Duration::from_millis(1));
                }
                let cur = ev.access.current().unwrap().id.to_string();
                let pend: Vec<String> = ev.access.pending().iter().map(|m| m.key()).collect();
                assert!(
                    ev.access.reorder(std::slice::from_ref(&cur)).is_err(),
                    "incomplete order must fail"
                );
                let mut order = pend.clone();
                order.push(cur);
                ev.access.reorder(&order).unwrap();
                assert!(ev.access.put_back());
                *done = true;
            }
        }
    }
}

#[test]
fn hook_can_replace_put_back_reorder_and_set_state() {
    let hook = Arc::new(Meddler::default());
    let rt = Runtime::builder().hook(hook.clone()).build();
    let main = rt.collection::<()>("main", 1);
    let gate = rt.collection::<Vec<u32>>("gate", 1);
    let procs = rt.collection::<u64>("proc", 4);
    let g = rt
        .graph(
            ops::split("S", &main, Route::constant(0), |n: u32, _c, out| {
                (0..n).for_each(|i| out.post(i))
            }) >> ops::leaf(
                "Work",
                &procs,
                Route::by(|x: &u32, n| *x as usize % n),
                |x: u32, c| {
                    *c.state += 1;
                    (u64::from(x), *c.state)
                },
            ) >> ops::leaf("Gate", &gate, Route::constant(0), |x: (u64, u64), c| {
                c.state.push(x.0 as u32);
                (x, c.state.clone())
            }) >> ops::merge(
                "M",
                &main,
                Route::constant(0),
                |a: &mut Vec<((u64, u64), Vec<u32>)>, x, _c| a.push(x),
                |a, _c| a,
            ),
        )
        .unwrap();
    let out = rt.schedule(&g, 2).unwrap();
    // 0.0 was edited to 3 and ran on proc[3], whose state had been bumped by 100.
    let work: Vec<(u64, u64)> = out.iter().map(|x| x.0).collect();
    assert!(work.contains(&(3, 101)), "{work:?}");
    assert!(work.contains(&(1, 1)), "{work:?}");
    // The gate put back the first message it was about to start: it processed the other
    // one first, then restarted the put-back one (a second start of the same id).
    let last_gate_order = &out.iter().max_by_key(|x| x.1.len()).unwrap().1;
    let log = hook.log.lock().unwrap().clone();
    let gate_starts: Vec<&String> = log.iter().filter(|l| l.starts_with("Gate:")).collect();
    assert_eq!(gate_starts.len(), 3, "{log:?}");
    assert_eq!(
        gate_starts[0], gate_starts[2],
        "the put-back message starts again last: {log:?}"
    );
    assert_eq!(last_gate_order.len(), 2);
}

/// A hook switched on and off like an agent whose debugger attaches.
#[derive(Default)]
struct Switch {
    on: std::sync::atomic::AtomicBool,
    view: Mutex<Option<RuntimeView>>,
    recvs: Mutex<Vec<(String, usize)>>,
    starts: Mutex<Vec<String>>,
    /// Sends (`op:id`, op the destination), and receives by `Gate`.
    sends: Mutex<Vec<String>>,
    gate_recvs: Mutex<Vec<String>>,
}

impl Hook for Switch {
    fn on_send(&self, ev: &mut SendEvent<'_>) {
        if let Some(op) = ev.to_op {
            self.sends
                .lock()
                .unwrap()
                .push(format!("{}:{}", op.name, ev.msg_id));
        }
    }
    fn active(&self) -> bool {
        self.on.load(std::sync::atomic::Ordering::SeqCst)
    }
    fn on_runtime(&self, view: RuntimeView) {
        *self.view.lock().unwrap() = Some(view);
    }
    fn on_recv(&self, ev: &RecvEvent<'_>) {
        self.recvs
            .lock()
            .unwrap()
            .push((ev.msg_id.to_string(), ev.position));
        if &*ev.op.name == "Gate" {
            self.gate_recvs.lock().unwrap().push(ev.msg_id.to_string());
        }
    }
    fn on_start(&self, ev: &mut StepEvent<'_>) {
        if &*ev.op.name == "Gate" {
            self.starts.lock().unwrap().push(ev.msg_id.to_string());
        }
    }
}

/// While nobody listens a thread takes its whole queue in one batch; a debugger attaching
/// then must still see every pending message in order, count them in receive positions,
/// and see them start in that order.
#[test]
fn a_batch_taken_before_the_hook_turns_on_stays_pending_in_order() {
    use std::sync::mpsc;
    let hook = Arc::new(Switch::default());
    let rt = Runtime::builder().hook(hook.clone()).build();
    let main = rt.collection::<()>("main", 1);
    let gate = rt.collection::<()>("gate", 1);
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let go_rx = Mutex::new(go_rx);
    let (posted_tx, posted_rx) = mpsc::channel::<()>();
    let posted_tx = Mutex::new(posted_tx);
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    let entered_tx = Mutex::new(entered_tx);
    let g = Arc::new(
        rt.graph(
            ops::split("S", &main, Route::constant(0), move |n: u32, _c, out| {
                (0..n).for_each(|i| out.post(i));
                let _ = posted_tx.lock().unwrap().send(());
            }) >> ops::leaf("Gate", &gate, Route::constant(0), move |x: u32, _c| {
                if x == 0 {
                    // The first message waits for the test: the rest queue up behind it
                    // (one batch with it: they are all queued once it runs).
                    let _ = entered_tx.lock().unwrap().send(());
                    let _ = go_rx.lock().unwrap().recv();
                }
                x
            }) >> ops::merge(
                "M",
                &main,
                Route::constant(0),
                |a: &mut Vec<u32>, x, _c| a.push(x),
                |a, _c| a,
            ),
        )
        .unwrap(),
    );
    let rt = Arc::new(rt);
    let first = {
        let (rt, g) = (rt.clone(), g.clone());
        std::thread::spawn(move || rt.schedule(&g, 5))
    };
    posted_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    // Gate is inside message 0.0 (0.1..0.4 came in the same batch: taken with it into
    // the thread's front, or still in the inbox).
    entered_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    hook.on.store(true, std::sync::atomic::Ordering::SeqCst);
    let view = hook.view.lock().unwrap().clone().unwrap();
    let gate_global = view.threads().iter().position(|t| &*t.name == "gate[0]").unwrap();
    let pending = |view: &RuntimeView| -> Vec<String> {
        view.pending(gate_global)
            .unwrap()
            .iter()
            .map(|m| m.key())
            .collect()
    };
    assert_eq!(pending(&view), ["0.1", "0.2", "0.3", "0.4"]);
    // A message arriving now queues behind the four.
    let second = {
        let (rt, g) = (rt.clone(), g.clone());
        std::thread::spawn(move || rt.schedule(&g, 1))
    };
    posted_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !hook.recvs.lock().unwrap().iter().any(|r| r.0 == "1.0") {
        assert!(std::time::Instant::now() < deadline, "1.0 never received");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(
        hook.recvs.lock().unwrap().contains(&("1.0".to_owned(), 4)),
        "{:?}",
        hook.recvs.lock().unwrap()
    );
    assert_eq!(pending(&view), ["0.1", "0.2", "0.3", "0.4", "1.0"]);
    go_tx.send(()).unwrap();
    go_tx.send(()).unwrap();
    let mut a = first.join().unwrap().unwrap();
    a.sort_unstable();
    assert_eq!(a, [0, 1, 2, 3, 4]);
    assert_eq!(second.join().unwrap().unwrap(), [0]);
    assert_eq!(
        hook.starts.lock().unwrap().as_slice(),
        ["0.1", "0.2", "0.3", "0.4", "1.0"]
    );
}

/// A routing function that panics while a leaf posts its output fails that schedule call
/// (it used to unwind the thread, and the call waited for ever); the threads live on.
#[test]
fn a_panicking_route_fails_the_schedule_and_the_threads_live_on() {
    use std::sync::mpsc;
    let rt = Runtime::builder().build();
    let a = rt.collection::<()>("a", 1);
    let b = rt.collection::<()>("b", 2);
    let g = rt
        .graph(
            ops::leaf("A", &a, Route::constant(0), |x: u32, _c| x)
                >> ops::leaf(
                    "B",
                    &b,
                    Route::by(|x: &u32, _n| {
                        assert!(*x != 7, "route panics on 7");
                        0
                    }),
                    |x: u32, _c| x,
                ),
        )
        .unwrap();
    let (rt, g) = (Arc::new(rt), Arc::new(g));
    let (tx, rx) = mpsc::channel();
    {
        let (rt, g) = (rt.clone(), g.clone());
        std::thread::spawn(move || {
            let first = rt.schedule(&g, 7).map_err(|e| e.to_string());
            let second = rt.schedule(&g, 3).map_err(|e| e.to_string());
            let _ = tx.send((first, second));
        });
    }
    let (first, second) = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("both schedule calls return");
    let e = first.unwrap_err();
    assert!(e.contains("route panics on 7"), "{e}");
    assert_eq!(second.unwrap(), 3);
}

/// Without a debugger a split's outputs travel in batches (several messages per queue
/// entry, payloads unboxed): ids, routing, message ids seen by the leaf, and the merge's
/// result are the same as one by one, across batch boundaries.
#[test]
fn batched_outputs_keep_ids_order_and_results() {
    let rt = Runtime::builder().build();
    let main = rt.collection::<()>("main", 1);
    let procs = rt.collection::<u32>("proc", 3);
    let n = 3 * thread::BATCH_MAX as u64 + 7;
    let g = rt
        .graph(
            ops::split("Split", &main, Route::constant(0), |n: u64, _c, out| {
                (0..n).for_each(|i| out.post(i))
            }) >> ops::leaf("Work", &procs, Route::round_robin(), |x: u64, c| {
                *c.state += 1;
                (c.msg_id().to_string(), c.thread_index(), x)
            }) >> ops::merge(
                "Merge",
                &main,
                Route::constant(0),
                |acc: &mut Vec<(String, usize, u64)>, x, _c| acc.push(x),
                |acc, _c| acc,
            ),
        )
        .unwrap();
    for call in 0..3u64 {
        let mut got = rt.schedule(&g, n).unwrap();
        // What one thread sent arrived in the order it was sent.
        for t in 0..3 {
            let from_t: Vec<u64> = got.iter().filter(|m| m.1 == t).map(|m| m.2).collect();
            assert!(from_t.windows(2).all(|w| w[0] < w[1]), "thread {t}: {from_t:?}");
        }
        got.sort_by_key(|(_, _, x)| *x);
        assert_eq!(got.len() as u64, n);
        for (i, (id, thread, x)) in got.into_iter().enumerate() {
            assert_eq!(x, i as u64);
            assert_eq!(id, format!("{call}.{i}"));
            // The round-robin counter goes on from call to call.
            assert_eq!(thread, ((call * n) as usize + i) % 3, "round robin, message {id}");
        }
    }
}

/// A panic in a leaf fed from a batch, and a routing error while batching, fail the
/// schedule call with the usual message; the runtime goes on.
#[test]
fn batched_failures_are_errors_naming_the_message() {
    let rt = Runtime::builder().build();
    let main = rt.collection::<()>("main", 1);
    let procs = rt.collection::<()>("proc", 2);
    let g = rt
        .graph(
            ops::split("Split", &main, Route::constant(0), |n: u64, _c, out| {
                (0..n).for_each(|i| out.post(i))
            }) >> ops::leaf(
                "Work",
                &procs,
                Route::by(|x: &u64, n| if *x == 90 { n } else { (*x % 2) as usize }),
                |x: u64, _c| {
                    assert!(x != 70, "seventy");
                    x
                },
            ) >> ops::merge(
                "Sum",
                &main,
                Route::constant(0),
                |a: &mut u64, x, _c| *a += x,
                |a, _c| a,
            ),
        )
        .unwrap();
    let e = rt.schedule(&g, 80).unwrap_err().to_string();
    assert!(
        e.contains("seventy") && e.contains("0.70") && e.contains("Work"),
        "{e}"
    );
    let e = rt.schedule(&g, 100).unwrap_err().to_string();
    assert!(e.contains("cannot route message 1.90"), "{e}");
    assert_eq!(rt.schedule(&g, 60).unwrap(), (0..60).sum::<u64>());
}

/// Outputs gathered while nobody listened, when a debugger attaches before the split has
/// ended, are delivered one by one: each is sent and received (through the hook, in
/// order) and started like any other.
#[test]
fn outputs_gathered_before_a_debugger_attached_are_sent_one_by_one() {
    let hook = Arc::new(Switch::default());
    let rt = Runtime::builder().hook(hook.clone()).build();
    let main = rt.collection::<()>("main", 1);
    let gate = rt.collection::<()>("gate", 1);
    let h = hook.clone();
    let g = rt
        .graph(
            ops::split("S", &main, Route::constant(0), move |n: u32, _c, out| {
                for i in 0..n {
                    if i == n / 2 {
                        h.on.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                    out.post(i);
                }
            }) >> ops::leaf("Gate", &gate, Route::constant(0), |x: u32, _c| x)
                >> ops::merge(
                    "M",
                    &main,
                    Route::constant(0),
                    |a: &mut Vec<u32>, x, _c| a.push(x),
                    |a, _c| a,
                ),
        )
        .unwrap();
    assert_eq!(rt.schedule(&g, 10).unwrap(), (0..10).collect::<Vec<_>>());
    let ids: Vec<String> = (0..10).map(|i| format!("0.{i}")).collect();
    let to_gate: Vec<String> = (0..10).map(|i| format!("Gate:0.{i}")).collect();
    let sent = hook.sends.lock().unwrap().clone();
    assert_eq!(
        &sent
            .iter()
            .filter(|s| s.starts_with("Gate:"))
            .cloned()
            .collect::<Vec<_>>(),
        &to_gate
    );
    assert_eq!(hook.gate_recvs.lock().unwrap().as_slice(), &ids[..]);
    assert_eq!(hook.starts.lock().unwrap().as_slice(), &ids[..]);
}

/// Records receives (with their positions) and step starts in one stream, in the order the
/// hook saw them: what a debugger's event stream holds.
#[derive(Default)]
struct Stream {
    log: Mutex<Vec<(bool, String, usize)>>,
}

impl Hook for Stream {
    fn on_recv(&self, ev: &RecvEvent<'_>) {
        if &*ev.op.name == "Work" {
            self.log
                .lock()
                .unwrap()
                .push((true, ev.msg_id.to_string(), ev.position));
        }
    }
    fn on_start(&self, ev: &mut StepEvent<'_>) {
        if &*ev.op.name == "Work" {
            self.log.lock().unwrap().push((false, ev.msg_id.to_string(), 0));
        }
    }
}

/// A debugger that inserts each received message at its reported position and removes it
/// at its step's start sees the thread's real queue: each step starts the head, even when a
/// message arrives between the thread taking a message and reporting its start (the
/// position then still counts the message taken).
#[test]
fn receive_positions_agree_with_the_event_order() {
    let hook = Arc::new(Stream::default());
    let rt = Runtime::builder().hook(hook.clone()).build();
    let main = rt.collection::<()>("main", 1);
    let one = rt.collection::<()>("w", 1);
    let g = rt
        .graph(
            ops::split("S", &main, Route::constant(0), |n: u32, _c, out| {
                (0..n).for_each(|i| out.post(i))
            }) >> ops::leaf("Work", &one, Route::constant(0), |x: u32, _c| {
                std::hint::black_box((0..50).fold(x, |a, b| a.wrapping_mul(31).wrapping_add(b)))
            }) >> ops::merge(
                "M",
                &main,
                Route::constant(0),
                |a: &mut u32, _x, _c| *a += 1,
                |a, _c| a,
            ),
        )
        .unwrap();
    for _ in 0..5 {
        assert_eq!(rt.schedule(&g, 3000).unwrap(), 3000);
    }
    let log = hook.log.lock().unwrap().clone();
    let mut queue: Vec<String> = Vec::new();
    for (i, (recv, id, pos)) in log.iter().enumerate() {
        if *recv {
            let at = (*pos).min(queue.len());
            queue.insert(at, id.clone());
        } else {
            assert_eq!(
                queue.first(),
                Some(id),
                "event {i}: {id} starts, the debugger's queue head is {:?}",
                queue.first()
            );
            queue.remove(0);
        }
    }
    assert!(queue.is_empty(), "{queue:?}");
}

/// A debugger attaching while a thread runs through its queue (taken at once, while
/// nobody listened): the outputs of the steps before had left at their steps' end, the
/// ones after go through the hooks, in order; the merge gets every one.
#[test]
fn leaf_outputs_after_a_debugger_attached_go_through_its_hooks_in_order() {
    let hook = Arc::new(Switch::default());
    let rt = Runtime::builder().hook(hook.clone()).build();
    let main = rt.collection::<()>("main", 1);
    let gate = rt.collection::<()>("gate", 1);
    let h = hook.clone();
    let g = rt
        .graph(
            ops::split("S", &main, Route::constant(0), |n: u32, _c, out| {
                (0..n).for_each(|i| out.post(i))
            }) >> ops::leaf("Gate", &gate, Route::constant(0), move |x: u32, _c| {
                if x == 20 {
                    h.on.store(true, std::sync::atomic::Ordering::SeqCst);
                }
                x
            }) >> ops::merge(
                "M",
                &main,
                Route::constant(0),
                |a: &mut Vec<u32>, x, _c| a.push(x),
                |a, _c| a,
            ),
        )
        .unwrap();
    let mut got = rt.schedule(&g, 40).unwrap();
    got.sort_unstable();
    assert_eq!(got, (0..40).collect::<Vec<_>>());
    // 0.0..0.19 left at the end of their steps, before the hook turned on (the thread
    // had taken all 40 at once); 0.20 (whose step turned it on) and the later ones are
    // sent through the hook, once each...
    let to_m: Vec<String> = hook
        .sends
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.starts_with("M:"))
        .cloned()
        .collect();
    // ...in order.
    let all: Vec<String> = (20..40).map(|i| format!("M:0.{i}")).collect();
    assert_eq!(to_m, all);
}

/// A leaf's gathered outputs go out before its thread runs a step for another schedule
/// call: that step may wait for the first call to return (here it does).
#[test]
fn gathered_outputs_go_out_before_a_step_of_another_call() {
    use std::sync::mpsc;
    let rt = Arc::new(Runtime::builder().build());
    let main = rt.collection::<()>("main", 1);
    let one = rt.collection::<()>("w", 1);
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (a_done_tx, a_done_rx) = mpsc::channel::<()>();
    let (go_rx, a_done_rx) = (Mutex::new(go_rx), Mutex::new(a_done_rx));
    // Each split says which call it splits (by its first value).
    let (split_tx, split_rx) = mpsc::channel::<u32>();
    let split_tx = Mutex::new(split_tx);
    // The worker says when it is inside the blocking step.
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    let entered_tx = Mutex::new(entered_tx);
    let g = Arc::new(
        rt.graph(
            ops::split("S", &main, Route::constant(0), move |v: Vec<u32>, _c, out| {
                let first = v[0];
                v.into_iter().for_each(|x| out.post(x));
                let _ = split_tx.lock().unwrap().send(first);
            }) >> ops::leaf("Work", &one, Route::constant(0), move |x: u32, _c| {
                if x == 999 {
                    let _ = entered_tx.lock().unwrap().send(());
                    let _ = go_rx.lock().unwrap().recv_timeout(Duration::from_secs(10));
                }
                if x == 500 {
                    a_done_rx
                        .lock()
                        .unwrap()
                        .recv_timeout(Duration::from_secs(10))
                        .expect("the first call returned");
                }
                x
            }) >> ops::merge(
                "Sum",
                &main,
                Route::constant(0),
                |a: &mut u32, x, _c| *a += x,
                |a, _c| a,
            ),
        )
        .unwrap(),
    );
    let call = |v: Vec<u32>| {
        let (rt, g) = (rt.clone(), g.clone());
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(rt.schedule(&g, v).map_err(|e| e.to_string()));
        });
        rx
    };
    // The worker is held in a step while the first call's three messages and then the
    // second call's one queue up behind it; it then takes all four at once.
    let blocker = call(vec![999]);
    entered_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the worker blocks");
    let a = call(vec![1, 2, 3]);
    // The second call's split must come after the first's (main splits one at a time):
    // its message queues behind theirs.
    let split = |want: u32| loop {
        let got = split_rx.recv_timeout(Duration::from_secs(10)).expect("a split");
        if got == want {
            break;
        }
    };
    split(1);
    let b = call(vec![500]);
    split(500);
    // Its batch is pushed as its split returns.
    std::thread::sleep(Duration::from_millis(50));
    go_tx.send(()).unwrap();
    assert_eq!(blocker.recv_timeout(Duration::from_secs(10)).unwrap(), Ok(999));
    let first = a
        .recv_timeout(Duration::from_secs(5))
        .expect("the first call returns while the second waits for it");
    assert_eq!(first, Ok(6));
    a_done_tx.send(()).unwrap();
    assert_eq!(b.recv_timeout(Duration::from_secs(10)).unwrap(), Ok(500));
}

/// Logs every event in one sequence (as a debugger's stream numbers them), and streams
/// (see [`Hook::streaming`]) until `holding` is set.
#[derive(Default)]
struct Streamer {
    holding: std::sync::atomic::AtomicBool,
    /// (kind: `s`end, `r`ecv, `b`egin, `e`nd; operation; message; receive position).
    log: Mutex<Vec<(char, String, String, usize)>>,
    /// Sends reported through `streamed_send` (gathered in batches) and `on_send`.
    streamed: std::sync::atomic::AtomicUsize,
    singles: std::sync::atomic::AtomicUsize,
    /// See [`Hook::session`].
    session: std::sync::atomic::AtomicU64,
}

impl Streamer {
    /// What a debugger attaching does: a new session, and what was recorded before is
    /// dropped (its snapshot stands for it).
    fn new_session(&self) {
        let mut log = self.log.lock().unwrap();
        self.session.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        log.clear();
    }

    fn log(&self, kind: char, op: &str, msg: &MsgId, position: usize) {
        self.log
            .lock()
            .unwrap()
            .push((kind, op.to_owned(), msg.to_string(), position));
    }
}

impl Hook for Streamer {
    fn streaming(&self) -> bool {
        !self.holding.load(std::sync::atomic::Ordering::SeqCst)
    }
    fn session(&self) -> u64 {
        self.session.load(std::sync::atomic::Ordering::SeqCst)
    }
    fn streamed_send(&self, ev: &super::hook::StreamedSend<'_>) -> Option<u64> {
        self.streamed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // Logged and numbered in one step, as the agent does.
        let mut log = self.log.lock().unwrap();
        log.push(('s', ev.to_op.name.to_string(), ev.msg_id.to_string(), 0));
        Some(self.session())
    }
    fn streamed_step(&self, ev: &super::hook::StreamedStep<'_>, stop: bool) {
        self.log(if stop { 'e' } else { 'b' }, &ev.op.name, ev.msg_id, 0);
    }
    fn on_send(&self, ev: &mut SendEvent<'_>) {
        if let Some(op) = ev.to_op {
            self.singles.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            self.log('s', &op.name, ev.msg_id, 0);
        }
    }
    fn on_recv(&self, ev: &RecvEvent<'_>) {
        self.log('r', &ev.op.name, ev.msg_id, ev.position);
    }
    fn on_start(&self, ev: &mut StepEvent<'_>) {
        if ev.step != StepKind::Final {
            self.log('b', &ev.op.name, ev.msg_id, 0);
        }
    }
    fn on_stop(&self, ev: &mut StepEvent<'_>) {
        if ev.step != StepKind::Final {
            self.log('e', &ev.op.name, ev.msg_id, 0);
        }
    }
}

/// Run a split → leaf → merge farm of `calls` calls of `n` tasks under `hook` (setting
/// `holding` from the leaf at task `flip` of the first call, if any); check that every
/// message was sent, received, started and stopped once, in that order, and that a
/// debugger inserting each received message at its position and removing it at its start
/// always starts the head of the leaf thread's queue.
fn check_streamed_farm(hook: &Arc<Streamer>, calls: usize, n: u32, flip: Option<u32>) {
    check_streamed_farm_with(hook, calls, n, flip, None);
}

/// [`check_streamed_farm`]; `new_session`: the split starts a new session (see
/// [`Streamer::new_session`]) after posting that many outputs of the first call.
fn check_streamed_farm_with(
    hook: &Arc<Streamer>,
    calls: usize,
    n: u32,
    flip: Option<u32>,
    new_session: Option<u32>,
) {
    let rt = Runtime::builder().hook(hook.clone()).build();
    let main = rt.collection::<()>("main", 1);
    let one = rt.collection::<()>("w", 1);
    let h = hook.clone();
    let hs = hook.clone();
    let first = std::sync::atomic::AtomicBool::new(true);
    let g = rt
        .graph(
            ops::split("S", &main, Route::constant(0), move |n: u32, _c, out| {
                let first = first.swap(false, std::sync::atomic::Ordering::SeqCst);
                for i in 0..n {
                    out.post(i);
                    if first && Some(i + 1) == new_session {
                        hs.new_session();
                    }
                }
            }) >> ops::leaf("Work", &one, Route::constant(0), move |x: u32, _c| {
                if Some(x) == flip {
                    h.holding.store(true, std::sync::atomic::Ordering::SeqCst);
                }
                x
            }) >> ops::merge(
                "M",
                &main,
                Route::constant(0),
                |a: &mut u64, x, _c| *a += u64::from(x),
                |a, _c| a,
            ),
        )
        .unwrap();
    for _ in 0..calls {
        assert_eq!(rt.schedule(&g, n).unwrap(), u64::from(n) * u64::from(n - 1) / 2);
    }
    drop(rt);
    let log = hook.log.lock().unwrap().clone();
    let mut seen: std::collections::HashMap<(String, String), String> = Default::default();
    let mut queue: Vec<String> = Vec::new();
    for (i, (kind, op, msg, pos)) in log.iter().enumerate() {
        seen.entry((op.clone(), msg.clone())).or_default().push(*kind);
        if op == "Work" {
            match kind {
                'r' => queue.insert((*pos).min(queue.len()), msg.clone()),
                'b' => {
                    assert_eq!(
                        queue.first(),
                        Some(msg),
                        "event {i}: {msg} starts, the queue head is {:?}",
                        queue.first()
                    );
                    queue.remove(0);
                }
                _ => {}
            }
        }
    }
    assert!(queue.is_empty(), "{queue:?}");
    // Per call: the input (sent by the caller), the tasks and their results.
    assert_eq!(seen.len(), calls * (2 * n as usize + 1));
    for ((op, msg), kinds) in &seen {
        // With a new session in the first call's split, only its stop is left of it.
        let split_seen = new_session.is_some() && op == "S" && msg == "0";
        assert_eq!(kinds, if split_seen { "e" } else { "srbe" }, "{op} {msg}");
    }
}

/// With a streaming hook, messages travel in batches and every one is still reported in
/// order, with positions a debugger can follow.
#[test]
fn a_streaming_hook_hears_of_every_batched_message_in_order() {
    let hook = Arc::new(Streamer::default());
    check_streamed_farm(&hook, 5, 3000, None);
    let (streamed, singles) = (
        hook.streamed.load(std::sync::atomic::Ordering::SeqCst),
        hook.singles.load(std::sync::atomic::Ordering::SeqCst),
    );
    // Split and leaf outputs are gathered; the caller's inputs are sent one by one.
    assert_eq!((streamed, singles), (5 * 2 * 3000, 5));
}

/// A hook that stops streaming mid-call (a breakpoint is set) gets the rest of the
/// messages one by one, through the calls that may hold them, and still every message
/// once, in order.
#[test]
fn a_hook_that_stops_streaming_mid_call_gets_the_rest_one_by_one() {
    let hook = Arc::new(Streamer::default());
    check_streamed_farm(&hook, 3, 3000, Some(1500));
    let (streamed, singles) = (
        hook.streamed.load(std::sync::atomic::Ordering::SeqCst),
        hook.singles.load(std::sync::atomic::Ordering::SeqCst),
    );
    assert!(
        streamed > 0 && singles > 0,
        "{streamed} gathered, {singles} one by one"
    );
    assert_eq!(streamed + singles, 3 * (2 * 3000 + 1));
}

/// A debugger attaching (a new session, what was recorded before dropped) while a split has
/// gathered part of a batch: those messages' sends are reported again, one by one, so that
/// every message still has its send before its receive.
#[test]
fn a_batch_gathered_before_a_new_session_is_sent_again_one_by_one() {
    let hook = Arc::new(Streamer::default());
    check_streamed_farm_with(&hook, 2, 3000, None, Some(10));
    let singles = hook.singles.load(std::sync::atomic::Ordering::SeqCst);
    // The ten gathered before, and the two calls' inputs.
    assert_eq!(singles, 10 + 2);
}

/// A split that fails after gathering outputs: what it gathered still goes out (a
/// streaming debugger heard of those sends), so every reported send has its receive.
#[test]
fn a_failing_split_still_enqueues_what_it_gathered() {
    let hook = Arc::new(Streamer::default());
    let rt = Runtime::builder().hook(hook.clone()).build();
    let main = rt.collection::<()>("main", 1);
    let one = rt.collection::<()>("w", 1);
    let g = rt
        .graph(
            ops::split("S", &main, Route::constant(0), |n: u32, _c, out| {
                (0..n).for_each(|i| out.post(i));
                panic!("after {n} outputs");
            }) >> ops::leaf("Work", &one, Route::constant(0), |x: u32, _c| x)
                >> ops::merge(
                    "M",
                    &main,
                    Route::constant(0),
                    |a: &mut u32, x, _c| *a += x,
                    |a, _c| a,
                ),
        )
        .unwrap();
    assert!(rt.schedule(&g, 100).is_err());
    drop(rt);
    let log = hook.log.lock().unwrap().clone();
    let count = |k: char| {
        log.iter()
            .filter(|(kind, op, _, _)| *kind == k && op == "Work")
            .count()
    };
    assert_eq!(
        (count('s'), count('r')),
        (100, 100),
        "every send to Work has its receive"
    );
}

/// One worker runs the leaves of several inner split instances at once, their messages
/// interleaved in its queue: its gathered outputs share a batch only while they share a
/// frame (and schedule call), so each inner merge instance gets exactly its own inputs.
/// Without a hook (the threads' own fronts) and with an inactive one (the locked fronts).
#[test]
fn interleaved_frames_reach_their_own_merge_instances() {
    for hooked in [false, true] {
        let rt = if hooked {
            recorded().0
        } else {
            Runtime::builder().build()
        };
        let main = rt.collection::<()>("main", 1);
        let procs = rt.collection::<()>("proc", 3);
        let one = rt.collection::<()>("one", 1);
        let per = 2 * thread::BATCH_MAX as u64 + 5;
        let g = rt
            .graph(
                ops::split("Outer", &main, Route::constant(0), |n: u64, _c, out| {
                    (0..n).for_each(|k| out.post(k))
                }) >> ops::split("Inner", &procs, Route::round_robin(), move |k: u64, _c, out| {
                    (0..per).for_each(|j| out.post(k * 1_000_000 + j))
                }) >> ops::leaf("Work", &one, Route::constant(0), |x: u64, _c| x)
                    >> ops::merge(
                        "InnerSum",
                        &procs,
                        Route::by(|x: &u64, n| (x / 1_000_000) as usize % n),
                        // (instance's k, inputs, sum): every input must be of one k.
                        |a: &mut (Option<u64>, u64, u64), x: u64, _c| {
                            let k = x / 1_000_000;
                            assert_eq!(*a.0.get_or_insert(k), k, "an input of another instance");
                            a.1 += 1;
                            a.2 += x % 1_000_000;
                        },
                        |a, _c| (a.0.unwrap_or(u64::MAX), a.1, a.2),
                    )
                    >> ops::merge(
                        "OuterSum",
                        &main,
                        Route::constant(0),
                        |a: &mut Vec<(u64, u64, u64)>, x, _c| a.push(x),
                        |mut a, _c| {
                            a.sort_unstable();
                            a
                        },
                    ),
            )
            .unwrap();
        // Inputs in a wrong instance would leave some instance incomplete: a hang, caught.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for _ in 0..5 {
                let _ = tx.send(rt.schedule(&g, 6).map_err(|e| e.to_string()));
            }
        });
        let want: Vec<(u64, u64, u64)> = (0..6).map(|k| (k, per, per * (per - 1) / 2)).collect();
        for _ in 0..5 {
            let got = rx
                .recv_timeout(Duration::from_secs(20))
                .expect("a schedule call hung");
            assert_eq!(got, Ok(want.clone()), "hooked: {hooked}");
        }
    }
}

/// The delivery rule (ARCHITECTURE, invariants): a step's outputs reach their destination
/// by the end of that step, with no hook, a streaming hook or one that may hold. A worker
/// takes two tasks at once (a split's batch); the second waits, bounded, until the merge
/// has absorbed the first one's result, which it sees only if that result left when its
/// step ended rather than once the worker ran out of work.
#[test]
fn a_step_outputs_leave_by_the_end_of_that_step_in_every_mode() {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    let streaming = || {
        Arc::new(Streamer {
            holding: AtomicBool::new(false),
            log: Mutex::default(),
            streamed: Default::default(),
            singles: Default::default(),
            session: Default::default(),
        })
    };
    let holding = streaming();
    holding.holding.store(true, SeqCst);
    let modes: [(&str, Runtime); 3] = [
        ("no hook", Runtime::builder().build()),
        ("a streaming hook", Runtime::builder().hook(streaming()).build()),
        ("a hook that may hold", Runtime::builder().hook(holding).build()),
    ];
    for (mode, rt) in modes {
        let main = rt.collection::<()>("main", 1);
        let work = rt.collection::<()>("w", 1);
        let absorbed_first = Arc::new(AtomicBool::new(false));
        let (seen, set) = (absorbed_first.clone(), absorbed_first);
        let g = rt
            .graph(
                ops::split("S", &main, Route::constant(0), |n: u32, _c, out| {
                    (0..n).for_each(|i| out.post(i))
                }) >> ops::leaf("Work", &work, Route::constant(0), move |x: u32, _c| {
                    if x == 0 {
                        return "first".to_owned();
                    }
                    let t0 = std::time::Instant::now();
                    while !seen.load(SeqCst) {
                        // Far longer than any scheduling delay; a run that passes
                        // waits microseconds.
                        if t0.elapsed() > Duration::from_secs(30) {
                            return "the first result had not arrived".to_owned();
                        }
                        std::thread::sleep(Duration::from_micros(100));
                    }
                    "the first result had arrived".to_owned()
                }) >> ops::merge(
                    "M",
                    &main,
                    Route::constant(0),
                    move |a: &mut Vec<String>, x: String, _c| {
                        if x == "first" {
                            set.store(true, SeqCst);
                        }
                        a.push(x);
                    },
                    |a, _c| a,
                ),
            )
            .unwrap();
        let got = rt.schedule(&g, 2).unwrap();
        assert!(
            got.contains(&"the first result had arrived".to_owned()),
            "with {mode}: {got:?}"
        );
    }
}

/// A debugger attaching while a step gathers outputs that travel one by one (to a split:
/// no batches): those posted before it attached had no send event, so they go through the
/// send hook when the step ends; each message the debugger hears received was sent first.
#[test]
fn single_outputs_gathered_before_a_debugger_attached_get_their_send() {
    let hook = Arc::new(Switch::default());
    let rt = Runtime::builder().hook(hook.clone()).build();
    let main = rt.collection::<()>("main", 1);
    let w = rt.collection::<()>("w", 1);
    let h = hook.clone();
    let g = rt
        .graph(
            ops::split("S", &main, Route::constant(0), move |n: u32, _c, out| {
                for i in 0..n {
                    if i == 2 {
                        h.on.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                    out.post(i);
                }
            }) >> ops::split("T", &w, Route::constant(0), |x: u32, _c, out| out.post(x))
                >> ops::merge(
                    "M1",
                    &w,
                    Route::constant(0),
                    |a: &mut u32, x: u32, _c| *a += x,
                    |a, _c| a,
                )
                >> ops::merge(
                    "M2",
                    &main,
                    Route::constant(0),
                    |a: &mut u32, x: u32, _c| *a += x,
                    |a, _c| a,
                ),
        )
        .unwrap();
    assert_eq!(rt.schedule(&g, 4).unwrap(), 6);
    let mut to_t: Vec<String> = hook
        .sends
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.starts_with("T:"))
        .cloned()
        .collect();
    to_t.sort();
    assert_eq!(to_t, ["T:0.0", "T:0.1", "T:0.2", "T:0.3"]);
}

/// A step that fails after posting (a stream's absorb that panics): its call fails, and
/// the outputs whose sends a debugger heard of still reach their thread (which drops them
/// as it drops anything of a failed call), so every reported send has its receive.
#[test]
fn a_failing_step_still_enqueues_the_outputs_a_debugger_heard_of() {
    let (rt, rec) = recorded();
    let main = rt.collection::<()>("main", 1);
    let procs = rt.collection::<()>("proc", 1);
    let g = rt
        .graph(
            ops::split("S", &main, Route::constant(0), |n: u32, _c, out| {
                (0..n).for_each(|i| out.post(i))
            }) >> ops::stream(
                "Echo",
                &procs,
                Route::constant(0),
                |_: &mut (), x: u32, _c, out| {
                    out.post(x);
                    assert!(x != 2, "Echo fails after posting 2");
                },
                |(), _c, _out| {},
            ) >> ops::merge(
                "M",
                &main,
                Route::constant(0),
                |a: &mut u32, x: u32, _c| *a += x,
                |a, _c| a,
            ),
        )
        .unwrap();
    let e = rt.schedule(&g, 4).unwrap_err().to_string();
    assert!(e.contains("Echo fails after posting 2"), "{e}");
    // The call fails first, then the outputs are pushed: wait for the threads to end.
    drop(g);
    drop(rt);
    let sent: HashSet<String> = rec
        .sends
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.1.as_deref() == Some("M"))
        .map(|s| s.0.clone())
        .collect();
    let received: HashSet<String> = rec
        .recvs
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.1 == "main[0]")
        .map(|r| r.0.clone())
        .collect();
    assert!(
        sent.contains("0.2"),
        "the failing step's output was reported: {sent:?}"
    );
    assert!(sent.is_subset(&received), "sent {sent:?}, received {received:?}");
}

/// A hook that keeps each absorb stop's accumulator, when it asks for them.
struct Accumulators {
    ask: bool,
    seen: Mutex<Vec<Option<serde_json::Value>>>,
}

impl Hook for Accumulators {
    fn instance_states(&self) -> bool {
        self.ask
    }
    fn on_stop(&self, ev: &mut StepEvent<'_>) {
        if ev.step == StepKind::Absorb {
            let acc = ev.access.instance_json().cloned();
            self.seen.lock().unwrap().push(acc);
        }
    }
}

#[test]
fn a_serde_merge_shows_its_accumulator_at_each_absorb_stop() {
    for (ask, serde) in [(true, true), (true, false), (false, true)] {
        let hook = Arc::new(Accumulators {
            ask,
            seen: Mutex::new(Vec::new()),
        });
        let rt = Runtime::builder().hook(hook.clone()).build();
        let main = rt.collection::<()>("main", 1);
        let split = || {
            ops::split("S", &main, Route::constant(0), |n: u64, _c, out| {
                for i in 1..=n {
                    out.post(i);
                }
            })
        };
        let add = |acc: &mut u64, x: u64, _c: &mut Ctx<'_, ()>| *acc += x;
        let g = if serde {
            rt.graph(split() >> ops::merge_serde("M", &main, Route::constant(0), add, |acc, _c| acc))
        } else {
            rt.graph(split() >> ops::merge("M", &main, Route::constant(0), add, |acc, _c| acc))
        }
        .unwrap();
        assert_eq!(rt.schedule(&g, 3).unwrap(), 6);
        let seen = hook.seen.lock().unwrap().clone();
        let expect: Vec<Option<serde_json::Value>> = if ask && serde {
            // One thread: the inputs arrive in the order posted.
            vec![Some(1.into()), Some(3.into()), Some(6.into())]
        } else {
            vec![None, None, None]
        };
        assert_eq!(seen, expect, "asked: {ask}, merge_serde: {serde}");
    }
}
