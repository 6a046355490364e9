//! What the debugger sends: [`Command`]s, optionally numbered as [`Request`]s.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{CommandError, RequestError, When};

/// Where a partial `reorder` puts the pending messages its `order` does not name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rest {
    /// After the named ones (the named ones move to the front).
    After,
    /// Before the named ones (the named ones move to the back).
    Before,
}

/// Everything the debugger can ask.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
pub enum Command {
    /// Release held events: all of them; or one thread's (`thread`); or one (`event_id`).
    /// `trace` sets whether the resumed step's outputs are traced.
    Continue {
        /// Only this thread.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread: Option<String>,
        /// Only this event.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<u64>,
        /// Trace the outputs of the resumed step (or stop tracing them).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trace: Option<bool>,
    },
    /// Global step mode: hold every event.
    StepMode {
        /// On or off.
        on: bool,
    },
    /// Operation breakpoint on (op, thread) — every thread of the op when `thread` is
    /// absent. `trace`: outputs of the step that resumes from it are traced. With `when`
    /// or `hit` (or `op` `*`) it is a conditional breakpoint: it holds a start of `op` on
    /// `thread` whose call meets `when`, from the thread's `hit`-th such start on.
    Break {
        /// The operation to break on (`*`: every operation).
        op: String,
        /// The thread to break on (absent: every thread of the operation).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread: Option<String>,
        /// Set or clear.
        on: bool,
        /// Trace from this breakpoint.
        #[serde(default)]
        trace: bool,
        /// Only starts whose call meets this condition (MPI programs' calls).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        when: Option<When>,
        /// Hold from the thread's `hit`-th matching start on (counted per thread from
        /// when the breakpoint is set; absent: 1, the first).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hit: Option<u64>,
    },
    /// Thread breakpoint: hold every event of the thread.
    Pause {
        /// The thread to pause or resume.
        thread: String,
        /// On or off.
        on: bool,
    },
    /// Ask for a thread's pending queue (answered by a `queue` event).
    Queue {
        /// The thread whose queue to list.
        thread: String,
        /// Include message contents.
        #[serde(default)]
        content: bool,
    },
    /// Reorder a suspended thread's queue (see `docs/PROTOCOL.md`).
    Reorder {
        /// The held thread whose queue to reorder.
        thread: String,
        /// Without `rest`: every pending message id (plus the held start's message) in
        /// the new order. With `rest`: some of them, in their new order.
        order: Vec<String>,
        /// Where the messages `order` does not name go (absent: `order` must name every
        /// one). They keep their relative order, including messages that arrived after
        /// the debugger looked at the queue.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rest: Option<Rest>,
    },
    /// Replace the content of a held send, named by its event, by the thread held at it,
    /// or by both (they must agree; see [`Command::held_target`]).
    Edit {
        /// The held send event.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<u64>,
        /// The thread held at the send.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread: Option<String>,
        /// The new content.
        content: Value,
    },
    /// Force the match of a held wildcard receive or probe of an MPI program (its `start`
    /// event): it is made with this source (and tag) instead of `MPI_ANY_SOURCE`
    /// (`MPI_ANY_TAG`), so it matches that sender's message; others stay queued for later
    /// receives.
    Match {
        /// The held `start` event of the receive or probe.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<u64>,
        /// The thread (rank) held at that `start`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread: Option<String>,
        /// The sender's rank in the call's communicator.
        source: i32,
        /// The tag to match (absent: the call's own tag).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tag: Option<i32>,
    },
    /// Ask for a suspended thread's state (answered by a `state` event); the thread is
    /// named, or the event it is held at, or both.
    State {
        /// The held thread whose state to read.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread: Option<String>,
        /// The event it is held at.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<u64>,
    },
    /// Replace a suspended thread's state (named as for `state`).
    SetState {
        /// The held thread whose state to replace.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        thread: Option<String>,
        /// The event it is held at.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        event_id: Option<u64>,
        /// The new state.
        content: Value,
    },
    /// "Ack every event": every send, start and stop waits for an acknowledgment.
    AckAll {
        /// On or off.
        on: bool,
    },
    /// Stream every send's content (default off: held sends always carry it).
    Content {
        /// On or off.
        on: bool,
    },
    /// Release every hold, clear the policy, stop streaming.
    Detach,
    /// End a replay (`racetrack replay --ctl | --gui`): from here the program runs free,
    /// under whatever holds the debugger sets. Answered by `ok` with what was replayed
    /// as its `target`.
    TakeOver,
    /// Save the session's choices so far — which sender's message each thread took (the
    /// reorders), edited sends, replaced states — as a replay log at `path`, written by
    /// the debugger on its machine: `racetrack replay` of it makes the run take them again
    /// without the user. The agent answers with a `scenario` event (a program started
    /// under the debugger, held at its start, or replayed, records its session; others
    /// refuse); the debugger writes it and answers `ok` with what it holds.
    SaveScenario {
        /// Where to write it.
        path: String,
    },
}

impl Command {
    /// Every command's `cmd` name.
    pub const NAMES: [&'static str; 15] = [
        "continue",
        "step_mode",
        "break",
        "pause",
        "queue",
        "reorder",
        "edit",
        "match",
        "state",
        "set_state",
        "ack_all",
        "content",
        "detach",
        "take_over",
        "save_scenario",
    ];

    /// How a command served by one held event names it — `edit`, `match`, `state` and
    /// `set_state` take its `event_id`, the `thread` held at it, or both (which must
    /// agree): `(event_id, thread)`. `None` for the other commands.
    pub fn held_target(&self) -> Option<(Option<u64>, Option<&str>)> {
        match self {
            Command::Edit { event_id, thread, .. }
            | Command::Match { event_id, thread, .. }
            | Command::State { thread, event_id }
            | Command::SetState { thread, event_id, .. } => Some((*event_id, thread.as_deref())),
            _ => None,
        }
    }

    /// The command's wire name.
    pub fn name(&self) -> &'static str {
        // `NAMES` lists these (a test checks it against serde's list).
        match self {
            Command::Continue { .. } => "continue",
            Command::StepMode { .. } => "step_mode",
            Command::Break { .. } => "break",
            Command::Pause { .. } => "pause",
            Command::Queue { .. } => "queue",
            Command::Reorder { .. } => "reorder",
            Command::Edit { .. } => "edit",
            Command::Match { .. } => "match",
            Command::State { .. } => "state",
            Command::SetState { .. } => "set_state",
            Command::AckAll { .. } => "ack_all",
            Command::Content { .. } => "content",
            Command::Detach => "detach",
            Command::TakeOver => "take_over",
            Command::SaveScenario { .. } => "save_scenario",
        }
    }

    /// Parse one command, with an error that says what was wrong.
    pub fn parse(text: &str) -> Result<Command, CommandError> {
        let v: Value = serde_json::from_str(text).map_err(CommandError::MalformedJson)?;
        Self::from_value(v)
    }

    fn from_value(v: Value) -> Result<Command, CommandError> {
        let cmd = match v.get("cmd") {
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(CommandError::CmdNotString),
            None => return Err(CommandError::MissingCmd),
        };
        serde_json::from_value(v).map_err(|error| CommandError::Bad { cmd, error })
    }
}

/// A command as sent on the wire: optionally numbered with `"req": N`. A command that
/// carries a request number is answered by exactly one verdict carrying it: an `ok`
/// (after any reply such as `queue` or `state`) or an `error`. Without one, the
/// answers are as they always were (replies, `ok` for `edit` / `reorder` / `set_state`,
/// `error`s).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The request number, chosen by the debugger.
    pub req: Option<u64>,
    /// What the debugger asks the agent to do.
    pub cmd: Command,
}

impl From<Command> for Request {
    fn from(cmd: Command) -> Self {
        Request { req: None, cmd }
    }
}

impl Request {
    /// Parse one command with its optional `req`. On error, the request number comes
    /// with it when it could be read (so the refusal can carry it).
    pub fn parse(text: &str) -> Result<Request, RequestError> {
        let refused = |error| RequestError { req: None, error };
        let mut v: Value = serde_json::from_str(text).map_err(|e| refused(CommandError::MalformedJson(e)))?;
        let req = match v.as_object_mut().and_then(|o| o.remove("req")) {
            None => None,
            Some(r) => match r.as_u64() {
                Some(n) => Some(n),
                None => return Err(refused(CommandError::BadReq { found: r })),
            },
        };
        Command::from_value(v)
            .map(|cmd| Request { req, cmd })
            .map_err(|error| RequestError { req, error })
    }

    /// The request as one JSON object (`req` after the command's fields; absent when none).
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string(&self.cmd).unwrap_or_default();
        // A command is always an object with at least `cmd`: add the field before its end.
        if let (Some(n), true) = (self.req, text.ends_with('}')) {
            text.pop();
            text.push_str(",\"req\":");
            text.push_str(&n.to_string());
            text.push('}');
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::Command;

    /// `NAMES` is exactly the set serde knows (its error for an unknown `cmd` lists them).
    #[test]
    fn names_are_the_commands() {
        let e = Command::parse(r#"{"cmd":"no_such_command"}"#)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        let listed: Vec<&str> = e
            .split("expected one of ")
            .nth(1)
            .unwrap_or_default()
            .split(", ")
            .map(|n| n.trim_matches('`'))
            .collect();
        assert_eq!(listed, Command::NAMES, "{e}");
    }
}
