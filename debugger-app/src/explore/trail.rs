//! What a run's events say about its receives, for reading alternatives off the run: which
//! call posted each receive (a call's `start` and the `recv` of its message share the
//! message id, an `MPI_Irecv`'s too, though it completes in a later call), which send
//! each took, and where every send went.
//!
//! MPI matches receives in the order they were posted, and a sender's messages in the
//! order they were sent. So what a receive R could have taken from sender S, had S's
//! message come first, is S's first message to R's rank that R or a receive posted after
//! it took, or that no receive took: unless that message was sent after R was posted
//! and because of it (happens-before), which R cannot take.

use super::Key;
use crate::model::clocks::Order;
use crate::model::Model;
use racetrack_protocol::{CallInfo, Event, SmolStr, Tag};
use std::collections::{BTreeMap, HashMap};

/// A message taken: the receive's thread, the `start` of the call that posted it, the
/// `send` it took, its source (in the receive's communicator) and the `recv` event.
struct Taken {
    thread: SmolStr,
    posted: u64,
    send: u64,
    source: Option<i32>,
    recv: u64,
}

/// A send: its communicator and tag.
struct Sent {
    comm: Option<SmolStr>,
    tag: Option<Tag>,
}

/// The run's receives and sends, as events told them.
#[derive(Default)]
pub(super) struct Trail {
    posted: HashMap<(SmolStr, SmolStr), u64>,
    taken: Vec<Taken>,
    sent: HashMap<u64, Sent>,
}

/// What a run's wildcard receive matched and could have matched.
pub(super) struct Read {
    pub source: Option<i32>,
    pub site: Option<String>,
    pub alternatives: Vec<i32>,
    /// Its `recv` event, if it took a message.
    pub recv: Option<u64>,
}

impl Trail {
    /// One event of the run (packed ones expanded).
    pub(super) fn observe(&mut self, ev: &Event) {
        match ev {
            Event::Start(s) if s.call.is_some() => {
                self.posted.insert((s.thread.clone(), s.msg.clone()), s.event_id);
            }
            Event::Recv(r) => {
                let (Some(from), Some(&posted)) =
                    (&r.from, self.posted.get(&(r.thread.clone(), r.msg.clone())))
                else {
                    return;
                };
                let source = r.call.as_ref().and_then(|c| c.matched.as_ref()).map(|m| m.source);
                self.taken.push(Taken {
                    thread: r.thread.clone(),
                    posted,
                    send: from.event_id,
                    source,
                    recv: r.event_id,
                });
            }
            Event::Send(s) => {
                if let Some(c) = &s.call {
                    self.sent.insert(s.event_id, sent(c));
                }
            }
            _ => {}
        }
    }

    /// Whether the receive `thread` posted at `start` took a message.
    pub(super) fn took(&self, thread: &str, start: u64) -> bool {
        self.taken.iter().any(|t| t.thread == thread && t.posted == start)
    }

    /// The receive whose `start` is `start` on `thread`, keyed `key`: what it matched
    /// and every source it could have matched (sorted, the matched one included).
    pub(super) fn read(&self, model: &mut Model, key: &Key, start: u64) -> Read {
        let thread = key.0.as_str();
        let mine = self
            .taken
            .iter()
            .find(|t| t.thread == thread && t.posted == start);
        let (source, recv) = (mine.and_then(|t| t.source), mine.map(|t| t.recv));
        let Some(g) = model.messages() else {
            return Read {
                source,
                site: None,
                alternatives: source.into_iter().collect(),
                recv,
            };
        };
        let Some(v) = model.thread_key(thread).and_then(|t| g.lane(t)).and_then(|l| {
            g.lanes()[l as usize]
                .vertices
                .iter()
                .copied()
                .find(|&v| g.vertices()[v as usize].start == start)
        }) else {
            return Read {
                source,
                site: None,
                alternatives: source.into_iter().collect(),
                recv,
            };
        };
        let x = &g.vertices()[v as usize];
        // A probe takes nothing: what it matched is on its call.
        let source = source.or(x.params.matched);
        let site = x.params.site.map(|s| g.name(s).to_owned());
        let comm = x.params.comm;
        let tag = match (x.params.tag, x.params.source) {
            (Some(Tag::Tag(t)), None) => Some(t),
            _ => None,
        };
        let fits = |s: &Sent| {
            s.comm.as_deref() == comm.map(|c| g.name(c)) && tag.is_none_or(|t| s.tag == Some(Tag::Tag(t)))
        };
        // Each other sender's first message that this receive or a later one took, in
        // the order they were posted; then its first message nobody took.
        let mut later: Vec<&Taken> = self
            .taken
            .iter()
            .filter(|t| t.thread == thread && t.posted >= start)
            .collect();
        later.sort_by_key(|t| t.posted);
        let mut first: BTreeMap<i32, u64> = BTreeMap::new();
        for t in later {
            if let (Some(s), Some(info)) = (t.source, self.sent.get(&t.send)) {
                if fits(info) {
                    first.entry(s).or_insert(t.send);
                }
            }
        }
        if let Some((c, me)) = comm.and_then(|c| Some((c, g.rank_in(x.lane, c)?))) {
            for (s, y, taken) in g.sends_to(c, me) {
                let y = &g.vertices()[y as usize];
                let tag_ok = tag.is_none_or(|t| y.params.tag == Some(Tag::Tag(t)));
                if taken.is_none() && tag_ok {
                    first.entry(s).or_insert(y.start);
                }
            }
        }
        let mut alternatives: Vec<i32> = source.into_iter().collect();
        if let Some(clocks) = model.clocks() {
            for (s, send) in first {
                if Some(s) != source && clocks.order(start, send) != Some(Order::Before) {
                    alternatives.push(s);
                }
            }
        }
        alternatives.sort_unstable();
        alternatives.dedup();
        Read {
            source,
            site,
            alternatives,
            recv,
        }
    }
}

fn sent(c: &CallInfo) -> Sent {
    Sent {
        comm: c.comm.clone(),
        tag: c.tag,
    }
}
