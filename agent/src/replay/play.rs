//! Replaying (`RACETRACK_REPLAY=FILE`): each thread follows its runs in the log, as the
//! agent core's replay engine ([`Script`]) picks them at each of its step starts (the
//! runtime's choice point). A thread's step count is only touched by that thread; threads that
//! wait for a message sleep on one condition variable that every event wakes while
//! someone waits. A wait with the whole program stalled (no event anywhere, no step
//! running) for the stall time means the run cannot follow its log.

use super::{sender_code, EXIT_DIVERGED};
use crate::agent::flow::take;
use crate::agent::{Agent, ReplayError};
use crate::choice::{Chooser, Pending, Pick, Point, Script};
use racetrack_protocol::replay_log::{EditKind, ReadLogError, ReplayLog};
use racetrack_protocol::{launch as env, Event, Rest};
use racetrack_runtime::hook::{CollectionInfo, GraphInfo, QueuedMsg, SendEvent, StepEvent, ThreadAccess};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a replay waits with the program stalled before it reports a divergence, when
/// `RACETRACK_REPLAY_STALL_MS` does not say.
const STALL: Duration = Duration::from_secs(5);

thread_local! {
    /// The global index of the runtime thread this is, once it started a step.
    static CURRENT: Cell<Option<usize>> = const { Cell::new(None) };
}

pub(super) struct Replayer {
    log: ReplayLog,
    /// The log's picks, by thread.
    script: Script,
    /// Under a debugger: a divergence is reported to it and the program runs on free, and
    /// a wait is never taken for a stall (the user may hold anything for any time).
    debugged: bool,
    agent: OnceLock<Arc<Agent>>,
    stall: Duration,
    active: AtomicBool,
    /// Steps on messages each thread took, by global thread index (as many as the
    /// recorded run had).
    steps: Vec<Mutex<u64>>,
    in_step: Vec<AtomicBool>,
    /// This run's thread names, by global index.
    names: Mutex<Vec<String>>,
    /// Counts every event; waiters wait for it to change.
    events: AtomicU64,
    waiters: AtomicUsize,
    wake: (Mutex<()>, Condvar),
    /// Said once: a thread went past the end of an incomplete log.
    past_prefix: AtomicBool,
}

impl Replayer {
    pub(super) fn open(path: &str, debugged: bool) -> Result<Self, ReadLogError> {
        let log = ReplayLog::read(std::path::Path::new(path))?;
        let mut argv = std::env::args();
        let program = argv.next().unwrap_or_default();
        let args: Vec<String> = argv.collect();
        let base = |p: &str| std::path::Path::new(p).file_name().map(|n| n.to_owned());
        if args != log.header.args || base(&program) != base(&log.header.program) {
            eprintln!(
                "racetrack: note: the log recorded `{}`; this run is `{}`",
                shell_line(&log.header.program, &log.header.args),
                shell_line(&program, &args)
            );
        }
        match &log.end {
            None => eprintln!("racetrack: note: the recorded run did not finish; the replay follows it as far as it was recorded, then runs free"),
            Some(e) if e.prefix => eprintln!("racetrack: note: a scenario saved mid-session: the replay follows it as far as it goes, then runs free"),
            Some(_) => {}
        }
        let script = Script::of_threads(&log);
        let n = (0..).take_while(|&g| script.has_line(g)).count();
        let stall = std::env::var(env::ENV_REPLAY_STALL_MS)
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(STALL, Duration::from_millis);
        Ok(Self {
            log,
            script,
            debugged,
            agent: OnceLock::new(),
            stall,
            active: AtomicBool::new(true),
            steps: (0..n).map(|_| Mutex::default()).collect(),
            in_step: (0..n).map(|_| AtomicBool::new(false)).collect(),
            names: Mutex::new(Vec::new()),
            events: AtomicU64::new(0),
            waiters: AtomicUsize::new(0),
            wake: (Mutex::new(()), Condvar::new()),
            past_prefix: AtomicBool::new(false),
        })
    }

    /// The agent a divergence is reported to, under a debugger.
    pub(super) fn set_agent(&self, agent: Arc<Agent>) {
        let _ = self.agent.set(agent);
    }

    pub(super) fn active(&self) -> bool {
        self.active.load(Relaxed)
    }

    pub(super) fn take_over(&self) -> Result<String, ReplayError> {
        if !self.active.swap(false, SeqCst) {
            return Err(ReplayError::Ended);
        }
        self.bump();
        let done: u64 = self.steps.iter().map(|c| *lock(c)).sum();
        Ok(format!(
            "taken over after {done} of the {} recorded steps: the program runs free from here",
            self.log.steps()
        ))
    }

    /// An event happened: wake the threads waiting for a message.
    pub(super) fn bump(&self) {
        self.events.fetch_add(1, SeqCst);
        if self.waiters.load(SeqCst) > 0 {
            let _g = lock(&self.wake.0);
            self.wake.1.notify_all();
        }
    }

    pub(super) fn collection(&self, info: &CollectionInfo) {
        let mut names = lock(&self.names);
        for t in &info.threads {
            if names.len() <= t.global {
                names.resize(t.global + 1, String::new());
            }
            names[t.global] = t.name.to_string();
        }
        drop(names);
        let Some(end) = &self.log.end else {
            return;
        };
        for t in &info.threads {
            match end.threads.get(t.global) {
                Some(r) if *r.name == *t.name => {}
                Some(r) => self.diverged(&format!(
                    "this run's thread {} is {}, the recorded run's was {} (another program, or other arguments)",
                    t.global, t.name, r.name
                )),
                None => self.diverged(&format!(
                    "this run has thread {} ({}); the recorded run had {} threads (another program, or other arguments)",
                    t.name,
                    t.global,
                    end.threads.len()
                )),
            }
        }
        // The recorded collection may have been larger.
        let next = info.threads.last().map_or(0, |t| t.global + 1);
        let more = format!("{}[{}]", info.name, info.threads.len());
        if end.threads.get(next).is_some_and(|r| r.name == more) {
            self.diverged(&format!(
                "this run's collection {} has {} threads; the recorded run's had {more} too (another program, or other arguments)",
                info.name,
                info.threads.len()
            ));
        }
    }

    pub(super) fn graph(&self, info: &GraphInfo) {
        let Some(end) = self.log.end.as_ref().filter(|e| !e.ops.is_empty()) else {
            return;
        };
        for op in &info.ops {
            match end.ops.get(op.id) {
                Some(r) if **r == *op.name => {}
                recorded => self.diverged(&format!(
                    "this run's operation {} is {}, the recorded run's was {} (another program)",
                    op.id,
                    op.name,
                    recorded.map_or("none", String::as_str)
                )),
            }
        }
    }

    fn name(&self, thread: usize) -> String {
        let recorded = || Some(self.log.end.as_ref()?.threads.get(thread)?.name.clone());
        lock(&self.names)
            .get(thread)
            .filter(|n| !n.is_empty())
            .cloned()
            .or_else(recorded)
            .unwrap_or_else(|| format!("thread {thread}"))
    }

    fn sender_name(&self, code: u64) -> String {
        match code.checked_sub(1) {
            None => "the program (a schedule call's input)".to_owned(),
            Some(g) => self.name(g as usize),
        }
    }

    /// A step on a message is about to start on `ev.thread`. `true`: it starts (it is
    /// the one the log names, or the replay is over for this thread); `false`: it was put
    /// back, and the message the log names is now at the head of the queue.
    pub(super) fn start(&self, ev: &mut StepEvent<'_>) -> bool {
        let me = ev.thread.global;
        CURRENT.with(|c| c.set(Some(me)));
        self.bump();
        let Some(steps) = self.steps.get(me) else {
            self.diverged(&format!(
                "{} takes a message, and the recorded run had no such thread",
                ev.thread.name
            ));
            return true;
        };
        let code = sender_code(ev.from);
        let mut c = lock(steps);
        loop {
            if !self.active() {
                return true;
            }
            let at = Point::Message {
                step: *c,
                next: code,
                pending: &Queue(&ev.access),
            };
            let expected = match self.script.choose(me, at) {
                Pick::Sender(s) => s,
                past => {
                    self.past_the_log(ev, *c, code, past == Pick::Done);
                    return true;
                }
            };
            if expected == code {
                *c += 1;
                return true;
            }
            let seen = self.events.load(SeqCst);
            let pending = ev.access.pending();
            let from_expected = pending
                .iter()
                .find(|m| sender_code(m.from.as_ref().map(|(_, t)| t.global)) == expected);
            if let Some(m) = from_expected {
                let order = [
                    format!("{}@{}", m.id, m.op.name),
                    format!("{}@{}", ev.msg_id, ev.op.name),
                ];
                let pick = Pick::Order {
                    order: &order,
                    rest: Some(Rest::After),
                };
                match take(&mut ev.access, pick) {
                    Ok(_) => return false,
                    Err(e) => {
                        self.diverged(&format!(
                            "{}: cannot take {} first: {e}",
                            ev.thread.name, order[0]
                        ));
                        return true;
                    }
                }
            }
            if !self.wait(seen, me) {
                self.stalled(ev, *c, (expected, code), &pending);
                return true;
            }
        }
    }

    /// `ev`'s thread took more steps (`steps` before this one) than the log holds for it:
    /// a recorded prefix ends here (`prefix`: the thread runs free), a complete log
    /// diverges.
    fn past_the_log(&self, ev: &StepEvent<'_>, steps: u64, code: u64, prefix: bool) {
        if prefix {
            if !self.past_prefix.swap(true, Relaxed) {
                eprintln!(
                    "racetrack: {} went past the end of the recorded prefix (its step {}); it runs free from here",
                    ev.thread.name,
                    steps + 1
                );
            }
            return;
        }
        self.diverged(&format!(
            "{}'s step {} takes message {} for {} from {}, and the recorded run made only {} steps there",
            ev.thread.name,
            steps + 1,
            ev.msg_id,
            ev.op.name,
            self.sender_name(code),
            steps
        ));
    }

    /// The message the log names for `ev`'s step never came: a divergence that says what
    /// the thread has instead. `senders`: the log's and the one at hand.
    fn stalled(&self, ev: &StepEvent<'_>, steps: u64, senders: (u64, u64), pending: &[QueuedMsg]) {
        let (expected, code) = senders;
        let (run, runs) = self.script.place(ev.thread.global, steps);
        let listed: Vec<String> = pending
            .iter()
            .take(8)
            .map(|m| format!("{} for {}", m.id, m.op.name))
            .collect();
        let more = if pending.is_empty() {
            String::new()
        } else {
            format!("; pending there: {}", listed.join(", "))
        };
        self.diverged(&format!(
            "{}'s step {} must take the next message from {} (the log's run {} of {} for it), and none came in {:.1} s with the program stalled; it has message {} for {} from {}{more}",
            ev.thread.name,
            steps + 1,
            self.sender_name(expected),
            run + 1,
            runs,
            self.stall.as_secs_f64(),
            ev.msg_id,
            ev.op.name,
            self.sender_name(code),
        ));
    }

    /// The user's edit of this send in the recorded session, made again.
    pub(super) fn edit_send(&self, ev: &mut SendEvent<'_>) {
        let Some(t) = ev.thread.map(|t| t.global) else {
            return;
        };
        let step = self.steps(t);
        let (msg, op) = (
            ev.msg_id.to_string(),
            ev.to_op.map(|o| o.name.to_string()).unwrap_or_default(),
        );
        for e in self.log.edits.iter().filter(|e| e.thread == t && e.step == step) {
            if let EditKind::Send {
                msg: m,
                op: o,
                content,
            } = &e.what
            {
                if *m == msg && *o == op {
                    if let Err(err) = ev.replace_content(content.clone()) {
                        self.diverged(&format!(
                            "the recorded edit of message {msg} for {op} does not fit it: {err}"
                        ));
                    }
                }
            }
        }
    }

    /// The user's replacement of this thread's state at this step's start (`stop`:
    /// stop) in the recorded session, made again.
    pub(super) fn edit_state(&self, ev: &mut StepEvent<'_>, stop: bool) {
        let t = ev.thread.global;
        let step = self.steps(t);
        for e in self.log.edits.iter().filter(|e| e.thread == t && e.step == step) {
            if let EditKind::State { stop: s, content } = &e.what {
                if *s == stop {
                    if let Err(err) = ev.access.set_state_json(content.clone()) {
                        self.diverged(&format!(
                            "the recorded state of {} at its step {step} does not fit it: {err}",
                            ev.thread.name
                        ));
                    }
                }
            }
        }
    }

    fn steps(&self, thread: usize) -> u64 {
        self.steps.get(thread).map_or(0, |c| *lock(c))
    }

    /// A debugger put back the message whose start the log had counted: the thread asks
    /// again at the same step.
    pub(super) fn unstart(&self, thread: usize) {
        if let Some(c) = self.steps.get(thread) {
            let mut c = lock(c);
            *c = c.saturating_sub(1);
        }
    }

    pub(super) fn started(&self, thread: usize) {
        CURRENT.with(|c| c.set(Some(thread)));
        if let Some(s) = self.in_step.get(thread) {
            s.store(true, SeqCst);
        }
    }

    pub(super) fn stopped(&self, thread: usize) {
        if let Some(s) = self.in_step.get(thread) {
            s.store(false, SeqCst);
        }
        self.bump();
    }

    /// A step failed (no stop follows), on the thread calling.
    pub(super) fn failed(&self) {
        if let Some(t) = CURRENT.with(Cell::get) {
            self.stopped(t);
        }
    }

    /// Wait for another event than the `seen` first ones. `false`: none came for the
    /// stall time, with no step running anywhere.
    fn wait(&self, seen: u64, me: usize) -> bool {
        self.waiters.fetch_add(1, SeqCst);
        let since = Instant::now();
        let mut g = lock(&self.wake.0);
        let moved = loop {
            if !self.active() || self.events.load(SeqCst) != seen {
                break true;
            }
            g = self
                .wake
                .1
                .wait_timeout(g, Duration::from_millis(50))
                .map_or_else(|p| p.into_inner().0, |(g, _)| g);
            if self.events.load(SeqCst) != seen {
                break true;
            }
            let running = self
                .in_step
                .iter()
                .enumerate()
                .any(|(t, s)| t != me && s.load(SeqCst));
            if !self.debugged && !running && since.elapsed() >= self.stall {
                break false;
            }
        };
        drop(g);
        self.waiters.fetch_sub(1, SeqCst);
        moved
    }

    /// The runtime's threads have stopped: every thread must have made its recorded steps.
    pub(super) fn finish(&self) {
        let (Some(end), true) = (self.log.end.as_ref().filter(|e| !e.prefix), self.active()) else {
            return;
        };
        for (g, t) in end.threads.iter().enumerate() {
            let made = self.steps(g);
            if made < t.steps {
                self.diverged(&format!(
                    "the program ended with {} at its step {made}; the recorded run made {} steps there",
                    t.name, t.steps
                ));
                return;
            }
        }
    }

    /// The run cannot follow the log: under a debugger, say so there and run on free;
    /// else stop the program with [`EXIT_DIVERGED`].
    fn diverged(&self, what: &str) {
        if !self.active.swap(false, SeqCst) {
            return;
        }
        self.bump();
        let message = format!("replay diverged from the log: {what}");
        eprintln!("racetrack: {message}");
        if self.debugged {
            if let Some(a) = self.agent.get() {
                a.reply(Event::Error {
                    message: format!("{message}; the program runs free from here"),
                    req: None,
                });
            }
            return;
        }
        std::process::exit(EXIT_DIVERGED);
    }
}

/// A suspended thread's queue, as a choice point's alternatives.
pub(super) struct Queue<'a, 'b>(pub(super) &'a ThreadAccess<'b>);

impl Pending for Queue<'_, '_> {
    fn senders(&self) -> Vec<u64> {
        let from = |m: &QueuedMsg| sender_code(m.from.as_ref().map(|(_, t)| t.global));
        self.0.pending().iter().map(from).collect()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn shell_line(program: &str, args: &[String]) -> String {
    std::iter::once(program)
        .chain(args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ")
}
