//! Packed events (the common streamed `send`, `recv`, `start`, `stop`: not held, no
//! content, names as indexes into the latest `structure`) and the [`Decoder`] of every
//! frame an agent sends, which expands them with those names.
//!
//! A consumer that only prints or counts events can stay compact: [`Decoder::decode_binary`]
//! hands over a binary packed frame as [`Decoded::Packed`], [`PackedEv::write_json`] prints
//! one event exactly as the expanded [`Event`] serializes, without building it.

use crate::compact::{Compact, Kind, PackedEv};
use crate::error::DecodeError;
use crate::{CallInfo, Event, Link, RecvEv, SendEv, SmolStr, Step, StepEv};
use std::io::{self, Write};
use std::sync::Arc;

/// The names packed events refer to, from a `structure` event.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Names {
    /// Operation names by index.
    pub ops: Vec<String>,
    /// Thread names by index.
    pub threads: Vec<String>,
    /// Whole JSON fields naming them, for [`PackedEv::write_json`]: `,"op":"Work"`,
    /// `,"to_op":"Work"`, `,"thread":"proc[1]"`, `,"to_thread":"proc[1]"` (names quoted
    /// and escaped).
    op_fields: Vec<Box<[u8]>>,
    to_op_fields: Vec<Box<[u8]>>,
    thread_fields: Vec<Box<[u8]>>,
    to_thread_fields: Vec<Box<[u8]>>,
}

impl Names {
    /// The names a `structure` event defines (`None` for other events).
    pub fn of(ev: &Event) -> Option<Self> {
        match ev {
            Event::Structure {
                operations,
                collections,
                ..
            } => Some(Self::new(
                operations.iter().map(|o| o.name.clone()).collect(),
                collections
                    .iter()
                    .flat_map(|c| c.threads.iter().cloned())
                    .collect(),
            )),
            _ => None,
        }
    }

    /// Names from operation and thread lists in index order.
    pub fn new(ops: Vec<String>, threads: Vec<String>) -> Self {
        let fields = |key: &str, v: &[String]| {
            v.iter()
                .map(|n| {
                    format!(",\"{key}\":{}", serde_json::to_string(n).unwrap_or_default())
                        .into_bytes()
                        .into()
                })
                .collect()
        };
        Self {
            op_fields: fields("op", &ops),
            to_op_fields: fields("to_op", &ops),
            thread_fields: fields("thread", &threads),
            to_thread_fields: fields("to_thread", &threads),
            ops,
            threads,
        }
    }

    fn get<'a>(list: &'a [String], i: i64, what: &'static str) -> Result<Option<&'a str>, DecodeError> {
        if i < 0 {
            return Ok(None);
        }
        usize::try_from(i)
            .ok()
            .and_then(|i| list.get(i))
            .map(|n| Some(n.as_str()))
            .ok_or(DecodeError::UnknownName { what, index: i })
    }

    /// Operation number `i` (`None` for -1).
    pub fn op(&self, i: i64) -> Result<Option<&str>, DecodeError> {
        Self::get(&self.ops, i, "operation")
    }

    /// Thread number `i` (`None` for -1).
    pub fn thread(&self, i: i64) -> Result<Option<&str>, DecodeError> {
        Self::get(&self.threads, i, "thread")
    }

    /// Check that every index `p` uses exists (then [`PackedEv::write_json`] and
    /// [`Names::expand`] succeed).
    pub fn check(&self, p: &PackedEv) -> Result<(), DecodeError> {
        // The common case in a few comparisons (this runs for every streamed event); the
        // error is worded below.
        let has = |list: &[String], i: i64| i < 0 || (i as u64) < list.len() as u64;
        let fine = has(&self.threads, p.thread)
            && has(&self.ops, p.op)
            && match p.kind {
                Kind::Send => has(&self.ops, p.a) && has(&self.threads, p.b),
                Kind::Recv => p.thread >= 0 && p.op >= 0,
                Kind::Start | Kind::Stop => p.thread >= 0 && p.op >= 0 && (0..=2).contains(&p.a),
            }
            && p.from.as_ref().is_none_or(|f| has(&self.threads, f.thread));
        if fine {
            return Ok(());
        }
        self.thread(p.thread)?;
        self.op(p.op)?;
        if let Some(f) = &p.from {
            self.thread(f.thread)?;
        }
        match p.kind {
            Kind::Send => {
                self.op(p.a)?;
                self.thread(p.b)?;
            }
            Kind::Recv => {}
            Kind::Start | Kind::Stop if (0..=2).contains(&p.a) => {}
            Kind::Start | Kind::Stop => {
                return Err(DecodeError::UnknownStep {
                    event_id: p.event_id,
                    step: p.a,
                })
            }
        }
        if p.kind != Kind::Send && (p.thread < 0 || p.op < 0) {
            return Err(DecodeError::NoThreadOrOperation { event_id: p.event_id });
        }
        Ok(())
    }

    /// The ordinary event `p` stands for.
    pub fn expand(&self, p: PackedEv) -> Result<Event, DecodeError> {
        self.check(&p)?;
        let Compact {
            kind,
            event_id,
            thread,
            op,
            msg,
            a,
            b,
            traced,
            text,
            from,
            call,
        } = p;
        let call = call.map(|c| Box::new(Arc::try_unwrap(c).unwrap_or_else(|c| CallInfo::clone(&c))));
        let owned = |n: Result<Option<&str>, DecodeError>| n.ok().flatten().map(SmolStr::new);
        let from = from.and_then(|f| {
            Some(Link {
                thread: owned(self.thread(f.thread))?,
                event_id: f.event_id,
            })
        });
        let thread = owned(self.thread(thread));
        let op = owned(self.op(op));
        Ok(match kind {
            Kind::Send => Event::Send(SendEv {
                event_id,
                thread,
                op,
                msg,
                to_op: owned(self.op(a)),
                to_thread: owned(self.thread(b)),
                type_name: text,
                traced,
                held: false,
                reason: None,
                content: None,
                call,
            }),
            Kind::Recv => Event::Recv(RecvEv {
                event_id,
                thread: thread.unwrap_or_default(),
                op: op.unwrap_or_default(),
                msg,
                position: usize::try_from(a).unwrap_or_default(),
                traced,
                from,
                call,
            }),
            Kind::Start | Kind::Stop => {
                let ev = StepEv {
                    event_id,
                    thread: thread.unwrap_or_default(),
                    op: op.unwrap_or_default(),
                    instance: if text.is_empty() { msg.clone() } else { text },
                    msg,
                    step: step_of(a),
                    traced,
                    held: false,
                    reason: None,
                    call,
                };
                if kind == Kind::Start {
                    Event::Start(ev)
                } else {
                    Event::Stop(ev)
                }
            }
        })
    }
}

fn step_of(a: i64) -> Step {
    match a {
        0 => Step::Run,
        1 => Step::Absorb,
        _ => Step::Final,
    }
}

impl PackedEv {
    /// Write the expanded event as one JSON object, byte for byte what serializing
    /// [`Names::expand`]'s result gives, without building it. `names` must pass
    /// [`Names::check`] for this event (unknown indexes are written as absent names).
    pub fn write_json(&self, names: &Names, w: &mut impl Write) -> io::Result<()> {
        let mut out = Vec::with_capacity(256);
        self.append_json(names, &mut out);
        w.write_all(&out)
    }

    /// [`PackedEv::write_json`] into a buffer: this runs for every event `racetrack ctl`
    /// prints, so it appends bytes directly (no writer calls, no error paths per field).
    pub fn append_json(&self, names: &Names, out: &mut Vec<u8>) {
        self.append_fields(names, out);
        if let Some(call) = &self.call {
            // `call` is every notification's last field: it goes before the closing brace.
            out.pop();
            out.extend_from_slice(br#","call":"#);
            call.append_json(out);
            out.push(b'}');
        }
    }

    /// The event's JSON without its `call`.
    fn append_fields(&self, names: &Names, out: &mut Vec<u8>) {
        let Compact {
            kind,
            event_id,
            thread,
            op,
            msg,
            a,
            b,
            traced,
            text,
            from: _,
            call: _,
        } = self;
        // Room for the common event at once; the pieces below are whole fields.
        out.reserve(160);
        fn field(list: &[Box<[u8]>], i: i64) -> Option<&[u8]> {
            usize::try_from(i).ok().and_then(|i| list.get(i)).map(|f| &f[..])
        }
        let mut digits = itoa::Buffer::new();
        out.extend_from_slice(match kind {
            Kind::Send => br#"{"event":"send","event_id":"#,
            Kind::Recv => br#"{"event":"recv","event_id":"#,
            Kind::Start => br#"{"event":"start","event_id":"#,
            Kind::Stop => br#"{"event":"stop","event_id":"#,
        });
        out.extend_from_slice(digits.format(*event_id).as_bytes());
        let thread = field(&names.thread_fields, *thread);
        let op = field(&names.op_fields, *op);
        if *kind == Kind::Send {
            // A send names what it knows (absent: the schedule's caller or no thread).
            for f in [thread, op].into_iter().flatten() {
                out.extend_from_slice(f);
            }
            out.extend_from_slice(br#","msg":"#);
            push_str(out, msg);
            let to = [field(&names.to_op_fields, *a), field(&names.to_thread_fields, *b)];
            for f in to.into_iter().flatten() {
                out.extend_from_slice(f);
            }
            out.extend_from_slice(br#","type":"#);
            push_str(out, text);
            out.extend_from_slice(if *traced {
                br#","traced":true,"held":false}"#
            } else {
                br#","traced":false,"held":false}"#
            });
            return;
        }
        // `recv`, `start` and `stop` name both (an unknown name is written empty).
        out.extend_from_slice(thread.unwrap_or(br#","thread":"""#));
        out.extend_from_slice(op.unwrap_or(br#","op":"""#));
        out.extend_from_slice(br#","msg":"#);
        push_str(out, msg);
        if *kind == Kind::Recv {
            return self.append_recv_rest(names, out);
        }
        out.extend_from_slice(br#","instance":"#);
        push_str(out, if text.is_empty() { msg } else { text });
        out.extend_from_slice(match (step_of(*a), *traced) {
            (Step::Run, false) => br#","step":"run","traced":false,"held":false}"#,
            (Step::Run, true) => br#","step":"run","traced":true,"held":false}"#,
            (Step::Absorb, false) => br#","step":"absorb","traced":false,"held":false}"#,
            (Step::Absorb, true) => br#","step":"absorb","traced":true,"held":false}"#,
            (Step::Final, false) => br#","step":"final","traced":false,"held":false}"#,
            (Step::Final, true) => br#","step":"final","traced":true,"held":false}"#,
        });
    }

    /// A `recv`'s fields after `msg`: `position`, `traced` and `from`.
    fn append_recv_rest(&self, names: &Names, out: &mut Vec<u8>) {
        let mut digits = itoa::Buffer::new();
        out.extend_from_slice(br#","position":"#);
        out.extend_from_slice(
            digits
                .format(u64::try_from(self.a).unwrap_or_default())
                .as_bytes(),
        );
        out.extend_from_slice(if self.traced {
            br#","traced":true"#
        } else {
            br#","traced":false"#
        });
        // A link whose thread the names lack is left out, as `expand` leaves it.
        if let Some((f, t)) =
            (self.from.as_ref()).and_then(|f| Some((f, names.threads.get(usize::try_from(f.thread).ok()?)?)))
        {
            out.extend_from_slice(br#","from":{"thread":"#);
            push_str(out, t);
            out.extend_from_slice(br#","event_id":"#);
            out.extend_from_slice(digits.format(f.event_id).as_bytes());
            out.push(b'}');
        }
        out.push(b'}');
    }
}

/// Append `s` as a JSON string: as it is between quotes when nothing in it needs escaping
/// (message ids and type names, nearly always), else as serde_json escapes it.
fn push_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // Writing into a vector cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

/// What one frame carries.
#[derive(Debug)]
pub enum Decoded {
    /// Ordinary events, in order (a `batch` frame's, or the one event of a single frame).
    Events(Vec<Event>),
    /// A `packed` frame's events (checked against `names`), with the names they use.
    Packed(Arc<Names>, Vec<PackedEv>),
}

/// Decodes frames from the agent, remembering the names of the latest `structure`.
#[derive(Debug, Default, Clone)]
pub struct Decoder {
    names: Arc<Names>,
}

impl Decoder {
    /// Decode one text frame: JSON events (a `batch`'s in order).
    pub fn decode_frame(&mut self, text: &str) -> Result<Decoded, DecodeError> {
        let ev = crate::full::event(text)?;
        let mut out = Vec::new();
        self.flatten(ev, &mut out)?;
        Ok(Decoded::Events(out))
    }

    /// Decode one binary frame: a binary packed frame (see [`crate::binary`]), every event
    /// in it checked against the names (an unknown index fails the frame).
    pub fn decode_binary(&mut self, bytes: &[u8]) -> Result<Decoded, DecodeError> {
        let events = crate::binary::parse_binary(bytes)?;
        for p in &events {
            self.names.check(p)?;
        }
        Ok(Decoded::Packed(self.names.clone(), events))
    }

    /// Decode one text frame into ordinary events, in order (packed ones expanded).
    pub fn decode(&mut self, text: &str) -> Result<Vec<Event>, DecodeError> {
        match self.decode_frame(text)? {
            Decoded::Events(evs) => Ok(evs),
            Decoded::Packed(names, ps) => ps.into_iter().map(|p| names.expand(p)).collect(),
        }
    }

    fn flatten(&mut self, ev: Event, out: &mut Vec<Event>) -> Result<(), DecodeError> {
        match ev {
            Event::Batch { events } => {
                for e in events {
                    self.flatten(e, out)?;
                }
            }
            other => {
                self.observe(&other);
                out.push(other);
            }
        }
        Ok(())
    }

    /// Learn the names that packed events refer to from a `structure` event (other events
    /// are ignored).
    pub fn observe(&mut self, ev: &Event) {
        if let Some(n) = Names::of(ev) {
            self.names = Arc::new(n);
        }
    }

    /// The names packed events refer to now.
    pub fn names(&self) -> &Arc<Names> {
        &self.names
    }

    /// Expand one packed event with the current names.
    pub fn expand(&self, p: PackedEv) -> Result<Event, DecodeError> {
        self.names.expand(p)
    }
}

mod call_json;

#[cfg(test)]
mod tests;
