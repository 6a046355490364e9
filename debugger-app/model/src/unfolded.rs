//! The unfolded flow graph (thesis ch. 4): one node per (operation, thread) that ran, an
//! edge per pair of nodes a message went between, with counts, and each node's recent
//! history. Kept only by front ends that draw it (the GUI); the headless controller's
//! model has no such part and pays nothing for it.

use crate::changes::Changes;
use crate::ids::{EdgeId, FastMap, NodeId, NodeKey, OpId, ProcId, ThreadId};
use racetrack_protocol::SmolStr;
use serde_json::Value;
use std::sync::Arc;

/// What a node is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeStatus {
    /// Ran before, nothing now.
    Idle,
    /// A step is running.
    Running,
    /// Held at a step start.
    HeldStart,
    /// Held at a send.
    HeldSend,
    /// Held at a step stop.
    HeldStop,
    /// The program has exited.
    Finished,
}

/// A message as the graph knows it (shared between the sender's history and the
/// in-flight table: one allocation per message).
#[derive(Debug, Clone, PartialEq)]
pub struct MsgInfo {
    pub id: SmolStr,
    /// Rust type name.
    pub type_name: SmolStr,
    /// Sending node (absent: a schedule's input).
    pub from: Option<NodeKey>,
    /// Destination operation (absent: a result leaving the graph).
    pub to_op: Option<OpId>,
    /// Destination thread, when the sender knew it.
    pub to_thread: Option<ThreadId>,
    /// Content, when the agent sent it.
    pub content: Option<Value>,
    pub traced: bool,
}

/// One node of the unfolded graph.
#[derive(Debug, Clone)]
pub struct Node {
    pub key: NodeKey,
    pub status: NodeStatus,
    /// Whether it processed a traced message.
    pub traced: bool,
    /// Steps started.
    pub steps: u64,
    /// Ids of the messages it processed, in order: the latest [`HISTORY`] at least (older
    /// ones are dropped, so that a long run's memory stays bounded; `steps` counts all).
    pub processed: Vec<SmolStr>,
    /// Messages it sent, in order: the latest [`HISTORY`] at least.
    pub sent: Vec<Arc<MsgInfo>>,
}

/// Messages sent from one node to another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    pub from: NodeId,
    pub to: NodeId,
    /// Messages counted.
    pub count: u64,
}

/// Entries of a node's history kept at least (at most twice as many).
pub const HISTORY: usize = 1_000;

/// Append to a history, dropping its older half when it reaches twice [`HISTORY`].
fn keep_recent<T>(v: &mut Vec<T>, x: T) {
    if v.len() >= 2 * HISTORY {
        v.drain(..v.len() - HISTORY);
    }
    v.push(x);
}

/// The unfolded graph (see the module's documentation).
#[derive(Debug, Default)]
pub struct Unfolded {
    nodes: Vec<Node>,
    ids: FastMap<NodeKey, NodeId>,
    edges: Vec<Edge>,
    edge_ids: FastMap<(NodeId, NodeId), EdgeId>,
    /// Messages counted towards a node that has not run yet (a node appears at its first
    /// step): its edges appear with it.
    early: FastMap<NodeKey, Vec<(NodeId, u64)>>,
    /// Messages whose send was seen but not yet their receive, by destination.
    in_flight: FastMap<(ProcId, OpId, SmolStr), Arc<MsgInfo>>,
    /// Sends a `recv` names by event number (MPI's), until it does: their node.
    linkable: FastMap<u64, NodeKey>,
    /// Listed in the pending [`Changes`] (added or changed) since the last take.
    node_listed: Vec<bool>,
    edge_listed: Vec<bool>,
}

impl Unfolded {
    /// Every node, indexed by [`NodeId`] (the order of appearance).
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Every edge, indexed by [`EdgeId`].
    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }

    /// The node numbered `id` (`None` for an id of another model).
    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id.index())
    }

    /// The node of (operation, thread) `key`, if it ran.
    pub fn find(&self, key: NodeKey) -> Option<NodeId> {
        self.ids.get(&key).copied()
    }

    /// The edge from `a` to `b`, if a message went that way.
    pub fn edge_between(&self, a: NodeId, b: NodeId) -> Option<&Edge> {
        self.edge_ids.get(&(a, b)).map(|e| &self.edges[e.index()])
    }

    /// The node of `key`, added if it is new.
    fn slot(&mut self, key: NodeKey, changes: &mut Changes) -> NodeId {
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = NodeId(u32::try_from(self.nodes.len()).expect("fewer than 2^32 nodes"));
        self.nodes.push(Node {
            key,
            status: NodeStatus::Idle,
            traced: false,
            steps: 0,
            processed: Vec::new(),
            sent: Vec::new(),
        });
        self.ids.insert(key, id);
        self.node_listed.push(true);
        changes.nodes_added.push(id);
        for (from, count) in self.early.remove(&key).unwrap_or_default() {
            self.count_edge(from, id, count, changes);
        }
        id
    }

    /// The node of `key` (added if new), listed as changed.
    fn touch(&mut self, key: NodeKey, changes: &mut Changes) -> &mut Node {
        let id = self.slot(key, changes);
        if !self.node_listed[id.index()] {
            self.node_listed[id.index()] = true;
            changes.nodes_changed.push(id);
        }
        &mut self.nodes[id.index()]
    }

    fn count_edge(&mut self, a: NodeId, b: NodeId, n: u64, changes: &mut Changes) {
        match self.edge_ids.get(&(a, b)) {
            Some(&e) => {
                self.edges[e.index()].count += n;
                if !self.edge_listed[e.index()] {
                    self.edge_listed[e.index()] = true;
                    changes.edges_changed.push(e);
                }
            }
            None => {
                let e = EdgeId(u32::try_from(self.edges.len()).expect("fewer than 2^32 edges"));
                self.edges.push(Edge {
                    from: a,
                    to: b,
                    count: n,
                });
                self.edge_ids.insert((a, b), e);
                self.edge_listed.push(true);
                changes.edges_added.push(e);
            }
        }
    }

    /// A message sent in process `proc`: in its sender's history, and in flight until
    /// its receive.
    pub(crate) fn on_send(
        &mut self,
        proc: ProcId,
        info: Arc<MsgInfo>,
        linked_by: Option<u64>,
        held: bool,
        changes: &mut Changes,
    ) {
        if let (Some(id), Some(from)) = (linked_by, info.from) {
            self.linkable.insert(id, from);
        }
        if let Some(from) = info.from {
            let id = self.slot(from, changes);
            let n = if held {
                let n = self.touch(from, changes);
                n.status = NodeStatus::HeldSend;
                n
            } else {
                &mut self.nodes[id.index()]
            };
            keep_recent(&mut n.sent, info.clone());
        }
        if let Some(op) = info.to_op {
            self.in_flight.insert((proc, op, info.id.clone()), info);
        }
    }

    /// A receive at node `to` took the message of send event `send` (its `from`): one
    /// more message on the edge from the sender.
    pub(crate) fn on_linked_recv(&mut self, to: NodeKey, send: u64, changes: &mut Changes) {
        if let Some(from) = self.linkable.remove(&send) {
            let a = self.slot(from, changes);
            self.count_message(a, to, changes);
        }
    }

    /// One more message from node `a` to `to` (counted until `to` appears, if it has not).
    fn count_message(&mut self, a: NodeId, to: NodeKey, changes: &mut Changes) {
        match self.ids.get(&to) {
            Some(&b) => self.count_edge(a, b, 1, changes),
            None => {
                let early = self.early.entry(to).or_default();
                match early.iter_mut().find(|(f, _)| *f == a) {
                    Some((_, n)) => *n += 1,
                    None => early.push((a, 1)),
                }
            }
        }
    }

    /// Message `msg` arrived in the queue of node `to`: what its send said, and one more
    /// message on the edge from its sender.
    pub(crate) fn on_recv(
        &mut self,
        to: NodeKey,
        msg: &SmolStr,
        changes: &mut Changes,
    ) -> Option<Arc<MsgInfo>> {
        if self.in_flight.is_empty() {
            return None;
        }
        let info = self.in_flight.remove(&(to.proc, to.op, msg.clone()))?;
        if let Some(from) = info.from {
            let a = self.slot(from, changes);
            self.count_message(a, to, changes);
        }
        Some(info)
    }

    pub(crate) fn on_start(
        &mut self,
        key: NodeKey,
        msg: &SmolStr,
        traced: bool,
        held: bool,
        changes: &mut Changes,
    ) {
        let n = self.touch(key, changes);
        n.steps += 1;
        n.traced |= traced;
        n.status = if held {
            NodeStatus::HeldStart
        } else {
            NodeStatus::Running
        };
        keep_recent(&mut n.processed, msg.clone());
    }

    /// A step of `key` stopped; after the program's exit (`finished`) late frames do not
    /// bring nodes back to life.
    pub(crate) fn on_stop(&mut self, key: NodeKey, held: bool, finished: bool, changes: &mut Changes) {
        let n = self.touch(key, changes);
        n.status = match (finished, held) {
            (true, _) => NodeStatus::Finished,
            (false, true) => NodeStatus::HeldStop,
            (false, false) => NodeStatus::Idle,
        };
    }

    /// Node `key` has status `status` now (a snapshot's running step, a released hold).
    pub(crate) fn set_status(&mut self, key: NodeKey, status: NodeStatus, changes: &mut Changes) {
        self.touch(key, changes).status = status;
    }

    /// Set `key`'s status if the node exists (a released hold of a node that never ran
    /// adds none).
    pub(crate) fn update_status(&mut self, key: NodeKey, status: NodeStatus, changes: &mut Changes) {
        if self.ids.contains_key(&key) {
            self.set_status(key, status, changes);
        }
    }

    /// The program ended: every node is finished.
    pub(crate) fn finish_all(&mut self, changes: &mut Changes) {
        for i in 0..self.nodes.len() {
            let key = self.nodes[i].key;
            self.touch(key, changes).status = NodeStatus::Finished;
        }
    }

    /// A view took `changes`: what they list may be listed again.
    pub(crate) fn taken(&mut self, changes: &Changes) {
        for id in changes.nodes_added.iter().chain(&changes.nodes_changed) {
            self.node_listed[id.index()] = false;
        }
        for e in changes.edges_added.iter().chain(&changes.edges_changed) {
            self.edge_listed[e.index()] = false;
        }
    }
}
