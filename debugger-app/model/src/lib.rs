//! The debugger's model: plain Rust, no egui. It ingests the agent's events and keeps
//! what the GUI and `ctl` show: the unfolded flow graph (one node per (operation, thread)
//! that ran, edges for messages with counts), per-thread queues, per-node processed and
//! sent lists, held events, the policy the user set, and a log.

use racetrack_protocol::{
    CollectionDesc, Command, Decoder, Event, Kind, Names, OperationDesc, PackedEv, QueueEntry, RecvEv,
    SendEv, StepEv,
};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// An unfolded-graph node: (operation, thread).
pub type NodeKey = (String, String);

/// FNV-1a: the model's maps are looked up for every event and (by the GUI) for every node
/// every frame, with short keys from the program's own names (no untrusted input to
/// defend against), where it is several times faster than the default SipHash.
#[derive(Default, Clone, Copy)]
pub struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// A hash map with [`Fnv`] hashing.
pub type FastMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<Fnv>>;

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

/// A message as the model knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct MsgInfo {
    /// Message id.
    pub id: String,
    /// Rust type name.
    pub type_name: String,
    /// Sending node (absent: schedule input).
    pub from: Option<NodeKey>,
    /// Destination operation and thread.
    pub to: NodeKey,
    /// Content, when the agent sent it.
    pub content: Option<Value>,
    pub traced: bool,
}

/// One node of the unfolded graph.
#[derive(Debug, Clone)]
pub struct Node {
    /// Operation and thread.
    pub key: NodeKey,
    /// Operation kind (`split`, ...).
    pub kind: String,
    /// Current status.
    pub status: NodeStatus,
    /// Whether it processed a traced message.
    pub traced: bool,
    /// Steps started.
    pub steps: u64,
    /// Ids of the messages it processed, in order: the latest [`HISTORY`] at least (older
    /// ones are dropped, so that a long run's memory stays bounded; `steps` counts all).
    pub processed: Vec<String>,
    /// Messages it sent, in order: the latest [`HISTORY`] at least (shared with the
    /// in-flight table: one allocation per message).
    pub sent: Vec<std::sync::Arc<MsgInfo>>,
    /// Order of first appearance (layout stability).
    pub order: usize,
}

/// One line of the event log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// `error`, `panic`, `info`.
    pub level: &'static str,
    pub text: String,
}

#[derive(Debug, Default)]
pub struct Model {
    /// Program name from `hello`.
    pub program: Option<String>,
    pub pid: Option<u32>,
    pub operations: Vec<OperationDesc>,
    pub collections: Vec<CollectionDesc>,
    /// Flow-graph edges between operations.
    pub op_edges: Vec<[String; 2]>,
    /// Unfolded nodes (hashed: every event looks one up; [`Node::order`] gives the order
    /// of appearance).
    pub nodes: FastMap<NodeKey, Node>,
    /// Unfolded edges with message counts.
    pub edges: FastMap<(NodeKey, NodeKey), u64>,
    /// Pending messages per thread (a deque: queues can grow long and are consumed at
    /// the front).
    pub queues: BTreeMap<String, VecDeque<QueueEntry>>,
    /// Pending messages per thread that the agent counted but did not list (a snapshot or
    /// `queue` reply of a very long queue lists its first messages): they are behind
    /// `queues`, and leave the count as they start.
    pub unlisted: BTreeMap<String, usize>,
    /// Held events by event id.
    pub held: BTreeMap<u64, Event>,
    /// Breakpoints set: (op, thread) → trace.
    pub breakpoints: BTreeMap<NodeKey, bool>,
    /// Paused threads.
    pub paused: BTreeSet<String>,
    /// Global step mode.
    pub step_mode: bool,
    /// Last thread states received.
    pub states: BTreeMap<String, Value>,
    /// Events ingested (send, recv, start, stop).
    pub event_count: u64,
    /// Connected to an agent.
    pub attached: bool,
    /// The program exited (`Some(code)`), or the connection closed.
    pub exited: Option<Option<i32>>,
    /// Errors, panics and notices, newest last (bounded).
    pub log: VecDeque<LogLine>,
    /// Messages whose send was seen but not yet their receive: (id, to_op) → info.
    in_flight: FastMap<(String, String), std::sync::Arc<MsgInfo>>,
    /// A reusable edge key for lookups.
    edge_key: (NodeKey, NodeKey),
    /// A reusable key for lookups.
    key: NodeKey,
    /// Queues and holds only: no unfolded graph (see [`Model::lean`]).
    lean: bool,
    /// Names that `packed` events refer to (normally expanded by the connection already).
    names: Decoder,
}

const LOG_MAX: usize = 10_000;

/// Entries of a node's history kept at least (at most twice as many).
pub const HISTORY: usize = 1_000;

/// Append to a history, dropping its older half when it reaches twice [`HISTORY`].
fn keep_recent<T>(v: &mut Vec<T>, x: T) {
    if v.len() >= 2 * HISTORY {
        v.drain(..v.len() - HISTORY);
    }
    v.push(x);
}

impl Model {
    /// A model that keeps what a headless controller needs — queues (ids and operations of
    /// streamed messages), held events, the policy, the log — and not the unfolded graph
    /// (nodes, edges, per-node history) nor what the GUI's lists show of each message,
    /// which cost most of the ingest.
    pub fn lean() -> Self {
        Self {
            lean: true,
            ..Self::default()
        }
    }

    /// Every (operation, thread) pair where a breakpoint can be set.
    pub fn breakpoint_slots(&self) -> Vec<NodeKey> {
        self.operations
            .iter()
            .flat_map(|o| o.threads.iter().map(|t| (o.name.clone(), t.clone())))
            .collect()
    }

    /// The held event of `thread`, if it is suspended.
    pub fn held_of(&self, thread: &str) -> Option<(&u64, &Event)> {
        self.held.iter().find(|(_, e)| e.thread() == Some(thread))
    }

    /// Record a command the user sent (policy the model mirrors).
    pub fn note_command(&mut self, cmd: &Command) {
        match cmd {
            Command::StepMode { on } => self.step_mode = *on,
            Command::Pause { thread, on } => {
                if *on {
                    self.paused.insert(thread.clone());
                } else {
                    self.paused.remove(thread);
                }
            }
            Command::Break {
                op,
                thread,
                on,
                trace,
            } => {
                let threads: Vec<String> = match thread {
                    Some(t) => vec![t.clone()],
                    None => self
                        .operations
                        .iter()
                        .find(|o| &o.name == op)
                        .map(|o| o.threads.clone())
                        .unwrap_or_default(),
                };
                for t in threads {
                    if *on {
                        self.breakpoints.insert((op.clone(), t), *trace);
                    } else {
                        self.breakpoints.remove(&(op.clone(), t));
                    }
                }
            }
            Command::Detach => {
                self.step_mode = false;
                self.paused.clear();
                self.breakpoints.clear();
                self.held.clear();
            }
            _ => {}
        }
    }

    fn kind_of(&self, op: &str) -> String {
        self.operations
            .iter()
            .find(|o| o.name == op)
            .map(|o| o.kind.clone())
            .unwrap_or_default()
    }

    /// Fill the scratch key with (a, b): lookups then allocate nothing.
    fn scratch(scratch: &mut NodeKey, a: &str, b: &str) {
        scratch.0.clear();
        scratch.0.push_str(a);
        scratch.1.clear();
        scratch.1.push_str(b);
    }

    fn node(&mut self, op: &str, thread: &str) -> &mut Node {
        Self::scratch(&mut self.key, op, thread);
        // Looked up first with the scratch key: the common case (the node exists) then
        // allocates nothing.
        if !self.nodes.contains_key(&self.key) {
            self.insert_node(op, thread);
        }
        self.nodes.get_mut(&self.key).expect("the node was just inserted")
    }

    fn insert_node(&mut self, op: &str, thread: &str) {
        let order = self.nodes.len();
        let kind = self.kind_of(op);
        self.nodes
            .entry((op.to_owned(), thread.to_owned()))
            .or_insert_with(|| Node {
                key: (op.to_owned(), thread.to_owned()),
                kind,
                status: NodeStatus::Idle,
                traced: false,
                steps: 0,
                processed: Vec::new(),
                sent: Vec::new(),
                order,
            });
    }

    fn log(&mut self, level: &'static str, text: String) {
        if self.log.len() >= LOG_MAX {
            self.log.pop_front();
        }
        self.log.push_back(LogLine { level, text });
    }

    /// Ingest one packed event (see [`racetrack_protocol::PackedEv`]) whose indexes
    /// `names` passed [`Names::check`] for. A lean model takes what it needs straight from
    /// the compact form; a full one ingests the expanded event.
    pub fn ingest_packed(&mut self, names: &Names, p: &PackedEv) {
        if !self.lean {
            match names.expand(p.clone()) {
                Ok(e) => self.ingest(&e),
                Err(e) => self.log("error", e),
            }
            return;
        }
        fn name(r: Result<Option<&str>, String>) -> &str {
            r.ok().flatten().unwrap_or_default()
        }
        let (thread, op, msg) = (name(names.thread(p.thread)), name(names.op(p.op)), p.msg.as_str());
        self.event_count += 1;
        match p.kind {
            // A lean model's queues serve `wait` and `move`, which look at ids and
            // operations only: the sender, type and destination text are left empty, and
            // sends need no bookkeeping.
            Kind::Recv => {
                // A held send (a full event) was recorded in flight: forget it.
                if !self.in_flight.is_empty() {
                    Self::scratch(&mut self.key, msg, op);
                    self.in_flight.remove(&self.key);
                }
                let entry = QueueEntry {
                    id: p.msg.clone(),
                    type_name: String::new(),
                    from: None,
                    to: String::new(),
                    op: op.into(),
                    traced: p.traced,
                    content: None,
                };
                let q = match self.queues.get_mut(thread) {
                    Some(q) => q,
                    None => self.queues.entry(thread.to_owned()).or_default(),
                };
                let pos = usize::try_from(p.a).unwrap_or_default().min(q.len());
                q.insert(pos, entry);
            }
            Kind::Start if p.a != 2 => self.consume(thread, msg, op),
            _ => {}
        }
    }

    /// Ingest one event.
    pub fn ingest(&mut self, ev: &Event) {
        match ev {
            Event::Hello { program, pid, .. } => {
                self.program = Some(program.clone());
                self.pid = Some(*pid);
                self.attached = true;
            }
            Event::Structure {
                operations,
                collections,
                edges,
            } => {
                self.names.observe(ev);
                self.on_structure(operations, collections, edges);
            }
            Event::Snapshot { threads, held, .. } => {
                for t in threads {
                    self.queues
                        .insert(t.thread.clone(), t.queue.iter().cloned().collect());
                    self.unlisted.insert(t.thread.clone(), t.more);
                    if let Some(c) = &t.current {
                        self.node(&c.op, &t.thread).status = NodeStatus::Running;
                    }
                }
                held.iter().for_each(|h| self.ingest(h));
            }
            Event::Batch { events } => events.iter().for_each(|e| self.ingest(e)),
            Event::Packed { events } => {
                for p in events {
                    match self.names.expand(p.clone()) {
                        Ok(e) => self.ingest(&e),
                        Err(e) => self.log("error", e),
                    }
                }
            }
            Event::Send(s) => self.on_send(s, ev),
            Event::Recv(r) => self.on_recv(r),
            Event::Start(s) => self.on_start(s, ev),
            Event::Stop(s) => self.on_stop(s, ev),
            Event::Released { event_id, thread } => self.on_released(*event_id, thread),
            Event::Queue {
                thread,
                messages,
                more,
            } => {
                self.queues
                    .insert(thread.clone(), messages.iter().cloned().collect());
                self.unlisted.insert(thread.clone(), *more);
            }
            Event::State { thread, content } => {
                self.states.insert(thread.clone(), content.clone());
            }
            Event::Panic {
                thread,
                op,
                msg,
                message,
            } => {
                self.log(
                    "panic",
                    format!("{op} on {thread} panicked at message {msg}: {message}"),
                );
            }
            Event::Error { message, .. } => self.log("error", message.clone()),
            Event::Ok { cmd, target, .. } => {
                let on = target.as_ref().map(|t| format!(" ({t})")).unwrap_or_default();
                self.log("info", format!("{cmd} applied{on}"));
            }
        }
    }

    fn on_structure(
        &mut self,
        operations: &[OperationDesc],
        collections: &[CollectionDesc],
        edges: &[[String; 2]],
    ) {
        self.operations = operations.to_vec();
        self.collections = collections.to_vec();
        self.op_edges = edges.to_vec();
        for n in self.nodes.values_mut() {
            if n.kind.is_empty() {
                n.kind = operations
                    .iter()
                    .find(|o| o.name == n.key.0)
                    .map(|o| o.kind.clone())
                    .unwrap_or_default();
            }
        }
    }

    /// A hold ended: the node runs on (or, after a held stop, is idle).
    fn on_released(&mut self, event_id: u64, thread: &str) {
        let Some(e) = self.held.remove(&event_id) else {
            return;
        };
        let (op, status) = match &e {
            Event::Start(s) => (s.op.clone(), NodeStatus::Running),
            Event::Send(s) => (s.op.clone().unwrap_or_default(), NodeStatus::Running),
            Event::Stop(s) => (s.op.clone(), NodeStatus::Idle),
            _ => (String::new(), NodeStatus::Idle),
        };
        if let Some(n) = self.nodes.get_mut(&(op, thread.to_owned())) {
            n.status = status;
        }
    }

    /// The program ended (`code`: its exit code; `None` if killed): nothing is held or
    /// running any more.
    pub fn program_exited(&mut self, code: Option<i32>) {
        let text = match code {
            Some(c) => format!("program exited with code {c}"),
            None => "program ended".to_owned(),
        };
        self.log("info", text);
        self.exited = Some(code);
        self.attached = false;
        self.held.clear();
        for n in self.nodes.values_mut() {
            n.status = NodeStatus::Finished;
        }
    }

    fn on_send(&mut self, s: &SendEv, ev: &Event) {
        self.event_count += 1;
        let from = s.thread.clone().zip(s.op.clone()).map(|(t, o)| (o, t));
        let info = std::sync::Arc::new(MsgInfo {
            id: s.msg.clone(),
            type_name: s.type_name.clone(),
            from,
            to: (
                s.to_op.clone().unwrap_or_default(),
                s.to_thread.clone().unwrap_or_default(),
            ),
            content: s.content.clone(),
            traced: s.traced,
        });
        if let Some((op, t)) = info.from.as_ref().filter(|_| !self.lean) {
            let n = self.node(op, t);
            keep_recent(&mut n.sent, info.clone());
            if s.held {
                n.status = NodeStatus::HeldSend;
            }
        }
        if let Some(to_op) = &s.to_op {
            self.in_flight.insert((s.msg.clone(), to_op.clone()), info);
        }
        if s.held {
            let from = format!(
                "{}@{}",
                s.op.as_deref().unwrap_or("?"),
                s.thread.as_deref().unwrap_or("?")
            );
            self.log(
                "held",
                format!("send of {} from {from} held ({})", s.msg, reason_text(s.reason)),
            );
            self.held.insert(s.event_id, ev.clone());
        }
    }

    fn on_recv(&mut self, r: &RecvEv) {
        self.event_count += 1;
        Self::scratch(&mut self.key, &r.msg, &r.op);
        let info = self.in_flight.remove(&self.key);
        let from = info.as_ref().and_then(|i| i.from.as_ref());
        let entry = QueueEntry {
            id: r.msg.as_str().into(),
            type_name: info.as_ref().map(|i| i.type_name.clone()).unwrap_or_default(),
            from: from.map(|(o, t)| format!("{o}@{t}")),
            to: format!("{}@{}", r.op, r.thread),
            op: r.op.as_str().into(),
            traced: r.traced,
            content: info.as_ref().and_then(|i| i.content.clone()),
        };
        let q = match self.queues.get_mut(&r.thread) {
            Some(q) => q,
            None => self.queues.entry(r.thread.clone()).or_default(),
        };
        let pos = r.position.min(q.len());
        q.insert(pos, entry);
        if let Some((fo, ft)) = from.filter(|_| !self.lean) {
            // Counted through a reusable key: an existing edge costs no allocation.
            Self::scratch(&mut self.edge_key.0, fo, ft);
            Self::scratch(&mut self.edge_key.1, &r.op, &r.thread);
            match self.edges.get_mut(&self.edge_key) {
                Some(c) => *c += 1,
                None => {
                    self.edges.insert(self.edge_key.clone(), 1);
                }
            }
        }
    }

    /// A step of `thread` took message `msg` for `op` from its queue.
    fn consume(&mut self, thread: &str, msg: &str, op: &str) {
        let listed = self.queues.get_mut(thread).and_then(|q| {
            let i = q.iter().position(|m| m.id == msg && m.op == op)?;
            q.remove(i)
        });
        if listed.is_none() {
            if let Some(n) = self.unlisted.get_mut(thread).filter(|n| **n > 0) {
                *n -= 1;
            }
        }
    }

    fn on_start(&mut self, s: &StepEv, ev: &Event) {
        self.event_count += 1;
        if s.step != racetrack_protocol::Step::Final {
            self.consume(&s.thread, &s.msg, &s.op);
        }
        if self.lean {
            if s.held {
                self.held.insert(s.event_id, ev.clone());
            }
            return;
        }
        let n = self.node(&s.op, &s.thread);
        n.steps += 1;
        n.traced |= s.traced;
        n.status = if s.held {
            NodeStatus::HeldStart
        } else {
            NodeStatus::Running
        };
        keep_recent(&mut n.processed, s.msg.clone());
        if s.held {
            let what = format!(
                "start of {}@{} on {} held ({})",
                s.op,
                s.thread,
                s.msg,
                reason_text(s.reason)
            );
            self.log("held", what);
            self.held.insert(s.event_id, ev.clone());
        }
    }

    fn on_stop(&mut self, s: &StepEv, ev: &Event) {
        self.event_count += 1;
        if self.lean {
            if s.held {
                self.held.insert(s.event_id, ev.clone());
            }
            return;
        }
        let finished = self.exited.is_some();
        let n = self.node(&s.op, &s.thread);
        if finished {
            // Late frames after the program's exit do not bring nodes back to life.
            n.status = NodeStatus::Finished;
            return;
        }
        n.status = if s.held {
            NodeStatus::HeldStop
        } else {
            NodeStatus::Idle
        };
        if s.held {
            self.held.insert(s.event_id, ev.clone());
        }
    }
}

fn reason_text(r: Option<racetrack_protocol::HoldReason>) -> &'static str {
    use racetrack_protocol::HoldReason as R;
    match r {
        Some(R::Wait) => "waiting for Continue",
        Some(R::Step) => "global step",
        Some(R::Break) => "breakpoint",
        Some(R::Pause) => "thread paused",
        Some(R::Trace) => "traced message",
        Some(R::AckAll) => "ack every event",
        None => "held",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use racetrack_protocol::Step;

    fn step(id: u64, op: &str, thread: &str, msg: &str, held: bool) -> StepEv {
        StepEv {
            event_id: id,
            thread: thread.into(),
            op: op.into(),
            msg: msg.into(),
            instance: msg.into(),
            step: Step::Run,
            traced: false,
            held,
            reason: None,
        }
    }

    /// A send from Split@main[0] to Sort@proc[1] and its receive.
    fn send_and_recv(m: &mut Model) {
        m.ingest(&Event::Send(SendEv {
            event_id: 1,
            thread: Some("main[0]".into()),
            op: Some("Split".into()),
            msg: "0.0".into(),
            to_op: Some("Sort".into()),
            to_thread: Some("proc[1]".into()),
            type_name: "Chunk".into(),
            traced: false,
            held: false,
            reason: None,
            content: None,
        }));
        m.ingest(&Event::Recv(RecvEv {
            event_id: 2,
            thread: "proc[1]".into(),
            op: "Sort".into(),
            msg: "0.0".into(),
            position: 0,
            traced: false,
        }));
    }

    #[test]
    fn node_histories_stay_bounded_and_keep_the_latest() {
        let mut m = Model::default();
        for i in 0..5 * HISTORY {
            m.ingest(&Event::Start(step(
                i as u64,
                "Sort",
                "proc[1]",
                &format!("0.{i}"),
                false,
            )));
        }
        let n = &m.nodes[&("Sort".to_owned(), "proc[1]".to_owned())];
        assert!(
            (HISTORY..=2 * HISTORY).contains(&n.processed.len()),
            "{}",
            n.processed.len()
        );
        assert_eq!(
            n.processed.last().map(String::as_str),
            Some(format!("0.{}", 5 * HISTORY - 1).as_str())
        );
        assert_eq!(n.steps, 5 * HISTORY as u64);
    }

    #[test]
    fn lean_model_tracks_queues_and_holds_only() {
        let mut m = Model::lean();
        send_and_recv(&mut m);
        assert_eq!(m.queues["proc[1]"][0].from.as_deref(), Some("Split@main[0]"));
        m.ingest(&Event::Start(step(3, "Sort", "proc[1]", "0.0", true)));
        assert!(m.queues["proc[1]"].is_empty());
        assert_eq!(m.held_of("proc[1]").map(|(id, _)| *id), Some(3));
        m.ingest(&Event::Stop(step(4, "Sort", "proc[1]", "0.0", false)));
        assert!(m.nodes.is_empty() && m.edges.is_empty());
        assert_eq!(m.event_count, 4);
    }

    #[test]
    fn unfolds_graph_tracks_queue_and_holds() {
        let mut m = Model::default();
        send_and_recv(&mut m);
        assert_eq!(m.queues["proc[1]"].len(), 1);
        assert_eq!(m.queues["proc[1]"][0].from.as_deref(), Some("Split@main[0]"));
        let e = Event::Start(step(3, "Sort", "proc[1]", "0.0", true));
        m.ingest(&e);
        assert!(m.queues["proc[1]"].is_empty());
        let key = ("Sort".to_owned(), "proc[1]".to_owned());
        assert_eq!(m.nodes[&key].status, NodeStatus::HeldStart);
        assert_eq!(m.held_of("proc[1]").map(|(id, _)| *id), Some(3));
        assert_eq!(m.edges[&(("Split".into(), "main[0]".into()), key.clone())], 1);
        m.ingest(&Event::Released {
            event_id: 3,
            thread: "proc[1]".into(),
        });
        assert_eq!(m.nodes[&key].status, NodeStatus::Running);
        assert!(m.held.is_empty());
        m.ingest(&Event::Stop(step(4, "Sort", "proc[1]", "0.0", false)));
        assert_eq!(m.nodes[&key].status, NodeStatus::Idle);
        assert_eq!(m.nodes[&key].processed, ["0.0"]);
        assert_eq!(m.nodes[&("Split".into(), "main[0]".into())].sent.len(), 1);
        assert_eq!(m.event_count, 4);
        m.program_exited(Some(0));
        assert_eq!(m.exited, Some(Some(0)));
        assert_eq!(m.nodes[&key].status, NodeStatus::Finished);
    }
}
