//! A runtime program's run read off its trace (`RACETRACK_TRACE`): which sender's message
//! each thread's steps took, and happens-before between those steps.
//!
//! A step starts after the step that sent its message (the send is that step's act) and
//! after its thread's previous step. A schedule's inputs are one line of their own: each
//! comes after the results that returned before it (the program's schedule calls are
//! made one after another; concurrent ones would be ordered here more than they are).
//! Clocks are indexed by sender code: 0 the input line, `g + 1` the thread of global
//! index `g`; a thread's entry counts its steps on messages that happened before.

use racetrack_protocol::replay_log::{self as log, LogEnd, LogHeader, LogThread, Run as LogRun};
use racetrack_protocol::trace::TraceReader;
use racetrack_protocol::{Event, SmolStr, Step};
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::path::Path;

/// A vector clock, by sender code.
pub type Clock = Vec<u32>;

/// A sender code that no run can force: the step's message was not seen sent.
pub const UNKNOWN: u64 = u64::MAX;

/// One message a thread took (or was sent and never took).
#[derive(Debug, Clone)]
pub struct Taken {
    /// Its sender's code ([`log::SENDER_INPUT`], or the sending thread's global index plus
    /// one; [`UNKNOWN`]).
    pub sender: u64,
    /// In words: `Collect 1.0.1 from proc[0]`.
    pub label: String,
    /// The clock of the step (or input) that sent it.
    pub sent: Clock,
    /// Its step's place in the trace (a linearization of happens-before).
    pub order: usize,
    /// The message and the operation it is for.
    pub msg: SmolStr,
    pub op: SmolStr,
    /// The merge or stream instance its step absorbed it into.
    pub into: Option<SmolStr>,
    /// The schedule's inputs its step knew of (its clock's entry 0).
    pub inputs: u32,
    /// Its thread's step starts before its step, final steps included.
    pub starts: u64,
    /// Its step's clock (empty for a message never taken).
    pub clock: Clock,
}

/// A run's steps on messages, by thread.
#[derive(Debug, Default)]
pub struct Steps {
    /// Thread names by global index.
    pub names: Vec<String>,
    /// Operation names, by index among all of the run's graphs.
    pub ops: Vec<String>,
    /// Each thread's steps on messages, in order.
    pub threads: Vec<Vec<Taken>>,
    /// Messages sent to each thread and never taken.
    pub left: Vec<Vec<Taken>>,
    /// A deadlock the runtime told, in words.
    pub deadlock: Option<String>,
    /// Operations that panicked, in words.
    pub panics: Vec<String>,
    /// Each thread's final steps: how many steps on messages it had made, and the
    /// instance that ended.
    pub closed: Vec<Vec<(u32, SmolStr)>>,
    /// The results sent back to the schedule's caller: the sender's code, its step (from
    /// 1) and the message.
    pub results: Vec<(u64, u32, SmolStr)>,
    /// The thread whose step started first (the one `RACETRACK_WAIT` holds).
    pub first: Option<usize>,
    /// A step took a message the trace did not show sent ([`UNKNOWN`]).
    pub unknown: bool,
    /// A schedule call's input was sent before an earlier call returned: a call nested in
    /// a step (or calls made side by side), whose inputs the input line orders wrongly.
    pub nested: bool,
    /// A merge's final step did not follow its last absorb on its thread: it waited for
    /// its split's end, and ran where timing put it, which no schedule controls.
    pub late_final: bool,
}

type SendKey = (SmolStr, SmolStr, SmolStr);

#[derive(Default)]
struct Reader {
    s: Steps,
    index: HashMap<String, usize>,
    /// Each thread's current step's clock.
    current: Vec<Clock>,
    input: Clock,
    /// Sent, not taken yet: (message, operation, thread) → the message.
    sends: HashMap<SendKey, Taken>,
    events: usize,
    /// Each thread: the instance its latest step absorbed into (`None`: it was not an
    /// absorb).
    last_into: Vec<Option<SmolStr>>,
    /// Schedule calls whose input was sent and whose result was not, by root id.
    open_calls: Vec<SmolStr>,
}

/// The schedule call a message belongs to: its id's first component.
fn root(msg: &str) -> SmolStr {
    SmolStr::from(msg.split('.').next().unwrap_or(msg))
}

/// Read the trace at `path`. A trace cut short (a killed run) gives what it holds.
pub fn read(path: &Path) -> Result<Steps, String> {
    let reader = TraceReader::open(path).map_err(|e| e.to_string())?;
    let mut r = Reader::default();
    for ev in reader {
        match ev {
            Ok(ev) => r.event(ev.event),
            Err(_) => break,
        }
    }
    let mut left: Vec<Vec<Taken>> = vec![Vec::new(); r.s.names.len()];
    let mut rest: Vec<((SmolStr, SmolStr, SmolStr), Taken)> = r.sends.into_iter().collect();
    rest.sort_by_key(|(_, t)| t.order);
    for ((_, _, thread), t) in rest {
        if let Some(&g) = r.index.get(thread.as_str()) {
            left[g].push(t);
        }
    }
    r.s.left = left;
    r.s.threads.resize_with(r.s.names.len(), Vec::new);
    r.s.closed.resize_with(r.s.names.len(), Vec::new);
    Ok(r.s)
}

fn join(into: &mut Clock, other: &[u32]) {
    if into.len() < other.len() {
        into.resize(other.len(), 0);
    }
    for (a, &b) in into.iter_mut().zip(other) {
        *a = (*a).max(b);
    }
}

fn set(c: &mut Clock, at: usize, n: u32) {
    if c.len() <= at {
        c.resize(at + 1, 0);
    }
    c[at] = n;
}

impl Reader {
    fn event(&mut self, ev: Event) {
        self.events += 1;
        match ev {
            Event::Batch { events } => events.into_iter().for_each(|e| self.event(e)),
            Event::Structure {
                operations,
                collections,
                ..
            } => {
                self.s.names = collections.into_iter().flat_map(|c| c.threads).collect();
                self.s.ops = operations.into_iter().map(|o| o.name).collect();
                self.index = self
                    .s
                    .names
                    .iter()
                    .enumerate()
                    .map(|(g, n)| (n.clone(), g))
                    .collect();
                let n = self.s.names.len();
                self.current.resize_with(n, Vec::new);
                self.s.threads.resize_with(n, Vec::new);
                self.s.closed.resize_with(n, Vec::new);
                self.last_into.resize(n, None);
            }
            Event::Send(e) => self.send(e),
            Event::Start(e) => {
                let Some(&g) = self.index.get(e.thread.as_str()) else {
                    return;
                };
                self.s.first.get_or_insert(g);
                if e.step == Step::Final {
                    if self.last_into[g].as_ref() != Some(&e.instance) {
                        self.s.late_final = true;
                    }
                    let k = self.s.threads[g].len() as u32;
                    self.s.closed[g].push((k, e.instance));
                } else {
                    let into = (e.step == Step::Absorb).then_some(e.instance);
                    self.last_into[g].clone_from(&into);
                    self.start(g, e.op, e.msg, into);
                }
            }

            Event::Deadlock { waits, cycle } => {
                let who: Vec<String> = waits
                    .iter()
                    .map(|w| match &w.why {
                        Some(why) => format!("{}: {why}", w.thread),
                        None => w.thread.to_string(),
                    })
                    .collect();
                let cycle = if cycle.is_empty() {
                    String::new()
                } else {
                    format!(" (cycle {})", cycle.join(" -> "))
                };
                self.s.deadlock = Some(format!("{}{cycle}", who.join("; ")));
            }
            Event::Panic {
                thread,
                op,
                message,
                msg,
            } => {
                // The call fails: it returns, with no result.
                let call = root(&msg);
                self.open_calls.retain(|c| *c != call);
                self.s
                    .panics
                    .push(format!("{op} on {thread} panicked: {message}"));
            }
            _ => {}
        }
    }

    fn send(&mut self, e: racetrack_protocol::SendEv) {
        let (sender, clock) = match e.thread.as_deref().map(|t| self.index.get(t)) {
            Some(Some(&g)) => (g as u64 + 1, self.current[g].clone()),
            // A thread no structure named: nothing to order it by.
            Some(None) => return,
            None => {
                // A schedule call's input while an earlier call has not returned.
                if !self.open_calls.is_empty() {
                    self.s.nested = true;
                }
                self.open_calls.push(root(&e.msg));
                let n = self.input.first().copied().unwrap_or(0) + 1;
                set(&mut self.input, 0, n);
                (log::SENDER_INPUT, self.input.clone())
            }
        };
        match (e.to_thread, e.to_op) {
            (Some(to), Some(op)) => {
                let from = match sender {
                    log::SENDER_INPUT => "the input".to_owned(),
                    c => self.s.names[(c - 1) as usize].clone(),
                };
                let label = format!("{op} {} from {from}", e.msg);
                let taken = Taken {
                    sender,
                    label,
                    sent: clock,
                    order: self.events,
                    msg: e.msg.clone(),
                    op: op.clone(),
                    into: None,
                    inputs: 0,
                    starts: 0,
                    clock: Vec::new(),
                };
                self.sends.insert((e.msg, op, to), taken);
            }
            // A result, back to the schedule's caller: later inputs come after it.
            _ if sender != log::SENDER_INPUT => {
                let call = root(&e.msg);
                self.open_calls.retain(|c| *c != call);
                let step = clock.get(sender as usize).copied().unwrap_or(0);
                self.s.results.push((sender, step, e.msg));
                join(&mut self.input, &clock);
            }
            _ => {}
        }
    }

    fn start(&mut self, g: usize, op: SmolStr, msg: SmolStr, into: Option<SmolStr>) {
        let k = self.s.threads[g].len() as u32;
        let mut clock = self.current[g].clone();
        let key = (msg.clone(), op.clone(), SmolStr::from(self.s.names[g].as_str()));
        let unknown = !self.sends.contains_key(&key);
        self.s.unknown |= unknown;
        let mut taken = self.sends.remove(&key).unwrap_or_else(|| Taken {
            sender: UNKNOWN,
            label: format!("{op} {msg}"),
            sent: Vec::new(),
            order: 0,
            msg,
            op,
            into: None,
            inputs: 0,
            starts: 0,
            clock: Vec::new(),
        });
        join(&mut clock, &taken.sent);
        set(&mut clock, g + 1, k + 1);
        taken.order = self.events;
        taken.into = into;
        taken.inputs = clock.first().copied().unwrap_or(0);
        taken.clock.clone_from(&clock);
        taken.starts = u64::from(k) + self.s.closed[g].len() as u64;
        self.current[g] = clock;
        self.s.threads[g].push(taken);
    }
}

impl Steps {
    /// Steps on messages in all.
    pub fn delivered(&self) -> u64 {
        self.threads.iter().map(|t| t.len() as u64).sum()
    }

    /// What every thread took, hashed: one ordering, one value.
    pub fn ordering(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for t in &self.threads {
            t.len().hash(&mut h);
            t.iter().for_each(|s| s.sender.hash(&mut h));
        }
        h.finish()
    }

    /// The senders thread `g` could have taken a message from at its step `k` (its own
    /// sender first): those whose next message to it after its first `k` steps was not
    /// sent after step `k`. With each, the clock of the step that sent that message.
    pub fn candidates(&self, g: usize, k: usize) -> Vec<(u64, &Clock)> {
        let steps = &self.threads[g];
        let mut out: Vec<(u64, &Clock)> = vec![(steps[k].sender, &steps[k].sent)];
        // Each sender's next message only: a later one cannot pass it.
        let mut seen = vec![steps[k].sender];
        for t in steps[k..].iter().chain(self.left.get(g).into_iter().flatten()) {
            if t.sender == UNKNOWN || seen.contains(&t.sender) {
                continue;
            }
            seen.push(t.sender);
            if t.sent.get(g + 1).copied().unwrap_or(0) as usize <= k {
                out.push((t.sender, &t.sent));
            }
        }
        out
    }

    /// The run as a replay log: complete (`finished`) or a prefix.
    pub fn log(&self, header: &LogHeader, finished: bool) -> Vec<u8> {
        let mut out = log::header_bytes(header);
        for (g, steps) in self.threads.iter().enumerate() {
            let senders: Vec<u64> = steps
                .iter()
                .map(|t| t.sender)
                .take_while(|&s| s != UNKNOWN)
                .collect();
            put_thread(&mut out, g, &senders);
        }
        if finished {
            let end = LogEnd {
                threads: self
                    .names
                    .iter()
                    .zip(&self.threads)
                    .map(|(name, t)| LogThread {
                        name: name.clone(),
                        steps: t.len() as u64,
                    })
                    .collect(),
                ops: self.ops.clone(),
                prefix: false,
            };
            out.extend(log::end_record(&end));
        }
        out
    }
}

/// Append thread `g`'s `senders`, one per step, as runs.
pub fn put_thread(out: &mut Vec<u8>, g: usize, senders: &[u64]) {
    let mut runs: Vec<LogRun> = Vec::new();
    for &sender in senders {
        match runs.last_mut() {
            Some(r) if r.sender == sender => r.count += 1,
            _ => runs.push(LogRun { sender, count: 1 }),
        }
    }
    if runs.is_empty() {
        return;
    }
    let mut bytes = Vec::new();
    runs.iter().for_each(|&r| log::put_run(&mut bytes, r));
    log::put_runs_record(out, g, runs.len() as u64, &bytes);
}

/// A schedule's picks, by thread: each thread's forced senders from its first step on;
/// an error when it skips a step (a branch keeps every thread's first steps, never a gap).
pub fn prefixes(names: &[String], forced: &BTreeMap<(String, u32), i32>) -> Result<Vec<Vec<u64>>, String> {
    let mut out = vec![Vec::new(); names.len()];
    for ((thread, k), &sender) in forced {
        let g = names
            .iter()
            .position(|n| n == thread)
            .ok_or_else(|| format!("the schedule names {thread}, which no run had"))?;
        if *k as usize != out[g].len() {
            return Err(format!(
                "the schedule skips {thread}'s step #{}",
                out[g].len() + 1
            ));
        }
        out[g].push(sender as u64);
    }
    Ok(out)
}
