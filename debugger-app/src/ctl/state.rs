//! What the controller knows: its model (no graph part), recent events (for `wait until event`),
//! marks, verdicts, and the printing of stdout lines.

use super::wait::matches;
use super::SCENARIO_STOPPED;
use crate::conn::ConnEvent;
use crate::model::Model;
use racetrack_protocol::{CtlEvent, Event, Names, PackedEv};
use serde_json::Value;
use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// Printed bytes written to stdout at a time.
pub(super) const PRINT_CHUNK: usize = 64 * 1024;

/// Recent events as they arrived: single events, and packed frames kept whole (their
/// events are expanded only when a `wait` matches against them).
pub(super) enum Recent {
    /// Boxed: the slots stay small.
    Event(Box<Event>),
    Frame(Arc<Names>, Vec<PackedEv>),
}

impl Recent {
    pub(super) fn len(&self) -> usize {
        match self {
            Recent::Event(_) => 1,
            Recent::Frame(_, ps) => ps.len(),
        }
    }

    /// How many of the events, numbered from `first`, come after `mark` and match.
    pub(super) fn count_matching(&self, first: u64, mark: u64, pattern: &Value) -> usize {
        match self {
            Recent::Event(e) => usize::from(first > mark && matches(e, pattern)),
            Recent::Frame(names, ps) => {
                let kind = pattern.get("event").and_then(Value::as_str);
                ps.iter()
                    .zip(first..)
                    .filter(|(p, i)| {
                        *i > mark
                            && kind.is_none_or(|k| k == p.kind_name())
                            && names.expand((*p).clone()).is_ok_and(|e| matches(&e, pattern))
                    })
                    .count()
            }
        }
    }
}

#[derive(Default)]
pub(super) struct State {
    pub(super) model: Model,
    /// Recent events, with the arrival index of their first event.
    pub(super) recent: VecDeque<(u64, Recent)>,
    /// Events in `recent`.
    pub(super) recent_len: usize,
    /// Arrival index when the last command was sent (see [`Ctl::announced`]).
    pub(super) mark: u64,
    /// Events taken into `model` (and `recent`): the events thread prints a chunk before
    /// it takes it in, so this may be behind [`Ctl::announced`] for a moment.
    pub(super) ingested: u64,
    /// Arrival index when the last `continue` was sent (`wait until event`, `"since":"continue"`).
    pub(super) continue_mark: u64,
    /// Held events a command of ours releases (their `released` may not have arrived yet):
    /// `wait until held` ignores them.
    pub(super) releasing: std::collections::HashSet<u64>,
    /// `wait until quiet`: events seen, and since when that count has not changed.
    pub(super) quiet_count: u64,
    pub(super) quiet_since: Option<Instant>,
    pub(super) closed: bool,
    /// Commands are being handled (a scenario's, or stdin lines received together): the
    /// session's end waits for their answers (a `wait` that the last events satisfy says
    /// so before `exit`). See [`Busy`].
    pub(super) busy: bool,
    pub(super) exit_code: Option<Option<i32>>,
    /// Verdicts (`ok` / `error` carrying a request number) of a scenario's commands, by
    /// number, until the scenario takes them.
    pub(super) verdicts: std::collections::HashMap<u64, Result<(), String>>,
}

pub(super) struct Ctl {
    pub(super) exit_printed: std::sync::atomic::AtomicBool,
    /// A scenario line failed: the controller exits with [`SCENARIO_STOPPED`].
    pub(super) scenario_stopped: std::sync::atomic::AtomicBool,
    /// Scenario mode: print the outcome after `exit`.
    pub(super) outcome_pending: Mutex<bool>,
    /// The program's last stdout line.
    pub(super) last_stdout: Mutex<String>,
    pub(super) state: Mutex<State>,
    pub(super) changed: Condvar,
    pub(super) out: Mutex<std::io::Stdout>,
    /// Events arrived, counted before they are printed (the event thread prints a chunk,
    /// then ingests it; `recent` numbers them from this count): what a command's mark is
    /// taken from, so that an event a user has seen printed before sending a command never
    /// counts as arriving after it.
    pub(super) announced: std::sync::atomic::AtomicU64,
}

impl Ctl {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Print `exit` once, however the session ends (and a scenario's `outcome` after it).
    pub(super) fn print_exit(&self, code: Option<i32>) {
        drop(self.print_exit_and_hold(code, None));
    }

    /// Like [`Ctl::print_exit`], returning stdout still locked: the caller ends the process
    /// without anything printed after these lines.
    pub(super) fn print_exit_and_hold(
        &self,
        code: Option<i32>,
        signal: Option<i32>,
    ) -> MutexGuard<'_, std::io::Stdout> {
        let mut out = self.out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !self.exit_printed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let _ = writeln!(out, "{}", CtlEvent::Exit { code, signal }.to_json());
            if *self
                .outcome_pending
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
            {
                let last = self
                    .last_stdout
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone();
                let result = serde_json::from_str(&last).unwrap_or(Value::String(last));
                let _ = writeln!(out, "{}", CtlEvent::Outcome { result }.to_json());
            }
            let _ = out.flush();
        }
        out
    }

    /// Print what arrived, up to the connection's end, with one flush.
    pub(super) fn print_all(&self, items: &[ConnEvent], buf: &mut Vec<u8>) {
        let mut out = self.out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for item in items {
            match item {
                ConnEvent::Event(ev) => {
                    let _ = serde_json::to_writer(&mut *buf, ev);
                    buf.push(b'\n');
                }
                ConnEvent::Events(evs) => {
                    for ev in evs {
                        let _ = serde_json::to_writer(&mut *buf, ev);
                        buf.push(b'\n');
                    }
                }
                // Printed from the compact form, exactly as the expanded events would be.
                ConnEvent::Packed(names, ps) => {
                    for p in ps {
                        p.append_json(names, buf);
                        buf.push(b'\n');
                    }
                }
                ConnEvent::Closed(_) => break,
            }
            if buf.len() >= PRINT_CHUNK {
                let _ = out.write_all(buf);
                buf.clear();
            }
        }
        let _ = out.write_all(buf);
        buf.clear();
        // One huge event (up to a frame's 16 MiB) does not keep its room for good.
        buf.shrink_to(2 * PRINT_CHUNK);
        let _ = out.flush();
    }

    /// The controller's exit code: the program's (`code`), unless a scenario stopped.
    pub(super) fn exit_code(&self, code: i32) -> i32 {
        if self.scenario_stopped.load(std::sync::atomic::Ordering::SeqCst) {
            SCENARIO_STOPPED
        } else {
            code
        }
    }

    pub(super) fn print(&self, ev: &impl serde::Serialize) {
        let mut out = self.out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let line = serde_json::to_string(ev)
            .unwrap_or_else(|e| format!("{{\"event\":\"error\",\"message\":\"{e}\"}}"));
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}
