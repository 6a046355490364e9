//! `racetrack explore --mpi`: find the outcomes a job's wildcard receives can lead to,
//! by running it again and again with other matches forced.
//!
//! Each run holds every wildcard receive (race mode, [`run`]): those its schedule names
//! are forced, the others left to MPI. A pick is keyed by its receive, `rank[R]`'s Nth
//! wildcard receive, so a schedule means the same in every run however the ranks
//! interleave. After a run, each receive's alternatives are read off it (the senders
//! whose next send to that rank does not happen after the receive was posted). The
//! search is a depth-first walk over schedules, restoring a state by re-executing from
//! the start with the schedule's picks forced (an MPI job cannot be checkpointed from
//! outside; a re-run costs its start-up, under a second here): every receive a run left
//! to MPI adds a branch per other sender it could have taken, with every other receive
//! forced as it went but those posted after it completed. The walk is complete when every
//! branch ran and every forced pick could be made; `--max-runs` and `--budget-s` bound it.
//!
//! Outcomes are the program's exit code and everything it printed (as a multiset, timing
//! fields left out), a deadlock (as the job's debugger names it), or a run over its time
//! limit. Each distinct outcome keeps the scenario of its first run when one could be
//! saved (every rank alive, or every rank past `MPI_Finalize`), which
//! `racetrack replay FILE -- PROGRAM ARGS` plays again. Once the walk is over, each
//! outcome reached through several departures from the natural order is shrunk
//! ([`shrink`]): the fewest departures found to reach it.

mod run;
mod shrink;
mod trail;

use crate::mpirun::Plan;
use serde_json::{json, Value};
use shrink::shrink_all;
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A wildcard receive across runs: its thread and how many it made before.
pub type Key = (String, u32);

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
}

/// How a run ended. Two exits are the same outcome when their codes and everything
/// printed are, whatever the last line.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The job exited: the launcher's code, the program's last output line, and what it
    /// printed in all, as a multiset: the ranks' lines interleave differently from run
    /// to run, so their order does not tell outcomes apart.
    Exit(Option<i32>, String, Vec<String>),
    /// The job deadlocked: who waits for whom.
    Deadlock(String),
    /// Still running at the run's limit (seconds).
    Timeout(u64),
    /// Stuck while a forced receive waited for a source that never sent: the schedule
    /// could not be followed (not an outcome of the program).
    Infeasible(String),
}

impl PartialEq for Outcome {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Outcome::Exit(a, _, x), Outcome::Exit(b, _, y)) => a == b && x == y,
            (Outcome::Deadlock(a), Outcome::Deadlock(b)) => a == b,
            (Outcome::Timeout(a), Outcome::Timeout(b)) => a == b,
            (Outcome::Infeasible(a), Outcome::Infeasible(b)) => a == b,
            _ => false,
        }
    }
}

impl Outcome {
    fn exit(code: Option<i32>, lines: &[String]) -> Self {
        let mut all: Vec<String> = lines.iter().map(|l| without_timing(l)).collect();
        let last = all.last().cloned().unwrap_or_default();
        all.sort_unstable();
        Outcome::Exit(code, last, all)
    }

    fn to_json(&self) -> Value {
        match self {
            Outcome::Exit(code, line, _) => json!({"exit": code, "output": line}),
            Outcome::Deadlock(what) => json!({"deadlock": what}),
            Outcome::Timeout(s) => json!({"timeout_s": s}),
            Outcome::Infeasible(what) => json!({"infeasible": what}),
        }
    }

    pub fn words(&self) -> String {
        match self {
            Outcome::Exit(code, line, _) => format!(
                "exit {}: {line}",
                code.map_or("(signal)".to_owned(), |c| c.to_string())
            ),
            Outcome::Deadlock(what) => format!("deadlock: {what}"),
            Outcome::Timeout(s) => format!("still running after {s} s"),
            Outcome::Infeasible(what) => format!("a forced pick could not be made (stuck: {what})"),
        }
    }

    fn failed(&self) -> bool {
        !matches!(self, Outcome::Exit(Some(0), ..))
    }
}

/// A result line without what differs from run to run by timing alone: in a JSON
/// object, fields named for time (`elapsed_ms`, `time_s`, …).
fn without_timing(line: &str) -> String {
    match serde_json::from_str::<Value>(line) {
        Ok(Value::Object(mut o)) => {
            o.retain(|k, _| {
                let k = k.to_ascii_lowercase();
                !(k.contains("elapsed")
                    || k.contains("time")
                    || k.ends_with("_ms")
                    || k.ends_with("_s")
                    || k.ends_with("per_s"))
            });
            Value::Object(o).to_string()
        }
        _ => line.trim().to_owned(),
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
}

/// A distinct outcome: how many runs reached it, its scenario, the picks of its first run,
/// and the fewest departures from the natural order found to reach it.
#[derive(Debug)]
pub struct Found {
    pub outcome: Outcome,
    pub count: usize,
    pub replay: Option<PathBuf>,
    pub picks: Vec<Pick>,
    /// The departures of a run that reached it, as few as shrinking found (all of its
    /// first run's when it was not shrunk), and that run's scenario.
    pub minimal: Vec<Departure>,
    pub minimal_replay: Option<PathBuf>,
}

/// A receive forced onto another sender than it took in the natural (first) run.
#[derive(Debug, Clone, PartialEq)]
pub struct Departure {
    pub key: Key,
    pub source: i32,
    /// The sender it took in the natural run.
    pub natural: i32,
    pub site: Option<String>,
}

impl Departure {
    pub fn words(&self) -> String {
        let at = self.site.as_deref().map_or(String::new(), |s| format!(" at {s}"));
        format!(
            "{}'s receive #{}{at} matched rank {} instead of rank {}",
            self.key.0,
            self.key.1 + 1,
            self.source,
            self.natural
        )
    }
}

/// What a search found.
#[derive(Debug)]
pub struct Summary {
    pub runs: usize,
    /// Picks made over all runs, and how many had a choice.
    pub picks: usize,
    pub branch_points: usize,
    pub delivered: u64,
    /// Wildcard receives not explored, over all runs (polls, or ones not read).
    pub unexplored: u64,
    /// Forced picks a rank refused, or that left a receive waiting for good.
    pub infeasible: usize,
    /// Each distinct outcome, the natural run's first.
    pub outcomes: Vec<Found>,
    /// Runs made to shrink the orderings that reach an outcome (see [`shrink`]).
    pub shrink_runs: usize,
    pub complete: bool,
    /// Why not complete.
    pub stopped: Option<String>,
    pub time: Duration,
}

impl Summary {
    /// The JSON line for scripts.
    pub fn to_json(&self) -> Value {
        let outcomes: Vec<Value> = self
            .outcomes
            .iter()
            .map(|f| {
                let forced: Vec<Value> = f
                    .picks
                    .iter()
                    .filter(|p| p.candidates.len() > 1)
                    .map(|p| json!({"thread": p.key.0, "receive": p.key.1, "source": p.source, "site": p.site}))
                    .collect();
                let ordering: Vec<Value> = f
                    .minimal
                    .iter()
                    .map(|d| json!({"thread": d.key.0, "receive": d.key.1, "source": d.source, "instead_of": d.natural, "site": d.site}))
                    .collect();
                json!({
                    "result": f.outcome.to_json(),
                    "count": f.count,
                    "replay": f.replay,
                    "picks": forced,
                    "departures": f.minimal.len(),
                    "differs": f.minimal.first().map(Departure::words),
                    "ordering": ordering,
                    "ordering_replay": f.minimal_replay,
                })
            })
            .collect();
        json!({
            "event": "explored",
            "runs": self.runs,
            "shrink_runs": self.shrink_runs,
            "picks": self.picks,
            "branch_points": self.branch_points,
            "delivered": self.delivered,
            "unexplored": self.unexplored,
            "infeasible": self.infeasible,
            "outcomes": outcomes,
            "complete": self.complete,
            "stopped": self.stopped,
            "time_s": (self.time.as_secs_f64() * 10.0).round() / 10.0,
        })
    }

    /// How a run's `picks` depart from the first run's (the natural order): the receives
    /// forced onto another sender (what follows from them is not counted).
    pub fn against_first(&self, picks: &[Pick]) -> Vec<Departure> {
        let Some(first) = self.outcomes.first() else {
            return Vec::new();
        };
        let natural: BTreeMap<&Key, i32> = first.picks.iter().map(|p| (&p.key, p.source)).collect();
        picks
            .iter()
            .filter(|p| p.forced)
            .filter_map(|p| {
                let &n = natural.get(&p.key).filter(|&&s| s != p.source)?;
                Some(Departure {
                    key: p.key.clone(),
                    source: p.source,
                    natural: n,
                    site: p.site.clone(),
                })
            })
            .collect()
    }

    /// Take in run `r` of schedule `forced`: its counts, its branches (onto `stack`), its
    /// outcome (see [`Summary::count`]).
    fn absorb(
        &mut self,
        r: run::Run,
        (forced, file): (&BTreeMap<Key, i32>, PathBuf),
        stack: &mut Vec<BTreeMap<Key, i32>>,
        say: &mut impl FnMut(Note),
    ) {
        self.runs += 1;
        self.delivered += r.delivered;
        self.unexplored += r.unexplored;
        self.picks += r.picks.len();
        say(Note::Run(&describe(self.runs, &r.picks, forced, &r.outcome)));
        self.infeasible += r.picks.iter().filter(|p| p.refused.is_some()).count();
        if matches!(r.outcome, Outcome::Infeasible(_)) {
            self.infeasible += 1;
            let _ = std::fs::remove_file(&file);
            return;
        }
        self.unexplored += branch(&r.picks, forced, stack, &mut self.branch_points);
        if r.dropped && self.stopped.is_none() {
            self.stopped = Some("the message graph was full: later receives were not read".into());
        }
        self.count(r, file);
    }

    /// Count a run's outcome: a new one keeps its scenario `file`, a known one does not.
    fn count(&mut self, r: run::Run, file: PathBuf) {
        match self.outcomes.iter_mut().find(|f| f.outcome == r.outcome) {
            Some(f) => {
                f.count += 1;
                let _ = std::fs::remove_file(&file);
            }
            None => {
                let minimal = self.against_first(&r.picks);
                let kept = r.saved.then_some(file);
                self.outcomes.push(Found {
                    outcome: r.outcome,
                    count: 1,
                    minimal_replay: kept.clone().filter(|_| !minimal.is_empty()),
                    replay: kept,
                    picks: r.picks,
                    minimal,
                });
            }
        }
    }

    /// Whether every run exited 0 with one result.
    pub fn clean(&self) -> bool {
        self.outcomes.len() == 1 && self.outcomes.iter().all(|f| !f.outcome.failed())
    }
}

/// Where a search stands, for a progress bar: told after each run.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub runs: usize,
    /// Schedules waiting to run (an upper bound of what is left: some repeat).
    pub pending: usize,
    pub outcomes: usize,
    pub elapsed: Duration,
}

/// What a search tells as it goes: each run in words, and where it stands.
pub enum Note<'a> {
    Run(&'a str),
    Progress(Progress),
}

/// Explore the job of `plan`; `say` hears of each run.
pub fn explore_mpi(plan: &Plan, opts: &Options, mut say: impl FnMut(Note)) -> anyhow::Result<Summary> {
    std::fs::create_dir_all(&opts.out)?;
    let t0 = Instant::now();
    let mut stack: Vec<BTreeMap<Key, i32>> = vec![BTreeMap::new()];
    let mut tried: HashSet<Vec<(Key, i32)>> = HashSet::new();
    let mut s = Summary {
        runs: 0,
        picks: 0,
        branch_points: 0,
        delivered: 0,
        unexplored: 0,
        infeasible: 0,
        outcomes: Vec::new(),
        shrink_runs: 0,
        complete: false,
        stopped: None,
        time: Duration::ZERO,
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
        let results = run_all(plan, opts, &batch);
        for ((forced, file), r) in batch.into_iter().zip(results) {
            match r {
                Ok(r) => s.absorb(r, (&forced, file), &mut stack, &mut say),
                // What was found so far stands; the walk stops here.
                Err(e) => {
                    ended = true;
                    s.stopped = Some(format!("run {} could not be made: {e}", s.runs + 1));
                }
            }
        }
    }
    shrink_all(plan, opts, &mut s, t0, &mut say);
    if s.stopped.is_none() && s.unexplored > 0 {
        s.stopped = Some(format!(
            "{} wildcard receives or probes were not explored (polls, or what they took was not told)",
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

/// The next schedules to run, at most `--jobs` of them: the stack's latest ones not run
/// yet, each with its scenario's file; none when the walk is over or a budget is spent
/// (then `s.stopped` says which).
fn next_batch(
    stack: &mut Vec<BTreeMap<Key, i32>>,
    tried: &mut HashSet<Vec<(Key, i32)>>,
    opts: &Options,
    s: &mut Summary,
    t0: Instant,
) -> Vec<(BTreeMap<Key, i32>, PathBuf)> {
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
            stack.push(forced);
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

/// The latest schedule on `stack` not run yet.
fn pop_untried(
    stack: &mut Vec<BTreeMap<Key, i32>>,
    tried: &HashSet<Vec<(Key, i32)>>,
) -> Option<BTreeMap<Key, i32>> {
    while let Some(forced) = stack.pop() {
        if !tried.contains(&forced.clone().into_iter().collect::<Vec<_>>()) {
            return Some(forced);
        }
    }
    None
}

/// Run each schedule of `batch`, side by side when there are several (each run is its
/// own job, with its own listener and scenario file); results in the batch's order.
fn run_all(
    plan: &Plan,
    opts: &Options,
    batch: &[(BTreeMap<Key, i32>, PathBuf)],
) -> Vec<anyhow::Result<run::Run>> {
    if let [(forced, file)] = batch {
        return vec![run::run(plan, forced, opts.run_limit, file)];
    }
    std::thread::scope(|sc| {
        let runs: Vec<_> = batch
            .iter()
            .map(|(forced, file)| sc.spawn(move || run::run(plan, forced, opts.run_limit, file)))
            .collect();
        runs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("the run's thread panicked")))
            })
            .collect()
    })
}

/// The branches a run adds: for each receive MPI matched freely, one per other sender it
/// could have taken, with every other receive forced as it went, but those posted after
/// it completed (what they take may follow from its match). Returns the free receives
/// that could not be read (no match told, or no call in the graph): left unexplored.
fn branch(
    picks: &[Pick],
    forced: &BTreeMap<Key, i32>,
    stack: &mut Vec<BTreeMap<Key, i32>>,
    points: &mut usize,
) -> u64 {
    let mut unread = 0;
    for (i, p) in picks.iter().enumerate() {
        if forced.contains_key(&p.key) {
            continue;
        }
        // Not read (no call in the graph), or never matched though a message was there.
        if !p.known || (p.source < 0 && !p.candidates.is_empty()) {
            unread += 1;
            continue;
        }
        if p.candidates.len() < 2 {
            continue;
        }
        *points += 1;
        let prefix: BTreeMap<Key, i32> = picks
            .iter()
            .enumerate()
            .filter(|&(j, q)| j != i && q.source >= 0 && !p.after.contains(&j))
            .map(|(_, q)| (q.key.clone(), q.source))
            .collect();
        for &alt in p.candidates.iter().rev().filter(|&&c| c != p.source) {
            let mut next = prefix.clone();
            next.insert(p.key.clone(), alt);
            stack.push(next);
        }
    }
    unread
}

/// One run in words: its forced picks and its outcome.
fn describe(n: usize, picks: &[Pick], forced: &BTreeMap<Key, i32>, outcome: &Outcome) -> String {
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
