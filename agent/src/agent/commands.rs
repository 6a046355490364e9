//! The debugger's commands, one function each. A command either takes effect here and now
//! (policy changes, releases, queue listings) or is handed to the held thread it concerns
//! (reorder, edit, state), which alone may touch its queue, message or state and answers
//! it itself.

use super::held::HeldCmd;
use super::hook::entry;
use super::{lock, Agent, QUEUE_LIST_MAX};
use racetrack_protocol::{self as proto, Command, Event};
use racetrack_runtime::hook::{Rest, ThreadInfo};
use racetrack_runtime::RuntimeView;
use serde_json::Value;
use std::sync::Arc;

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
            } => self.cmd_break(&op, thread, on, trace),
            Command::Pause { thread, on } => self.cmd_pause(&thread, on),
            Command::Queue { thread, content } => self.cmd_queue(&thread, content),
            Command::Reorder { thread, order, rest } => self.cmd_reorder(&thread, order, rest, req),
            Command::Edit { event_id, content } => self.cmd_edit(event_id, content, req),
            Command::State { thread } => self.cmd_state(&thread, req),
            Command::SetState { thread, content } => self.cmd_set_state(&thread, content, req),
            Command::Detach => self.cmd_detach(),
        }
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

    /// Set or clear a breakpoint on operation `op`, at one thread of its collection or at
    /// all of them.
    fn cmd_break(&self, op: &str, thread: Option<String>, on: bool, trace: bool) -> Result<Answer, String> {
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
        self.policy.set_breaks(op_info.id, threads, on, trace);
        Ok(Answer::Now)
    }

    fn cmd_pause(&self, thread: &str, on: bool) -> Result<Answer, String> {
        let t = self.thread_named(thread)?;
        self.policy.set_paused(t.global, on);
        Ok(Answer::Now)
    }

    /// List a thread's pending messages (running or not: the runtime locks its queue).
    fn cmd_queue(&self, thread: &str, content: bool) -> Result<Answer, String> {
        let t = self.thread_named(thread)?;
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
        Ok(Answer::ByHeldThread)
    }

    fn cmd_edit(&self, event_id: u64, content: Value, req: Option<u64>) -> Result<Answer, String> {
        let is_send = {
            let s = lock(&self.stream.state);
            s.held.get(&event_id).map(|h| h.is_send)
        };
        match is_send {
            None => Err(format!("event {event_id} is not held")),
            Some(false) => Err(format!(
                "event {event_id} is not a send; only held sends can be edited"
            )),
            Some(true) => {
                if !self.to_held(|i, _| i == event_id, HeldCmd::Edit { content, req }) {
                    return Err(format!("event {event_id} is not held any more"));
                }
                Ok(Answer::ByHeldThread)
            }
        }
    }

    fn cmd_state(&self, thread: &str, req: Option<u64>) -> Result<Answer, String> {
        let t = self.thread_named(thread)?;
        if !self.to_held(|_, h| h.thread == t.global, HeldCmd::GetState { req }) {
            return Err(format!(
                "{} is running; its state can be read only while it is suspended",
                t.name
            ));
        }
        Ok(Answer::ByHeldThread)
    }

    fn cmd_set_state(&self, thread: &str, content: Value, req: Option<u64>) -> Result<Answer, String> {
        let t = self.thread_named(thread)?;
        if !self.to_held(|_, h| h.thread == t.global, HeldCmd::SetState { content, req }) {
            return Err(format!(
                "{} is running; its state can be set only while it is suspended",
                t.name
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

    fn thread_named(&self, name: &str) -> Result<Arc<ThreadInfo>, String> {
        let threads = self.view.get().map(RuntimeView::threads).unwrap_or_default();
        threads.iter().find(|t| &*t.name == name).cloned().ok_or_else(|| {
            let names: Vec<&str> = threads.iter().map(|t| &*t.name).collect();
            format!("unknown thread `{name}` (threads: {})", names.join(", "))
        })
    }
}
