//! An MPI call as the wrappers described it, and the content of a send: decoded from the
//! program's buffer into JSON numbers for the debugger, and encoded back from an edit.

use racetrack_protocol::{AnyTag, CallInfo, Peer, SmolStr, SpecialPeer, Tag};
use serde_json::Value;

/// The wrappers' normalised wildcards and special ranks (`racetrack_mpi.h`).
const RT_ANY: i32 = -1;
const RT_PROC_NULL: i32 = -2;
const RT_ROOT: i32 = -3;

/// One call, copied out of the wrappers' `rt_call`.
#[derive(Debug, Clone)]
pub struct Call {
    /// `MPI_Send` (the wrappers' static string).
    pub name: &'static str,
    /// Destination or source in `comm` (normalised wildcards and specials).
    pub peer: Option<i32>,
    /// A sendrecv's source (`peer` is its destination).
    pub source: Option<i32>,
    /// The same rank in `MPI_COMM_WORLD`.
    pub peer_world: Option<i32>,
    pub tag: Option<i32>,
    pub count: Option<i32>,
    pub root: Option<i32>,
    pub bytes: Option<i64>,
    /// Until [`Call::info`] takes it.
    pub datatype: Option<SmolStr>,
    /// Until [`Call::info`] takes it.
    pub comm: Option<SmolStr>,
    /// The send's element type, when basic.
    pub elem: Option<Elem>,
    /// The send's bytes, when its type is basic (read only while the call is made).
    pub content: Option<crate::ffi::SendBuf>,
    /// The program's return address into the call.
    pub caller: usize,
    /// An `MPI_Start`'s persistent request, when the wrappers saw it created.
    pub starts: Option<Starts>,
    /// A `Wait*` call's live requests (their `MPI_Request_c2f`).
    pub awaits: Option<Vec<i64>>,
}

/// What an `MPI_Start` started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Starts {
    /// A persistent send: a message, reported as `MPI_Isend` reports one.
    Send,
    /// A persistent receive: its completion reports the match, as `MPI_Irecv`'s does.
    Recv,
}

impl Call {
    /// Whether the call's source is `MPI_ANY_SOURCE` or its tag `MPI_ANY_TAG` (a receive
    /// or probe whose match the debugger may force).
    pub fn is_wildcard(&self) -> bool {
        self.recv_peer() == Some(RT_ANY) || self.tag == Some(RT_ANY)
    }

    /// Where the call receives from: a sendrecv's source, else its peer.
    pub fn recv_peer(&self) -> Option<i32> {
        self.source.or(self.peer)
    }

    /// Whether the call receives a message (its match is a `recv` event); probes match
    /// without receiving.
    pub fn receives(&self) -> bool {
        matches!(
            self.name,
            "MPI_Recv" | "MPI_Irecv" | "MPI_Sendrecv" | "MPI_Sendrecv_replace" | "MPI_Mrecv" | "MPI_Imrecv"
        ) || self.starts == Some(Starts::Recv)
    }

    /// Whether the call posts a message to a peer (its `send` event, with content).
    pub fn sends(&self) -> bool {
        matches!(
            self.name,
            "MPI_Send"
                | "MPI_Ssend"
                | "MPI_Bsend"
                | "MPI_Rsend"
                | "MPI_Isend"
                | "MPI_Issend"
                | "MPI_Sendrecv"
                | "MPI_Sendrecv_replace"
        ) || self.starts == Some(Starts::Send)
    }

    /// Whether the call polls (its `found` says whether it found anything): a run of
    /// them that found nothing is one step.
    pub fn polls(&self) -> bool {
        matches!(
            self.name,
            "MPI_Test" | "MPI_Testany" | "MPI_Testall" | "MPI_Testsome" | "MPI_Iprobe" | "MPI_Improbe"
        )
    }

    /// Whether the call's source can be forced (a wildcard receive or probe).
    pub fn can_force(&self) -> bool {
        self.is_wildcard()
            && matches!(
                self.name,
                "MPI_Recv"
                    | "MPI_Irecv"
                    | "MPI_Probe"
                    | "MPI_Iprobe"
                    | "MPI_Mprobe"
                    | "MPI_Improbe"
                    | "MPI_Sendrecv"
                    | "MPI_Sendrecv_replace"
            )
    }

    /// The call's parameters as the protocol carries them (`site` resolved by the
    /// caller). The communicator's and datatype's names move there: they are read from
    /// the result from then on.
    pub fn info(&mut self, site: Option<SmolStr>) -> CallInfo {
        CallInfo {
            comm: self.comm.take(),
            peer: self.peer.map(peer),
            source: self.source.map(peer),
            tag: self.tag.map(tag),
            count: self.count,
            datatype: self.datatype.take(),
            bytes: self.bytes,
            root: self.root,
            site,
            ..CallInfo::default()
        }
    }
}

fn peer(p: i32) -> Peer {
    match p {
        RT_ANY => Peer::Special(SpecialPeer::AnySource),
        RT_PROC_NULL => Peer::Special(SpecialPeer::ProcNull),
        RT_ROOT => Peer::Special(SpecialPeer::Root),
        r => Peer::Rank(r),
    }
}

fn tag(t: i32) -> Tag {
    if t == RT_ANY {
        Tag::Any(AnyTag::AnyTag)
    } else {
        Tag::Tag(t)
    }
}

/// A basic element type: how to read and write one element of a send's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elem {
    pub kind: ElemKind,
    /// Bytes per element: 1, 2, 4 or 8.
    pub size: usize,
}

/// What an element is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElemKind {
    Signed,
    Unsigned,
    Float,
    /// A character: shown as a string.
    Char,
    /// A byte: shown as a number.
    Byte,
}

impl Elem {
    /// The wrappers' `elem_kind` / `elem_size`, if they describe a basic type.
    pub fn of(kind: u8, size: i32) -> Option<Elem> {
        let size = usize::try_from(size)
            .ok()
            .filter(|s| matches!(s, 1 | 2 | 4 | 8))?;
        let kind = match kind {
            b'i' => ElemKind::Signed,
            b'u' => ElemKind::Unsigned,
            b'f' if size == 4 || size == 8 => ElemKind::Float,
            b'c' if size == 1 => ElemKind::Char,
            b'b' => ElemKind::Byte,
            _ => return None,
        };
        Some(Elem { kind, size })
    }

    /// The buffer as JSON: an array of numbers, or a string for characters.
    pub fn decode(self, bytes: &[u8]) -> Value {
        if self.kind == ElemKind::Char {
            let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
            return Value::String(String::from_utf8_lossy(&bytes[..end]).into_owned());
        }
        Value::Array(bytes.chunks_exact(self.size).map(|e| self.one(e)).collect())
    }

    fn one(self, e: &[u8]) -> Value {
        let mut b = [0u8; 8];
        b[..e.len()].copy_from_slice(e);
        let u = u64::from_ne_bytes(b);
        match (self.kind, self.size) {
            (ElemKind::Float, 4) => f32::from_bits(u as u32).into(),
            (ElemKind::Float, _) => f64::from_bits(u).into(),
            (ElemKind::Signed, n) => {
                // Sign-extend from n bytes.
                let shift = 64 - 8 * n as u32;
                (((u << shift) as i64) >> shift).into()
            }
            _ => u.into(),
        }
    }

    /// `content` written back as `count` elements, or why it does not fit.
    pub fn encode(self, content: &Value, count: usize) -> Result<Vec<u8>, String> {
        if self.kind == ElemKind::Char {
            let Value::String(s) = content else {
                return Err(format!("must be a string of at most {count} characters"));
            };
            if s.len() > count {
                return Err(format!(
                    "has {} bytes; the send carries {count} characters",
                    s.len()
                ));
            }
            let mut out = s.as_bytes().to_vec();
            out.resize(count, 0);
            return Ok(out);
        }
        let Value::Array(items) = content else {
            return Err(format!("must be an array of {count} numbers"));
        };
        if items.len() != count {
            return Err(format!("has {} values; the send carries {count}", items.len()));
        }
        let mut out = Vec::with_capacity(count * self.size);
        for (i, v) in items.iter().enumerate() {
            let bits = self.bits(v).map_err(|e| format!("value {i} ({v}) {e}"))?;
            out.extend_from_slice(&bits.to_ne_bytes()[..self.size]);
        }
        Ok(out)
    }

    /// One value as the element's bits, or why it does not fit the type.
    fn bits(self, v: &Value) -> Result<u64, String> {
        let bits = 8 * self.size as u32;
        match self.kind {
            ElemKind::Float => {
                let f = v.as_f64().ok_or("is not a number")?;
                Ok(if self.size == 4 {
                    u64::from((f as f32).to_bits())
                } else {
                    f.to_bits()
                })
            }
            ElemKind::Signed => {
                // An integer above i64::MAX is out of range, not "not an integer".
                let i = match (v.as_i64(), v.as_u64()) {
                    (Some(i), _) => i,
                    (None, Some(_)) => return Err(format!("does not fit {} signed bytes", self.size)),
                    (None, None) => return Err("is not an integer".into()),
                };
                let (lo, hi) = if bits == 64 {
                    (i64::MIN, i64::MAX)
                } else {
                    (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1)
                };
                if i < lo || i > hi {
                    return Err(format!("does not fit {} signed bytes", self.size));
                }
                Ok(i as u64)
            }
            _ => {
                let u = v.as_u64().ok_or("is not a non-negative integer")?;
                if bits < 64 && u >> bits != 0 {
                    return Err(format!("does not fit {} unsigned bytes", self.size));
                }
                Ok(u)
            }
        }
    }
}

#[cfg(test)]
mod tests;
