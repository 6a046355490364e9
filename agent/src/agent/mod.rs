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
//!
//! [`Hook`]: racetrack_runtime::hook::Hook
//! [`Hook::active_flag`]: racetrack_runtime::hook::Hook::active_flag
//! [`Hook::streaming`]: racetrack_runtime::hook::Hook::streaming

mod commands;
mod held;
mod hook;
mod policy;
mod record;
mod server;
mod stream;

use held::HeldCmd;
use hook::thread_snapshot;
use policy::Policy;
use record::Rec;
use stream::Stream;

use racetrack_protocol as proto;
use racetrack_protocol::launch as env;
use racetrack_protocol::Event;
use racetrack_runtime::hook::{CollectionInfo, OpInfo};
use racetrack_runtime::thread::ThreadSnap;
use racetrack_runtime::RuntimeView;
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

/// Start the agent as `RACETRACK_LISTEN` / `RACETRACK_WAIT` say, or `None` when
/// `RACETRACK_LISTEN` is unset. A configuration error is printed to stderr and the
/// program runs without the agent (it is a guest: it never stops the program).
pub fn start_from_env() -> Option<Arc<Agent>> {
    let listen = std::env::var(env::ENV_LISTEN).ok()?;
    let wait = std::env::var(env::ENV_WAIT).is_ok_and(|v| !v.is_empty() && v != "0");
    let token = std::env::var(env::ENV_TOKEN).ok().filter(|t| !t.is_empty());
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
    eprintln!("{}", env::listening_line(&format!("ws://{local}")));
    Ok(agent)
}

/// The collections and graphs the runtime registered, as the `structure` event lists them
/// (packed events name operations and threads by their index here).
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
    /// Shared with the runtime ([`Hook::active_flag`](racetrack_runtime::hook::Hook::active_flag)).
    hot: Arc<AtomicBool>,
    attached: AtomicBool,
    /// A connection holds the controlling slot.
    claimed: AtomicBool,
    wait_pending: AtomicBool,
    closing: AtomicBool,
    finishing: AtomicBool,
    /// How long the `RACETRACK_WAIT` start hold held the program, in microseconds.
    start_hold_us: AtomicU64,
    token: Option<String>,
    /// Which events hold their thread.
    policy: Policy,
    /// The buffered events, their numbering, and the registered holds.
    stream: Stream,
    finished: (Mutex<bool>, Condvar),
    view: OnceLock<RuntimeView>,
    structure: Mutex<Structure>,
    url: OnceLock<String>,
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
            hot: Arc::new(AtomicBool::new(wait)),
            attached: AtomicBool::new(false),
            claimed: AtomicBool::new(false),
            wait_pending: AtomicBool::new(wait),
            closing: AtomicBool::new(false),
            finishing: AtomicBool::new(false),
            start_hold_us: AtomicU64::new(0),
            token,
            policy: Policy::default(),
            stream: Stream::default(),
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

    /// Everything was sent (the connection's side): the program's exit may go on (see
    /// `Hook::on_finished`).
    fn signal_finished(&self) {
        let (m, cv) = &self.finished;
        *lock(m) = true;
        cv.notify_all();
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
            let mut s = lock(&self.stream.state);
            // Records from before the cut are dropped below: a batch whose sends were
            // recorded then is sent again, one by one.
            self.stream.session.fetch_add(1, Relaxed);
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
            let mut s = lock(&self.stream.state);
            self.attached.store(false, Relaxed);
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
mod tests {
    use super::*;
    use racetrack_runtime::hook::{GraphInfo, Hook, OpKind};

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
}
