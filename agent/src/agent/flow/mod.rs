//! The flow-graph runtime's front end (feature `runtime`): the agent as the runtime's
//! [`Hook`], which turns the runtime's events into records or protocol events, asks the
//! policy whether they hold, and hands held ones to [`Agent::hold`] with the event as the
//! held thread's [`Site`](super::front::Site) (`site`). It uses the core's public
//! front-end API ([`super::front`]) only, as an outside front end would. The runtime's
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

pub(crate) use site::take;
mod view;

use super::decide::{Decision, Point};
use super::Agent;
use convert::{collection, fast_recv, fast_send, fast_step, fast_streamed_step, operation, step_ev};
use racetrack_protocol::{self as proto, Event, Kind};
use racetrack_runtime::hook::{
    CollectionInfo, GraphInfo, Hook, OpInfo, RecvEvent, SendEvent, StepEvent, StepKind, StreamedSend,
    StreamedStep, ThreadInfo,
};
use racetrack_runtime::ids::MsgId;
use racetrack_runtime::RuntimeView;
use racetrack_runtime::ScheduleError;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

impl Hook for Agent {
    fn active(&self) -> bool {
        self.is_hot()
    }

    fn active_flag(&self) -> Option<Arc<AtomicBool>> {
        Some(self.hot_flag())
    }

    /// Attached, with nothing that could hold, edit or trace a message: the runtime keeps
    /// its batches and reports each message through the `streamed_*` calls.
    fn streaming(&self) -> bool {
        self.streams_only()
    }

    fn session(&self) -> u64 {
        Agent::session(self)
    }

    fn streamed_send(&self, ev: &StreamedSend<'_>) -> Option<u64> {
        if !self.is_attached() {
            return None;
        }
        let fast = fast_send(
            (Some(ev.thread), Some(ev.from_op)),
            (Some(ev.to_op), Some(ev.to_thread)),
            ev.msg_id,
            false,
            ev.type_name,
        );
        self.record(fast, true)
    }

    fn streamed_step(&self, ev: &StreamedStep<'_>, stop: bool) {
        if !self.is_attached() {
            return;
        }
        let kind = if stop { Kind::Stop } else { Kind::Start };
        let _ = self.record(fast_streamed_step(kind, ev, false), true);
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
        let point = Point::Send {
            thread: ev.thread.map(|t| t.global),
        };
        let (reason, content) = match self.decide(&point) {
            Decision::Skip => return,
            Decision::Stream { content } => (None, content),
            Decision::Hold { reason, .. } => (Some(reason), true),
        };
        if !content {
            let fast = fast_send(
                (ev.thread.map(|t| &**t), ev.from_op.map(|o| &**o)),
                (ev.to_op.map(|o| &**o), ev.to_thread.map(|t| &**t)),
                ev.msg_id,
                ev.traced,
                ev.type_name(),
            );
            let _ = self.record(fast, thread_is_program(ev));
            return;
        }
        let thread = ev.thread.cloned();
        let content = Some(
            ev.content_json()
                .unwrap_or_else(|e| serde_json::json!({ "$unserializable": e.to_string() })),
        );
        let sev = Event::Send(proto::SendEv {
            event_id: 0,
            thread: thread.as_ref().map(|t| t.name.as_ref().into()),
            op: ev.from_op.map(|o| o.name.as_ref().into()),
            msg: ev.msg_id.to_string().into(),
            to_op: ev.to_op.map(|o| o.name.as_ref().into()),
            to_thread: ev.to_thread.map(|t| t.name.as_ref().into()),
            type_name: ev.type_name().into(),
            traced: ev.traced,
            held: reason.is_some(),
            reason,
            content,
            call: None,
        });
        match (reason, thread) {
            (Some(r), Some(t)) => {
                self.hold(sev, (t.global, &t.name), r, ev, &|| self.still_holds(&point));
            }
            _ => self.emit(sev, thread_is_program(ev)),
        }
    }

    fn on_recv(&self, ev: &RecvEvent<'_>) {
        if !self.is_hot() || !self.is_attached() {
            return;
        }
        // Never blocks: called with the destination queue locked.
        let fast = fast_recv(ev.thread, ev.op, ev.msg_id, ev.position, ev.traced);
        let _ = self.record(fast, false);
    }

    fn on_recv_batch(
        &self,
        thread: &Arc<ThreadInfo>,
        op: &Arc<OpInfo>,
        msgs: &mut dyn Iterator<Item = (&MsgId, usize)>,
    ) {
        if !self.is_hot() || !self.is_attached() {
            return;
        }
        // Never blocks: called with the destination queue locked. One lock for the batch.
        let recs = msgs.map(|(msg, position)| fast_recv(thread, op, msg, position, false));
        let _ = self.record_all(recs, false);
    }

    fn on_start(&self, ev: &mut StepEvent<'_>) {
        let point = Point::Start {
            thread: ev.thread.global,
            op: ev.op.id,
            traced: ev.input_traced && ev.step != StepKind::Final,
            call: None,
        };
        match self.decide(&point) {
            Decision::Skip => {}
            Decision::Stream { .. } => {
                let _ = self.record(fast_step(Kind::Start, ev, ev.input_traced), true);
            }
            Decision::Hold { reason: r, trace } => {
                let sev = step_ev(ev, ev.input_traced, Some(r));
                if trace {
                    ev.trace_outputs = true;
                }
                let thread = ev.thread.clone();
                let still = || self.still_holds(&point);
                match self.hold(Event::Start(sev), (thread.global, &thread.name), r, ev, &still) {
                    Some(t) => ev.trace_outputs = t,
                    // A trace box checked while the step was held (or before the start
                    // hold was released) applies when it resumes.
                    None if self.break_traces(ev.op.id, thread.global) => {
                        ev.trace_outputs = true;
                    }
                    None => {}
                }
            }
        }
    }

    fn on_stop(&self, ev: &mut StepEvent<'_>) {
        let point = Point::Stop {
            thread: ev.thread.global,
        };
        match self.decide(&point) {
            Decision::Skip => {}
            Decision::Stream { .. } => {
                let _ = self.record(fast_step(Kind::Stop, ev, ev.trace_outputs), true);
            }
            Decision::Hold { reason: r, .. } => {
                let sev = step_ev(ev, ev.trace_outputs, Some(r));
                let thread = ev.thread.clone();
                self.hold(Event::Stop(sev), (thread.global, &thread.name), r, ev, &|| {
                    self.still_holds(&point)
                });
            }
        }
    }

    fn on_stuck(&self, waits: &[racetrack_runtime::StuckWait]) -> bool {
        if !self.is_attached() {
            return false;
        }
        self.reply(convert::deadlock(waits));
        true
    }

    fn on_error(&self, err: &ScheduleError) {
        if !self.is_attached() {
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
        self.shutdown();
    }

    fn on_finished(&self) {
        self.finish();
    }
}

/// Sends from the schedule caller (thread `None`) are not throttled: the caller may be a
/// thread the debugger cannot see.
fn thread_is_program(ev: &SendEvent<'_>) -> bool {
    ev.thread.is_some()
}
