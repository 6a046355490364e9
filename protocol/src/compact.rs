//! The compact event: the four notifications (`send`, `recv`, `start`, `stop`) that are
//! streamed without being held or carrying content, with names as indexes into the latest
//! `structure`. One type, [`Compact`], in two forms:
//!
//! - [`Record`], what an agent writes: message ids as components ([`MsgPath`]), texts as a
//!   [`RecordText`] that allocates nothing for the common cases. Its writer is
//!   [`crate::BinaryWriter::push`] (binary packed frames, beside their parser in
//!   `binary.rs`); a client that asked for text gets the expanded events instead
//!   ([`Record::to_packed`], [`crate::Names::expand`]).
//! - [`PackedEv`], what a debugger decodes a binary packed frame into: ids and texts as
//!   strings, which is what the model keys and prints by.

use crate::call::CallInfo;
use smol_str::SmolStr;
use std::sync::Arc;

/// The kind of a compact event: the four notifications (`docs/GUIDE.md`, "Concepts"). On the
/// wire it is a number (0–3), the first element of a packed event and the low two bits of
/// a binary one's head.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// A message posted (`send`).
    Send = 0,
    /// A message enqueued (`recv`).
    Recv = 1,
    /// A step started (`start`).
    Start = 2,
    /// A step stopped (`stop`).
    Stop = 3,
}

impl Kind {
    /// The kind's number on the wire.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The kind numbered `code` on the wire, if it is one.
    pub const fn from_code(code: u64) -> Option<Kind> {
        match code {
            0 => Some(Kind::Send),
            1 => Some(Kind::Recv),
            2 => Some(Kind::Start),
            3 => Some(Kind::Stop),
            _ => None,
        }
    }

    /// The kind in the low two bits of `bits` (every value names one).
    pub const fn from_bits(bits: u8) -> Kind {
        match bits & 3 {
            0 => Kind::Send,
            1 => Kind::Recv,
            2 => Kind::Start,
            _ => Kind::Stop,
        }
    }

    /// The expanded event's name (`"event"` field).
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Send => "send",
            Kind::Recv => "recv",
            Kind::Start => "start",
            Kind::Stop => "stop",
        }
    }
}

/// One streamed event in compact form (on the wire: a binary packed frame's event, see
/// [`crate::binary`]):
///
/// | kind | event | `thread`, `op` | `a` | `b` | `text` |
/// |---|---|---|---|---|---|
/// | 0 | `send` | sending thread and operation (-1: none) | destination op (-1: none) | destination thread (-1: none) | type name (Rust's, or the MPI datatype) |
/// | 1 | `recv` | receiving thread, operation | queue position | 0 | `""` |
/// | 2, 3 | `start`, `stop` | thread, operation | step: 0 run, 1 absorb, 2 final | 0 | instance (`""`: same as `msg`) |
///
/// Threads are numbered across the `structure`'s collections in order (the first
/// collection's threads first), operations by their position in `operations`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compact<Id, Text> {
    /// Which notification.
    pub kind: Kind,
    /// The event's number in the stream.
    pub event_id: u64,
    /// Thread index (-1: none).
    pub thread: i64,
    /// Operation index (-1: none).
    pub op: i64,
    /// The message the event is about.
    pub msg: Id,
    /// Kind-specific number (see the table).
    pub a: i64,
    /// Kind-specific number (see the table).
    pub b: i64,
    /// Whether the message (start: the consumed one; stop: the outputs) is traced.
    pub traced: bool,
    /// Kind-specific text (see the table).
    pub text: Text,
    /// A `recv`'s link: the `send` it matched (an MPI job's debugger fills it in; see
    /// [`crate::Link`]). Boxed: agents never set it, and it keeps a record within the
    /// 128 bytes the agent moves it in.
    pub from: Option<Box<SentBy>>,
    /// An MPI call's parameters (the MPI library's events; `None` for the runtime's).
    /// Shared: a call's `start`, `send`, `recv` and `stop` carry the same one.
    pub call: Option<Arc<CallInfo>>,
}

/// The `send` a compact `recv` matched: its thread (an index, as `thread`) and number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SentBy {
    /// The sending thread's index.
    pub thread: i64,
    /// The `send` event's number.
    pub event_id: u64,
}

/// A compact event as a debugger decodes it: message id and text as strings (inline up to
/// 23 bytes, so decoding a frame allocates nothing per event).
pub type PackedEv = Compact<SmolStr, SmolStr>;

/// A compact event as an agent records it on the program's thread: nothing in it
/// allocates in the common cases.
pub type Record = Compact<MsgPath, RecordText>;

impl PackedEv {
    /// The kind's event name.
    pub fn kind_name(&self) -> &'static str {
        self.kind.name()
    }
}

/// A packed event's fields, in order: `(kind, event_id, thread, op, msg, a, b, traced,
/// text)`, with no call.
pub type PackedTuple = (Kind, u64, i64, i64, SmolStr, i64, i64, bool, SmolStr);

impl From<PackedTuple> for PackedEv {
    fn from((kind, event_id, thread, op, msg, a, b, traced, text): PackedTuple) -> Self {
        Compact {
            kind,
            event_id,
            thread,
            op,
            msg,
            a,
            b,
            traced,
            text,
            from: None,
            call: None,
        }
    }
}

/// The text of a [`Record`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum RecordText {
    /// `""`.
    #[default]
    None,
    /// A `send`'s type name: a Rust type's (static, `SmolStr::new_static`: nothing to
    /// copy) or an MPI datatype's (inline).
    Type(SmolStr),
    /// A `start` / `stop` whose instance is the message id's parent (an absorb step's,
    /// always): nothing to copy.
    Parent,
    /// A `start` / `stop` whose instance is another id (boxed: it keeps a record small).
    Instance(Box<MsgPath>),
}

/// A `send` with no thread, operation, message id or text, numbered 0: what a front end
/// fills in (`Record { kind, thread, …, ..Record::default() }`), so that a field added
/// later, which the front end does not know, takes its default.
impl Default for Record {
    fn default() -> Self {
        Compact {
            kind: Kind::Send,
            event_id: 0,
            thread: -1,
            op: -1,
            msg: MsgPath::default(),
            a: -1,
            b: -1,
            traced: false,
            text: RecordText::None,
            from: None,
            call: None,
        }
    }
}

impl Record {
    /// The event as a debugger decodes it.
    pub fn to_packed(&self) -> PackedEv {
        let id = |parts: &[u64]| SmolStr::new(MsgPath::from_slice(parts).to_string());
        Compact {
            kind: self.kind,
            event_id: self.event_id,
            thread: self.thread,
            op: self.op,
            msg: id(self.msg.components()),
            a: self.a,
            b: self.b,
            traced: self.traced,
            from: self.from.clone(),
            call: self.call.clone(),
            text: match &self.text {
                RecordText::None => SmolStr::default(),
                RecordText::Type(t) => t.clone(),
                RecordText::Parent => id(self.parent()),
                RecordText::Instance(i) => id(i.components()),
            },
        }
    }

    /// The message id's parent's components (the instance of [`RecordText::Parent`]).
    pub fn parent(&self) -> &[u64] {
        let c = self.msg.components();
        &c[..c.len().saturating_sub(1)]
    }
}

/// A dotted message id (`0.3.1`) by its components. Ids of up to three components (every
/// id of a graph nested up to two splits deep) live inline, so that recording one on the
/// program's thread allocates nothing.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct MsgPath {
    /// The components when there are at most [`INLINE`] of them (the rest zero).
    inline: [u64; INLINE],
    /// How many of `inline` are components (zero when they live in `heap`).
    len: u64,
    /// The components of a deeper id (boxed: one word, where a boxed slice takes two).
    #[allow(clippy::box_collection)]
    heap: Option<Box<Vec<u64>>>,
}

/// Components stored without allocating.
const INLINE: usize = 3;

impl MsgPath {
    /// The id made of `parts`.
    #[inline]
    pub fn from_slice(parts: &[u64]) -> Self {
        if parts.len() <= INLINE {
            let mut inline = [0; INLINE];
            inline[..parts.len()].copy_from_slice(parts);
            Self {
                inline,
                len: parts.len() as u64,
                heap: None,
            }
        } else {
            Self {
                inline: [0; INLINE],
                len: 0,
                heap: Some(Box::new(parts.to_vec())),
            }
        }
    }

    /// The components, outermost first.
    #[inline]
    pub fn components(&self) -> &[u64] {
        match &self.heap {
            Some(h) => h,
            None => &self.inline[..self.len as usize],
        }
    }
}

impl std::fmt::Debug for MsgPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl std::fmt::Display for MsgPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, c) in self.components().iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msg_paths_keep_their_components_inline_or_not() {
        for parts in [&[][..], &[7], &[0, 3], &[1, 2, 3], &[1, 2, 3, 4, 5]] {
            let p = MsgPath::from_slice(parts);
            assert_eq!(p.components(), parts);
        }
        assert_eq!(MsgPath::from_slice(&[0, 3, 1]).to_string(), "0.3.1");
        assert_eq!(MsgPath::from_slice(&[1, 2, 3, 4]).to_string(), "1.2.3.4");
    }

    #[test]
    fn a_parent_instance_drops_the_last_component() {
        let r = Record {
            kind: Kind::Stop,
            event_id: 1,
            thread: 0,
            op: 0,
            msg: MsgPath::from_slice(&[4, 2]),
            a: 1,
            b: 0,
            traced: false,
            text: RecordText::Parent,
            from: None,
            call: None,
        };
        assert_eq!(r.parent(), &[4]);
    }
}
