//! Happens-before: a vector clock for every `send`, `recv`, `start` and `stop`, computed
//! here from what the events already say. Nothing travels with the program's messages,
//! and the program pays nothing.
//!
//! An event happens before another when a chain of these leads from one to the other:
//!
//! - **program order**: the events of one thread, in the order it reported them;
//! - **a message**: an MPI `recv` after the `send` its `from` names; a runtime step's
//!   `start` after the `recv` that queued the message it takes. A runtime `recv` is the
//!   sending thread's act (a step's outputs are delivered by the thread that ran it), so
//!   it sits in the sender's order, after its `send`; a schedule's inputs are the
//!   `input` thread's;
//! - **a collective** (the ranks' calls on one communicator, matched by their order
//!   there: the Kth collective a rank makes on a communicator is every member's Kth):
//!   what a rank's `stop` needs of the others' `start`s. `MPI_Barrier`, the `All*`
//!   calls, `MPI_Reduce_scatter` and the communicator constructors need every member:
//!   everyone's start precedes everyone's stop. `MPI_Bcast` and `MPI_Scatter(v)` need
//!   the root's: the root's start precedes every stop. `MPI_Reduce` and `MPI_Gather(v)`
//!   feed the root: every start precedes the root's stop. `MPI_Scan` and `MPI_Exscan`:
//!   the starts of ranks up to R precede R's stop. (MPI lets other collectives
//!   synchronize more; the model claims only what the data flow forces.)
//!
//! Two events are concurrent when neither happens before the other: a race is two sends
//! concurrent with each other that one wildcard receive may take.
//!
//! Taking an event in is one push of a few words (its thread as a number, found without
//! hashing for a compact event); the clocks are computed when asked for, over every event
//! so far, and kept until the next event arrives: the ranks' streams interleave, so the
//! event a clock depends on may come after it, and a clock computed at arrival could miss
//! it.

use crate::ids::{FastMap, ThreadKey};
use crate::links::{CommKey, Comms};
use racetrack_protocol::{CallInfo, Event, Kind, Names, PackedEv, SmolStr};

/// The thread a schedule's inputs come from.
pub const INPUT_THREAD: &str = "input";

/// The input thread's line (see [`Clocks::new`]).
const INPUT_LINE: u32 = 0;

/// How two events are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// The first happens before the second.
    Before,
    /// The second happens before the first.
    After,
    /// Neither: they are concurrent.
    Concurrent,
    /// The same event.
    Same,
}

impl Order {
    /// Its name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Order::Before => "before",
            Order::After => "after",
            Order::Concurrent => "concurrent",
            Order::Same => "same",
        }
    }
}

/// What a collective's `stop` needs of the members' `start`s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    All,
    FromRoot,
    ToRoot,
    Prefix,
}

/// What a collective call's stop needs of the members' starts; `None`: not a collective.
pub(crate) fn flow_of(op: &str) -> Option<Flow> {
    Some(match op {
        "MPI_Barrier" | "MPI_Allreduce" | "MPI_Allgather" | "MPI_Allgatherv" | "MPI_Alltoall"
        | "MPI_Alltoallv" | "MPI_Reduce_scatter" | "MPI_Comm_split" | "MPI_Comm_dup" | "MPI_Comm_create" => {
            Flow::All
        }
        "MPI_Bcast" | "MPI_Scatter" | "MPI_Scatterv" => Flow::FromRoot,
        "MPI_Reduce" | "MPI_Gather" | "MPI_Gatherv" => Flow::ToRoot,
        "MPI_Scan" | "MPI_Exscan" => Flow::Prefix,
        _ => return None,
    })
}

/// What an event waits for besides its thread's previous one.
#[derive(Debug, Clone, Copy)]
enum Dep {
    None,
    Event(u64),
    /// A collective's stop: its instance and its rank in the communicator.
    Collective(u32, i32),
}

#[derive(Debug)]
struct Instance {
    flow: Flow,
    root: Option<i32>,
    /// Members' starts: (rank in the communicator, event number).
    starts: Vec<(i32, u64)>,
}

/// A collective call's `start`, as far as happens-before cares.
#[derive(Debug)]
struct Collective {
    flow: Flow,
    comm: SmolStr,
    root: Option<i32>,
}

/// What an event is, as far as happens-before cares.
#[derive(Debug)]
enum What {
    /// A runtime `send` (MPI's: `Other`).
    Send(SmolStr),
    /// A runtime `recv`: the sender's act.
    Queued(SmolStr),
    /// An MPI `recv`, and the `send` its `from` names.
    Matched(Option<u64>),
    /// A runtime `start` that takes this message.
    Takes(SmolStr),
    /// An MPI collective's `start`.
    Enters(Box<Collective>),
    /// An MPI `stop`: a collective's ends it; one that created a communicator names it.
    Leaves(Option<Box<(SmolStr, i32, i32)>>),
    Other,
}

/// One event as it arrived: ingesting costs a push, and everything else is done when a
/// clock is asked for.
#[derive(Debug)]
struct Rec {
    id: u64,
    /// The thread that reported it (a runtime `recv`: the queue's), as a [`Threads`] line.
    line: u32,
    what: What,
}

/// The threads events came from, numbered by first sight: the lines of the layout.
#[derive(Debug, Default)]
struct Threads {
    names: Vec<SmolStr>,
    index: FastMap<SmolStr, u32>,
    /// The model's thread keys already seen (process, then thread) → line + 1, so that a
    /// compact event's thread costs two indexings, not a hash of its name.
    by_key: Vec<Vec<u32>>,
}

impl Threads {
    fn line(&mut self, thread: &str) -> u32 {
        if let Some(i) = self.index.get(thread) {
            return *i;
        }
        let i = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.push(thread.into());
        self.index.insert(thread.into(), i);
        i
    }

    /// The line of the model's thread `key`, named `name` (asked for at first sight only).
    fn line_of_key<'a>(&mut self, key: ThreadKey, name: impl FnOnce() -> &'a str) -> u32 {
        let (p, t) = (key.proc.index(), key.thread.index());
        if let Some(&l) = self.by_key.get(p).and_then(|v| v.get(t)) {
            if l > 0 {
                return l - 1;
            }
        }
        let line = self.line(name());
        if self.by_key.len() <= p {
            self.by_key.resize_with(p + 1, Vec::new);
        }
        let v = &mut self.by_key[p];
        if v.len() <= t {
            v.resize(t + 1, 0);
        }
        v[t] = line + 1;
        line
    }
}

/// Everything derived from the events, computed when asked for.
#[derive(Debug, Default)]
struct Computed {
    /// The records it covers.
    upto: usize,
    names: Vec<SmolStr>,
    /// Event number → (thread, position).
    at: FastMap<u64, (u32, u32)>,
    /// The clocks, by thread and position.
    clocks: Vec<Vec<Box<[u32]>>>,
}

/// What an MPI call's `start` contributes: a collective enters its instance.
fn enters(op: &str, c: &CallInfo) -> What {
    match (flow_of(op), &c.comm) {
        (Some(flow), Some(comm)) => What::Enters(Box::new(Collective {
            flow,
            comm: comm.as_str().into(),
            root: c.root,
        })),
        _ => What::Other,
    }
}

/// What an MPI call's `stop` contributes: it leaves its collective, naming the
/// communicator it created, if any.
fn leaves(c: &CallInfo) -> What {
    What::Leaves(
        c.created
            .as_ref()
            .map(|k| Box::new((k.comm.as_str().into(), k.rank, k.leader))),
    )
}

/// The happens-before relation of a session (see the module's documentation).
#[derive(Debug)]
pub struct Clocks {
    recs: Vec<Rec>,
    threads: Threads,
    computed: Computed,
}

/// Threads, their events and dependencies, as [`Clocks::compute`] lays them out.
#[derive(Default)]
struct Layout {
    comms: Comms,
    lines: Vec<Vec<(u64, Dep)>>,
    at: FastMap<u64, (u32, u32)>,
    /// Runtime messages: the thread that sent each, until queued.
    sender: FastMap<SmolStr, u32>,
    /// Runtime messages: the `recv` that queued each, until a step takes it.
    queued: FastMap<SmolStr, u64>,
    instances: Vec<Instance>,
    instance_of: FastMap<(CommKey, u64), u32>,
    /// Per thread and communicator: collectives started; per thread, the open one.
    started: FastMap<(u32, CommKey), u64>,
    open: FastMap<u32, (u32, i32)>,
}

impl Clocks {
    /// No event yet.
    pub fn new() -> Self {
        let mut threads = Threads::default();
        // Line 0, so that a message queued before its send was seen has a line to go
        // to in the layout, which cannot add one.
        threads.line(INPUT_THREAD);
        Clocks {
            recs: Vec::new(),
            threads,
            computed: Computed::default(),
        }
    }

    /// Events taken in.
    pub fn len(&self) -> usize {
        self.recs.len()
    }

    /// Whether no event was taken in.
    pub fn is_empty(&self) -> bool {
        self.recs.is_empty()
    }

    fn push(&mut self, id: u64, thread: &str, what: What) {
        let line = self.threads.line(thread);
        self.recs.push(Rec { id, line, what });
    }

    /// Take in one event (others are ignored).
    pub fn observe(&mut self, ev: &Event) {
        match ev {
            Event::Send(s) => {
                let what = match &s.call {
                    None => What::Send(s.msg.as_str().into()),
                    Some(_) => What::Other,
                };
                self.push(s.event_id, s.thread.as_deref().unwrap_or(INPUT_THREAD), what);
            }
            Event::Recv(r) => {
                let what = match (&r.call, &r.from) {
                    (None, None) => What::Queued(r.msg.as_str().into()),
                    (_, from) => What::Matched(from.as_ref().map(|f| f.event_id)),
                };
                self.push(r.event_id, &r.thread, what);
            }
            Event::Start(s) => {
                let what = match &s.call {
                    Some(c) => enters(&s.op, c),
                    None if s.step != racetrack_protocol::Step::Final => What::Takes(s.msg.as_str().into()),
                    None => What::Other,
                };
                self.push(s.event_id, &s.thread, what);
            }
            Event::Stop(s) => {
                let what = match &s.call {
                    Some(c) => leaves(c),
                    None => What::Other,
                };
                self.push(s.event_id, &s.thread, what);
            }
            _ => {}
        }
    }

    /// Take in one packed event (the compact form), reported by the model's thread `key`
    /// (`None`: the event names no thread it knows).
    pub fn observe_packed(&mut self, key: Option<ThreadKey>, names: &Names, p: &PackedEv) {
        let what = match (p.kind, p.call.as_deref()) {
            (Kind::Send, None) => What::Send(p.msg.clone()),
            (Kind::Recv, None) => What::Queued(p.msg.clone()),
            (Kind::Start, None) if p.a != 2 => What::Takes(p.msg.clone()),
            (Kind::Start | Kind::Stop, None) => What::Other,
            (Kind::Send, Some(_)) => What::Other,
            (Kind::Recv, Some(_)) => What::Matched(p.from.as_ref().map(|f| f.event_id)),
            (Kind::Start, Some(c)) => {
                let op = names.op(p.op).ok().flatten().unwrap_or_default();
                enters(op, c)
            }
            (Kind::Stop, Some(c)) => leaves(c),
        };
        let line = match key {
            Some(k) => self.threads.line_of_key(k, || {
                names.thread(p.thread).ok().flatten().unwrap_or(INPUT_THREAD)
            }),
            None if p.kind == Kind::Send => INPUT_LINE,
            None => return,
        };
        self.recs.push(Rec {
            id: p.event_id,
            line,
            what,
        });
    }

    /// Lay out the events: threads, positions, dependencies (see the module's
    /// documentation for who depends on what).
    fn layout(&self) -> Layout {
        let names = &self.threads.names;
        let mut l = Layout {
            lines: vec![Vec::new(); names.len()],
            ..Layout::default()
        };
        for r in &self.recs {
            let own = r.line;
            let thread = &names[own as usize];
            let (line, dep) = match &r.what {
                What::Send(msg) => {
                    l.sender.insert(msg.clone(), own);
                    (own, Dep::None)
                }
                What::Queued(msg) => {
                    let line = match l.sender.remove(msg) {
                        Some(s) => s,
                        None => INPUT_LINE,
                    };
                    l.queued.insert(msg.clone(), r.id);
                    (line, Dep::None)
                }
                What::Matched(from) => (own, from.map_or(Dep::None, Dep::Event)),
                What::Takes(msg) => (own, l.queued.remove(msg).map_or(Dep::None, Dep::Event)),
                What::Enters(c) => {
                    l.enter(own, thread, r.id, c);
                    (own, Dep::None)
                }
                What::Leaves(created) => {
                    if let Some(k) = created {
                        l.comms.learn(thread, &k.0, k.1, k.2);
                    }
                    let dep = l
                        .open
                        .remove(&own)
                        .map_or(Dep::None, |(inst, rank)| Dep::Collective(inst, rank));
                    (own, dep)
                }
                What::Other => (own, Dep::None),
            };
            let pos = u32::try_from(l.lines[line as usize].len()).unwrap_or(u32::MAX);
            l.at.entry(r.id).or_insert((line, pos));
            l.lines[line as usize].push((r.id, dep));
        }
        l
    }
}

impl Layout {
    /// A collective's start: its instance (the thread's Kth on the communicator).
    fn enter(&mut self, line: u32, thread: &str, id: u64, c: &Collective) {
        let Some((key, rank)) = self.comms.of(thread, &c.comm) else {
            return;
        };
        let k = self.started.entry((line, key)).or_default();
        let nth = *k;
        *k += 1;
        let next = u32::try_from(self.instances.len()).unwrap_or(u32::MAX);
        let inst = *self.instance_of.entry((key, nth)).or_insert(next);
        if inst == next {
            self.instances.push(Instance {
                flow: c.flow,
                root: c.root,
                starts: Vec::new(),
            });
        }
        self.instances[inst as usize].starts.push((rank, id));
        self.open.insert(line, (inst, rank));
    }

    /// The events a collective's stop by `rank` waits for.
    fn collective_deps(&self, inst: u32, rank: i32) -> impl Iterator<Item = u64> + '_ {
        let i = &self.instances[inst as usize];
        i.starts.iter().filter_map(move |(r, id)| {
            let needed = match i.flow {
                Flow::All => true,
                Flow::FromRoot => Some(*r) == i.root,
                Flow::ToRoot => Some(rank) == i.root,
                Flow::Prefix => *r <= rank,
            };
            needed.then_some(*id)
        })
    }

    /// Every event's clock: each thread's events in order, each after what it depends on.
    fn clocks(&self) -> Vec<Vec<Box<[u32]>>> {
        let n = self.lines.len();
        let mut out: Vec<Vec<Box<[u32]>>> = vec![Vec::new(); n];
        let mut cur: Vec<Vec<u32>> = vec![vec![0; n]; n];
        let mut forced = false;
        loop {
            let mut progress = false;
            for t in 0..n {
                while out[t].len() < self.lines[t].len() {
                    let (_, dep) = self.lines[t][out[t].len()];
                    let deps: Vec<u64> = match dep {
                        Dep::None => Vec::new(),
                        Dep::Event(id) => vec![id],
                        Dep::Collective(inst, rank) => self.collective_deps(inst, rank).collect(),
                    };
                    let mut blocked = false;
                    for &(lt, lp) in deps.iter().filter_map(|id| self.at.get(id)) {
                        match out[lt as usize].get(lp as usize) {
                            Some(c) if lt as usize != t => {
                                for (a, b) in cur[t].iter_mut().zip(c.iter()) {
                                    *a = (*a).max(*b);
                                }
                            }
                            Some(_) => {}
                            None if forced || lt as usize == t => {}
                            None => blocked = true,
                        }
                    }
                    if blocked {
                        break;
                    }
                    forced = false;
                    cur[t][t] += 1;
                    out[t].push(cur[t].clone().into_boxed_slice());
                    progress = true;
                }
            }
            if out.iter().zip(&self.lines).all(|(o, l)| o.len() == l.len()) {
                return out;
            }
            // Every thread waits on another: only a dependency on an event reported
            // after its own (which cannot be) does that; the first waiting one goes on
            // without it.
            forced = !progress;
        }
    }
}

impl Default for Clocks {
    fn default() -> Self {
        Self::new()
    }
}

impl Clocks {
    /// Compute every clock, unless no event arrived since the last time.
    fn compute(&mut self) -> &Computed {
        if self.computed.upto != self.recs.len() || self.computed.names.is_empty() {
            let layout = self.layout();
            self.computed = Computed {
                upto: self.recs.len(),
                clocks: layout.clocks(),
                names: self.threads.names.clone(),
                at: layout.at,
            };
        }
        &self.computed
    }

    /// Event `id`'s vector clock: per thread, how many of its events happen before it or
    /// are it (threads at 0 left out). `None`: no such event.
    pub fn clock(&mut self, id: u64) -> Option<Vec<(SmolStr, u32)>> {
        let c = self.compute();
        let (t, p) = *c.at.get(&id)?;
        let clock = &c.clocks[t as usize][p as usize];
        Some(
            clock
                .iter()
                .enumerate()
                .filter(|(_, v)| **v > 0)
                .map(|(i, v)| (c.names[i].clone(), *v))
                .collect(),
        )
    }

    /// How events `a` and `b` are ordered; `None` when either is unknown.
    pub fn order(&mut self, a: u64, b: u64) -> Option<Order> {
        let c = self.compute();
        let ((ta, pa), (tb, pb)) = (*c.at.get(&a)?, *c.at.get(&b)?);
        if a == b {
            return Some(Order::Same);
        }
        let (ca, cb) = (
            &c.clocks[ta as usize][pa as usize],
            &c.clocks[tb as usize][pb as usize],
        );
        Some(if ca.iter().zip(cb.iter()).all(|(x, y)| x <= y) {
            Order::Before
        } else if cb.iter().zip(ca.iter()).all(|(x, y)| x <= y) {
            Order::After
        } else {
            Order::Concurrent
        })
    }
}

#[cfg(test)]
mod tests;
