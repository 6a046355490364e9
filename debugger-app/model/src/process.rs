//! One debugged program: what its `hello` and `structure` said, and the numbering of its
//! threads and operations.
//!
//! An MPI job is one such program: its ranks are the threads `rank[0]`, `rank[1]`, … of
//! the collection `rank`, as every event, command, link and clock names them, and each
//! rank's operating-system process is a property of its thread ([`Process::thread_pid`]).
//! A rank reports from its `MPI_Init` thread only, so a rank is one line of execution:
//! there is no level between the job and that line to show.

use crate::ids::{Interner, OpId, ThreadId};
use racetrack_protocol::{CollectionDesc, Names, OperationDesc};

/// A debugged program: one on the runtime, or an MPI job.
#[derive(Debug, Default)]
pub struct Process {
    /// Program name from `hello`.
    pub program: Option<String>,
    /// The process `hello` named (an MPI job's: its lowest rank's).
    pub pid: Option<u32>,
    /// Threads that run in another process than `pid` (an MPI job's ranks), by thread.
    thread_pids: Vec<Option<u32>>,
    pub operations: Vec<OperationDesc>,
    pub collections: Vec<CollectionDesc>,
    /// Flow-graph edges between operations.
    pub op_edges: Vec<[String; 2]>,
    ops: Interner,
    threads: Interner,
    /// A packed event's operation and thread indexes (the structure's order) as ours:
    /// a packed event is then ingested without hashing a name.
    packed_ops: Vec<OpId>,
    packed_threads: Vec<ThreadId>,
}

impl Process {
    /// The operation named `name`, if it was seen.
    pub fn op_id(&self, name: &str) -> Option<OpId> {
        self.ops.get(name).map(OpId)
    }

    /// The thread named `name`, if it was seen.
    pub fn thread_id(&self, name: &str) -> Option<ThreadId> {
        self.threads.get(name).map(ThreadId)
    }

    /// The name of operation `op`.
    pub fn op_name(&self, op: OpId) -> &str {
        self.ops.name(op.0)
    }

    /// The name of thread `t`.
    pub fn thread_name(&self, t: ThreadId) -> &str {
        self.threads.name(t.0)
    }

    /// The operating-system process thread `t` runs in: its own (an MPI rank's) or the
    /// program's.
    pub fn thread_pid(&self, t: ThreadId) -> Option<u32> {
        self.thread_pids.get(t.index()).copied().flatten().or(self.pid)
    }

    /// How many threads run in a process of their own (an MPI job's ranks).
    pub fn separate_processes(&self) -> usize {
        self.thread_pids.iter().flatten().count()
    }

    pub(crate) fn set_thread_pid(&mut self, t: ThreadId, pid: u32) {
        let i = t.index();
        if self.thread_pids.len() <= i {
            self.thread_pids.resize(i + 1, None);
        }
        self.thread_pids[i] = Some(pid);
    }

    pub(crate) fn intern_op(&mut self, name: &str) -> OpId {
        OpId(self.ops.intern(name))
    }

    pub(crate) fn intern_thread(&mut self, name: &str) -> ThreadId {
        ThreadId(self.threads.intern(name))
    }

    /// Operation `op`'s kind (`split`, …; empty before the structure names it).
    pub fn op_kind(&self, op: OpId) -> &str {
        self.op_desc(op).map_or("", |o| o.kind.as_str())
    }

    /// Where `op` stands in the structure's list of operations (its flow order).
    pub fn op_row(&self, op: OpId) -> Option<usize> {
        let name = self.op_name(op);
        self.operations.iter().position(|o| o.name == name)
    }

    /// Thread `t`'s index in its collection, and the collection's size.
    pub fn thread_column(&self, t: ThreadId) -> Option<(usize, usize)> {
        let name = self.thread_name(t);
        self.collections.iter().find_map(|c| {
            let i = c.threads.iter().position(|n| n == name)?;
            Some((i, c.threads.len()))
        })
    }

    fn op_desc(&self, op: OpId) -> Option<&OperationDesc> {
        let name = self.op_name(op);
        self.operations.iter().find(|o| o.name == name)
    }

    /// The threads operation `op` may run on (from the structure).
    pub fn threads_of(&self, op: &str) -> Vec<String> {
        self.operations
            .iter()
            .find(|o| o.name == op)
            .map(|o| o.threads.clone())
            .unwrap_or_default()
    }

    pub(crate) fn on_structure(
        &mut self,
        operations: &[OperationDesc],
        collections: &[CollectionDesc],
        edges: &[[String; 2]],
    ) {
        self.operations = operations.to_vec();
        self.collections = collections.to_vec();
        self.op_edges = edges.to_vec();
        for o in operations {
            self.intern_op(&o.name);
        }
        for t in collections.iter().flat_map(|c| &c.threads) {
            self.intern_thread(t);
        }
    }

    /// Our numbering of the names `names` numbers, brought up to date when the structure
    /// grew (a structure only ever adds collections and operations).
    fn sync_packed(&mut self, names: &Names) {
        if self.packed_ops.len() != names.ops.len() || self.packed_threads.len() != names.threads.len() {
            self.packed_ops = names.ops.iter().map(|n| OpId(self.ops.intern(n))).collect();
            self.packed_threads = names
                .threads
                .iter()
                .map(|n| ThreadId(self.threads.intern(n)))
                .collect();
        }
    }

    /// Operation number `i` of a packed event (`None` for -1 or an unknown index).
    pub(crate) fn packed_op(&mut self, names: &Names, i: i64) -> Option<OpId> {
        self.sync_packed(names);
        usize::try_from(i)
            .ok()
            .and_then(|i| self.packed_ops.get(i))
            .copied()
    }

    /// Thread number `i` of a packed event (`None` for -1 or an unknown index).
    pub(crate) fn packed_thread(&mut self, names: &Names, i: i64) -> Option<ThreadId> {
        self.sync_packed(names);
        usize::try_from(i)
            .ok()
            .and_then(|i| self.packed_threads.get(i))
            .copied()
    }
}
