//! The debugging agent: the [`Hook`] that a runtime gets when `RACETRACK_LISTEN` is set.
//!
//! - **Holding is decided here**, in the program: global step mode, operation breakpoints
//!   (operation, thread), paused threads, tracing, "ack every event", and the
//!   `RACETRACK_WAIT` start hold. An event the policy does not hold is appended to a
//!   buffer and streamed in batches by the agent's own thread (module `server`); the program
//!   thread never waits for the network. A held event is flushed at once and blocks only
//!   its own thread, which then serves the debugger's commands for it (release, reorder,
//!   edit, state) until released.
//! - Without a debugger attached, the runtime reads one flag the agent shares with it
//!   ([`Hook::active_flag`]) and calls no hook at all.
//! - Attached with nothing that could hold, edit or trace a message (free run), the agent
//!   only streams ([`Hook::streaming`]): the runtime keeps its batches and reports every
//!   message all the same; a breakpoint, paused thread, step mode, "ack every event" or
//!   content mode brings back the one-by-one path the holds need.
//! - The buffer is bounded: a debugger that cannot keep up slows the program down
//!   (backpressure on sends, starts and stops) instead of growing memory.
//! - Detaching (or the connection dropping) releases every hold and returns to free run.

mod record;
mod server;

use record::{Fast, Rec, Text};

use racetrack_protocol as proto;
use racetrack_protocol::{Command, Event, HoldReason};
use racetrack_runtime::hook::{
    CollectionInfo, GraphInfo, Hook, OpInfo, QueuedMsg, RecvEvent, Rest, SendEvent, StepEvent, StepKind,
    StreamedSend, StreamedStep, ThreadInfo,
};
use racetrack_runtime::ids::MsgId;
use racetrack_runtime::thread::ThreadSnap;
use racetrack_runtime::RuntimeView;
use racetrack_runtime::ScheduleError;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{mpsc, Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

/// Lock a mutex, ignoring poisoning: no user code runs while the agent's locks are held.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Streamed events buffered before producers wait for the debugger (backpressure).
const BUFFER_CAP: usize = 65_536;
/// Pending messages a `queue` reply lists (the others are counted in `more`).
const QUEUE_LIST_MAX: usize = 5_000;
/// The same, when contents are asked for.
const QUEUE_CONTENT_MAX: usize = 200;
/// Pending messages a snapshot lists over all threads (about 150 bytes each).
const SNAPSHOT_ENTRIES: usize = 40_000;
/// Buffered events that make the agent's thread flush before its next tick.
const FLUSH_AT: usize = 1024;
/// How long the program's exit waits for a debugger that takes no more events.
const EXIT_PATIENCE: Duration = Duration::from_secs(10);

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// `RACETRACK_LISTEN` is not an address.
    #[error("RACETRACK_LISTEN=`{0}` is not an address such as 127.0.0.1:0")]
    BadAddress(String),
    /// A non-loopback address without a token.
    #[error("RACETRACK_LISTEN={0} is not a loopback address; set RACETRACK_TOKEN to listen on it")]
    NotLoopback(SocketAddr),
    /// Binding failed.
    #[error("cannot listen on {0}: {1}")]
    Bind(SocketAddr, std::io::Error),
}

/// Start the agent as `RACETRACK_LISTEN` / `RACETRACK_WAIT` say, or `None` when
/// `RACETRACK_LISTEN` is unset. A configuration error is printed to stderr and the
/// program runs without the agent (it is a guest: it never stops the program).
pub fn start_from_env() -> Option<Arc<Agent>> {
    let listen = std::env::var("RACETRACK_LISTEN").ok()?;
    let wait = std::env::var("RACETRACK_WAIT").is_ok_and(|v| !v.is_empty() && v != "0");
    let token = std::env::var("RACETRACK_TOKEN").ok().filter(|t| !t.is_empty());
    match start(&listen, wait, token) {
        Ok(agent) => Some(agent),
        Err(e) => {
            eprintln!("racetrack: agent not started: {e}");
            None
        }
    }
}

/// Start an agent listening on `listen`; prints `racetrack: listening on ws://HOST:PORT`
/// to stderr once bound.
pub fn start(listen: &str, wait: bool, token: Option<String>) -> Result<Arc<Agent>, AgentError> {
    let addr: SocketAddr = listen
        .parse()
        .map_err(|_| AgentError::BadAddress(listen.to_owned()))?;
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(AgentError::NotLoopback(addr));
    }
    let listener = std::net::TcpListener::bind(addr).map_err(|e| AgentError::Bind(addr, e))?;
    let local = listener.local_addr().map_err(|e| AgentError::Bind(addr, e))?;
    let agent = Arc::new(Agent::new(wait, token));
    let _ = agent.url.set(format!("ws://{local}"));
    server::spawn(agent.clone(), listener);
    eprintln!("racetrack: listening on ws://{local}");
    Ok(agent)
}

/// A command for a thread suspended at a held event; `req` is the request number the
/// debugger's command carried, for its verdict.
enum HeldCmd {
    Release {
        trace: Option<bool>,
    },
    Reorder {
        order: Vec<String>,
        rest: Rest,
        req: Option<u64>,
    },
    Edit {
        content: Value,
        req: Option<u64>,
    },
    GetState {
        req: Option<u64>,
    },
    SetState {
        content: Value,
        req: Option<u64>,
    },
}

impl HeldCmd {
    /// The command's wire name and request number (none for a release: it has no verdict
    /// of its own).
    fn verdict_of(&self) -> Option<(&'static str, Option<u64>)> {
        match self {
            HeldCmd::Release { .. } => None,
            HeldCmd::Reorder { req, .. } => Some(("reorder", *req)),
            HeldCmd::Edit { req, .. } => Some(("edit", *req)),
            HeldCmd::GetState { req } => Some(("state", *req)),
            HeldCmd::SetState { req, .. } => Some(("set_state", *req)),
        }
    }
}

struct Held {
    thread: usize,
    thread_name: Arc<str>,
    is_send: bool,
    tx: mpsc::Sender<HeldCmd>,
    event: Event,
}

#[derive(Default)]
struct Stream {
    next_id: u64,
    buf: record::Chunks,
    held: BTreeMap<u64, Held>,
}

#[derive(Default)]
struct Policy {
    /// (operation id, thread global index) → trace from this breakpoint.
    breaks: HashMap<(usize, usize), bool>,
    paused: HashSet<usize>,
}

#[derive(Default)]
struct Structure {
    collections: Vec<Arc<CollectionInfo>>,
    ops: Vec<Arc<OpInfo>>,
    edges: Vec<(usize, usize)>,
}

/// The agent. Created by [`start`]; installed as the runtime's hook.
pub struct Agent {
    program: String,
    /// Any reason to look at events at all: attached, or the start hold pending.
    /// Shared with the runtime ([`Hook::active_flag`]).
    hot: Arc<AtomicBool>,
    attached: AtomicBool,
    /// A connection holds the controlling slot.
    claimed: AtomicBool,
    wait_pending: AtomicBool,
    closing: AtomicBool,
    finishing: AtomicBool,
    step_mode: AtomicBool,
    ack_all: AtomicBool,
    content: AtomicBool,
    has_policy: AtomicBool,
    /// Frames sent to the debugger so far (progress of a final flush).
    sent: std::sync::atomic::AtomicU64,
    sent_events: std::sync::atomic::AtomicU64,
    /// Times a program thread waited for room in the buffer (backpressure).
    waits: std::sync::atomic::AtomicU64,
    /// How long the `RACETRACK_WAIT` start hold held the program, in microseconds.
    start_hold_us: std::sync::atomic::AtomicU64,
    /// Counts attach snapshots (changed under the stream lock, at the cut): see
    /// [`Hook::session`].
    session: std::sync::atomic::AtomicU64,
    token: Option<String>,
    policy: Mutex<Policy>,
    stream: Mutex<Stream>,
    space: Condvar,
    wake: tokio::sync::Notify,
    finished: (Mutex<bool>, Condvar),
    view: OnceLock<RuntimeView>,
    structure: Mutex<Structure>,
    url: OnceLock<String>,
}

/// Where a held thread applies the debugger's commands.
trait Site {
    fn reorder(&mut self, order: &[String], rest: Rest) -> Result<bool, String>;
    fn edit(&mut self, content: Value) -> Result<(), String>;
    fn state(&self) -> Result<Value, String>;
    fn set_state(&mut self, content: Value) -> Result<(), String>;
    fn pending(&self) -> Vec<QueuedMsg>;
}

impl Site for SendEvent<'_> {
    fn reorder(&mut self, order: &[String], rest: Rest) -> Result<bool, String> {
        match &mut self.access {
            Some(a) => a.reorder_with(order, rest).map(|()| false),
            None => Err("the schedule caller has no queue".to_owned()),
        }
    }
    fn edit(&mut self, content: Value) -> Result<(), String> {
        self.replace_content(content)
    }
    fn state(&self) -> Result<Value, String> {
        self.access
            .as_ref()
            .map_or(Err("no thread".to_owned()), |a| a.state_json())
    }
    fn set_state(&mut self, content: Value) -> Result<(), String> {
        self.access
            .as_mut()
            .map_or(Err("no thread".to_owned()), |a| a.set_state_json(content))
    }
    fn pending(&self) -> Vec<QueuedMsg> {
        self.access.as_ref().map(|a| a.pending()).unwrap_or_default()
    }
}

impl Site for StepEvent<'_> {
    fn reorder(&mut self, order: &[String], rest: Rest) -> Result<bool, String> {
        self.access.reorder_with(order, rest)?;
        Ok(self.access.put_back())
    }
    fn edit(&mut self, _content: Value) -> Result<(), String> {
        Err("only a message held at its send can be edited; this event is a step".to_owned())
    }
    fn state(&self) -> Result<Value, String> {
        self.access.state_json()
    }
    fn set_state(&mut self, content: Value) -> Result<(), String> {
        self.access.set_state_json(content)
    }
    fn pending(&self) -> Vec<QueuedMsg> {
        self.access.pending()
    }
}

fn step_of(k: StepKind) -> proto::Step {
    match k {
        StepKind::Run => proto::Step::Run,
        StepKind::Absorb => proto::Step::Absorb,
        StepKind::Final => proto::Step::Final,
    }
}

/// A step event as the protocol shows it (numbered when it is recorded).
fn step_ev(ev: &StepEvent<'_>, traced: bool, reason: Option<HoldReason>) -> proto::StepEv {
    proto::StepEv {
        event_id: 0,
        thread: ev.thread.name.to_string(),
        op: ev.op.name.to_string(),
        msg: ev.msg_id.to_string(),
        instance: ev.instance.to_string(),
        step: step_of(ev.step),
        traced,
        held: reason.is_some(),
        reason,
    }
}

/// A `send` that is streamed, not held, in compact form (`from`: thread and operation;
/// `to`: operation and thread).
fn fast_send(
    (thread, op): (Option<&ThreadInfo>, Option<&OpInfo>),
    (to_op, to_thread): (Option<&OpInfo>, Option<&ThreadInfo>),
    msg: &MsgId,
    traced: bool,
    type_name: &'static str,
) -> Fast {
    Fast {
        kind: record::SEND,
        event_id: 0,
        thread: record::thread_index(thread),
        op: record::op_index(op),
        msg: msg.clone(),
        a: record::op_index(to_op),
        b: record::thread_index(to_thread),
        traced,
        text: Text::Type(type_name),
    }
}

/// A `recv` in compact form.
fn fast_recv(thread: &ThreadInfo, op: &OpInfo, msg: &MsgId, position: usize, traced: bool) -> Fast {
    Fast {
        kind: record::RECV,
        event_id: 0,
        thread: record::thread_index(Some(thread)),
        op: record::op_index(Some(op)),
        msg: msg.clone(),
        a: position as i64,
        b: 0,
        traced,
        text: Text::None,
    }
}

/// A step event that is streamed, not held, in compact form.
fn fast_step(kind: u8, ev: &StepEvent<'_>, traced: bool) -> Fast {
    let s = StreamedStep {
        thread: ev.thread,
        op: ev.op,
        step: ev.step,
        msg_id: ev.msg_id,
        instance: ev.instance,
    };
    fast_streamed_step(kind, &s, traced)
}

fn fast_streamed_step(kind: u8, ev: &StreamedStep<'_>, traced: bool) -> Fast {
    Fast {
        kind,
        event_id: 0,
        thread: record::thread_index(Some(ev.thread)),
        op: record::op_index(Some(ev.op)),
        msg: ev.msg_id.clone(),
        a: record::step_code(ev.step),
        b: 0,
        traced,
        text: {
            // Compared in place, component by component (ids are a few words: a
            // `memcmp` call costs more than the comparison).
            let (m, i) = (ev.msg_id.components(), ev.instance.components());
            let same = |a: &[u64], b: &[u64]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y);
            if same(m, i) {
                Text::None
            } else if m.split_last().is_some_and(|(_, parent)| same(parent, i)) {
                Text::Parent
            } else {
                Text::Instance(Box::new(ev.instance.clone()))
            }
        },
    }
}

fn set_event_id(ev: &mut Event, id: u64) {
    match ev {
        Event::Send(e) => e.event_id = id,
        Event::Recv(e) => e.event_id = id,
        Event::Start(e) | Event::Stop(e) => e.event_id = id,
        _ => {}
    }
}

/// A pending message as the protocol shows it, in the queue of `thread`.
fn entry(q: &QueuedMsg, thread: &str, content: Option<Value>) -> proto::QueueEntry {
    proto::QueueEntry {
        id: q.id.to_string().into(),
        type_name: q.type_name.to_owned(),
        from: q.from.as_ref().map(|(op, t)| format!("{}@{}", op.name, t.name)),
        to: format!("{}@{thread}", q.op.name),
        op: (*q.op.name).into(),
        traced: q.traced,
        content,
    }
}

fn thread_snapshot(t: ThreadSnap) -> proto::ThreadSnapshot {
    proto::ThreadSnapshot {
        queue: t.pending.iter().map(|q| entry(q, &t.info.name, None)).collect(),
        more: t.more,
        current: t.current.map(|c| proto::CurrentStep {
            op: c.op.name.to_string(),
            msg: c.msg.to_string(),
            step: step_of(c.step),
        }),
        thread: t.info.name.to_string(),
    }
}

impl Agent {
    fn new(wait: bool, token: Option<String>) -> Self {
        let program = std::env::var("RACETRACK_PROGRAM")
            .ok()
            .filter(|p| !p.is_empty())
            .or_else(|| std::env::args().next())
            .map(|a| a.rsplit('/').next().unwrap_or(&a).to_owned())
            .unwrap_or_else(|| "program".to_owned());
        Self {
            program,
            hot: Arc::new(AtomicBool::new(wait)),
            attached: AtomicBool::new(false),
            claimed: AtomicBool::new(false),
            wait_pending: AtomicBool::new(wait),
            closing: AtomicBool::new(false),
            finishing: AtomicBool::new(false),
            step_mode: AtomicBool::new(false),
            ack_all: AtomicBool::new(false),
            content: AtomicBool::new(false),
            has_policy: AtomicBool::new(false),
            sent: std::sync::atomic::AtomicU64::new(0),
            sent_events: std::sync::atomic::AtomicU64::new(0),
            waits: std::sync::atomic::AtomicU64::new(0),
            start_hold_us: std::sync::atomic::AtomicU64::new(0),
            session: std::sync::atomic::AtomicU64::new(0),
            token,
            policy: Mutex::new(Policy::default()),
            stream: Mutex::new(Stream::default()),
            space: Condvar::new(),
            wake: tokio::sync::Notify::new(),
            finished: (Mutex::new(false), Condvar::new()),
            view: OnceLock::new(),
            structure: Mutex::new(Structure::default()),
            url: OnceLock::new(),
        }
    }

    /// The URL the agent listens on (`ws://HOST:PORT`).
    pub fn local_url(&self) -> String {
        self.url.get().cloned().unwrap_or_default()
    }

    /// Whether a debugger is attached.
    pub fn is_attached(&self) -> bool {
        self.attached.load(Relaxed)
    }

    fn update_hot(&self) {
        let hot = self.attached.load(Relaxed) || self.wait_pending.load(Relaxed);
        self.hot.store(hot, Relaxed);
    }

    // ---- the event stream ------------------------------------------------------------

    /// Append a streamed event (with the next event number if it has one).
    fn emit(&self, ev: Event, backpressure: bool) {
        let _ = self.record(Rec::Full(Box::new(ev)), backpressure);
    }

    /// Append a streamed record (see [`emit`](Self::emit)). Returns the session (see
    /// [`Hook::session`]) it was recorded in, `None` if it was not (nobody attached).
    fn record(&self, ev: Rec, backpressure: bool) -> Option<u64> {
        self.record_all(std::iter::once(ev), backpressure)
    }

    /// Append streamed records under one lock of the buffer, numbered in turn (see
    /// [`record`](Self::record)).
    fn record_all(&self, recs: impl IntoIterator<Item = Rec>, backpressure: bool) -> Option<u64> {
        let mut s = lock(&self.stream);
        if !self.attached.load(Relaxed) {
            return None;
        }
        if backpressure {
            while s.buf.len() >= BUFFER_CAP && self.attached.load(Relaxed) && !self.closing.load(Relaxed) {
                self.waits.fetch_add(1, Relaxed);
                s = self
                    .space
                    .wait(s)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        }
        let before = s.buf.len();
        for mut ev in recs {
            if ev.is_numbered() {
                ev.set_event_id(s.next_id);
                s.next_id += 1;
            }
            s.buf.push(ev);
        }
        let flush = s.buf.len() / FLUSH_AT > before / FLUSH_AT;
        // Read under the lock the attach cut takes to change it.
        let session = self.session.load(Relaxed);
        drop(s);
        if flush {
            self.wake.notify_one();
        }
        Some(session)
    }

    /// Append a reply or notice and flush it at once.
    fn reply(&self, ev: Event) {
        {
            let mut s = lock(&self.stream);
            if !self.attached.load(Relaxed) {
                return;
            }
            s.buf.push(Rec::Full(Box::new(ev)));
        }
        self.wake.notify_one();
    }

    fn error(&self, message: String, req: Option<u64>) {
        self.reply(Event::Error { message, req });
    }

    /// The `ok` of a command that carried a request number (without one, only the
    /// commands that always had an `ok` get one: see [`Agent::held_loop`]).
    fn ok(&self, cmd: &str, req: Option<u64>) {
        if req.is_some() {
            self.reply(Event::Ok {
                cmd: cmd.to_owned(),
                target: None,
                req,
            });
        }
    }

    /// Take what is buffered (the server's side).
    fn drain(&self) -> Vec<Vec<Rec>> {
        let out = lock(&self.stream).buf.take();
        self.space.notify_all();
        out
    }

    /// Hand back chunks [`Agent::drain`] gave out, once emptied, for reuse (dropped when
    /// no debugger is attached any more).
    fn recycle(&self, mut chunks: Vec<Vec<Rec>>) {
        // Records, and chunks beyond what is kept, are dropped here, not under the lock
        // the program's threads take.
        chunks.truncate(record::SPARE_MAX);
        for c in &mut chunks {
            c.clear();
        }
        let mut s = lock(&self.stream);
        if self.attached.load(Relaxed) {
            s.buf.recycle(&mut chunks);
        }
    }

    fn drain_is_empty(&self) -> bool {
        lock(&self.stream).buf.is_empty()
    }

    fn signal_finished(&self) {
        let (m, cv) = &self.finished;
        *lock(m) = true;
        cv.notify_all();
    }

    // ---- holding ------------------------------------------------------------------------

    /// Register `ev` as held, flush it, and serve commands for it until released. Returns
    /// the trace override of the release, if any.
    ///
    /// `still`: whether the policy holds the event now. It is asked again under the stream
    /// lock, where releases happen: a `continue` sent with, say, step mode just turned off
    /// may have come between the decision and this registration, and the hold then stands
    /// only if the policy still asks for it.
    fn hold(
        &self,
        mut ev: Event,
        thread: &Arc<ThreadInfo>,
        reason: HoldReason,
        site: &mut dyn Site,
        still: &dyn Fn() -> bool,
    ) -> Option<bool> {
        let (tx, rx) = mpsc::channel();
        let id;
        {
            let mut s = lock(&self.stream);
            let attached = self.attached.load(Relaxed);
            let stale = reason != HoldReason::Wait && !still();
            if self.closing.load(Relaxed) || !(attached || reason == HoldReason::Wait) || stale {
                // Detached meanwhile, or no longer held by the policy: stream it as not
                // held.
                drop(s);
                unhold(&mut ev);
                self.emit(ev, false);
                return None;
            }
            id = s.next_id;
            s.next_id += 1;
            set_event_id(&mut ev, id);
            if attached {
                s.buf.push(Rec::Full(Box::new(ev.clone())));
            }
            let is_send = matches!(ev, Event::Send(_));
            s.held.insert(
                id,
                Held {
                    thread: thread.global,
                    thread_name: thread.name.clone(),
                    is_send,
                    tx,
                    event: ev,
                },
            );
        }
        self.wake.notify_one();
        if reason == HoldReason::Wait {
            let t0 = std::time::Instant::now();
            let r = self.held_loop(id, &thread.name, &rx, site);
            let us = u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX);
            self.start_hold_us.fetch_add(us, Relaxed);
            return r;
        }
        self.held_loop(id, &thread.name, &rx, site)
    }

    /// Serve a held event's commands until it is released; then refuse whatever reached
    /// the thread after its release was decided (every command gets its answer).
    fn held_loop(
        &self,
        id: u64,
        name: &str,
        rx: &mpsc::Receiver<HeldCmd>,
        site: &mut dyn Site,
    ) -> Option<bool> {
        let trace = self.serve_held(id, name, rx, site);
        // The hold is no longer registered (whoever ended it removed it under the stream
        // lock, and commands are sent only to registered holds): what is left came before.
        while let Ok(cmd) = rx.try_recv() {
            if let Some((what, req)) = cmd.verdict_of() {
                self.error(
                    format!("{what}: {name} was released before the command reached it; nothing changed"),
                    req,
                );
            }
        }
        trace
    }

    fn serve_held(
        &self,
        id: u64,
        name: &str,
        rx: &mpsc::Receiver<HeldCmd>,
        site: &mut dyn Site,
    ) -> Option<bool> {
        loop {
            match rx.recv() {
                Err(_) => return None,
                Ok(HeldCmd::Release { trace }) => return trace,
                Ok(HeldCmd::Reorder { order, rest, req }) => match site.reorder(&order, rest) {
                    Ok(put_back) => {
                        // The new queue first: whoever waits for the verdict sees it.
                        let pending = site.pending();
                        let more = pending.len().saturating_sub(QUEUE_LIST_MAX);
                        let messages = pending.iter().take(QUEUE_LIST_MAX).map(|q| entry(q, name, None)).collect();
                        self.reply(Event::Queue { thread: name.to_string(), messages, more });
                        self.reply(Event::Ok { cmd: "reorder".into(), target: Some(name.to_string()), req });
                        if put_back {
                            // The step will not start: this hold is over; the thread
                            // starts the new head (a new start event).
                            let mut s = lock(&self.stream);
                            if s.held.remove(&id).is_some() && self.attached.load(Relaxed) {
                                s.buf.push(Rec::Full(Box::new(Event::Released { event_id: id, thread: name.to_string() })));
                            }
                            drop(s);
                            self.wake.notify_one();
                            return None;
                        }
                    }
                    Err(e) => self.error(format!("reorder of {name} not applied: {e}"), req),
                },
                Ok(HeldCmd::Edit { content, req }) => match site.edit(content) {
                    Ok(()) => self.reply(Event::Ok { cmd: "edit".into(), target: Some(id.to_string()), req }),
                    Err(e) => self.error(
                        format!(
                            "edit of event {id} not applied: the content {e}; the original message is kept and {name} stays held"
                        ),
                        req,
                    ),
                },
                Ok(HeldCmd::GetState { req }) => match site.state() {
                    Ok(content) => {
                        self.reply(Event::State { thread: name.to_string(), content });
                        self.ok("state", req);
                    }
                    Err(e) => self.error(format!("state of {name}: {e}"), req),
                },
                Ok(HeldCmd::SetState { content, req }) => match site.set_state(content) {
                    Ok(()) => self.reply(Event::Ok { cmd: "set_state".into(), target: Some(name.to_string()), req }),
                    Err(e) => self.error(format!("set_state of {name} not applied: {e}"), req),
                },
            }
        }
    }

    /// Release held events chosen by `pick`, emitting `released` for each.
    fn release(&self, trace: Option<bool>, pick: impl Fn(u64, &Held) -> bool) -> usize {
        let mut s = lock(&self.stream);
        let ids: Vec<u64> = s
            .held
            .iter()
            .filter(|(id, h)| pick(**id, h))
            .map(|(id, _)| *id)
            .collect();
        for id in &ids {
            if let Some(h) = s.held.remove(id) {
                if self.attached.load(Relaxed) {
                    s.buf.push(Rec::Full(Box::new(Event::Released {
                        event_id: *id,
                        thread: h.thread_name.to_string(),
                    })));
                }
                let _ = h.tx.send(HeldCmd::Release { trace });
            }
        }
        drop(s);
        self.wake.notify_one();
        ids.len()
    }

    /// Send a command to the thread held at event `id`.
    fn to_held(&self, pick: impl Fn(u64, &Held) -> bool, cmd: HeldCmd) -> bool {
        let s = lock(&self.stream);
        match s.held.iter().find(|(id, h)| pick(**id, h)) {
            Some((_, h)) => h.tx.send(cmd).is_ok(),
            None => false,
        }
    }

    fn start_reason(&self, ev: &StepEvent<'_>) -> Option<(HoldReason, bool)> {
        self.start_reason_of(
            ev.thread.global,
            ev.op.id,
            ev.input_traced && ev.step != StepKind::Final,
        )
    }

    /// [`Self::start_reason`] of a step of operation `op` on thread `thread`; `traced`: its
    /// input is traced (and it is not a final step).
    fn start_reason_of(&self, thread: usize, op: usize, traced: bool) -> Option<(HoldReason, bool)> {
        if self.step_mode.load(Relaxed) {
            return Some((HoldReason::Step, false));
        }
        if self.has_policy.load(Relaxed) {
            let p = lock(&self.policy);
            if p.paused.contains(&thread) {
                return Some((HoldReason::Pause, false));
            }
            if let Some(trace) = p.breaks.get(&(op, thread)) {
                return Some((HoldReason::Break, *trace));
            }
        }
        if traced {
            return Some((HoldReason::Trace, false));
        }
        self.ack_all.load(Relaxed).then_some((HoldReason::AckAll, false))
    }

    fn other_reason(&self, thread: usize) -> Option<HoldReason> {
        if self.step_mode.load(Relaxed) {
            return Some(HoldReason::Step);
        }
        if self.has_policy.load(Relaxed) && lock(&self.policy).paused.contains(&thread) {
            return Some(HoldReason::Pause);
        }
        self.ack_all.load(Relaxed).then_some(HoldReason::AckAll)
    }

    // ---- the connection's side ----------------------------------------------------------

    /// Claim the controlling slot for a new connection.
    fn try_claim(&self) -> bool {
        self.claimed
            .compare_exchange(false, true, Relaxed, Relaxed)
            .is_ok()
    }

    fn hello(&self) -> Event {
        Event::Hello {
            program: self.program.clone(),
            pid: std::process::id(),
            protocol: proto::PROTOCOL_VERSION,
        }
    }

    fn structure_event(&self) -> Event {
        Self::structure_of(&lock(&self.structure))
    }

    /// Mark the connection attached and describe the structure in one step, so that a
    /// collection or graph added meanwhile is either in it or announced afterwards.
    fn attach_structure(&self) -> Event {
        let st = lock(&self.structure);
        self.attached.store(true, Relaxed);
        self.update_hot();
        Self::structure_of(&st)
    }

    fn structure_of(st: &Structure) -> Event {
        let coll = |id: usize| st.collections.get(id);
        Event::Structure {
            operations: st
                .ops
                .iter()
                .map(|o| proto::OperationDesc {
                    name: o.name.to_string(),
                    kind: o.kind.as_str().to_owned(),
                    collection: coll(o.collection).map(|c| c.name.clone()).unwrap_or_default(),
                    threads: coll(o.collection)
                        .map(|c| c.threads.iter().map(|t| t.name.to_string()).collect())
                        .unwrap_or_default(),
                })
                .collect(),
            collections: st
                .collections
                .iter()
                .map(|c| proto::CollectionDesc {
                    name: c.name.clone(),
                    threads: c.threads.iter().map(|t| t.name.to_string()).collect(),
                })
                .collect(),
            edges: st
                .edges
                .iter()
                .filter_map(|(a, b)| {
                    Some([st.ops.get(*a)?.name.to_string(), st.ops.get(*b)?.name.to_string()])
                })
                .collect(),
        }
    }

    /// Start streaming; returns the snapshot every later event is consistent with.
    fn attach(&self) -> Event {
        let build = |threads: Vec<ThreadSnap>| {
            let mut s = lock(&self.stream);
            // Records from before the cut are dropped below: a batch whose sends were
            // recorded then is sent again, one by one.
            self.session.fetch_add(1, Relaxed);
            self.attached.store(true, Relaxed);
            self.update_hot();
            // Events recorded before the cut are in the snapshot; a graph or collection
            // registered since `attach_structure` is not: its `structure` reply is dropped
            // with them, so the latest structure follows the snapshot (packed events name
            // operations and threads by their place in it).
            s.buf.clear();
            s.buf.push(Rec::Full(Box::new(self.structure_event())));
            Event::Snapshot {
                next_event_id: s.next_id,
                threads: threads.into_iter().map(thread_snapshot).collect(),
                held: s.held.values().map(|h| h.event.clone()).collect(),
            }
        };
        match self.view.get() {
            Some(v) => {
                // A snapshot is one frame: programs with huge queues get their first
                // messages listed and the rest counted.
                let limit = (SNAPSHOT_ENTRIES / v.thread_count().max(1)).clamp(10, QUEUE_LIST_MAX);
                v.snapshot(limit, build)
            }
            None => build(Vec::new()),
        }
    }

    /// Stop streaming, clear the policy and release every hold.
    fn detach(&self) {
        {
            let mut s = lock(&self.stream);
            self.attached.store(false, Relaxed);
            self.step_mode.store(false, Relaxed);
            self.ack_all.store(false, Relaxed);
            self.content.store(false, Relaxed);
            self.has_policy.store(false, Relaxed);
            *lock(&self.policy) = Policy::default();
            self.update_hot();
            s.buf.clear();
            for (_, h) in std::mem::take(&mut s.held) {
                let _ = h.tx.send(HeldCmd::Release { trace: None });
            }
        }
        self.space.notify_all();
    }

    fn thread_named(&self, name: &str) -> Result<Arc<ThreadInfo>, String> {
        let threads = self.view.get().map(RuntimeView::threads).unwrap_or_default();
        threads.iter().find(|t| &*t.name == name).cloned().ok_or_else(|| {
            let names: Vec<&str> = threads.iter().map(|t| &*t.name).collect();
            format!("unknown thread `{name}` (threads: {})", names.join(", "))
        })
    }

    /// Apply one command from the debugger. Problems become `error` events. A command with
    /// a request number gets exactly one verdict carrying it: `ok` or `error` (commands
    /// served by a held thread get theirs from that thread, see [`Agent::held_loop`]).
    fn apply(&self, cmd: Command, req: Option<u64>) {
        let name = cmd.name();
        match self.try_apply(cmd, req) {
            Ok(Answer::Now) => self.ok(name, req),
            Ok(Answer::ByHeldThread) => {}
            Err(e) => self.error(format!("{name}: {e}"), req),
        }
    }

    fn try_apply(&self, cmd: Command, req: Option<u64>) -> Result<Answer, String> {
        match cmd {
            Command::Continue {
                thread: None,
                event_id: None,
                trace,
            } => {
                self.release(trace, |_, _| true);
            }
            Command::Continue {
                thread: Some(t),
                event_id: None,
                trace,
            } => {
                let t = self.thread_named(&t)?;
                if self.release(trace, |_, h| h.thread == t.global) == 0 {
                    return Err(format!("{} is not held", t.name));
                }
            }
            Command::Continue {
                thread,
                event_id: Some(id),
                trace,
            } => {
                let t = thread.map(|t| self.thread_named(&t)).transpose()?;
                let n = self.release(trace, |i, h| {
                    i == id && t.as_ref().is_none_or(|t| t.global == h.thread)
                });
                if n == 0 {
                    return Err(format!("event {id} is not held"));
                }
            }
            Command::StepMode { on } => self.step_mode.store(on, Relaxed),
            Command::AckAll { on } => self.ack_all.store(on, Relaxed),
            Command::Content { on } => self.content.store(on, Relaxed),
            Command::Break {
                op,
                thread,
                on,
                trace,
            } => {
                let (op_info, coll) = {
                    let st = lock(&self.structure);
                    let o = st.ops.iter().find(|o| *o.name == *op).cloned().ok_or_else(|| {
                        let names: Vec<&str> = st.ops.iter().map(|o| &*o.name).collect();
                        format!("unknown operation `{op}` (operations: {})", names.join(", "))
                    })?;
                    let c = st
                        .collections
                        .get(o.collection)
                        .cloned()
                        .ok_or("unknown collection")?;
                    (o, c)
                };
                let threads: Vec<usize> = match thread {
                    Some(t) => {
                        let t = self.thread_named(&t)?;
                        if t.collection != coll.id {
                            return Err(format!(
                                "`{op}` runs on collection `{}`, not on {}",
                                coll.name, t.name
                            ));
                        }
                        vec![t.global]
                    }
                    None => coll.threads.iter().map(|t| t.global).collect(),
                };
                let mut p = lock(&self.policy);
                for t in threads {
                    if on {
                        p.breaks.insert((op_info.id, t), trace);
                    } else {
                        p.breaks.remove(&(op_info.id, t));
                    }
                }
                self.has_policy
                    .store(!p.breaks.is_empty() || !p.paused.is_empty(), Relaxed);
            }
            Command::Pause { thread, on } => {
                let t = self.thread_named(&thread)?;
                let mut p = lock(&self.policy);
                if on {
                    p.paused.insert(t.global);
                } else {
                    p.paused.remove(&t.global);
                }
                self.has_policy
                    .store(!p.breaks.is_empty() || !p.paused.is_empty(), Relaxed);
            }
            Command::Queue { thread, content } => {
                let t = self.thread_named(&thread)?;
                let view = self.view.get().ok_or("no runtime")?;
                let pending = view.pending(t.global).unwrap_or_default();
                // Contents can be large: fewer of them fit in a frame.
                let cap = if content {
                    QUEUE_CONTENT_MAX
                } else {
                    QUEUE_LIST_MAX
                };
                let more = pending.len().saturating_sub(cap);
                let messages = pending
                    .iter()
                    .take(cap)
                    .map(|q| {
                        let c = content.then(|| {
                            view.pending_content(t.global, &q.id)
                                .and_then(Result::ok)
                                .unwrap_or(Value::Null)
                        });
                        entry(q, &t.name, c)
                    })
                    .collect();
                self.reply(Event::Queue {
                    thread: t.name.to_string(),
                    messages,
                    more,
                });
            }
            Command::Reorder { thread, order, rest } => {
                let t = self.thread_named(&thread)?;
                let rest = match rest {
                    None => Rest::Named,
                    Some(proto::Rest::After) => Rest::After,
                    Some(proto::Rest::Before) => Rest::Before,
                };
                if !self.to_held(|_, h| h.thread == t.global, HeldCmd::Reorder { order, rest, req }) {
                    return Err(format!(
                        "{} is running; a reorder needs it suspended (pause it or set a breakpoint)",
                        t.name
                    ));
                }
                return Ok(Answer::ByHeldThread);
            }
            Command::Edit { event_id, content } => {
                let is_send = {
                    let s = lock(&self.stream);
                    s.held.get(&event_id).map(|h| h.is_send)
                };
                match is_send {
                    None => return Err(format!("event {event_id} is not held")),
                    Some(false) => {
                        return Err(format!(
                            "event {event_id} is not a send; only held sends can be edited"
                        ))
                    }
                    Some(true) => {
                        if !self.to_held(|i, _| i == event_id, HeldCmd::Edit { content, req }) {
                            return Err(format!("event {event_id} is not held any more"));
                        }
                        return Ok(Answer::ByHeldThread);
                    }
                }
            }
            Command::State { thread } => {
                let t = self.thread_named(&thread)?;
                if !self.to_held(|_, h| h.thread == t.global, HeldCmd::GetState { req }) {
                    return Err(format!(
                        "{} is running; its state can be read only while it is suspended",
                        t.name
                    ));
                }
                return Ok(Answer::ByHeldThread);
            }
            Command::SetState { thread, content } => {
                let t = self.thread_named(&thread)?;
                if !self.to_held(|_, h| h.thread == t.global, HeldCmd::SetState { content, req }) {
                    return Err(format!(
                        "{} is running; its state can be set only while it is suspended",
                        t.name
                    ));
                }
                return Ok(Answer::ByHeldThread);
            }
            Command::Detach => self.detach(),
        }
        Ok(Answer::Now)
    }
}

/// When a command that was accepted gets its verdict.
enum Answer {
    /// Now, by [`Agent::apply`].
    Now,
    /// From the held thread that serves it.
    ByHeldThread,
}

fn unhold(ev: &mut Event) {
    match ev {
        Event::Send(e) => {
            e.held = false;
            e.reason = None;
        }
        Event::Start(e) | Event::Stop(e) => {
            e.held = false;
            e.reason = None;
        }
        _ => {}
    }
}

impl Hook for Agent {
    fn active(&self) -> bool {
        self.hot.load(Relaxed)
    }

    fn active_flag(&self) -> Option<Arc<AtomicBool>> {
        Some(self.hot.clone())
    }

    /// Attached, with nothing that could hold, edit or trace a message: the runtime keeps
    /// its batches and reports each message through the `streamed_*` calls.
    fn streaming(&self) -> bool {
        self.attached.load(Relaxed)
            && !(self.wait_pending.load(Relaxed)
                || self.step_mode.load(Relaxed)
                || self.ack_all.load(Relaxed)
                || self.content.load(Relaxed)
                || self.has_policy.load(Relaxed))
    }

    fn session(&self) -> u64 {
        self.session.load(Relaxed)
    }

    fn streamed_send(&self, ev: &StreamedSend<'_>) -> Option<u64> {
        if !self.attached.load(Relaxed) {
            return None;
        }
        let fast = fast_send(
            (Some(ev.thread), Some(ev.from_op)),
            (Some(ev.to_op), Some(ev.to_thread)),
            ev.msg_id,
            false,
            ev.type_name,
        );
        self.record(Rec::Fast(fast), true)
    }

    fn streamed_step(&self, ev: &StreamedStep<'_>, stop: bool) {
        if !self.attached.load(Relaxed) {
            return;
        }
        let kind = if stop { record::STOP } else { record::START };
        let _ = self.record(Rec::Fast(fast_streamed_step(kind, ev, false)), true);
    }

    fn on_runtime(&self, view: RuntimeView) {
        let _ = self.view.set(view);
    }

    fn on_collection(&self, info: &CollectionInfo) {
        lock(&self.structure).collections.push(Arc::new(CollectionInfo {
            id: info.id,
            name: info.name.clone(),
            threads: info.threads.clone(),
        }));
        if self.attached.load(Relaxed) {
            self.reply(self.structure_event());
        }
    }

    fn on_graph(&self, info: &GraphInfo) {
        {
            let mut st = lock(&self.structure);
            st.ops.extend(info.ops.iter().cloned());
            st.edges.extend(info.edges.iter().copied());
        }
        if self.attached.load(Relaxed) {
            self.reply(self.structure_event());
        }
    }

    fn on_send(&self, ev: &mut SendEvent<'_>) {
        if !self.hot.load(Relaxed) || !self.attached.load(Relaxed) {
            return;
        }
        let reason = ev.thread.and_then(|t| self.other_reason(t.global));
        if reason.is_none() && !self.content.load(Relaxed) {
            let fast = fast_send(
                (ev.thread.map(|t| &**t), ev.from_op.map(|o| &**o)),
                (ev.to_op.map(|o| &**o), ev.to_thread.map(|t| &**t)),
                ev.msg_id,
                ev.traced,
                ev.type_name(),
            );
            let _ = self.record(Rec::Fast(fast), thread_is_program(ev));
            return;
        }
        let thread = ev.thread.cloned();
        let content = (reason.is_some() || self.content.load(Relaxed)).then(|| {
            ev.content_json()
                .unwrap_or_else(|e| serde_json::json!({ "$unserializable": e }))
        });
        let sev = Event::Send(proto::SendEv {
            event_id: 0,
            thread: thread.as_ref().map(|t| t.name.to_string()),
            op: ev.from_op.map(|o| o.name.to_string()),
            msg: ev.msg_id.to_string(),
            to_op: ev.to_op.map(|o| o.name.to_string()),
            to_thread: ev.to_thread.map(|t| t.name.to_string()),
            type_name: ev.type_name().to_owned(),
            traced: ev.traced,
            held: reason.is_some(),
            reason,
            content,
        });
        match (reason, thread) {
            (Some(r), Some(t)) => {
                let global = t.global;
                self.hold(sev, &t, r, ev, &|| self.other_reason(global).is_some());
            }
            _ => self.emit(sev, thread_is_program(ev)),
        }
    }

    fn on_recv(&self, ev: &RecvEvent<'_>) {
        if !self.hot.load(Relaxed) || !self.attached.load(Relaxed) {
            return;
        }
        // Never blocks: called with the destination queue locked.
        let fast = fast_recv(ev.thread, ev.op, ev.msg_id, ev.position, ev.traced);
        let _ = self.record(Rec::Fast(fast), false);
    }

    fn on_recv_batch(
        &self,
        thread: &Arc<ThreadInfo>,
        op: &Arc<OpInfo>,
        msgs: &mut dyn Iterator<Item = (&MsgId, usize)>,
    ) {
        if !self.hot.load(Relaxed) || !self.attached.load(Relaxed) {
            return;
        }
        // Never blocks: called with the destination queue locked. One lock for the batch.
        let recs = msgs.map(|(msg, position)| Rec::Fast(fast_recv(thread, op, msg, position, false)));
        let _ = self.record_all(recs, false);
    }

    fn on_start(&self, ev: &mut StepEvent<'_>) {
        if !self.hot.load(Relaxed) {
            return;
        }
        let wait = self.wait_pending.load(Relaxed) && self.wait_pending.swap(false, Relaxed);
        if wait {
            self.update_hot();
        } else if !self.attached.load(Relaxed) {
            return;
        }
        let reason = if wait {
            Some((HoldReason::Wait, false))
        } else {
            self.start_reason(ev)
        };
        match reason {
            None => {
                let _ = self.record(Rec::Fast(fast_step(record::START, ev, ev.input_traced)), true);
            }
            Some((r, trace_break)) => {
                let sev = step_ev(ev, ev.input_traced, Some(r));
                if trace_break {
                    ev.trace_outputs = true;
                }
                let thread = ev.thread.clone();
                let (op, traced) = (ev.op.id, ev.input_traced && ev.step != StepKind::Final);
                let still = || self.start_reason_of(thread.global, op, traced).is_some();
                match self.hold(Event::Start(sev), &thread, r, ev, &still) {
                    Some(t) => ev.trace_outputs = t,
                    // A trace box checked while the step was held (or before the start
                    // hold was released) applies when it resumes.
                    None if self.has_policy.load(Relaxed)
                        && lock(&self.policy).breaks.get(&(ev.op.id, thread.global)) == Some(&true) =>
                    {
                        ev.trace_outputs = true;
                    }
                    None => {}
                }
            }
        }
    }

    fn on_stop(&self, ev: &mut StepEvent<'_>) {
        if !self.hot.load(Relaxed) || !self.attached.load(Relaxed) {
            return;
        }
        match self.other_reason(ev.thread.global) {
            None => {
                let _ = self.record(Rec::Fast(fast_step(record::STOP, ev, ev.trace_outputs)), true);
            }
            Some(r) => {
                let sev = step_ev(ev, ev.trace_outputs, Some(r));
                let thread = ev.thread.clone();
                let global = thread.global;
                self.hold(Event::Stop(sev), &thread, r, ev, &|| {
                    self.other_reason(global).is_some()
                });
            }
        }
    }

    fn on_error(&self, err: &ScheduleError) {
        if !self.attached.load(Relaxed) {
            return;
        }
        let ev = match err {
            ScheduleError::Panic {
                op,
                thread,
                msg,
                message,
            }
            | ScheduleError::Operation {
                op,
                thread,
                msg,
                message,
            } => Event::Panic {
                thread: thread.clone(),
                op: op.clone(),
                msg: msg.clone(),
                message: message.clone(),
            },
            ScheduleError::Shutdown => return,
        };
        self.reply(ev);
    }

    fn on_shutdown(&self) {
        // No new holds from here on; release the current ones so threads can finish.
        self.closing.store(true, Relaxed);
        self.release(None, |_, _| true);
        self.space.notify_all();
    }

    fn on_finished(&self) {
        if !self.attached.load(Relaxed) {
            return;
        }
        self.finishing.store(true, Relaxed);
        if std::env::var("RACETRACK_DEBUG").is_ok() {
            eprintln!(
                "racetrack: finishing with {} events buffered, {} frames sent",
                lock(&self.stream).buf.len(),
                self.sent.load(Relaxed)
            );
        }
        self.wake.notify_one();
        // Wait until everything is sent, as long as the debugger keeps reading (it may lag
        // behind a fast program); give up after EXIT_PATIENCE without progress. A lagging
        // debugger reads in bursts (its socket buffer refills only once half of it is
        // free): with 3 s, a debugger taking 25 µs per event lost the last 32,823 of
        // 800,004 events once.
        let (m, cv) = &self.finished;
        let mut guard = lock(m);
        let mut last_sent = self.sent.load(Relaxed);
        while !*guard {
            let (g, timeout) = cv
                .wait_timeout(guard, EXIT_PATIENCE)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            guard = g;
            let sent = self.sent.load(Relaxed);
            if timeout.timed_out() && sent == last_sent {
                break;
            }
            last_sent = sent;
        }
        if std::env::var("RACETRACK_DEBUG").is_ok() {
            let (buffered, next_id) = {
                let s = lock(&self.stream);
                (s.buf.len(), s.next_id)
            };
            eprintln!(
                "racetrack: finished={} with {buffered} events buffered, {} frames and {} events sent, next id {next_id}, {} waits for room, start hold {} us",
                *guard,
                self.sent.load(Relaxed),
                self.sent_events.load(Relaxed),
                self.waits.load(Relaxed),
                self.start_hold_us.load(Relaxed)
            );
        }
    }
}

/// Sends from the schedule caller (thread `None`) are not throttled: the caller may be a
/// thread the debugger cannot see.
fn thread_is_program(ev: &SendEvent<'_>) -> bool {
    ev.thread.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use racetrack_runtime::hook::OpKind;

    #[test]
    fn a_graph_registered_during_attach_reaches_the_debugger() {
        let agent = Agent::new(false, None);
        let structure = agent.attach_structure();
        assert!(matches!(&structure, Event::Structure { operations, .. } if operations.is_empty()));
        // The program registers a graph after the structure was sent, before the snapshot.
        let op = Arc::new(OpInfo {
            id: 0,
            name: "Split".into(),
            kind: OpKind::Split,
            collection: 0,
        });
        agent.on_graph(&GraphInfo {
            ops: vec![op],
            edges: vec![],
        });
        let _snapshot = agent.attach();
        let names: Vec<_> = agent
            .drain()
            .into_iter()
            .flatten()
            .filter_map(|r| match r {
                Rec::Full(ev) => proto::Names::of(&ev),
                Rec::Fast(_) => None,
            })
            .collect();
        assert_eq!(
            names.last().map(|n| n.ops.clone()),
            Some(vec!["Split".to_owned()])
        );
    }
    /// A held thread's site with nothing to act on.
    struct NoSite;

    impl Site for NoSite {
        fn reorder(&mut self, _: &[String], _: Rest) -> Result<bool, String> {
            Err("no queue".into())
        }
        fn edit(&mut self, _: Value) -> Result<(), String> {
            Err("no message".into())
        }
        fn state(&self) -> Result<Value, String> {
            Err("no state".into())
        }
        fn set_state(&mut self, _: Value) -> Result<(), String> {
            Err("no state".into())
        }
        fn pending(&self) -> Vec<QueuedMsg> {
            Vec::new()
        }
    }

    fn held_send(id: u64) -> Event {
        Event::Send(proto::SendEv {
            event_id: id,
            thread: Some("proc[0]".into()),
            op: Some("Work".into()),
            msg: format!("0.{id}"),
            to_op: None,
            to_thread: None,
            type_name: "u32".into(),
            traced: false,
            held: true,
            reason: Some(HoldReason::Step),
            content: None,
        })
    }

    /// The race of a thread that decides to hold (step mode on) while the debugger turns
    /// step mode off and says continue: the continue comes before the hold is registered.
    /// Played in that order here: the decision, then the commands, then the hold.
    #[test]
    fn a_hold_decided_before_a_continue_stands_only_if_the_policy_still_holds() {
        let agent = Arc::new(Agent::new(false, None));
        let _ = agent.attach_structure();
        let _ = agent.attach();
        let thread = Arc::new(ThreadInfo {
            global: 0,
            collection: 0,
            index: 0,
            name: "proc[0]".into(),
        });
        let cont = || Command::Continue {
            thread: None,
            event_id: None,
            trace: None,
        };
        let hold_in_thread = |id: u64| {
            let (agent, thread) = (agent.clone(), thread.clone());
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                let still = || agent.other_reason(0).is_some();
                let r = agent.hold(held_send(id), &thread, HoldReason::Step, &mut NoSite, &still);
                let _ = tx.send(r);
            });
            rx
        };
        let held_count = || lock(&agent.stream).held.len();

        // Step mode turned off before the continue: the hold does not stand.
        agent.apply(Command::StepMode { on: true }, None);
        assert_eq!(agent.other_reason(0), Some(HoldReason::Step), "the decision");
        agent.apply(Command::StepMode { on: false }, None);
        agent.apply(cont(), None);
        let done = hold_in_thread(1);
        let returned = done.recv_timeout(Duration::from_secs(10));
        if returned.is_err() {
            agent.apply(cont(), None); // let the thread go before failing
        }
        assert!(
            returned.is_ok(),
            "the thread stayed held after step mode off and continue"
        );
        assert_eq!(held_count(), 0);
        let streamed: Vec<(u64, bool)> = agent
            .drain()
            .into_iter()
            .flatten()
            .filter_map(|r| match r {
                Rec::Full(ev) => match *ev {
                    Event::Send(s) => Some((s.event_id, s.held)),
                    _ => None,
                },
                Rec::Fast(_) => None,
            })
            .collect();
        assert_eq!(streamed.len(), 1, "{streamed:?}");
        assert!(!streamed[0].1, "streamed as not held: {streamed:?}");

        // Step mode still on after the continue: the next event is held, as step mode
        // asks, until the next continue.
        agent.apply(Command::StepMode { on: true }, None);
        agent.apply(cont(), None);
        let done = hold_in_thread(2);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while held_count() == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(held_count(), 1, "the hold stands while step mode is on");
        agent.apply(cont(), None);
        assert!(
            done.recv_timeout(Duration::from_secs(10)).is_ok(),
            "released by the next continue"
        );
    }
}
