//! Reading binary event frames (the layout: the parent module).

use super::HEADER;
use crate::call::{AnyTag, CallInfo, Collective, Created, Forced, Matched, Peer, SpecialPeer, Tag};
use crate::error::{BinaryFrame, DecodeError};
use crate::varint::{get_u, unzigzag, Bad};
use crate::{Event, Link, RecvEv, SendEv, SmolStr, Step, StepEv};

const FRAME: BinaryFrame = BinaryFrame::Events;

/// Read a binary event frame's events.
pub(crate) fn parse_events(bytes: &[u8]) -> Result<Vec<Event>, DecodeError> {
    let Some((count, body)) = bytes.get(1..).and_then(|b| b.split_first_chunk::<4>()) else {
        return Err(DecodeError::NoCount { frame: FRAME });
    };
    let count = u32::from_le_bytes(*count) as usize;
    // The smallest event takes 5 bytes (a recv of empty names).
    if count > body.len() / 5 {
        return Err(DecodeError::CountTooLarge {
            frame: FRAME,
            count,
            bytes: body.len(),
        });
    }
    let mut r = Reader { b: body, i: 0 };
    let mut out = Vec::with_capacity(count);
    let mut prev_id = 0u64;
    while r.i < r.b.len() {
        let at = r.i;
        let head = r.byte()?;
        let event_id = prev_id.wrapping_add(r.u()?);
        prev_id = event_id;
        let ev = match head & 3 {
            0 => Event::Send(r.send_ev(head, event_id)?),
            1 => Event::Recv(r.recv_ev(head, event_id, at)?),
            2 => Event::Start(r.step_ev(head, event_id, at)?),
            _ => Event::Stop(r.step_ev(head, event_id, at)?),
        };
        out.push(ev);
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
}

impl Reader<'_> {
    /// A `send` whose head byte is `head`: bits 4–7 say which optional names follow.
    fn send_ev(&mut self, head: u8, event_id: u64) -> Result<SendEv, DecodeError> {
        let opt = |bit: u8, r: &mut Self| -> Result<Option<SmolStr>, DecodeError> {
            if head & (1 << bit) != 0 {
                r.string().map(Some)
            } else {
                Ok(None)
            }
        };
        let thread = opt(4, self)?;
        let op = opt(5, self)?;
        let msg = self.string()?;
        let to_op = opt(6, self)?;
        let to_thread = opt(7, self)?;
        let type_name = self.string()?;
        let call = self.call(head & 8 != 0)?;
        Ok(SendEv {
            event_id,
            thread,
            op,
            msg,
            to_op,
            to_thread,
            type_name,
            traced: head & 4 != 0,
            held: false,
            reason: None,
            content: None,
            call,
        })
    }

    /// A `recv` whose head byte (at `at`) is `head`.
    fn recv_ev(&mut self, head: u8, event_id: u64, at: usize) -> Result<RecvEv, DecodeError> {
        if head >> 5 != 0 {
            return Err(self.bad_head(head, at));
        }
        let (thread, op, msg) = (self.string()?, self.string()?, self.string()?);
        let position = usize::try_from(self.u()?).map_err(|_| self.truncated())?;
        let from = if head & 16 != 0 {
            Some(Link {
                thread: self.string()?,
                event_id: self.u()?,
            })
        } else {
            None
        };
        let call = self.call(head & 8 != 0)?;
        Ok(RecvEv {
            event_id,
            thread,
            op,
            msg,
            position,
            traced: head & 4 != 0,
            from,
            call,
        })
    }

    /// A `start` or `stop` whose head byte (at `at`) is `head`: bits 5–7 the step kind,
    /// bit 4 an instance other than the message.
    fn step_ev(&mut self, head: u8, event_id: u64, at: usize) -> Result<StepEv, DecodeError> {
        let step = match (head >> 5) & 7 {
            0 => Step::Run,
            1 => Step::Absorb,
            2 => Step::Final,
            _ => return Err(self.bad_head(head, at)),
        };
        let (thread, op, msg): (SmolStr, SmolStr, SmolStr) = (self.string()?, self.string()?, self.string()?);
        let instance = if head & 16 != 0 {
            self.string()?
        } else {
            msg.clone()
        };
        let call = self.call(head & 8 != 0)?;
        Ok(StepEv {
            event_id,
            thread,
            op,
            msg,
            instance,
            step,
            traced: head & 4 != 0,
            held: false,
            reason: None,
            call,
        })
    }
}

impl Reader<'_> {
    fn truncated(&self) -> DecodeError {
        DecodeError::Truncated {
            frame: FRAME,
            at: self.i + HEADER,
        }
    }

    fn bad_head(&self, head: u8, at: usize) -> DecodeError {
        DecodeError::BadHead {
            frame: FRAME,
            head,
            at: at + HEADER,
        }
    }

    fn byte(&mut self) -> Result<u8, DecodeError> {
        let v = *self.b.get(self.i).ok_or_else(|| self.truncated())?;
        self.i += 1;
        Ok(v)
    }

    fn u(&mut self) -> Result<u64, DecodeError> {
        get_u(self.b, &mut self.i).map_err(|bad| match bad {
            Bad::Truncated => self.truncated(),
            Bad::TooLarge => DecodeError::NumberTooLarge {
                frame: FRAME,
                at: self.i + HEADER,
            },
        })
    }

    fn i64(&mut self) -> Result<i64, DecodeError> {
        Ok(unzigzag(self.u()?))
    }

    fn i32(&mut self) -> Result<i32, DecodeError> {
        let at = self.i;
        i32::try_from(self.i64()?).map_err(|_| out_of_range(at))
    }

    /// A string, as the field takes it: names as [`SmolStr`](crate::SmolStr) (inline up
    /// to 23 bytes: no allocation for a thread, an operation or a message id).
    fn string<T: for<'s> From<&'s str>>(&mut self) -> Result<T, DecodeError> {
        let n = usize::try_from(self.u()?).map_err(|_| self.truncated())?;
        let s = self
            .b
            .get(self.i..self.i.saturating_add(n))
            .ok_or_else(|| self.truncated())?;
        let at = self.i;
        self.i += n;
        std::str::from_utf8(s)
            .map(T::from)
            .map_err(|source| DecodeError::TextNotUtf8 {
                at: at + HEADER,
                source,
            })
    }

    fn call(&mut self, present: bool) -> Result<Option<Box<CallInfo>>, DecodeError> {
        if !present {
            return Ok(None);
        }
        let at = self.i;
        let mask = self.u()?;
        if mask >> 16 != 0 {
            return Err(DecodeError::UnknownCallFields {
                mask,
                at: at + HEADER,
            });
        }
        let has = |bit: u32| mask & (1 << bit) != 0;
        let mut c = CallInfo::default();
        if has(0) {
            c.comm = Some(self.string()?);
        }
        if has(1) {
            c.peer = Some(self.peer()?);
        }
        if has(2) {
            c.tag = Some(self.tag()?);
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
            c.forced = Some(self.forced()?);
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
        if has(14) {
            c.collective = Some(Collective {
                comm: self.string()?,
                leader: self.i32()?,
                n: self.u()?,
            });
        }
        if has(15) {
            c.saw = Some(Link {
                thread: self.string()?,
                event_id: self.u()?,
            });
        }
        Ok(Some(Box::new(c)))
    }

    /// A peer: 0–2 the special ones, else a rank zigzagged and offset by 3.
    fn peer(&mut self) -> Result<Peer, DecodeError> {
        let at = self.i;
        Ok(match self.u()? {
            0 => Peer::Special(SpecialPeer::AnySource),
            1 => Peer::Special(SpecialPeer::ProcNull),
            2 => Peer::Special(SpecialPeer::Root),
            z => Peer::Rank(unzigzag32(z - 3).ok_or_else(|| out_of_range(at))?),
        })
    }

    /// A tag: 0 for any, else the tag zigzagged and offset by 1.
    fn tag(&mut self) -> Result<Tag, DecodeError> {
        let at = self.i;
        Ok(match self.u()? {
            0 => Tag::Any(AnyTag::AnyTag),
            z => Tag::Tag(unzigzag32(z - 1).ok_or_else(|| out_of_range(at))?),
        })
    }

    /// A forced match: the source, and the tag plus one (0: the receive's own).
    fn forced(&mut self) -> Result<Forced, DecodeError> {
        let source = self.i32()?;
        let tag = self.i64()?;
        let at = self.i;
        let tag = match tag {
            0 => None,
            t => Some(i32::try_from(t - 1).map_err(|_| out_of_range(at))?),
        };
        Ok(Forced { source, tag })
    }
}

fn unzigzag32(z: u64) -> Option<i32> {
    i32::try_from(unzigzag(z)).ok()
}

fn out_of_range(at: usize) -> DecodeError {
    DecodeError::OutOfRange {
        frame: FRAME,
        at: at + HEADER,
    }
}
