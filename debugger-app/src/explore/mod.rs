//! `racetrack explore`: find the outcomes a program's message races can lead to, by
//! running it again and again with other orderings forced.
//!
//! Two kinds of program, one walk. A [`Runner`] makes one run under a schedule (picks
//! keyed so that they mean the same in every run however the threads interleave) and
//! reads off it each pick's alternatives: the senders whose next message to that thread
//! does not happen after the pick.
//! - An MPI job ([`run`]): every wildcard receive is held (race mode); those the
//!   schedule names are forced, the others left to MPI. A pick is `rank[R]`'s Nth
//!   wildcard receive; its value the source.
//! - A program on the runtime ([`flow`]): the schedule is a replay log that each thread
//!   follows for its first steps, then runs free; the run writes a trace, from which the
//!   explorer reads which sender's message each step took and happens-before. A pick is
//!   `proc[1]`'s Nth step on a message; its value the sender's code.
//!
//! The search is a walk over schedules (breadth first by default, see [`frontier`]),
//! restoring a state by re-executing
//! from the start with the schedule's picks forced (an MPI job cannot be checkpointed
//! from outside; a runtime program's state is its threads' and its queues', which a
//! forced prefix rebuilds exactly, at the cost of a process start, a few milliseconds).
//! Every pick a run left free adds a branch per other sender it could have taken. A
//! branch keeps forced the picks made before it in the run's order (the order receives
//! were held; for the runtime, a linearization of happens-before) but those made after
//! it completed, and, for the runtime, those the other sender's message needed; it
//! leaves the rest free. So independent races are explored in every combination (a
//! branch that kept every other pick would never combine two departures), and a runtime
//! branch's message is sure to come. A runtime branch that starts from a state already
//! branched from is not taken ([`states`]). The walk is complete when every branch ran
//! and every forced pick could be made; `--max-runs` and `--budget-s` bound it.
//!
//! Outcomes are the program's exit code and everything it printed (as a multiset, timing
//! fields left out), a deadlock (as the debugger names it), or a run over its time limit.
//! Each distinct outcome keeps a replay file of its first run when one could be saved,
//! which `racetrack replay FILE -- PROGRAM ARGS` plays again. Once the walk is over, each
//! outcome reached through several departures from the natural order is shrunk
//! ([`shrink`]): the fewest departures found to reach it.

mod flow;
mod frontier;
mod run;
mod shrink;
mod states;
mod steps;
mod summary;
mod trail;

use crate::mpirun::Plan;
pub use flow::Program;
use frontier::Frontier;
pub use frontier::Order;
use shrink::shrink_all;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
pub use summary::{Departure, Found, Note, Outcome, Progress, Summary};

/// A pick across runs: its thread and how many such picks it made before (an MPI rank's
/// wildcard receives, a runtime thread's steps on messages).
pub type Key = (String, u32);

/// The picks a run is made to follow: each key's source (MPI) or sender code (runtime).
pub type Schedule = BTreeMap<Key, i32>;

/// One run of the program, made to follow a schedule: see the module's documentation.
pub trait Runner: Sync {
    /// Run once, forcing `forced`; write the run's replay file to `file`.
    fn run(&self, forced: &Schedule, file: &Path) -> anyhow::Result<Run>;
    /// Whether a branch keeps only the picks made before it (and those its other sender
    /// needed), rather than every pick not made after it.
    fn linear(&self) -> bool;
    /// Shrink the departures that reach an outcome (see [`shrink`]).
    fn shrinks(&self) -> bool;
}

/// What one run did.
pub struct Run {
    pub outcome: Outcome,
    /// Its picks, in the order they were made.
    pub picks: Vec<Pick>,
    /// Messages received.
    pub delivered: u64,
    /// Of those, the ones delivered after the schedule's forced picks (what an explorer
    /// that restored states from checkpoints would deliver); `None`: not counted.
    pub fresh: Option<u64>,
    /// Picks not explored (MPI polls).
    pub unexplored: u64,
    /// The graph was full: later receives went unread.
    pub dropped: bool,
    /// Whether the replay file was written.
    pub saved: bool,
    /// What every thread took, in order, hashed (runtime): two runs with one are one
    /// ordering.
    pub ordering: Option<u64>,
    /// The states at the run's cuts (runtime, unless `--no-merge`; see [`states`]).
    pub states: Option<Box<states::States>>,
}

/// A wildcard receive of a run.
#[derive(Debug, Clone)]
pub struct Pick {
    pub key: Key,
    /// The source it was forced onto, else the one it matched (-1: none).
    pub source: i32,
    /// Every source it could have matched in that run, sorted (see `run`).
    pub candidates: Vec<i32>,
    pub site: Option<String>,
    /// The rank refused the forced match, and why.
    pub refused: Option<String>,
    /// Forced by the run's schedule (else MPI matched it).
    pub forced: bool,
    /// The run's receives (by index in its list) posted after this one completed, so
    /// perhaps because of what it took: a branch here does not keep them forced.
    pub after: Vec<usize>,
    /// Whether the run's events told enough of it (its call in the graph).
    pub known: bool,
    /// What it took, in words (runtime: `Collect 1.0.1 from proc[0]`).
    pub label: Option<String>,
    /// Runtime: for each candidate, how many steps of each thread the step that sent its
    /// message knew of (its vector clock): what a branch onto it keeps forced.
    pub needs: Vec<BTreeMap<String, u32>>,
    /// Runtime: the thread's step starts before this one that a breakpoint set at attach
    /// counts (final steps included; the program's first start, held at attach, not).
    pub starts: u64,
    /// Runtime: its step's vector clock (each thread's steps that happened before it, its
    /// own included): what comes after it.
    pub clock: BTreeMap<String, u32>,
}

impl Pick {
    /// Whether this pick happened after `p` (runtime picks, by their clocks).
    fn after_pick(&self, p: &Pick) -> bool {
        self.clock.get(&p.key.0).is_some_and(|&n| n > p.key.1)
    }
}

/// The limits of a search.
#[derive(Debug, Clone)]
pub struct Options {
    pub max_runs: usize,
    pub budget: Duration,
    /// One run's limit: past it the run counts as hung.
    pub run_limit: Duration,
    /// Where the scenarios go.
    pub out: PathBuf,
    /// Runs made side by side.
    pub jobs: usize,
    /// Merge equal states (runtime programs, see [`states`]).
    pub merge: bool,
    /// The order waiting schedules run in (see [`frontier`]).
    pub order: Order,
}

/// An MPI job's runs (see [`run`]).
struct Mpi<'a> {
    plan: &'a Plan,
    limit: Duration,
}

impl Runner for Mpi<'_> {
    fn run(&self, forced: &Schedule, file: &Path) -> anyhow::Result<Run> {
        run::run(self.plan, forced, self.limit, file)
    }

    fn linear(&self) -> bool {
        true
    }

    fn shrinks(&self) -> bool {
        true
    }
}

/// Explore the job of `plan`; `say` hears of each run.
pub fn explore_mpi(plan: &Plan, opts: &Options, say: impl FnMut(Note)) -> anyhow::Result<Summary> {
    let mpi = Mpi {
        plan,
        limit: opts.run_limit,
    };
    explore(&mpi, opts, say)
}

/// Explore a program on the runtime (see [`flow`]); `say` hears of each run.
pub fn explore_program(program: &Program, opts: &Options, say: impl FnMut(Note)) -> anyhow::Result<Summary> {
    let runner = flow::Flow::new(program, opts);
    explore(&runner, opts, say)
}

/// The walk (see the module's documentation), with `runner`'s runs.
pub fn explore(runner: &impl Runner, opts: &Options, mut say: impl FnMut(Note)) -> anyhow::Result<Summary> {
    std::fs::create_dir_all(&opts.out)?;
    let t0 = Instant::now();
    let mut stack = Frontier::new(opts.order, BTreeMap::new());
    let mut tried: HashSet<Vec<(Key, i32)>> = HashSet::new();
    let mut s = Summary {
        runs: 0,
        picks: 0,
        branch_points: 0,
        delivered: 0,
        fresh: None,
        orderings: HashSet::new(),
        states: HashSet::new(),
        merged: 0,
        reached: HashSet::new(),
        delivered_new: None,
        offered: std::collections::HashMap::new(),
        reversals: 0,
        unexplored: 0,
        infeasible: 0,
        outcomes: Vec::new(),
        shrink_runs: 0,
        complete: false,
        stopped: None,
        time: Duration::ZERO,
        order: opts.order,
    };
    // A full graph (`dropped`) says the walk may be incomplete, but it goes on; a budget
    // spent or a run that could not be made ends it.
    let mut ended = false;
    while !ended {
        let batch = next_batch(&mut stack, &mut tried, opts, &mut s, t0);
        if batch.is_empty() {
            break;
        }
        say(Note::Progress(Progress {
            runs: s.runs,
            pending: stack.len() + batch.len(),
            outcomes: s.outcomes.len(),
            elapsed: t0.elapsed(),
        }));
        let results = run_all(runner, &batch);
        for ((forced, file), r) in batch.into_iter().zip(results) {
            match r {
                Ok(r) => {
                    if !matches!(r.outcome, Outcome::Infeasible(_)) {
                        s.unexplored += branch(&r, &forced, &mut stack, &mut s, runner.linear());
                    }
                    s.absorb(r, (&forced, file), t0, &mut say);
                }
                // What was found so far stands; the walk stops here.
                Err(e) => {
                    ended = true;
                    s.stopped = Some(format!("run {} could not be made: {e}", s.runs + 1));
                }
            }
        }
    }
    if runner.shrinks() {
        shrink_all(runner, opts, &mut s, t0, &mut say);
    }
    if s.stopped.is_none() && s.unexplored > 0 {
        s.stopped = Some(format!(
            "{} picks were not explored (MPI polls, or receives whose match was not told; \
             runtime steps whose message was not seen sent, or inputs of nested schedule calls)",
            s.unexplored
        ));
    }
    if s.stopped.is_none() && s.infeasible > 0 {
        s.stopped = Some(format!("{} forced picks could not be made", s.infeasible));
    }
    s.complete = stack.is_empty() && s.stopped.is_none();
    s.time = t0.elapsed();
    Ok(s)
}

/// The next schedules to run, at most `--jobs` of them: the frontier's next ones not run
/// yet, each with its scenario's file; none when the walk is over or a budget is spent
/// (then `s.stopped` says which).
fn next_batch(
    stack: &mut Frontier,
    tried: &mut HashSet<Vec<(Key, i32)>>,
    opts: &Options,
    s: &mut Summary,
    t0: Instant,
) -> Vec<(Schedule, PathBuf)> {
    let mut batch = Vec::new();
    while batch.len() < opts.jobs.max(1) {
        let Some(forced) = pop_untried(stack, tried) else {
            break;
        };
        let spent = if s.runs + batch.len() >= opts.max_runs {
            Some(format!("--max-runs {} reached", opts.max_runs))
        } else if t0.elapsed() >= opts.budget {
            Some(format!("--budget-s {} spent", opts.budget.as_secs()))
        } else {
            None
        };
        if let Some(why) = spent {
            // Left for a walk that goes on: it was not run.
            stack.put_back(forced);
            if batch.is_empty() {
                s.stopped = Some(why);
            }
            break;
        }
        tried.insert(forced.clone().into_iter().collect());
        let file = opts.out.join(format!("run-{}.rtrec", s.runs + batch.len() + 1));
        batch.push((forced, file));
    }
    batch
}

/// The next schedule on `stack` not run yet.
fn pop_untried(stack: &mut Frontier, tried: &HashSet<Vec<(Key, i32)>>) -> Option<Schedule> {
    while let Some(forced) = stack.pop() {
        if !tried.contains(&forced.clone().into_iter().collect::<Vec<_>>()) {
            return Some(forced);
        }
    }
    None
}

/// Run each schedule of `batch`, side by side when there are several (each run is its
/// own job, with its own listener and scenario file); results in the batch's order.
fn run_all(runner: &impl Runner, batch: &[(Schedule, PathBuf)]) -> Vec<anyhow::Result<Run>> {
    if let [(forced, file)] = batch {
        return vec![runner.run(forced, file)];
    }
    std::thread::scope(|sc| {
        let runs: Vec<_> = batch
            .iter()
            .map(|(forced, file)| sc.spawn(move || runner.run(forced, file)))
            .collect();
        runs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("the run's thread panicked")))
            })
            .collect()
    })
}

/// The branches a run adds: for each pick the run left free, one per other sender it
/// could have taken. The branch keeps forced, when `linear`, the picks made before it,
/// the run's forced ones and those the other sender's message needed (see
/// [`Pick::needs`]); else every other pick as it went; in both, but those made after it
/// (what they take may follow from it). A runtime pick the schedule forced branches too,
/// onto its other senders: a departure elsewhere can make a message concurrent with it
/// that no earlier run had (DPOR's race reversal). With states, each such branch is told
/// apart by its starting state like any other; without, a step is reversed onto a sender
/// at most once, whatever came before it. Returns the
/// free picks that could not be read (no match told, or no call in the graph): left
/// unexplored. A runtime branch whose state at its start, with the same thread taking the
/// same sender's message, was a branch's before is not taken (see [`states`]).
fn branch(r: &Run, forced: &Schedule, stack: &mut Frontier, s: &mut Summary, linear: bool) -> u64 {
    let picks = &r.picks;
    let states = r.states.as_deref();
    let mut unread = 0;
    for (i, p) in picks.iter().enumerate() {
        let reversed = forced.contains_key(&p.key);
        if reversed && p.clock.is_empty() {
            continue;
        }
        // Not read (no call in the graph), or never matched though a message was there.
        if !p.known || (p.source < 0 && !p.candidates.is_empty()) {
            unread += u64::from(!reversed);
            continue;
        }
        // What a run took there counts as offered: it was (the natural order or a branch).
        let offered = s.offered.entry(p.key.clone()).or_default();
        if !offered.contains(&p.source) {
            offered.push(p.source);
        }
        if p.candidates.len() < 2 {
            continue;
        }
        // With states, a reversal is told apart by the state it starts from (and a free
        // pick's own choice is this run's to explore); without, by its step only.
        let by_step = reversed && states.is_none();
        let fresh: Vec<(usize, i32)> = p
            .candidates
            .iter()
            .copied()
            .enumerate()
            .filter(|&(_, c)| c != p.source && !(by_step && offered.contains(&c)))
            .collect();
        offered.extend(fresh.iter().map(|&(_, c)| c));
        if !reversed {
            s.branch_points += 1;
            let own = p.candidates.iter().position(|&c| c == p.source).unwrap_or(0);
            if let Some(k) = states.and_then(|st| st.key(&kept(picks, i, own, linear), &p.key.0, p.source)) {
                s.states.insert(k);
            }
        }
        for &(c, alt) in fresh.iter().rev() {
            let mut next = kept(picks, i, c, linear);
            let key = states.and_then(|st| st.key(&next, &p.key.0, alt));
            if key.is_some_and(|k| !s.states.insert(k)) {
                s.merged += 1;
                continue;
            }
            next.insert(p.key.clone(), alt);
            stack.push(next);
            s.reversals += usize::from(reversed);
        }
    }
    unread
}

/// What a branch at pick `i` onto its candidate `c` keeps forced (see [`branch`]).
fn kept(picks: &[Pick], i: usize, c: usize, linear: bool) -> Schedule {
    let p = &picks[i];
    let needs = p.needs.get(c);
    picks
        .iter()
        .enumerate()
        .filter(|&(j, q)| {
            let kept = !linear
                || j < i
                || q.forced
                || needs.and_then(|n| n.get(&q.key.0)).is_some_and(|&n| q.key.1 < n);
            kept && j != i && q.source >= 0 && !p.after.contains(&j) && !q.after_pick(p)
        })
        .map(|(_, q)| (q.key.clone(), q.source))
        .collect()
}

/// One run in words: its forced picks and its outcome.
fn describe(n: usize, picks: &[Pick], forced: &Schedule, outcome: &Outcome) -> String {
    let chosen: Vec<String> = picks
        .iter()
        .filter(|p| p.candidates.len() > 1 || forced.contains_key(&p.key))
        .map(|p| {
            let how = if forced.contains_key(&p.key) {
                "forced"
            } else {
                "first"
            };
            let refused = p
                .refused
                .as_ref()
                .map_or(String::new(), |r| format!(" (refused: {r})"));
            format!(
                "{}'s receive #{} <- rank {} ({how}){refused}",
                p.key.0,
                p.key.1 + 1,
                p.source
            )
        })
        .collect();
    let picks = if chosen.is_empty() {
        "no choice".to_owned()
    } else {
        chosen.join(", ")
    };
    format!("run {n}: {picks} -> {}", outcome.words())
}

#[cfg(test)]
mod tests;
