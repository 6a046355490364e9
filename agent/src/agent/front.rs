//! The agent core's front-end API: what a front end (the flow-graph runtime's, built in
//! with the `runtime` feature; an MPI interposition library, linking this crate with
//! `default-features = false`) uses to describe a program to the agent and report its
//! events. The flow-graph front end calls exactly these functions.
//!
//! # Driving the agent
//!
//! 1. [`start`](super::start) it (`127.0.0.1:0` picks a port; `wait` holds the first
//!    start event until a debugger says `continue`). It spawns the agent's own thread,
//!    which accepts one controlling debugger at a time and streams to it.
//! 2. Describe the program: [`Agent::set_debuggee`] once (what commands and an attach
//!    read: threads, queues, the snapshot), then [`Agent::add_collection`] for each
//!    collection of threads and [`Agent::add_operations`] for the operations. Threads are
//!    numbered across collections in registration order (their `global` index), operations
//!    by registration order: compact records and the policy name them by these indexes.
//! 3. On each event, on the program's thread, ask [`Agent::decide`] once, with the
//!    event's [`Point`] (a front end may skip even that while [`Agent::is_hot`] is false:
//!    one atomic read; [`Agent::hot_flag`] shares the flag), and do what the
//!    [`Decision`] says:
//!    - `Skip`: nothing;
//!    - `Stream`: [`Agent::record`] a compact [`Record`] (allocates nothing), or
//!      [`Agent::emit`] a full [`Event`](racetrack_protocol::Event) (a send with its
//!      content when the decision says `content`);
//!    - `Hold`: [`Agent::hold`] the full event (`held: true`, with its reason), passing
//!      [`Agent::still_holds`] for its point. It blocks the calling thread until the
//!      debugger releases it, serving the debugger's commands for it meanwhile through
//!      the event's [`Site`].
//! 4. At the end: [`Agent::shutdown`] (release every hold, take no new ones), then
//!    [`Agent::finish`] (wait until the debugger received everything; the agent then
//!    closes the connection).
//!
//! # Streaming and backpressure
//!
//! Recorded events go into one buffer the agent's thread drains every 10 ms, and at once
//! when 1,024 events accumulate, when a held event, a reply or a notice is added, or at
//! [`Agent::finish`]. The buffer is bounded (65,536 events): a `record`, `record_all` or
//! `emit` with `backpressure` set waits for room while a debugger is attached, so a slow
//! debugger slows the program down instead of growing memory. Pass `backpressure: false`
//! where the thread must not wait (it holds a lock the program's other threads need, such
//! as a queue's); the buffer then grows past its bound for that event.
//!
//! Events are numbered as they enter the buffer; nothing is recorded while no debugger is
//! attached (the calls return `None`): the attach snapshot describes the program then.

pub use super::debuggee::{Collection, Debuggee, Operation, Thread};
pub use super::decide::{Decision, Point};
pub use super::held::{FrontError, Site, SiteError};
pub use super::{ReplayControl, ReplayError};
pub use racetrack_protocol::{CallInfo, HoldReason, Kind, MsgPath, Record, RecordText};

use super::{lock, Agent};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the program's exit waits for a debugger that takes no more events.
const EXIT_PATIENCE: Duration = Duration::from_secs(10);
/// How long a dying program waits for the agent's thread without progress (see
/// [`Agent::flush_before_death`]): the debugger's answer to the close comes within it.
const DEATH_PATIENCE: Duration = Duration::from_secs(3);
/// How long a dying program waits in all (other threads may go on reporting).
const DEATH_LIMIT: Duration = Duration::from_secs(10);

impl Agent {
    /// Whether anything could want events at all: a debugger attached, or the start hold
    /// pending. When false, a front end reports nothing (one relaxed atomic read).
    #[inline]
    pub fn is_hot(&self) -> bool {
        self.hot.load(Relaxed)
    }

    /// The flag [`Agent::is_hot`] reads, for a front end that checks it without going
    /// through the agent (the runtime keeps it beside its threads).
    pub fn hot_flag(&self) -> Arc<AtomicBool> {
        self.hot.clone()
    }

    /// Whether events go straight to the stream: attached, and nothing could hold, edit
    /// or trace a message (no breakpoint, paused thread, step mode, "ack every event",
    /// content mode or pending start hold). A front end may then report in batches.
    #[inline]
    pub fn streams_only(&self) -> bool {
        self.phase.is_attached() && !(self.wait_pending.load(Relaxed) || self.policy.may_hold())
    }

    /// How many attach snapshots were taken: a record returned by [`Agent::record`] in
    /// an older session was dropped by a later attach (it is in that attach's snapshot).
    #[inline]
    pub fn session(&self) -> u64 {
        self.stream.session.load(Relaxed)
    }

    /// Whether this start event takes the `wait` start hold (true once, for the first
    /// start after [`start`](super::start) with `wait`): hold it with
    /// [`HoldReason::Wait`], attached or not.
    #[inline]
    pub(super) fn take_start_hold(&self) -> bool {
        let wait = self.wait_pending.load(Relaxed) && self.wait_pending.swap(false, Relaxed);
        if wait {
            self.update_hot();
        }
        wait
    }

    /// Whether a tracing breakpoint is set on operation `op` at thread `thread`: a step
    /// released without a trace override traces its outputs if so (the box may have been
    /// checked while it was held).
    pub fn break_traces(&self, op: usize, thread: usize) -> bool {
        self.policy.break_traces(op, thread)
    }

    /// Give the agent the program's threads and queues, for the debugger's commands and
    /// attach snapshots (once; later calls are ignored).
    pub fn set_debuggee(&self, d: Box<dyn Debuggee>) {
        let _ = self.debuggee.set(d);
    }

    /// Register a collection of threads (its index is the number registered before it);
    /// an attached debugger gets the new structure.
    pub fn add_collection(&self, c: Collection) {
        lock(&self.structure).collections.push(c);
        if self.phase.is_attached() {
            self.reply(self.structure_event());
        }
    }

    /// Register operations and the flows between them (an operation's index is the
    /// number registered before it; `edges` name operations by index, `(from, to)`); an
    /// attached debugger gets the new structure.
    pub fn add_operations(&self, ops: impl IntoIterator<Item = Operation>, edges: &[(usize, usize)]) {
        {
            let mut st = lock(&self.structure);
            st.ops.extend(ops);
            st.edges.extend_from_slice(edges);
        }
        if self.phase.is_attached() {
            self.reply(self.structure_event());
        }
    }

    /// Register the recording or replaying hook around this agent (once).
    pub fn set_replay_control(&self, control: std::sync::Weak<dyn ReplayControl>) {
        let _ = self.replay.set(control);
    }

    /// The program is shutting down: release every hold and take no new ones (a held
    /// event is then streamed as not held), and stop waiting for room in the buffer, so
    /// that every thread can finish.
    pub fn shutdown(&self) {
        self.closing.store(true, Relaxed);
        self.release(None, |_, _| true);
        self.stream.space.notify_all();
    }

    /// The program is dying (a fatal signal, `abort`, `exit` without the usual end: see
    /// `death`): let the agent's thread send what was reported so far and close, and wait
    /// for it — as long as it makes progress, giving up after 3 s without any, or after
    /// 10 s in all. Atomics and sleeps only: it runs in a signal
    /// handler, where waiting for a lock the dying thread holds would never end. The
    /// agent's thread needs no wake-up: it looks every 10 ms.
    pub fn flush_before_death(&self) {
        // Refused unless attached: nobody to flush to, or flushed already (Finished).
        if !self.phase.begin_finishing() {
            return;
        }
        let start = Instant::now();
        let (mut last, mut progress) = (self.stream.sent.load(Relaxed), start);
        while !self.phase.is_finished() && start.elapsed() < DEATH_LIMIT {
            std::thread::sleep(Duration::from_millis(1));
            let sent = self.stream.sent.load(Relaxed);
            if sent != last {
                (last, progress) = (sent, Instant::now());
            } else if progress.elapsed() > DEATH_PATIENCE {
                break;
            }
        }
    }

    /// The program is about to exit: flush everything to the attached debugger and wait
    /// until it was sent, as long as the debugger keeps reading (giving up after 10 s
    /// without progress); the agent then closes the connection. Returns at once when no
    /// debugger is attached.
    pub fn finish(&self) {
        // In one step with the check: a debugger that detached meanwhile is not waited for.
        if !self.phase.begin_finishing() {
            return;
        }
        let debug = std::env::var(racetrack_protocol::launch::ENV_DEBUG).is_ok();
        if debug {
            eprintln!(
                "racetrack: finishing with {} events buffered, {} frames sent",
                lock(&self.stream.state).buf.len(),
                self.stream.sent.load(Relaxed)
            );
        }
        self.stream.wake.notify_one();
        // Wait until everything is sent, as long as the debugger keeps reading (it may lag
        // behind a fast program); give up after EXIT_PATIENCE without progress. A lagging
        // debugger reads in bursts (its socket buffer refills only once half of it is
        // free): with 3 s, a debugger taking 25 µs per event lost the last 32,823 of
        // 800,004 events once.
        let (m, cv) = &self.finished;
        let mut guard = lock(m);
        let mut last_sent = self.stream.sent.load(Relaxed);
        while !self.phase.is_finished() {
            let (g, timeout) = cv
                .wait_timeout(guard, EXIT_PATIENCE)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            guard = g;
            let sent = self.stream.sent.load(Relaxed);
            if timeout.timed_out() && sent == last_sent {
                break;
            }
            last_sent = sent;
        }
        if debug {
            let (buffered, next_id) = {
                let s = lock(&self.stream.state);
                (s.buf.len(), s.next_id)
            };
            eprintln!(
                "racetrack: finished={} with {buffered} events buffered, {} frames and {} events sent, next id {next_id}, {} waits for room, start hold {} us",
                self.phase.is_finished(),
                self.stream.sent.load(Relaxed),
                self.stream.sent_events.load(Relaxed),
                self.stream.waits.load(Relaxed),
                self.start_hold_us.load(Relaxed)
            );
        }
    }
}
