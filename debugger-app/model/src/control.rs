//! What every front end keeps, the headless controller included: queues, held events, the
//! policy the user set, thread states, the connection's state and the log.

use crate::changes::Changes;
use crate::ids::{FastMap, HeldId, NodeKey, OpId, ProcId, ThreadKey};
use racetrack_protocol::{Event, QueueEntry, When};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// One line of the event log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// `error`, `panic`, `info`, `held`, or the program's `stdout` / `stderr`.
    pub level: &'static str,
    pub text: String,
}

/// An event the agent holds until the debugger continues it.
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    /// The suspended thread (a send of a schedule's input has none).
    pub thread: Option<ThreadKey>,
    /// The operation it is in (idem).
    pub op: Option<OpId>,
    /// The event as the agent sent it: a `send` carries the content an edit changes.
    pub event: Event,
}

/// A conditional breakpoint as the user set it (`break` with `when` or `hit`, or on
/// every operation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CondBreakpoint {
    /// The process it was set in.
    pub proc: ProcId,
    /// The operation (`*`: every one).
    pub op: String,
    /// The thread (`None`: every thread).
    pub thread: Option<String>,
    /// The condition on the call's parameters.
    pub when: When,
    /// Held from the thread's `hit`-th matching start on.
    pub hit: u64,
    /// Outputs of a step resumed from it are traced.
    pub trace: bool,
}

/// An MPI rank inside a call it did not report (an `unreported` event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreported {
    pub call: String,
    pub site: Option<String>,
    /// A covered call, begun before the debugger attached.
    pub before_attach: bool,
}

const LOG_MAX: usize = 10_000;

/// The controller's part of the model (see the crate's documentation).
#[derive(Debug, Default)]
pub struct Control {
    /// Pending messages per thread (a deque: queues can grow long and are consumed at the
    /// front). Entries from streamed receives list the id and operation, and the sender
    /// and type when a graph part saw the send.
    pub queues: FastMap<ThreadKey, VecDeque<QueueEntry>>,
    /// Pending messages per thread that the agent counted but did not list (a snapshot or
    /// `queue` reply of a very long queue lists its first messages): they are behind
    /// `queues`, and leave the count as they start.
    pub unlisted: FastMap<ThreadKey, usize>,
    /// The events that hold their thread now, until a `continue` or `released`.
    pub held: BTreeMap<HeldId, Held>,
    /// What the last `save_scenario` or `take_over` did, as the agent said.
    pub session_note: Option<String>,
    /// The last deadlock the job's debugger told (MPI jobs; kept after the exit).
    pub deadlock: Option<crate::deadlock::Deadlock>,
    /// MPI ranks inside a call the library does not report, as a sample found them,
    /// until the rank's next event.
    pub unreported: BTreeMap<ThreadKey, Unreported>,
    /// Breakpoints set: (op, thread) → trace.
    pub breakpoints: BTreeMap<NodeKey, bool>,
    /// Conditional breakpoints set, in the order they were set.
    pub conditional: Vec<CondBreakpoint>,
    /// Threads the user paused (every event of theirs holds), as the agent was told.
    pub paused: BTreeSet<ThreadKey>,
    /// Global step mode.
    pub step_mode: bool,
    /// Last thread states received.
    pub states: BTreeMap<ThreadKey, Value>,
    /// Events ingested (send, recv, start, stop).
    pub event_count: u64,
    /// Connected to an agent.
    pub attached: bool,
    /// The program exited (`Some(code)`), or the connection closed.
    pub exited: Option<Option<i32>>,
    /// The signal that killed the program, when one did.
    pub killed_by: Option<i32>,
    /// Errors, panics and notices, newest last (bounded).
    pub log: VecDeque<LogLine>,
}

impl Control {
    /// The held event of thread `t`, if it is suspended.
    pub fn held_of(&self, t: ThreadKey) -> Option<(HeldId, &Held)> {
        self.held
            .iter()
            .find(|(_, h)| h.thread == Some(t))
            .map(|(id, h)| (*id, h))
    }

    /// Thread `t`'s listed pending messages.
    pub fn queue(&self, t: ThreadKey) -> Option<&VecDeque<QueueEntry>> {
        self.queues.get(&t)
    }

    pub(crate) fn log(&mut self, changes: &mut Changes, level: &'static str, text: String) {
        if self.log.len() >= LOG_MAX {
            self.log.pop_front();
        }
        self.log.push_back(LogLine { level, text });
        changes.log_appended = changes.log_appended.saturating_add(1);
    }

    pub(crate) fn hold(&mut self, changes: &mut Changes, id: HeldId, held: Held) {
        self.held.insert(id, held);
        changes.held = true;
    }

    /// A message arrived in `t`'s queue at `position` (clamped to the queue).
    pub(crate) fn enqueue(
        &mut self,
        changes: &mut Changes,
        t: ThreadKey,
        position: usize,
        entry: QueueEntry,
    ) {
        let q = self.queues.entry(t).or_default();
        q.insert(position.min(q.len()), entry);
        changes.threads.insert(t);
    }

    /// What the agent listed of `t`'s queue replaces what the model had.
    pub(crate) fn set_queue(
        &mut self,
        changes: &mut Changes,
        t: ThreadKey,
        listed: &[QueueEntry],
        more: usize,
    ) {
        self.queues.insert(t, listed.iter().cloned().collect());
        self.unlisted.insert(t, more);
        changes.threads.insert(t);
    }

    /// A step of `t` took message `msg` for operation `op` from its queue.
    pub(crate) fn consume(&mut self, changes: &mut Changes, t: ThreadKey, msg: &str, op: &str) {
        let listed = self.queues.get_mut(&t).and_then(|q| {
            let i = q.iter().position(|m| m.id == msg && m.op == op)?;
            q.remove(i)
        });
        if listed.is_none() {
            if let Some(n) = self.unlisted.get_mut(&t).filter(|n| **n > 0) {
                *n -= 1;
            }
        }
        changes.threads.insert(t);
    }
}
