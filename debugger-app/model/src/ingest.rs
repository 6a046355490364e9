//! Events into the model. Every event, full or compact, is first resolved to indexes
//! (names interned per process; a compact event's indexes translated through a table, no
//! name hashed), then handed to each part present: the [`crate::Control`] always, the
//! [`crate::Unfolded`] graph and the [`crate::MpGraph`] when the model has them.

use crate::control::{Held, Unreported};
use crate::ids::{HeldId, NodeKey, OpId, ProcId, ThreadId, ThreadKey};
use crate::mpgraph::MpEvent;
use crate::unfolded::{MsgInfo, NodeStatus};
use crate::Model;
use racetrack_protocol::{
    Event, HoldReason, Kind, Names, PackedEv, QueueEntry, SendEv, SmolStr, Step, StepEv, ThreadSnapshot,
};
use serde_json::Value;
use std::sync::Arc;

/// A send, its names resolved.
struct SendIn<'a> {
    /// The event's number, for sends a `recv` links to by it (MPI's; `None`: linked by
    /// message id).
    linked_by: Option<u64>,
    from: Option<NodeKey>,
    to_op: Option<OpId>,
    to_thread: Option<ThreadId>,
    msg: &'a SmolStr,
    type_name: &'a str,
    traced: bool,
    content: Option<&'a Value>,
    held: bool,
}

/// A step's start or stop, its names resolved.
struct StepIn<'a> {
    node: NodeKey,
    msg: &'a SmolStr,
    /// A start that takes its message from the queue (not a merge's final step).
    consumes: bool,
    traced: bool,
    held: bool,
    start: bool,
}

impl Model {
    /// Ingest one event of the first process.
    pub fn ingest(&mut self, ev: &Event) {
        self.ingest_in(ProcId::FIRST, ev);
    }

    /// Ingest one event of process `p`.
    pub fn ingest_in(&mut self, p: ProcId, ev: &Event) {
        match ev {
            Event::Hello { program, pid, .. } => {
                let pr = self.proc_mut(p);
                pr.program = Some(program.clone());
                pr.pid = Some(*pid);
                self.control.attached = true;
                self.changes.session = true;
            }
            Event::Structure {
                operations,
                collections,
                edges,
            } => {
                self.proc_mut(p).on_structure(operations, collections, edges);
                self.changes.structure = true;
            }
            Event::Snapshot { threads, held, .. } => {
                self.on_snapshot(p, threads);
                held.iter().for_each(|h| self.ingest_in(p, h));
            }
            Event::Batch { events } => events.iter().for_each(|e| self.ingest_in(p, e)),
            Event::Send(_) | Event::Recv(_) | Event::Start(_) | Event::Stop(_) => {
                if let Some(c) = &mut self.clocks {
                    c.observe(ev);
                }
                if self.messages.is_some() {
                    self.messages_full(p, ev);
                }
                self.notification(p, ev);
            }
            Event::Released { event_id, .. } => self.on_released(p, *event_id),
            _ => self.on_notice(p, ev),
        }
    }

    /// An MPI call's `send`, `recv`, `start` or `stop` into the message-passing graph.
    fn messages_full(&mut self, p: ProcId, ev: &Event) {
        let (kind, op, thread, call, from) = match ev {
            Event::Start(s) => (Kind::Start, Some(&s.op), &s.thread, &s.call, None),
            Event::Stop(s) => (Kind::Stop, Some(&s.op), &s.thread, &s.call, None),
            Event::Recv(r) => (Kind::Recv, Some(&r.op), &r.thread, &r.call, r.from.as_ref()),
            Event::Send(s) => match &s.thread {
                Some(t) => (Kind::Send, s.op.as_ref(), t, &s.call, None),
                None => return,
            },
            _ => return,
        };
        let (Some(info), Some(op)) = (call.as_deref(), op) else {
            return;
        };
        let node = self.node_key_in(p, op, thread);
        let (Some(m), pr) = (&mut self.messages, &self.procs[p.index()]) else {
            return;
        };
        m.observe(&MpEvent {
            kind,
            thread: node.thread_key(),
            thread_name: thread,
            call: node.op,
            call_name: pr.op_name(node.op),
            event_id: ev.event_id().unwrap_or_default(),
            from: from.map(|f| f.event_id),
            info,
        });
    }

    /// A `send`, `recv`, `start` or `stop`.
    fn notification(&mut self, p: ProcId, ev: &Event) {
        match ev {
            Event::Send(s) => self.send_event(p, s, ev),
            Event::Recv(r) => {
                let node = self.node_key_in(p, &r.op, &r.thread);
                // An MPI receive (it carries its call) is reported by the call that took
                // the message, after its `start`: no later start consumes it, so it never
                // waits in the thread's queue (listed, it would stay there for good, and
                // every start would search the growing queue).
                let queued = r.call.is_none().then_some(r.position);
                if let (Some(u), Some(f)) = (&mut self.unfolded, &r.from) {
                    u.on_linked_recv(node, f.event_id, &mut self.changes);
                }
                self.on_recv(node, &SmolStr::from(r.msg.as_str()), queued, r.traced);
            }
            Event::Start(s) => self.step_event(p, s, ev, true),
            Event::Stop(s) => self.step_event(p, s, ev, false),
            _ => {}
        }
    }

    /// Queue listings, states and messages for the log.
    fn on_notice(&mut self, p: ProcId, ev: &Event) {
        match ev {
            Event::Queue {
                thread,
                messages,
                more,
            } => {
                let t = self.thread_key_in(p, thread);
                self.control.set_queue(&mut self.changes, t, messages, *more);
            }
            Event::State { thread, content } => {
                let t = self.thread_key_in(p, thread);
                self.control.states.insert(t, content.clone());
                self.changes.threads.insert(t);
            }
            Event::Panic {
                thread,
                op,
                msg,
                message,
            } => {
                let text = format!("{op} on {thread} panicked at message {msg}: {message}");
                self.control.log(&mut self.changes, "panic", text);
            }
            Event::Error { message, .. } => self.control.log(&mut self.changes, "error", message.clone()),
            Event::Deadlock { waits, cycle } => {
                let text = crate::deadlock::describe(waits, cycle);
                self.control.log(&mut self.changes, "deadlock", text);
                self.control.deadlock = Some(crate::deadlock::Deadlock {
                    waits: waits.clone(),
                    cycle: cycle.clone(),
                });
                // The stuck calls' nodes are drawn as such.
                for w in waits {
                    let node =
                        (self.node_key(&w.call, &w.thread)).and_then(|k| self.unfolded.as_ref()?.find(k));
                    if let Some(id) = node.filter(|id| !self.changes.nodes_changed.contains(id)) {
                        self.changes.nodes_changed.push(id);
                    }
                }
            }
            Event::Unreported {
                thread,
                call,
                site,
                before_attach,
            } => {
                let t = self.thread_key_in(p, thread);
                self.changes.threads.insert(t);
                let Some(call) = call else {
                    self.control.unreported.remove(&t);
                    return;
                };
                let at = site.as_ref().map(|s| format!(" at {s}")).unwrap_or_default();
                let why = if *before_attach {
                    "a call it made before the debugger attached"
                } else {
                    "a call the debugger's MPI library does not report"
                };
                self.control.log(
                    &mut self.changes,
                    "info",
                    format!("{thread} is in {call}{at}, {why}"),
                );
                let status = Unreported {
                    call: call.clone(),
                    site: site.clone(),
                    before_attach: *before_attach,
                };
                self.control.unreported.insert(t, status);
            }
            Event::Ok { cmd, target, .. } => {
                if matches!(cmd.as_str(), "save_scenario" | "take_over") {
                    self.control.session_note = target.as_ref().map(|t| match cmd.as_str() {
                        "save_scenario" => format!("scenario saved: {t}"),
                        _ => t.clone(),
                    });
                }
                let on = target.as_ref().map(|t| format!(" ({t})")).unwrap_or_default();
                self.control
                    .log(&mut self.changes, "info", format!("{cmd} applied{on}"));
            }
            _ => {}
        }
    }

    /// Ingest one packed event of the first process (see [`Model::ingest_packed_in`]).
    pub fn ingest_packed(&mut self, names: &Names, p: &PackedEv) {
        self.ingest_packed_in(ProcId::FIRST, names, p);
    }

    /// Ingest one packed event of process `p` whose indexes `names` passed
    /// [`Names::check`] for, straight from the compact form.
    pub fn ingest_packed_in(&mut self, p: ProcId, names: &Names, ev: &PackedEv) {
        let c = ev;
        let thread = self.proc_mut(p).packed_thread(names, c.thread);
        if let Some(clocks) = &mut self.clocks {
            clocks.observe_packed(thread.map(|thread| ThreadKey { proc: p, thread }), names, ev);
        }
        let pr = self.proc_mut(p);
        let op = pr.packed_op(names, c.op);
        let node = thread.zip(op).map(|(thread, op)| NodeKey { proc: p, op, thread });
        if let (Some(m), Some(node), Some(info)) = (&mut self.messages, node, &c.call) {
            let pr = &self.procs[p.index()];
            m.observe(&MpEvent {
                kind: c.kind,
                thread: node.thread_key(),
                thread_name: pr.thread_name(node.thread),
                call: node.op,
                call_name: pr.op_name(node.op),
                event_id: c.event_id,
                from: c.from.as_ref().map(|f| f.event_id),
                info,
            });
        }
        let pr = self.proc_mut(p);
        match (c.kind, node) {
            (Kind::Send, from) => {
                let send = SendIn {
                    // An MPI send (it carries its call) is linked to its receive by number.
                    linked_by: c.call.is_some().then_some(c.event_id),
                    from,
                    to_op: pr.packed_op(names, c.a),
                    to_thread: pr.packed_thread(names, c.b),
                    msg: &c.msg,
                    type_name: &c.text,
                    traced: c.traced,
                    content: None,
                    held: false,
                };
                self.on_send(p, &send);
            }
            (Kind::Recv, Some(node)) => {
                if let (Some(u), Some(f)) = (&mut self.unfolded, &c.from) {
                    u.on_linked_recv(node, f.event_id, &mut self.changes);
                }
                // An MPI receive is never queued (see `notification`).
                let queued = c.call.is_none().then(|| usize::try_from(c.a).unwrap_or_default());
                self.on_recv(node, &c.msg, queued, c.traced);
            }
            (Kind::Start | Kind::Stop, Some(node)) => self.on_step(&StepIn {
                node,
                msg: &c.msg,
                consumes: c.a != 2,
                traced: c.traced,
                held: false,
                start: c.kind == Kind::Start,
            }),
            (kind, None) => {
                let text = format!("packed {} event without a thread or operation", kind.name());
                self.control.log(&mut self.changes, "error", text);
            }
        }
    }

    fn on_send(&mut self, p: ProcId, s: &SendIn) {
        self.control.event_count += 1;
        if let Some(u) = &mut self.unfolded {
            let info = Arc::new(MsgInfo {
                id: s.msg.clone(),
                type_name: s.type_name.into(),
                from: s.from,
                to_op: s.to_op,
                to_thread: s.to_thread,
                content: s.content.cloned(),
                traced: s.traced,
            });
            u.on_send(p, info, s.linked_by, s.held, &mut self.changes);
        }
    }

    /// Message `msg` for `node`'s operation arrived in its thread's queue at `position`
    /// (`None`: it was taken as it arrived).
    fn on_recv(&mut self, node: NodeKey, msg: &SmolStr, position: Option<usize>, traced: bool) {
        self.control.event_count += 1;
        let info = self
            .unfolded
            .as_mut()
            .and_then(|u| u.on_recv(node, msg, &mut self.changes));
        let Some(position) = position else { return };
        let pr = &self.procs[node.proc.index()];
        let entry = QueueEntry {
            id: msg.clone(),
            type_name: info.as_ref().map(|i| i.type_name.to_string()).unwrap_or_default(),
            from: info
                .as_ref()
                .and_then(|i| i.from)
                .map(|f| format!("{}@{}", pr.op_name(f.op), pr.thread_name(f.thread))),
            // The queue's thread and the entry's operation say it: not spelled out per
            // message.
            to: String::new(),
            op: pr.op_name(node.op).into(),
            traced,
            content: info.as_ref().and_then(|i| i.content.clone()),
        };
        self.control
            .enqueue(&mut self.changes, node.thread_key(), position, entry);
    }

    fn on_step(&mut self, s: &StepIn) {
        self.control.event_count += 1;
        if !self.control.unreported.is_empty()
            && self.control.unreported.remove(&s.node.thread_key()).is_some()
        {
            self.changes.threads.insert(s.node.thread_key());
        }
        if s.start && s.consumes {
            let op = self.procs[s.node.proc.index()].op_name(s.node.op);
            self.control
                .consume(&mut self.changes, s.node.thread_key(), s.msg, op);
        }
        if let Some(u) = &mut self.unfolded {
            if s.start {
                u.on_start(s.node, s.msg, s.traced, s.held, &mut self.changes);
            } else {
                let finished = self.control.exited.is_some();
                u.on_stop(s.node, s.held, finished, &mut self.changes);
            }
        }
    }

    fn send_event(&mut self, p: ProcId, s: &SendEv, ev: &Event) {
        let from = match (&s.op, &s.thread) {
            (Some(op), Some(t)) => Some(self.node_key_in(p, op, t)),
            _ => None,
        };
        let pr = self.proc_mut(p);
        let to_op = s.to_op.as_deref().map(|o| pr.intern_op(o));
        let to_thread = s.to_thread.as_deref().map(|t| pr.intern_thread(t));
        let send = SendIn {
            linked_by: s.call.is_some().then_some(s.event_id),
            from,
            to_op,
            to_thread,
            msg: &SmolStr::from(s.msg.as_str()),
            type_name: &s.type_name,
            traced: s.traced,
            content: s.content.as_ref(),
            held: s.held,
        };
        self.on_send(p, &send);
        if s.held {
            let at = format!(
                "{}@{}",
                s.op.as_deref().unwrap_or("?"),
                s.thread.as_deref().unwrap_or("?")
            );
            let text = format!("send of {} from {at} held ({})", s.msg, reason_text(s.reason));
            self.control.log(&mut self.changes, "held", text);
            self.hold(p, s.event_id, from, ev);
        }
    }

    fn step_event(&mut self, p: ProcId, s: &StepEv, ev: &Event, start: bool) {
        let node = self.node_key_in(p, &s.op, &s.thread);
        self.on_step(&StepIn {
            node,
            msg: &SmolStr::from(s.msg.as_str()),
            consumes: s.step != Step::Final,
            traced: s.traced,
            held: s.held,
            start,
        });
        if s.held {
            if start {
                let what = format!(
                    "start of {}@{} on {} held ({})",
                    s.op,
                    s.thread,
                    s.msg,
                    reason_text(s.reason)
                );
                self.control.log(&mut self.changes, "held", what);
            }
            self.hold(p, s.event_id, Some(node), ev);
        }
    }

    fn hold(&mut self, p: ProcId, event_id: u64, at: Option<NodeKey>, ev: &Event) {
        let held = Held {
            thread: at.map(NodeKey::thread_key),
            op: at.map(|k| k.op),
            event: ev.clone(),
        };
        self.control
            .hold(&mut self.changes, HeldId { proc: p, event_id }, held);
    }

    /// A hold ended: the node runs on (or, after a held stop, is idle).
    fn on_released(&mut self, p: ProcId, event_id: u64) {
        let Some(h) = self.control.held.remove(&HeldId { proc: p, event_id }) else {
            return;
        };
        self.changes.held = true;
        let status = match h.event {
            Event::Start(_) | Event::Send(_) => NodeStatus::Running,
            _ => NodeStatus::Idle,
        };
        if let (Some(u), Some(t), Some(op)) = (&mut self.unfolded, h.thread, h.op) {
            let key = NodeKey {
                proc: t.proc,
                op,
                thread: t.thread,
            };
            u.update_status(key, status, &mut self.changes);
        }
    }

    fn on_snapshot(&mut self, p: ProcId, threads: &[ThreadSnapshot]) {
        for t in threads {
            let tk = self.thread_key_in(p, &t.thread);
            if let Some(pid) = t.pid {
                self.proc_mut(p).set_thread_pid(tk.thread, pid);
            }
            self.control.set_queue(&mut self.changes, tk, &t.queue, t.more);
            if let Some(c) = &t.current {
                let node = self.node_key_in(p, &c.op, &t.thread);
                if let Some(u) = &mut self.unfolded {
                    u.set_status(node, NodeStatus::Running, &mut self.changes);
                }
            }
        }
    }
}

fn reason_text(r: Option<HoldReason>) -> &'static str {
    match r {
        Some(HoldReason::Wait) => "waiting for Continue",
        Some(HoldReason::Step) => "global step",
        Some(HoldReason::Break) => "breakpoint",
        Some(HoldReason::Pause) => "thread paused",
        Some(HoldReason::Trace) => "traced message",
        Some(HoldReason::AckAll) => "ack every event",
        None => "held",
    }
}
