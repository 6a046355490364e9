//! The flow-graph runtime's front end (feature `runtime`): the agent as the runtime's
//! [`Hook`], which turns the runtime's events into records or protocol events, asks the
//! policy whether they hold, and hands held ones to [`Agent::hold`](super::Agent) with the
//! event as the held thread's [`Site`](super::held::Site) (`site`). The runtime's
//! `RuntimeView` is the core's [`Debuggee`](super::debuggee::Debuggee) (`view`). The
//! runtime's types (`SendEvent`, `StepEvent`, `StreamedSend`, `ThreadSnap`, ...) are
//! converted here (`convert`), so that the core sees indexes, records and protocol
//! events only.
//!
//! The fast paths (`on_send`, `on_recv`, `on_start`, `on_stop`, `streamed_*`) run on the
//! program's threads for every event: they read atomics first and allocate nothing for a
//! compact record.

mod convert;
mod site;
mod view;

use super::record::Rec;
use super::{lock, Agent};
use convert::{collection, fast_recv, fast_send, fast_step, fast_streamed_step, operation, step_ev};
use racetrack_protocol::{self as proto, Event, HoldReason, Kind};
use racetrack_runtime::hook::{
    CollectionInfo, GraphInfo, Hook, OpInfo, RecvEvent, SendEvent, StepEvent, StepKind, StreamedSend,
    StreamedStep, ThreadInfo,
};
use racetrack_runtime::ids::MsgId;
use racetrack_runtime::RuntimeView;
use racetrack_runtime::ScheduleError;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// How long the program's exit waits for a debugger that takes no more events.
const EXIT_PATIENCE: Duration = Duration::from_secs(10);

impl Hook for Agent {
    fn active(&self) -> bool {
        self.hot.load(Relaxed)
    }

    fn active_flag(&self) -> Option<Arc<AtomicBool>> {
        Some(self.hot.clone())
    }

    /// Attached, with nothing that could hold, edit or trace a message: the runtime keeps
    /// its batches and reports each message through the `streamed_*` calls.
    fn streaming(&self) -> bool {
        self.attached.load(Relaxed) && !(self.wait_pending.load(Relaxed) || self.policy.may_hold())
    }

    fn session(&self) -> u64 {
        self.stream.session.load(Relaxed)
    }

    fn streamed_send(&self, ev: &StreamedSend<'_>) -> Option<u64> {
        if !self.attached.load(Relaxed) {
            return None;
        }
        let fast = fast_send(
            (Some(ev.thread), Some(ev.from_op)),
            (Some(ev.to_op), Some(ev.to_thread)),
            ev.msg_id,
            false,
            ev.type_name,
        );
        self.record(Rec::Fast(fast), true)
    }

    fn streamed_step(&self, ev: &StreamedStep<'_>, stop: bool) {
        if !self.attached.load(Relaxed) {
            return;
        }
        let kind = if stop { Kind::Stop } else { Kind::Start };
        let _ = self.record(Rec::Fast(fast_streamed_step(kind, ev, false)), true);
    }

    fn on_runtime(&self, view: RuntimeView) {
        self.set_debuggee(Box::new(view));
    }

    fn on_collection(&self, info: &CollectionInfo) {
        self.add_collection(collection(info));
    }

    fn on_graph(&self, info: &GraphInfo) {
        self.add_operations(info.ops.iter().map(|o| operation(o)), &info.edges);
    }

    fn on_send(&self, ev: &mut SendEvent<'_>) {
        if !self.hot.load(Relaxed) || !self.attached.load(Relaxed) {
            return;
        }
        let reason = ev.thread.and_then(|t| self.policy.other_reason(t.global));
        if reason.is_none() && !self.policy.content() {
            let fast = fast_send(
                (ev.thread.map(|t| &**t), ev.from_op.map(|o| &**o)),
                (ev.to_op.map(|o| &**o), ev.to_thread.map(|t| &**t)),
                ev.msg_id,
                ev.traced,
                ev.type_name(),
            );
            let _ = self.record(Rec::Fast(fast), thread_is_program(ev));
            return;
        }
        let thread = ev.thread.cloned();
        let content = (reason.is_some() || self.policy.content()).then(|| {
            ev.content_json()
                .unwrap_or_else(|e| serde_json::json!({ "$unserializable": e }))
        });
        let sev = Event::Send(proto::SendEv {
            event_id: 0,
            thread: thread.as_ref().map(|t| t.name.to_string()),
            op: ev.from_op.map(|o| o.name.to_string()),
            msg: ev.msg_id.to_string(),
            to_op: ev.to_op.map(|o| o.name.to_string()),
            to_thread: ev.to_thread.map(|t| t.name.to_string()),
            type_name: ev.type_name().to_owned(),
            traced: ev.traced,
            held: reason.is_some(),
            reason,
            content,
        });
        match (reason, thread) {
            (Some(r), Some(t)) => {
                let global = t.global;
                self.hold(sev, (global, &t.name), r, ev, &|| {
                    self.policy.other_reason(global).is_some()
                });
            }
            _ => self.emit(sev, thread_is_program(ev)),
        }
    }

    fn on_recv(&self, ev: &RecvEvent<'_>) {
        if !self.hot.load(Relaxed) || !self.attached.load(Relaxed) {
            return;
        }
        // Never blocks: called with the destination queue locked.
        let fast = fast_recv(ev.thread, ev.op, ev.msg_id, ev.position, ev.traced);
        let _ = self.record(Rec::Fast(fast), false);
    }

    fn on_recv_batch(
        &self,
        thread: &Arc<ThreadInfo>,
        op: &Arc<OpInfo>,
        msgs: &mut dyn Iterator<Item = (&MsgId, usize)>,
    ) {
        if !self.hot.load(Relaxed) || !self.attached.load(Relaxed) {
            return;
        }
        // Never blocks: called with the destination queue locked. One lock for the batch.
        let recs = msgs.map(|(msg, position)| Rec::Fast(fast_recv(thread, op, msg, position, false)));
        let _ = self.record_all(recs, false);
    }

    fn on_start(&self, ev: &mut StepEvent<'_>) {
        if !self.hot.load(Relaxed) {
            return;
        }
        let wait = self.wait_pending.load(Relaxed) && self.wait_pending.swap(false, Relaxed);
        if wait {
            self.update_hot();
        } else if !self.attached.load(Relaxed) {
            return;
        }
        let reason = if wait {
            Some((HoldReason::Wait, false))
        } else {
            self.start_reason(ev)
        };
        match reason {
            None => {
                let _ = self.record(Rec::Fast(fast_step(Kind::Start, ev, ev.input_traced)), true);
            }
            Some((r, trace_break)) => {
                let sev = step_ev(ev, ev.input_traced, Some(r));
                if trace_break {
                    ev.trace_outputs = true;
                }
                let thread = ev.thread.clone();
                let (op, traced) = (ev.op.id, ev.input_traced && ev.step != StepKind::Final);
                let still = || self.policy.start_reason_of(thread.global, op, traced).is_some();
                match self.hold(Event::Start(sev), (thread.global, &thread.name), r, ev, &still) {
                    Some(t) => ev.trace_outputs = t,
                    // A trace box checked while the step was held (or before the start
                    // hold was released) applies when it resumes.
                    None if self.policy.break_traces(ev.op.id, thread.global) => {
                        ev.trace_outputs = true;
                    }
                    None => {}
                }
            }
        }
    }

    fn on_stop(&self, ev: &mut StepEvent<'_>) {
        if !self.hot.load(Relaxed) || !self.attached.load(Relaxed) {
            return;
        }
        match self.policy.other_reason(ev.thread.global) {
            None => {
                let _ = self.record(Rec::Fast(fast_step(Kind::Stop, ev, ev.trace_outputs)), true);
            }
            Some(r) => {
                let sev = step_ev(ev, ev.trace_outputs, Some(r));
                let thread = ev.thread.clone();
                let global = thread.global;
                self.hold(Event::Stop(sev), (global, &thread.name), r, ev, &|| {
                    self.policy.other_reason(global).is_some()
                });
            }
        }
    }

    fn on_error(&self, err: &ScheduleError) {
        if !self.attached.load(Relaxed) {
            return;
        }
        let ev = match err {
            ScheduleError::Panic {
                op,
                thread,
                msg,
                message,
            }
            | ScheduleError::Operation {
                op,
                thread,
                msg,
                message,
            } => Event::Panic {
                thread: thread.clone(),
                op: op.clone(),
                msg: msg.clone(),
                message: message.clone(),
            },
            ScheduleError::Shutdown => return,
        };
        self.reply(ev);
    }

    fn on_shutdown(&self) {
        // No new holds from here on; release the current ones so threads can finish.
        self.closing.store(true, Relaxed);
        self.release(None, |_, _| true);
        self.stream.space.notify_all();
    }

    fn on_finished(&self) {
        if !self.attached.load(Relaxed) {
            return;
        }
        self.finishing.store(true, Relaxed);
        if std::env::var(racetrack_protocol::launch::ENV_DEBUG).is_ok() {
            eprintln!(
                "racetrack: finishing with {} events buffered, {} frames sent",
                lock(&self.stream.state).buf.len(),
                self.stream.sent.load(Relaxed)
            );
        }
        self.stream.wake.notify_one();
        // Wait until everything is sent, as long as the debugger keeps reading (it may lag
        // behind a fast program); give up after EXIT_PATIENCE without progress. A lagging
        // debugger reads in bursts (its socket buffer refills only once half of it is
        // free): with 3 s, a debugger taking 25 µs per event lost the last 32,823 of
        // 800,004 events once.
        let (m, cv) = &self.finished;
        let mut guard = lock(m);
        let mut last_sent = self.stream.sent.load(Relaxed);
        while !*guard {
            let (g, timeout) = cv
                .wait_timeout(guard, EXIT_PATIENCE)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            guard = g;
            let sent = self.stream.sent.load(Relaxed);
            if timeout.timed_out() && sent == last_sent {
                break;
            }
            last_sent = sent;
        }
        if std::env::var(racetrack_protocol::launch::ENV_DEBUG).is_ok() {
            let (buffered, next_id) = {
                let s = lock(&self.stream.state);
                (s.buf.len(), s.next_id)
            };
            eprintln!(
                "racetrack: finished={} with {buffered} events buffered, {} frames and {} events sent, next id {next_id}, {} waits for room, start hold {} us",
                *guard,
                self.stream.sent.load(Relaxed),
                self.stream.sent_events.load(Relaxed),
                self.stream.waits.load(Relaxed),
                self.start_hold_us.load(Relaxed)
            );
        }
    }
}

/// Sends from the schedule caller (thread `None`) are not throttled: the caller may be a
/// thread the debugger cannot see.
fn thread_is_program(ev: &SendEvent<'_>) -> bool {
    ev.thread.is_some()
}

impl Agent {
    /// Why the policy holds this step before it starts (see [`Policy::start_reason_of`]).
    ///
    /// [`Policy::start_reason_of`]: super::policy::Policy::start_reason_of
    fn start_reason(&self, ev: &StepEvent<'_>) -> Option<(HoldReason, bool)> {
        self.policy.start_reason_of(
            ev.thread.global,
            ev.op.id,
            ev.input_traced && ev.step != StepKind::Final,
        )
    }
}
