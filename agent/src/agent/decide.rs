//! One decision per event: whether it is reported at all, streamed, or holds its thread.
//! Front ends ask [`Agent::decide`] once per event and act on the answer; they never
//! sequence the policy's queries themselves (the start hold first, then the attachment,
//! then breakpoints, pauses, step mode and content mode).

use super::Agent;
use racetrack_protocol::{CallInfo, HoldReason};

/// Where an event happens, as the policy sees it. Threads and operations are the indexes
/// the front end registered (a thread's `global` index).
#[derive(Debug, Clone, Copy)]
pub enum Point<'a> {
    /// A step is about to start.
    Start {
        /// The thread.
        thread: usize,
        /// The operation.
        op: usize,
        /// The message it consumes is traced (a traced step holds; a merge's final step
        /// consumes none).
        traced: bool,
        /// An MPI call's parameters, which conditional breakpoints test.
        call: Option<&'a CallInfo>,
    },
    /// A step posts a message.
    Send {
        /// The sending thread; `None` for a send from outside the program's threads (a
        /// schedule call), which never holds.
        thread: Option<usize>,
    },
    /// A step finished.
    Stop {
        /// The thread.
        thread: usize,
    },
}

/// What to do with an event (see [`Agent::decide`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Nothing: no debugger is attached (and no start hold is pending).
    Skip,
    /// Report it and go on.
    Stream {
        /// A send while the debugger asked for contents: a full event carrying the
        /// message, not a compact record.
        content: bool,
    },
    /// Hold the thread ([`Agent::hold`]).
    Hold {
        /// Why.
        reason: HoldReason,
        /// The breakpoint holding a start traces the step's outputs.
        trace: bool,
    },
}

impl Agent {
    /// What to do with the event at `point`. Ask once per event: a start counts towards
    /// breakpoints' hit counts, and the first start takes the `RACETRACK_WAIT` hold (which
    /// holds even before a debugger attached). A held event re-checks with
    /// [`Agent::still_holds`] as the user changes the policy.
    #[inline]
    pub fn decide(&self, point: &Point<'_>) -> Decision {
        if !self.is_hot() {
            return Decision::Skip;
        }
        if let Point::Start { .. } = point {
            if self.take_start_hold() {
                return Decision::Hold {
                    reason: HoldReason::Wait,
                    trace: false,
                };
            }
        }
        if !self.is_attached() {
            return Decision::Skip;
        }
        let held = match *point {
            Point::Start {
                thread,
                op,
                traced,
                call,
            } => self.policy.start_reason_of(thread, op, traced, call, true),
            Point::Send { thread } => thread
                .and_then(|t| self.policy.other_reason(t))
                .map(|r| (r, false)),
            Point::Stop { thread } => self.policy.other_reason(thread).map(|r| (r, false)),
        };
        match held {
            Some((reason, trace)) => Decision::Hold { reason, trace },
            None => Decision::Stream {
                content: matches!(point, Point::Send { .. }) && self.policy.content(),
            },
        }
    }

    /// Whether the policy still holds the event at `point`, already held (as
    /// [`Agent::decide`], without counting a start again): a hold whose reason went away
    /// ends.
    pub fn still_holds(&self, point: &Point<'_>) -> bool {
        match *point {
            Point::Start {
                thread,
                op,
                traced,
                call,
            } => self
                .policy
                .start_reason_of(thread, op, traced, call, false)
                .is_some(),
            Point::Send { thread: Some(thread) } | Point::Stop { thread } => {
                self.policy.other_reason(thread).is_some()
            }
            Point::Send { thread: None } => false,
        }
    }
}
