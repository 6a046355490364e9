//! What a run's events say about its receives, for reading alternatives off the run: which
//! call posted each receive (a call's `start` and the `recv` of its message share the
//! message id, an `MPI_Irecv`'s too, though it completes in a later call) and which send
//! each took, with the communicator and tag the receiving rank saw.
//!
//! MPI matches receives in the order they were posted, and a sender's messages in the
//! order they were sent. So what a receive R could have taken from sender S, had S's
//! message come first, is S's earliest message to R's rank (on R's communicator, with
//! R's tag) that R or a receive posted after it took, or that no receive took: unless
//! that message was sent after R completed and because of it (happens-before), which R
//! cannot take. (For a blocking receive, completing and being posted are one moment on
//! its rank; an `MPI_Irecv`'s rank goes on, and may itself cause more senders' messages
//! before its receive matches.)

use super::Key;
use crate::model::clocks::Order;
use crate::model::Model;
use racetrack_protocol::{Event, SmolStr};
use std::collections::{BTreeMap, HashMap};

/// A message taken: the receive's thread, the `start` of the call that posted it, the
/// `send` it took (if the job linked it), its source and tag (in the receive's
/// communicator), that communicator's name, and the `recv` event.
struct Taken {
    thread: SmolStr,
    posted: u64,
    send: Option<u64>,
    source: Option<i32>,
    tag: Option<i32>,
    comm: Option<SmolStr>,
    recv: u64,
}

/// The run's receives, as events told them.
#[derive(Default)]
pub(super) struct Trail {
    /// Calls that can receive (they name a communicator), by thread and message: their
    /// `start`; and the `stop` of each, by its `start`.
    posted: HashMap<(SmolStr, SmolStr), u64>,
    stops: HashMap<u64, u64>,
    taken: Vec<Taken>,
}

/// What a run's wildcard receive matched and could have matched.
pub(super) struct Read {
    pub source: Option<i32>,
    pub site: Option<String>,
    pub alternatives: Vec<i32>,
    /// When it completed: its `recv` event (its `stop`, for a probe), if it did.
    pub done: Option<u64>,
    /// Whether its graph vertex was found (else nothing could be read of it).
    pub known: bool,
}

impl Trail {
    /// One event of the run (packed ones expanded).
    pub(super) fn observe(&mut self, ev: &Event) {
        match ev {
            Event::Start(s) if s.call.as_ref().is_some_and(|c| c.comm.is_some()) => {
                self.posted.insert((s.thread.clone(), s.msg.clone()), s.event_id);
            }
            Event::Stop(s) => {
                if let Some(&start) = self.posted.get(&(s.thread.clone(), s.msg.clone())) {
                    self.stops.insert(start, s.event_id);
                }
            }
            Event::Recv(r) => {
                let Some(&posted) = self.posted.get(&(r.thread.clone(), r.msg.clone())) else {
                    return;
                };
                let call = r.call.as_deref();
                let matched = call.and_then(|c| c.matched.as_ref());
                self.taken.push(Taken {
                    thread: r.thread.clone(),
                    posted,
                    send: r.from.as_ref().map(|f| f.event_id),
                    source: matched.map(|m| m.source),
                    tag: matched.map(|m| m.tag),
                    comm: call.and_then(|c| c.comm.clone()),
                    recv: r.event_id,
                });
            }
            _ => {}
        }
    }

    /// Whether the receive `thread` posted at `start` took a message.
    pub(super) fn took(&self, thread: &str, start: u64) -> bool {
        self.taken.iter().any(|t| t.thread == thread && t.posted == start)
    }

    /// The receive whose `start` is `start` on `key`'s thread: what it matched and every
    /// source it could have matched (sorted, the matched one included).
    pub(super) fn read(&self, model: &mut Model, key: &Key, start: u64) -> Read {
        let thread = key.0.as_str();
        let mine = self
            .taken
            .iter()
            .find(|t| t.thread == thread && t.posted == start);
        let source = mine.and_then(|t| t.source);
        let unknown = |source: Option<i32>, done| Read {
            source,
            site: None,
            alternatives: source.into_iter().collect(),
            done,
            known: false,
        };
        let Some(g) = model.messages() else {
            return unknown(source, mine.map(|t| t.recv));
        };
        let found = model.thread_key(thread).and_then(|t| g.lane(t)).and_then(|l| {
            let vs = &g.lanes()[l as usize].vertices;
            vs.iter()
                .copied()
                .find(|&v| g.vertices()[v as usize].start == start)
        });
        let Some(v) = found else {
            return unknown(source, mine.map(|t| t.recv));
        };
        let x = &g.vertices()[v as usize];
        // A probe takes nothing: what it matched is on its call, and it is done at its stop.
        let probed = mine.is_none() && x.params.matched.is_some();
        let source = source.or(x.params.matched);
        let done = mine
            .map(|t| t.recv)
            .or_else(|| probed.then(|| self.stops.get(&start).copied()).flatten());
        let site = x.params.site.map(|s| g.name(s).to_owned());
        let comm = x.params.comm.map(|c| g.name(c).to_owned());
        let tag = match (x.params.tag, x.params.source) {
            (Some(racetrack_protocol::Tag::Tag(t)), None) => Some(t),
            _ => None,
        };
        // Each other sender's earliest message (send event numbers grow along a rank)
        // that this receive or a later-posted one took, or that nobody took.
        let mut first: BTreeMap<i32, u64> = BTreeMap::new();
        let mut note = |s: i32, send: u64| {
            let e = first.entry(s).or_insert(send);
            *e = (*e).min(send);
        };
        for t in self
            .taken
            .iter()
            .filter(|t| t.thread == thread && t.posted >= start)
        {
            let fits = t.comm.as_deref() == comm.as_deref() && tag.is_none_or(|want| t.tag == Some(want));
            if let (true, Some(s), Some(send)) = (fits, t.source, t.send) {
                note(s, send);
            }
        }
        for (s, y, taken) in g.sends_to(v) {
            let y = &g.vertices()[y as usize];
            let tag_ok = tag.is_none_or(|t| y.params.tag == Some(racetrack_protocol::Tag::Tag(t)));
            if taken.is_none() && tag_ok {
                note(s, y.start);
            }
        }
        // Sent after the receive completed, and because of it: not takeable. A receive
        // that never completed cuts nothing.
        let mut alternatives: Vec<i32> = source.into_iter().collect();
        let cut = done.unwrap_or(u64::MAX);
        if let Some(clocks) = model.clocks() {
            for (s, send) in first {
                let after = cut != u64::MAX && clocks.order(cut, send) == Some(Order::Before);
                if Some(s) != source && !after {
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
            done,
            known: true,
        }
    }
}
