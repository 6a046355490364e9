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
//! | `recv` | `thread`, `op`, `msg`, `position` (varint) |
//! | `start`, `stop` | `thread`, `op`, `msg`, then `instance` when bit 4 says so |
//! | `call` | a varint mask of the fields present (bit 0 `comm` … bit 13 `polls`, in [`CallInfo`]'s order), then each present one: strings as strings; `peer` a varint (0 `MPI_ANY_SOURCE`, 1 `MPI_PROC_NULL`, 2 `MPI_ROOT`, else 3 + the zigzagged rank); `tag` a varint (0 `MPI_ANY_TAG`, else 1 + the zigzagged tag); `count`, `bytes`, `root`, `rc` signed varints; `matched` its source, tag and bytes, signed; `forced` its source, then its tag plus one (0: none), signed; `created` its comm, rank and leader; `polls` a varint |

use crate::call::{AnyTag, CallInfo, Created, Forced, Matched, Peer, SpecialPeer, Tag};
use crate::compact::Kind;
use crate::varint::{get_u, put_i, put_u, unzigzag, zigzag, Bad};
use crate::{Event, RecvEv, SendEv, Step, StepEv};
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
                out.push(1 | (u8::from(r.traced) << 2) | (u8::from(r.call.is_some()) << 3));
                put_u(out, r.event_id.wrapping_sub(self.prev_id));
                put_str(out, &r.thread);
                put_str(out, &r.op);
                put_str(out, &r.msg);
                put_u(out, r.position as u64);
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
        let msg = self.msg_text();
        let call = self.call.as_ref().map(|c| Box::new(CallInfo::clone(c)));
        let (thread, op) = (self.thread.to_string(), self.op.to_string());
        match self.kind {
            Kind::Send => Event::Send(SendEv {
                event_id: self.event_id,
                thread: Some(thread),
                op: Some(op),
                msg,
                to_op: None,
                to_thread: self.to_thread.as_deref().map(str::to_owned),
                type_name: self.type_name.to_string(),
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
}

/// Read a binary event frame's events.
pub(crate) fn parse_events(bytes: &[u8]) -> Result<Vec<Event>, String> {
    let Some((count, body)) = bytes.get(1..).and_then(|b| b.split_first_chunk::<4>()) else {
        return Err("binary event frame: no event count".to_owned());
    };
    let count = u32::from_le_bytes(*count) as usize;
    // The smallest event takes 5 bytes (a recv of empty names).
    if count > body.len() / 5 {
        return Err(format!(
            "binary event frame: {count} events cannot fit in {} bytes",
            body.len()
        ));
    }
    let mut r = Reader { b: body, i: 0 };
    let mut out = Vec::with_capacity(count);
    let mut prev_id = 0u64;
    while r.i < r.b.len() {
        let at = r.i;
        let head = r.byte()?;
        let event_id = prev_id.wrapping_add(r.u()?);
        prev_id = event_id;
        let traced = head & 4 != 0;
        let has_call = head & 8 != 0;
        let ev = match head & 3 {
            0 => {
                let opt = |bit: u8, r: &mut Reader| -> Result<Option<String>, String> {
                    if head & (1 << bit) != 0 {
                        r.string().map(Some)
                    } else {
                        Ok(None)
                    }
                };
                let thread = opt(4, &mut r)?;
                let op = opt(5, &mut r)?;
                let msg = r.string()?;
                let to_op = opt(6, &mut r)?;
                let to_thread = opt(7, &mut r)?;
                let type_name = r.string()?;
                let call = r.call(has_call)?;
                Event::Send(SendEv {
                    event_id,
                    thread,
                    op,
                    msg,
                    to_op,
                    to_thread,
                    type_name,
                    traced,
                    held: false,
                    reason: None,
                    content: None,
                    call,
                })
            }
            1 => {
                if head >> 4 != 0 {
                    return Err(r.bad_head(head, at));
                }
                let (thread, op, msg) = (r.string()?, r.string()?, r.string()?);
                let position = usize::try_from(r.u()?).map_err(|_| r.truncated())?;
                let call = r.call(has_call)?;
                Event::Recv(RecvEv {
                    event_id,
                    thread,
                    op,
                    msg,
                    position,
                    traced,
                    call,
                })
            }
            kind => {
                let step = match (head >> 5) & 7 {
                    0 => Step::Run,
                    1 => Step::Absorb,
                    2 => Step::Final,
                    _ => return Err(r.bad_head(head, at)),
                };
                let (thread, op, msg) = (r.string()?, r.string()?, r.string()?);
                let instance = if head & 16 != 0 { r.string()? } else { msg.clone() };
                let call = r.call(has_call)?;
                let s = StepEv {
                    event_id,
                    thread,
                    op,
                    msg,
                    instance,
                    step,
                    traced,
                    held: false,
                    reason: None,
                    call,
                };
                if kind == 2 {
                    Event::Start(s)
                } else {
                    Event::Stop(s)
                }
            }
        };
        out.push(ev);
    }
    if out.len() != count {
        return Err(format!(
            "binary event frame: {} events where its header says {count}",
            out.len()
        ));
    }
    Ok(out)
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl Reader<'_> {
    fn truncated(&self) -> String {
        format!("binary event frame: truncated at byte {}", self.i + HEADER)
    }

    fn bad_head(&self, head: u8, at: usize) -> String {
        format!(
            "binary event frame: bad event head {head:#04x} at byte {}",
            at + HEADER
        )
    }

    fn byte(&mut self) -> Result<u8, String> {
        let v = *self.b.get(self.i).ok_or_else(|| self.truncated())?;
        self.i += 1;
        Ok(v)
    }

    fn u(&mut self) -> Result<u64, String> {
        get_u(self.b, &mut self.i).map_err(|bad| match bad {
            Bad::Truncated => self.truncated(),
            Bad::TooLarge => format!("binary event frame: number too large at byte {}", self.i + HEADER),
        })
    }

    fn i64(&mut self) -> Result<i64, String> {
        Ok(unzigzag(self.u()?))
    }

    fn i32(&mut self) -> Result<i32, String> {
        let at = self.i;
        i32::try_from(self.i64()?)
            .map_err(|_| format!("binary event frame: number out of range at byte {}", at + HEADER))
    }

    fn string(&mut self) -> Result<String, String> {
        let n = usize::try_from(self.u()?).map_err(|_| self.truncated())?;
        let s = self
            .b
            .get(self.i..self.i.saturating_add(n))
            .ok_or_else(|| self.truncated())?;
        let at = self.i;
        self.i += n;
        std::str::from_utf8(s).map(str::to_owned).map_err(|e| {
            format!(
                "binary event frame: text at byte {} is not UTF-8: {e}",
                at + HEADER
            )
        })
    }

    fn call(&mut self, present: bool) -> Result<Option<Box<CallInfo>>, String> {
        if !present {
            return Ok(None);
        }
        let at = self.i;
        let mask = self.u()?;
        if mask >> 14 != 0 {
            return Err(format!(
                "binary event frame: unknown call fields {mask:#x} at byte {}",
                at + HEADER
            ));
        }
        let has = |bit: u32| mask & (1 << bit) != 0;
        let mut c = CallInfo::default();
        if has(0) {
            c.comm = Some(self.string()?);
        }
        if has(1) {
            let at = self.i;
            c.peer = Some(match self.u()? {
                0 => Peer::Special(SpecialPeer::AnySource),
                1 => Peer::Special(SpecialPeer::ProcNull),
                2 => Peer::Special(SpecialPeer::Root),
                z => Peer::Rank(unzigzag32(z - 3).ok_or_else(|| out_of_range(at))?),
            });
        }
        if has(2) {
            let at = self.i;
            c.tag = Some(match self.u()? {
                0 => Tag::Any(AnyTag::AnyTag),
                z => Tag::Tag(unzigzag32(z - 1).ok_or_else(|| out_of_range(at))?),
            });
        }
        if has(3) {
            c.count = Some(self.i32()?);
        }
        if has(4) {
            c.datatype = Some(self.string()?);
        }
        if has(5) {
            c.bytes = Some(self.i64()?);
        }
        if has(6) {
            c.root = Some(self.i32()?);
        }
        if has(7) {
            c.site = Some(self.string()?);
        }
        if has(8) {
            c.matched = Some(Matched {
                source: self.i32()?,
                tag: self.i32()?,
                bytes: self.i64()?,
            });
        }
        if has(9) {
            let source = self.i32()?;
            let tag = self.i64()?;
            let at = self.i;
            let tag = match tag {
                0 => None,
                t => Some(i32::try_from(t - 1).map_err(|_| out_of_range(at))?),
            };
            c.forced = Some(Forced { source, tag });
        }
        if has(10) {
            c.created = Some(Created {
                comm: self.string()?,
                rank: self.i32()?,
                leader: self.i32()?,
            });
        }
        if has(11) {
            c.label = Some(self.string()?);
        }
        if has(12) {
            c.rc = Some(self.i32()?);
        }
        if has(13) {
            c.polls = Some(self.u()?);
        }
        Ok(Some(Box::new(c)))
    }
}

fn unzigzag32(z: u64) -> Option<i32> {
    i32::try_from(unzigzag(z)).ok()
}

fn out_of_range(at: usize) -> String {
    format!("binary event frame: number out of range at byte {}", at + HEADER)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(start: bool, call: Option<CallInfo>) -> Event {
        let s = StepEv {
            event_id: 2_000_000_000_007,
            thread: "rank[2]".into(),
            op: "MPI_Recv".into(),
            msg: "2.7".into(),
            instance: "2.7".into(),
            step: Step::Run,
            traced: false,
            held: false,
            reason: None,
            call: call.map(Box::new),
        };
        if start {
            Event::Start(s)
        } else {
            Event::Stop(s)
        }
    }

    fn every_field() -> CallInfo {
        CallInfo {
            comm: Some("comm 3".into()),
            peer: Some(Peer::Special(SpecialPeer::AnySource)),
            tag: Some(Tag::Any(AnyTag::AnyTag)),
            count: Some(-1),
            datatype: Some("MPI_DOUBLE".into()),
            bytes: Some(1 << 40),
            root: Some(0),
            site: Some("/src/ring.c:43 (pass_token) «é»".into()),
            matched: Some(Matched {
                source: 3,
                tag: i32::MAX,
                bytes: -1,
            }),
            forced: Some(Forced {
                source: 1,
                tag: Some(-5),
            }),
            created: Some(Created {
                comm: "comm 4".into(),
                rank: 2,
                leader: i32::MIN,
            }),
            label: Some("phase \"2\"".into()),
            rc: Some(15),
            polls: Some(u64::MAX),
        }
    }

    /// Every kind and every field goes through unchanged, in order.
    #[test]
    fn events_read_back_as_written() {
        let mut evs = vec![
            step(true, Some(every_field())),
            step(false, None),
            step(
                true,
                Some(CallInfo {
                    peer: Some(Peer::Rank(-7)),
                    tag: Some(Tag::Tag(0)),
                    forced: Some(Forced { source: 0, tag: None }),
                    ..CallInfo::default()
                }),
            ),
            Event::Send(SendEv {
                event_id: 1,
                thread: Some("rank[0]".into()),
                op: None,
                msg: "0.1".into(),
                to_op: None,
                to_thread: Some("rank[1]".into()),
                type_name: "MPI_INT".into(),
                traced: true,
                held: false,
                reason: None,
                content: None,
                call: Some(Box::new(CallInfo {
                    peer: Some(Peer::Special(SpecialPeer::ProcNull)),
                    ..CallInfo::default()
                })),
            }),
            Event::Recv(RecvEv {
                event_id: 0,
                thread: "rank[1]".into(),
                op: "MPI_Irecv".into(),
                msg: "1.4".into(),
                position: 300,
                traced: false,
                call: None,
            }),
        ];
        if let Event::Stop(s) = &mut evs[1] {
            s.instance = "2.1".into();
            s.step = Step::Final;
        }
        let mut w = EventWriter::with_capacity(16);
        for ev in &evs {
            assert!(w.push(ev), "{ev:?}");
        }
        assert_eq!(w.len(), evs.len());
        assert_eq!(parse_events(&w.finish()), Ok(evs));
    }

    /// A shared event is written byte for byte as the event it stands for.
    #[test]
    fn a_shared_event_is_written_as_its_event() {
        let call = Arc::new(every_field());
        let name = |s: &str| -> Arc<str> { s.into() };
        for kind in [Kind::Send, Kind::Recv, Kind::Start, Kind::Stop] {
            for (to_thread, call) in [(None, None), (Some(name("rank[3]")), Some(call.clone()))] {
                let ev = SharedEv {
                    kind,
                    event_id: 1_000_000_000_042,
                    thread: name("rank[1]"),
                    op: name("MPI_Isend"),
                    msg: [1, 41],
                    to_thread: to_thread.filter(|_| kind == Kind::Send),
                    type_name: name(if kind == Kind::Send { "MPI_INT" } else { "" }),
                    call,
                };
                let (mut a, mut b) = (EventWriter::with_capacity(8), EventWriter::with_capacity(8));
                for _ in 0..2 {
                    a.push_shared(&ev);
                    assert!(b.push(&ev.to_event()));
                }
                let (a, b) = (a.finish(), b.finish());
                assert_eq!(a, b, "{kind:?}");
                assert_eq!(parse_events(&a), Ok(vec![ev.to_event(), ev.to_event()]));
            }
        }
    }

    /// Held events and contents are left to JSON frames; damage is named, never a panic.
    #[test]
    fn what_does_not_fit_is_refused_and_damage_is_an_error() {
        let mut held = step(true, None);
        if let Event::Start(s) = &mut held {
            s.held = true;
        }
        let mut w = EventWriter::with_capacity(16);
        assert!(!w.push(&held));
        assert!(!w.push(&Event::Released {
            event_id: 1,
            thread: "t".into()
        }));
        assert!(w.is_empty());
        assert!(w.push(&step(true, Some(every_field()))));
        let bytes = w.finish();
        for cut in 1..bytes.len() {
            let e = parse_events(&bytes[..cut]).expect_err("a truncated frame");
            assert!(e.starts_with("binary event frame: "), "{e}");
        }
        let mut wrong = bytes.clone();
        wrong[1] = 2;
        assert!(parse_events(&wrong).is_err());
        let mut bad_step = bytes;
        bad_step[HEADER] |= 3 << 5;
        assert!(parse_events(&bad_step)
            .expect_err("bad head")
            .contains("bad event head"));
    }
}
