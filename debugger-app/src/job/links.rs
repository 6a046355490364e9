//! Links in the merge: every rank's `recv` goes out naming the `send` it matched, a
//! probe's `stop` the send it saw, a collective's `start` and `stop` their instance
//! ([`racetrack_model::links`]). A receive whose send has not arrived yet (the sender's
//! stream is behind) waits, and the rank's later events wait behind it, so each rank's
//! events still go out in order. The sender reported its send before calling MPI, so it
//! is on its way: the wait lasts a batch or two. A receive whose send did not come (a
//! call the library does not cover sent it: a persistent request's `MPI_Start`, another
//! thread's) goes out unlinked once its sender has sent [`FRAMES`] more frames or none
//! for [`QUIET`] (everything it had reported was here by then), after [`GIVE_UP`] when its
//! sender is not known (a communicator whose creation it did not report), or when the
//! job ends. Giving up on a
//! receive whose send was only late loses that one link: the send, when it comes, is
//! taken as that receive's, and the channel's later receives stay right.

use racetrack_model::ids::FastMap;
use racetrack_model::links::{world_rank, Channel, Linked, Linker};
use racetrack_protocol::{Event, Kind, Link, Names, PackedEv, SentBy};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a receive waits for its send at most.
pub(super) const GIVE_UP: Duration = Duration::from_secs(3);

/// Frames from the sender after which a receive stops waiting for its send: an agent
/// sends all it has at each flush, so a send reported before the receive matched is in
/// the first frame cut after that, and frames overtake no frame.
const FRAMES: u64 = 10;

/// A sender that sent no frame for this long, while a receive waited, had nothing more
/// to send then (an agent with events flushes every 10 ms).
const QUIET: Duration = Duration::from_secs(1);

/// How often waiting receives are looked at.
pub(super) const TICK: Duration = Duration::from_millis(20);

/// Where a waiting receive started waiting: when, and the sender's connection and the
/// frames it had sent then.
#[derive(Clone, Copy)]
struct Mark {
    since: Instant,
    sender: Option<(usize, u64)>,
}

/// One rank's event on its way through the merge, as it was decoded.
#[derive(Debug)]
pub(super) enum Item {
    /// A full event: a held one, and everything but the streamed notifications.
    Full(Event),
    /// A streamed notification in compact form, with the names of the rank that sent it.
    Packed(Arc<Names>, PackedEv),
}

impl Item {
    /// Its thread's name.
    fn thread(&self) -> Option<&str> {
        match self {
            Item::Full(ev) => ev.thread(),
            Item::Packed(names, p) => names.thread(p.thread).ok().flatten(),
        }
    }

    fn is_recv(&self) -> bool {
        matches!(self, Item::Full(Event::Recv(_)))
            || matches!(self, Item::Packed(_, p) if p.kind == Kind::Recv)
    }
}

/// The merge's linker and the ranks' events waiting behind an unlinked receive.
#[derive(Default)]
pub(super) struct Links {
    linker: Linker,
    /// Per rank connection: events held back, the first a `recv` waiting since the time
    /// it was first found waiting.
    waiting: Vec<VecDeque<(Option<Mark>, Item)>>,
    /// Events in `waiting`.
    held_back: usize,
    /// The rank whose first waiting receive waits for a send on each channel: a send
    /// there lets it go on (a channel has one receiver).
    blocked: FastMap<Channel, usize>,
    /// Per connection: frames received, when the last came, and the world rank its
    /// events are of.
    frames: Vec<u64>,
    last_frame: Vec<Instant>,
    rank_conn: FastMap<i32, usize>,
    conn_known: Vec<bool>,
}

impl Links {
    pub(super) fn new(ranks: usize) -> Self {
        Self {
            linker: Linker::new(),
            waiting: (0..ranks).map(|_| VecDeque::new()).collect(),
            held_back: 0,
            blocked: FastMap::default(),
            frames: vec![0; ranks],
            last_frame: vec![Instant::now(); ranks],
            rank_conn: FastMap::default(),
            conn_known: vec![false; ranks],
        }
    }

    /// The linker, whose channels say which sends are on their way.
    pub(super) fn linker(&mut self) -> &mut Linker {
        &mut self.linker
    }

    /// The connection of world rank `r`, once it named its thread.
    pub(super) fn conn_of(&self, r: i32) -> Option<usize> {
        self.rank_conn.get(&r).copied()
    }

    /// Whether connection `i` sent a frame within `quiet`, or has events waiting here.
    pub(super) fn recent(&self, i: usize, quiet: Duration) -> bool {
        self.last_frame.get(i).is_some_and(|t| t.elapsed() < quiet)
            || self.waiting.get(i).is_some_and(|w| !w.is_empty())
    }

    /// Whether some rank's events wait.
    pub(super) fn any_waiting(&self) -> bool {
        self.held_back > 0
    }

    /// A frame arrived from connection `i`: receives waiting for its sends may give up.
    pub(super) fn frame(&mut self, i: usize, out: &mut impl FnMut(Item)) {
        self.frames[i] += 1;
        self.last_frame[i] = Instant::now();
        if self.held_back > 0 {
            self.expire(false, out);
        }
    }

    /// Rank `i`'s next event: out through `out` now, linked, or held back.
    pub(super) fn push(&mut self, i: usize, ev: Item, out: &mut impl FnMut(Item)) {
        // A connection's rank, learnt from its first event that names a thread.
        if !self.conn_known[i] {
            if let Some(r) = ev.thread().and_then(world_rank) {
                self.rank_conn.insert(r, i);
                self.conn_known[i] = true;
            }
        }
        self.waiting[i].push_back((None, ev));
        self.held_back += 1;
        if self.waiting[i].len() == 1 {
            self.drain(i, false, out);
        }
    }

    /// Give up on receives that waited too long (or on every one: `all`, the job ended).
    pub(super) fn expire(&mut self, all: bool, out: &mut impl FnMut(Item)) {
        for j in 0..self.waiting.len() {
            self.drain(j, all, out);
        }
    }

    /// Where a receive waiting for a send on `ch` starts waiting.
    fn mark(&self, ch: &Channel) -> Mark {
        let conn = self
            .linker
            .sender(ch)
            .and_then(|r| self.rank_conn.get(&r).copied());
        Mark {
            since: Instant::now(),
            sender: conn.map(|c| (c, self.frames[c])),
        }
    }

    /// Send out rank `i`'s events up to the first receive that must still wait, and then
    /// those of the ranks whose waiting receive a send that went out lets go on. A send
    /// enters its channel only as it goes out, so a `recv` never goes out before the
    /// `send` it names. (No two ranks wait on each other for good: a rank reports a send
    /// before calling MPI and a receive once it matched, so the send a waiting receive
    /// wants never comes after a receive that waits on the first rank.)
    fn drain(&mut self, i: usize, all: bool, out: &mut impl FnMut(Item)) {
        // (Allocates only when a send lets another rank go on.)
        let (mut first, mut ranks) = (Some(i), Vec::new());
        while let Some(i) = first.take().or_else(|| ranks.pop()) {
            while let Some((since, mut ev)) = self.waiting[i].pop_front() {
                match (self.link(&ev), &mut ev) {
                    (Linked::Send(l), ev) => set_link(ev, l),
                    (Linked::Wait(ch), _) => {
                        let mark = since.unwrap_or_else(|| self.mark(&ch));
                        let quiet = mark.sender.is_some_and(|(c, n)| {
                            self.frames[c] >= n + FRAMES
                                || (mark.since.elapsed() >= QUIET && self.last_frame[c].elapsed() >= QUIET)
                        });
                        if all || quiet || mark.since.elapsed() >= GIVE_UP {
                            // A probe consumes nothing: only a receive owes its send.
                            if ev.is_recv() {
                                self.linker.give_up(ch);
                            }
                        } else {
                            self.waiting[i].push_front((Some(mark), ev));
                            self.blocked.insert(ch, i);
                            break;
                        }
                    }
                    _ => {}
                }
                self.held_back -= 1;
                if let Some(ch) = self.observe(&mut ev) {
                    ranks.extend(self.blocked.remove(&ch));
                }
                out(ev);
            }
        }
    }

    /// The send a receive matched, or a probe's `stop` saw.
    fn link(&mut self, ev: &Item) -> Linked {
        match ev {
            Item::Full(Event::Recv(r)) => self.linker.link(r),
            Item::Full(Event::Stop(s)) => self.linker.peek(s),
            Item::Packed(names, p) => {
                let (Ok(Some(thread)), Ok(Some(op))) = (names.thread(p.thread), names.op(p.op)) else {
                    return Linked::No;
                };
                match p.kind {
                    Kind::Recv => self.linker.link_parts(thread, p.call.as_deref()),
                    Kind::Stop => self.linker.peek_parts(thread, op, p.call.as_deref()),
                    Kind::Send | Kind::Start => Linked::No,
                }
            }
            Item::Full(_) => Linked::No,
        }
    }

    /// Tie a collective's `start` or `stop` to its instance, and take in the channels and
    /// communicators `ev` tells of (returned: the channel a send entered).
    fn observe(&mut self, ev: &mut Item) -> Option<Channel> {
        match ev {
            Item::Full(ev) => {
                self.linker.instance(ev);
                self.linker.observe(ev)
            }
            Item::Packed(names, p) => {
                let (Ok(Some(thread)), Ok(Some(op))) = (names.thread(p.thread), names.op(p.op)) else {
                    return None;
                };
                if matches!(p.kind, Kind::Start | Kind::Stop) && Linker::instances(op) {
                    // The call is shared with the rank's other events of it: changed on a copy.
                    let call = p.call.as_mut().map(Arc::make_mut);
                    self.linker.instance_parts(p.kind, thread, op, call);
                }
                self.linker
                    .observe_parts(p.kind, thread, p.event_id, p.call.as_deref())
            }
        }
    }
}

/// Name `l` in `ev`: a receive's `from`, a probe's `call.saw`.
fn set_link(ev: &mut Item, l: Link) {
    match ev {
        Item::Full(Event::Recv(r)) => r.from = Some(l),
        Item::Full(Event::Stop(s)) => {
            if let Some(c) = s.call.as_deref_mut() {
                c.saw = Some(l);
            }
        }
        Item::Packed(names, p) if p.kind == Kind::Recv => {
            // `rank[R]` is thread R in every rank's names; searched when it is not.
            let at = world_rank(&l.thread)
                .and_then(|r| usize::try_from(r).ok())
                .filter(|r| names.threads.get(*r).is_some_and(|t| *t == *l.thread))
                .or_else(|| names.threads.iter().position(|t| *t == *l.thread));
            p.from = at.and_then(|t| i64::try_from(t).ok()).map(|thread| {
                Box::new(SentBy {
                    thread,
                    event_id: l.event_id,
                })
            });
        }
        Item::Packed(_, p) => {
            if let Some(c) = p.call.as_mut() {
                Arc::make_mut(c).saw = Some(l);
            }
        }
        Item::Full(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(v: serde_json::Value) -> Item {
        Item::Full(serde_json::from_value(v).expect("an event"))
    }

    /// What went out, as the events they are.
    fn events(out: &[Item]) -> Vec<Event> {
        out.iter()
            .map(|it| match it {
                Item::Full(ev) => ev.clone(),
                Item::Packed(names, p) => names.expand(p.clone()).expect("named"),
            })
            .collect()
    }

    fn send(id: u64, from: i32, to: i32) -> Item {
        ev(
            json!({"event":"send","event_id":id,"thread":format!("rank[{from}]"),"op":"MPI_Send",
            "msg":"x","type":"MPI_INT","traced":false,"held":false,
            "call":{"comm":"MPI_COMM_WORLD","peer":to,"tag":0}}),
        )
    }

    fn recv(id: u64, at: i32, source: i32) -> Item {
        ev(
            json!({"event":"recv","event_id":id,"thread":format!("rank[{at}]"),"op":"MPI_Recv",
            "msg":"y","position":0,"traced":false,
            "call":{"comm":"MPI_COMM_WORLD","matched":{"source":source,"tag":0,"bytes":4}}}),
        )
    }

    #[test]
    fn a_recv_never_goes_out_before_its_send_even_behind_a_waiting_one() {
        let mut links = Links::new(3);
        let mut out = Vec::new();
        let mut o = |e: Item| out.push(e);
        // Rank 0 waits for rank 2's send; its own send to rank 1 waits behind.
        links.push(0, recv(1, 0, 2), &mut o);
        links.push(0, send(2, 0, 1), &mut o);
        // Rank 1 took rank 0's send: it waits until that send has gone out.
        links.push(1, recv(1_000_000_000_001, 1, 0), &mut o);
        assert!(links.any_waiting());
        links.push(2, send(2_000_000_000_001, 2, 0), &mut o);
        assert!(!links.any_waiting());
        let out = events(&out);
        let order: Vec<u64> = out.iter().filter_map(Event::event_id).collect();
        assert_eq!(order, [2_000_000_000_001, 1, 2, 1_000_000_000_001]);
        let Event::Recv(r) = &out[3] else {
            panic!("{:?}", out[3])
        };
        assert_eq!(r.from.as_ref().map(|l| l.event_id), Some(2));
    }

    #[test]
    fn a_recv_whose_send_never_comes_goes_out_unlinked_at_the_end() {
        let mut links = Links::new(2);
        let mut out = Vec::new();
        links.push(0, recv(1, 0, 1), &mut |e| out.push(e));
        assert!(out.is_empty());
        links.expire(true, &mut |e| out.push(e));
        let out = events(&out);
        let Event::Recv(r) = &out[0] else {
            panic!("{:?}", out[0])
        };
        assert_eq!(r.from, None);
    }

    /// Ranks' compact events link as full ones do: the `recv` names its `send` by the
    /// names' thread index, and a collective's instance goes on a copy of the call its
    /// events share.
    #[test]
    fn compact_events_link_and_instances_copy_the_shared_call() {
        use racetrack_protocol::{CallInfo, Matched, MsgPath, Peer, Record, RecordText, Tag};
        let names = Arc::new(Names::new(
            vec!["MPI_Send".into(), "MPI_Recv".into(), "MPI_Barrier".into()],
            vec!["rank[0]".into(), "rank[1]".into()],
        ));
        let world = |c: CallInfo| {
            Some(Arc::new(CallInfo {
                comm: Some("MPI_COMM_WORLD".into()),
                ..c
            }))
        };
        let rec = |kind, id: u64, thread: i64, op: i64, call| {
            let r = Record {
                kind,
                event_id: id,
                thread,
                op,
                msg: MsgPath::from_slice(&[0, id]),
                a: 0,
                b: 0,
                traced: false,
                text: RecordText::None,
                from: None,
                call,
            };
            Item::Packed(names.clone(), r.to_packed())
        };
        let send_call = world(CallInfo {
            peer: Some(Peer::Rank(1)),
            tag: Some(Tag::Tag(3)),
            ..CallInfo::default()
        });
        let recv_call = world(CallInfo {
            matched: Some(Matched {
                source: 0,
                tag: 3,
                bytes: 4,
            }),
            ..CallInfo::default()
        });
        let barrier = world(CallInfo::default());
        let mut links = Links::new(2);
        let mut out = Vec::new();
        let mut o = |e: Item| out.push(e);
        links.push(1, rec(Kind::Recv, 1_000_000_000_001, 1, 1, recv_call), &mut o);
        assert!(links.any_waiting(), "its send has not come");
        links.push(0, rec(Kind::Send, 5, 0, 0, send_call), &mut o);
        let Item::Packed(_, start) = rec(Kind::Start, 6, 0, 2, barrier.clone()) else {
            unreachable!()
        };
        let shared = start.call.clone();
        links.push(0, Item::Packed(names.clone(), start), &mut o);
        assert!(!links.any_waiting());
        let Item::Packed(_, r) = &out[1] else {
            panic!("{:?}", out[1])
        };
        assert_eq!(
            r.from.as_deref(),
            Some(&SentBy {
                thread: 0,
                event_id: 5
            })
        );
        let Item::Packed(_, s) = &out[2] else {
            panic!("{:?}", out[2])
        };
        let k = s
            .call
            .as_ref()
            .and_then(|c| c.collective.clone())
            .expect("an instance");
        assert_eq!((k.comm.as_str(), k.n), ("MPI_COMM_WORLD", 0));
        assert_eq!(
            shared.and_then(|c| c.collective.clone()),
            None,
            "the shared call is unchanged"
        );
        let evs = events(&out);
        let Event::Recv(r) = &evs[1] else {
            panic!("{:?}", evs[1])
        };
        assert_eq!(
            r.from,
            Some(Link {
                thread: "rank[0]".into(),
                event_id: 5
            })
        );
    }
}
