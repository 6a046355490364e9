//! Binary `packed` frames: the same events as a text `packed` frame ([`PackedEv`]), in a
//! WebSocket binary frame, for a debugger that asks for them in its handshake (request
//! header [`BINARY_HEADER`]`: binary`). The agent formats no decimal numbers and the
//! debugger parses none (it formats message ids once, for the text it keeps), and they
//! are about a third of the text's size: per event, this is what a debugger attached to a
//! busy program costs both sides most.
//!
//! Layout: the byte [`BINARY_PACKED`], the number of events (4 bytes, little-endian: the
//! reader sizes its vector once), then the events one after the other until the end.
//! Integers are LEB128 varints (7 bits a byte, low bits first); signed ones zigzag-encoded
//! first (0, -1, 1, -2, … → 0, 1, 2, 3, …). One event:
//!
//! | field | encoding |
//! |---|---|
//! | head | one byte: kind in bits 0–1, `traced` in bit 2, text form in bits 3–4 (0: `""`, 1: a string, 2: a message id); bits 5–7 are 0 |
//! | `event_id` | varint: the difference to the previous event's id in the frame (the first: to 0), modulo 2⁶⁴ |
//! | `thread`, `op` | signed varints |
//! | `msg` | varint count of components, then each component as a varint (`"3.0.17"`: 3, 3, 0, 17) |
//! | `a`, `b` | signed varints |
//! | text | form 1: varint byte length, then UTF-8; form 2: a message id as `msg` |

use crate::compact::{Compact, Kind, PackedEv, Record, RecordText};
use crate::error::{BinaryFrame, DecodeError};
use crate::varint::{get_u, put_i, put_u, unzigzag, Bad};
use smol_str::SmolStr;

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

    /// Append one event.
    pub fn push(&mut self, ev: &Record) {
        let form = match ev.text {
            RecordText::None => 0,
            RecordText::Type(_) => 1,
            RecordText::Parent | RecordText::Instance(_) => 2,
        };
        let out = &mut self.out;
        out.push(ev.kind.code() | (u8::from(ev.traced) << 2) | (form << 3));
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
    let mut r = Reader {
        b: body,
        i: 0,
        scratch: Vec::with_capacity(32),
    };
    // (A frame claiming more events than the agent ever puts in one grows as it is read.)
    let mut out = Vec::with_capacity(count.min(4096));
    let mut prev_id = 0u64;
    let mut last_text = None;
    while r.i < r.b.len() {
        let at = r.i;
        let head = r.byte()?;
        if head >> 5 != 0 || (head >> 3) & 3 == 3 {
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

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
    /// A message id's text being built (reused).
    scratch: Vec<u8>,
}

impl<'a> Reader<'a> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MsgPath;

    fn id(parts: &[u64]) -> RecordText {
        RecordText::Instance(Box::new(MsgPath::from_slice(parts)))
    }

    fn ev(kind: Kind, event_id: u64, msg: &[u64], text: RecordText) -> Record {
        Record {
            kind,
            event_id,
            thread: if kind == Kind::Send { -1 } else { 3 },
            op: 2,
            msg: MsgPath::from_slice(msg),
            a: -1,
            b: 1 << 40,
            traced: kind == Kind::Start,
            text,
        }
    }

    #[test]
    fn events_read_back_as_written() {
        let mut w = BinaryWriter::with_capacity(64);
        let events = [
            ev(Kind::Send, 12, &[0, 5], RecordText::Type("Task<é>")),
            ev(Kind::Recv, 13, &[0, 5], RecordText::None),
            ev(Kind::Start, 14, &[u64::MAX, 0, 127, 128], id(&[7])),
            ev(Kind::Stop, 3, &[], RecordText::None),
        ];
        for e in &events {
            w.push(e);
        }
        assert_eq!(w.len(), 4);
        let read = parse_binary(&w.finish()).unwrap();
        let want = vec![
            PackedEv::from((
                Kind::Send,
                12,
                -1,
                2,
                "0.5".into(),
                -1,
                1 << 40,
                false,
                "Task<é>".into(),
            )),
            PackedEv::from((Kind::Recv, 13, 3, 2, "0.5".into(), -1, 1 << 40, false, "".into())),
            PackedEv::from((
                Kind::Start,
                14,
                3,
                2,
                "18446744073709551615.0.127.128".into(),
                -1,
                1 << 40,
                true,
                "7".into(),
            )),
            // Ids need not increase: differences wrap.
            PackedEv::from((Kind::Stop, 3, 3, 2, "".into(), -1, 1 << 40, false, "".into())),
        ];
        assert_eq!(read, want);
    }

    #[test]
    fn signed_numbers_survive_the_zigzag() {
        for n in [0, 1, -1, 63, -64, 64, i64::MAX, i64::MIN] {
            let mut out = Vec::new();
            put_i(&mut out, n);
            let mut r = Reader {
                b: &out,
                i: 0,
                scratch: Vec::new(),
            };
            assert_eq!(r.i().unwrap(), n);
            assert_eq!(r.i, out.len());
        }
    }

    #[test]
    fn random_damage_never_panics() {
        let mut w = BinaryWriter::with_capacity(256);
        for (i, e) in [
            ev(Kind::Send, 7, &[0, 300], RecordText::Type("Task")),
            ev(Kind::Recv, 8, &[0, 300], RecordText::None),
            ev(Kind::Start, 9, &[1, 2, 3, 4, 5, 6, 7, 8], id(&[u64::MAX; 3])),
            ev(Kind::Stop, 10, &[0], RecordText::None),
        ]
        .iter()
        .enumerate()
        {
            assert_eq!(w.len(), i);
            w.push(e);
        }
        let good = w.finish();
        assert_eq!(parse_binary(&good).unwrap().len(), 4);
        // A small linear congruential generator: the same cases every run.
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) as usize
        };
        let mut errors = 0;
        for _ in 0..20_000 {
            let mut bad = good.clone();
            for _ in 0..=next() % 4 {
                let at = next() % bad.len();
                bad[at] = next() as u8;
            }
            bad.truncate(next() % (bad.len() + 1));
            // Either outcome is fine; a panic fails the test.
            errors += usize::from(parse_binary(&bad).is_err());
        }
        assert!(
            errors > 10_000,
            "most damaged frames are refused: {errors} of 20000"
        );
    }

    #[test]
    fn damaged_frames_are_errors_not_panics() {
        let mut w = BinaryWriter::with_capacity(64);
        w.push(&ev(Kind::Send, 1, &[1, 2, 3], RecordText::Type("T")));
        let good = w.finish();
        // Any cut: no layout, no count, or fewer events than counted.
        for cut in 0..good.len() {
            let r = parse_binary(&good[..cut]);
            assert!(r.is_err(), "a frame cut to {cut} bytes read as {r:?}");
        }
        let mut bad = good.clone();
        bad[0] = 9;
        let e = parse_binary(&bad).unwrap_err();
        assert!(matches!(e, DecodeError::UnknownLayout { found: 9 }), "{e}");
        assert!(e.to_string().contains("unknown layout 9"), "{e}");
        let mut bad = good.clone();
        bad[5] = 0xff;
        let e = parse_binary(&bad).unwrap_err();
        assert!(matches!(e, DecodeError::BadHead { head: 0xff, .. }), "{e}");
        assert!(e.to_string().contains("bad event head"), "{e}");
        // Counts that disagree with the events.
        let mut bad = good.clone();
        bad[1] = 9;
        let e = parse_binary(&bad).unwrap_err();
        assert!(matches!(e, DecodeError::CountTooLarge { count: 9, .. }), "{e}");
        assert!(e.to_string().contains("cannot fit"), "{e}");
        let mut bad = good.clone();
        bad.extend_from_slice(&good[5..]);
        let e = parse_binary(&bad).unwrap_err();
        assert!(
            matches!(
                e,
                DecodeError::CountMismatch {
                    found: 2,
                    count: 1,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("2 events where its header says 1"), "{e}");
        // A varint longer than 64 bits.
        let mut bad = vec![BINARY_PACKED, 1, 0, 0, 0, 0];
        bad.extend([0xff; 10]);
        bad.push(0);
        let e = parse_binary(&bad).unwrap_err();
        assert!(matches!(e, DecodeError::NumberTooLarge { .. }), "{e}");
        assert!(e.to_string().contains("too large"), "{e}");
        // A huge component count.
        let bad = [
            BINARY_PACKED,
            1,
            0,
            0,
            0,
            0,
            1,
            0,
            0,
            0xff,
            0xff,
            0xff,
            0xff,
            0x0f,
        ];
        assert!(parse_binary(&bad).is_err());
    }
}
