//! Record and replay for programs on the runtime (feature `runtime`).
//!
//! `RACETRACK_RECORD=FILE` records a free run's choices into a replay log
//! ([`racetrack_protocol::replay_log`]); `RACETRACK_REPLAY=FILE` makes a run take them
//! again. Either is a [`Hook`] of its own, [`Choices`], which wraps the debugging agent
//! when one is configured too (`RACETRACK_LISTEN` / `RACETRACK_CONNECT`: a replay under
//! the debugger; `RACETRACK_TRACE`: a traced record or replay): it does its part of each
//! event, then hands the event on.
//!
//! What is recorded (see the log's module): for each thread, which sender's message each
//! step took, as runs. A replay makes each thread, at each step start, take the next
//! message of the sender its log names: if the message about to start is another's, the
//! named sender's first pending one is moved in front and the other put back; if none is
//! pending, the thread waits for it. The messages of one sender keep their order, so the
//! thread takes exactly the recorded message.
//!
//! A replay that cannot follow its log (another program, other arguments) stops the
//! program with exit code [`EXIT_DIVERGED`] and says where; under a debugger it tells the
//! debugger and the program runs on free. Taking over ([`Choices::take_over`]) ends the
//! replay at once: from there the run is free, under whatever holds the debugger sets.

mod play;
mod record;

use crate::agent::Agent;
use play::Replayer;
use racetrack_protocol::launch as env;
use racetrack_runtime::hook::{
    CollectionInfo, GraphInfo, Hook, OpInfo, RecvEvent, SendEvent, StepEvent, StepKind, StreamedSend,
    StreamedStep, ThreadInfo,
};
use racetrack_runtime::ids::MsgId;
use racetrack_runtime::{RuntimeView, ScheduleError};
use record::Recorder;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

/// The exit code of a program whose replay diverged from its log.
pub const EXIT_DIVERGED: i32 = 3;

/// Only the first runtime of a process records or replays: one log is one run.
static CLAIMED: AtomicBool = AtomicBool::new(false);

/// A recording or replaying hook, with the agent it wraps (if any).
pub struct Choices {
    mode: Mode,
    inner: Option<Arc<Agent>>,
}

enum Mode {
    Record(Recorder),
    Replay(Box<Replayer>),
}

/// The hook `RACETRACK_RECORD` or `RACETRACK_REPLAY` asks for, wrapping the agent the
/// rest of the environment starts (`agent`), or what `agent` gives alone when the log
/// cannot be written; `None` when neither variable is set, and then the caller starts
/// the agent as usual. A log that cannot be written or read is reported
/// on stderr in one line: a recording then runs unrecorded, a replay does not start
/// (the process exits with code 2, since the user asked for a run the log decides).
pub fn from_env(agent: impl FnOnce() -> Option<Arc<Agent>>) -> Option<Option<Arc<dyn Hook>>> {
    let var = |v: &str| std::env::var(v).ok().filter(|p| !p.is_empty());
    let (record, replay) = (var(env::ENV_RECORD), var(env::ENV_REPLAY));
    if record.is_none() && replay.is_none() {
        return None;
    }
    if CLAIMED.swap(true, Relaxed) {
        eprintln!("racetrack: this program builds a second runtime; only the first is recorded or replayed");
        return Some(agent().map(|a| a as Arc<dyn Hook>));
    }
    let debugged =
        var(env::ENV_TRACE).is_none() && (var(env::ENV_LISTEN).is_some() || var(env::ENV_CONNECT).is_some());
    let mode = if let Some(path) = replay {
        if record.is_some() {
            eprintln!("racetrack: RACETRACK_RECORD is ignored during a replay");
        }
        match Replayer::open(&path, debugged) {
            Ok(r) => Mode::Replay(Box::new(r)),
            Err(e) => {
                eprintln!("racetrack: cannot replay: {e}");
                std::process::exit(2);
            }
        }
    } else {
        let path = record.unwrap_or_default();
        match Recorder::create(&path) {
            Ok(r) => Mode::Record(r),
            Err(e) => {
                eprintln!("racetrack: cannot write the replay log {path}: {e}; the program runs unrecorded");
                return Some(agent().map(|a| a as Arc<dyn Hook>));
            }
        }
    };
    let inner = agent();
    if let (Mode::Replay(r), Some(a)) = (&mode, &inner) {
        r.set_agent(a.clone());
    }
    Some(Some(Arc::new(Choices { mode, inner })))
}

const NOT_A_REPLAY: &str = "this program is not being replayed";

impl Choices {
    /// End the replay: from here every thread takes its messages as they come. `Ok` with
    /// the steps replayed so far; an error when this is not a replay or it ended already.
    pub fn take_over(&self) -> Result<String, String> {
        match &self.mode {
            Mode::Replay(r) => r.take_over(),
            Mode::Record(_) => Err(NOT_A_REPLAY.to_owned()),
        }
    }

    fn replaying(&self) -> Option<&Replayer> {
        match &self.mode {
            Mode::Replay(r) if r.active() => Some(r),
            _ => None,
        }
    }

    fn inner_streaming(&self) -> bool {
        self.inner
            .as_ref()
            .is_none_or(|a| !a.is_hot() || a.streams_only())
    }
}

impl Hook for Choices {
    fn streaming(&self) -> bool {
        // A replay needs every step start one by one, where a message can be put back.
        self.replaying().is_none() && self.inner_streaming()
    }

    fn session(&self) -> u64 {
        self.inner.as_ref().map_or(0, |a| a.session())
    }

    fn streamed_send(&self, ev: &StreamedSend<'_>) -> Option<u64> {
        match &self.inner {
            Some(a) => a.streamed_send(ev),
            None => Some(0),
        }
    }

    fn streamed_step(&self, ev: &StreamedStep<'_>, stop: bool) {
        if let (Mode::Record(r), false) = (&self.mode, stop) {
            r.step(ev.thread.global, ev.from);
        }
        if let Some(a) = &self.inner {
            a.streamed_step(ev, stop);
        }
    }

    fn on_runtime(&self, view: RuntimeView) {
        if let Some(a) = &self.inner {
            a.on_runtime(view);
        }
    }

    fn on_collection(&self, info: &CollectionInfo) {
        match &self.mode {
            Mode::Record(r) => r.collection(info),
            Mode::Replay(r) => r.collection(info),
        }
        if let Some(a) = &self.inner {
            a.on_collection(info);
        }
    }

    fn on_graph(&self, info: &GraphInfo) {
        match &self.mode {
            Mode::Record(r) => r.graph(info),
            Mode::Replay(r) => r.graph(info),
        }
        if let Some(a) = &self.inner {
            a.on_graph(info);
        }
    }

    fn on_send(&self, ev: &mut SendEvent<'_>) {
        if let Some(r) = self.replaying() {
            r.bump();
        }
        if let Some(a) = &self.inner {
            a.on_send(ev);
        }
    }

    fn on_recv(&self, ev: &RecvEvent<'_>) {
        if let Some(r) = self.replaying() {
            r.bump();
        }
        if let Some(a) = &self.inner {
            a.on_recv(ev);
        }
    }

    fn on_recv_batch(
        &self,
        thread: &Arc<ThreadInfo>,
        op: &Arc<OpInfo>,
        msgs: &mut dyn Iterator<Item = (&MsgId, usize)>,
    ) {
        if let Some(r) = self.replaying() {
            r.bump();
        }
        if let Some(a) = &self.inner {
            a.on_recv_batch(thread, op, msgs);
        }
    }

    fn on_start(&self, ev: &mut StepEvent<'_>) {
        let on_message = ev.step != StepKind::Final;
        if let (Some(r), true) = (self.replaying(), on_message) {
            if !r.start(ev) {
                return; // put back: the thread starts the message the log names
            }
        }
        if let Some(a) = &self.inner {
            a.on_start(ev);
        }
        match &self.mode {
            // A debugger put it back (a reorder while held): it has not started.
            Mode::Replay(r) if on_message && ev.access.put_back() => r.unstart(ev.thread.global),
            Mode::Replay(r) => r.started(ev.thread.global),
            Mode::Record(r) if on_message && !ev.access.put_back() => r.step(ev.thread.global, ev.from),
            Mode::Record(_) => {}
        }
    }

    fn on_stop(&self, ev: &mut StepEvent<'_>) {
        if let Mode::Replay(r) = &self.mode {
            r.stopped(ev.thread.global);
        }
        if let Some(a) = &self.inner {
            a.on_stop(ev);
        }
    }

    fn on_error(&self, err: &ScheduleError) {
        if let Mode::Replay(r) = &self.mode {
            r.failed();
        }
        if let Some(a) = &self.inner {
            a.on_error(err);
        }
    }

    fn on_shutdown(&self) {
        if let Some(a) = &self.inner {
            a.on_shutdown();
        }
    }

    fn on_finished(&self) {
        match &self.mode {
            Mode::Record(r) => r.finish(),
            Mode::Replay(r) => r.finish(),
        }
        if let Some(a) = &self.inner {
            a.on_finished();
        }
    }
}

/// The sender code of a message from `from` (a global thread index; `None`: a schedule's
/// input), as the log writes it.
fn sender_code(from: Option<usize>) -> u64 {
    from.map_or(racetrack_protocol::replay_log::SENDER_INPUT, |g| g as u64 + 1)
}
