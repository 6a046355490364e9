//! The runtime's side of the agent: its [`Hook`] implementation, which turns the runtime's
//! events into records or protocol events, asks the policy whether they hold, and hands held
//! ones to [`Agent::hold`](super::Agent) with the event as the held thread's
//! [`Site`](super::held::Site). The runtime's types (`SendEvent`, `StepEvent`,
//! `StreamedSend`, `ThreadSnap`, ...) are converted here, so that the policy and the
//! stream see indexes, records and protocol events only.
//!
//! The fast paths (`on_send`, `on_recv`, `on_start`, `on_stop`, `streamed_*`) run on the
//! program's threads for every event: they read atomics first and allocate nothing for a
//! compact record.

use super::record::{self, Rec};
use super::{lock, Agent};
use racetrack_protocol::{self as proto, Event, HoldReason, Kind, MsgPath, Record, RecordText};
use racetrack_runtime::hook::{
    CollectionInfo, GraphInfo, Hook, OpInfo, QueuedMsg, RecvEvent, SendEvent, StepEvent, StepKind,
    StreamedSend, StreamedStep, ThreadInfo,
};
use racetrack_runtime::ids::MsgId;
use racetrack_runtime::thread::ThreadSnap;
use racetrack_runtime::RuntimeView;
use racetrack_runtime::ScheduleError;
use serde_json::Value;
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
        let _ = self.view.set(view);
    }

    fn on_collection(&self, info: &CollectionInfo) {
        lock(&self.structure).collections.push(Arc::new(CollectionInfo {
            id: info.id,
            name: info.name.clone(),
            threads: info.threads.clone(),
        }));
        if self.attached.load(Relaxed) {
            self.reply(self.structure_event());
        }
    }

    fn on_graph(&self, info: &GraphInfo) {
        {
            let mut st = lock(&self.structure);
            st.ops.extend(info.ops.iter().cloned());
            st.edges.extend(info.edges.iter().copied());
        }
        if self.attached.load(Relaxed) {
            self.reply(self.structure_event());
        }
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
                self.hold(sev, &t, r, ev, &|| self.policy.other_reason(global).is_some());
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
                match self.hold(Event::Start(sev), &thread, r, ev, &still) {
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
                self.hold(Event::Stop(sev), &thread, r, ev, &|| {
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

fn step_of(k: StepKind) -> proto::Step {
    match k {
        StepKind::Run => proto::Step::Run,
        StepKind::Absorb => proto::Step::Absorb,
        StepKind::Final => proto::Step::Final,
    }
}

/// A step event as the protocol shows it (numbered when it is recorded).
fn step_ev(ev: &StepEvent<'_>, traced: bool, reason: Option<HoldReason>) -> proto::StepEv {
    proto::StepEv {
        event_id: 0,
        thread: ev.thread.name.to_string(),
        op: ev.op.name.to_string(),
        msg: ev.msg_id.to_string(),
        instance: ev.instance.to_string(),
        step: step_of(ev.step),
        traced,
        held: reason.is_some(),
        reason,
    }
}

/// A `send` that is streamed, not held, in compact form (`from`: thread and operation;
/// `to`: operation and thread).
fn fast_send(
    (thread, op): (Option<&ThreadInfo>, Option<&OpInfo>),
    (to_op, to_thread): (Option<&OpInfo>, Option<&ThreadInfo>),
    msg: &MsgId,
    traced: bool,
    type_name: &'static str,
) -> Record {
    Record {
        kind: Kind::Send,
        event_id: 0,
        thread: record::thread_index(thread),
        op: record::op_index(op),
        msg: MsgPath::from_slice(msg.components()),
        a: record::op_index(to_op),
        b: record::thread_index(to_thread),
        traced,
        text: RecordText::Type(type_name),
    }
}

/// A `recv` in compact form.
fn fast_recv(thread: &ThreadInfo, op: &OpInfo, msg: &MsgId, position: usize, traced: bool) -> Record {
    Record {
        kind: Kind::Recv,
        event_id: 0,
        thread: record::thread_index(Some(thread)),
        op: record::op_index(Some(op)),
        msg: MsgPath::from_slice(msg.components()),
        a: position as i64,
        b: 0,
        traced,
        text: RecordText::None,
    }
}

/// A step event that is streamed, not held, in compact form.
fn fast_step(kind: Kind, ev: &StepEvent<'_>, traced: bool) -> Record {
    let s = StreamedStep {
        thread: ev.thread,
        op: ev.op,
        step: ev.step,
        msg_id: ev.msg_id,
        instance: ev.instance,
    };
    fast_streamed_step(kind, &s, traced)
}

fn fast_streamed_step(kind: Kind, ev: &StreamedStep<'_>, traced: bool) -> Record {
    Record {
        kind,
        event_id: 0,
        thread: record::thread_index(Some(ev.thread)),
        op: record::op_index(Some(ev.op)),
        msg: MsgPath::from_slice(ev.msg_id.components()),
        a: record::step_code(ev.step),
        b: 0,
        traced,
        text: {
            // Compared in place, component by component (ids are a few words: a
            // `memcmp` call costs more than the comparison).
            let (m, i) = (ev.msg_id.components(), ev.instance.components());
            let same = |a: &[u64], b: &[u64]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y);
            if same(m, i) {
                RecordText::None
            } else if m.split_last().is_some_and(|(_, parent)| same(parent, i)) {
                RecordText::Parent
            } else {
                RecordText::Instance(Box::new(MsgPath::from_slice(i)))
            }
        },
    }
}

/// A pending message as the protocol shows it, in the queue of `thread`.
pub(super) fn entry(q: &QueuedMsg, thread: &str, content: Option<Value>) -> proto::QueueEntry {
    proto::QueueEntry {
        id: q.id.to_string().into(),
        type_name: q.type_name.to_owned(),
        from: q.from.as_ref().map(|(op, t)| format!("{}@{}", op.name, t.name)),
        to: format!("{}@{thread}", q.op.name),
        op: (*q.op.name).into(),
        traced: q.traced,
        content,
    }
}

pub(super) fn thread_snapshot(t: ThreadSnap) -> proto::ThreadSnapshot {
    proto::ThreadSnapshot {
        queue: t.pending.iter().map(|q| entry(q, &t.info.name, None)).collect(),
        more: t.more,
        current: t.current.map(|c| proto::CurrentStep {
            op: c.op.name.to_string(),
            msg: c.msg.to_string(),
            step: step_of(c.step),
        }),
        thread: t.info.name.to_string(),
    }
}
