//! The runtime as the core's [`Debuggee`]: threads, queue listings and the attach snapshot
//! read through the runtime's `RuntimeView`.

use super::super::front::{Debuggee, Thread};
use super::convert::{entry, thread, thread_snapshot};
use racetrack_protocol::{QueueEntry, ThreadSnapshot};
use racetrack_runtime::RuntimeView;
use serde_json::Value;

impl Debuggee for RuntimeView {
    fn threads(&self) -> Vec<Thread> {
        RuntimeView::threads(self).iter().map(|t| thread(t)).collect()
    }

    fn thread_count(&self) -> usize {
        RuntimeView::thread_count(self)
    }

    fn queue(&self, global: usize, max: usize, content: bool) -> (Vec<QueueEntry>, usize) {
        let Some(info) = RuntimeView::threads(self).get(global).cloned() else {
            return (Vec::new(), 0);
        };
        let pending = self.pending(global).unwrap_or_default();
        let more = pending.len().saturating_sub(max);
        let messages = pending
            .iter()
            .take(max)
            .map(|q| {
                let c = content.then(|| {
                    self.pending_content(global, &q.id)
                        .and_then(Result::ok)
                        .unwrap_or(Value::Null)
                });
                entry(q, &info.name, c)
            })
            .collect();
        (messages, more)
    }

    fn snapshot(&self, per_thread: usize, cut: &mut dyn FnMut(Vec<ThreadSnapshot>)) {
        RuntimeView::snapshot(self, per_thread, |threads| {
            cut(threads.into_iter().map(thread_snapshot).collect());
        });
    }
}
