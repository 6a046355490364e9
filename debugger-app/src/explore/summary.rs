//! What a search found: runs' outcomes, the distinct ones with their replay files and
//! the departures from the natural order that reach them, and the JSON line for scripts.

use super::{describe, Key, Pick, Run, Schedule};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

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
    /// The program died before it told what it did (a runtime program's run without a
    /// trace): how.
    Died(String),
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
            (Outcome::Died(a), Outcome::Died(b)) => a == b,
            (Outcome::Infeasible(a), Outcome::Infeasible(b)) => a == b,
            _ => false,
        }
    }
}

impl Outcome {
    pub(super) fn exit(code: Option<i32>, lines: &[String]) -> Self {
        let mut all: Vec<String> = lines.iter().map(|l| without_timing(l)).collect();
        let last = all.last().cloned().unwrap_or_default();
        all.sort_unstable();
        Outcome::Exit(code, last, all)
    }

    pub(super) fn to_json(&self) -> Value {
        match self {
            Outcome::Exit(code, line, _) => json!({"exit": code, "output": line}),
            Outcome::Deadlock(what) => json!({"deadlock": what}),
            Outcome::Timeout(s) => json!({"timeout_s": s}),
            Outcome::Died(how) => json!({"died": how}),
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
            Outcome::Died(how) => format!("died untraced: {how}"),
            Outcome::Infeasible(what) => format!("a forced pick could not be made (stuck: {what})"),
        }
    }

    pub(super) fn failed(&self) -> bool {
        !matches!(self, Outcome::Exit(Some(0), ..))
    }
}

/// A result line without what differs from run to run by timing alone: in a JSON
/// object, fields named for time (`elapsed_ms`, `time_s`, …).
pub(super) fn without_timing(line: &str) -> String {
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
    /// Runtime: a script for `racetrack replay FILE --gui --script STOP` that holds the
    /// replay (of this outcome's first run, `replay`, or the first run) at a departure's
    /// step: its first run's first departure.
    pub stop: Option<(PathBuf, Departure)>,
    /// The run that reached it first (counted from 1), and how long the walk had taken
    /// by its end.
    pub first_run: usize,
    pub first_s: f64,
}

/// A receive forced onto another sender than it took in the natural (first) run.
#[derive(Debug, Clone, PartialEq)]
pub struct Departure {
    pub key: Key,
    pub source: i32,
    /// The sender it took in the natural run.
    pub natural: i32,
    pub site: Option<String>,
    /// Runtime: the messages taken, here and in the natural run, in words.
    pub took: Option<(String, String)>,
    /// Runtime: the hit count of a breakpoint on any operation of the thread that holds
    /// its step there (in either run: the steps before are the same).
    pub hit: Option<u64>,
    /// Runtime: the picks a run forced to make it (its thread's steps before it, and
    /// those the message it took needed), as the run that departed made them.
    pub prefix: Schedule,
}

impl Departure {
    pub fn words(&self) -> String {
        if let Some((took, natural)) = &self.took {
            return format!(
                "{} ran {took} before {natural} (its step #{})",
                self.key.0,
                self.key.1 + 1
            );
        }
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
    /// Messages delivered after each run's forced picks, over all runs (runtime): what an
    /// explorer restoring states from checkpoints would deliver.
    pub fresh: Option<u64>,
    /// The distinct orderings run (runtime: what every thread took, hashed).
    pub orderings: HashSet<u64>,
    /// The states branches started from (runtime, see [`super::states`]), and the
    /// branches not taken because one started from an equal state before.
    pub states: HashSet<u64>,
    pub merged: usize,
    /// Runtime: every state a run reached after its forced picks, and the messages
    /// delivered up to (and with) the first that reached a state an earlier run had
    /// reached: what an explorer that restored states from checkpoints and stopped at
    /// known ones would deliver (the thesis counts its state graphs' so).
    pub reached: HashSet<u64>,
    pub delivered_new: Option<u64>,
    /// The senders branches were made onto (or a run took) at each key, whatever the
    /// prefix: a forced runtime pick branches onto the others only.
    pub offered: std::collections::HashMap<Key, Vec<i32>>,
    /// Branches made at picks a schedule forced (see `branch`).
    pub reversals: usize,
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
    /// The order the walk took schedules in.
    pub order: super::Order,
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
                    .map(|d| {
                        let mut o = json!({"thread": d.key.0, "receive": d.key.1, "source": d.source, "instead_of": d.natural, "site": d.site});
                        if let Some((took, natural)) = &d.took {
                            o["took"] = json!(took);
                            o["instead"] = json!(natural);
                        }
                        o
                    })
                    .collect();
                json!({
                    "result": f.outcome.to_json(),
                    "count": f.count,
                    "first_run": f.first_run,
                    "first_s": (f.first_s * 1000.0).round() / 1000.0,
                    "replay": f.replay,
                    "picks": forced,
                    "departures": f.minimal.len(),
                    "differs": f.minimal.first().map(Departure::words),
                    "ordering": ordering,
                    "ordering_replay": f.minimal_replay,
                    "stop_script": f.stop.as_ref().map(|(path, _)| path),
                    "stop_at": f.stop.as_ref().map(|(_, d)| json!({
                        "thread": d.key.0,
                        "step": d.key.1,
                        "took": d.took.as_ref().map(|t| &t.0),
                        "instead": d.took.as_ref().map(|t| &t.1),
                    })),
                })
            })
            .collect();
        json!({
            "event": "explored",
            "runs": self.runs,
            "shrink_runs": self.shrink_runs,
            "picks": self.picks,
            "branch_points": self.branch_points,
            "reversed_branches": self.reversals,
            "delivered": self.delivered,
            "delivered_after_forced": self.fresh,
            "orderings": (!self.orderings.is_empty()).then_some(self.orderings.len()),
            "states": (!self.states.is_empty()).then_some(self.states.len()),
            "delivered_to_new_states": self.delivered_new,
            "merged": self.merged,
            "unexplored": self.unexplored,
            "infeasible": self.infeasible,
            "outcomes": outcomes,
            "complete": self.complete,
            "stopped": self.stopped,
            "time_s": (self.time.as_secs_f64() * 10.0).round() / 10.0,
            "order": self.order.name(),
            "seed": match self.order {
                super::Order::Random(seed) => Some(seed),
                _ => None,
            },
        })
    }

    /// How a run's `picks` depart from the first run's (the natural order): the receives
    /// forced onto another sender (what follows from them is not counted); for a runtime
    /// program, each thread's first step forced onto another sender.
    pub fn against_first(&self, picks: &[Pick]) -> Vec<Departure> {
        let Some(first) = self.outcomes.first() else {
            return Vec::new();
        };
        let natural: BTreeMap<&Key, &Pick> = first.picks.iter().map(|p| (&p.key, p)).collect();
        // A runtime thread's later steps follow from its first departure: only that one
        // is one (the rest of the thread's order shifts with it).
        let mut departed: HashSet<&str> = HashSet::new();
        picks
            .iter()
            .filter(|p| p.forced)
            .filter_map(|p| {
                let n = natural.get(&p.key).filter(|n| n.source != p.source)?;
                if p.label.is_some() && !departed.insert(p.key.0.as_str()) {
                    return None;
                }
                Some(Departure {
                    key: p.key.clone(),
                    source: p.source,
                    natural: n.source,
                    site: p.site.clone(),
                    took: p.label.clone().zip(n.label.clone()),
                    hit: p.label.is_some().then_some(p.starts + 1),
                    prefix: if p.label.is_some() {
                        needed(picks, p)
                    } else {
                        Schedule::new()
                    },
                })
            })
            .collect()
    }

    /// Take in run `r` of schedule `forced`: its counts, its branches (onto `stack`), its
    /// outcome (see [`Summary::count`]).
    pub(super) fn absorb(
        &mut self,
        r: Run,
        (forced, file): (&Schedule, PathBuf),
        t0: std::time::Instant,
        say: &mut impl FnMut(Note),
    ) {
        self.runs += 1;
        self.delivered += r.delivered;
        if let Some(n) = r.fresh {
            *self.fresh.get_or_insert(0) += n;
        }
        if let Some(o) = r.ordering {
            self.orderings.insert(o);
        }
        if let Some(st) = &r.states {
            let n = new_states(st, &r.picks, &mut self.reached);
            *self.delivered_new.get_or_insert(0) += n;
        }
        self.unexplored += r.unexplored;
        self.picks += r.picks.len();
        let line = if r.picks.iter().any(|p| p.label.is_some()) {
            self.describe_steps(&r)
        } else {
            describe(self.runs, &r.picks, forced, &r.outcome)
        };
        say(Note::Run(&line));
        self.infeasible += r.picks.iter().filter(|p| p.refused.is_some()).count();
        if matches!(r.outcome, Outcome::Infeasible(_)) {
            self.infeasible += 1;
            let _ = std::fs::remove_file(&file);
            return;
        }
        if r.dropped && self.stopped.is_none() {
            self.stopped = Some("the message graph was full: later receives were not read".into());
        }
        self.count(r, file, t0.elapsed().as_secs_f64());
    }

    /// A runtime program's run in words: how it departs from the first run (the natural
    /// order), and its outcome.
    fn describe_steps(&self, r: &Run) -> String {
        let forced = r.picks.iter().filter(|p| p.forced).count();
        let departures = self.against_first(&r.picks);
        let how = match departures.split_first() {
            None if forced == 0 => "the natural order".to_owned(),
            None => format!("{forced} steps forced as the first run took them"),
            Some((d, rest)) => {
                let more = match rest.len() {
                    0 => String::new(),
                    n => format!(" (and {n} more departures)"),
                };
                format!("{}{more}", d.words())
            }
        };
        format!("run {}: {how} -> {}", self.runs, r.outcome.words())
    }

    /// Count a run's outcome: a new one keeps its scenario `file`, a known one does not.
    fn count(&mut self, r: Run, file: PathBuf, elapsed: f64) {
        match self.outcomes.iter_mut().find(|f| f.outcome == r.outcome) {
            Some(f) => {
                f.count += 1;
                let _ = std::fs::remove_file(&file);
            }
            None => {
                let minimal = self.against_first(&r.picks);
                let stop = minimal
                    .first()
                    .filter(|_| r.saved)
                    .and_then(|d| Some((stop_script(d, &file)?, d.clone())));
                let kept = r.saved.then_some(file);
                self.outcomes.push(Found {
                    outcome: r.outcome,
                    count: 1,
                    minimal_replay: kept.clone().filter(|_| !minimal.is_empty()),
                    replay: kept,
                    picks: r.picks,
                    minimal,
                    stop,
                    first_run: self.runs,
                    first_s: elapsed,
                });
            }
        }
    }

    /// Whether every run exited 0 with one result.
    pub fn clean(&self) -> bool {
        self.outcomes.len() == 1 && self.outcomes.iter().all(|f| !f.outcome.failed())
    }
}

/// The messages run `picks` delivered after its forced ones, in the run's order, up to
/// and with the first that led to a state in `reached` (each new state is added).
fn new_states(st: &super::states::States, picks: &[Pick], reached: &mut HashSet<u64>) -> u64 {
    let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
    for p in picks.iter().filter(|p| p.forced) {
        *counts.entry(p.key.0.as_str()).or_default() += 1;
    }
    let mut n = 0;
    for p in picks.iter().filter(|p| !p.forced) {
        *counts.entry(p.key.0.as_str()).or_default() += 1;
        n += 1;
        match st.at(&counts) {
            Some(h) if reached.insert(h) => {}
            _ => break,
        }
    }
    n
}

/// What runtime pick `p` of `picks` needs forced to be made again: its thread's steps
/// before it, and those before the step that sent the message it took.
fn needed(picks: &[Pick], p: &Pick) -> Schedule {
    let sent = p
        .candidates
        .iter()
        .position(|&c| c == p.source)
        .and_then(|c| p.needs.get(c));
    picks
        .iter()
        .filter(|q| {
            (q.key.0 == p.key.0 && q.key.1 < p.key.1)
                || sent.and_then(|n| n.get(&q.key.0)).is_some_and(|&n| q.key.1 < n)
        })
        .map(|q| (q.key.clone(), q.source))
        .collect()
}

/// Write, beside a run's replay file `file`, the script that breaks on departure `d`'s
/// step (a runtime program's): every operation of its thread, at its step start's count.
fn stop_script(d: &Departure, file: &std::path::Path) -> Option<PathBuf> {
    let hit = d.hit?;
    let path = file.with_extension("stop.jsonl");
    let lines = [
        json!({"cmd": "break", "op": "*", "thread": d.key.0, "on": true, "hit": hit}),
        json!({"cmd": "continue"}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, text).ok()?;
    Some(path)
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
