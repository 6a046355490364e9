//! `--script FILE`: drive the GUI unattended (CI's real-window check, demos). JSON lines:
//! any protocol command (sent when reached), plus
//!
//! - `{"cmd":"wait","until":"held"|"exit"|"attached"|"deadlock","timeout_ms":10000}`,
//! - `{"cmd":"sleep","ms":500}`,
//! - `{"cmd":"expect_output","contains":"\"matches_reference\":true"}` — the program's last
//!   stdout line must contain the text,
//! - `{"cmd":"select","op":"Sort","thread":"proc[1]"}` — select a node (as a click does),
//! - `{"cmd":"seek","ms":8.5}` — in `racetrack open`'s view, move the time slider there,
//! - `{"cmd":"view","whole":true,"fold":true}` — an MPI job's graph: show the whole job,
//!   fold the stretches between collectives (each optional),
//! - `{"cmd":"quit","code":0}` — close the window with that exit code.
//!
//! A failed wait or expectation closes the window with exit code 1.

use crate::model::Model;
use racetrack_protocol::Command;
use serde_json::Value;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// What the script wants this frame.
#[derive(Debug, PartialEq)]
pub enum Step {
    /// Send this command.
    Send(Command),
    /// Keep waiting (repaint soon).
    Wait,
    /// Close with this code.
    Quit(i32),
    /// Select this node.
    Select(crate::model::NodeId),
    /// Move the trace view's time slider to this time (ms).
    Seek(f64),
    /// The message-passing graph: show the whole job; fold between collectives (or not).
    View {
        /// Fit every call into view.
        whole: bool,
        /// Fold the stretches between collectives, or open them all.
        fold: Option<bool>,
    },
    /// Nothing left.
    Done,
}

/// Why a script line is refused (at parse) or failed (as it ran): the line and what.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct ScriptError {
    /// The line (from 1).
    pub line: usize,
    /// What is wrong with it.
    #[source]
    pub problem: ScriptProblem,
}

/// What is wrong with a script line (a [`ScriptError`] says which).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScriptProblem {
    /// Not JSON.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// No `cmd` field.
    #[error("no `cmd`")]
    NoCmd,
    /// A protocol command that does not parse.
    #[error("{0}")]
    Command(#[source] racetrack_protocol::CommandError),
    /// A `wait` for something unknown.
    #[error("unknown `until` {0}")]
    UnknownUntil(String),
    /// A `wait` that timed out.
    #[error("wait until {until} timed out")]
    Timeout {
        /// What was waited for.
        until: String,
    },
    /// An `expect_output` that the program's last line does not meet.
    #[error("the program's last output `{last}` does not contain `{want}`")]
    Output {
        /// The program's last stdout line.
        last: String,
        /// What the line expects.
        want: String,
    },
    /// A `seek` without its time.
    #[error("`seek` needs `ms`, a time in milliseconds")]
    SeekNeedsMs,
    /// A `select` without a field.
    #[error("select needs `{0}`")]
    SelectNeeds(&'static str),
    /// A `select` of a node that never appeared.
    #[error("no node {op} @ {thread} to select")]
    NoNode {
        /// The operation.
        op: String,
        /// The thread.
        thread: String,
    },
}

impl ScriptProblem {
    fn at(self, line: usize) -> ScriptError {
        ScriptError { line, problem: self }
    }
}

/// A loaded script.
pub struct Script {
    lines: VecDeque<(usize, Value)>,
    since: Option<Instant>,
}

impl Script {
    /// Parse a script; errors name the line.
    pub fn parse(text: &str) -> Result<Self, ScriptError> {
        let mut lines = VecDeque::new();
        for (i, l) in text.lines().enumerate() {
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let v: Value = serde_json::from_str(l).map_err(|e| ScriptProblem::Json(e).at(i + 1))?;
            let cmd = v
                .get("cmd")
                .and_then(Value::as_str)
                .ok_or_else(|| ScriptProblem::NoCmd.at(i + 1))?;
            if !matches!(
                cmd,
                "wait" | "sleep" | "expect_output" | "quit" | "select" | "seek" | "view"
            ) {
                Command::parse(l).map_err(|e| ScriptProblem::Command(e).at(i + 1))?;
            }
            lines.push_back((i + 1, v));
        }
        Ok(Self { lines, since: None })
    }

    /// Advance against the model.
    pub fn step(&mut self, model: &Model) -> Result<Step, ScriptError> {
        let Some((line, v)) = self.lines.front().cloned() else {
            return Ok(Step::Done);
        };
        let cmd = v.get("cmd").and_then(Value::as_str).unwrap_or_default();
        let since = *self.since.get_or_insert_with(Instant::now);
        // Each line says whether it is done, and what the window does now.
        let (finished, step) = match cmd {
            "wait" => wait_until(model, line, &v, since)?,
            "sleep" => {
                let ms = v.get("ms").and_then(Value::as_u64).unwrap_or(0);
                (since.elapsed() >= Duration::from_millis(ms), Step::Wait)
            }
            "expect_output" => {
                let want = v.get("contains").and_then(Value::as_str).unwrap_or_default();
                let last = model
                    .control
                    .log
                    .iter()
                    .rev()
                    .find(|l| l.level == "stdout")
                    .map(|l| l.text.as_str())
                    .unwrap_or("");
                if !last.contains(want) {
                    return Err(ScriptProblem::Output {
                        last: last.to_owned(),
                        want: want.to_owned(),
                    }
                    .at(line));
                }
                (true, Step::Wait)
            }
            "select" => select(model, line, &v, since)?,
            "seek" => match v.get("ms").and_then(Value::as_f64) {
                Some(ms) if ms >= 0.0 => (true, Step::Seek(ms)),
                _ => return Err(ScriptProblem::SeekNeedsMs.at(line)),
            },
            "view" => (
                true,
                Step::View {
                    whole: v.get("whole").and_then(Value::as_bool).unwrap_or(false),
                    fold: v.get("fold").and_then(Value::as_bool),
                },
            ),
            "quit" => (
                true,
                Step::Quit(v.get("code").and_then(Value::as_i64).unwrap_or(0) as i32),
            ),
            _ => {
                let c = Command::parse(&v.to_string()).map_err(|e| ScriptProblem::Command(e).at(line))?;
                (true, Step::Send(c))
            }
        };
        if finished {
            self.lines.pop_front();
            self.since = None;
        }
        Ok(step)
    }
}

/// `wait` (line `line`, started at `since`): done once its `until` holds.
fn wait_until(model: &Model, line: usize, v: &Value, since: Instant) -> Result<(bool, Step), ScriptError> {
    let timeout = Duration::from_millis(v.get("timeout_ms").and_then(Value::as_u64).unwrap_or(10_000));
    let until = v.get("until").and_then(Value::as_str).unwrap_or("held");
    let ok = match until {
        "held" => !model.control.held.is_empty(),
        "exit" => model.control.exited.is_some(),
        "attached" => model.control.attached,
        "deadlock" => model.control.deadlock.is_some(),
        other => return Err(ScriptProblem::UnknownUntil(other.to_owned()).at(line)),
    };
    if !ok && since.elapsed() > timeout {
        return Err(ScriptProblem::Timeout {
            until: until.to_owned(),
        }
        .at(line));
    }
    Ok((ok, Step::Wait))
}

/// `select`: the node appears when it first runs, so it is waited for as `wait` does.
fn select(model: &Model, line: usize, v: &Value, since: Instant) -> Result<(bool, Step), ScriptError> {
    let field = |k: &'static str| {
        v.get(k)
            .and_then(Value::as_str)
            .ok_or_else(|| ScriptProblem::SelectNeeds(k).at(line))
    };
    let (op, thread) = (field("op")?, field("thread")?);
    match model.node_key(op, thread).and_then(|k| model.unfolded()?.find(k)) {
        Some(id) => Ok((true, Step::Select(id))),
        None if since.elapsed() > Duration::from_secs(10) => Err(ScriptProblem::NoNode {
            op: op.to_owned(),
            thread: thread.to_owned(),
        }
        .at(line)),
        None => Ok((false, Step::Wait)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_lines_say_what_to_show() {
        let mut s = Script::parse(
            "{\"cmd\":\"view\",\"whole\":true,\"fold\":true}\n{\"cmd\":\"view\",\"fold\":false}",
        )
        .expect("parses");
        let model = Model::new();
        assert_eq!(
            s.step(&model).unwrap(),
            Step::View {
                whole: true,
                fold: Some(true)
            }
        );
        assert_eq!(
            s.step(&model).unwrap(),
            Step::View {
                whole: false,
                fold: Some(false)
            }
        );
        assert_eq!(s.step(&model).unwrap(), Step::Done);
    }
}
