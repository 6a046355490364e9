//! What `racetrack ctl` prints besides the agent's events.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What `racetrack ctl` prints of its own, between the agent's events on its stdout (the
/// scripting contract, `docs/PROTOCOL.md`): these never travel on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum CtlEvent {
    /// A line the program printed.
    Output {
        /// `stdout` or `stderr`.
        stream: String,
        line: String,
    },
    /// Reply to `clock`: an event's vector clock (per thread, how many of its events
    /// happen before this one or are it; threads at 0 left out), and with `with`, how
    /// the two events are ordered.
    Clock {
        event_id: u64,
        clock: serde_json::Map<String, Value>,
        /// The other event asked about.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        with: Option<u64>,
        /// `before` (this event happens before `with`), `after`, `concurrent` or `same`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        order: Option<String>,
    },
    /// A `wait` command was satisfied.
    Waited {
        /// What was waited for.
        until: String,
    },
    /// Scenario mode: the program's final stdout line (parsed as JSON when it is),
    /// printed after `exit`.
    Outcome {
        /// The final line.
        result: Value,
    },
    /// The program exited (`code`), was killed by a signal (`signal`, no `code`), or the
    /// connection closed (neither).
    Exit {
        /// The program's exit status.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<i32>,
        /// The signal that ended the program (6 for `abort`, 11 for a segmentation
        /// fault, …).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<i32>,
    },
}

impl CtlEvent {
    /// The event as one JSON line.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"event\":\"error\",\"message\":\"{e}\"}}"))
    }
}
