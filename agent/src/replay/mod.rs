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

mod digest;
mod play;
mod record;

use crate::agent::{Agent, ReplayControl, ReplayError};
use digest::Digest;
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

/// A recording and/or replaying hook, with the agent it wraps (if any).
pub struct Choices {
    record: Option<Recorder>,
    replay: Option<Box<Replayer>>,
    digest: Option<Digest>,
    inner: Option<Arc<Agent>>,
}

/// The hook the environment asks for around the agent `agent` starts:
/// - `RACETRACK_REPLAY=LOG`: a replay (recorded in memory too when debugged, so that the
///   session, variant included, can be saved as a scenario);
/// - `RACETRACK_RECORD=LOG`: a recording to that file;
/// - a program started under the debugger (`RACETRACK_LISTEN` or `RACETRACK_CONNECT`
///   with `RACETRACK_WAIT`: the debugger sees it from its first step): a recording in
///   memory, which `save_scenario` writes.
///
/// `None` when none of these applies: the caller starts the agent as usual. A log that
/// cannot be written is reported on stderr in one line and the program runs
/// unrecorded; one that cannot be read stops the program (exit code 2), since the user
/// asked for a run the log decides.
pub fn from_env(agent: impl FnOnce() -> Option<Arc<Agent>>) -> Option<Option<Arc<dyn Hook>>> {
    let var = |v: &str| std::env::var(v).ok().filter(|p| !p.is_empty());
    let (record, replay) = (var(env::ENV_RECORD), var(env::ENV_REPLAY));
    let digest = var(env::ENV_DIGEST);
    let debugged =
        var(env::ENV_TRACE).is_none() && (var(env::ENV_LISTEN).is_some() || var(env::ENV_CONNECT).is_some());
    let from_start = debugged && var(env::ENV_WAIT).is_some_and(|w| w != "0");
    if record.is_none() && replay.is_none() && digest.is_none() && !from_start {
        return None;
    }
    if CLAIMED.swap(true, Relaxed) {
        if record.is_some() || replay.is_some() {
            eprintln!(
                "racetrack: this program builds a second runtime; only the first is recorded or replayed"
            );
        }
        return Some(agent().map(|a| a as Arc<dyn Hook>));
    }
    let replay = match replay {
        Some(path) => match Replayer::open(&path, debugged) {
            Ok(r) => Some(Box::new(r)),
            Err(e) => {
                eprintln!("racetrack: cannot replay: {e}");
                std::process::exit(2);
            }
        },
        None => None,
    };
    let record = match (record, &replay) {
        (Some(_), Some(_)) => {
            eprintln!("racetrack: RACETRACK_RECORD is ignored during a replay");
            debugged.then(Recorder::in_memory)
        }
        (Some(path), None) => match Recorder::create(&path) {
            Ok(r) => Some(r),
            Err(e) => {
                eprintln!("racetrack: cannot write the replay log {path}: {e}; the program runs unrecorded");
                None
            }
        },
        (None, _) => debugged.then(Recorder::in_memory),
    };
    let digest = digest.and_then(|path| match Digest::create(&path) {
        Ok(d) => Some(d),
        Err(e) => {
            eprintln!("racetrack: cannot write the digests {path}: {e}; none are written");
            None
        }
    });
    let inner = agent();
    if record.is_none() && replay.is_none() && digest.is_none() {
        return Some(inner.map(|a| a as Arc<dyn Hook>));
    }
    if let (Some(r), Some(a)) = (&replay, &inner) {
        r.set_agent(a.clone());
    }
    let choices = Arc::new(Choices {
        record,
        replay,
        digest,
        inner,
    });
    if let Some(a) = &choices.inner {
        let weak = Arc::downgrade(&choices);
        a.set_replay_control(weak);
    }
    Some(Some(choices))
}

impl ReplayControl for Choices {
    /// End the replay: from here every thread takes its messages as they come.
    fn take_over(&self) -> Result<String, ReplayError> {
        self.replay.as_ref().ok_or(ReplayError::NotReplaying)?.take_over()
    }

    fn scenario(&self) -> Result<(Vec<u8>, String), ReplayError> {
        self.record.as_ref().ok_or(ReplayError::NotRecording)?.scenario()
    }
}

impl Choices {
    fn replaying(&self) -> Option<&Replayer> {
        self.replay.as_deref().filter(|r| r.active())
    }

    fn inner_streaming(&self) -> bool {
        self.inner
            .as_ref()
            .is_none_or(|a| !a.is_hot() || a.streams_only())
    }
}

impl Hook for Choices {
    fn streaming(&self) -> bool {
        // A replay needs every step start one by one, where a message can be put back;
        // digests need each message's content and each thread's state.
        self.replaying().is_none() && self.digest.is_none() && self.inner_streaming()
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
        if let (Some(r), false) = (&self.record, stop) {
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
        if let Some(r) = &self.record {
            r.collection(info);
        }
        if let Some(r) = &self.replay {
            r.collection(info);
        }
        if let Some(a) = &self.inner {
            a.on_collection(info);
        }
    }

    fn on_graph(&self, info: &GraphInfo) {
        if let Some(r) = &self.record {
            r.graph(info);
        }
        if let Some(r) = &self.replay {
            r.graph(info);
        }
        if let Some(a) = &self.inner {
            a.on_graph(info);
        }
    }

    fn on_send(&self, ev: &mut SendEvent<'_>) {
        if let Some(r) = self.replaying() {
            r.bump();
            r.edit_send(ev);
        }
        if let Some(a) = &self.inner {
            a.on_send(ev);
        }
        if let Some(d) = &self.digest {
            d.send(ev);
        }
        if let (Some(r), Some(t), true) = (&self.record, ev.thread, ev.replaced()) {
            let content = ev.content_json().unwrap_or(serde_json::Value::Null);
            let op = ev.to_op.map(|o| o.name.to_string()).unwrap_or_default();
            r.edit_send(t.global, ev.msg_id.to_string(), op, content);
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
        let me = ev.thread.global;
        if let (Some(r), true) = (self.replaying(), on_message) {
            if !r.start(ev) {
                return; // put back: the thread starts the message the log names
            }
            r.edit_state(ev, false);
        }
        if let Some(a) = &self.inner {
            a.on_start(ev);
        }
        // A debugger put it back (a reorder while held): it has not started.
        let put_back = on_message && ev.access.put_back();
        if let Some(r) = &self.replay {
            if put_back {
                r.unstart(me);
            } else {
                r.started(me);
            }
        }
        if let Some(r) = &self.record {
            if on_message && !put_back {
                r.step(me, ev.from);
            }
            if ev.access.state_replaced() {
                let state = ev.access.state_json().unwrap_or(serde_json::Value::Null);
                r.edit_state(me, false, put_back, state);
            }
        }
    }

    fn on_stop(&self, ev: &mut StepEvent<'_>) {
        if let Some(r) = &self.replay {
            if r.active() {
                r.edit_state(ev, true);
            }
            r.stopped(ev.thread.global);
        }
        if let Some(a) = &self.inner {
            a.on_stop(ev);
        }
        if let Some(d) = &self.digest {
            d.stop(ev);
        }
        if let (Some(r), true) = (&self.record, ev.access.state_replaced()) {
            let state = ev.access.state_json().unwrap_or(serde_json::Value::Null);
            r.edit_state(ev.thread.global, true, false, state);
        }
    }

    fn instance_states(&self) -> bool {
        self.digest.is_some() || self.inner.as_ref().is_some_and(|a| a.instance_states())
    }

    fn on_stuck(&self, waits: &[racetrack_runtime::StuckWait]) -> bool {
        self.inner.as_ref().is_some_and(|a| a.on_stuck(waits))
    }

    fn on_error(&self, err: &ScheduleError) {
        if let Some(r) = &self.replay {
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
        if let Some(r) = &self.record {
            r.finish();
            // The session as it ended goes to the debugger, which keeps it: a scenario
            // can be saved after the program is gone.
            if let (Some(a), Ok((bytes, summary))) = (&self.inner, r.scenario()) {
                if let Ok(ev) = crate::agent::scenario_event(None, &bytes, summary, None) {
                    a.emit(ev, true);
                }
            }
        }
        if let Some(r) = &self.replay {
            r.finish();
        }
        if let Some(d) = &self.digest {
            d.finish();
        }
        if let Some(a) = &self.inner {
            a.on_finished();
        }
    }
}

#[cfg(test)]
mod tests;

/// The sender code of a message from `from` (a global thread index; `None`: a schedule's
/// input), as the log writes it.
fn sender_code(from: Option<usize>) -> u64 {
    from.map_or(racetrack_protocol::replay_log::SENDER_INPUT, |g| g as u64 + 1)
}
