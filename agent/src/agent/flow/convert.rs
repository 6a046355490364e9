//! The runtime's types as the core and the protocol show them: compact records for the
//! streamed events (built on the program's threads: no allocation but an instance that
//! differs from its message id), protocol events for the held ones, protocol entries for
//! queues and snapshots, and the core's structure types.

use super::super::front::{Collection, Operation, Thread};
use racetrack_protocol::{self as proto, HoldReason, Kind, MsgPath, Record, RecordText, SmolStr};
use racetrack_runtime::hook::{
    CollectionInfo, OpInfo, QueuedMsg, StepEvent, StepKind, StreamedStep, ThreadInfo,
};
use racetrack_runtime::ids::MsgId;
use racetrack_runtime::thread::ThreadSnap;
use serde_json::Value;

pub(super) fn step_of(k: StepKind) -> proto::Step {
    match k {
        StepKind::Run => proto::Step::Run,
        StepKind::Absorb => proto::Step::Absorb,
        StepKind::Final => proto::Step::Final,
    }
}

/// A step event as the protocol shows it (numbered when it is recorded).
pub(super) fn step_ev(ev: &StepEvent<'_>, traced: bool, reason: Option<HoldReason>) -> proto::StepEv {
    proto::StepEv {
        event_id: 0,
        thread: ev.thread.name.as_ref().into(),
        op: ev.op.name.as_ref().into(),
        msg: ev.msg_id.to_string().into(),
        instance: ev.instance.to_string().into(),
        step: step_of(ev.step),
        traced,
        held: reason.is_some(),
        reason,
        call: None,
    }
}

/// A `send` that is streamed, not held, in compact form (`from`: thread and operation;
/// `to`: operation and thread).
pub(super) fn fast_send(
    (thread, op): (Option<&ThreadInfo>, Option<&OpInfo>),
    (to_op, to_thread): (Option<&OpInfo>, Option<&ThreadInfo>),
    msg: &MsgId,
    traced: bool,
    type_name: &'static str,
) -> Record {
    Record {
        kind: Kind::Send,
        event_id: 0,
        thread: thread_index(thread),
        op: op_index(op),
        msg: MsgPath::from_slice(msg.components()),
        a: op_index(to_op),
        b: thread_index(to_thread),
        traced,
        text: RecordText::Type(SmolStr::new_static(type_name)),
        ..Record::default()
    }
}

/// A `recv` in compact form.
pub(super) fn fast_recv(
    thread: &ThreadInfo,
    op: &OpInfo,
    msg: &MsgId,
    position: usize,
    traced: bool,
) -> Record {
    Record {
        kind: Kind::Recv,
        event_id: 0,
        thread: thread_index(Some(thread)),
        op: op_index(Some(op)),
        msg: MsgPath::from_slice(msg.components()),
        a: position as i64,
        b: 0,
        traced,
        text: RecordText::None,
        ..Record::default()
    }
}

/// A step event that is streamed, not held, in compact form.
pub(super) fn fast_step(kind: Kind, ev: &StepEvent<'_>, traced: bool) -> Record {
    let s = StreamedStep {
        thread: ev.thread,
        op: ev.op,
        step: ev.step,
        msg_id: ev.msg_id,
        instance: ev.instance,
        from: ev.from,
    };
    fast_streamed_step(kind, &s, traced)
}

pub(super) fn fast_streamed_step(kind: Kind, ev: &StreamedStep<'_>, traced: bool) -> Record {
    Record {
        kind,
        event_id: 0,
        thread: thread_index(Some(ev.thread)),
        op: op_index(Some(ev.op)),
        msg: MsgPath::from_slice(ev.msg_id.components()),
        a: step_code(ev.step),
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
        ..Record::default()
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
        pid: None,
    }
}

/// The index of a thread in the `structure` (its global number).
fn thread_index(t: Option<&ThreadInfo>) -> i64 {
    t.map_or(-1, |t| t.global as i64)
}

/// The index of an operation in the `structure` (its id).
fn op_index(o: Option<&OpInfo>) -> i64 {
    o.map_or(-1, |o| o.id as i64)
}

/// A step's number in a packed event.
fn step_code(k: StepKind) -> i64 {
    match k {
        StepKind::Run => 0,
        StepKind::Absorb => 1,
        StepKind::Final => 2,
    }
}

/// A runtime thread as the core names it.
pub(super) fn thread(t: &ThreadInfo) -> Thread {
    Thread {
        global: t.global,
        collection: t.collection,
        name: t.name.clone(),
    }
}

/// A registered collection as the core's structure lists it.
pub(super) fn collection(c: &CollectionInfo) -> Collection {
    Collection {
        name: c.name.clone(),
        threads: c.threads.iter().map(|t| thread(t)).collect(),
    }
}

/// A registered operation as the core's structure lists it (at its id's place).
pub(super) fn operation(o: &OpInfo) -> Operation {
    Operation {
        name: o.name.clone(),
        kind: o.kind.as_str().to_owned(),
        collection: o.collection,
    }
}

/// Threads stuck in nested schedule calls (see [`racetrack_runtime::StuckWait`]) as a
/// `deadlock` event: each waits for the threads where its call's messages are queued,
/// with a cycle among them. A step's start event is not known here (`event_id` 0).
pub(super) fn deadlock(waits: &[racetrack_runtime::StuckWait]) -> proto::Event {
    use racetrack_protocol::{Needs, Waiting};
    let ws: Vec<Waiting> = waits
        .iter()
        .map(|w| {
            let mut waits_for: Vec<String> = w.queued.iter().map(|(t, _, _)| t.name.to_string()).collect();
            waits_for.dedup();
            let queued: Vec<String> = w
                .queued
                .iter()
                .map(|(t, m, o)| format!("message {m} for {} at {}", o.name, t.name))
                .collect();
            let step = w
                .step
                .as_ref()
                .map_or(String::new(), |s| format!(" ({} {})", s.op.name, s.msg));
            Waiting {
                thread: w.thread.name.to_string(),
                call: w
                    .step
                    .as_ref()
                    .map_or_else(|| "schedule".to_owned(), |s| s.op.name.to_string()),
                event_id: 0,
                site: None,
                waits_for,
                needs: Needs::All,
                finished: Vec::new(),
                why: Some(format!(
                    "its step{step} called schedule, which waits for {}, queued behind a step that cannot end",
                    queued.join(", ")
                )),
            }
        })
        .collect();
    // From the first, follow the first thread each waits for until one comes again.
    let mut path: Vec<String> = Vec::new();
    let mut at = ws.first().map(|w| w.thread.clone());
    while let Some(t) = at {
        if let Some(i) = path.iter().position(|p| *p == t) {
            path.drain(..i);
            break;
        }
        at = ws
            .iter()
            .find(|w| w.thread == t)
            .and_then(|w| w.waits_for.first().cloned());
        path.push(t);
    }
    proto::Event::Deadlock {
        waits: ws,
        cycle: path,
    }
}
