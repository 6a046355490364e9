//! `wait`: the controller's own command that blocks a script until the session reaches a
//! state (see the module doc of [`super`]).

use super::command::Fields;
use super::state::{Ctl, State};
use racetrack_protocol::{CtlEvent, Event};
use serde_json::Value;
use std::time::{Duration, Instant};

/// A parsed `wait`.
pub(super) struct WaitCmd {
    pub(super) until: Until,
    pub(super) timeout: Duration,
}

/// What a `wait` waits for.
pub(super) enum Until {
    /// An event is held (not one a command of ours is releasing), optionally of `thread`,
    /// of operation `op`, of kind `kind` (`send`, `start`, `stop`).
    Held {
        thread: Option<String>,
        op: Option<String>,
        kind: Option<String>,
    },
    /// The program exited, or the connection closed.
    Exit,
    /// At least `count` messages (for `op`, if given) pending on `thread`.
    Queue {
        thread: String,
        op: Option<String>,
        count: usize,
    },
    /// At least `count` events whose fields include all of `pattern`, since `since`.
    Event {
        pattern: Value,
        since: Since,
        count: usize,
    },
    /// No event for this long.
    Quiet(Duration),
}

/// Where `wait until event` starts counting.
#[derive(Clone, Copy)]
pub(super) enum Since {
    /// The previous command sent (the default).
    Command,
    /// The previous `continue` sent.
    Continue,
}

const FIELDS: &[&str] = &[
    "cmd",
    "until",
    "timeout_ms",
    "thread",
    "op",
    "event",
    "count",
    "match",
    "since",
    "ms",
];

impl WaitCmd {
    pub(super) fn parse(v: &Value) -> Result<Self, String> {
        let f = Fields::new(v, "wait", FIELDS)?;
        let until = f
            .str("until")?
            .ok_or("wait: `until` must be one of held, exit, queue, event, quiet")?;
        if !["held", "exit", "queue", "event", "quiet"].contains(&until) {
            return Err(format!(
                "wait: unknown `until` value `{until}` (held, exit, queue, event, quiet)"
            ));
        }
        let count = usize::try_from(f.u64("count")?.unwrap_or(1)).unwrap_or(usize::MAX);
        let since = match (until, v.get("since")) {
            (_, None) => Since::Command,
            ("event", Some(s)) if s == "command" => Since::Command,
            ("event", Some(s)) if s == "continue" => Since::Continue,
            ("event", Some(s)) => {
                return Err(format!(
                    "wait: unknown `since` value {s} (command, the default, or continue)"
                ))
            }
            (other, Some(_)) => return Err(format!("wait until {other}: `since` is only for until event")),
        };
        let until = match until {
            "held" => Until::Held {
                thread: f.string("thread")?,
                op: f.string("op")?,
                kind: f.string("event")?,
            },
            "exit" => Until::Exit,
            "queue" => Until::Queue {
                thread: f.string("thread")?.ok_or("wait until queue needs `thread`")?,
                op: f.string("op")?,
                count,
            },
            "event" => Until::Event {
                pattern: v
                    .get("match")
                    .filter(|p| p.is_object())
                    .cloned()
                    .ok_or("wait until event needs `match`: an object of fields")?,
                since,
                count,
            },
            "quiet" => Until::Quiet(Duration::from_millis(f.u64("ms")?.unwrap_or(300))),
            other => {
                return Err(format!(
                    "wait: unknown `until` value `{other}` (held, exit, queue, event, quiet)"
                ))
            }
        };
        let timeout = Duration::from_millis(f.u64("timeout_ms")?.unwrap_or(10_000));
        Ok(WaitCmd { until, timeout })
    }

    /// The `until` value, as the `waited` event and errors name it.
    fn name(&self) -> &'static str {
        match self.until {
            Until::Held { .. } => "held",
            Until::Exit => "exit",
            Until::Queue { .. } => "queue",
            Until::Event { .. } => "event",
            Until::Quiet(_) => "quiet",
        }
    }
}

/// Block until `w` is satisfied (printing `waited`), the program ends first, or the
/// timeout passes.
pub(super) fn wait(ctl: &Ctl, w: &WaitCmd) -> Result<(), String> {
    let name = w.name();
    let deadline = Instant::now() + w.timeout;
    let mut st = ctl.lock();
    loop {
        if satisfied(ctl, &mut st, &w.until) {
            drop(st);
            ctl.print(&CtlEvent::Waited {
                until: name.to_owned(),
            });
            return Ok(());
        }
        if !matches!(w.until, Until::Exit) && (st.closed || st.exit_code.is_some()) {
            return Err(format!("wait until {name}: the program ended first"));
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(format!(
                "wait until {name} timed out after {} ms",
                w.timeout.as_millis()
            ));
        }
        st = ctl
            .changed
            .wait_timeout(st, (deadline - now).min(Duration::from_millis(50)))
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0;
    }
}

fn satisfied(ctl: &Ctl, st: &mut State, until: &Until) -> bool {
    match until {
        Until::Held { thread, op, kind } => st.model.control.held.iter().any(|(id, h)| {
            let e = &h.event;
            !st.releasing.contains(&id.event_id)
                && thread.as_deref().is_none_or(|t| e.thread() == Some(t))
                && kind.as_deref().is_none_or(|k| match e {
                    Event::Send(_) => k == "send",
                    Event::Start(_) => k == "start",
                    Event::Stop(_) => k == "stop",
                    _ => false,
                })
                && op.as_deref().is_none_or(|o| match e {
                    Event::Send(s) => s.op.as_deref() == Some(o),
                    Event::Start(s) | Event::Stop(s) => s.op == o,
                    _ => false,
                })
        }),
        Until::Exit => st.exit_code.is_some() || st.closed,
        Until::Quiet(quiet) => {
            // No event for so long: the program is idle or everything is held.
            let arrived = ctl.announced.load(std::sync::atomic::Ordering::SeqCst);
            if arrived != st.quiet_count {
                st.quiet_count = arrived;
                st.quiet_since = Some(Instant::now());
            }
            st.quiet_since.get_or_insert_with(Instant::now).elapsed() >= *quiet
        }
        Until::Queue { thread, op, count } => st.model.queue_named(thread).is_some_and(|q| {
            q.iter()
                .filter(|m| op.as_deref().is_none_or(|o| m.op == o))
                .count()
                >= *count
        }),
        Until::Event {
            pattern,
            since,
            count,
        } => {
            let mark = match since {
                Since::Command => st.mark,
                Since::Continue => st.continue_mark,
            };
            st.recent
                .iter()
                .map(|(first, r)| r.count_matching(*first, mark, pattern))
                .sum::<usize>()
                >= *count
        }
    }
}

/// Whether `ev`'s fields include all of `pattern`'s.
pub(super) fn matches(ev: &Event, pattern: &Value) -> bool {
    let Ok(Value::Object(ev)) = serde_json::to_value(ev) else {
        return false;
    };
    let Value::Object(p) = pattern else { return false };
    p.iter().all(|(k, v)| ev.get(k) == Some(v))
}
