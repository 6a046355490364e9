//! An MPI call's parameters in a binary packed frame: a varint mask of the fields present
//! (bit 0 `comm` … bit 16 `source`, bit 17 `awaits`, bit 18 `posted`), then each present
//! one:
//!
//! - strings (`comm`, `datatype`, `site`, `label`) as their byte length, then UTF-8;
//! - `peer` and `source` a varint: 0 `MPI_ANY_SOURCE`, 1 `MPI_PROC_NULL`, 2 `MPI_ROOT`,
//!   else 3 + the zigzagged rank;
//! - `tag` a varint: 0 `MPI_ANY_TAG`, else 1 + the zigzagged tag;
//! - `count`, `bytes`, `root`, `rc` signed varints;
//! - `matched` its source, tag and bytes, signed;
//! - `forced` its source, then its tag plus one (0: none), signed;
//! - `created` its comm, rank and leader;
//! - `polls` a varint;
//! - `collective` its comm, leader (signed) and n;
//! - `saw` its thread and event id;
//! - `awaits` and `posted` their length, then each receive's comm, peer and tag.

use super::{Reader, HEADER};
use crate::call::{AnyTag, Awaited, CallInfo, Collective, Created, Forced, Matched, Peer, SpecialPeer, Tag};
use crate::error::{BinaryFrame, DecodeError};
use crate::varint::{put_i, put_u, unzigzag, zigzag};
use crate::{Link, SmolStr};

pub(super) fn put_call(out: &mut Vec<u8>, c: &CallInfo) {
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
        c.source.is_some(),
        c.awaits.is_some(),
        c.posted.is_some(),
    ];
    let mask = present
        .iter()
        .enumerate()
        .fold(0u64, |m, (i, p)| m | (u64::from(*p) << i));
    put_u(out, mask);
    c.comm.as_deref().inspect(|s| put_str(out, s));
    c.peer.inspect(|p| put_peer(out, *p));
    c.tag.inspect(|t| put_tag(out, *t));
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
    c.source.inspect(|p| put_peer(out, *p));
    for w in [&c.awaits, &c.posted].into_iter().flatten() {
        put_u(out, w.len() as u64);
        for a in w {
            put_str(out, &a.comm);
            put_peer(out, a.peer);
            put_tag(out, a.tag);
        }
    }
}

fn put_tag(out: &mut Vec<u8>, t: Tag) {
    put_u(
        out,
        match t {
            Tag::Any(AnyTag::AnyTag) => 0,
            Tag::Tag(t) => 1 + zigzag(i64::from(t)),
        },
    );
}

fn put_peer(out: &mut Vec<u8>, p: Peer) {
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

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// Texts a reader keeps to share (see `Reader::texts`).
const TEXTS: usize = 16;

impl<'a> Reader<'a> {
    /// A string field (inline up to 23 bytes: no allocation for a communicator's or a
    /// datatype's name).
    fn text(&mut self) -> Result<SmolStr, DecodeError> {
        let n = usize::try_from(self.u()?).map_err(|_| self.truncated())?;
        let at = self.i;
        let b: &'a [u8] = self.b;
        let s = b.get(at..at.saturating_add(n)).ok_or_else(|| self.truncated())?;
        self.i += n;
        if let Some((_, text)) = self.texts.iter().find(|(bytes, _)| *bytes == s) {
            return Ok(text.clone());
        }
        let text = std::str::from_utf8(s)
            .map(SmolStr::new)
            .map_err(|source| DecodeError::TextNotUtf8 {
                at: at + HEADER + 1,
                source,
            })?;
        if self.texts.len() < TEXTS {
            self.texts.push((s, text.clone()));
        } else {
            self.texts[self.texts_next % TEXTS] = (s, text.clone());
            self.texts_next += 1;
        }
        Ok(text)
    }

    fn i32(&mut self) -> Result<i32, DecodeError> {
        let at = self.i;
        i32::try_from(self.i()?).map_err(|_| out_of_range(at))
    }

    /// A call's parameters: its field mask, then each field present.
    pub(super) fn call(&mut self) -> Result<CallInfo, DecodeError> {
        let at = self.i;
        let mask = self.u()?;
        if mask >> 19 != 0 {
            return Err(DecodeError::UnknownCallFields {
                mask,
                at: at + HEADER + 1,
            });
        }
        let has = |bit: u32| mask & (1 << bit) != 0;
        // Fields in bit order: a struct's fields are evaluated as written.
        let mut c = CallInfo {
            comm: has(0).then(|| self.text()).transpose()?,
            peer: has(1).then(|| self.peer()).transpose()?,
            tag: has(2).then(|| self.tag()).transpose()?,
            count: has(3).then(|| self.i32()).transpose()?,
            datatype: has(4).then(|| self.text()).transpose()?,
            bytes: has(5).then(|| self.i()).transpose()?,
            root: has(6).then(|| self.i32()).transpose()?,
            site: has(7).then(|| self.text()).transpose()?,
            ..CallInfo::default()
        };
        if has(8) {
            c.matched = Some(Matched {
                source: self.i32()?,
                tag: self.i32()?,
                bytes: self.i()?,
            });
        }
        c.forced = has(9).then(|| self.forced()).transpose()?;
        if has(10) {
            c.created = Some(Created {
                comm: self.text()?.into(),
                rank: self.i32()?,
                leader: self.i32()?,
            });
        }
        c.label = has(11).then(|| self.text()).transpose()?;
        c.rc = has(12).then(|| self.i32()).transpose()?;
        c.polls = has(13).then(|| self.u()).transpose()?;
        if has(14) {
            c.collective = Some(Collective {
                comm: self.text()?.into(),
                leader: self.i32()?,
                n: self.u()?,
            });
        }
        if has(15) {
            c.saw = Some(Link {
                thread: self.text()?,
                event_id: self.u()?,
            });
        }
        c.source = has(16).then(|| self.peer()).transpose()?;
        c.awaits = has(17).then(|| self.awaits()).transpose()?;
        c.posted = has(18).then(|| self.awaits()).transpose()?;
        Ok(c)
    }

    /// `awaits` or `posted`: its length, then each receive.
    fn awaits(&mut self) -> Result<Vec<Awaited>, DecodeError> {
        let at = self.i;
        let n = self.u()?;
        // Each takes three bytes at least: a claim past the frame's end is damage.
        if n > (self.b.len() - self.i) as u64 / 3 {
            return Err(out_of_range(at));
        }
        let mut w = Vec::with_capacity(n as usize);
        for _ in 0..n {
            w.push(Awaited {
                comm: self.text()?,
                peer: self.peer()?,
                tag: self.tag()?,
            });
        }
        Ok(w)
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
        let tag = self.i()?;
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
        frame: BinaryFrame::Packed,
        at: at + HEADER + 1,
    }
}
