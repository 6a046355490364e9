use super::play::Queue;
use crate::choice::Pending;
use crate::{ops, Route, Runtime};
use racetrack_runtime::hook::{Hook, StepEvent, StepKind};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// At the merge's first absorb, waits until every other input is pending, then notes the
/// choice point's alternatives: the sender of the message about to start, and the
/// senders of those pending.
#[derive(Default)]
struct Alternatives {
    seen: Mutex<Option<(u64, Vec<u64>)>>,
}

impl Hook for Alternatives {
    fn on_start(&self, ev: &mut StepEvent<'_>) {
        if &*ev.op.name != "Sum" || ev.step != StepKind::Absorb {
            return;
        }
        let mut seen = self.seen.lock().expect("lock");
        if seen.is_some() {
            return;
        }
        // A functional wait, not a timing assertion: the leaves run on their own.
        let deadline = Instant::now() + Duration::from_secs(30);
        while ev.access.pending().len() < 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        *seen = Some((super::sender_code(ev.from), Queue(&ev.access).senders()));
    }
}

#[test]
fn a_step_start_offers_the_senders_of_every_message_the_thread_could_take() {
    let hook = Arc::new(Alternatives::default());
    let rt = Runtime::builder().hook(hook.clone()).build();
    // Global thread indexes: main[0] is 0, proc[0] 1, proc[1] 2; sender codes add one.
    let main = rt.collection::<()>("main", 1);
    let workers = rt.collection::<()>("proc", 2);
    let graph = rt
        .graph(
            ops::split("Split", &main, Route::constant(0), |n: u32, _ctx, out| {
                for i in 0..n {
                    out.post(i);
                }
            }) >> ops::leaf("Square", &workers, Route::round_robin(), |x: u32, _ctx| {
                u64::from(x * x)
            }) >> ops::merge(
                "Sum",
                &main,
                Route::constant(0),
                |acc: &mut u64, x: u64, _ctx| *acc += x,
                |acc, _ctx| acc,
            ),
        )
        .expect("well-formed graph");
    assert_eq!(rt.schedule(&graph, 4).expect("no panic"), 1 + 4 + 9);
    let (next, mut pending) = hook.seen.lock().expect("lock").take().expect("an absorb");
    pending.push(next);
    pending.sort_unstable();
    // Two squares from each worker: the one about to start and the three pending.
    assert_eq!(pending, [2, 2, 3, 3]);
}
