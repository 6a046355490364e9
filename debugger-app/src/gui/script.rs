//! `--script FILE`: drive the GUI unattended (CI's real-window check, demos). JSON lines:
//! any protocol command (sent when reached), plus
//!
//! - `{"cmd":"wait","until":"held"|"exit"|"attached","timeout_ms":10000}`,
//! - `{"cmd":"sleep","ms":500}`,
//! - `{"cmd":"expect_output","contains":"\"matches_reference\":true"}` — the program's last
//!   stdout line must contain the text,
//! - `{"cmd":"select","op":"Sort","thread":"proc[1]"}` — select a node (as a click does),
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
    /// Nothing left.
    Done,
}

/// A loaded script.
pub struct Script {
    lines: VecDeque<(usize, Value)>,
    since: Option<Instant>,
}

impl Script {
    /// Parse a script; errors name the line.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut lines = VecDeque::new();
        for (i, l) in text.lines().enumerate() {
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let v: Value = serde_json::from_str(l).map_err(|e| format!("line {}: {e}", i + 1))?;
            let cmd = v
                .get("cmd")
                .and_then(Value::as_str)
                .ok_or(format!("line {}: no `cmd`", i + 1))?;
            if !matches!(cmd, "wait" | "sleep" | "expect_output" | "quit" | "select") {
                Command::parse(l).map_err(|e| format!("line {}: {e}", i + 1))?;
            }
            lines.push_back((i + 1, v));
        }
        Ok(Self { lines, since: None })
    }

    /// Advance against the model.
    pub fn step(&mut self, model: &Model) -> Result<Step, String> {
        let Some((line, v)) = self.lines.front().cloned() else {
            return Ok(Step::Done);
        };
        let cmd = v.get("cmd").and_then(Value::as_str).unwrap_or_default();
        let since = *self.since.get_or_insert_with(Instant::now);
        let done = |s: &mut Self| {
            s.lines.pop_front();
            s.since = None;
        };
        match cmd {
            "wait" => {
                let timeout =
                    Duration::from_millis(v.get("timeout_ms").and_then(Value::as_u64).unwrap_or(10_000));
                let until = v.get("until").and_then(Value::as_str).unwrap_or("held");
                let ok = match until {
                    "held" => !model.control.held.is_empty(),
                    "exit" => model.control.exited.is_some(),
                    "attached" => model.control.attached,
                    other => return Err(format!("line {line}: unknown `until` {other}")),
                };
                if ok {
                    done(self);
                    Ok(Step::Wait)
                } else if since.elapsed() > timeout {
                    Err(format!("line {line}: wait until {until} timed out"))
                } else {
                    Ok(Step::Wait)
                }
            }
            "sleep" => {
                if since.elapsed() >= Duration::from_millis(v.get("ms").and_then(Value::as_u64).unwrap_or(0))
                {
                    done(self);
                }
                Ok(Step::Wait)
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
                if last.contains(want) {
                    done(self);
                    Ok(Step::Wait)
                } else {
                    Err(format!(
                        "line {line}: the program's last output `{last}` does not contain `{want}`"
                    ))
                }
            }
            "select" => {
                let field = |k: &str| {
                    v.get(k)
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .ok_or(format!("line {line}: select needs `{k}`"))
                };
                let (op, thread) = (field("op")?, field("thread")?);
                // The node appears when it first runs: wait for it as `wait` does.
                match model
                    .node_key(&op, &thread)
                    .and_then(|k| model.unfolded()?.find(k))
                {
                    Some(id) => {
                        done(self);
                        Ok(Step::Select(id))
                    }
                    None if since.elapsed() > Duration::from_secs(10) => {
                        Err(format!("line {line}: no node {op} @ {thread} to select"))
                    }
                    None => Ok(Step::Wait),
                }
            }
            "quit" => {
                done(self);
                Ok(Step::Quit(
                    v.get("code").and_then(Value::as_i64).unwrap_or(0) as i32
                ))
            }
            _ => {
                let c = Command::parse(&v.to_string()).map_err(|e| format!("line {line}: {e}"))?;
                done(self);
                Ok(Step::Send(c))
            }
        }
    }
}
