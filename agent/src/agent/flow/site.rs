//! Held runtime events as the core's [`Site`]: a held send or step gives access to its
//! thread's queue and state (and a send to its message) through the runtime's
//! `ThreadAccess`.

use super::super::front::{Site, SiteError};
use super::convert::entry;
use crate::choice::Pick;
use racetrack_protocol::{QueueEntry, Rest};
use racetrack_runtime::hook::{self, SendEvent, StepEvent, ThreadAccess};
use racetrack_runtime::ReorderError;
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

/// Apply a runtime [`Pick`] to the thread `access` suspends: where a thread's next message
/// changes, for the replay and for live control alike. `Ok(true)`: the message about to
/// start was put back (the thread starts the new head instead). Other picks change nothing.
pub(crate) fn take(access: &mut ThreadAccess<'_>, pick: Pick<'_>) -> Result<bool, ReorderError> {
    match pick {
        Pick::Order { order, rest } => {
            access.reorder_with(order, rest_of(rest))?;
            Ok(access.put_back())
        }
        _ => Ok(false),
    }
}

// The runtime's typed errors are the `SiteError`'s own.
impl Site for SendEvent<'_> {
    fn reorder(&mut self, order: &[String], rest: Option<Rest>) -> Result<bool, SiteError> {
        match &mut self.access {
            // Mid-step: nothing is about to start, nothing is put back.
            Some(a) => take(a, Pick::Order { order, rest }).map_err(|e| SiteError::Order(e.into())),
            None => Err(SiteError::NotApplicable(
                "the schedule caller has no queue".to_owned(),
            )),
        }
    }
    fn edit(&mut self, content: Value) -> Result<(), SiteError> {
        self.replace_content(content)
            .map_err(|e| SiteError::Content(e.into()))
    }
    fn state(&self) -> Result<Value, SiteError> {
        self.access
            .as_ref()
            .map_or(Err(SiteError::NotApplicable("no thread".to_owned())), |a| {
                a.state_json().map_err(|e| SiteError::Content(e.into()))
            })
    }
    fn set_state(&mut self, content: Value) -> Result<(), SiteError> {
        self.access
            .as_mut()
            .map_or(Err(SiteError::NotApplicable("no thread".to_owned())), |a| {
                a.set_state_json(content)
                    .map_err(|e| SiteError::Content(e.into()))
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
    fn reorder(&mut self, order: &[String], rest: Option<Rest>) -> Result<bool, SiteError> {
        take(&mut self.access, Pick::Order { order, rest }).map_err(|e| SiteError::Order(e.into()))
    }
    fn edit(&mut self, _content: Value) -> Result<(), SiteError> {
        Err(SiteError::NotApplicable(
            "only a message held at its send can be edited; this event is a step".to_owned(),
        ))
    }
    fn state(&self) -> Result<Value, SiteError> {
        self.access.state_json().map_err(|e| SiteError::Content(e.into()))
    }
    fn set_state(&mut self, content: Value) -> Result<(), SiteError> {
        self.access
            .set_state_json(content)
            .map_err(|e| SiteError::Content(e.into()))
    }
    fn queue(&self, max: usize) -> (Vec<QueueEntry>, usize) {
        queue_of(&self.access, &self.thread.name, max)
    }
}
