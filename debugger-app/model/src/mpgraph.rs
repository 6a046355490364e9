//! The message-passing graph of an MPI job: time runs down, one lane per rank, one vertex
//! per call (a run of empty polls is one call, as the library reports it), an edge from
//! each send to the call that received it, and one instance per collective (every
//! member's Nth collective on a communicator).
//!
//! **Rows are logical time.** A vertex's row is past the row of the vertex before it on
//! its lane, a receive sits below the send it took, and a collective's members share one
//! row (a Lamport clock in which a collective is one event), so edges point down and a
//! collective is one band. The ranks' events reach the debugger in any interleaving, so a
//! row is a lower bound that may grow: when a receive or a collective member comes in
//! below where its partners are, [`MpGraph::lift`] moves it down, with the calls after it
//! on its lane and whatever they sent or joined. Vertices only ever move down, rows along
//! a lane stay increasing, and a view finds what is visible by binary search. A lift
//! reaches other lanes only where few calls follow (a rank whose events are far ahead
//! stays: there a band may slant), so an event costs little however late it comes.
//!
//! Parameters are kept compact (names interned), since a long job has hundreds of
//! thousands of calls; past [`MAX_VERTICES`] calls the graph stops growing and says so.

use crate::ids::{FastMap, OpId, ThreadKey};
use racetrack_protocol::{CallInfo, Kind, Peer, SmolStr, SpecialPeer, Tag};

/// Most calls the graph keeps (about 100 bytes each).
pub const MAX_VERTICES: usize = 2_000_000;

/// Most calls one lift moves on other lanes than its own (see [`MpGraph::lift`]).
pub const LIFT_MAX: usize = 64;

/// Most calls after a call on its lane for a lift to move it from another lane.
pub const TAIL_MAX: usize = 32;

/// A vertex, an edge's end or a collective instance: an index into the graph's tables.
pub type Vx = u32;

/// One call of one rank.
#[derive(Debug, Clone)]
pub struct Vertex {
    /// Its rank's lane (index into [`MpGraph::lanes`]).
    pub lane: u32,
    /// The call (`MPI_Send`), as the operation of the job's structure.
    pub call: OpId,
    /// Its place on its lane.
    at: u32,
    /// The number of the call's `start` event.
    pub start: u64,
    /// The call's parameters.
    pub params: Params,
    /// The collective instance it belongs to.
    pub coll: Option<Vx>,
    /// Still in the call (no `stop` yet).
    pub open: bool,
    /// It received a message (an edge ends here).
    pub received: bool,
}

impl Vertex {
    /// A wildcard receive or probe that has not matched yet: drawn as pending.
    pub fn pending_wildcard(&self) -> bool {
        self.open && !self.received && self.params.matched.is_none() && self.params.wildcard()
    }
}

/// A call's parameters, with names as indexes into [`MpGraph::name`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Params {
    pub peer: Option<Peer>,
    /// A sendrecv's source (`peer` is its destination).
    pub source: Option<Peer>,
    pub tag: Option<Tag>,
    pub bytes: Option<i64>,
    pub count: Option<i32>,
    pub root: Option<i32>,
    pub comm: Option<u32>,
    pub datatype: Option<u32>,
    pub site: Option<u32>,
    /// `MPI_Pcontrol`'s label.
    pub label: Option<u32>,
    /// The source a receive or probe matched (its `stop`).
    pub matched: Option<i32>,
    /// The source the debugger forced.
    pub forced: Option<i32>,
    /// Consecutive empty polls this vertex stands for.
    pub polls: Option<u64>,
}

impl Params {
    /// A receive, probe or sendrecv from `MPI_ANY_SOURCE`.
    pub fn wildcard(&self) -> bool {
        self.source.or(self.peer) == Some(Peer::Special(SpecialPeer::AnySource))
    }
}

/// One rank's calls.
#[derive(Debug, Clone)]
pub struct Lane {
    pub thread: ThreadKey,
    /// Its world rank (`rank[N]`), when the thread is named so.
    pub rank: Option<i32>,
    /// Its vertices, in call order (rows increasing).
    pub vertices: Vec<Vx>,
    /// Whether the rank called `MPI_Finalize` or the job ended.
    pub finished: bool,
    /// The communicators it joined (`MPI_Comm_split`, …): name, its rank there, and
    /// the world rank of the communicator's rank 0.
    comms: Vec<(u32, i32, i32)>,
}

/// A send a wildcard receive could take now: the earliest pending one of its sender that
/// matches the receive's communicator and tag (MPI does not let later ones overtake it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// The send's call.
    pub send: Vx,
    /// Its sender, as a rank of the receive's communicator: what `match` names.
    pub source: i32,
    /// Whether it fits the receive's buffer (else the receive would be truncated).
    pub fits: bool,
}

/// One collective call of every member: their Nth on one communicator.
#[derive(Debug, Clone, Default)]
pub struct Collective {
    pub members: Vec<Vx>,
    /// The row its members are lined up on.
    pub row: u32,
}

/// One MPI event, its names resolved by the model.
#[derive(Debug, Clone, Copy)]
pub struct MpEvent<'a> {
    pub kind: Kind,
    pub thread: ThreadKey,
    pub thread_name: &'a str,
    pub call: OpId,
    pub call_name: &'a str,
    pub event_id: u64,
    /// The number of the send a `recv` took.
    pub from: Option<u64>,
    pub info: &'a CallInfo,
}

/// The graph (see the module's documentation).
#[derive(Debug, Default)]
pub struct MpGraph {
    vertices: Vec<Vertex>,
    /// Each vertex's row (logical time; see the module's documentation) and lane, apart
    /// from the rest: views read them for every call in a range, many per frame.
    place: Vec<(u32, u32)>,
    lanes: Vec<Lane>,
    lane_of: FastMap<ThreadKey, u32>,
    /// Send → receive, as (send's vertex, receive's vertex).
    edges: Vec<(Vx, Vx)>,
    /// The receives of each send's vertex.
    out: FastMap<Vx, Vec<Vx>>,
    colls: Vec<Collective>,
    coll_of: FastMap<(u32, i32, u64), Vx>,
    /// Sends not received yet, by event number: their vertex.
    sends: FastMap<u64, Vx>,
    names: Vec<SmolStr>,
    name_ids: FastMap<SmolStr, u32>,
    /// Names that are call sites, and communicators, in order of first sight.
    sites: Vec<u32>,
    comms: Vec<u32>,
    /// By name: 1 listed in `sites`, 2 in `comms`.
    listed: Vec<u8>,
    /// Calls left out past [`MAX_VERTICES`].
    dropped: u64,
}

impl MpGraph {
    /// Every vertex, by [`Vx`].
    pub fn vertices(&self) -> &[Vertex] {
        &self.vertices
    }

    /// Vertex `v`'s row: its logical time.
    pub fn row(&self, v: Vx) -> u32 {
        self.place.get(v as usize).map_or(0, |p| p.0)
    }

    /// Vertex `v`'s row and lane.
    pub fn place(&self, v: Vx) -> (u32, u32) {
        self.place.get(v as usize).copied().unwrap_or_default()
    }

    /// Every lane, in order of first sight (see [`MpGraph::lane_order`]).
    pub fn lanes(&self) -> &[Lane] {
        &self.lanes
    }

    /// The lanes by world rank (lanes without one last, in order of sight).
    pub fn lane_order(&self) -> Vec<u32> {
        let mut order: Vec<u32> = (0..self.lanes.len() as u32).collect();
        order.sort_by_key(|&l| (self.lanes[l as usize].rank.unwrap_or(i32::MAX), l));
        order
    }

    /// The lane of thread `t`, if it made a call.
    pub fn lane(&self, t: ThreadKey) -> Option<u32> {
        self.lane_of.get(&t).copied()
    }

    /// Every send → receive edge.
    pub fn edges(&self) -> &[(Vx, Vx)] {
        &self.edges
    }

    /// Every collective instance.
    pub fn collectives(&self) -> &[Collective] {
        &self.colls
    }

    /// An interned name (communicator, datatype, site, label).
    pub fn name(&self, i: u32) -> &str {
        self.names.get(i as usize).map_or("", SmolStr::as_str)
    }

    /// Every interned name, by index.
    pub fn names(&self) -> &[SmolStr] {
        &self.names
    }

    /// Every call site seen (interned names).
    pub fn sites(&self) -> &[u32] {
        &self.sites
    }

    /// Every communicator seen (interned names).
    pub fn comms(&self) -> &[u32] {
        &self.comms
    }

    /// Calls not kept (past [`MAX_VERTICES`]).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The vertices of `lane` whose rows lie in `rows` (a range of rows, inclusive).
    pub fn in_rows(&self, lane: u32, lo: u32, hi: u32) -> &[Vx] {
        let Some(l) = self.lanes.get(lane as usize) else {
            return &[];
        };
        let row = |v: &Vx| self.place[*v as usize].0;
        let a = l.vertices.partition_point(|v| row(v) < lo);
        let b = l.vertices.partition_point(|v| row(v) <= hi);
        &l.vertices[a..b.max(a)]
    }

    /// The last row of any vertex.
    pub fn last_row(&self) -> u32 {
        self.lanes
            .iter()
            .filter_map(|l| l.vertices.last())
            .map(|&v| self.place[v as usize].0)
            .max()
            .unwrap_or(0)
    }

    /// `lane`'s rank in communicator `comm`, and the world rank of that communicator's
    /// rank 0 (which tells two colours of one split apart).
    fn comm_rank(&self, lane: u32, comm: u32) -> Option<(i32, i32)> {
        let l = self.lanes.get(lane as usize)?;
        if self.name(comm) == "MPI_COMM_WORLD" {
            return Some((l.rank?, 0));
        }
        let &(_, rank, leader) = l.comms.iter().rev().find(|c| c.0 == comm)?;
        Some((rank, leader))
    }

    /// Every send reported so far to receive `v`'s rank on its communicator (the same
    /// instance: its leader too), with its sender's rank there and the call that received
    /// it, if one did. Costs a pass over the sends.
    pub fn sends_to(&self, v: Vx) -> Vec<(i32, Vx, Option<Vx>)> {
        let Some(x) = self.vertices.get(v as usize) else {
            return Vec::new();
        };
        let Some((comm, (me, leader))) = x.params.comm.and_then(|c| Some((c, self.comm_rank(x.lane, c)?)))
        else {
            return Vec::new();
        };
        let taken = self.out.iter().map(|(&s, r)| (s, r.first().copied()));
        let pending = self.sends.values().map(|&s| (s, None));
        let mut out: Vec<(i32, Vx, Option<Vx>)> = taken
            .chain(pending)
            .filter_map(|(s, r)| {
                let y = self.vertices.get(s as usize)?;
                if y.params.comm != Some(comm) || y.params.peer != Some(Peer::Rank(me)) {
                    return None;
                }
                let (source, l) = self.comm_rank(y.lane, comm)?;
                (l == leader).then_some((source, s, r))
            })
            .collect();
        out.sort_unstable_by_key(|&(source, s, _)| (source, s));
        out.dedup_by_key(|e| e.1);
        out
    }

    /// Lane `lane`'s rank in communicator `comm` (an interned name), if known.
    pub fn rank_in(&self, lane: u32, comm: u32) -> Option<i32> {
        self.comm_rank(lane, comm).map(|(r, _)| r)
    }

    /// The sends wildcard receive `v` could take now, by source (none when `v` is not
    /// an open wildcard receive or probe).
    pub fn candidates(&self, v: Vx) -> Vec<Candidate> {
        let Some(x) = self
            .vertices
            .get(v as usize)
            .filter(|x| x.open && x.params.wildcard())
        else {
            return Vec::new();
        };
        let Some(comm) = x.params.comm else {
            return Vec::new();
        };
        let Some((me, leader)) = self.comm_rank(x.lane, comm) else {
            return Vec::new();
        };
        // A sendrecv's tag is its send's: its receive's is not reported.
        let tag = match (x.params.tag, x.params.source) {
            (Some(Tag::Tag(t)), None) => Some(t),
            _ => None,
        };
        // The earliest matching pending send of each sender (event numbers grow along a
        // rank): (send event, vertex, source).
        let mut first: FastMap<u32, (u64, Vx, i32)> = FastMap::default();
        for (&ev, &s) in &self.sends {
            let y = &self.vertices[s as usize];
            let p = &y.params;
            let to_me = p.comm == Some(comm) && p.peer == Some(Peer::Rank(me));
            if !to_me || tag.is_some_and(|t| p.tag != Some(Tag::Tag(t))) {
                continue;
            }
            let Some((source, l)) = self.comm_rank(y.lane, comm) else {
                continue;
            };
            if l != leader {
                continue;
            }
            let slot = first.entry(y.lane).or_insert((ev, s, source));
            if ev < slot.0 {
                *slot = (ev, s, source);
            }
        }
        let mut out: Vec<Candidate> = first
            .into_values()
            .map(|(_, send, source)| Candidate {
                send,
                source,
                fits: match (self.vertices[send as usize].params.bytes, x.params.bytes) {
                    (Some(sent), Some(room)) => sent <= room,
                    _ => true,
                },
            })
            .collect();
        out.sort_by_key(|c| c.source);
        out
    }

    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.name_ids.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        let s = SmolStr::from(s);
        self.names.push(s.clone());
        self.listed.push(0);
        self.name_ids.insert(s, i);
        i
    }

    /// `s`'s index, listed among the sites (or the communicators) when first seen as one.
    fn intern_in(&mut self, s: &str, sites: bool) -> u32 {
        let i = self.intern(s);
        let bit = if sites { 1 } else { 2 };
        if self.listed[i as usize] & bit == 0 {
            self.listed[i as usize] |= bit;
            if sites { &mut self.sites } else { &mut self.comms }.push(i);
        }
        i
    }

    fn lane_mut(&mut self, t: ThreadKey, name: &str) -> u32 {
        if let Some(&l) = self.lane_of.get(&t) {
            return l;
        }
        let l = self.lanes.len() as u32;
        self.lanes.push(Lane {
            thread: t,
            rank: crate::links::world_rank(name),
            vertices: Vec::new(),
            finished: false,
            comms: Vec::new(),
        });
        self.lane_of.insert(t, l);
        l
    }

    /// The lane's latest vertex.
    fn last(&self, lane: u32) -> Option<Vx> {
        self.lanes[lane as usize].vertices.last().copied()
    }

    fn params(&mut self, c: &CallInfo) -> Params {
        Params {
            peer: c.peer,
            source: c.source,
            tag: c.tag,
            bytes: c.bytes,
            count: c.count,
            root: c.root,
            comm: c.comm.as_deref().map(|s| self.intern_in(s, false)),
            datatype: c.datatype.as_deref().map(|s| self.intern(s)),
            site: c.site.as_deref().map(|s| self.intern_in(s, true)),
            label: c.label.as_deref().map(|s| self.intern(s)),
            matched: c.matched.as_ref().map(|m| m.source),
            forced: c.forced.as_ref().map(|f| f.source),
            polls: c.polls,
        }
    }

    /// One MPI event (see [`MpEvent`]).
    pub fn observe(&mut self, e: &MpEvent) {
        let lane = self.lane_mut(e.thread, e.thread_name);
        match e.kind {
            Kind::Start => self.start(lane, e.call, e.event_id, e.info),
            Kind::Send => {
                if let Some(v) = self.last(lane) {
                    self.sends.insert(e.event_id, v);
                }
            }
            Kind::Recv => {
                let (Some(v), Some(s)) = (self.last(lane), e.from.and_then(|f| self.sends.remove(&f))) else {
                    return;
                };
                self.edges.push((s, v));
                self.out.entry(s).or_default().push(v);
                self.vertices[v as usize].received = true;
                self.lift(v, self.place[s as usize].0 + 1);
            }
            Kind::Stop => {
                let Some(v) = self.last(lane) else { return };
                let p = self.params(e.info);
                let x = &mut self.vertices[v as usize];
                x.open = false;
                x.params.matched = p.matched.or(x.params.matched);
                x.params.forced = p.forced.or(x.params.forced);
                x.params.polls = p.polls;
                if let Some(c) = &e.info.created {
                    let name = self.intern(&c.comm);
                    self.lanes[lane as usize].comms.push((name, c.rank, c.leader));
                }
                if e.call_name == "MPI_Finalize" {
                    self.lanes[lane as usize].finished = true;
                }
            }
        }
    }

    fn start(&mut self, lane: u32, call: OpId, event_id: u64, info: &CallInfo) {
        if self.vertices.len() >= MAX_VERTICES {
            self.dropped += 1;
            return;
        }
        let row = self.last(lane).map_or(0, |v| self.place[v as usize].0 + 1);
        let v = self.vertices.len() as Vx;
        let at = self.lanes[lane as usize].vertices.len() as u32;
        let params = self.params(info);
        self.place.push((row, lane));
        self.vertices.push(Vertex {
            lane,
            call,
            at,
            start: event_id,
            params,
            coll: None,
            open: true,
            received: false,
        });
        self.lanes[lane as usize].vertices.push(v);
        if let Some(c) = &info.collective {
            let key = (self.intern(&c.comm), c.leader, c.n);
            self.join(key, v);
        }
    }

    /// Vertex `v` enters collective instance `key`: every member is lined up on the
    /// instance's row.
    fn join(&mut self, key: (u32, i32, u64), v: Vx) {
        let i = match self.coll_of.get(&key) {
            Some(&i) => i,
            None => {
                let i = self.colls.len() as Vx;
                self.colls.push(Collective::default());
                self.coll_of.insert(key, i);
                i
            }
        };
        self.vertices[v as usize].coll = Some(i);
        let c = &mut self.colls[i as usize];
        c.members.push(v);
        let row = c.row;
        self.lift(v, row);
    }

    /// Move vertex `v` down to `row` at least, with the calls after it on its lane (rows
    /// along a lane stay increasing), then what must stay below or beside those: the
    /// receives of what they sent, the other members of their collectives. Those are
    /// moved only while [`LIFT_MAX`] allows, and only when few calls follow them on
    /// their lanes ([`TAIL_MAX`]): a rank far ahead stays where it is, so one late event
    /// costs little (see the module's documentation).
    fn lift(&mut self, v: Vx, row: u32) {
        let mut work = vec![(v, row)];
        let mut budget = LIFT_MAX;
        while let Some((v, row)) = work.pop() {
            let (mut next, lane) = (v, self.vertices[v as usize].lane);
            let mut row = row;
            loop {
                let now = self.place[next as usize].0;
                let x = &self.vertices[next as usize];
                // A collective member sets its instance's row as it joins.
                let joining = x.coll.is_some_and(|c| self.colls[c as usize].row < row.max(now));
                if now >= row && !joining {
                    break;
                }
                row = row.max(now);
                self.place[next as usize].0 = row;
                let at = x.at as usize;
                for &r in self.out.get(&next).into_iter().flatten() {
                    work.push((r, row + 1));
                }
                if let Some(c) = x.coll {
                    let c = &mut self.colls[c as usize];
                    if c.row < row {
                        c.row = row;
                        work.extend(c.members.iter().map(|&m| (m, row)));
                    }
                }
                match self.lanes[lane as usize].vertices.get(at + 1) {
                    Some(&n) => (next, row) = (n, row + 1),
                    None => break,
                }
            }
            // Others' calls, when they are cheap to move.
            work.retain(|&(u, _)| {
                let x = &self.vertices[u as usize];
                let tail = self.lanes[x.lane as usize].vertices.len() - x.at as usize;
                tail <= TAIL_MAX
            });
            budget = budget.saturating_sub(1);
            if budget == 0 {
                break;
            }
        }
    }

    /// The job ended: every lane is finished and no call is open.
    pub(crate) fn finish_all(&mut self) {
        for l in &mut self.lanes {
            l.finished = true;
        }
        for v in &mut self.vertices {
            v.open = false;
        }
    }
}

#[cfg(test)]
mod tests;
