//! One run of a program on Racetrack's runtime under the explorer.
//!
//! The schedule goes to the program as a replay log (`RACETRACK_REPLAY`) that names, for
//! each thread, the senders of its first steps' messages: the replay engine (the choice
//! point's) makes each thread take those, then lets it run free. The run writes a trace
//! (`RACETRACK_TRACE`), from which [`steps`](super::steps) reads what every step took and
//! happens-before; nothing is held and no debugger connects. With merging on, the agent
//! also hashes every message's content and each step's state (`RACETRACK_DIGEST`),
//! which costs a serialization per send and per step. A forced sender whose message never comes stalls the replay, which then
//! ends the program with its divergence exit code: the schedule could not be followed.
//!
//! Every step on a message is a pick: its key the thread and the step's number, its
//! value the sender's code; its candidates the senders whose next message to the thread
//! was not sent after the step (see [`Steps::candidates`]).

use super::states;
use super::steps::{self, Steps, UNKNOWN};
use super::{Options, Outcome, Pick, Run, Runner, Schedule};
use anyhow::Context as _;
use racetrack_protocol::launch as env;
use racetrack_protocol::replay_log::{self as log, LogHeader};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The replay's exit code when it could not follow its log (the agent's `EXIT_DIVERGED`).
const EXIT_DIVERGED: i32 = 3;

/// How long a forced thread waits, with the whole program stalled, before the replay
/// gives up on its sender.
const STALL_MS: &str = "1000";

/// The most output lines kept of one run (what it printed past them is not compared).
const MAX_LINES: usize = 10_000;

/// How a run ended: its exit code (`Err`: ended at its time limit), and its lines on
/// stdout and stderr.
type Ended = (Result<Option<i32>, ()>, Vec<String>, Vec<String>);

/// A program to explore and its arguments.
#[derive(Debug, Clone)]
pub struct Program {
    pub program: PathBuf,
    pub args: Vec<String>,
}

/// A runtime program's runs.
pub(super) struct Flow<'a> {
    program: &'a Program,
    limit: Duration,
    merge: bool,
    /// The program's threads by global index, as its first run had them.
    names: Mutex<Vec<String>>,
}

impl<'a> Flow<'a> {
    pub(super) fn new(program: &'a Program, opts: &Options) -> Self {
        Self {
            program,
            limit: opts.run_limit,
            merge: opts.merge,
            names: Mutex::new(Vec::new()),
        }
    }

    fn header(&self) -> LogHeader {
        LogHeader {
            program: self.program.program.display().to_string(),
            args: self.program.args.clone(),
            mpi: None,
        }
    }

    /// Start the program with its trace and digests going to `files`, following
    /// `schedule` if any; wait for it (at most the run's limit): its exit code (`Err`:
    /// ended at the limit) and what it printed on stdout and stderr.
    fn spawn(&self, (trace, digest): (&Path, &Path), schedule: Option<&PathBuf>) -> anyhow::Result<Ended> {
        let mut cmd = Command::new(&self.program.program);
        cmd.args(&self.program.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for var in [
            env::ENV_LISTEN,
            env::ENV_CONNECT,
            env::ENV_WAIT,
            env::ENV_RECORD,
            env::ENV_REPLAY,
            env::ENV_DIGEST,
        ] {
            cmd.env_remove(var);
        }
        cmd.env(env::ENV_TRACE, trace)
            .env(env::ENV_REPLAY_STALL_MS, STALL_MS);
        if let Some(schedule) = schedule {
            cmd.env(env::ENV_REPLAY, schedule);
        }
        if self.merge {
            cmd.env(env::ENV_DIGEST, digest);
        }
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", self.program.program.display()))?;
        let out = lines_of(child.stdout.take());
        let err = lines_of(child.stderr.take());
        let code = wait(&mut child, self.limit);
        Ok((code, joined(out), joined(err)))
    }

    /// Keep the longest list of threads the runs had (a later run may build more).
    fn learn_names(&self, seen: &[String]) {
        if let Ok(mut names) = self.names.lock() {
            if seen.len() > names.len() && seen.starts_with(&names) {
                *names = seen.to_vec();
            }
        }
    }

    /// The schedule as a replay log at `path`; `false` when it forces nothing.
    fn write_schedule(&self, forced: &Schedule, path: &Path) -> anyhow::Result<bool> {
        if forced.is_empty() {
            return Ok(false);
        }
        let names = self.names.lock().map(|n| n.clone()).unwrap_or_default();
        let prefixes = steps::prefixes(&names, forced).map_err(anyhow::Error::msg)?;
        let mut out = racetrack_protocol::replay_log::header_bytes(&self.header());
        for (g, senders) in prefixes.iter().enumerate() {
            if senders.is_empty() {
                // Named all the same: a thread past the log's last would be one the
                // recorded run did not have, a divergence.
                racetrack_protocol::replay_log::put_runs_record(&mut out, g, 0, &[]);
            }
            steps::put_thread(&mut out, g, senders);
        }
        std::fs::write(path, out).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(true)
    }
}

impl Runner for Flow<'_> {
    fn run(&self, forced: &Schedule, file: &Path) -> anyhow::Result<Run> {
        let trace = file.with_extension("rtrace");
        let digest = file.with_extension("digest");
        let schedule = file.with_extension("schedule.rtrec");
        let replaying = self.write_schedule(forced, &schedule)?;
        let spawned = self.spawn((&trace, &digest), replaying.then_some(&schedule));
        let _ = std::fs::remove_file(&schedule);
        let (code, out, err) = spawned?;
        let read = steps::read(&trace);
        let _ = std::fs::remove_file(&trace);
        let first = self.names.lock().map_or(true, |n| n.is_empty());
        let (s, outcome) = match read {
            Ok(s) => {
                let outcome = outcome_of(code, self.limit, &s, &out, &err);
                (s, outcome)
            }
            // The program's first run: not a program on the runtime, most likely.
            Err(e) if first => {
                let _ = std::fs::remove_file(&digest);
                anyhow::bail!(
                    "{} wrote no readable trace ({e}; {}): is it a program on Racetrack's runtime?",
                    self.program.program.display(),
                    ended(code, &err)
                )
            }
            // A later run that died before its trace was written: an outcome, with
            // nothing to branch on, nor to replay.
            Err(e) => (
                Steps::default(),
                Outcome::Died(format!("{} (its trace: {e})", ended(code, &err))),
            ),
        };
        self.learn_names(&s.names);
        let finished = matches!(outcome, Outcome::Exit(..)) && !s.unknown;
        let saved = !matches!(outcome, Outcome::Died(_))
            && std::fs::write(file, s.log(&self.header(), finished)).is_ok();
        let (picks, unexplored) = picks(&s, forced);
        let fresh = picks.iter().filter(|p| !p.forced).count() as u64;
        let (delivered, ordering) = (s.delivered(), s.ordering());
        // Only a run that ended by itself wrote every digest; and only one whose every
        // step the explorer can place has states it can compare.
        let comparable = finished && !s.nested && !s.late_final;
        let states = match (self.merge, comparable) {
            (true, true) => states::read(&digest, s).map(Box::new),
            _ => None,
        };
        let _ = std::fs::remove_file(&digest);
        Ok(Run {
            outcome,
            delivered,
            fresh: Some(fresh),
            unexplored,
            dropped: false,
            saved,
            ordering: Some(ordering),
            picks,
            states,
        })
    }

    fn linear(&self) -> bool {
        true
    }

    fn shrinks(&self) -> bool {
        true
    }
}

/// How the run ended: `code` its exit code (`Err`: still running at `limit`, then ended).
fn outcome_of(
    code: Result<Option<i32>, ()>,
    limit: Duration,
    s: &Steps,
    out: &[String],
    err: &[String],
) -> Outcome {
    let code = match code {
        Ok(code) => code,
        Err(()) => {
            return match &s.deadlock {
                Some(what) => Outcome::Deadlock(what.clone()),
                None => Outcome::Timeout(limit.as_secs()),
            }
        }
    };
    let diverged = err.iter().find(|l| l.contains("replay diverged from the log"));
    if let (Some(EXIT_DIVERGED), Some(why)) = (code, diverged) {
        return Outcome::Infeasible(why.trim_start_matches("racetrack: ").to_owned());
    }
    let mut lines = out.to_vec();
    if code != Some(0) {
        lines.extend(s.panics.iter().cloned());
        // A panic's place, without the worker thread that happened to run it.
        lines.extend(err.iter().filter_map(|l| {
            let at = l.find("panicked at ")?;
            Some(l[at..].to_owned())
        }));
    }
    Outcome::exit(code, &lines)
}

/// How a run ended, in words: its exit code and its last line on stderr.
fn ended(code: Result<Option<i32>, ()>, err: &[String]) -> String {
    let how = match code {
        Ok(Some(c)) => format!("exit code {c}"),
        Ok(None) => "killed by a signal".to_owned(),
        Err(()) => "still running at its time limit".to_owned(),
    };
    match err.iter().rev().find(|l| !l.trim().is_empty()) {
        Some(last) => format!("{how}, last said: {last}"),
        None => how,
    }
}

/// Every step on a message of the run as a pick, in the run's order, and how many picks
/// had the schedule's inputs left out of their alternatives (after a schedule call nested
/// in a step: their order is not known). A thread's steps from one whose message was not
/// seen sent on are not read (`known` false).
fn picks(s: &Steps, forced: &Schedule) -> (Vec<Pick>, u64) {
    let mut all: Vec<(usize, Pick)> = Vec::with_capacity(s.delivered() as usize);
    let mut unexplored = 0;
    for (g, thread) in s.threads.iter().enumerate() {
        let unknown_from = thread
            .iter()
            .position(|t| t.sender == UNKNOWN)
            .unwrap_or(thread.len());
        for (k, t) in thread.iter().enumerate() {
            let key = (s.names[g].clone(), k as u32);
            let known = k < unknown_from;
            let mut alts = if known { s.candidates(g, k) } else { Vec::new() };
            let forced = forced.contains_key(&key);
            if s.nested {
                let before = alts.len();
                alts.retain(|&(sender, _)| sender != log::SENDER_INPUT || sender == t.sender);
                // Counted where the pick is free: a forced one was counted where it was.
                unexplored += u64::from(alts.len() < before && !forced);
            }
            alts.sort_by_key(|&(sender, _)| sender);
            let by_name = |clock: &[u32]| {
                (1..clock.len())
                    .filter(|&c| clock[c] > 0)
                    .filter_map(|c| Some((s.names.get(c - 1)?.clone(), clock[c])))
                    .collect::<BTreeMap<String, u32>>()
            };
            let needs = alts.iter().map(|(_, clock)| by_name(clock)).collect();
            let pick = Pick {
                forced,
                key,
                source: if known { t.sender as i32 } else { -1 },
                candidates: alts.iter().map(|&(sender, _)| sender as i32).collect(),
                site: None,
                refused: None,
                after: Vec::new(),
                known,
                label: Some(t.label.clone()),
                needs,
                // The first start, held at attach, comes before a breakpoint can count.
                starts: t.starts.saturating_sub(u64::from(s.first == Some(g))),
                clock: by_name(&t.clock),
            };
            all.push((t.order, pick));
        }
    }
    all.sort_by_key(|(order, _)| *order);
    (all.into_iter().map(|(_, p)| p).collect(), unexplored)
}

/// Read a child's pipe into lines on a thread of its own (so that a full pipe never
/// stops the program), keeping the first [`MAX_LINES`].
fn lines_of(pipe: Option<impl Read + Send + 'static>) -> Option<std::thread::JoinHandle<Vec<String>>> {
    let pipe = pipe?;
    std::thread::Builder::new()
        .name("explore-output".into())
        .spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if lines.len() < MAX_LINES {
                    lines.push(line);
                }
            }
            lines
        })
        .ok()
}

fn joined(h: Option<std::thread::JoinHandle<Vec<String>>>) -> Vec<String> {
    h.and_then(|h| h.join().ok()).unwrap_or_default()
}

/// Wait for the program's exit code (`None`: a signal ended it), at most `limit`; past
/// it, end the program (`SIGTERM`, so that its trace is flushed, then `SIGKILL`) and
/// return `Err`.
fn wait(child: &mut Child, limit: Duration) -> Result<Option<i32>, ()> {
    let deadline = Instant::now() + limit;
    let mut nap = Duration::from_micros(200);
    while Instant::now() < deadline {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status.code()),
            Ok(None) => {}
            Err(_) => break,
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(20));
    }
    // The pid is still the child's: it has not been reaped.
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        if let Ok(Some(_)) = child.try_wait() {
            return Err(());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    Err(())
}
