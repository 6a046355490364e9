//! The hold policy the debugger pushes, and the decisions read from it: which events hold
//! their thread. Decided in the program, so an event the policy does not hold costs no
//! round trip.
//!
//! The switches (step mode, ack every event, content) are atomics read on every event; the
//! rules (breakpoints, paused threads) sit behind a mutex taken only while `has_policy`
//! says some exist, so a free run never locks it. Nothing here knows the runtime: threads
//! and operations are their indexes.

use super::lock;
use racetrack_protocol::HoldReason;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Mutex;

/// The policy as the debugger last set it (cleared at detach).
#[derive(Default)]
pub(super) struct Policy {
    step_mode: AtomicBool,
    ack_all: AtomicBool,
    /// Sends carry their content, so they are streamed as full events.
    content: AtomicBool,
    /// Some breakpoint or paused thread exists: only then is `rules` locked.
    has_policy: AtomicBool,
    rules: Mutex<Rules>,
}

#[derive(Default)]
struct Rules {
    /// (operation id, thread global index) → trace from this breakpoint.
    breaks: HashMap<(usize, usize), bool>,
    paused: HashSet<usize>,
}

impl Policy {
    /// Why a step of operation `op` on thread `thread` is held before it starts, with
    /// whether the breakpoint holding it traces the step's outputs; `traced`: its input is
    /// traced (and it is not a final step).
    pub(super) fn start_reason_of(
        &self,
        thread: usize,
        op: usize,
        traced: bool,
    ) -> Option<(HoldReason, bool)> {
        if self.step_mode.load(Relaxed) {
            return Some((HoldReason::Step, false));
        }
        if self.has_policy.load(Relaxed) {
            let p = lock(&self.rules);
            if p.paused.contains(&thread) {
                return Some((HoldReason::Pause, false));
            }
            if let Some(trace) = p.breaks.get(&(op, thread)) {
                return Some((HoldReason::Break, *trace));
            }
        }
        if traced {
            return Some((HoldReason::Trace, false));
        }
        self.ack_all.load(Relaxed).then_some((HoldReason::AckAll, false))
    }

    /// Why a send or a stop on `thread` is held (breakpoints and tracing hold starts only).
    pub(super) fn other_reason(&self, thread: usize) -> Option<HoldReason> {
        if self.step_mode.load(Relaxed) {
            return Some(HoldReason::Step);
        }
        if self.has_policy.load(Relaxed) && lock(&self.rules).paused.contains(&thread) {
            return Some(HoldReason::Pause);
        }
        self.ack_all.load(Relaxed).then_some(HoldReason::AckAll)
    }

    /// Whether anything could hold, edit or trace a message: the runtime must then report
    /// messages one by one rather than stream its batches.
    pub(super) fn may_hold(&self) -> bool {
        self.step_mode.load(Relaxed)
            || self.ack_all.load(Relaxed)
            || self.content.load(Relaxed)
            || self.has_policy.load(Relaxed)
    }

    /// Whether sends are streamed with their content.
    pub(super) fn content(&self) -> bool {
        self.content.load(Relaxed)
    }

    /// Whether a tracing breakpoint is set on operation `op` at thread `thread`: a trace
    /// box checked while a step was held applies when it resumes.
    pub(super) fn break_traces(&self, op: usize, thread: usize) -> bool {
        self.has_policy.load(Relaxed) && lock(&self.rules).breaks.get(&(op, thread)) == Some(&true)
    }

    pub(super) fn set_step_mode(&self, on: bool) {
        self.step_mode.store(on, Relaxed);
    }

    pub(super) fn set_ack_all(&self, on: bool) {
        self.ack_all.store(on, Relaxed);
    }

    pub(super) fn set_content(&self, on: bool) {
        self.content.store(on, Relaxed);
    }

    /// Set (`on`) or clear the breakpoint on operation `op` at each of `threads`.
    pub(super) fn set_breaks(&self, op: usize, threads: Vec<usize>, on: bool, trace: bool) {
        let mut p = lock(&self.rules);
        for t in threads {
            if on {
                p.breaks.insert((op, t), trace);
            } else {
                p.breaks.remove(&(op, t));
            }
        }
        self.has_policy
            .store(!p.breaks.is_empty() || !p.paused.is_empty(), Relaxed);
    }

    pub(super) fn set_paused(&self, thread: usize, on: bool) {
        let mut p = lock(&self.rules);
        if on {
            p.paused.insert(thread);
        } else {
            p.paused.remove(&thread);
        }
        self.has_policy
            .store(!p.breaks.is_empty() || !p.paused.is_empty(), Relaxed);
    }

    /// Back to free run (a detach): nothing holds any more.
    pub(super) fn clear(&self) {
        self.step_mode.store(false, Relaxed);
        self.ack_all.store(false, Relaxed);
        self.content.store(false, Relaxed);
        self.has_policy.store(false, Relaxed);
        *lock(&self.rules) = Rules::default();
    }
}
