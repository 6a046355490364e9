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
mod trail;

use crate::mpirun::Plan;
use serde_json::{json, Value};
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
    while let Some(forced) = stack.pop() {
        if !tried.insert(forced.clone().into_iter().collect()) {
            continue;
        }
        if s.runs >= opts.max_runs {
            s.stopped = Some(format!("--max-runs {} reached", opts.max_runs));
            break;
        }
        if t0.elapsed() >= opts.budget {
            s.stopped = Some(format!("--budget-s {} spent", opts.budget.as_secs()));
            break;
        }
        say(Note::Progress(Progress {
            runs: s.runs,
            pending: stack.len() + 1,
            outcomes: s.outcomes.len(),
            elapsed: t0.elapsed(),
        }));
        let file = opts.out.join(format!("run-{}.rtrec", s.runs + 1));
        let r = match run::run(plan, &forced, opts.run_limit, &file) {
            Ok(r) => r,
            // What was found so far stands; the walk stops here.
            Err(e) => {
                s.stopped = Some(format!("run {} could not be made: {e}", s.runs + 1));
                break;
            }
        };
        s.runs += 1;
        s.delivered += r.delivered;
        s.unexplored += r.unexplored;
        s.picks += r.picks.len();
        say(Note::Run(&describe(s.runs, &r.picks, &forced, &r.outcome)));
        s.infeasible += r.picks.iter().filter(|p| p.refused.is_some()).count();
        if matches!(r.outcome, Outcome::Infeasible(_)) {
            s.infeasible += 1;
            let _ = std::fs::remove_file(&file);
            continue;
        }
        s.unexplored += branch(&r.picks, &forced, &mut stack, &mut s.branch_points);
        if r.dropped && s.stopped.is_none() {
            s.stopped = Some("the message graph was full: later receives were not read".into());
        }
        s.count(r, file);
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

/// Shrink the departures that reach each outcome but the natural run's, within the time
/// budget: the runs it makes are counted apart (`shrink_runs`).
fn shrink_all(plan: &Plan, opts: &Options, s: &mut Summary, t0: Instant, say: &mut impl FnMut(Note)) {
    for i in 1..s.outcomes.len() {
        if s.outcomes[i].minimal.len() < 2 || matches!(s.outcomes[i].outcome, Outcome::Timeout(_)) {
            continue;
        }
        let target = s.outcomes[i].outcome.clone();
        let mut smallest: Option<PathBuf> = None;
        let mut runs = 0;
        let kept = shrink(s.outcomes[i].minimal.clone(), |trial| {
            if t0.elapsed() >= opts.budget {
                return None;
            }
            runs += 1;
            let file = opts.out.join(format!("shrink-{}-{runs}.rtrec", i + 1));
            let schedule: BTreeMap<Key, i32> = trial.iter().map(|d| (d.key.clone(), d.source)).collect();
            let r = run::run(plan, &schedule, opts.run_limit, &file).ok()?;
            let reached = r.outcome == target;
            say(Note::Run(&format!(
                "shrinking outcome {}: {} departures -> {}",
                i + 1,
                trial.len(),
                if reached {
                    "same outcome"
                } else {
                    "another outcome"
                }
            )));
            if reached && r.saved {
                if let Some(old) = smallest.replace(file) {
                    let _ = std::fs::remove_file(old);
                }
            } else {
                let _ = std::fs::remove_file(&file);
            }
            Some(reached)
        });
        s.shrink_runs += runs;
        let f = &mut s.outcomes[i];
        if kept.len() < f.minimal.len() {
            f.minimal = kept;
            f.minimal_replay = smallest;
        } else if let Some(unused) = smallest {
            let _ = std::fs::remove_file(unused);
        }
    }
}

/// The fewest departures found that still reach an outcome: each in turn is left out
/// (its receive left to MPI), and stays out when `reaches` says the rest still reach it
/// (`None`: stop, the budget is spent). One run per departure, so a local minimum: no
/// single departure left can go.
fn shrink(mut kept: Vec<Departure>, mut reaches: impl FnMut(&[Departure]) -> Option<bool>) -> Vec<Departure> {
    let mut i = 0;
    while i < kept.len() && kept.len() > 1 {
        let trial: Vec<Departure> = kept
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .map(|(_, d)| d.clone())
            .collect();
        match reaches(&trial) {
            Some(true) => kept = trial,
            Some(false) => i += 1,
            None => break,
        }
    }
    kept
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
mod tests {
    use super::*;

    #[test]
    fn results_are_compared_without_their_timing() {
        let a = without_timing(r#"{"program":"mergesort","matches_reference":true,"elapsed_ms":3.2}"#);
        let b = without_timing(r#"{"program":"mergesort","matches_reference":true,"elapsed_ms":9.7}"#);
        assert_eq!(a, b);
        assert!(a.contains("matches_reference"));
        assert_eq!(without_timing("  sorted 4000 numbers "), "sorted 4000 numbers");
        let lines = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(Outcome::exit(Some(1), &lines(&["x"])).failed());
        assert!(!Outcome::exit(Some(0), &lines(&["x"])).failed());
        // The ranks' lines in another order: the same outcome, and the last line shown.
        let a = Outcome::exit(Some(0), &lines(&["rank 1 done", "rank 2 done"]));
        let b = Outcome::exit(Some(0), &lines(&["rank 2 done", "rank 1 done"]));
        assert_eq!(a, b);
        assert_ne!(a, Outcome::exit(Some(0), &lines(&["rank 1 done"])));
    }

    fn departure(rank: u32, source: i32) -> Departure {
        Departure {
            key: (format!("rank[{rank}]"), 0),
            source,
            natural: 0,
            site: None,
        }
    }

    #[test]
    fn shrinking_keeps_only_the_departures_that_matter() {
        // An outcome reached whenever rank 2's receive departs, whatever the others do.
        let all = vec![departure(1, 3), departure(2, 3), departure(3, 1)];
        let mut tried = 0;
        let kept = shrink(all.clone(), |trial| {
            tried += 1;
            Some(trial.iter().any(|d| d.key.0 == "rank[2]"))
        });
        assert_eq!(kept, vec![departure(2, 3)]);
        assert_eq!(tried, 3, "one run per departure left out");
        // Two departures needed together: neither goes.
        let kept = shrink(all.clone(), |trial| {
            Some(trial.iter().filter(|d| d.key.0 != "rank[3]").count() == 2)
        });
        assert_eq!(kept, vec![departure(1, 3), departure(2, 3)]);
        // The budget spent at once: nothing shrinks.
        assert_eq!(shrink(all.clone(), |_| None), all);
    }
}
