//! What a `deadlock` event says about each stuck rank.

use serde::{Deserialize, Serialize};

/// Whether a call needs every rank it waits for, or any one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Needs {
    /// Every one: a receive from one source, a send, a collective.
    All,
    /// Any one: a wildcard receive, a wait on requests whose peers are not reported.
    Any,
}

/// One rank stuck in a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waiting {
    /// The rank (`rank[1]`).
    pub thread: String,
    /// The call it is in (`MPI_Recv`).
    pub call: String,
    /// The call's `start` event.
    pub event_id: u64,
    /// Where it was called from, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    /// The ranks it waits for.
    pub waits_for: Vec<String>,
    /// Whether it needs all of them or any one.
    pub needs: Needs,
    /// Those of them that have finished (called `MPI_Finalize` or exited).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finished: Vec<String>,
    /// Why it waits, in words, where the fields above do not say it all (a runtime
    /// thread: the schedule call its step made, and where that call's message waits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}
