//! What changed since a view last looked ([`crate::Model::take_changes`]): a view updates
//! what it draws from this instead of rescanning the model every frame.
//!
//! The lists hold each item at most once (a node that changed ten times is listed once),
//! so they stay bounded by the model's size even when no view ever takes them (the
//! headless controller's model).

use crate::ids::{EdgeId, NodeId, ThreadKey};
use std::collections::BTreeSet;

/// Changes since the last [`crate::Model::take_changes`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    /// Unfolded nodes that appeared, in id order (not also in `nodes_changed`).
    pub nodes_added: Vec<NodeId>,
    /// Unfolded nodes whose status or traced mark changed.
    pub nodes_changed: Vec<NodeId>,
    /// Unfolded edges that appeared, in id order (not also in `edges_changed`).
    pub edges_added: Vec<EdgeId>,
    /// Unfolded edges whose message count grew.
    pub edges_changed: Vec<EdgeId>,
    /// Threads whose queue, unlisted count, state or pause changed.
    pub threads: BTreeSet<ThreadKey>,
    /// Held events came or went.
    pub held: bool,
    /// Breakpoints or step mode changed.
    pub policy: bool,
    /// A process appeared or described its structure (operations, collections): positions
    /// derived from the structure are stale, a view rebuilds.
    pub structure: bool,
    /// The connection or the program started or ended.
    pub session: bool,
    /// Log lines appended (the newest this many of the log are new; the log is bounded,
    /// so this may exceed its length).
    pub log_appended: usize,
}

impl Changes {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        *self == Changes::default()
    }
}
