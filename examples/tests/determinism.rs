//! Message ids are deterministic: with random delays in every operation, 20 runs of
//! `mergesort` produce the identical set of (operation, message id) pairs.

use racetrack_agent::hook::{Hook, SendEvent, StepEvent};
use racetrack_agent::Runtime;
use racetrack_examples::mergesort::{run, Config};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Ids(Mutex<BTreeSet<String>>);

impl Hook for Ids {
    fn on_start(&self, ev: &mut StepEvent<'_>) {
        self.0
            .lock()
            .expect("lock")
            .insert(format!("start {} {:?} {}", ev.op.name, ev.step, ev.msg_id));
    }
    fn on_send(&self, ev: &mut SendEvent<'_>) {
        let to = ev.to_op.map_or("(caller)".to_owned(), |o| o.name.to_string());
        self.0
            .lock()
            .expect("lock")
            .insert(format!("send {to} {}", ev.msg_id));
    }
}

#[test]
fn twenty_jittered_mergesort_runs_give_identical_ids() {
    let cfg = Config {
        threads: 4,
        size: 4000,
        chunks: 12,
        jitter_us: 400,
    };
    let mut first: Option<BTreeSet<String>> = None;
    for run_no in 0..20 {
        let ids = Arc::new(Ids::default());
        let rt = Runtime::builder().hook(ids.clone()).build();
        let report = run(&rt, &cfg).expect("runs");
        assert!(report.matches_reference, "run {run_no}");
        drop(rt);
        let set = std::mem::take(&mut *ids.0.lock().expect("lock"));
        // 1 split + 12 sorts + 12 merge absorbs + 1 merge final; 12 + 12 + 1 sends + input.
        assert_eq!(
            set.len(),
            1 + 12 + 12 + 1 + 12 + 12 + 1 + 1,
            "run {run_no}: {set:?}"
        );
        assert!(set.contains("start Sort Run 0.11") && set.contains("start Merge Final 0"));
        match &first {
            None => first = Some(set),
            Some(f) => assert_eq!(f, &set, "run {run_no} differs"),
        }
    }
}
