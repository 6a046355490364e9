//! Which `send` each MPI receive matched.
//!
//! An MPI rank knows what its receive matched (`call.matched`: the source and tag) but
//! not which of the source's sends that was: nothing travels with the message. MPI's
//! non-overtaking rule settles it: two messages from one sender to one receiver on one
//! communicator, with one tag, are received in the order they were sent. So a receive
//! that matched source `s` and tag `t` on communicator `c` took the oldest send from `s`
//! on the channel `(c, s → receiver, t)` that no receive took yet. The [`Linker`] keeps
//! those channels.
//!
//! It runs in the debugger, where every rank's events meet, rather than in the ranks:
//! a rank could count its own sends and receives per channel, but would still not know
//! the number of the sender's `send` event, and the debugger needs that number to draw
//! the edge. Counting here costs the program nothing.
//!
//! A send enters its channel when its `send` event is observed (the rank reports it
//! before calling MPI, so before any receive can match it). Ranks' streams interleave as
//! they arrive, so a receive may arrive before its send; [`Linker::link`] then says to
//! wait. A caller that stops waiting (the send never came: a call the library does not
//! cover) calls [`Linker::give_up`], and the channel's next send is taken as that
//! receive's, so later receives stay aligned.
//!
//! Communicators are named per rank (`comm 3`), and ranks that create communicators
//! together name them alike, but two colours of one `MPI_Comm_split` get the same name:
//! a channel names its communicator by name and the world rank of its rank 0 (the
//! `created` of the call that made it), and its ranks in that communicator.

use crate::ids::FastMap;
use racetrack_protocol::{CallInfo, Collective, Event, Kind, Link, Peer, RecvEv, SmolStr, StepEv, Tag};
use std::collections::VecDeque;

/// A communicator as every rank knows it: its name and the world rank of its rank 0,
/// numbered by [`Comms`] (`MPI_COMM_WORLD` is 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CommKey(u32);

/// One ordered channel: messages from `src` to `dst` (ranks in `comm`) with `tag`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Channel {
    pub comm: CommKey,
    pub src: i32,
    pub dst: i32,
    pub tag: i32,
}

/// What [`Linker::link`] found for a receive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Linked {
    /// The send it matched.
    Send(Link),
    /// Its send has not been observed yet: link it again once more events arrived.
    Wait(Channel),
    /// Not a receive that can be linked: no match (`MPI_PROC_NULL`), no communicator
    /// this linker knows, or not an MPI receive.
    No,
}

/// Each rank's communicators: what it calls `comm 3` is which communicator, and its
/// rank there. `MPI_COMM_WORLD` and `MPI_COMM_SELF` are known; others are learnt from
/// the `created` of the call that made them.
#[derive(Debug, Default)]
pub struct Comms {
    /// Communicators by name and leader (`MPI_COMM_WORLD` is not listed: it is 0).
    keys: FastMap<(SmolStr, i32), CommKey>,
    /// Each key's leader, by key (`MPI_COMM_WORLD`'s, 0, first).
    leaders: Vec<i32>,
    /// Per thread (`rank[R]`) and communicator name: the key and its own rank there.
    named: FastMap<(SmolStr, SmolStr), (CommKey, i32)>,
    /// Per communicator and rank there: the world rank.
    members: FastMap<(CommKey, i32), i32>,
}

impl Comms {
    /// Learn the communicator a `stop` created, if it did.
    pub fn observe(&mut self, ev: &Event) {
        let Event::Stop(s) = ev else { return };
        self.observe_stop(&s.thread, s.call.as_deref());
    }

    /// The `stop` of `thread`'s call with `call`: the communicator it created, if any.
    pub fn observe_stop(&mut self, thread: &str, call: Option<&CallInfo>) {
        if let Some(c) = call.and_then(|c| c.created.as_ref()) {
            self.learn(thread, &c.comm, c.rank, c.leader);
        }
    }

    /// The key of communicator `name` whose rank 0 is world rank `leader`.
    fn key(&mut self, name: &str, leader: i32) -> CommKey {
        let next = CommKey(u32::try_from(self.keys.len() + 1).unwrap_or(u32::MAX));
        let key = *self.keys.entry((name.into(), leader)).or_insert(next);
        if key == next {
            self.leaders.resize(self.keys.len() + 1, 0);
            self.leaders[key.0 as usize] = leader;
        }
        key
    }

    /// The world rank of `key`'s rank 0.
    pub fn leader(&self, key: CommKey) -> i32 {
        self.leaders.get(key.0 as usize).copied().unwrap_or(0)
    }

    /// `thread` created communicator `name`, where it is `rank` and whose rank 0 is world
    /// rank `leader`.
    pub fn learn(&mut self, thread: &str, name: &str, rank: i32, leader: i32) {
        let key = self.key(name, leader);
        self.named.insert((thread.into(), name.into()), (key, rank));
        if let Some(w) = world_rank(thread) {
            self.members.insert((key, rank), w);
        }
    }

    /// The world rank of `rank` in communicator `key`, once that rank named it.
    pub fn world(&self, key: CommKey, rank: i32) -> Option<i32> {
        match key {
            CommKey(0) => Some(rank),
            _ => self.members.get(&(key, rank)).copied(),
        }
    }

    /// The key of communicator `name` whose rank 0 is world rank `leader`, if known.
    pub fn key_of(&self, name: &str, leader: i32) -> Option<CommKey> {
        match name {
            "MPI_COMM_WORLD" => Some(CommKey(0)),
            _ => self.keys.get(&(SmolStr::from(name), leader)).copied(),
        }
    }

    /// The world ranks of communicator `key` that named it (`MPI_COMM_WORLD`: the
    /// `world` ranks of the job), by rank in it.
    pub fn members(&self, key: CommKey, world: usize) -> Vec<(i32, i32)> {
        if key == CommKey(0) {
            return (0..i32::try_from(world).unwrap_or(i32::MAX))
                .map(|r| (r, r))
                .collect();
        }
        let mut m: Vec<(i32, i32)> = self
            .members
            .iter()
            .filter(|((k, _), _)| *k == key)
            .map(|((_, r), w)| (*r, *w))
            .collect();
        m.sort_unstable();
        m
    }

    /// Communicator `name` as `thread` names it: its key and the thread's rank in it.
    pub fn of(&mut self, thread: &str, name: &str) -> Option<(CommKey, i32)> {
        let world = world_rank(thread)?;
        match name {
            "MPI_COMM_WORLD" => Some((CommKey(0), world)),
            "MPI_COMM_SELF" => Some((self.key(name, world), 0)),
            _ => self
                .named
                .get(&(SmolStr::from(thread), SmolStr::from(name)))
                .copied(),
        }
    }
}

/// The channels of an MPI job (see the module's documentation).
#[derive(Debug, Default)]
pub struct Linker {
    comms: Comms,
    /// Sends not taken yet, oldest first.
    sends: FastMap<Channel, VecDeque<Link>>,
    /// Receives given up on, per channel: the next sends that arrive are theirs.
    owed: FastMap<Channel, usize>,
    /// Per thread and communicator, the collectives it started; per thread, the one it
    /// is in.
    collectives: FastMap<(SmolStr, CommKey), u64>,
    in_collective: FastMap<SmolStr, Collective>,
}

/// Whether MPI call `op` is a collective the library covers.
pub fn is_collective(op: &str) -> bool {
    crate::clocks::flow_of(op).is_some()
}

/// `rank[12]` → 12.
pub fn world_rank(thread: &str) -> Option<i32> {
    thread.strip_prefix("rank[")?.strip_suffix(']')?.parse().ok()
}

impl Linker {
    /// A linker that knows no send yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Take in what `ev` says about channels: a `send` enters its channel (returned); a
    /// `stop` that created a communicator names it for its thread.
    pub fn observe(&mut self, ev: &Event) -> Option<Channel> {
        match ev {
            Event::Send(s) => self.sent(s.thread.as_deref()?, s.event_id, s.call.as_deref()?),
            _ => {
                self.comms.observe(ev);
                None
            }
        }
    }

    /// [`Linker::observe`] of a notification by its parts: `thread`'s event `event_id`
    /// of kind `kind`, with `call`.
    pub fn observe_parts(
        &mut self,
        kind: Kind,
        thread: &str,
        event_id: u64,
        call: Option<&CallInfo>,
    ) -> Option<Channel> {
        match kind {
            Kind::Send => self.sent(thread, event_id, call?),
            Kind::Stop => {
                self.comms.observe_stop(thread, call);
                None
            }
            Kind::Recv | Kind::Start => None,
        }
    }

    /// The send `r` matched, or why there is none (yet). A found send leaves its channel.
    pub fn link(&mut self, r: &RecvEv) -> Linked {
        self.link_parts(&r.thread, r.call.as_deref())
    }

    /// [`Linker::link`] of `thread`'s receive with `call`.
    pub fn link_parts(&mut self, thread: &str, call: Option<&CallInfo>) -> Linked {
        let Some(ch) = call.and_then(|c| self.channel(thread, c)) else {
            return Linked::No;
        };
        match self.sends.get_mut(&ch).and_then(VecDeque::pop_front) {
            Some(l) => Linked::Send(l),
            None => Linked::Wait(ch),
        }
    }

    /// The send a probe's `stop` saw (the oldest on the channel it matched, left there for
    /// the receive that takes it), or why there is none (yet).
    pub fn peek(&mut self, s: &StepEv) -> Linked {
        self.peek_parts(&s.thread, &s.op, s.call.as_deref())
    }

    /// [`Linker::peek`] of the `stop` of `thread`'s call of `op` with `call`.
    pub fn peek_parts(&mut self, thread: &str, op: &str, call: Option<&CallInfo>) -> Linked {
        let probe = matches!(op, "MPI_Probe" | "MPI_Iprobe" | "MPI_Mprobe" | "MPI_Improbe");
        let Some(ch) = call.filter(|_| probe).and_then(|c| self.channel(thread, c)) else {
            return Linked::No;
        };
        match self.sends.get(&ch).and_then(VecDeque::front) {
            Some(l) => Linked::Send(l.clone()),
            None => Linked::Wait(ch),
        }
    }

    /// Tie a collective call's `start` and `stop` to their instance (`call.collective`):
    /// the thread's Nth collective on the communicator.
    pub fn instance(&mut self, ev: &mut Event) {
        match ev {
            Event::Start(s) => self.instance_parts(Kind::Start, &s.thread, &s.op, s.call.as_deref_mut()),
            Event::Stop(s) => self.instance_parts(Kind::Stop, &s.thread, &s.op, s.call.as_deref_mut()),
            _ => {}
        }
    }

    /// [`Linker::instance`] of a `start` or `stop` (`kind`) of `thread`'s call of `op`
    /// with `call`.
    pub fn instance_parts(&mut self, kind: Kind, thread: &str, op: &str, call: Option<&mut CallInfo>) {
        if !is_collective(op) {
            return;
        }
        match (kind, call) {
            (Kind::Start, Some(c)) => {
                let Some((key, _)) = c.comm.as_deref().and_then(|n| self.comms.of(thread, n)) else {
                    return;
                };
                let count = self.collectives.entry((thread.into(), key)).or_default();
                let k = Collective {
                    comm: c.comm.clone().unwrap_or_default().to_string(),
                    leader: self.comms.leader(key),
                    n: *count,
                };
                *count += 1;
                self.in_collective.insert(thread.into(), k.clone());
                c.collective = Some(k);
            }
            (Kind::Stop, call) => {
                let k = self.in_collective.remove(thread);
                if let Some(c) = call {
                    c.collective = k;
                }
            }
            _ => {}
        }
    }

    /// Whether [`Linker::instance_parts`] would change a `start` or `stop` of `op`: a
    /// collective's (a caller sharing the call then copies it first).
    pub fn instances(op: &str) -> bool {
        is_collective(op)
    }

    /// The world rank of the sender on `ch`, when known.
    pub fn sender(&self, ch: &Channel) -> Option<i32> {
        self.comms.world(ch.comm, ch.src)
    }

    /// A receive on `ch` goes without its send: the next send on `ch` is its, not a later
    /// receive's.
    pub fn give_up(&mut self, ch: Channel) {
        *self.owed.entry(ch).or_default() += 1;
    }

    /// The communicators as the ranks named them.
    pub fn comms(&mut self) -> &mut Comms {
        &mut self.comms
    }

    /// Whether a send to `dst` on `comm` is observed and not taken yet, from `src` with
    /// `tag` (`None`: any).
    pub fn pending(&self, comm: CommKey, dst: i32, src: Option<i32>, tag: Option<i32>) -> bool {
        self.sends.iter().any(|(ch, q)| {
            !q.is_empty()
                && ch.comm == comm
                && ch.dst == dst
                && src.is_none_or(|s| s == ch.src)
                && tag.is_none_or(|t| t == ch.tag)
        })
    }

    /// Every send to `dst` on `comm` observed and not taken yet, from `src` with `tag`
    /// (`None`: any): each named by its channel and place in it.
    pub fn pending_messages(
        &self,
        (comm, dst): (CommKey, i32),
        src: Option<i32>,
        tag: Option<i32>,
    ) -> Vec<(Channel, usize)> {
        let mut out: Vec<(Channel, usize)> = self
            .sends
            .iter()
            .filter(|(ch, _)| {
                ch.comm == comm
                    && ch.dst == dst
                    && src.is_none_or(|s| s == ch.src)
                    && tag.is_none_or(|t| t == ch.tag)
            })
            .flat_map(|(ch, q)| (0..q.len()).map(move |i| (*ch, i)))
            .collect();
        out.sort_by_key(|(ch, i)| (ch.src, ch.tag, *i));
        out
    }

    /// Whether a send to `dst` on any communicator is observed and not taken yet
    /// (`dst`: a world rank).
    pub fn pending_to_world(&self, dst: i32) -> bool {
        self.sends
            .iter()
            .any(|(ch, q)| !q.is_empty() && self.comms.world(ch.comm, ch.dst) == Some(dst))
    }

    /// How many collectives `thread` started on `comm`.
    pub fn started(&self, thread: &str, comm: CommKey) -> u64 {
        self.collectives
            .get(&(SmolStr::from(thread), comm))
            .copied()
            .unwrap_or(0)
    }

    /// Sends observed and not taken yet.
    pub fn unmatched(&self) -> usize {
        self.sends.values().map(VecDeque::len).sum()
    }

    fn sent(&mut self, thread: &str, event_id: u64, call: &CallInfo) -> Option<Channel> {
        let (Some(comm), Some(Peer::Rank(dst)), Some(Tag::Tag(tag))) = (&call.comm, call.peer, call.tag)
        else {
            return None;
        };
        let (key, src) = self.comms.of(thread, comm)?;
        let ch = Channel {
            comm: key,
            src,
            dst,
            tag,
        };
        if let Some(n) = self.owed.get_mut(&ch).filter(|n| **n > 0) {
            *n -= 1;
            return None;
        }
        self.sends.entry(ch).or_default().push_back(Link {
            thread: thread.into(),
            event_id,
        });
        Some(ch)
    }

    /// The channel a receive or probe by `thread` with `call` matched.
    fn channel(&mut self, thread: &str, call: &CallInfo) -> Option<Channel> {
        let m = call.matched.as_ref()?;
        let (comm, dst) = self.comms.of(thread, call.comm.as_ref()?)?;
        Some(Channel {
            comm,
            src: m.source,
            dst,
            tag: m.tag,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use racetrack_protocol::{CallInfo, Created, Matched, SendEv, Step, StepEv};

    fn send(id: u64, from: i32, comm: &str, to: i32, tag: i32) -> Event {
        Event::Send(SendEv {
            event_id: id,
            thread: Some(format!("rank[{from}]").into()),
            op: Some("MPI_Send".into()),
            msg: format!("{from}.{id}").into(),
            to_op: None,
            to_thread: None,
            type_name: "MPI_INT".into(),
            traced: false,
            held: false,
            reason: None,
            content: None,
            call: Some(Box::new(CallInfo {
                comm: Some(comm.into()),
                peer: Some(Peer::Rank(to)),
                tag: Some(Tag::Tag(tag)),
                ..CallInfo::default()
            })),
        })
    }

    fn recv(at: i32, comm: &str, source: i32, tag: i32) -> RecvEv {
        RecvEv {
            event_id: 99,
            thread: format!("rank[{at}]").into(),
            op: "MPI_Recv".into(),
            msg: format!("{at}.9").into(),
            position: 0,
            traced: false,
            from: None,
            call: Some(Box::new(CallInfo {
                comm: Some(comm.into()),
                peer: Some(Peer::Special(racetrack_protocol::SpecialPeer::AnySource)),
                tag: Some(Tag::Any(racetrack_protocol::AnyTag::AnyTag)),
                matched: Some(Matched {
                    source,
                    tag,
                    bytes: 4,
                }),
                ..CallInfo::default()
            })),
        }
    }

    fn created(at: i32, comm: &str, rank: i32, leader: i32) -> Event {
        Event::Stop(StepEv {
            event_id: 1,
            thread: format!("rank[{at}]").into(),
            op: "MPI_Comm_split".into(),
            msg: "0.1".into(),
            instance: "0.1".into(),
            step: Step::Run,
            traced: false,
            held: false,
            reason: None,
            call: Some(Box::new(CallInfo {
                comm: Some("MPI_COMM_WORLD".into()),
                created: Some(Created {
                    comm: comm.into(),
                    rank,
                    leader,
                }),
                ..CallInfo::default()
            })),
        })
    }

    fn linked(l: Linked) -> u64 {
        match l {
            Linked::Send(l) => l.event_id,
            other => panic!("not linked: {other:?}"),
        }
    }

    #[test]
    fn receives_take_a_channels_sends_in_order() {
        let mut k = Linker::new();
        for ev in [
            send(1, 1, "MPI_COMM_WORLD", 0, 5),
            send(2, 1, "MPI_COMM_WORLD", 0, 5),
        ] {
            k.observe(&ev);
        }
        k.observe(&send(3, 2, "MPI_COMM_WORLD", 0, 5));
        k.observe(&send(4, 1, "MPI_COMM_WORLD", 0, 6));
        assert_eq!(
            linked(k.link(&recv(0, "MPI_COMM_WORLD", 1, 6))),
            4,
            "another tag: its own channel"
        );
        assert_eq!(linked(k.link(&recv(0, "MPI_COMM_WORLD", 2, 5))), 3);
        assert_eq!(
            linked(k.link(&recv(0, "MPI_COMM_WORLD", 1, 5))),
            1,
            "the oldest first"
        );
        assert_eq!(linked(k.link(&recv(0, "MPI_COMM_WORLD", 1, 5))), 2);
        assert_eq!(k.unmatched(), 0);
        let l = k.link(&recv(0, "MPI_COMM_WORLD", 1, 5));
        assert!(matches!(l, Linked::Wait(_)), "{l:?}");
    }

    #[test]
    fn a_receive_before_its_send_waits_and_one_given_up_on_keeps_the_order() {
        let mut k = Linker::new();
        let Linked::Wait(ch) = k.link(&recv(0, "MPI_COMM_WORLD", 3, 0)) else {
            panic!("no send yet")
        };
        k.observe(&send(7, 3, "MPI_COMM_WORLD", 0, 0));
        assert_eq!(linked(k.link(&recv(0, "MPI_COMM_WORLD", 3, 0))), 7);
        k.give_up(ch);
        k.observe(&send(8, 3, "MPI_COMM_WORLD", 0, 0));
        k.observe(&send(9, 3, "MPI_COMM_WORLD", 0, 0));
        assert_eq!(
            linked(k.link(&recv(0, "MPI_COMM_WORLD", 3, 0))),
            9,
            "8 was the receive's given up on"
        );
    }

    #[test]
    fn split_colours_with_one_name_are_different_channels() {
        let mut k = Linker::new();
        // World ranks 0, 1 are colour A (leader 0), 2, 3 colour B (leader 2): both "comm 1".
        for (w, r, leader) in [(0, 0, 0), (1, 1, 0), (2, 0, 2), (3, 1, 2)] {
            k.observe(&created(w, "comm 1", r, leader));
        }
        k.observe(&send(10, 1, "comm 1", 0, 0));
        k.observe(&send(30, 3, "comm 1", 0, 0));
        assert_eq!(
            linked(k.link(&recv(2, "comm 1", 1, 0))),
            30,
            "rank 2 is rank 0 of B"
        );
        assert_eq!(linked(k.link(&recv(0, "comm 1", 1, 0))), 10);
        assert_eq!(
            k.link(&recv(0, "comm 9", 1, 0)),
            Linked::No,
            "an unknown communicator"
        );
        let Linked::Wait(ch) = k.link(&recv(2, "comm 1", 1, 0)) else {
            panic!("no send left")
        };
        assert_eq!(k.sender(&ch), Some(3), "rank 1 of colour B is world rank 3");
    }
}
