//! Binary packed frames: the one binary encoding of the streamed notifications (`send`,
//! `recv`, `start`, `stop` that are not held and carry no content: [`Compact`]), the
//! runtime's and the MPI library's alike, for a debugger that asks for them in its
//! handshake (request header [`BINARY_HEADER`]`: binary`). The agent formats no decimal
//! numbers and the debugger parses none (it formats message ids once, for the text it
//! keeps), nothing is escaped, and names are the `structure`'s indexes: per event, this is
//! what a debugger attached to a busy program costs both sides most. A client that asks
//! for text gets the same events as JSON instead ([`crate::Names::expand`]).
//!
//! Layout: the byte [`BINARY_PACKED`], the number of events (4 bytes, little-endian: the
//! reader sizes its vector once), then the events one after the other until the end.
//! Integers are LEB128 varints (7 bits a byte, low bits first); signed ones zigzag-encoded
//! first (0, -1, 1, -2, … → 0, 1, 2, 3, …). One event:
//!
//! | field | encoding |
//! |---|---|
//! | head | one byte: kind in bits 0–1, `traced` in bit 2, text form in bits 3–4 (0: `""`, 1: a string, 2: a message id), a `call` in bit 5, a `recv`'s `from` in bit 6; bit 7 is 0 |
//! | `event_id` | varint: the difference to the previous event's id in the frame (the first: to 0), modulo 2⁶⁴ |
//! | `thread`, `op` | signed varints |
//! | `msg` | varint count of components, then each component as a varint (`"3.0.17"`: 3, 3, 0, 17) |
//! | `a`, `b` | signed varints |
//! | text | form 1: varint byte length, then UTF-8; form 2: a message id as `msg` |
//! | `from` | when bit 6 says so: the sending thread (signed varint) and the `send`'s `event_id` (varint) |
//! | `call` | when bit 5 says so: an MPI call's parameters ([`crate::CallInfo`]), as the `call` module below lays them out |

use crate::compact::{Compact, Kind, PackedEv, Record, RecordText, SentBy};
use crate::error::{BinaryFrame, DecodeError};
use crate::varint::{get_u, put_i, put_u, unzigzag, Bad};
use smol_str::SmolStr;
use std::sync::Arc;

/// The first byte of a binary packed frame: the version of this layout.
pub const BINARY_PACKED: u8 = 1;

/// The WebSocket handshake request header (value `binary`) by which a debugger asks the
/// agent for binary packed frames. Without it, packed frames are JSON text.
pub const BINARY_HEADER: &str = "racetrack-packed";

/// Writes one binary packed frame.
#[derive(Debug)]
pub struct BinaryWriter {
    out: Vec<u8>,
    prev_id: u64,
    len: usize,
}

impl BinaryWriter {
    /// An empty frame with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        let mut out = Vec::with_capacity(capacity);
        out.push(BINARY_PACKED);
        // The count, set by `finish`.
        out.extend_from_slice(&[0; 4]);
        Self {
            out,
            prev_id: 0,
            len: 0,
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

    /// Append one event.
    pub fn push(&mut self, ev: &Record) {
        let form = match ev.text {
            RecordText::None => 0,
            RecordText::Type(_) => 1,
            RecordText::Parent | RecordText::Instance(_) => 2,
        };
        let out = &mut self.out;
        out.push(
            ev.kind.code()
                | (u8::from(ev.traced) << 2)
                | (form << 3)
                | if ev.call.is_some() { HAS_CALL } else { 0 }
                | if ev.from.is_some() { HAS_FROM } else { 0 },
        );
        put_u(out, ev.event_id.wrapping_sub(self.prev_id));
        self.prev_id = ev.event_id;
        put_i(out, ev.thread);
        put_i(out, ev.op);
        put_id(out, ev.msg.components());
        put_i(out, ev.a);
        put_i(out, ev.b);
        match &ev.text {
            RecordText::None => {}
            RecordText::Type(s) => {
                put_u(out, s.len() as u64);
                out.extend_from_slice(s.as_bytes());
            }
            RecordText::Parent => put_id(out, ev.parent()),
            RecordText::Instance(id) => put_id(out, id.components()),
        }
        if let Some(f) = &ev.from {
            put_i(out, f.thread);
            put_u(out, f.event_id);
        }
        if let Some(c) = &ev.call {
            call::put_call(out, c);
        }
        self.len += 1;
    }

    /// The frame's bytes.
    pub fn finish(mut self) -> Vec<u8> {
        let n = u32::try_from(self.len).unwrap_or(u32::MAX);
        self.out[1..5].copy_from_slice(&n.to_le_bytes());
        self.out
    }
}

fn put_id(out: &mut Vec<u8>, id: &[u64]) {
    put_u(out, id.len() as u64);
    for &c in id {
        put_u(out, c);
    }
}

/// Read a binary packed frame's events (not yet checked against any names).
pub(crate) fn parse_binary(bytes: &[u8]) -> Result<Vec<PackedEv>, DecodeError> {
    const FRAME: BinaryFrame = BinaryFrame::Packed;
    let body = match bytes.split_first() {
        Some((&BINARY_PACKED, body)) => body,
        Some((&found, _)) => return Err(DecodeError::UnknownLayout { found }),
        None => return Err(DecodeError::Empty),
    };
    let Some((count, body)) = body.split_first_chunk::<4>() else {
        return Err(DecodeError::NoCount { frame: FRAME });
    };
    let count = u32::from_le_bytes(*count) as usize;
    // The smallest event takes 7 bytes.
    if count > body.len() / 7 {
        return Err(DecodeError::CountTooLarge {
            frame: FRAME,
            count,
            bytes: body.len(),
        });
    }
    let mut r = Reader::new(body);
    // (A frame claiming more events than the agent ever puts in one grows as it is read.)
    let mut out = Vec::with_capacity(count.min(4096));
    let mut prev_id = 0u64;
    let mut last_text = None;
    while r.i < r.b.len() {
        let at = r.i;
        let head = r.byte()?;
        if head >> 7 != 0 || (head >> 3) & 3 == 3 {
            return Err(DecodeError::BadHead {
                frame: FRAME,
                head,
                at: at + HEADER + 1,
            });
        }
        let event_id = prev_id.wrapping_add(r.u()?);
        prev_id = event_id;
        let (thread, op) = (r.i()?, r.i()?);
        let msg = r.id()?;
        let (a, b) = (r.i()?, r.i()?);
        let text = match (head >> 3) & 3 {
            0 => SmolStr::default(),
            1 => r.string(event_id, &mut last_text)?,
            _ => r.id()?,
        };
        let (from, call) = r.extras(head)?;
        out.push(Compact {
            kind: Kind::from_bits(head),
            event_id,
            thread,
            op,
            msg,
            a,
            b,
            traced: head & 4 != 0,
            text,
            from,
            call,
        });
    }
    if out.len() != count {
        return Err(DecodeError::CountMismatch {
            frame: FRAME,
            found: out.len(),
            count,
        });
    }
    Ok(out)
}

/// What may follow an event's text: a `recv`'s link and a call.
type Extras = (Option<Box<SentBy>>, Option<Arc<crate::CallInfo>>);

/// The head bits saying a `from` and a `call` follow the text.
const HAS_FROM: u8 = 1 << 6;
const HAS_CALL: u8 = 1 << 5;

impl Reader<'_> {
    /// What follows an event's text, as its head says: a `recv`'s link, a call.
    fn extras(&mut self, head: u8) -> Result<Extras, DecodeError> {
        let from = if head & HAS_FROM != 0 {
            Some(Box::new(SentBy {
                thread: self.i()?,
                event_id: self.u()?,
            }))
        } else {
            None
        };
        let call = if head & HAS_CALL != 0 {
            Some(Arc::new(self.call()?))
        } else {
            None
        };
        Ok((from, call))
    }
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
    /// A message id's text being built (reused).
    scratch: Vec<u8>,
    /// The calls' texts read last (sites, communicators, datatypes), to share rather
    /// than copy again: a call site's text is long enough to be allocated, and a frame's
    /// calls come from a few sites.
    texts: Vec<(&'a [u8], SmolStr)>,
    /// Where the next text read goes once `texts` is full.
    texts_next: usize,
}

impl<'a> Reader<'a> {
    fn new(b: &'a [u8]) -> Self {
        Self {
            b,
            i: 0,
            scratch: Vec::with_capacity(32),
            texts: Vec::new(),
            texts_next: 0,
        }
    }

    /// A string (a `send`'s type name). Type names repeat: `last`, the previous one read,
    /// is reused when the bytes match.
    fn string(
        &mut self,
        event_id: u64,
        last: &mut Option<(&'a [u8], SmolStr)>,
    ) -> Result<SmolStr, DecodeError> {
        let n = usize::try_from(self.u()?).map_err(|_| self.truncated())?;
        let b: &'a [u8] = self.b;
        let s = b
            .get(self.i..self.i.saturating_add(n))
            .ok_or_else(|| self.truncated())?;
        self.i += n;
        if let Some((bytes, text)) = last {
            if *bytes == s {
                return Ok(text.clone());
            }
        }
        let text = SmolStr::new(
            std::str::from_utf8(s).map_err(|source| DecodeError::PackedTextNotUtf8 { event_id, source })?,
        );
        *last = Some((s, text.clone()));
        Ok(text)
    }

    fn truncated(&self) -> DecodeError {
        DecodeError::Truncated {
            frame: BinaryFrame::Packed,
            at: self.i + HEADER + 1,
        }
    }

    fn byte(&mut self) -> Result<u8, DecodeError> {
        let v = *self.b.get(self.i).ok_or_else(|| self.truncated())?;
        self.i += 1;
        Ok(v)
    }

    #[inline]
    fn u(&mut self) -> Result<u64, DecodeError> {
        // Most numbers here are below 128: one byte.
        if let Some(&v) = self.b.get(self.i) {
            if v < 0x80 {
                self.i += 1;
                return Ok(u64::from(v));
            }
        }
        self.u_long()
    }

    fn u_long(&mut self) -> Result<u64, DecodeError> {
        get_u(self.b, &mut self.i).map_err(|bad| match bad {
            Bad::Truncated => self.truncated(),
            Bad::TooLarge => DecodeError::NumberTooLarge {
                frame: BinaryFrame::Packed,
                at: self.i + HEADER,
            },
        })
    }

    #[inline]
    fn i(&mut self) -> Result<i64, DecodeError> {
        Ok(unzigzag(self.u()?))
    }

    /// A message id, as its text (`"3.0.17"`). Built in place when it fits a `SmolStr`
    /// inline (23 bytes: nearly every id), without an intermediate string.
    fn id(&mut self) -> Result<SmolStr, DecodeError> {
        let n = self.u()?;
        // Every component takes a byte at least.
        if n > (self.b.len() - self.i) as u64 {
            return Err(self.truncated());
        }
        let mut inline = [0u8; INLINE];
        let mut len = 0;
        let mut k = 0;
        while k < n {
            let c = self.u()?;
            let dot = usize::from(k > 0);
            let d = digits(c);
            if len + dot + d > INLINE {
                return self.long_id(&inline[..len], k, c, n);
            }
            if dot == 1 {
                inline[len] = b'.';
            }
            write_digits(&mut inline[len + dot..len + dot + d], c);
            len += dot + d;
            k += 1;
        }
        // Digits and dots only: valid UTF-8.
        Ok(SmolStr::new_inline(
            std::str::from_utf8(&inline[..len]).unwrap_or_default(),
        ))
    }

    /// The rest of an id longer than [`INLINE`] bytes: `done` is its text so far, `c`
    /// component number `k` (read), of `n`.
    fn long_id(&mut self, done: &[u8], mut k: u64, mut c: u64, n: u64) -> Result<SmolStr, DecodeError> {
        let mut s = std::mem::take(&mut self.scratch);
        s.clear();
        s.extend_from_slice(done);
        let mut buf = itoa::Buffer::new();
        loop {
            if k > 0 {
                s.push(b'.');
            }
            s.extend_from_slice(buf.format(c).as_bytes());
            k += 1;
            if k == n {
                break;
            }
            c = self.u()?;
        }
        // Digits and dots only.
        let id = SmolStr::new(std::str::from_utf8(&s).unwrap_or_default());
        self.scratch = s;
        Ok(id)
    }
}

/// Bytes before the events: the layout byte and the count (error messages give positions
/// in the whole frame).
const HEADER: usize = 5;

/// What a `SmolStr` holds inline.
const INLINE: usize = 23;

/// Decimal digits of `n`.
fn digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Write `n` in decimal into `out`, which is exactly [`digits`]`(n)` long.
fn write_digits(out: &mut [u8], mut n: u64) {
    for b in out.iter_mut().rev() {
        *b = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

mod call;

#[cfg(test)]
mod tests;
