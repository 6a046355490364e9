//! Binary event frames: the notifications (`send`, `recv`, `start`, `stop`) that are not
//! held and carry no content, as the full events they are, `call` included, for a
//! debugger that asked for binary frames ([`crate::BINARY_HEADER`]). These are the events
//! of the MPI library, which every call's parameters make full events: a debugger
//! attached to a busy MPI job spends most of its time reading them, and the job's agents
//! writing them, as JSON text. Here nothing is escaped, no decimal number is formatted or
//! parsed, and a string is its bytes.
//!
//! Layout: the byte [`BINARY_EVENTS`], the number of events (4 bytes, little-endian), then
//! the events. Integers are LEB128 varints, signed ones zigzag-encoded first, as in
//! [`crate::binary`]; a string is its byte length (varint) then its UTF-8; an optional
//! string or number is present when its bit in a mask says so. One event:
//!
//! | field | encoding |
//! |---|---|
//! | head | one byte: kind in bits 0–1 (0 `send`, 1 `recv`, 2 `start`, 3 `stop`), `traced` in bit 2, a `call` in bit 3; `start` / `stop`: `instance` differs from `msg` in bit 4, step in bits 5–6 (0 run, 1 absorb, 2 final); `send`: bits 4–7 say which of `thread`, `op`, `to_op`, `to_thread` are present |
//! | `event_id` | varint: the difference to the previous event's id in the frame (the first: to 0), modulo 2⁶⁴ |
//! | `send` | the present ones of `thread`, `op`, then `msg`, the present ones of `to_op`, `to_thread`, then `type` |
//! | `recv` | `thread`, `op`, `msg`, `position` (varint), then, when bit 4 of the head says so, `from`: its `thread` and its `event_id` (varint) |
//! | `start`, `stop` | `thread`, `op`, `msg`, then `instance` when bit 4 says so |
//! | `call` | a varint mask of the fields present (bit 0 `comm` … bit 15 `saw`, in [`CallInfo`]'s order), then each present one: strings as strings; `peer` a varint (0 `MPI_ANY_SOURCE`, 1 `MPI_PROC_NULL`, 2 `MPI_ROOT`, else 3 + the zigzagged rank); `tag` a varint (0 `MPI_ANY_TAG`, else 1 + the zigzagged tag); `count`, `bytes`, `root`, `rc` signed varints; `matched` its source, tag and bytes, signed; `forced` its source, then its tag plus one (0: none), signed; `created` its comm, rank and leader; `polls` a varint; `collective` its comm, leader (signed) and n; `saw` its thread and event id |

use crate::call::{AnyTag, CallInfo, Peer, SpecialPeer, Tag};
use crate::compact::Kind;
use crate::varint::{put_i, put_u, zigzag};
use crate::{Event, RecvEv, SendEv, SmolStr, Step, StepEv};
use std::sync::Arc;

/// The first byte of a binary event frame: the version of this layout.
pub const BINARY_EVENTS: u8 = 2;

/// Bytes before the first event: the layout byte and the count.
const HEADER: usize = 5;

/// Writes one binary event frame.
#[derive(Debug)]
pub struct EventWriter {
    out: Vec<u8>,
    prev_id: u64,
    len: usize,
}

impl EventWriter {
    /// An empty frame with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        let mut out = Vec::with_capacity(capacity);
        out.push(BINARY_EVENTS);
        out.extend_from_slice(&[0; 4]);
        Self {
            out,
            prev_id: 0,
            len: 0,
        }
    }

    /// Whether `ev` can be written here: a notification neither held nor carrying
    /// content. Anything else goes in a JSON frame.
    pub fn fits(ev: &Event) -> bool {
        match ev {
            Event::Send(s) => !s.held && s.content.is_none(),
            Event::Start(s) | Event::Stop(s) => !s.held,
            Event::Recv(_) => true,
            _ => false,
        }
    }

    /// Events written so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no event was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> usize {
        self.out.len()
    }

    /// Append `ev`; false (nothing written) if it does not [`fit`](Self::fits).
    pub fn push(&mut self, ev: &Event) -> bool {
        if !Self::fits(ev) {
            return false;
        }
        let out = &mut self.out;
        let (id, call) = match ev {
            Event::Send(s) => {
                let opt = [&s.thread, &s.op, &s.to_op, &s.to_thread];
                let mut head = (u8::from(s.traced) << 2) | (u8::from(s.call.is_some()) << 3);
                for (i, o) in opt.iter().enumerate() {
                    head |= u8::from(o.is_some()) << (4 + i);
                }
                out.push(head);
                put_u(out, s.event_id.wrapping_sub(self.prev_id));
                for o in &opt[..2] {
                    o.as_deref().inspect(|t| put_str(out, t));
                }
                put_str(out, &s.msg);
                for o in &opt[2..] {
                    o.as_deref().inspect(|t| put_str(out, t));
                }
                put_str(out, &s.type_name);
                (s.event_id, &s.call)
            }
            Event::Recv(r) => {
                out.push(
                    1 | (u8::from(r.traced) << 2)
                        | (u8::from(r.call.is_some()) << 3)
                        | (u8::from(r.from.is_some()) << 4),
                );
                put_u(out, r.event_id.wrapping_sub(self.prev_id));
                put_str(out, &r.thread);
                put_str(out, &r.op);
                put_str(out, &r.msg);
                put_u(out, r.position as u64);
                if let Some(l) = &r.from {
                    put_str(out, &l.thread);
                    put_u(out, l.event_id);
                }
                (r.event_id, &r.call)
            }
            Event::Start(s) | Event::Stop(s) => {
                let kind = if matches!(ev, Event::Start(_)) { 2 } else { 3 };
                let step = match s.step {
                    Step::Run => 0,
                    Step::Absorb => 1,
                    Step::Final => 2,
                };
                let other = s.instance != s.msg;
                out.push(
                    kind | (u8::from(s.traced) << 2)
                        | (u8::from(s.call.is_some()) << 3)
                        | (u8::from(other) << 4)
                        | (step << 5),
                );
                put_u(out, s.event_id.wrapping_sub(self.prev_id));
                put_str(out, &s.thread);
                put_str(out, &s.op);
                put_str(out, &s.msg);
                if other {
                    put_str(out, &s.instance);
                }
                (s.event_id, &s.call)
            }
            _ => return false,
        };
        if let Some(c) = call {
            put_call(out, c);
        }
        self.prev_id = id;
        self.len += 1;
        true
    }

    /// The frame's bytes.
    pub fn finish(mut self) -> Vec<u8> {
        let n = u32::try_from(self.len).unwrap_or(u32::MAX);
        self.out[1..HEADER].copy_from_slice(&n.to_le_bytes());
        self.out
    }
}

/// A `send`, `recv`, `start` or `stop` (`run` step) that is not held and carries no
/// content, as a front end with many calls buffers it: names and the call shared, not
/// copied, and the message id as its two components, so that recording one allocates
/// nothing on the program's thread. [`EventWriter::push_shared`] writes exactly what
/// [`EventWriter::push`] writes for [`SharedEv::to_event`].
#[derive(Debug, Clone, PartialEq)]
pub struct SharedEv {
    /// Which notification.
    pub kind: Kind,
    /// The event's number in the stream.
    pub event_id: u64,
    pub thread: Arc<str>,
    pub op: Arc<str>,
    /// The message id `A.B` (also the step's instance).
    pub msg: [u64; 2],
    /// A `send`'s destination thread.
    pub to_thread: Option<Arc<str>>,
    /// A `send`'s type name (`""` otherwise).
    pub type_name: Arc<str>,
    pub call: Option<Arc<CallInfo>>,
}

impl SharedEv {
    /// The message id's text.
    pub fn msg_text(&self) -> String {
        format!("{}.{}", self.msg[0], self.msg[1])
    }

    /// The event it stands for.
    pub fn to_event(&self) -> Event {
        let msg = SmolStr::from(self.msg_text());
        let call = self.call.as_ref().map(|c| Box::new(CallInfo::clone(c)));
        let (thread, op) = (SmolStr::new(&*self.thread), SmolStr::new(&*self.op));
        match self.kind {
            Kind::Send => Event::Send(SendEv {
                event_id: self.event_id,
                thread: Some(thread),
                op: Some(op),
                msg,
                to_op: None,
                to_thread: self.to_thread.as_deref().map(SmolStr::new),
                type_name: SmolStr::new(&*self.type_name),
                traced: false,
                held: false,
                reason: None,
                content: None,
                call,
            }),
            Kind::Recv => Event::Recv(RecvEv {
                event_id: self.event_id,
                thread,
                op,
                msg,
                position: 0,
                traced: false,
                from: None,
                call,
            }),
            Kind::Start | Kind::Stop => {
                let s = StepEv {
                    event_id: self.event_id,
                    thread,
                    op,
                    instance: msg.clone(),
                    msg,
                    step: Step::Run,
                    traced: false,
                    held: false,
                    reason: None,
                    call,
                };
                if self.kind == Kind::Start {
                    Event::Start(s)
                } else {
                    Event::Stop(s)
                }
            }
        }
    }
}

impl EventWriter {
    /// Append `ev` (as [`push`](Self::push) appends [`SharedEv::to_event`]).
    pub fn push_shared(&mut self, ev: &SharedEv) {
        let out = &mut self.out;
        let has_call = u8::from(ev.call.is_some()) << 3;
        match ev.kind {
            Kind::Send => {
                // thread and op present, to_op absent, to_thread as given.
                let head = has_call | (1 << 4) | (1 << 5) | (u8::from(ev.to_thread.is_some()) << 7);
                out.push(head);
            }
            Kind::Recv => out.push(1 | has_call),
            Kind::Start => out.push(2 | has_call),
            Kind::Stop => out.push(3 | has_call),
        }
        put_u(out, ev.event_id.wrapping_sub(self.prev_id));
        put_str(out, &ev.thread);
        put_str(out, &ev.op);
        put_msg(out, ev.msg);
        match ev.kind {
            Kind::Send => {
                if let Some(t) = &ev.to_thread {
                    put_str(out, t);
                }
                put_str(out, &ev.type_name);
            }
            Kind::Recv => put_u(out, 0),
            Kind::Start | Kind::Stop => {}
        }
        if let Some(c) = &ev.call {
            put_call(out, c);
        }
        self.prev_id = ev.event_id;
        self.len += 1;
    }
}

/// A message id `A.B` as a string, formatted in place.
fn put_msg(out: &mut Vec<u8>, [a, b]: [u64; 2]) {
    let (mut ab, mut bb) = (itoa::Buffer::new(), itoa::Buffer::new());
    let (a, b) = (ab.format(a), bb.format(b));
    put_u(out, (a.len() + 1 + b.len()) as u64);
    out.extend_from_slice(a.as_bytes());
    out.push(b'.');
    out.extend_from_slice(b.as_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

fn put_call(out: &mut Vec<u8>, c: &CallInfo) {
    let present = [
        c.comm.is_some(),
        c.peer.is_some(),
        c.tag.is_some(),
        c.count.is_some(),
        c.datatype.is_some(),
        c.bytes.is_some(),
        c.root.is_some(),
        c.site.is_some(),
        c.matched.is_some(),
        c.forced.is_some(),
        c.created.is_some(),
        c.label.is_some(),
        c.rc.is_some(),
        c.polls.is_some(),
        c.collective.is_some(),
        c.saw.is_some(),
    ];
    let mask = present
        .iter()
        .enumerate()
        .fold(0u64, |m, (i, p)| m | (u64::from(*p) << i));
    put_u(out, mask);
    c.comm.as_deref().inspect(|s| put_str(out, s));
    if let Some(p) = c.peer {
        put_u(
            out,
            match p {
                Peer::Special(SpecialPeer::AnySource) => 0,
                Peer::Special(SpecialPeer::ProcNull) => 1,
                Peer::Special(SpecialPeer::Root) => 2,
                Peer::Rank(r) => 3 + zigzag(i64::from(r)),
            },
        );
    }
    if let Some(t) = c.tag {
        put_u(
            out,
            match t {
                Tag::Any(AnyTag::AnyTag) => 0,
                Tag::Tag(t) => 1 + zigzag(i64::from(t)),
            },
        );
    }
    c.count.inspect(|n| put_i(out, i64::from(*n)));
    c.datatype.as_deref().inspect(|s| put_str(out, s));
    c.bytes.inspect(|n| put_i(out, *n));
    c.root.inspect(|n| put_i(out, i64::from(*n)));
    c.site.as_deref().inspect(|s| put_str(out, s));
    if let Some(m) = &c.matched {
        put_i(out, i64::from(m.source));
        put_i(out, i64::from(m.tag));
        put_i(out, m.bytes);
    }
    if let Some(f) = &c.forced {
        put_i(out, i64::from(f.source));
        put_i(out, f.tag.map_or(0, |t| i64::from(t) + 1));
    }
    if let Some(k) = &c.created {
        put_str(out, &k.comm);
        put_i(out, i64::from(k.rank));
        put_i(out, i64::from(k.leader));
    }
    c.label.as_deref().inspect(|s| put_str(out, s));
    c.rc.inspect(|n| put_i(out, i64::from(*n)));
    c.polls.inspect(|n| put_u(out, *n));
    if let Some(k) = &c.collective {
        put_str(out, &k.comm);
        put_i(out, i64::from(k.leader));
        put_u(out, k.n);
    }
    if let Some(l) = &c.saw {
        put_str(out, &l.thread);
        put_u(out, l.event_id);
    }
}

mod read;
pub(crate) use read::parse_events;

#[cfg(test)]
mod tests;
