//! The hold policy the debugger pushes, and the decisions read from it: which events hold
//! their thread. Decided in the program, so an event the policy does not hold costs no
//! round trip.
//!
//! The switches (step mode, ack every event, content) are atomics read on every event; the
//! rules (breakpoints, paused threads) sit behind a mutex taken only while `has_policy`
//! says some exist, so a free run never locks it. Nothing here knows the runtime: threads
//! and operations are their indexes.

use super::lock;
use racetrack_protocol::{CallInfo, HoldReason, When};
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
    /// Conditional breakpoints, in the order they were set.
    conds: Vec<CondBreak>,
}

impl Rules {
    fn any(&self) -> bool {
        !(self.breaks.is_empty() && self.paused.is_empty() && self.conds.is_empty())
    }
}

/// A conditional breakpoint: it holds a start of `op` on `thread` (`None`: any) whose call
/// meets `when`, from the thread's `hit`-th such start on. Counts are per thread: a
/// thread's own order of starts does not depend on how threads interleave, so "the 3rd
/// send of rank 2" is the same call in every run.
pub(super) struct CondBreak {
    pub(super) op: Option<usize>,
    pub(super) thread: Option<usize>,
    pub(super) when: When,
    pub(super) hit: u64,
    pub(super) trace: bool,
    /// Matching starts seen so far, per thread.
    seen: HashMap<usize, u64>,
}

impl CondBreak {
    pub(super) fn new(op: Option<usize>, thread: Option<usize>, when: When, hit: u64, trace: bool) -> Self {
        Self {
            op,
            thread,
            when,
            hit,
            trace,
            seen: HashMap::new(),
        }
    }

    fn covers(&self, op: usize, thread: usize) -> bool {
        self.op.is_none_or(|o| o == op) && self.thread.is_none_or(|t| t == thread)
    }

    fn same_place(&self, other: &CondBreak) -> bool {
        (self.op, self.thread, &self.when) == (other.op, other.thread, &other.when)
    }

    /// Whether it holds this start; `count`: the start is new (not a held one checked
    /// again), so it counts towards `hit`.
    fn holds(&mut self, thread: usize, op: usize, call: Option<&CallInfo>, count: bool) -> bool {
        if !self.covers(op, thread) || !self.when.matches(call) {
            return false;
        }
        let seen = self.seen.entry(thread).or_default();
        if count {
            *seen += 1;
        }
        *seen >= self.hit
    }
}

impl Policy {
    /// Why a step of operation `op` on thread `thread` is held before it starts, with
    /// whether the breakpoint holding it traces the step's outputs; `traced`: its input is
    /// traced (and it is not a final step); `call`: the MPI call's parameters, for
    /// conditional breakpoints. `count`: this start is new (it counts towards the hit
    /// counts), not a held one checked again.
    pub(super) fn start_reason_of(
        &self,
        thread: usize,
        op: usize,
        traced: bool,
        call: Option<&CallInfo>,
        count: bool,
    ) -> Option<(HoldReason, bool)> {
        // Rules first: conditional breakpoints count every start, held or not.
        let rule = if self.has_policy.load(Relaxed) {
            self.rules_hold(thread, op, call, count)
        } else {
            None
        };
        if self.step_mode.load(Relaxed) {
            return Some((HoldReason::Step, false));
        }
        if rule.is_some() {
            return rule;
        }
        if traced {
            return Some((HoldReason::Trace, false));
        }
        self.ack_all.load(Relaxed).then_some((HoldReason::AckAll, false))
    }

    /// Why the rules (pauses, breakpoints) hold a start, counting it for the conditional
    /// breakpoints it meets when `count`.
    fn rules_hold(
        &self,
        thread: usize,
        op: usize,
        call: Option<&CallInfo>,
        count: bool,
    ) -> Option<(HoldReason, bool)> {
        let mut p = lock(&self.rules);
        let mut cond = None;
        for c in &mut p.conds {
            if c.holds(thread, op, call, count) {
                cond = cond.or(Some(c.trace));
            }
        }
        if p.paused.contains(&thread) {
            return Some((HoldReason::Pause, false));
        }
        if let Some(trace) = p.breaks.get(&(op, thread)) {
            return Some((HoldReason::Break, *trace));
        }
        cond.map(|trace| (HoldReason::Break, trace))
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
        if !self.has_policy.load(Relaxed) {
            return false;
        }
        let p = lock(&self.rules);
        p.breaks.get(&(op, thread)) == Some(&true) || p.conds.iter().any(|c| c.trace && c.covers(op, thread))
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
        self.has_policy.store(p.any(), Relaxed);
    }

    /// Set a conditional breakpoint (replacing the one on the same operation, thread and
    /// condition, whose counts restart), or clear that one (`on` false).
    pub(super) fn set_cond(&self, c: CondBreak, on: bool) {
        let mut p = lock(&self.rules);
        p.conds.retain(|old| !old.same_place(&c));
        if on {
            p.conds.push(c);
        }
        self.has_policy.store(p.any(), Relaxed);
    }

    /// Clear every breakpoint, conditional or not, on operation `op` (`None`: on every
    /// operation) at `thread` (`None`: at every thread).
    pub(super) fn clear_breaks(&self, op: Option<usize>, thread: Option<usize>) {
        let mut p = lock(&self.rules);
        let here = |o: usize, t: usize| op.is_none_or(|x| x == o) && thread.is_none_or(|x| x == t);
        p.breaks.retain(|&(o, t), _| !here(o, t));
        p.conds
            .retain(|c| !(op.is_none_or(|x| c.op == Some(x)) && thread.is_none_or(|x| c.thread == Some(x))));
        self.has_policy.store(p.any(), Relaxed);
    }

    pub(super) fn set_paused(&self, thread: usize, on: bool) {
        let mut p = lock(&self.rules);
        if on {
            p.paused.insert(thread);
        } else {
            p.paused.remove(&thread);
        }
        self.has_policy.store(p.any(), Relaxed);
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
