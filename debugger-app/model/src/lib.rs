//! The debugger's session model: plain Rust on protocol types, no egui. It ingests the
//! agents' events and keeps what the GUI and `ctl` show, keyed by indexes ([`ids`]):
//!
//! - [`Process`]es, one per debugged program (one today: a runtime program, or an MPI
//!   job whose ranks are its threads `rank[N]`), each with its structure and the
//!   numbering of its threads and operations;
//! - [`Control`], what every front end needs: per-thread queues, held events, the policy
//!   the user set, thread states, the log;
//! - optional parts that front ends add by composition: the [`Unfolded`] flow graph
//!   (the GUI's; [`Model::with_unfolded`]), the happens-before [`Clocks`] (`ctl`'s;
//!   [`Model::with_clocks`]), the [`MpGraph`] of an MPI job (the GUI's;
//!   [`Model::with_messages`]).
//!
//! Views learn what changed since they last looked from [`Model::take_changes`].

mod changes;
pub mod clocks;
mod control;
pub mod deadlock;
pub mod ids;
mod ingest;
pub mod links;
pub mod mpgraph;
mod process;
mod unfolded;

pub use changes::Changes;
pub use clocks::{Clocks, Order};
pub use control::{CondBreakpoint, Control, Held, LogLine};
pub use ids::{EdgeId, FastMap, Fnv, HeldId, NodeId, NodeKey, OpId, ProcId, ThreadId, ThreadKey};
pub use mpgraph::MpGraph;
pub use process::Process;
pub use unfolded::{Edge, MsgInfo, Node, NodeStatus, Unfolded, HISTORY};

use racetrack_protocol::{Command, QueueEntry};
use std::collections::VecDeque;

/// The session model (see the crate's documentation).
#[derive(Debug)]
pub struct Model {
    /// By [`ProcId`]; never empty (process 0 is the first connection's).
    procs: Vec<Process>,
    /// What every front end keeps.
    pub control: Control,
    /// The unfolded flow graph, for front ends that draw it.
    unfolded: Option<Unfolded>,
    /// Happens-before, for front ends that answer questions about it.
    clocks: Option<Clocks>,
    /// The message-passing graph, for front ends that draw an MPI job.
    messages: Option<MpGraph>,
    changes: Changes,
}

impl Default for Model {
    fn default() -> Self {
        Self::new()
    }
}

impl Model {
    /// A model of one process with what a headless controller needs (queues, held events,
    /// the policy, the log) and no graph.
    pub fn new() -> Self {
        Self {
            procs: vec![Process::default()],
            control: Control::default(),
            unfolded: None,
            clocks: None,
            messages: None,
            changes: Changes::default(),
        }
    }

    /// This model, keeping the unfolded flow graph too (nodes, edges, per-node history and
    /// what each queued message's send said).
    pub fn with_unfolded(mut self) -> Self {
        self.unfolded = Some(Unfolded::default());
        self
    }

    /// This model, keeping every event's place in the happens-before order too
    /// ([`Clocks`]).
    pub fn with_clocks(mut self) -> Self {
        self.clocks = Some(Clocks::new());
        self
    }

    /// This model, keeping the message-passing graph of MPI calls too ([`MpGraph`]).
    pub fn with_messages(mut self) -> Self {
        self.messages = Some(MpGraph::default());
        self
    }

    /// The message-passing graph, if this model keeps one.
    pub fn messages(&self) -> Option<&MpGraph> {
        self.messages.as_ref()
    }

    /// Happens-before, if this model keeps it.
    pub fn clocks(&mut self) -> Option<&mut Clocks> {
        self.clocks.as_mut()
    }

    /// The unfolded graph, if this model keeps one.
    pub fn unfolded(&self) -> Option<&Unfolded> {
        self.unfolded.as_ref()
    }

    /// Every node of the unfolded graph (none without one).
    pub fn nodes(&self) -> &[Node] {
        self.unfolded.as_ref().map_or(&[], Unfolded::nodes)
    }

    /// What changed since the last call: a view updates from this rather than rescan.
    pub fn take_changes(&mut self) -> Changes {
        let taken = std::mem::take(&mut self.changes);
        if let Some(u) = &mut self.unfolded {
            u.taken(&taken);
        }
        taken
    }

    /// What changed since the last [`Model::take_changes`], left in place.
    pub fn changes(&self) -> &Changes {
        &self.changes
    }

    /// Every process, by [`ProcId`].
    pub fn processes(&self) -> &[Process] {
        &self.procs
    }

    /// Process `p`, if there is one.
    pub fn process(&self, p: ProcId) -> Option<&Process> {
        self.procs.get(p.index())
    }

    /// The first process (the only one today).
    pub fn first(&self) -> &Process {
        &self.procs[0]
    }

    /// Another program of the session (a runtime program spread over several processes,
    /// each its own connection), to ingest its events with [`Model::ingest_in`].
    pub fn add_process(&mut self) -> ProcId {
        self.procs.push(Process::default());
        self.changes.structure = true;
        ProcId(u32::try_from(self.procs.len() - 1).expect("fewer than 2^32 processes"))
    }

    /// Process `p`, added (with any before it) if new.
    fn proc_mut(&mut self, p: ProcId) -> &mut Process {
        if p.index() >= self.procs.len() {
            self.procs.resize_with(p.index() + 1, Process::default);
            self.changes.structure = true;
        }
        &mut self.procs[p.index()]
    }

    fn thread_key_in(&mut self, p: ProcId, thread: &str) -> ThreadKey {
        ThreadKey {
            proc: p,
            thread: self.proc_mut(p).intern_thread(thread),
        }
    }

    fn node_key_in(&mut self, p: ProcId, op: &str, thread: &str) -> NodeKey {
        let pr = self.proc_mut(p);
        NodeKey {
            proc: p,
            op: pr.intern_op(op),
            thread: pr.intern_thread(thread),
        }
    }

    /// The first process's thread named `name`, if it was seen.
    pub fn thread_key(&self, name: &str) -> Option<ThreadKey> {
        Some(ThreadKey {
            proc: ProcId::FIRST,
            thread: self.first().thread_id(name)?,
        })
    }

    /// The first process's (operation, thread) pair by names, if both were seen.
    pub fn node_key(&self, op: &str, thread: &str) -> Option<NodeKey> {
        let pr = self.first();
        Some(NodeKey {
            proc: ProcId::FIRST,
            op: pr.op_id(op)?,
            thread: pr.thread_id(thread)?,
        })
    }

    /// The name of thread `t`.
    pub fn thread_name(&self, t: ThreadKey) -> &str {
        self.process(t.proc).map_or("", |p| p.thread_name(t.thread))
    }

    /// Whether `key` is a call a rank is stuck in, by the last deadlock told.
    pub fn deadlocked(&self, key: NodeKey) -> bool {
        let Some(d) = &self.control.deadlock else {
            return false;
        };
        let (op, thread) = self.node_names(key);
        d.waits.iter().any(|w| w.call == op && w.thread == thread)
    }

    /// The operation and thread names of `key`.
    pub fn node_names(&self, key: NodeKey) -> (&str, &str) {
        self.process(key.proc)
            .map_or(("", ""), |p| (p.op_name(key.op), p.thread_name(key.thread)))
    }

    /// The node of `key`, if the model keeps the unfolded graph and the node ran.
    pub fn node(&self, key: NodeKey) -> Option<&Node> {
        let u = self.unfolded.as_ref()?;
        u.node(u.find(key)?)
    }

    /// The first process's node of (`op`, `thread`), by names.
    pub fn node_named(&self, op: &str, thread: &str) -> Option<&Node> {
        self.node(self.node_key(op, thread)?)
    }

    /// The first process's listed queue of `thread`, by name.
    pub fn queue_named(&self, thread: &str) -> Option<&VecDeque<QueueEntry>> {
        self.control.queue(self.thread_key(thread)?)
    }

    /// The first process's held event of `thread`, by name.
    pub fn held_of_named(&self, thread: &str) -> Option<(HeldId, &Held)> {
        self.control.held_of(self.thread_key(thread)?)
    }

    /// Every (operation, thread) pair where a breakpoint can be set, in every process.
    pub fn breakpoint_slots(&self) -> Vec<NodeKey> {
        let mut slots = Vec::new();
        for (i, pr) in self.procs.iter().enumerate() {
            for o in &pr.operations {
                for t in &o.threads {
                    if let (Some(op), Some(thread)) = (pr.op_id(&o.name), pr.thread_id(t)) {
                        slots.push(NodeKey {
                            proc: ProcId(i as u32),
                            op,
                            thread,
                        });
                    }
                }
            }
        }
        slots
    }

    /// Append a line to the log (the program's output, the front end's own notices).
    pub fn log(&mut self, level: &'static str, text: String) {
        self.control.log(&mut self.changes, level, text);
    }

    /// The connection closed; `gone`: without the program's exit code to come (it is not
    /// ours, or was never started by this front end), so the session ends here.
    pub fn connection_closed(&mut self, gone: bool) {
        self.control.attached = false;
        // Nobody samples the ranks any more: what was told is stale.
        self.control.unreported.clear();
        if gone && self.control.exited.is_none() {
            self.control.exited = Some(None);
        }
        self.changes.session = true;
    }

    /// The program ended (`code`: its exit code; `None` if killed): nothing is held or
    /// running any more.
    pub fn program_exited(&mut self, code: Option<i32>, signal: Option<i32>) {
        let text = match (code, signal) {
            (Some(c), _) => format!("program exited with code {c}"),
            (None, Some(s)) => format!("program killed by {}", signal_name(s)),
            (None, None) => "program ended".to_owned(),
        };
        self.log("info", text);
        self.control.exited = Some(code);
        self.control.killed_by = signal;
        self.control.attached = false;
        self.control.held.clear();
        self.control.unreported.clear();
        self.changes.held = true;
        self.changes.session = true;
        if let Some(u) = &mut self.unfolded {
            u.finish_all(&mut self.changes);
        }
        if let Some(m) = &mut self.messages {
            m.finish_all();
        }
    }

    /// Record a `break` as the agent applies it: a plain breakpoint is one per (op,
    /// thread); a clear that names no condition (`targeted` false: no `when`, no `hit`)
    /// clears every breakpoint there.
    fn note_break(&mut self, b: CondBreakpoint, on: bool, targeted: bool) {
        let plain = b.op != "*" && b.when.is_empty() && b.hit == 1;
        let threads = match &b.thread {
            Some(t) => vec![t.clone()],
            None => self.proc_mut(b.proc).threads_of(&b.op),
        };
        if !on && !targeted {
            let keys: Vec<NodeKey> = if b.op == "*" {
                let mine = |k: &&NodeKey| {
                    k.proc == b.proc && b.thread.as_ref().is_none_or(|t| self.thread_name_is(k, t))
                };
                self.control.breakpoints.keys().filter(mine).copied().collect()
            } else {
                threads
                    .iter()
                    .map(|t| self.node_key_in(b.proc, &b.op, t))
                    .collect()
            };
            for k in keys {
                self.control.breakpoints.remove(&k);
            }
            self.control.conditional.retain(|c| {
                !(c.proc == b.proc
                    && (b.op == "*" || c.op == b.op)
                    && (b.thread.is_none() || c.thread == b.thread))
            });
        } else if plain {
            for t in threads {
                let key = self.node_key_in(b.proc, &b.op, &t);
                self.control.breakpoints.insert(key, b.trace);
            }
        } else {
            let same = |c: &CondBreakpoint| {
                (c.proc, &c.op, &c.thread, &c.when) == (b.proc, &b.op, &b.thread, &b.when)
            };
            self.control.conditional.retain(|c| !same(c));
            if on {
                self.control.conditional.push(b);
            }
        }
    }

    /// Whether breakpoint slot `k` is on the thread named `name`.
    fn thread_name_is(&self, k: &NodeKey, name: &str) -> bool {
        self.procs
            .get(k.proc.index())
            .is_some_and(|p| p.thread_name(k.thread) == name)
    }

    /// Record a command the user sent to the first process (the policy the model mirrors).
    pub fn note_command(&mut self, cmd: &Command) {
        self.note_command_in(ProcId::FIRST, cmd);
    }

    /// Record a command the user sent to process `p`.
    pub fn note_command_in(&mut self, p: ProcId, cmd: &Command) {
        match cmd {
            Command::StepMode { on } => {
                self.control.step_mode = *on;
                self.changes.policy = true;
            }
            Command::Pause { thread, on } => {
                let t = self.thread_key_in(p, thread);
                if *on {
                    self.control.paused.insert(t);
                } else {
                    self.control.paused.remove(&t);
                }
                self.changes.threads.insert(t);
            }
            Command::Break {
                op,
                thread,
                on,
                trace,
                when,
                hit,
            } => {
                let b = CondBreakpoint {
                    proc: p,
                    op: op.clone(),
                    thread: thread.clone(),
                    when: when.clone().unwrap_or_default(),
                    hit: hit.unwrap_or(1),
                    trace: *trace,
                };
                self.note_break(b, *on, when.is_some() || hit.is_some());
                self.changes.policy = true;
            }
            Command::Detach => {
                let c = &mut self.control;
                c.step_mode = false;
                c.paused.clear();
                c.breakpoints.clear();
                c.conditional.clear();
                c.held.clear();
                self.changes.policy = true;
                self.changes.held = true;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;

/// `signal 6 (SIGABRT)`: a signal's number and, for the usual fatal ones, its name.
pub fn signal_name(signal: i32) -> String {
    let name = match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => return format!("signal {signal}"),
    };
    format!("signal {signal} ({name})")
}
