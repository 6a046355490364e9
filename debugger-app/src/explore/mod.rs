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
//! `racetrack replay FILE -- PROGRAM ARGS` plays again.

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
    /// Each distinct outcome: how many runs, its scenario, the picks that led there.
    pub outcomes: Vec<(Outcome, usize, Option<PathBuf>, Vec<Pick>)>,
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
            .map(|(o, n, file, picks)| {
                let forced: Vec<Value> = picks
                    .iter()
                    .filter(|p| p.candidates.len() > 1)
                    .map(|p| json!({"thread": p.key.0, "receive": p.key.1, "source": p.source, "site": p.site}))
                    .collect();
                let (departures, differs) = self.against_first(picks);
                json!({
                    "result": o.to_json(),
                    "count": n,
                    "replay": file,
                    "picks": forced,
                    "departures": departures,
                    "differs": differs,
                })
            })
            .collect();
        json!({
            "event": "explored",
            "runs": self.runs,
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

    /// How a run's `picks` depart from the first run's (the natural order): how many
    /// receives were forced onto another sender (what follows from them is not counted),
    /// and the first of them in words.
    pub fn against_first(&self, picks: &[Pick]) -> (usize, Option<String>) {
        let Some((_, _, _, first)) = self.outcomes.first() else {
            return (0, None);
        };
        let natural: BTreeMap<&Key, i32> = first.iter().map(|p| (&p.key, p.source)).collect();
        let departed: Vec<(&Pick, i32)> = picks
            .iter()
            .filter(|p| p.forced)
            .filter_map(|p| natural.get(&p.key).filter(|&&s| s != p.source).map(|&s| (p, s)))
            .collect();
        let words = departed.first().map(|(p, s)| {
            let at = p.site.as_deref().map_or(String::new(), |s| format!(" at {s}"));
            format!(
                "{}'s receive #{}{at} matched rank {} instead of rank {s}",
                p.key.0,
                p.key.1 + 1,
                p.source
            )
        });
        (departed.len(), words)
    }

    /// Whether every run exited 0 with one result.
    pub fn clean(&self) -> bool {
        self.outcomes.len() == 1 && self.outcomes.iter().all(|(o, ..)| !o.failed())
    }
}

/// Explore the job of `plan`; `say` hears of each run.
pub fn explore_mpi(plan: &Plan, opts: &Options, mut say: impl FnMut(&str)) -> anyhow::Result<Summary> {
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
        say(&describe(s.runs, &r.picks, &forced, &r.outcome));
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
        match s.outcomes.iter_mut().find(|(o, ..)| *o == r.outcome) {
            Some((_, n, ..)) => {
                *n += 1;
                let _ = std::fs::remove_file(&file);
            }
            None => {
                let kept = r.saved.then(|| file.clone());
                s.outcomes.push((r.outcome, 1, kept, r.picks));
            }
        }
    }
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
}
