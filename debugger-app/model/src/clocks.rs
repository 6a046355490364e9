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
//!   feed the root: every start precedes the root's stop. `MPI_Scan`: the starts of
//!   ranks up to R precede R's stop. (MPI lets other collectives synchronize more; the
//!   model claims only what the data flow forces.)
//!
//! Two events are concurrent when neither happens before the other: a race is two sends
//! concurrent with each other that one wildcard receive may take.
//!
//! The clocks are computed when asked for, over every event so far, and kept until the
//! next event arrives: the ranks' streams interleave, so the event a clock depends on may
//! come after it, and a clock computed at arrival could miss it.

use crate::ids::FastMap;
use crate::links::{CommKey, Comms};
use racetrack_protocol::{Event, Kind, Names, PackedEv, SmolStr};
use std::collections::hash_map::Entry;

/// The thread a schedule's inputs come from.
pub const INPUT_THREAD: &str = "input";

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
enum Flow {
    All,
    FromRoot,
    ToRoot,
    Prefix,
}

fn flow_of(op: &str) -> Option<Flow> {
    Some(match op {
        "MPI_Barrier" | "MPI_Allreduce" | "MPI_Allgather" | "MPI_Allgatherv" | "MPI_Alltoall"
        | "MPI_Alltoallv" | "MPI_Reduce_scatter" | "MPI_Comm_split" | "MPI_Comm_dup" | "MPI_Comm_create" => {
            Flow::All
        }
        "MPI_Bcast" | "MPI_Scatter" | "MPI_Scatterv" => Flow::FromRoot,
        "MPI_Reduce" | "MPI_Gather" | "MPI_Gatherv" => Flow::ToRoot,
        "MPI_Scan" => Flow::Prefix,
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

/// The happens-before relation of a session (see the module's documentation).
#[derive(Debug, Default)]
pub struct Clocks {
    comms: Comms,
    names: Vec<SmolStr>,
    index: FastMap<SmolStr, u32>,
    /// Per thread, its events in order.
    lines: Vec<Vec<(u64, Dep)>>,
    /// Event number → (thread, position).
    at: FastMap<u64, (u32, u32)>,
    /// Runtime messages: the thread that sent each, until queued.
    sender: FastMap<SmolStr, u32>,
    /// Runtime messages: the `recv` that queued each, until a step takes it.
    queued: FastMap<SmolStr, u64>,
    instances: Vec<Instance>,
    instance_of: FastMap<(CommKey, u64), u32>,
    /// Per thread and communicator: collectives started, and the open one.
    started: FastMap<(u32, CommKey), u64>,
    open: FastMap<u32, (u32, i32)>,
    /// The clocks, by thread and position, as last computed (empty: stale).
    computed: Vec<Vec<Box<[u32]>>>,
}

impl Clocks {
    /// No event yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Events taken in.
    pub fn len(&self) -> usize {
        self.at.len()
    }

    /// Whether no event was taken in.
    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    fn line(&mut self, thread: &str) -> u32 {
        if let Some(i) = self.index.get(thread) {
            return *i;
        }
        let i = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.push(thread.into());
        self.index.insert(thread.into(), i);
        self.lines.push(Vec::new());
        i
    }

    fn push(&mut self, line: u32, id: u64, dep: Dep) {
        let l = &mut self.lines[line as usize];
        if let Entry::Vacant(v) = self.at.entry(id) {
            v.insert((line, u32::try_from(l.len()).unwrap_or(u32::MAX)));
            l.push((id, dep));
            self.computed.clear();
        }
    }

    /// Take in one event (others are ignored).
    pub fn observe(&mut self, ev: &Event) {
        self.comms.observe(ev);
        match ev {
            Event::Send(s) => {
                let line = self.line(s.thread.as_deref().unwrap_or(INPUT_THREAD));
                if s.call.is_none() {
                    self.sender.insert(s.msg.as_str().into(), line);
                }
                self.push(line, s.event_id, Dep::None);
            }
            Event::Recv(r) => match (&r.call, &r.from) {
                (None, None) => self.runtime_recv(r.event_id, &r.msg),
                (_, from) => {
                    let line = self.line(&r.thread);
                    let dep = from.as_ref().map_or(Dep::None, |f| Dep::Event(f.event_id));
                    self.push(line, r.event_id, dep);
                }
            },
            Event::Start(s) => {
                let line = self.line(&s.thread);
                let dep = match &s.call {
                    Some(c) => {
                        self.collective_start(line, &s.thread, &s.op, s.event_id, c);
                        Dep::None
                    }
                    None => self.consumed(&s.msg, s.step != racetrack_protocol::Step::Final),
                };
                self.push(line, s.event_id, dep);
            }
            Event::Stop(s) => {
                let line = self.line(&s.thread);
                let dep = match (s.call.is_some(), self.open.remove(&line)) {
                    (true, Some((inst, rank))) => Dep::Collective(inst, rank),
                    _ => Dep::None,
                };
                self.push(line, s.event_id, dep);
            }
            _ => {}
        }
    }

    /// Take in one packed event (the runtime's streamed form).
    pub fn observe_packed(&mut self, names: &Names, p: &PackedEv) {
        let thread = names.thread(p.thread).ok().flatten();
        match p.kind {
            Kind::Send => {
                let line = self.line(thread.unwrap_or(INPUT_THREAD));
                self.sender.insert(p.msg.clone(), line);
                self.push(line, p.event_id, Dep::None);
            }
            Kind::Recv => self.runtime_recv(p.event_id, &p.msg),
            Kind::Start | Kind::Stop => {
                let Some(t) = thread else { return };
                let line = self.line(t);
                let dep = if p.kind == Kind::Start {
                    self.consumed(&p.msg, p.a != 2)
                } else {
                    Dep::None
                };
                self.push(line, p.event_id, dep);
            }
        }
    }

    /// A runtime `recv`: the sender's act.
    fn runtime_recv(&mut self, id: u64, msg: &str) {
        let line = match self.sender.remove(msg) {
            Some(l) => l,
            None => self.line(INPUT_THREAD),
        };
        self.queued.insert(msg.into(), id);
        self.push(line, id, Dep::None);
    }

    /// A runtime `start` taking `msg` (when `consumes`: not a final step).
    fn consumed(&mut self, msg: &str, consumes: bool) -> Dep {
        match consumes.then(|| self.queued.remove(msg)).flatten() {
            Some(id) => Dep::Event(id),
            None => Dep::None,
        }
    }

    fn collective_start(
        &mut self,
        line: u32,
        thread: &str,
        op: &str,
        id: u64,
        c: &racetrack_protocol::CallInfo,
    ) {
        let Some(flow) = flow_of(op) else { return };
        let Some((key, rank)) = c.comm.as_deref().and_then(|n| self.comms.of(thread, n)) else {
            return;
        };
        let k = self.started.entry((line, key.clone())).or_default();
        let nth = *k;
        *k += 1;
        let next = u32::try_from(self.instances.len()).unwrap_or(u32::MAX);
        let inst = *self.instance_of.entry((key, nth)).or_insert(next);
        if inst == next {
            self.instances.push(Instance {
                flow,
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

    /// Compute every clock (see the module's documentation), unless nothing arrived since.
    fn compute(&mut self) {
        if !self.computed.is_empty() || self.lines.is_empty() {
            return;
        }
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
                    let ready = deps.iter().filter_map(|id| self.at.get(id));
                    let mut blocked = false;
                    for &(lt, lp) in ready {
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
                break;
            }
            // Every thread waits on another: only a dependency on an event reported
            // after its own (which cannot be) does that; the first waiting one goes on
            // without it.
            forced = !progress;
        }
        self.computed = out;
    }

    /// Event `id`'s vector clock: per thread, how many of its events happen before it or
    /// are it (threads at 0 left out). `None`: no such event.
    pub fn clock(&mut self, id: u64) -> Option<Vec<(SmolStr, u32)>> {
        let (t, p) = *self.at.get(&id)?;
        self.compute();
        let c = &self.computed[t as usize][p as usize];
        Some(
            c.iter()
                .enumerate()
                .filter(|(_, v)| **v > 0)
                .map(|(i, v)| (self.names[i].clone(), *v))
                .collect(),
        )
    }

    /// How events `a` and `b` are ordered; `None` when either is unknown.
    pub fn order(&mut self, a: u64, b: u64) -> Option<Order> {
        let ((ta, pa), (tb, pb)) = (*self.at.get(&a)?, *self.at.get(&b)?);
        if a == b {
            return Some(Order::Same);
        }
        self.compute();
        let (ca, cb) = (
            &self.computed[ta as usize][pa as usize],
            &self.computed[tb as usize][pb as usize],
        );
        // Clocks of threads added after one of them was computed are equal-length here:
        // every clock is computed over every thread.
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
