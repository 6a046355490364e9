//! Schedule calls that can never return: a step that calls [`Runtime::schedule`] blocks
//! its thread until that call's graph is done, and a thread runs one step at a time. So
//! when a message (or a merge's final step) of that call waits in the queue of the very
//! thread that called it, or of another thread itself blocked the same way, in a cycle,
//! none of them can ever go on: a deadlock. The caller's wait looks for one every
//! [`LOOK`] and tells the hook once ([`Hook::on_stuck`]); the program is left as it is.
//!
//! Only a schedule called from one of the runtime's own threads (or through a handle)
//! pays for this: a timed wait instead of a plain one, and with a hook the look. A call
//! still waiting when the runtime is dropped gives up, whatever blocks it.
//!
//! [`Runtime::schedule`]: crate::Runtime::schedule
//! [`Hook::on_stuck`]: crate::Hook::on_stuck

use super::hook::{OpInfo, ThreadInfo};
use super::ids::MsgId;
use super::message::{Item, Outcome, Sched};
use super::thread::{lock, CurrentStep, ThreadShared};
use super::Shared;
use std::cell::Cell;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

/// How often a blocked caller looks for a deadlock.
const LOOK: Duration = Duration::from_millis(100);

thread_local! {
    /// The runtime (its id) and global thread index this OS thread runs, if it is one.
    static ON: Cell<Option<(usize, usize)>> = const { Cell::new(None) };
}

/// The current OS thread is thread `global` of runtime `runtime`.
pub(crate) fn enter_thread(runtime: usize, global: usize) {
    ON.with(|c| c.set(Some((runtime, global))));
}

/// The calls blocked in a nested schedule, innermost last per thread, and the threads
/// the hook heard are stuck.
#[derive(Default)]
pub(crate) struct Nested {
    calls: Vec<(usize, Arc<Sched>)>,
    told: BTreeSet<usize>,
}

/// One thread that can never go on: the step it is in, and what its schedule call waits
/// for, queued behind other stuck steps (thread, message, operation).
#[derive(Debug, Clone)]
pub struct StuckWait {
    /// The blocked thread.
    pub thread: Arc<ThreadInfo>,
    /// The step that called `schedule` (known while a hook tracks steps).
    pub step: Option<CurrentStep>,
    /// The messages of its call that wait at stuck threads: where, which, for what.
    pub queued: Vec<(Arc<ThreadInfo>, MsgId, Arc<OpInfo>)>,
}

/// The global index of the runtime thread this is, if `sh`'s.
pub(crate) fn caller(sh: &Shared) -> Option<usize> {
    ON.with(Cell::get).filter(|(rt, _)| *rt == sh.id).map(|(_, g)| g)
}

/// Wait for schedule call `sched`'s outcome, on runtime thread `me` if it is one: with a
/// hook, looking for a deadlock; in any case giving up (`None`) once the runtime is
/// being dropped, since its threads take no more messages.
pub(crate) fn wait(
    sh: &Shared,
    me: Option<usize>,
    sched: &Arc<Sched>,
    rx: &Receiver<Outcome>,
) -> Option<Outcome> {
    let watched = me.filter(|_| sh.hook.is_some());
    if let Some(me) = watched {
        lock(&sh.nested).calls.push((me, sched.clone()));
    }
    let got = loop {
        match rx.recv_timeout(LOOK) {
            Ok(out) => break Some(out),
            Err(RecvTimeoutError::Disconnected) => break None,
            Err(RecvTimeoutError::Timeout) if sh.stopping.load(Ordering::Relaxed) => break None,
            Err(RecvTimeoutError::Timeout) if watched.is_some() => look(sh),
            Err(RecvTimeoutError::Timeout) => {}
        }
    };
    if let Some(me) = watched {
        let mut n = lock(&sh.nested);
        if let Some(i) = n
            .calls
            .iter()
            .rposition(|(t, s)| *t == me && Arc::ptr_eq(s, sched))
        {
            n.calls.remove(i);
        }
    }
    got
}

/// Tell the hook the threads that can never go on, if some are not told yet.
fn look(sh: &Shared) {
    let calls: Vec<(usize, Arc<Sched>)> = {
        let n = lock(&sh.nested);
        // A thread's innermost call is the one it is blocked in.
        let mut inner: Vec<(usize, Arc<Sched>)> = Vec::new();
        for (t, s) in &n.calls {
            inner.retain(|(u, _)| u != t);
            inner.push((*t, s.clone()));
        }
        inner
    };
    let threads: Vec<Option<Arc<ThreadShared>>> = calls.iter().map(|(t, _)| sh.thread(*t)).collect();
    // Which blocked threads hold an item of each blocked thread's call.
    let holds: Vec<Vec<(usize, MsgId, Arc<OpInfo>)>> = calls
        .iter()
        .map(|(_, s)| {
            threads
                .iter()
                .enumerate()
                .filter_map(|(j, t)| t.as_ref()?.first_of(s).map(|(id, op)| (j, id, op)))
                .collect()
        })
        .collect();
    // The greatest set of blocked threads each of whose call waits on one of the set.
    let mut stuck: Vec<bool> = vec![true; calls.len()];
    loop {
        let out: Vec<usize> = (0..calls.len())
            .filter(|&i| stuck[i] && !holds[i].iter().any(|(j, _, _)| stuck[*j]))
            .collect();
        if out.is_empty() {
            break;
        }
        out.into_iter().for_each(|i| stuck[i] = false);
    }
    let set: Vec<usize> = (0..calls.len()).filter(|&i| stuck[i]).collect();
    if set.iter().all(|&i| lock(&sh.nested).told.contains(&calls[i].0)) {
        return;
    }
    let op = |i: usize| lock(&sh.ops).0.get(i).cloned();
    let waits: Vec<StuckWait> = set
        .iter()
        .filter_map(|&i| {
            let t = threads[i].as_ref()?;
            Some(StuckWait {
                thread: t.info.clone(),
                step: t.current_step(&op),
                queued: holds[i]
                    .iter()
                    .filter(|(j, _, _)| stuck[*j])
                    .filter_map(|(j, id, o)| {
                        Some((threads[*j].as_ref()?.info.clone(), id.clone(), o.clone()))
                    })
                    .collect(),
            })
        })
        .collect();
    if sh.hook.as_ref().is_some_and(|h| h.on_stuck(&waits)) {
        lock(&sh.nested).told.extend(set.iter().map(|&i| calls[i].0));
    }
}

impl ThreadShared {
    /// The first item queued at this thread that belongs to schedule call `sched`: its
    /// message id (a merge's final step: its output id) and operation.
    pub(crate) fn first_of(&self, sched: &Arc<Sched>) -> Option<(MsgId, Arc<OpInfo>)> {
        self.queued_find(|it| match it {
            Item::Msg(env) if Arc::ptr_eq(&env.sched, sched) => Some((env.id.clone(), env.dest_op().clone())),
            Item::Batch(b) if Arc::ptr_eq(&b.handles.sched, sched) => {
                let op = b.handles.graph.nodes.get(b.node as usize)?.info.clone();
                Some((b.msgs.front()?.0.clone(), op))
            }
            Item::Finalize {
                graph,
                node,
                frame,
                sched: s,
            } if Arc::ptr_eq(s, sched) => Some((frame.prefix.clone(), graph.nodes.get(*node)?.info.clone())),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests;
