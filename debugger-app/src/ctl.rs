//! `racetrack ctl`: the headless controller. Commands are JSON lines on stdin
//! (`shared/DESIGN.md` §5), events JSON lines on stdout. `wait` is handled here:
//!
//! - `{"cmd":"wait","until":"held"}` — some event is held (optionally `"thread"`, `"op"`);
//! - `{"cmd":"wait","until":"exit"}` — the program exited (or the connection closed);
//! - `{"cmd":"wait","until":"queue","thread":"proc[1]","count":3}` — that many messages are
//!   pending on the thread (optionally only those for `"op"`);
//! - `{"cmd":"wait","until":"event","match":{"event":"recv","thread":"proc[1]"}}` — an event
//!   whose fields include all of `match`, received since the previous command was sent
//!   (`"since":"command"`, the default), or since the previous `continue` was sent
//!   (`"since":"continue"`; before any, since the session began): for an event that may
//!   come before a later command, such as a neighbour's update that was already done when
//!   a `move` went out.
//!
//! Each takes `timeout_ms` (default 10000) and answers `{"event":"waited","until":..}` or an
//! `error`. `move` sends a partial `reorder` (`"rest"`: the messages it does not name keep
//! their order, arrivals included). At the end of stdin the controller detaches (the
//! program runs free) and waits for the program to finish.
//!
//! A scenario ([`Input::Script`]) sends each command with its line number as request
//! number (`"req": N`) and waits for the agent's verdict (`ok` or `error` carrying it)
//! before the next line: any line refused, by the agent or here, stops the scenario with
//! `scenario line N: …; stopping the scenario`; the controller detaches, waits for the
//! program (printing its `exit` and the `outcome`) and exits with [`SCENARIO_STOPPED`].
//! Stdin lines carry no request number and are not awaited.

use crate::conn::{CommandSender, ConnEvent, Connection};
use crate::launch::Launched;
use crate::model::Model;
use racetrack_protocol::{Command, Event, HoldReason, Names, PackedEv};
use serde_json::Value;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

const RECENT_MAX: usize = 200_000;
/// Items (single events, or packed frames of up to 1,024) the printer takes at once.
const CHUNK: usize = 64;
/// Printed bytes written to stdout at a time.
const PRINT_CHUNK: usize = 64 * 1024;
/// The controller's exit code when a scenario stopped at a failing line (whatever the
/// program's own exit, which is printed in its `exit` event).
pub const SCENARIO_STOPPED: i32 = 3;
/// How long a scenario waits for a command's verdict while nothing arrives (events still
/// arriving restart the wait: the verdict may be behind them in the stream).
const VERDICT_TIMEOUT: Duration = Duration::from_secs(10);

/// Recent events as they arrived: single events, and packed frames kept whole (their
/// events are expanded only when a `wait` matches against them).
enum Recent {
    /// Boxed: the slots stay small.
    Event(Box<Event>),
    Frame(Arc<Names>, Vec<PackedEv>),
}

impl Recent {
    fn len(&self) -> usize {
        match self {
            Recent::Event(_) => 1,
            Recent::Frame(_, ps) => ps.len(),
        }
    }

    /// How many of the events, numbered from `first`, come after `mark` and match.
    fn count_matching(&self, first: u64, mark: u64, pattern: &Value) -> usize {
        match self {
            Recent::Event(e) => usize::from(first > mark && matches(e, pattern)),
            Recent::Frame(names, ps) => {
                let kind = pattern.get("event").and_then(Value::as_str);
                ps.iter()
                    .zip(first..)
                    .filter(|(p, i)| {
                        *i > mark
                            && kind.is_none_or(|k| k == p.kind_name())
                            && names.expand((*p).clone()).is_ok_and(|e| matches(&e, pattern))
                    })
                    .count()
            }
        }
    }
}

#[derive(Default)]
struct State {
    model: Model,
    /// Recent events, with the arrival index of their first event.
    recent: VecDeque<(u64, Recent)>,
    /// Events in `recent`.
    recent_len: usize,
    /// Arrival index when the last command was sent (see [`Ctl::announced`]).
    mark: u64,
    /// Arrival index when the last `continue` was sent (`wait until event`, `"since":"continue"`).
    continue_mark: u64,
    /// Held events a command of ours releases (their `released` may not have arrived yet):
    /// `wait until held` ignores them.
    releasing: std::collections::HashSet<u64>,
    /// `wait until quiet`: events seen, and since when that count has not changed.
    quiet_count: u64,
    quiet_since: Option<Instant>,
    closed: bool,
    /// Commands are being handled (a scenario's, or stdin lines received together): the
    /// session's end waits for their answers (a `wait` that the last events satisfy says
    /// so before `exit`). See [`Busy`].
    busy: bool,
    exit_code: Option<Option<i32>>,
    /// Verdicts (`ok` / `error` carrying a request number) of a scenario's commands, by
    /// number, until the scenario takes them.
    verdicts: std::collections::HashMap<u64, Result<(), String>>,
}

struct Ctl {
    exit_printed: std::sync::atomic::AtomicBool,
    /// A scenario line failed: the controller exits with [`SCENARIO_STOPPED`].
    scenario_stopped: std::sync::atomic::AtomicBool,
    /// Scenario mode: print the outcome after `exit`.
    outcome_pending: Mutex<bool>,
    /// The program's last stdout line.
    last_stdout: Mutex<String>,
    state: Mutex<State>,
    changed: Condvar,
    out: Mutex<std::io::Stdout>,
    /// Events arrived, counted before they are printed (the event thread prints a chunk,
    /// then ingests it; `recent` numbers them from this count): what a command's mark is
    /// taken from, so that an event a user has seen printed before sending a command never
    /// counts as arriving after it.
    announced: std::sync::atomic::AtomicU64,
}

impl Ctl {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Print `exit` once, however the session ends (and a scenario's `outcome` after it).
    fn print_exit(&self, code: Option<i32>) {
        drop(self.print_exit_and_hold(code));
    }

    /// Like [`Ctl::print_exit`], returning stdout still locked: the caller ends the process
    /// without anything printed after these lines.
    fn print_exit_and_hold(&self, code: Option<i32>) -> MutexGuard<'_, std::io::Stdout> {
        let mut out = self.out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !self.exit_printed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let _ = writeln!(out, "{}", Event::Exit { code }.to_json());
            if *self
                .outcome_pending
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
            {
                let last = self
                    .last_stdout
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone();
                let result = serde_json::from_str(&last).unwrap_or(Value::String(last));
                let _ = writeln!(out, "{}", Event::Outcome { result }.to_json());
            }
            let _ = out.flush();
        }
        out
    }

    /// Print what arrived, up to the connection's end, with one flush.
    fn print_all(&self, items: &[ConnEvent], buf: &mut Vec<u8>) {
        let mut out = self.out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for item in items {
            match item {
                ConnEvent::Event(ev) => {
                    let _ = serde_json::to_writer(&mut *buf, ev);
                    buf.push(b'\n');
                }
                // Printed from the compact form, exactly as the expanded events would be.
                ConnEvent::Packed(names, ps) => {
                    for p in ps {
                        p.append_json(names, buf);
                        buf.push(b'\n');
                    }
                }
                ConnEvent::Closed(_) => break,
            }
            if buf.len() >= PRINT_CHUNK {
                let _ = out.write_all(buf);
                buf.clear();
            }
        }
        let _ = out.write_all(buf);
        buf.clear();
        // One huge event (up to a frame's 16 MiB) does not keep its room for good.
        buf.shrink_to(2 * PRINT_CHUNK);
        let _ = out.flush();
    }

    /// The controller's exit code: the program's (`code`), unless a scenario stopped.
    fn exit_code(&self, code: i32) -> i32 {
        if self.scenario_stopped.load(std::sync::atomic::Ordering::SeqCst) {
            SCENARIO_STOPPED
        } else {
            code
        }
    }

    fn print(&self, ev: &Event) {
        let mut out = self.out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = writeln!(out, "{}", ev.to_json());
        let _ = out.flush();
    }
}

/// Run the controller on an open connection; with `launched`, forward the program's
/// output and exit code. Returns the process exit code.
pub fn run(conn: Connection, launched: Option<Launched>) -> i32 {
    run_with(conn, launched, Input::Stdin)
}

/// Where commands come from.
pub enum Input {
    /// JSON lines on stdin (interactive or piped).
    Stdin,
    /// A scenario file's lines (variables already substituted). Each command waits for its
    /// verdict; the first failing or refused line stops it (exit code
    /// [`SCENARIO_STOPPED`]); at its end the controller detaches, waits for the program and
    /// prints `{"event":"outcome","result":...}` with the program's final line.
    Script(String),
}

/// Substitute `${NAME}` by its value in a scenario; a value `coll[i]` also defines
/// `${NAME-1}` = `coll[i-1]` and `${NAME+1}` = `coll[i+1]` (a thread's neighbours).
pub fn substitute(text: &str, vars: &[(String, String)]) -> Result<String, String> {
    let mut out = text.to_owned();
    for (k, v) in vars {
        out = out.replace(&format!("${{{k}}}"), v);
        if let Some((coll, rest)) = v.split_once('[') {
            if let Some(Ok(i)) = rest.strip_suffix(']').map(str::parse::<usize>) {
                if let Some(prev) = i.checked_sub(1) {
                    out = out.replace(&format!("${{{k}-1}}"), &format!("{coll}[{prev}]"));
                }
                out = out.replace(&format!("${{{k}+1}}"), &format!("{coll}[{}]", i + 1));
            }
        }
    }
    if let Some(i) = out.find("${") {
        let name: String = out[i..].chars().take_while(|c| *c != '}').collect();
        return Err(format!(
            "scenario variable `{name}}}` has no value (pass --set NAME=VALUE)"
        ));
    }
    Ok(out)
}

/// Like [`run`], with commands from `input`.
pub fn run_with(conn: Connection, launched: Option<Launched>, input: Input) -> i32 {
    let ctl = Arc::new(Ctl {
        exit_printed: Default::default(),
        scenario_stopped: Default::default(),
        outcome_pending: Mutex::new(false),
        last_stdout: Mutex::new(String::new()),
        state: Mutex::new(State {
            model: Model::lean(),
            ..State::default()
        }),
        changed: Condvar::new(),
        out: Mutex::new(std::io::stdout()),
        announced: Default::default(),
    });
    let (conn, rx) = conn.split();
    // Events from the agent.
    {
        let (ctl2, conn) = (ctl.clone(), conn.clone());
        let spawned = std::thread::Builder::new()
            .name("racetrack-ctl-events".into())
            .spawn(move || {
                let ctl = ctl2;
                // Take what has arrived (up to a chunk), print it with one flush, ingest it
                // under one lock: per-event syscalls and locking would make the controller
                // the bottleneck of a fast program.
                let mut chunk = Vec::with_capacity(CHUNK);
                let mut printed = Vec::with_capacity(PRINT_CHUNK + 4096);
                'outer: while let Ok(first) = rx.recv() {
                    chunk.clear();
                    chunk.push(first);
                    while chunk.len() < CHUNK {
                        match rx.try_recv() {
                            Ok(ce) => chunk.push(ce),
                            Err(_) => break,
                        }
                    }
                    let mut closed = None;
                    for ce in &chunk {
                        match ce {
                            ConnEvent::Event(ev) => {
                                if let (Some(id), true) = (ev.event_id(), is_ack_all(ev)) {
                                    // The thesis' design: acknowledge every event over the network.
                                    conn.send(Command::Continue {
                                        thread: None,
                                        event_id: Some(id),
                                        trace: None,
                                    });
                                }
                            }
                            // Packed events are never held: nothing to acknowledge.
                            ConnEvent::Packed(..) => {}
                            ConnEvent::Closed(reason) => closed = Some(reason.clone()),
                        }
                    }
                    // Counted before printed: see `Ctl::announced`. Numbered from there
                    // below (up to the close).
                    let arrived: usize = chunk
                        .iter()
                        .map_while(|ce| match ce {
                            ConnEvent::Event(_) => Some(1),
                            ConnEvent::Packed(_, ps) => Some(ps.len()),
                            ConnEvent::Closed(_) => None,
                        })
                        .sum();
                    let mut next = 1 + ctl
                        .announced
                        .fetch_add(arrived as u64, std::sync::atomic::Ordering::SeqCst);
                    ctl.print_all(&chunk, &mut printed);
                    let mut st = ctl.lock();
                    for ce in chunk.drain(..) {
                        let item = match ce {
                            ConnEvent::Event(ev) => {
                                match &ev {
                                    Event::Ok { req: Some(n), .. } => {
                                        st.verdicts.insert(*n, Ok(()));
                                    }
                                    Event::Error {
                                        req: Some(n),
                                        message,
                                    } => {
                                        st.verdicts.insert(*n, Err(message.clone()));
                                    }
                                    _ => {}
                                }
                                st.model.ingest(&ev);
                                Recent::Event(Box::new(ev))
                            }
                            ConnEvent::Packed(names, ps) => {
                                for p in &ps {
                                    st.model.ingest_packed(&names, p);
                                }
                                Recent::Frame(names, ps)
                            }
                            ConnEvent::Closed(_) => break,
                        };
                        let first = next;
                        next += item.len() as u64;
                        st.recent_len += item.len();
                        st.recent.push_back((first, item));
                    }
                    // Keep at least RECENT_MAX events.
                    while st
                        .recent
                        .front()
                        .is_some_and(|(_, r)| st.recent_len - r.len() >= RECENT_MAX)
                    {
                        if let Some((_, r)) = st.recent.pop_front() {
                            st.recent_len -= r.len();
                        }
                    }
                    drop(st);
                    ctl.changed.notify_all();
                    if let Some(reason) = closed {
                        if let Some(r) = reason {
                            ctl.print(&Event::Error {
                                message: r,
                                req: None,
                            });
                        }
                        break 'outer;
                    }
                }
                ctl.lock().closed = true;
                ctl.changed.notify_all();
            });
        if let Err(e) = spawned {
            ctl.print(&Event::Error {
                message: format!("cannot start the event thread: {e}"),
                req: None,
            });
            return 1;
        }
    }
    // The program's output and exit.
    let program_mode = launched.is_some();
    if let Some(l) = launched {
        spawn_program_watch(ctl.clone(), l);
    } else {
        let ctl2 = ctl.clone();
        let _ = std::thread::Builder::new()
            .name("racetrack-ctl-exit".into())
            .spawn(move || {
                let mut st = ctl2.lock();
                while !st.closed || st.busy {
                    st = ctl2
                        .changed
                        .wait(st)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                drop(st);
                ctl2.print_exit(None);
                std::process::exit(ctl2.exit_code(0));
            });
    }
    // Commands from stdin.
    if matches!(input, Input::Script(_)) {
        *ctl.outcome_pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
    }
    match input {
        Input::Stdin => {
            let mut reader = BufReader::new(std::io::stdin().lock());
            let mut line = String::new();
            // Busy from a line's arrival until its answer; a line already received (a
            // whole one in the buffer) keeps it busy, so the session does not end between
            // two commands sent together.
            let mut busy = Busy::idle(&ctl);
            loop {
                line.clear();
                if !reader.read_line(&mut line).is_ok_and(|k| k > 0) {
                    break;
                }
                busy.set();
                let cmd = line.trim();
                if !cmd.is_empty() {
                    handle_line_printing(&ctl, &conn, cmd, None, |e| e);
                }
                if !reader.buffer().contains(&b'\n') {
                    busy.clear();
                }
            }
        }
        Input::Script(text) => {
            // The whole scenario is known: busy until its end.
            let mut busy = Busy::idle(&ctl);
            busy.set();
            for (n, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                // Each command carries its line number as request number and waits for
                // its verdict: whatever the agent refuses stops the scenario here.
                if !handle_line_printing(&ctl, &conn, line, Some(n as u64 + 1), |e| {
                    format!("scenario line {}: {e}; stopping the scenario", n + 1)
                }) {
                    ctl.scenario_stopped
                        .store(true, std::sync::atomic::Ordering::SeqCst);
                    break;
                }
            }
        }
    }

    // End of the script: let the program run free and wait for it.
    conn.send(Command::Detach);
    let mut st = ctl.lock();
    loop {
        if program_mode {
            if let Some(code) = st.exit_code {
                return ctl.exit_code(code.unwrap_or(1));
            }
        } else if st.closed {
            drop(st);
            ctl.print_exit(None);
            return ctl.exit_code(0);
        }
        st = ctl
            .changed
            .wait(st)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }
}

/// [`handle_line`], its error printed as `error` says it; whether it succeeded.
fn handle_line_printing(
    ctl: &Ctl,
    conn: &CommandSender,
    line: &str,
    req: Option<u64>,
    error: impl FnOnce(String) -> String,
) -> bool {
    let r = handle_line(ctl, conn, line, req);
    if let Err(e) = &r {
        ctl.print(&Event::Error {
            message: error(e.clone()),
            req: None,
        });
    }
    r.is_ok()
}

/// Commands are being handled (see [`State::busy`]) while one of these is set: the
/// session's end waits. Cleared (and the end told) by [`Busy::clear`] or when dropped,
/// however the handling ends.
struct Busy<'a> {
    ctl: &'a Ctl,
    on: bool,
}

impl<'a> Busy<'a> {
    /// Not set yet.
    fn idle(ctl: &'a Ctl) -> Self {
        Busy { ctl, on: false }
    }

    fn set(&mut self) {
        if !self.on {
            self.ctl.lock().busy = true;
            self.on = true;
        }
    }

    /// Not busy any more (until the next [`Busy::set`]).
    fn clear(&mut self) {
        if std::mem::take(&mut self.on) {
            self.ctl.lock().busy = false;
            self.ctl.changed.notify_all();
        }
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.clear();
    }
}

fn is_ack_all(ev: &Event) -> bool {
    match ev {
        Event::Send(e) => e.held && e.reason == Some(HoldReason::AckAll),
        Event::Start(e) | Event::Stop(e) => e.held && e.reason == Some(HoldReason::AckAll),
        _ => false,
    }
}

/// Handle one command line. With `req`, a command for the agent is sent with that request
/// number and its verdict is awaited: an agent's refusal is this line's error.
fn handle_line(ctl: &Ctl, conn: &CommandSender, line: &str, req: Option<u64>) -> Result<(), String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("malformed JSON: {e}"))?;
    let cmd = match v.get("cmd").and_then(Value::as_str) {
        Some("wait") => return wait(ctl, &v),
        Some("move") => match move_cmd(&ctl.lock().model, &v)? {
            Some(cmd) => cmd,
            None => return Ok(()), // `"optional": true` and nothing to move
        },
        Some("edit_field") => edit_field(&ctl.lock().model, &v)?,
        _ => Command::parse(line)?,
    };
    {
        let mut st = ctl.lock();
        st.model.note_command(&cmd);
        // Every event printed before this command counts as before it (and maybe a few
        // not printed yet: the agent has not seen the command, they cannot be its effects).
        st.mark = ctl.announced.load(std::sync::atomic::Ordering::SeqCst);
        if matches!(cmd, Command::Continue { .. }) {
            st.continue_mark = st.mark;
        }
        let releasing: Vec<u64> = match &cmd {
            Command::Continue { thread, event_id, .. } => st
                .model
                .held
                .iter()
                .filter(|(id, e)| {
                    event_id.is_none_or(|x| x == **id)
                        && thread.as_deref().is_none_or(|t| e.thread() == Some(t))
                })
                .map(|(id, _)| *id)
                .collect(),
            // A reorder at a held start puts the message back: that hold ends.
            Command::Reorder { thread, .. } => match st.model.held_of(thread) {
                Some((id, Event::Start(_))) => vec![*id],
                _ => Vec::new(),
            },
            Command::Detach => st.model.held.keys().copied().collect(),
            _ => Vec::new(),
        };
        st.releasing.extend(releasing);
    }
    if !conn.send(racetrack_protocol::Request { req, cmd }) {
        return Err("not connected: the command was not sent".into());
    }
    match req {
        Some(n) => verdict(ctl, n),
        None => Ok(()),
    }
}

/// Wait for the verdict of request `n`: the agent's `error` message is the error; no answer
/// for [`VERDICT_TIMEOUT`] with nothing arriving, or the connection's end, is one too.
fn verdict(ctl: &Ctl, n: u64) -> Result<(), String> {
    let mut st = ctl.lock();
    let mut seen = ctl.announced.load(std::sync::atomic::Ordering::SeqCst);
    let mut deadline = Instant::now() + VERDICT_TIMEOUT;
    loop {
        if let Some(v) = st.verdicts.remove(&n) {
            return v;
        }
        if st.closed {
            return Err(
                "the connection closed (the program ended?) before the agent answered the command".into(),
            );
        }
        let arrived = ctl.announced.load(std::sync::atomic::Ordering::SeqCst);
        let now = Instant::now();
        if arrived != seen {
            seen = arrived;
            deadline = now + VERDICT_TIMEOUT;
        }
        if now >= deadline {
            return Err(format!(
                "no answer from the agent for {} s",
                VERDICT_TIMEOUT.as_secs()
            ));
        }
        st = ctl
            .changed
            .wait_timeout(st, (deadline - now).min(Duration::from_millis(50)))
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0;
    }
}

/// `{"cmd":"move","thread":T,"op":OP|"msg":ID,"to":"front"|"back"}`: a partial reorder of a
/// held thread naming the matching messages the controller has seen (pending, plus the one
/// the thread is about to start): they go to the front (`"rest":"after"`) or the back
/// (`"rest":"before"`), and every other message — including ones that arrive after the
/// controller looked — keeps its relative order.
fn move_cmd(model: &Model, v: &Value) -> Result<Option<Command>, String> {
    let thread = v
        .get("thread")
        .and_then(Value::as_str)
        .ok_or("move needs `thread`")?;
    let to = v.get("to").and_then(Value::as_str).unwrap_or("front");
    let rest = match to {
        "front" => racetrack_protocol::Rest::After,
        "back" => racetrack_protocol::Rest::Before,
        other => return Err(format!("move: `to` must be front or back, not {other}")),
    };
    let (op, msg) = (
        v.get("op").and_then(Value::as_str),
        v.get("msg").and_then(Value::as_str),
    );
    if op.is_none() && msg.is_none() {
        return Err("move needs `op` or `msg` to say which messages move".into());
    }
    let mut rows: Vec<(String, String)> = Vec::new();
    if let Some((_, Event::Start(s))) = model.held_of(thread) {
        if s.step != racetrack_protocol::Step::Final {
            rows.push((s.msg.clone(), s.op.clone()));
        }
    } else if model.held_of(thread).is_none() {
        return Err(format!("{thread} is not held; a move needs it suspended"));
    }
    rows.extend(
        model
            .queues
            .get(thread)
            .into_iter()
            .flatten()
            .map(|m| (m.id.to_string(), m.op.to_string())),
    );
    // `id@op` when the id is not unique among what the controller has seen (a message
    // arriving later with the same id for another operation makes the agent ask for it).
    let key = |(id, op): &(String, String)| {
        if rows.iter().filter(|r| &r.0 == id).count() > 1 {
            format!("{id}@{op}")
        } else {
            id.clone()
        }
    };
    let picked = |r: &&(String, String)| op.is_some_and(|o| r.1 == o) || msg.is_some_and(|m| r.0 == m);
    let order: Vec<String> = rows.iter().filter(picked).map(key).collect();
    if order.is_empty() {
        if v.get("optional").and_then(Value::as_bool) == Some(true) {
            return Ok(None);
        }
        return Err(format!("no message pending on {thread} matches"));
    }
    Ok(Some(Command::Reorder {
        thread: thread.to_owned(),
        order,
        rest: Some(rest),
    }))
}

/// `{"cmd":"edit_field","thread":T,"field":F,"value":V}`: edit one top-level field of the
/// send `T` is held at.
fn edit_field(model: &Model, v: &Value) -> Result<Command, String> {
    let thread = v
        .get("thread")
        .and_then(Value::as_str)
        .ok_or("edit_field needs `thread`")?;
    let field = v
        .get("field")
        .and_then(Value::as_str)
        .ok_or("edit_field needs `field`")?;
    let value = v.get("value").cloned().ok_or("edit_field needs `value`")?;
    match model.held_of(thread) {
        Some((id, Event::Send(s))) => {
            let mut content = s.content.clone().ok_or("the held send carries no content")?;
            let obj = content.as_object_mut().ok_or("the message is not an object")?;
            obj.insert(field.to_owned(), value);
            Ok(Command::Edit {
                event_id: *id,
                content,
            })
        }
        _ => Err(format!("{thread} is not held at a send")),
    }
}

fn matches(ev: &Event, pattern: &Value) -> bool {
    let Ok(Value::Object(ev)) = serde_json::to_value(ev) else {
        return false;
    };
    let Value::Object(p) = pattern else { return false };
    p.iter().all(|(k, v)| ev.get(k) == Some(v))
}

/// Where `wait until event` starts counting.
#[derive(Clone, Copy)]
enum Since {
    /// The previous command sent (the default).
    Command,
    /// The previous `continue` sent.
    Continue,
}

fn wait(ctl: &Ctl, v: &Value) -> Result<(), String> {
    let until = v
        .get("until")
        .and_then(Value::as_str)
        .ok_or("wait: `until` must be one of held, exit, queue, event")?;
    let timeout = Duration::from_millis(v.get("timeout_ms").and_then(Value::as_u64).unwrap_or(10_000));
    let thread = v.get("thread").and_then(Value::as_str);
    let op = v.get("op").and_then(Value::as_str);
    let kind = v.get("event").and_then(Value::as_str);
    let count = v.get("count").and_then(Value::as_u64).unwrap_or(1) as usize;
    let pattern = v.get("match").cloned();
    match until {
        "held" | "exit" | "quiet" => {}
        "queue" if thread.is_some() => {}
        "queue" => return Err("wait until queue needs `thread`".into()),
        "event" if pattern.as_ref().is_some_and(Value::is_object) => {}
        "event" => return Err("wait until event needs `match`: an object of fields".into()),
        other => {
            return Err(format!(
                "wait: unknown `until` value `{other}` (held, exit, queue, event, quiet)"
            ))
        }
    }
    let since = match (until, v.get("since")) {
        (_, None) => Since::Command,
        ("event", Some(s)) if s == "command" => Since::Command,
        ("event", Some(s)) if s == "continue" => Since::Continue,
        ("event", Some(s)) => {
            return Err(format!(
                "wait: unknown `since` value {s} (command, the default, or continue)"
            ))
        }
        (other, Some(_)) => return Err(format!("wait until {other}: `since` is only for until event")),
    };
    let deadline = Instant::now() + timeout;
    let mut st = ctl.lock();
    loop {
        let ok = match until {
            "held" => st.model.held.iter().any(|(id, e)| {
                !st.releasing.contains(id)
                    && thread.is_none_or(|t| e.thread() == Some(t))
                    && kind.is_none_or(|k| match e {
                        Event::Send(_) => k == "send",
                        Event::Start(_) => k == "start",
                        Event::Stop(_) => k == "stop",
                        _ => false,
                    })
                    && op.is_none_or(|o| match e {
                        Event::Send(s) => s.op.as_deref() == Some(o),
                        Event::Start(s) | Event::Stop(s) => s.op == o,
                        _ => false,
                    })
            }),
            "exit" => st.exit_code.is_some() || st.closed,
            "quiet" => {
                // No event for `ms` (default 300): the program is idle or everything is held.
                let quiet = Duration::from_millis(v.get("ms").and_then(Value::as_u64).unwrap_or(300));
                let arrived = ctl.announced.load(std::sync::atomic::Ordering::SeqCst);
                if arrived != st.quiet_count {
                    st.quiet_count = arrived;
                    st.quiet_since = Some(Instant::now());
                }
                st.quiet_since.get_or_insert_with(Instant::now).elapsed() >= quiet
            }
            "queue" => st
                .model
                .queues
                .get(thread.unwrap_or_default())
                .is_some_and(|q| q.iter().filter(|m| op.is_none_or(|o| m.op == o)).count() >= count),
            _ => {
                let mark = match since {
                    Since::Command => st.mark,
                    Since::Continue => st.continue_mark,
                };
                let p = pattern.as_ref().unwrap_or(&Value::Null);
                st.recent
                    .iter()
                    .map(|(first, r)| r.count_matching(*first, mark, p))
                    .sum::<usize>()
                    >= count
            }
        };
        if ok {
            drop(st);
            ctl.print(&Event::Waited {
                until: until.to_owned(),
            });
            return Ok(());
        }
        if until != "exit" && (st.closed || st.exit_code.is_some()) {
            return Err(format!("wait until {until}: the program ended first"));
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(format!(
                "wait until {until} timed out after {} ms",
                timeout.as_millis()
            ));
        }
        st = ctl
            .changed
            .wait_timeout(st, (deadline - now).min(Duration::from_millis(50)))
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0;
    }
}

fn spawn_program_watch(ctl: Arc<Ctl>, mut l: Launched) {
    let out_thread = l.stdout.take().map(|stdout| {
        let ctl = ctl.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                *ctl.last_stdout
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = line.clone();
                ctl.print(&Event::Output {
                    stream: "stdout".into(),
                    line,
                });
            }
        })
    });
    let err_rx = std::mem::replace(&mut l.stderr_lines, std::sync::mpsc::channel().1);
    let err_thread = {
        let ctl = ctl.clone();
        std::thread::spawn(move || {
            for line in err_rx {
                ctl.print(&Event::Output {
                    stream: "stderr".into(),
                    line,
                });
            }
        })
    };
    let _ = std::thread::Builder::new()
        .name("racetrack-ctl-exit".into())
        .spawn(move || {
            let status = l.child.wait();
            if let Some(t) = out_thread {
                let _ = t.join();
            }
            let _ = err_thread.join();
            // The program is gone; its socket ends after the last frames it sent, so every
            // event is printed before `exit` (bounded in case the connection hangs).
            let deadline = Instant::now() + Duration::from_secs(120);
            let mut st = ctl.lock();
            while (!st.closed || st.busy) && Instant::now() < deadline {
                st = ctl
                    .changed
                    .wait_timeout(st, Duration::from_millis(50))
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
            }
            drop(st);
            let code = status.ok().and_then(|s| s.code());
            // `exit` (and a scenario's `outcome`) are the last lines: stdout stays locked
            // while the process ends, so nothing woken by the exit prints after them.
            let _last = ctl.print_exit_and_hold(code);
            ctl.lock().exit_code = Some(code);
            ctl.changed.notify_all();
            std::process::exit(ctl.exit_code(code.unwrap_or(1)));
        });
}
