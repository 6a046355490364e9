//! The debugging agent, started in a program when `RACETRACK_LISTEN` is set (for the
//! flow-graph runtime, as its `Hook`).
//!
//! - **Holding is decided here**, in the program: global step mode, operation breakpoints
//!   (operation, thread), paused threads, tracing, "ack every event", and the
//!   `RACETRACK_WAIT` start hold. An event the policy does not hold is appended to a
//!   buffer and streamed in batches by the agent's own thread (module `server`); the program
//!   thread never waits for the network. A held event is flushed at once and blocks only
//!   its own thread, which then serves the debugger's commands for it (release, reorder,
//!   edit, state) until released.
//! - Without a debugger attached, the runtime reads one flag the agent shares with it
//!   (`Hook::active_flag`) and calls no hook at all.
//! - Attached with nothing that could hold, edit or trace a message (free run), the agent
//!   only streams (`Hook::streaming`): the runtime keeps its batches and reports every
//!   message all the same; a breakpoint, paused thread, step mode, "ack every event" or
//!   content mode brings back the one-by-one path the holds need.
//! - The buffer is bounded: a debugger that cannot keep up slows the program down
//!   (backpressure on sends, starts and stops) instead of growing memory.
//! - Detaching (or the connection dropping) releases every hold and returns to free run.
//!
//! The core (this module but `flow`) never names a runtime type: a front end describes the
//! program through the types and `Debuggee` trait of [`front`], the core's public
//! front-end API, and calls the core on each event through it. `flow` is the flow-graph
//! runtime's front end (the `runtime` feature): the runtime's `Hook`, built on [`front`]
//! alone; another front end (an MPI library) is a crate of its own on the same API.

mod commands;
mod death;
mod debuggee;
mod decide;
#[cfg(feature = "runtime")]
pub(crate) mod flow;
pub mod front;
mod held;
mod phase;
mod policy;
mod record;
mod server;
mod stream;
mod trace;

pub use trace::start_trace;

use debuggee::{Debuggee, Structure};
use held::HeldCmd;
use phase::AtomicPhase;
use policy::Policy;
use record::Rec;
use stream::Stream;

use racetrack_protocol as proto;
use racetrack_protocol::launch as env;
use racetrack_protocol::Event;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

/// Lock a mutex, ignoring poisoning: no user code runs while the agent's locks are held.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Pending messages a `queue` reply lists (the others are counted in `more`).
const QUEUE_LIST_MAX: usize = 5_000;
/// Pending messages a snapshot lists over all threads (about 150 bytes each).
const SNAPSHOT_ENTRIES: usize = 40_000;

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

/// Start the agent as `RACETRACK_TRACE` (write a trace file, see [`start_trace`]),
/// `RACETRACK_CONNECT` (dial a debugger), `RACETRACK_LISTEN` and `RACETRACK_WAIT` say, or
/// `None` when none of them is set. A configuration error is printed to stderr and the
/// program runs without the agent (it is a guest: it never stops the program).
pub fn start_from_env() -> Option<Arc<Agent>> {
    if let Some(path) = std::env::var(env::ENV_TRACE).ok().filter(|p| !p.is_empty()) {
        let set = |v| std::env::var(v).is_ok_and(|v: String| !v.is_empty());
        let wait = std::env::var(env::ENV_WAIT).is_ok_and(|v| !v.is_empty() && v != "0");
        trace::note_ignored(wait, set(env::ENV_LISTEN) || set(env::ENV_CONNECT));
        return start_trace(&path, 0);
    }
    start_from_env_at(0)
}

/// Like [`start_from_env`], numbering events from `first_event_id`: the processes of one
/// session (the ranks of an MPI job) number theirs in disjoint ranges, so that an event
/// number names one event across the session. `RACETRACK_TRACE` is not read here (one
/// file per process of such a session is not designed yet): it is ignored, with a note.
pub fn start_from_env_at(first_event_id: u64) -> Option<Arc<Agent>> {
    start_from_env_with(first_event_id, |_| {})
}

/// Like [`start_from_env_at`]; `setup` registers the front end's debuggee and structure
/// before a dialling agent connects, so that the debugger's first snapshot has them.
pub fn start_from_env_with(first_event_id: u64, setup: impl FnOnce(&Agent)) -> Option<Arc<Agent>> {
    if std::env::var(env::ENV_TRACE).is_ok_and(|p| !p.is_empty()) {
        eprintln!("racetrack: RACETRACK_TRACE is not supported for the processes of a job yet; ignored");
    }
    let wait = std::env::var(env::ENV_WAIT).is_ok_and(|v| !v.is_empty() && v != "0");
    let token = std::env::var(env::ENV_TOKEN).ok().filter(|t| !t.is_empty());
    if let Some(url) = std::env::var(env::ENV_CONNECT).ok().filter(|u| !u.is_empty()) {
        let agent = Arc::new(Agent::new(wait, token));
        lock(&agent.stream.state).next_id = first_event_id;
        setup(&agent);
        death::arm(&agent);
        return Some(dial_from(agent, &url));
    }
    let listen = std::env::var(env::ENV_LISTEN).ok()?;
    match start(&listen, wait, token) {
        Ok(agent) => {
            setup(&agent);
            death::arm(&agent);
            Some(agent)
        }
        Err(e) => {
            eprintln!("racetrack: agent not started: {e}");
            None
        }
    }
}

/// Start an agent listening on `listen`; prints `racetrack: listening on ws://HOST:PORT`
/// to stderr once bound. `wait`: hold the first start event until a debugger says
/// `continue` (see [`Agent::decide`]); `token`: required of a debugger, and
/// needed to listen on a non-loopback address. The agent's own thread (a single-threaded
/// tokio runtime) is spawned here; no runtime of the caller's is needed. See [`front`]
/// for how a front end then reports events.
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
    eprintln!("{}", env::listening_line(&format!("ws://{local}")));
    Ok(agent)
}

/// Start an agent that dials the debugger at `url` (`ws://HOST:PORT`, the debugger
/// listening) instead of listening itself, numbering its events from `first_event_id`;
/// `wait` and `token` as in [`start`] (the token goes in the handshake's
/// `Authorization` header). It never fails: a debugger it cannot reach is reported on
/// stderr and the program runs free.
pub fn connect(url: &str, wait: bool, token: Option<String>, first_event_id: u64) -> Arc<Agent> {
    let agent = Arc::new(Agent::new(wait, token));
    lock(&agent.stream.state).next_id = first_event_id;
    dial_from(agent, url)
}

/// Make `agent` dial the debugger at `url`.
fn dial_from(agent: Arc<Agent>, url: &str) -> Arc<Agent> {
    let _ = agent.url.set(url.to_owned());
    server::spawn_dial(agent.clone(), url.to_owned());
    agent
}

/// The agent. Created by [`start`]; installed as the runtime's hook, or driven by another
/// front end through the functions of [`front`].
pub struct Agent {
    program: String,
    /// The connection's life cycle: claimed, attached, finishing, finished (see `phase`).
    phase: AtomicPhase,
    /// Any reason to look at events at all: attached, or the start hold pending. A cache
    /// of the two, kept apart because it is shared with the front end, which reads it
    /// without the agent (the runtime's `Hook::active_flag`).
    hot: Arc<AtomicBool>,
    /// The `RACETRACK_WAIT` start hold is yet to be taken (by the first start, attached
    /// or not, unless a `continue` comes first).
    wait_pending: AtomicBool,
    /// The program shuts down ([`Agent::shutdown`]): no new holds, no waiting for room.
    /// Set for good, in whatever phase: a listening agent may take a debugger after it.
    closing: AtomicBool,
    /// How long the `RACETRACK_WAIT` start hold held the program, in microseconds.
    start_hold_us: AtomicU64,
    token: Option<String>,
    /// Which events hold their thread.
    policy: Policy,
    /// The buffered events, their numbering, and the registered holds.
    stream: Stream,
    /// Where [`Agent::finish`] waits for [`phase::Phase::Finished`].
    finished: (Mutex<()>, Condvar),
    /// The program's threads and queues, for commands and attaches (set once by the
    /// front end).
    debuggee: OnceLock<Box<dyn Debuggee>>,
    structure: Mutex<Structure>,
    url: OnceLock<String>,
    /// The recording or replaying hook around this agent, if any (`take_over`,
    /// `save_scenario`); weak, since that hook owns the agent.
    replay: OnceLock<std::sync::Weak<dyn ReplayControl>>,
}

/// What a recording or replaying hook around the agent does for the debugger's
/// `take_over` and `save_scenario` commands (see `crate::replay`).
pub trait ReplayControl: Send + Sync {
    /// End the replay; `Ok`: what was replayed.
    fn take_over(&self) -> Result<String, ReplayError>;
    /// The session's choices so far, as a scenario's bytes (the debugger writes them on
    /// its own machine), and what they hold in words.
    fn scenario(&self) -> Result<(Vec<u8>, String), ReplayError>;
}

/// Why a [`ReplayControl`] cannot take over a replay or save a scenario (the command's
/// `error` says it).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// `take_over` of a program that replays no log.
    #[error("this program is not being replayed")]
    NotReplaying,
    /// `take_over` of a replay that ended already.
    #[error("the replay has ended already; the program runs free")]
    Ended,
    /// `save_scenario` of a program that records no choices.
    #[error(
        "this program records no choices: only a program started under the debugger (held at its start) can save its session"
    )]
    NotRecording,
    /// `save_scenario` of a run recorded to a file: that file is the scenario.
    #[error("this run is recorded to a file already; replay that")]
    RecordedToFile,
    /// `save_scenario` after the recording stopped, its choices lost.
    #[error("its recording stopped (too many choices buffered)")]
    RecordingStopped,
    /// One MPI rank's refusal.
    #[error("rank {rank}: {error}")]
    Rank {
        /// The rank.
        rank: usize,
        /// Its refusal.
        error: Box<ReplayError>,
    },
}

/// A scenario's `bytes` as the event that carries them to the debugger (`path`: where
/// `save_scenario` asked for it, absent for the session as it ended); refused when it
/// would not fit in one frame.
pub fn scenario_event(
    path: Option<String>,
    bytes: &[u8],
    summary: String,
    req: Option<u64>,
) -> Result<Event, String> {
    // Hex doubles the bytes; the event's other fields are small.
    let room = (proto::MAX_FRAME_BYTES / 2).saturating_sub(summary.len() + 4096);
    if bytes.len() > room {
        return Err(format!(
            "the scenario is {} bytes, more than one message to the debugger carries ({room} bytes)",
            bytes.len()
        ));
    }
    Ok(Event::Scenario {
        path,
        log: proto::replay_log::to_hex(bytes),
        summary,
        req,
    })
}

impl Agent {
    fn new(wait: bool, token: Option<String>) -> Self {
        let program = std::env::var(env::ENV_PROGRAM)
            .ok()
            .filter(|p| !p.is_empty())
            .or_else(|| std::env::args().next())
            .map(|a| a.rsplit('/').next().unwrap_or(&a).to_owned())
            .unwrap_or_else(|| "program".to_owned());
        Self {
            program,
            phase: AtomicPhase::new(),
            hot: Arc::new(AtomicBool::new(wait)),
            wait_pending: AtomicBool::new(wait),
            closing: AtomicBool::new(false),
            start_hold_us: AtomicU64::new(0),
            token,
            policy: Policy::default(),
            stream: Stream::default(),
            finished: (Mutex::new(()), Condvar::new()),
            debuggee: OnceLock::new(),
            structure: Mutex::new(Structure::default()),
            url: OnceLock::new(),
            replay: OnceLock::new(),
        }
    }

    /// The URL the agent listens on, or the debugger's it dials (`ws://HOST:PORT`).
    pub fn local_url(&self) -> String {
        self.url.get().cloned().unwrap_or_default()
    }

    /// Whether a debugger is attached (one relaxed atomic read): a front end records
    /// nothing otherwise.
    #[inline]
    pub fn is_attached(&self) -> bool {
        self.phase.is_attached()
    }

    fn update_hot(&self) {
        // Two threads may update at once (a program thread taking the start hold, the
        // connection's attaching), each from what it read: the one that stores last may
        // store a stale value. So each checks after its store, behind a fence that orders
        // it with the other's, that neither the inputs nor the flag changed meanwhile.
        loop {
            let hot = self.phase.is_attached() || self.wait_pending.load(Relaxed);
            self.hot.store(hot, Relaxed);
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            let now = self.phase.is_attached() || self.wait_pending.load(Relaxed);
            if now == hot && self.hot.load(Relaxed) == hot {
                return;
            }
        }
    }

    /// Everything was sent, or no debugger will be served any more (the connection's
    /// side): the program's exit may go on (see `Hook::on_finished`).
    fn signal_finished(&self) {
        let (m, cv) = &self.finished;
        self.phase.end();
        self.update_hot();
        // Taken after the phase changed, so that a waiter that saw it unchanged under
        // the lock is waiting by the time of the notification.
        let _guard = lock(m);
        cv.notify_all();
    }

    // ---- the connection's side ----------------------------------------------------------

    fn hello(&self) -> Event {
        Event::Hello {
            program: self.program.clone(),
            pid: std::process::id(),
            protocol: proto::PROTOCOL_VERSION,
        }
    }

    fn structure_event(&self) -> Event {
        lock(&self.structure).event()
    }

    /// Mark the connection attached and describe the structure in one step, so that a
    /// collection or graph added meanwhile is either in it or announced afterwards.
    fn attach_structure(&self) -> Event {
        let st = lock(&self.structure);
        self.phase.attach();
        self.update_hot();
        st.event()
    }

    /// Start streaming; returns the snapshot every later event is consistent with.
    fn attach(&self) -> Event {
        let Some(d) = self.debuggee.get() else {
            return self.cut(Vec::new());
        };
        // A snapshot is one frame: programs with huge queues get their first messages
        // listed and the rest counted.
        let limit = (SNAPSHOT_ENTRIES / d.thread_count().max(1)).clamp(10, QUEUE_LIST_MAX);
        let mut snapshot = None;
        d.snapshot(limit, &mut |threads| snapshot = Some(self.cut(threads)));
        // A debuggee that never called back still gets the stream started.
        snapshot.unwrap_or_else(|| self.cut(Vec::new()))
    }

    /// The attach cut, run while the debuggee's queues are locked (they are described in
    /// `threads`): the stream starts here.
    fn cut(&self, threads: Vec<proto::ThreadSnapshot>) -> Event {
        let mut s = lock(&self.stream.state);
        // Records from before the cut are dropped below: a batch whose sends were
        // recorded then is sent again, one by one.
        self.stream.session.fetch_add(1, Relaxed);
        // Attached by `attach_structure` already, normally: this then changes nothing
        // (and keeps a Finishing that came since).
        self.phase.attach();
        self.update_hot();
        // Events recorded before the cut are in the snapshot; a graph or collection
        // registered since `attach_structure` is not: its `structure` reply is dropped
        // with them, so the latest structure follows the snapshot (packed events name
        // operations and threads by their place in it).
        s.buf.clear();
        s.buf.push(Rec::Full(Box::new(self.structure_event())));
        Event::Snapshot {
            next_event_id: s.next_id,
            threads,
            held: s.held.values().map(|h| h.event.clone()).collect(),
        }
    }

    /// Stop streaming, clear the policy and release every hold.
    fn detach(&self) {
        {
            let mut s = lock(&self.stream.state);
            self.phase.detach();
            self.policy.clear();
            self.update_hot();
            s.buf.clear();
            for (_, h) in std::mem::take(&mut s.held) {
                let _ = h.tx.send(HeldCmd::Release { trace: None });
            }
        }
        self.stream.space.notify_all();
    }
}

#[cfg(test)]
mod tests;
