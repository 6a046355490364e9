//! An MPI call's `call` object as JSON, written byte by byte: `racetrack ctl` prints one
//! for nearly every event of an MPI job, and serde's generic serializer took a third of
//! the controller's time on them. The bytes are serde_json's exactly (same field order,
//! same optional fields left out, same escapes); `tests` checks that against serde on
//! every field and on strings that need escaping.

use super::push_str;
use crate::call::{AnyTag, Awaited, CallInfo, Peer, SpecialPeer, Tag};

impl CallInfo {
    /// Append this call as serde_json writes it.
    pub(crate) fn append_json(&self, out: &mut Vec<u8>) {
        let CallInfo {
            comm,
            peer,
            tag,
            count,
            datatype,
            bytes,
            root,
            site,
            ..
        } = self;
        let mut o = Obj::new(out);
        if let Some(v) = comm {
            o.key("comm").str(v);
        }
        if let Some(v) = peer {
            o.key("peer").peer(*v);
        }
        if let Some(v) = tag {
            match v {
                Tag::Tag(t) => o.key("tag").num(i64::from(*t)),
                Tag::Any(AnyTag::AnyTag) => o.key("tag").str("MPI_ANY_TAG"),
            }
        }
        if let Some(v) = count {
            o.key("count").num(i64::from(*v));
        }
        if let Some(v) = datatype {
            o.key("datatype").str(v);
        }
        if let Some(v) = bytes {
            o.key("bytes").num(*v);
        }
        if let Some(v) = root {
            o.key("root").num(i64::from(*v));
        }
        if let Some(v) = site {
            o.key("site").str(v);
        }
        self.append_outcome(&mut o);
        o.end();
    }

    /// The fields after `site`: what the call did, and what the job's debugger added.
    fn append_outcome(&self, o: &mut Obj<'_>) {
        let CallInfo {
            matched,
            forced,
            created,
            label,
            rc,
            collective,
            saw,
            polls,
            source,
            awaits,
            posted,
            ..
        } = self;
        if let Some(m) = matched {
            let mut i = o.key("matched").obj();
            i.key("source").num(i64::from(m.source));
            i.key("tag").num(i64::from(m.tag));
            i.key("bytes").num(m.bytes);
            i.end();
        }
        if let Some(f) = forced {
            let mut i = o.key("forced").obj();
            i.key("source").num(i64::from(f.source));
            if let Some(t) = f.tag {
                i.key("tag").num(i64::from(t));
            }
            i.end();
        }
        if let Some(c) = created {
            let mut i = o.key("created").obj();
            i.key("comm").str(&c.comm);
            i.key("rank").num(i64::from(c.rank));
            i.key("leader").num(i64::from(c.leader));
            i.end();
        }
        if let Some(v) = label {
            o.key("label").str(v);
        }
        if let Some(v) = rc {
            o.key("rc").num(i64::from(*v));
        }
        if let Some(c) = collective {
            let mut i = o.key("collective").obj();
            i.key("comm").str(&c.comm);
            i.key("leader").num(i64::from(c.leader));
            i.key("n").unsigned(c.n);
            i.end();
        }
        if let Some(l) = saw {
            let mut i = o.key("saw").obj();
            i.key("thread").str(&l.thread);
            i.key("event_id").unsigned(l.event_id);
            i.end();
        }
        if let Some(v) = polls {
            o.key("polls").unsigned(*v);
        }
        if let Some(v) = source {
            o.key("source").peer(*v);
        }
        for (key, w) in [("awaits", awaits), ("posted", posted)] {
            if let Some(w) = w {
                o.key(key).receives(w);
            }
        }
    }
}

/// A JSON object being written: its keys separated by commas.
struct Obj<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> Obj<'a> {
    fn new(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        Self { out, first: true }
    }

    /// The next key; its value is written through the returned writer.
    fn key(&mut self, k: &str) -> Val<'_> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        self.out.push(b'"');
        self.out.extend_from_slice(k.as_bytes());
        self.out.extend_from_slice(b"\":");
        Val(self.out)
    }

    fn end(self) {
        self.out.push(b'}');
    }
}

/// Where one value goes.
struct Val<'a>(&'a mut Vec<u8>);

impl<'a> Val<'a> {
    fn str(self, s: &str) {
        push_str(self.0, s);
    }
    fn num(self, n: i64) {
        self.0.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    }
    fn unsigned(self, n: u64) {
        self.0.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    }
    fn peer(self, p: Peer) {
        match p {
            Peer::Rank(r) => self.num(i64::from(r)),
            Peer::Special(SpecialPeer::AnySource) => self.str("MPI_ANY_SOURCE"),
            Peer::Special(SpecialPeer::ProcNull) => self.str("MPI_PROC_NULL"),
            Peer::Special(SpecialPeer::Root) => self.str("MPI_ROOT"),
        }
    }
    fn obj(self) -> Obj<'a> {
        Obj::new(self.0)
    }
    /// `awaits` or `posted`: a list of receives.
    fn receives(self, w: &[Awaited]) {
        self.0.push(b'[');
        for (i, a) in w.iter().enumerate() {
            if i > 0 {
                self.0.push(b',');
            }
            let mut e = Obj::new(self.0);
            e.key("comm").str(&a.comm);
            e.key("peer").peer(a.peer);
            match a.tag {
                Tag::Tag(t) => e.key("tag").num(i64::from(t)),
                Tag::Any(AnyTag::AnyTag) => e.key("tag").str("MPI_ANY_TAG"),
            }
            e.end();
        }
        self.0.push(b']');
    }
}

#[cfg(test)]
mod tests {
    use crate::call::{
        AnyTag, Awaited, CallInfo, Collective, Created, Forced, Matched, Peer, SpecialPeer, Tag,
    };
    use crate::Link;

    fn same_as_serde(c: &CallInfo) {
        let mut ours = Vec::new();
        c.append_json(&mut ours);
        let theirs = serde_json::to_vec(c).expect("serializable");
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&theirs),
            "{c:?}"
        );
    }

    #[test]
    fn a_call_is_written_as_serde_writes_it() {
        same_as_serde(&CallInfo::default());
        let full = CallInfo {
            comm: Some("MPI_COMM_WORLD".into()),
            peer: Some(Peer::Rank(3)),
            tag: Some(Tag::Tag(-7)),
            count: Some(i32::MIN),
            datatype: Some("MPI_DOUBLE".into()),
            bytes: Some(i64::MAX),
            root: Some(0),
            site: Some("/work/a long path/ring.c:45 (main) — é".into()),
            matched: Some(Matched {
                source: 2,
                tag: 5,
                bytes: 4000,
            }),
            forced: Some(Forced {
                source: 1,
                tag: Some(9),
            }),
            created: Some(Created {
                comm: "comm 3".into(),
                rank: 1,
                leader: 2,
            }),
            label: Some("phase \"two\"\\\n\t\u{1}\u{7f}".into()),
            rc: Some(15),
            collective: Some(Collective {
                comm: "comm 3".into(),
                leader: 2,
                n: u64::MAX,
            }),
            saw: Some(Link {
                thread: "rank[2]".into(),
                event_id: 77,
            }),
            polls: Some(12),
            source: Some(Peer::Special(SpecialPeer::AnySource)),
            posted: Some(vec![Awaited {
                comm: "comm 1".into(),
                peer: Peer::Rank(0),
                tag: Tag::Tag(-3),
            }]),
            awaits: Some(vec![
                Awaited {
                    comm: "MPI_COMM_WORLD".into(),
                    peer: Peer::Special(SpecialPeer::AnySource),
                    tag: Tag::Any(AnyTag::AnyTag),
                },
                Awaited {
                    comm: "comm \"2\"".into(),
                    peer: Peer::Rank(3),
                    tag: Tag::Tag(7),
                },
            ]),
        };
        same_as_serde(&full);
        // Each field alone, and the other forms of the enums.
        let alone = [
            CallInfo {
                peer: Some(Peer::Special(SpecialPeer::ProcNull)),
                ..CallInfo::default()
            },
            CallInfo {
                peer: Some(Peer::Special(SpecialPeer::Root)),
                tag: Some(Tag::Any(AnyTag::AnyTag)),
                ..CallInfo::default()
            },
            CallInfo {
                forced: Some(Forced { source: 4, tag: None }),
                ..CallInfo::default()
            },
            CallInfo {
                source: Some(Peer::Rank(-1)),
                ..CallInfo::default()
            },
            CallInfo {
                polls: Some(0),
                ..CallInfo::default()
            },
            CallInfo {
                awaits: Some(Vec::new()),
                ..CallInfo::default()
            },
        ];
        for c in &alone {
            same_as_serde(c);
        }
    }
}
