//! The debugger's commands, one function each. A command either takes effect here and now
//! (policy changes, releases, queue listings) or is handed to the held thread it concerns
//! (reorder, edit, state), which alone may touch its queue, message or state and answers
//! it itself.

use super::debuggee::Thread;
use super::held::HeldCmd;
use super::policy::CondBreak;
use super::{lock, scenario_event, Agent, QUEUE_LIST_MAX};
use racetrack_protocol::{self as proto, Command, Event, When};
use serde_json::Value;

/// Pending messages a `queue` reply lists when contents are asked for (contents can be
/// large: fewer of them fit in a frame).
const QUEUE_CONTENT_MAX: usize = 200;

/// When a command that was accepted gets its verdict.
pub(super) enum Answer {
    /// Now, by [`Agent::apply`].
    Now,
    /// From the held thread that serves it.
    ByHeldThread,
}

impl Agent {
    /// Apply one command from the debugger. Problems become `error` events. A command with
    /// a request number gets exactly one verdict carrying it: `ok` or `error` (commands
    /// served by a held thread get theirs from that thread, see [`Agent::held_loop`]).
    pub(super) fn apply(&self, cmd: Command, req: Option<u64>) {
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
                thread,
                event_id,
                trace,
            } => self.cmd_continue(thread, event_id, trace),
            Command::StepMode { on } => self.cmd_step_mode(on),
            Command::AckAll { on } => self.cmd_ack_all(on),
            Command::Content { on } => self.cmd_content(on),
            Command::Break {
                op,
                thread,
                on,
                trace,
                when,
                hit,
            } => self.cmd_break(BreakArgs {
                op,
                thread,
                on,
                trace,
                when,
                hit,
            }),
            Command::Pause { thread, on } => self.cmd_pause(&thread, on),
            Command::Queue { thread, content } => self.cmd_queue(&thread, content),
            Command::Reorder { thread, order, rest } => self.cmd_reorder(&thread, order, rest, req),
            Command::Edit {
                event_id,
                thread,
                content,
            } => self.cmd_edit(self.held_event(event_id, thread.as_deref())?, content, req),
            Command::Match {
                event_id,
                thread,
                source,
                tag,
            } => self.cmd_match(self.held_event(event_id, thread.as_deref())?, source, tag, req),
            Command::State { thread, event_id } => {
                self.cmd_state(self.held_event(event_id, thread.as_deref())?, req)
            }
            Command::SetState {
                thread,
                event_id,
                content,
            } => self.cmd_set_state(self.held_event(event_id, thread.as_deref())?, content, req),
            Command::Detach => self.cmd_detach(),
            Command::TakeOver => self.cmd_replay(req, "take_over", |r| r.take_over()),
            Command::SaveScenario { path } => self.cmd_save_scenario(req, path),
        }
    }

    /// A command for the recording or replaying hook around the agent: answered by `ok`
    /// with what it did as the target.
    fn cmd_replay(
        &self,
        req: Option<u64>,
        name: &str,
        f: impl FnOnce(&dyn super::ReplayControl) -> Result<String, super::ReplayError>,
    ) -> Result<Answer, String> {
        let control = self.replay.get().and_then(std::sync::Weak::upgrade).ok_or(
            "this program records no choices: only a program started under the debugger (held at its start) or replayed can",
        )?;
        let done = f(&*control).map_err(|e| e.to_string())?;
        self.reply(Event::Ok {
            cmd: name.to_owned(),
            target: Some(done),
            req,
        });
        Ok(Answer::ByHeldThread)
    }

    /// `save_scenario`: the session's choices go to the debugger, which writes them at
    /// `path` on its own machine and answers.
    fn cmd_save_scenario(&self, req: Option<u64>, path: String) -> Result<Answer, String> {
        let control = self.replay.get().and_then(std::sync::Weak::upgrade).ok_or(
            "this program records no choices: only a program started under the debugger (held at its start) or replayed can",
        )?;
        let (bytes, summary) = control.scenario().map_err(|e| e.to_string())?;
        self.reply(scenario_event(Some(path), &bytes, summary, req)?);
        Ok(Answer::ByHeldThread)
    }

    /// Release every hold, those of one thread, or one event (of that thread, if named).
    fn cmd_continue(
        &self,
        thread: Option<String>,
        event_id: Option<u64>,
        trace: Option<bool>,
    ) -> Result<Answer, String> {
        match (thread, event_id) {
            (None, None) => {
                // Under the stream lock, where the start hold registers: it is either
                // released below or not taken at all.
                lock(&self.stream.state).continued = true;
                if self
                    .wait_pending
                    .swap(false, std::sync::atomic::Ordering::Relaxed)
                {
                    self.update_hot();
                }
                self.release(trace, |_, _| true);
            }
            (Some(t), None) => {
                let t = self.thread_named(&t)?;
                if self.release(trace, |_, h| h.thread == t.global) == 0 {
                    return Err(format!("{} is not held", t.name));
                }
            }
            (thread, Some(id)) => {
                let t = thread.map(|t| self.thread_named(&t)).transpose()?;
                let n = self.release(trace, |i, h| {
                    i == id && t.as_ref().is_none_or(|t| t.global == h.thread)
                });
                if n == 0 {
                    return Err(format!("event {id} is not held"));
                }
            }
        }
        Ok(Answer::Now)
    }

    fn cmd_step_mode(&self, on: bool) -> Result<Answer, String> {
        self.policy.set_step_mode(on);
        Ok(Answer::Now)
    }

    fn cmd_ack_all(&self, on: bool) -> Result<Answer, String> {
        self.policy.set_ack_all(on);
        Ok(Answer::Now)
    }

    fn cmd_content(&self, on: bool) -> Result<Answer, String> {
        self.policy.set_content(on);
        Ok(Answer::Now)
    }

    /// Set or clear a breakpoint on operation `op` (`*`: every operation), at one thread
    /// or at every thread: a plain one, or a conditional one (`when`, `hit`). A clear
    /// without `when` and `hit` clears every breakpoint there, conditional or not; with
    /// either, only the conditional one with that condition.
    fn cmd_break(&self, b: BreakArgs) -> Result<Answer, String> {
        let when = b.when.clone().unwrap_or_default();
        check_condition(&when, b.hit, self.debuggee.get().is_some_and(|d| d.has_calls()))?;
        let (op_id, coll) = if b.op == "*" {
            (None, None)
        } else {
            let st = lock(&self.structure);
            let (id, o) = st.op_named(&b.op)?;
            let c = st.collections.get(o.collection).ok_or("unknown collection")?;
            (Some(id), Some((o.collection, c.name.clone())))
        };
        let thread = b.thread.map(|t| self.thread_named(&t)).transpose()?;
        if let (Some(t), Some((id, name))) = (&thread, &coll) {
            if t.collection != *id {
                return Err(format!(
                    "`{}` runs on collection `{name}`, not on {}",
                    b.op, t.name
                ));
            }
        }
        let thread = thread.map(|t| t.global);
        let plain = op_id.is_some() && when.is_empty() && b.hit.unwrap_or(1) == 1;
        match (op_id, b.on) {
            (_, false) if b.when.is_none() && b.hit.is_none() => self.policy.clear_breaks(op_id, thread),
            (Some(op), true) if plain => {
                let threads = match thread {
                    Some(t) => vec![t],
                    None => self.threads_running(op),
                };
                self.policy.set_breaks(op, threads, true, b.trace);
            }
            _ => {
                let c = CondBreak::new(op_id, thread, when, b.hit.unwrap_or(1), b.trace);
                self.policy.set_cond(c, b.on);
            }
        }
        Ok(Answer::Now)
    }

    /// The global indexes of the threads that run operation `op`.
    fn threads_running(&self, op: usize) -> Vec<usize> {
        let st = lock(&self.structure);
        let coll = st.ops.get(op).and_then(|o| st.collections.get(o.collection));
        coll.map(|c| c.threads.iter().map(|t| t.global).collect())
            .unwrap_or_default()
    }

    fn cmd_pause(&self, thread: &str, on: bool) -> Result<Answer, String> {
        let t = self.thread_named(thread)?;
        self.policy.set_paused(t.global, on);
        Ok(Answer::Now)
    }

    /// List a thread's pending messages (running or not: the debuggee locks its queue).
    fn cmd_queue(&self, thread: &str, content: bool) -> Result<Answer, String> {
        let t = self.thread_named(thread)?;
        let debuggee = self.debuggee.get().ok_or("no program to list the queue of")?;
        // Contents can be large: fewer of them fit in a frame.
        let cap = if content {
            QUEUE_CONTENT_MAX
        } else {
            QUEUE_LIST_MAX
        };
        let (messages, more) = debuggee.queue(t.global, cap, content);
        self.reply(Event::Queue {
            thread: t.name.to_string(),
            messages,
            more,
        });
        Ok(Answer::Now)
    }

    fn cmd_reorder(
        &self,
        thread: &str,
        order: Vec<String>,
        rest: Option<proto::Rest>,
        req: Option<u64>,
    ) -> Result<Answer, String> {
        let t = self.thread_named(thread)?;
        if !self.to_held(|_, h| h.thread == t.global, HeldCmd::Reorder { order, rest, req }) {
            return Err(format!(
                "{} is running; a reorder needs it suspended (pause it or set a breakpoint)",
                t.name
            ));
        }
        Ok(Answer::ByHeldThread)
    }

    /// The held event an `edit`, `match`, `state` or `set_state` names: by its number, by
    /// the thread held at it, or by both, which must agree. Resolved here, in the agent,
    /// rather than in a front end: the agent alone knows what is held right now (a
    /// controller's view lags the stream), and every debugger — `racetrack ctl`, the GUI,
    /// a scenario, a client of its own — gets the same rule and the same errors.
    fn held_event(&self, event_id: Option<u64>, thread: Option<&str>) -> Result<HeldEvent, String> {
        let t = thread.map(|t| self.thread_named(t)).transpose()?;
        let s = lock(&self.stream.state);
        let of_thread = |t: &Thread| {
            s.held
                .iter()
                .find(|(_, h)| h.thread == t.global)
                .map(|(id, h)| (*id, h))
        };
        let (id, h) = match (event_id, &t) {
            (Some(id), None) => match s.held.get(&id) {
                Some(h) => (id, h),
                None => return Err(format!("event {id} is not held")),
            },
            (None, Some(t)) => of_thread(t).ok_or_else(|| {
                format!(
                    "{} is running; the command needs it suspended (held at an event)",
                    t.name
                )
            })?,
            (Some(id), Some(t)) => match (s.held.get(&id), of_thread(t)) {
                (Some(h), _) if h.thread == t.global => (id, h),
                (_, Some((other, _))) => {
                    return Err(format!(
                        "event {id} and thread {} disagree: {} is held at event {other}",
                        t.name, t.name
                    ))
                }
                (Some(h), None) => {
                    return Err(format!(
                        "event {id} and thread {} disagree: event {id} holds {}, and {} is running",
                        t.name, h.thread_name, t.name
                    ))
                }
                (None, None) => {
                    return Err(format!(
                        "event {id} and thread {} disagree: neither is held",
                        t.name
                    ))
                }
            },
            (None, None) => {
                let mut held: Vec<(u64, &str)> =
                    s.held.iter().map(|(id, h)| (*id, &*h.thread_name)).collect();
                held.sort_unstable();
                let list: Vec<String> = held.iter().map(|(id, t)| format!("{t} (event {id})")).collect();
                return Err(if list.is_empty() {
                    "name the held event by `thread` or `event_id`; no thread is held now".to_owned()
                } else {
                    format!(
                        "name the held event by `thread` or `event_id`; held now: {}",
                        list.join(", ")
                    )
                });
            }
        };
        Ok(HeldEvent {
            id,
            thread: h.thread_name.clone(),
            is_send: h.is_send,
        })
    }

    fn cmd_edit(&self, held: HeldEvent, content: Value, req: Option<u64>) -> Result<Answer, String> {
        let id = held.id;
        if !held.is_send {
            return Err(format!(
                "event {id} ({} held) is not a send; only held sends can be edited",
                held.thread
            ));
        }
        if !self.to_held(|i, _| i == id, HeldCmd::Edit { content, req }) {
            return Err(format!("event {id} is not held any more"));
        }
        Ok(Answer::ByHeldThread)
    }

    fn cmd_match(
        &self,
        held: HeldEvent,
        source: i32,
        tag: Option<i32>,
        req: Option<u64>,
    ) -> Result<Answer, String> {
        let id = held.id;
        if !self.to_held(|i, _| i == id, HeldCmd::Match { source, tag, req }) {
            return Err(format!(
                "event {id} is not held any more; only a held wildcard receive or probe can be matched"
            ));
        }
        Ok(Answer::ByHeldThread)
    }

    fn cmd_state(&self, held: HeldEvent, req: Option<u64>) -> Result<Answer, String> {
        let id = held.id;
        if !self.to_held(|i, _| i == id, HeldCmd::GetState { req }) {
            return Err(format!(
                "{} is running; its state can be read only while it is suspended",
                held.thread
            ));
        }
        Ok(Answer::ByHeldThread)
    }

    fn cmd_set_state(&self, held: HeldEvent, content: Value, req: Option<u64>) -> Result<Answer, String> {
        let id = held.id;
        if !self.to_held(|i, _| i == id, HeldCmd::SetState { content, req }) {
            return Err(format!(
                "{} is running; its state can be set only while it is suspended",
                held.thread
            ));
        }
        Ok(Answer::ByHeldThread)
    }

    /// The server detaches without this (it closes the connection too); other callers of
    /// [`Agent::apply`] get the same effect.
    fn cmd_detach(&self) -> Result<Answer, String> {
        self.detach();
        Ok(Answer::Now)
    }

    /// The thread the debugger calls `name`.
    pub(super) fn thread_named(&self, name: &str) -> Result<Thread, String> {
        let mut threads = self.debuggee.get().map(|d| d.threads()).unwrap_or_default();
        match threads.iter().position(|t| &*t.name == name) {
            Some(i) => Ok(threads.swap_remove(i)),
            None => {
                let names: Vec<&str> = threads.iter().map(|t| &*t.name).collect();
                Err(format!("unknown thread `{name}` (threads: {})", names.join(", ")))
            }
        }
    }
}

/// The held event a command names (see [`Agent::held_event`]).
struct HeldEvent {
    id: u64,
    thread: std::sync::Arc<str>,
    is_send: bool,
}

/// A `break` command's fields (see [`Command::Break`]).
struct BreakArgs {
    op: String,
    thread: Option<String>,
    on: bool,
    trace: bool,
    when: Option<When>,
    hit: Option<u64>,
}

/// Why a breakpoint's condition and hit count cannot be set, if they cannot; `has_calls`:
/// the program's events carry MPI call parameters.
fn check_condition(when: &When, hit: Option<u64>, has_calls: bool) -> Result<(), String> {
    if hit == Some(0) {
        return Err("`hit` counts matching starts from 1".into());
    }
    when.check().map_err(|e| e.to_string())?;
    let fields = when.fields();
    if !fields.is_empty() && !has_calls {
        return Err(format!(
            "a condition on `{}` needs MPI calls: this program's steps carry no call parameters",
            fields.join("`, `")
        ));
    }
    Ok(())
}
