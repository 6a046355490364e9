//! Deadlocks of an MPI job, found while it runs: an AND/OR wait-for graph over the ranks,
//! as MUST builds it.
//!
//! A rank in a blocking call waits for other ranks:
//!
//! - a receive or probe (`MPI_Mprobe` too) from one source, for that source (unless a
//!   matching send is already observed and not taken: then it completes, unless the
//!   `MPI_Irecv`s `posted` before it took every such message, however they took them:
//!   those whose every candidate is one of this call's take one each, in turn);
//! - a wildcard receive or probe, for **any** member of the communicator but itself (or,
//!   once the debugger forced its match, for that source);
//! - a send, for its destination to receive (a send that completes eagerly leaves before
//!   anyone looks);
//! - a collective, for **every** member that has not entered this collective yet (the
//!   Kth on the communicator), or is in it with another call (collectives called in
//!   different orders). Its data flow may need fewer (`MPI_Scan`'s rank 0 needs
//!   nobody's data), but a rank still in the call after the others went quiet is
//!   waiting: implementations exchange more than the data flow needs (MPICH's scan
//!   does), and only members that have not entered can be what it waits for;
//! - `MPI_Wait`, `MPI_Waitall`, `MPI_Waitany` and `MPI_Waitsome` whose `start` says what
//!   they wait for (`awaits`: its requests were all `MPI_Irecv`s and `MPI_Isend`s), for
//!   the senders of the receives among them that no pending message can complete, the
//!   messages matched to the receives as well as they can be (which took which is told
//!   only when the call returns): for `MPI_Waitall` whose receives name their sources,
//!   **every** source short of messages; with a wildcard among them, or for `MPI_Waitany`
//!   and `MPI_Waitsome` when no receive can complete, **any** of their senders; a send
//!   request completes without anyone here;
//! - other `MPI_Wait*`, and `MPI_Sendrecv*`, whose other peers the events do not name, for
//!   **any** other rank (unless a send to it is pending): a Wait on a nonblocking
//!   collective's request or a started persistent one included.
//!
//! The calls that only start something (nonblocking collectives, `MPI_Start*`,
//! `MPI_Imrecv`), `MPI_Mrecv` (its message is matched already) and the one-sided calls
//! (`MPI_Win_fence`, `MPI_Win_lock`, … whose window group the events do not name) never
//! wait here: a rank in one can go on.
//!
//! A rank that is not in a blocking call, or that the caller knows is moving (its events
//! are recent, or the debugger holds it), can go on; so can a rank in a call whose wait
//! is met by ranks that can go on (every one of an AND, one of an OR). What is left,
//! once nothing more can go on, can never go on: a deadlock, partial when other ranks
//! still run. A rank that called `MPI_Finalize` or exited sends nothing more.
//!
//! Every approximation errs towards "can go on": an unknown communicator, a call whose
//! peers are not reported, a rank not seen yet. A deadlock reported is a real one, as
//! far as the events tell; one among calls the library does not cover is missed, and so
//! is one where a posted wildcard `MPI_Irecv` with several candidates already took the
//! message a later blocking receive waits for (its match is reported only when it
//! completes: which one it took is not known).

use crate::clocks::flow_of;
use crate::links::{world_rank, CommKey, Linker};
use racetrack_protocol::{CallInfo, Kind, Needs, Peer, SmolStr, SpecialPeer, Tag, Waiting};
use std::sync::Arc;

/// A rank's blocking call, from its `start`.
#[derive(Debug, Clone)]
struct Open {
    op: SmolStr,
    event_id: u64,
    call: Arc<CallInfo>,
    /// The source (and tag) the debugger forced a wildcard onto (`match`, applied).
    forced: Option<(i32, Option<i32>)>,
}

#[derive(Debug, Default, Clone)]
struct Rank {
    open: Option<Open>,
    finished: bool,
}

/// What a blocked rank needs to go on.
#[derive(Debug, PartialEq)]
enum Need {
    /// Nothing: its call completes.
    Nothing,
    All(Vec<usize>),
    Any(Vec<usize>),
}

impl Need {
    /// Whether it is met when `free` says which ranks can go on.
    fn met(&self, free: impl Fn(usize) -> bool) -> bool {
        match self {
            Need::Nothing => true,
            Need::All(w) => w.iter().all(|&x| free(x)),
            Need::Any(w) => w.iter().any(|&x| free(x)),
        }
    }

    /// Every rank it names, in order, once.
    fn ranks(&self) -> Vec<usize> {
        match self {
            Need::Nothing => Vec::new(),
            Need::All(w) | Need::Any(w) => w.clone(),
        }
    }
}

/// A deadlock: the stuck ranks and a cycle among them (see [`racetrack_protocol::Event::Deadlock`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Deadlock {
    pub waits: Vec<Waiting>,
    pub cycle: Vec<String>,
}

/// The ranks' blocking calls (see the module's documentation).
#[derive(Debug, Default)]
pub struct Waits {
    ranks: Vec<Rank>,
}

/// Whether a call of `op` may block until other ranks act.
fn blocks(op: &str) -> bool {
    matches!(
        op,
        "MPI_Recv"
            | "MPI_Probe"
            | "MPI_Mprobe"
            | "MPI_Send"
            | "MPI_Ssend"
            | "MPI_Rsend"
            | "MPI_Sendrecv"
            | "MPI_Sendrecv_replace"
            | "MPI_Wait"
            | "MPI_Waitall"
            | "MPI_Waitany"
            | "MPI_Waitsome"
    ) || flow_of(op).is_some()
}

fn rank_name(r: usize) -> String {
    format!("rank[{r}]")
}

impl Waits {
    /// A job of `ranks` ranks, none in a call.
    pub fn new(ranks: usize) -> Self {
        Self {
            ranks: vec![Rank::default(); ranks],
        }
    }

    fn rank(&mut self, thread: &str) -> Option<&mut Rank> {
        let r = usize::try_from(world_rank(thread)?).ok()?;
        if r >= self.ranks.len() {
            self.ranks.resize(r + 1, Rank::default());
        }
        self.ranks.get_mut(r)
    }

    /// `thread`'s event `event_id`, of kind `kind`, in its call of `op` with `call`.
    pub fn observe(
        &mut self,
        kind: Kind,
        thread: &str,
        op: &str,
        event_id: u64,
        call: Option<&Arc<CallInfo>>,
    ) {
        let Some(r) = self.rank(thread) else { return };
        match kind {
            Kind::Start if op == "MPI_Finalize" => {
                r.finished = true;
                r.open = None;
            }
            Kind::Start => {
                r.open = match call {
                    Some(c) if blocks(op) => Some(Open {
                        op: op.into(),
                        event_id,
                        call: c.clone(),
                        forced: None,
                    }),
                    _ => None,
                };
            }
            Kind::Stop => r.open = None,
            Kind::Send | Kind::Recv => {}
        }
    }

    /// The debugger forced the wildcard receive or probe whose `start` is `event_id` onto
    /// `source` (and `tag`): it waits for that rank only.
    pub fn forced(&mut self, event_id: u64, source: i32, tag: Option<i32>) {
        let mut open = self.ranks.iter_mut().filter_map(|r| r.open.as_mut());
        if let Some(o) = open.find(|o| o.event_id == event_id) {
            o.forced = Some((source, tag));
        }
    }

    /// World rank `r` exited: it does nothing more.
    pub fn finished(&mut self, r: usize) {
        if let Some(rank) = self.ranks.get_mut(r) {
            rank.finished = true;
            rank.open = None;
        }
    }

    /// The ranks known (the job's, or more if events named more).
    pub fn len(&self) -> usize {
        self.ranks.len()
    }

    /// Whether no rank is known.
    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }

    /// Whether some rank is in a blocking call.
    pub fn any_blocked(&self) -> bool {
        self.ranks.iter().any(|r| r.open.is_some())
    }

    /// The ranks that can never go on, if any, given the channels `linker` keeps and the
    /// ranks the caller knows are `moving`.
    pub fn find(&self, linker: &mut Linker, moving: impl Fn(usize) -> bool) -> Option<Deadlock> {
        let n = self.ranks.len();
        let needs: Vec<Need> = (0..n).map(|r| self.need(r, linker)).collect();
        let mut free: Vec<bool> = (0..n)
            .map(|r| {
                let rk = &self.ranks[r];
                !rk.finished && (rk.open.is_none() || moving(r) || needs[r] == Need::Nothing)
            })
            .collect();
        self.settle(&needs, &mut free);
        let stuck: Vec<usize> = (0..n).filter(|&r| !free[r] && !self.ranks[r].finished).collect();
        if stuck.is_empty() {
            return None;
        }
        let waits = stuck.iter().map(|&r| self.waiting(r, &needs[r])).collect();
        Some(Deadlock {
            waits,
            cycle: cycle(&stuck, &needs, &free),
        })
    }

    /// Whether rank `r`'s open wildcard receive or probe can be forced onto `source` (a
    /// rank of its communicator; `tag` forced too, if given): `Err` with the reason when
    /// that source cannot send the message: it is not a member, it has finished, or it
    /// has none pending and is in a call that waits, directly or through others, for this
    /// receive to complete. A source that runs, or is in a call that may end without this
    /// receive, might still send: that pick is allowed (if it never sends, the deadlock is
    /// told).
    pub fn pick(&self, r: usize, source: i32, tag: Option<i32>, linker: &mut Linker) -> Result<(), String> {
        let Some(o) = self.ranks.get(r).and_then(|k| k.open.as_ref()) else {
            return Ok(());
        };
        // Only a wildcard's pick is judged here; the rank refuses any other `match` itself.
        if o.call.source.or(o.call.peer) != Some(Peer::Special(SpecialPeer::AnySource)) {
            return Ok(());
        }
        let Some(name) = o.call.comm.as_deref() else {
            return Ok(());
        };
        let Some((key, me)) = linker.comms().of(&rank_name(r), name) else {
            return Ok(());
        };
        // A sendrecv's tag is its send's: its receive's is not reported.
        let tag = tag.or(match (o.call.tag, o.call.source) {
            (Some(Tag::Tag(t)), None) => Some(t),
            _ => None,
        });
        if linker.pending(key, me, Some(source), tag) {
            return Ok(());
        }
        let members = linker.comms().members(key, self.ranks.len());
        let Some(w) = members.iter().find(|(c, _)| *c == source).map(|&(_, w)| w) else {
            let last = members.len().saturating_sub(1);
            return Err(format!("{name} has no rank {source} (its ranks are 0 … {last})"));
        };
        let w = usize::try_from(w).unwrap_or(usize::MAX);
        if w == r {
            return Err(format!(
                "{} has no message to itself pending, and is in this receive",
                rank_name(r)
            ));
        }
        if self.ranks.get(w).is_some_and(|k| k.finished) {
            return Err(format!("{} has finished: it sends nothing more", rank_name(w)));
        }
        let n = self.ranks.len();
        let mut needs: Vec<Need> = (0..n).map(|x| self.need(x, linker)).collect();
        needs[r] = Need::All(vec![w]);
        let mut free: Vec<bool> = (0..n)
            .map(|x| {
                let k = &self.ranks[x];
                x != r && !k.finished && (k.open.is_none() || needs[x] == Need::Nothing)
            })
            .collect();
        self.settle(&needs, &mut free);
        if free.get(w).copied().unwrap_or(true) {
            return Ok(());
        }
        let why = self.waiting(w, &needs[w]);
        let site = why.site.map(|s| format!(" at {s}")).unwrap_or_default();
        Err(format!(
            "{} cannot send before this receive completes: it is in {}{site}, waiting for {}",
            why.thread,
            why.call,
            why.waits_for
                .join(if why.needs == Needs::Any { " or " } else { " and " })
        ))
    }

    /// Free every rank whose wait is met by free ranks, until nothing changes.
    fn settle(&self, needs: &[Need], free: &mut [bool]) {
        let n = free.len();
        loop {
            let mut changed = false;
            for r in 0..n {
                let goes = !free[r]
                    && !self.ranks[r].finished
                    && needs[r].met(|x| free.get(x).copied().unwrap_or(true));
                if goes {
                    free[r] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
    }

    fn waiting(&self, r: usize, need: &Need) -> Waiting {
        let w = need.ranks();
        let needs = match need {
            Need::Any(_) => Needs::Any,
            _ => Needs::All,
        };
        let open = self.ranks[r].open.as_ref();
        Waiting {
            thread: rank_name(r),
            call: open.map(|o| o.op.to_string()).unwrap_or_default(),
            event_id: open.map_or(0, |o| o.event_id),
            site: open.and_then(|o| o.call.site.as_ref()).map(ToString::to_string),
            waits_for: w.iter().map(|&x| rank_name(x)).collect(),
            needs,
            finished: w
                .iter()
                .filter(|&&x| self.ranks.get(x).is_some_and(|k| k.finished))
                .map(|&x| rank_name(x))
                .collect(),
            why: None,
        }
    }

    /// What rank `r` needs to go on.
    fn need(&self, r: usize, linker: &mut Linker) -> Need {
        let Some(o) = &self.ranks[r].open else {
            return Need::Nothing;
        };
        let thread = rank_name(r);
        let c = &o.call;
        let comm = c
            .comm
            .as_deref()
            .and_then(|name| linker.comms().of(&thread, name));
        match o.op.as_str() {
            "MPI_Recv" | "MPI_Probe" | "MPI_Mprobe" => {
                let Some((key, me)) = comm else {
                    return Need::Nothing;
                };
                let tag = match (o.forced, c.tag) {
                    (Some((_, Some(t))), _) | (_, Some(Tag::Tag(t))) => Some(t),
                    _ => None,
                };
                let peer = o.forced.map(|(s, _)| Peer::Rank(s)).or(c.peer);
                let src = match peer {
                    Some(Peer::Rank(s)) => Some(s),
                    Some(Peer::Special(SpecialPeer::AnySource)) => None,
                    _ => return Need::Nothing,
                };
                if left_for(&thread, (key, me), (src, tag), c.posted.as_deref(), linker) {
                    return Need::Nothing;
                }
                match src {
                    Some(s) => in_world(linker, key, s),
                    None => any(self.members(linker, key, Some(me))),
                }
            }
            "MPI_Send" | "MPI_Ssend" | "MPI_Rsend" => match (comm, c.peer) {
                (Some((key, _)), Some(Peer::Rank(d))) => in_world(linker, key, d),
                _ => Need::Nothing,
            },
            "MPI_Wait" | "MPI_Waitall" | "MPI_Waitany" | "MPI_Waitsome" if c.awaits.is_some() => {
                self.awaited(r, o, linker)
            }
            op => match flow_of(op) {
                Some(_) => self.collective(r, o, linker),
                None if linker.pending_to_world(i32::try_from(r).unwrap_or(i32::MAX)) => Need::Nothing,
                None => any((0..self.ranks.len()).filter(|&x| x != r).collect()),
            },
        }
    }

    /// The world ranks of communicator `key` but `except` (a rank there).
    fn members(&self, linker: &mut Linker, key: CommKey, except: Option<i32>) -> Vec<usize> {
        linker
            .comms()
            .members(key, self.ranks.len())
            .into_iter()
            .filter(|(r, _)| Some(*r) != except)
            .filter_map(|(_, w)| usize::try_from(w).ok())
            .collect()
    }

    /// A collective: the members that have not entered it.
    fn collective(&self, r: usize, o: &Open, linker: &mut Linker) -> Need {
        let Some(inst) = &o.call.collective else {
            return Need::Nothing;
        };
        let Some(key) = linker.comms().key_of(&inst.comm, inst.leader) else {
            return Need::Nothing;
        };
        let Some((_, me)) = linker.comms().of(&rank_name(r), &inst.comm) else {
            return Need::Nothing;
        };
        // A member is missing until it enters this instance; one that entered it with
        // another call (MBI's collectives called in different orders) never completes
        // it, and stays missing while it is in that call.
        let other_call = |w: usize| {
            self.ranks.get(w).and_then(|m| m.open.as_ref()).is_some_and(|m| {
                m.op != o.op
                    && m.call.collective.as_ref().is_some_and(|c| {
                        (c.comm.as_str(), c.leader, c.n) == (inst.comm.as_str(), inst.leader, inst.n)
                    })
            })
        };
        let missing: Vec<usize> = self
            .members(linker, key, Some(me))
            .into_iter()
            .filter(|&w| linker.started(&rank_name(w), key) <= inst.n || other_call(w))
            .collect();
        if missing.is_empty() {
            Need::Nothing
        } else {
            Need::All(missing)
        }
    }
}

/// A deadlock in words, for a log: `rank[0] in MPI_Recv at t.c:7 (main) waits for
/// rank[1]; …` and the cycle, if any.
pub fn describe(waits: &[Waiting], cycle: &[String]) -> String {
    let mut text = String::new();
    for (i, w) in waits.iter().enumerate() {
        let sep = if i == 0 { "" } else { "; " };
        let at = w.site.as_deref().map(|s| format!(" at {s}")).unwrap_or_default();
        let whom = match (w.needs, w.waits_for.len()) {
            (_, 1) | (Needs::All, _) => w.waits_for.join(" and "),
            (Needs::Any, _) => format!("any of {}", w.waits_for.join(", ")),
        };
        let gone = if w.finished.is_empty() {
            String::new()
        } else {
            format!(" ({} finished)", w.finished.join(", "))
        };
        text.push_str(&format!(
            "{sep}{} in {}{at} waits for {whom}{gone}",
            w.thread, w.call
        ));
    }
    if !cycle.is_empty() {
        text.push_str(&format!("; cycle: {}", cycle.join(" -> ")));
    }
    text
}

/// Rank `r` of communicator `key`, as a world rank (`Nothing` when unknown: no alarm on
/// what the events do not say).
fn in_world(linker: &mut Linker, key: CommKey, r: i32) -> Need {
    match linker.comms().world(key, r).and_then(|x| usize::try_from(x).ok()) {
        Some(x) => Need::All(vec![x]),
        None => Need::Nothing,
    }
}

/// Any of `w` (none to wait for: nothing to say).
fn any(w: Vec<usize>) -> Need {
    if w.is_empty() {
        Need::Nothing
    } else {
        Need::Any(w)
    }
}

/// A cycle among the `stuck` ranks: from the first, follow a stuck rank each waits for
/// until one repeats (empty when the chain ends at a finished rank).
fn cycle(stuck: &[usize], needs: &[Need], free: &[bool]) -> Vec<String> {
    let mut path: Vec<usize> = Vec::new();
    let mut at = stuck[0];
    loop {
        if let Some(i) = path.iter().position(|&p| p == at) {
            return path[i..].iter().map(|&r| rank_name(r)).collect();
        }
        path.push(at);
        let next = needs[at]
            .ranks()
            .into_iter()
            .find(|&x| stuck.contains(&x) && !free.get(x).copied().unwrap_or(true));
        match next {
            Some(x) => at = x,
            None => return Vec::new(),
        }
    }
}

mod requests;
use requests::left_for;

#[cfg(test)]
mod tests;
