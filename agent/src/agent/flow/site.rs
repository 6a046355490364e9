//! Held runtime events as the core's [`Site`]: a held send or step gives access to its
//! thread's queue and state (and a send to its message) through the runtime's
//! `ThreadAccess`.

use super::super::front::Site;
use super::convert::entry;
use racetrack_protocol::{QueueEntry, Rest};
use racetrack_runtime::hook::{self, SendEvent, StepEvent, ThreadAccess};
use serde_json::Value;

/// The protocol's rest of a reorder as the runtime takes it.
fn rest_of(rest: Option<Rest>) -> hook::Rest {
    match rest {
        None => hook::Rest::Named,
        Some(Rest::After) => hook::Rest::After,
        Some(Rest::Before) => hook::Rest::Before,
    }
}

/// The first `max` pending messages of the thread `access` suspends (named `thread`), and
/// how many more there are.
fn queue_of(access: &ThreadAccess<'_>, thread: &str, max: usize) -> (Vec<QueueEntry>, usize) {
    let pending = access.pending();
    let more = pending.len().saturating_sub(max);
    let listed = pending.iter().take(max).map(|q| entry(q, thread, None)).collect();
    (listed, more)
}

// `Site` (held.rs) speaks String errors: the runtime's typed ones become their message here.
impl Site for SendEvent<'_> {
    fn reorder(&mut self, order: &[String], rest: Option<Rest>) -> Result<bool, String> {
        match &mut self.access {
            Some(a) => a
                .reorder_with(order, rest_of(rest))
                .map(|()| false)
                .map_err(|e| e.to_string()),
            None => Err("the schedule caller has no queue".to_owned()),
        }
    }
    fn edit(&mut self, content: Value) -> Result<(), String> {
        self.replace_content(content).map_err(|e| e.to_string())
    }
    fn state(&self) -> Result<Value, String> {
        self.access.as_ref().map_or(Err("no thread".to_owned()), |a| {
            a.state_json().map_err(|e| e.to_string())
        })
    }
    fn set_state(&mut self, content: Value) -> Result<(), String> {
        self.access.as_mut().map_or(Err("no thread".to_owned()), |a| {
            a.set_state_json(content).map_err(|e| e.to_string())
        })
    }
    fn queue(&self, max: usize) -> (Vec<QueueEntry>, usize) {
        match (&self.access, self.thread) {
            (Some(a), Some(t)) => queue_of(a, &t.name, max),
            _ => (Vec::new(), 0),
        }
    }
}

impl Site for StepEvent<'_> {
    fn reorder(&mut self, order: &[String], rest: Option<Rest>) -> Result<bool, String> {
        self.access
            .reorder_with(order, rest_of(rest))
            .map_err(|e| e.to_string())?;
        Ok(self.access.put_back())
    }
    fn edit(&mut self, _content: Value) -> Result<(), String> {
        Err("only a message held at its send can be edited; this event is a step".to_owned())
    }
    fn state(&self) -> Result<Value, String> {
        self.access.state_json().map_err(|e| e.to_string())
    }
    fn set_state(&mut self, content: Value) -> Result<(), String> {
        self.access.set_state_json(content).map_err(|e| e.to_string())
    }
    fn queue(&self, max: usize) -> (Vec<QueueEntry>, usize) {
        queue_of(&self.access, &self.thread.name, max)
    }
}
