//! One run of an MPI job under the explorer: every wildcard receive is held (race mode);
//! a receive the schedule names is forced onto its source, any other released at once
//! for MPI to match. The run ends with the job, a deadlock, or its time limit. Then each
//! receive's alternatives are read off the run ([`Trail`]).

use super::trail::Trail;
use super::{Key, Outcome, Pick, Run};
use crate::conn::{CommandSender, ConnEvent};
use crate::job::JobListener;
use crate::launch::{spawn_job, Launched};
use crate::model::clocks::Order;
use crate::model::Model;
use crate::mpirun::Plan;
use racetrack_protocol::{Command, Event, Peer, Request, SpecialPeer, When};
use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// Request numbers of the explorer's own commands.
const REQ_BASE: u64 = 1 << 40;

/// A run in progress.
struct Driver<'a> {
    tx: CommandSender,
    model: Model,
    forced: &'a BTreeMap<Key, i32>,
    /// The wildcard receives held, by key, with their `start`s; what the run's events
    /// say of receives and sends; and the forced matches a rank refused.
    receives: Vec<(Key, u64)>,
    trail: Trail,
    refusals: BTreeMap<Key, Option<String>>,
    /// Wildcard receives held so far on each thread.
    seen: BTreeMap<String, u32>,
    /// Held events decided (their `match` sent, or released).
    done: BTreeSet<u64>,
    /// `match` requests awaiting `ok`: request → the receive's key and held event.
    matching: BTreeMap<u64, (Key, u64)>,
    next_req: u64,
    delivered: u64,
    /// Wildcard receives left to MPI, not explored (nonblocking ones).
    unexplored: u64,
    deadlock: Option<String>,
    /// The threads a deadlock names, with the call each is stuck in.
    stuck: Vec<(String, String)>,
    pids: Vec<u32>,
}

fn wildcard() -> When {
    When {
        peer: Some(Peer::Special(SpecialPeer::AnySource)),
        ..When::default()
    }
}

/// Run `plan` once, forcing the picks `forced` names; write its scenario to `scenario`.
pub(super) fn run(
    plan: &Plan,
    forced: &BTreeMap<Key, i32>,
    limit: Duration,
    scenario: &Path,
) -> anyhow::Result<Run> {
    let (conn, mut launched) = start(plan)?;
    let (output, reader) = read_stdout(&mut launched);
    let (tx, events) = conn.split();
    let mut d = Driver {
        tx,
        model: Model::new().with_messages().with_clocks(),
        forced,
        receives: Vec::new(),
        trail: Trail::default(),
        refusals: BTreeMap::new(),
        seen: BTreeMap::new(),
        done: BTreeSet::new(),
        matching: BTreeMap::new(),
        next_req: REQ_BASE,
        delivered: 0,
        unexplored: 0,
        deadlock: None,
        stuck: Vec::new(),
        pids: Vec::new(),
    };
    d.tx.send(Command::Break {
        op: "*".into(),
        thread: None,
        on: true,
        trace: false,
        when: Some(wildcard()),
        hit: None,
    });
    d.tx.send(Command::Continue {
        thread: None,
        event_id: None,
        trace: None,
    });
    let deadline = Instant::now() + limit;
    let closed = loop {
        match events.recv_timeout(Duration::from_millis(10)) {
            Ok(ConnEvent::Closed(_)) | Err(mpsc::RecvTimeoutError::Disconnected) => break true,
            Ok(item) => d.take(item),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if d.deadlock.is_some() || Instant::now() > deadline {
            break false;
        }
        d.decide();
    };
    let path = scenario.display().to_string();
    let (outcome, saved) = if closed {
        let code = wait_exit(&mut launched, Duration::from_secs(20));
        // Its last lines: the pipe ends with the job (bounded, should a rank linger).
        let until = Instant::now() + Duration::from_secs(2);
        while reader.as_ref().is_some_and(|r| !r.is_finished()) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        let saved = matches!(d.tx.save_kept(&path, None), Event::Ok { .. });
        let lines = output.lock().map(|l| l.clone()).unwrap_or_default();
        (Outcome::exit(code, &lines), saved)
    } else {
        // Saved while the ranks are still there, then the job is ended.
        let saved = d.save_live(&events, &path);
        kill(&mut launched, &d.pids);
        let outcome = match d.deadlock.take() {
            Some(what) if d.forced_waiting(Some(&d.stuck)) => Outcome::Infeasible(what),
            Some(what) => Outcome::Deadlock(what),
            // A forced receive still waiting (polled for, say): the schedule's hang.
            None if d.forced_waiting(None) => {
                Outcome::Infeasible(format!("still running after {} s", limit.as_secs()))
            }
            None => Outcome::Timeout(limit.as_secs()),
        };
        (outcome, saved)
    };
    Ok(Run {
        outcome,
        picks: d.picks(),
        delivered: d.delivered,
        fresh: None,
        unexplored: d.unexplored,
        dropped: d.model.messages().is_some_and(|g| g.dropped() > 0),
        saved,
        ordering: None,
        states: None,
    })
}

impl Driver<'_> {
    fn take(&mut self, item: ConnEvent) {
        match item {
            ConnEvent::Event(ev) => self.event(&ev),
            ConnEvent::Events(evs) => evs.iter().for_each(|ev| self.event(ev)),
            ConnEvent::Packed(names, ps) => {
                for p in &ps {
                    self.delivered += u64::from(p.kind == racetrack_protocol::Kind::Recv);
                    self.model.ingest_packed(&names, p);
                    if p.call.is_some() {
                        if let Ok(ev) = names.expand(p.clone()) {
                            self.trail.observe(&ev);
                        }
                    }
                }
            }
            ConnEvent::Closed(_) => {}
        }
    }

    fn event(&mut self, ev: &Event) {
        self.model.ingest(ev);
        self.trail.observe(ev);
        match ev {
            Event::Recv(_) => self.delivered += 1,
            Event::Snapshot { threads, .. } => self.pids.extend(threads.iter().filter_map(|t| t.pid)),
            Event::Deadlock { waits, .. } => {
                let what: Vec<String> = waits
                    .iter()
                    .map(|w| {
                        format!(
                            "{} in {} waiting for {}",
                            w.thread,
                            w.call,
                            w.waits_for.join(", ")
                        )
                    })
                    .collect();
                self.deadlock = Some(what.join("; "));
                self.stuck = waits.iter().map(|w| (w.thread.clone(), w.call.clone())).collect();
            }
            Event::Ok { req: Some(n), .. } | Event::Error { req: Some(n), .. } => {
                if let Some((key, id)) = self.matching.remove(n) {
                    // Forced (or refused: the receive then takes what comes): release it.
                    if let Event::Error { message, .. } = ev {
                        self.refusals.insert(key, Some(message.clone()));
                    }
                    self.release(id);
                }
            }
            _ => {}
        }
    }

    /// Release held event `id` (only it: a later hold of its thread stays).
    fn release(&mut self, id: u64) {
        self.tx.send(Command::Continue {
            thread: None,
            event_id: Some(id),
            trace: None,
        });
    }

    /// Every held event not decided yet: a wildcard receive the schedule names is forced
    /// onto its source; every other hold is released.
    fn decide(&mut self) {
        let Some(g) = self.model.messages() else { return };
        let mut waiting = Vec::new();
        let mut other = Vec::new();
        for lane in g.lane_order() {
            let l = &g.lanes()[lane as usize];
            let last = l.vertices.last().map(|&v| (v, &g.vertices()[v as usize]));
            let held = self.model.control.held_of(l.thread).map(|(id, _)| id.event_id);
            let Some(id) = held.filter(|id| !self.done.contains(id)) else {
                continue;
            };
            let thread = self.model.thread_name(l.thread).to_owned();
            match last {
                // Polls repeat as timing says: not explored yet.
                Some((_, x)) if x.start == id && x.pending_wildcard() => {
                    let op = self.model.first().op_name(x.call);
                    if matches!(op, "MPI_Iprobe" | "MPI_Improbe") {
                        self.unexplored += 1;
                        other.push(id);
                    } else {
                        waiting.push((id, thread));
                    }
                }
                _ => other.push(id),
            }
        }
        for id in other {
            self.done.insert(id);
            self.release(id);
        }
        for (id, thread) in waiting {
            // Keyed at first sight: the Nth wildcard receive of its thread, in every run.
            let nth = self.seen.entry(thread.clone()).or_insert(0);
            let key = (thread.clone(), *nth);
            *nth += 1;
            self.done.insert(id);
            self.receives.push((key.clone(), id));
            match self.forced.get(&key) {
                Some(&source) => self.pick(id, key, source),
                // Free: MPI matches it; what else it could have taken is worked out after.
                None => self.release(id),
            }
        }
    }

    /// Force held receive `id` onto `source`; it is released once the rank says `ok`.
    fn pick(&mut self, id: u64, key: Key, source: i32) {
        let req = self.next_req;
        self.next_req += 1;
        self.matching.insert(req, (key, id));
        self.tx.send(Request {
            req: Some(req),
            cmd: Command::Match {
                event_id: Some(id),
                thread: None,
                source,
                tag: None,
            },
        });
    }

    /// Each wildcard receive held: what it matched and could have (read off the run's
    /// trail); a refused pick is reported with what the receive matched, not forced.
    fn picks(&mut self) -> Vec<Pick> {
        let receives = std::mem::take(&mut self.receives);
        let mut out = Vec::with_capacity(receives.len());
        let mut done = Vec::with_capacity(receives.len());
        for (key, start) in &receives {
            let read = self.trail.read(&mut self.model, key, *start);
            let refused = self.refusals.get(key).cloned().flatten();
            let forced = refused.is_none() && self.forced.contains_key(key);
            let source = if forced {
                self.forced.get(key).copied()
            } else {
                read.source
            };
            done.push(read.done);
            out.push(Pick {
                refused,
                forced,
                known: read.known,
                source: source.unwrap_or(-1),
                key: key.clone(),
                candidates: read.alternatives,
                site: read.site,
                after: Vec::new(),
                label: None,
                needs: Vec::new(),
                starts: 0,
                clock: BTreeMap::new(),
            });
        }
        // The receives posted after each completed, and so perhaps because of its match.
        if let Some(clocks) = self.model.clocks() {
            for (i, p) in out.iter_mut().enumerate() {
                let Some(d) = done[i] else { continue };
                p.after = (0..receives.len())
                    .filter(|&j| j != i && clocks.order(d, receives[j].1) == Some(Order::Before))
                    .collect();
            }
        }
        self.receives = receives;
        out
    }

    /// Whether the run is stuck on the schedule rather than the program: a forced
    /// receive (that the rank accepted) still waits for its source, on a thread among
    /// `stuck` (all threads for a hang). A blocking receive or probe waits while it is
    /// open; an `MPI_Irecv` until it takes a message, and only where its thread is stuck
    /// in a completion call.
    fn forced_waiting(&self, stuck: Option<&[(String, String)]>) -> bool {
        let Some(g) = self.model.messages() else {
            return false;
        };
        self.receives
            .iter()
            .filter(|(k, _)| self.forced.contains_key(k) && self.refusals.get(k).is_none_or(Option::is_none))
            .filter(|(k, _)| stuck.is_none_or(|s| s.iter().any(|(t, _)| *t == k.0)))
            .any(|(k, start)| {
                let lane = self.model.thread_key(&k.0).and_then(|t| g.lane(t));
                let x = lane.and_then(|l| {
                    let vs = &g.lanes()[l as usize].vertices;
                    vs.iter()
                        .map(|&v| &g.vertices()[v as usize])
                        .find(|x| x.start == *start)
                });
                match x {
                    // An `MPI_Irecv` waits only in the completion call its thread is stuck in
                    // (in another call, say a blocking receive its match starved, the
                    // deadlock is the program's).
                    Some(x) if self.model.first().op_name(x.call) == "MPI_Irecv" => {
                        !self.trail.took(&k.0, *start)
                            && stuck.is_none_or(|s| {
                                s.iter()
                                    .any(|(t, call)| *t == k.0 && call.starts_with("MPI_Wait"))
                            })
                    }
                    Some(x) => x.open,
                    None => false,
                }
            })
    }

    /// `save_scenario` while the ranks run: whether it was written.
    fn save_live(&mut self, events: &mpsc::Receiver<ConnEvent>, path: &str) -> bool {
        let req = self.next_req;
        self.next_req += 1;
        self.tx.send(Request {
            req: Some(req),
            cmd: Command::SaveScenario {
                path: path.to_owned(),
            },
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let item = match events.recv_timeout(Duration::from_millis(50)) {
                Ok(ConnEvent::Closed(_)) | Err(mpsc::RecvTimeoutError::Disconnected) => return false,
                Ok(item) => item,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
            };
            // The events that came meanwhile count for the trail too.
            let verdict = match &item {
                ConnEvent::Event(ev) => verdict_of(ev, req),
                ConnEvent::Events(evs) => evs.iter().find_map(|ev| verdict_of(ev, req)),
                _ => None,
            };
            self.take(item);
            if let Some(ok) = verdict {
                return ok;
            }
        }
        false
    }
}

/// Whether `ev` answers request `req`: `ok` or not.
fn verdict_of(ev: &Event, req: u64) -> Option<bool> {
    match ev {
        Event::Ok { req: Some(n), .. } if *n == req => Some(true),
        Event::Error { req: Some(n), .. } if *n == req => Some(false),
        _ => None,
    }
}

/// Launch the job and wait for its ranks.
fn start(plan: &Plan) -> anyhow::Result<(crate::conn::Connection, Launched)> {
    let listener = JobListener::bind("127.0.0.1:0", None)?;
    let mut launched = spawn_job(plan.command(listener.url()), listener.url())?;
    let conn = listener.accept(plan.ranks, Duration::from_secs(60), Box::new(|| {}), || {
        let st = launched.child.try_wait().ok().flatten()?;
        Some(format!("the launcher exited ({st}) before every rank connected"))
    });
    match conn {
        Ok(conn) => Ok((conn, launched)),
        Err(e) => {
            let _ = launched.child.kill();
            let _ = launched.child.wait();
            Err(e.into())
        }
    }
}

/// Most output lines of a run kept (the rest is not compared).
const OUTPUT_MAX: usize = 10_000;

/// The program's stdout lines (not blank), read to its end, and the reading thread.
fn read_stdout(l: &mut Launched) -> (Arc<Mutex<Vec<String>>>, Option<std::thread::JoinHandle<()>>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let mut reader = None;
    if let Some(out) = l.stdout.take() {
        let lines = lines.clone();
        reader = Some(std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if let (false, Ok(mut l)) = (line.trim().is_empty(), lines.lock()) {
                    if l.len() < OUTPUT_MAX {
                        l.push(line);
                    }
                }
            }
        }));
    }
    (lines, reader)
}

fn wait_exit(l: &mut Launched, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Ok(Some(st)) = l.child.try_wait() {
            return st.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = l.child.kill();
    l.child.wait().ok().and_then(|s| s.code())
}

/// End a job that will not end by itself: its ranks (by pid) and its launcher.
fn kill(l: &mut Launched, pids: &[u32]) {
    for pid in pids {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    let _ = l.child.kill();
    let _ = l.child.wait();
}
