//! The seam between the agent core and the program it debugs. A front end (the flow-graph
//! runtime's, module `flow`; an MPI interposition library's next) describes the program
//! to the core in these terms and implements [`Debuggee`] for what the debugger's commands
//! and an attach read from it. Nothing here names a runtime type: threads and operations
//! are indexes and names, queues are listed as protocol entries.
//!
//! The per-event path does not go through this seam: a front end's event callbacks call
//! the core (records, policy, holds) directly, without dynamic dispatch.

use racetrack_protocol::{self as proto, Event, QueueEntry, ThreadSnapshot};
use std::sync::Arc;

/// A thread as the core names it: the flow graph's threads, or an MPI program's ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    /// Its place among all threads (0, 1, ... in registration order): what policies,
    /// holds and compact records (`Record::thread`) name it by.
    pub global: usize,
    /// The collection it belongs to: the collection's index in registration order.
    pub collection: usize,
    /// What the debugger calls it, unique in the program (`rank[1]`).
    pub name: Arc<str>,
}

impl Thread {
    /// Thread number `global` of all, in collection number `collection`, named `name`.
    pub fn new(global: usize, collection: usize, name: impl Into<Arc<str>>) -> Self {
        Self {
            global,
            collection,
            name: name.into(),
        }
    }
}

/// Threads that run the same operations (a runtime collection; for MPI, the ranks).
#[derive(Debug, Clone)]
pub struct Collection {
    /// What the debugger calls the collection (`rank`); operations name it by index.
    pub name: String,
    /// Its threads, each with its global index and this collection's index.
    pub threads: Vec<Thread>,
}

impl Collection {
    /// The collection `name` of `threads`.
    pub fn new(name: impl Into<String>, threads: Vec<Thread>) -> Self {
        Self {
            name: name.into(),
            threads,
        }
    }
}

/// An operation of the program (a flow-graph operation; for MPI, a call site).
#[derive(Debug, Clone)]
pub struct Operation {
    /// What the debugger calls it (`MPI_Send`), unique in the program: breakpoints and
    /// events name it so.
    pub name: Arc<str>,
    /// What the debugger shows as its kind (`split`, `leaf`, ...).
    pub kind: String,
    /// The collection (its index in registration order) it runs on.
    pub collection: usize,
}

impl Operation {
    /// The operation `name` of kind `kind`, run by the threads of collection number
    /// `collection`.
    pub fn new(name: impl Into<Arc<str>>, kind: impl Into<String>, collection: usize) -> Self {
        Self {
            name: name.into(),
            kind: kind.into(),
            collection,
        }
    }
}

/// The collections and operations the program registered, in registration order, as the
/// `structure` event lists them (packed events name operations and threads by their index
/// here, so an operation's index is its id).
#[derive(Default)]
pub(crate) struct Structure {
    pub(crate) collections: Vec<Collection>,
    pub(crate) ops: Vec<Operation>,
    /// Flows between operations, as indexes in `ops`.
    pub(crate) edges: Vec<(usize, usize)>,
}

impl Structure {
    /// The `structure` event describing it.
    pub(crate) fn event(&self) -> Event {
        let names = |c: &Collection| c.threads.iter().map(|t| t.name.to_string()).collect();
        let coll = |id: usize| self.collections.get(id);
        Event::Structure {
            operations: self
                .ops
                .iter()
                .map(|o| proto::OperationDesc {
                    name: o.name.to_string(),
                    kind: o.kind.clone(),
                    collection: coll(o.collection).map(|c| c.name.clone()).unwrap_or_default(),
                    threads: coll(o.collection).map(names).unwrap_or_default(),
                })
                .collect(),
            collections: self
                .collections
                .iter()
                .map(|c| proto::CollectionDesc {
                    name: c.name.clone(),
                    threads: names(c),
                })
                .collect(),
            edges: self
                .edges
                .iter()
                .filter_map(|(a, b)| {
                    Some([
                        self.ops.get(*a)?.name.to_string(),
                        self.ops.get(*b)?.name.to_string(),
                    ])
                })
                .collect(),
        }
    }

    /// The operation named `name`, with its index.
    pub(crate) fn op_named(&self, name: &str) -> Result<(usize, &Operation), String> {
        self.ops
            .iter()
            .enumerate()
            .find(|(_, o)| *o.name == *name)
            .ok_or_else(|| {
                let names: Vec<&str> = self.ops.iter().map(|o| &*o.name).collect();
                format!("unknown operation `{name}` (operations: {})", names.join(", "))
            })
    }
}

/// What the agent's commands and an attach read from the program: its threads and their
/// queues. Called on the agent's thread, for commands and attaches only (never on the
/// per-event path), so a front end may lock what it needs here.
pub trait Debuggee: Send + Sync {
    /// Every thread, in global order.
    fn threads(&self) -> Vec<Thread>;

    /// How many threads there are (an attach divides its snapshot's room among them).
    fn thread_count(&self) -> usize {
        self.threads().len()
    }

    /// Whether its start events carry an MPI call's parameters (`call`), which
    /// conditional breakpoints can test.
    fn has_calls(&self) -> bool {
        false
    }

    /// Called on the agent's thread before each flush of the stream (every 10 ms at
    /// least while a debugger is attached): a front end that defers an event (the MPI
    /// library's polling step, whose `stop` waits for the next call) reports it here once
    /// it is due.
    fn tick(&self) {}

    /// The first `max` pending messages of thread `global` (with their contents if
    /// `content`), and how many more there are. Running or not: the debuggee locks the
    /// queue for the listing.
    fn queue(&self, global: usize, max: usize, content: bool) -> (Vec<QueueEntry>, usize);

    /// Lock every queue, describe each thread (at most `per_thread` pending messages each,
    /// the others counted) and call `cut` with the descriptions while the queues are still
    /// locked: no message is enqueued or taken meanwhile, so the stream `cut` starts is
    /// consistent with them.
    fn snapshot(&self, per_thread: usize, cut: &mut dyn FnMut(Vec<ThreadSnapshot>));
}
