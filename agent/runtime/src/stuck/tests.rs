#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::{ops, FlowGraph, Hook, Route, Runtime, StuckWait};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// Sends what `on_stuck` tells, as (thread, step's op, [(where, message, op)]).
type Told = Vec<(String, Option<String>, Vec<(String, String, String)>)>;

struct Tell(Mutex<mpsc::Sender<Told>>);

impl Hook for Tell {
    fn on_stuck(&self, waits: &[StuckWait]) -> bool {
        let told = waits
            .iter()
            .map(|w| {
                let queued = w
                    .queued
                    .iter()
                    .map(|(t, m, o)| (t.name.to_string(), m.to_string(), o.name.to_string()))
                    .collect();
                (
                    w.thread.name.to_string(),
                    w.step.as_ref().map(|s| s.op.name.to_string()),
                    queued,
                )
            })
            .collect();
        let _ = self.0.lock().unwrap().send(told);
        true
    }
}

/// [`nested_once`] until its run gets stuck: whether `Outer` steps on several threads
/// wait for each other depends on when each started (a thread that took its `Inner`
/// message before its own `Outer` one serves the other's call, and the run ends). What
/// the hook told; `None` if a run got stuck and nothing naming `want` threads came, or if
/// ten runs in a row ended without getting stuck.
fn nested(threads: usize, inputs: usize, target: fn(usize) -> usize, want: usize) -> Option<Told> {
    for _ in 0..10 {
        match nested_once(threads, inputs, target, want) {
            Run::Told(told) => return Some(told),
            Run::NotTold => return None,
            Run::Ended => {}
        }
    }
    None
}

/// One run of [`nested_once`].
enum Run {
    Told(Told),
    /// Stuck (it did not end), and nothing naming the threads came within 20 s.
    NotTold,
    /// It ended without getting stuck.
    Ended,
}

/// A runtime whose `Outer` leaf, for input `i` on `proc[i % threads]`, schedules `Inner`
/// on `proc[target(i) % threads]`, run in the background; what the hook told within 20 s
/// that names `want` threads (told again as more get stuck).
fn nested_once(threads: usize, inputs: usize, target: fn(usize) -> usize, want: usize) -> Run {
    let (tx, rx) = mpsc::channel();
    let rt = Runtime::builder().hook(Arc::new(Tell(Mutex::new(tx)))).build();
    let main = rt.collection::<()>("main", 1);
    let procs = rt.collection::<()>("proc", threads);
    let inner: Arc<OnceLock<FlowGraph<usize, usize>>> = Arc::new(OnceLock::new());
    let g = rt
        .graph(ops::leaf(
            "Inner",
            &procs,
            Route::by(move |x: &usize, _| target(*x) % threads),
            |x: usize, _| x + 1,
        ))
        .unwrap();
    let _ = inner.set(g);
    let (rt2, inner2) = (rt.handle(), inner.clone());
    let outer = rt
        .graph(
            ops::split("Split", &main, Route::constant(0), move |n: usize, _, out| {
                for i in 0..n {
                    out.post(i);
                }
            }) >> ops::leaf(
                "Outer",
                &procs,
                Route::by(move |x: &usize, _| *x % threads),
                move |x: usize, _| rt2.schedule(inner2.get().unwrap(), x).unwrap(),
            ) >> ops::merge(
                "Sum",
                &main,
                Route::constant(0),
                |a: &mut usize, x: usize, _| *a += x,
                |a, _| a,
            ),
        )
        .unwrap();
    // The runtime stays with its deadlocked threads (the test process ends them).
    std::thread::spawn(move || rt.schedule(&outer, inputs));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) else {
            return Run::NotTold;
        };
        match rx.recv_timeout(left) {
            Ok(told) if told.len() == want => return Run::Told(told),
            Ok(_) => {}
            // The run ended and dropped its runtime, with the hook.
            Err(mpsc::RecvTimeoutError::Disconnected) => return Run::Ended,
            Err(mpsc::RecvTimeoutError::Timeout) => return Run::NotTold,
        }
    }
}

#[test]
fn a_step_scheduling_onto_its_own_thread_is_told_stuck() {
    let told = nested(2, 1, |i| i, 1).expect("told stuck");
    assert_eq!(told.len(), 1, "{told:?}");
    let (thread, _step, queued) = &told[0];
    assert_eq!(thread, "proc[0]");
    assert_eq!(queued.len(), 1, "{told:?}");
    assert_eq!(
        (queued[0].0.as_str(), queued[0].2.as_str()),
        ("proc[0]", "Inner"),
        "{told:?}"
    );
}

#[test]
fn two_steps_scheduling_onto_each_other_are_told_stuck_together() {
    let told = nested(2, 2, |i| 1 - i, 2).expect("told stuck");
    let mut threads: Vec<&str> = told.iter().map(|(t, _, _)| t.as_str()).collect();
    threads.sort_unstable();
    assert_eq!(threads, ["proc[0]", "proc[1]"], "{told:?}");
    for (t, _, queued) in &told {
        let other = if t == "proc[0]" { "proc[1]" } else { "proc[0]" };
        assert_eq!(
            queued.iter().map(|q| q.0.as_str()).collect::<Vec<_>>(),
            [other],
            "{told:?}"
        );
    }
}

#[test]
fn three_workers_in_a_cycle_are_told_stuck_together() {
    // Two inputs per worker, each worker's call waits at the next. (Whether a call's
    // message waits in the inbox or in what its worker already took depends on timing:
    // the end-to-end test under the agent, slower to start steps, sees both.)
    for _ in 0..5 {
        let told = nested(3, 6, |i| i + 1, 3).expect("all three told stuck");
        for (t, _, queued) in &told {
            assert_eq!(queued.len(), 1, "{t}: {told:?}");
            assert_ne!(&queued[0].0, t, "{told:?}");
        }
    }
}

#[test]
fn a_nested_schedule_onto_a_free_thread_is_not_stuck() {
    // proc[0]'s step schedules onto proc[1], which is free: it returns, nothing is told.
    let (tx, rx) = mpsc::channel();
    let rt = Runtime::builder().hook(Arc::new(Tell(Mutex::new(tx)))).build();
    let main = rt.collection::<()>("main", 1);
    let procs = rt.collection::<()>("proc", 2);
    let inner = rt
        .graph(ops::leaf("Inner", &procs, Route::constant(1), |x: usize, _| {
            // Long enough for the caller to look more than once meanwhile.
            std::thread::sleep(Duration::from_millis(250));
            x + 1
        }))
        .unwrap();
    let rt2 = rt.handle();
    let outer = rt
        .graph(
            ops::leaf("Outer", &procs, Route::constant(0), move |x: usize, _| {
                rt2.schedule(&inner, x).unwrap() * 10
            }) >> ops::leaf("Done", &main, Route::constant(0), |x: usize, _| x),
        )
        .unwrap();
    assert_eq!(rt.schedule(&outer, 4).unwrap(), 50);
    assert!(rx.try_recv().is_err(), "nothing stuck");
}

/// The outer call fails while a nested call's message waits behind a busy step: the
/// runtime is dropped all the same (the nested call gives up), with or without a hook.
fn drop_after_failure(hooked: bool) -> bool {
    let (tx, _rx) = mpsc::channel();
    let b = Runtime::builder();
    let rt = if hooked {
        b.hook(Arc::new(Tell(Mutex::new(tx)))).build()
    } else {
        b.build()
    };
    let main = rt.collection::<()>("main", 1);
    let procs = rt.collection::<()>("proc", 3);
    let inner = rt
        .graph(ops::leaf("Inner", &procs, Route::constant(1), |x: usize, _| {
            x + 1
        }))
        .unwrap();
    let h = rt.handle();
    let outer = rt
        .graph(
            ops::split("Split", &main, Route::constant(0), |n: usize, _, out| {
                for i in 0..n {
                    out.post(i);
                }
            }) >> ops::leaf(
                "Outer",
                &procs,
                Route::by(|x: &usize, _| *x % 3),
                move |x: usize, _| {
                    match x {
                        // Schedules onto proc[1], busy until after the failure.
                        0 => h.schedule(&inner, x).unwrap_or(0),
                        1 => {
                            std::thread::sleep(Duration::from_millis(400));
                            x
                        }
                        _ => {
                            std::thread::sleep(Duration::from_millis(100));
                            panic!("the outer call fails")
                        }
                    }
                },
            ) >> ops::merge(
                "Sum",
                &main,
                Route::constant(0),
                |a: &mut usize, x: usize, _| *a += x,
                |a, _| a,
            ),
        )
        .unwrap();
    assert!(rt.schedule(&outer, 3).is_err());
    let (dtx, drx) = mpsc::channel();
    std::thread::spawn(move || {
        drop(rt);
        let _ = dtx.send(());
    });
    // A deadline for a hang, not a timing: the drop takes well under a second.
    drx.recv_timeout(Duration::from_secs(20)).is_ok()
}

#[test]
fn dropping_the_runtime_ends_a_nested_call_left_waiting() {
    assert!(drop_after_failure(true), "Runtime::drop hung (with a hook)");
    assert!(drop_after_failure(false), "Runtime::drop hung (no hook)");
}
