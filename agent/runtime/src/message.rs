//! What travels through the queues: envelopes (one message), batches (many of one
//! destination, payloads unboxed), the internal `Finalize` notice, and the handles they
//! share — a message's graph, schedule call and split frame.

use super::error::ScheduleError;
use super::graph::GraphInner;
use super::hook::{OpInfo, OpKind, StepKind, ThreadInfo};
use super::ids::MsgId;
use super::payload::{Payload, PayloadQueue};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex};

use super::thread::{lock, Running};

/// What a schedule call waits for.
pub(crate) type Outcome = Result<Box<dyn Payload>, ScheduleError>;

/// One schedule call in flight. Cache-line aligned like [`GraphInner`]: every thread reads
/// `failed` on every message, while the reference counts before it change all the time.
#[repr(align(64))]
pub(crate) struct Sched {
    failed: AtomicBool,
    tx: Mutex<Option<SyncSender<Outcome>>>,
}

impl Sched {
    pub(crate) fn new(tx: SyncSender<Outcome>) -> Self {
        Self {
            failed: AtomicBool::new(false),
            tx: Mutex::new(Some(tx)),
        }
    }
    pub(crate) fn is_failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }
    pub(crate) fn complete(&self, out: Box<dyn Payload>) {
        if let Some(tx) = lock(&self.tx).take() {
            let _ = tx.send(Ok(out));
        }
    }
    /// Fail the schedule; true if this was its first failure.
    pub(crate) fn fail(&self, err: ScheduleError) -> bool {
        self.failed.store(true, Ordering::Relaxed);
        match lock(&self.tx).take() {
            Some(tx) => {
                let _ = tx.send(Err(err));
                true
            }
            None => false,
        }
    }
}

/// The outputs of one split (or stream) instance, counted so that the matching merge knows
/// when it has all of them, whatever the arrival order.
pub(crate) struct Frame {
    /// The split's input id: what the matching merge outputs.
    pub(crate) prefix: MsgId,
    /// The enclosing frame (what the merge's output belongs to).
    pub(crate) parent: Option<Arc<Frame>>,
    /// Outputs posted less outputs absorbed, the posted ones added when the split is done:
    /// negative until then, zero exactly once after (when the last is absorbed, or when
    /// the split finishes after every output was). One atomic step per absorbed input,
    /// where a lock took two.
    remaining: AtomicI64,
    /// Global index of the thread and node index of the merge absorbing the outputs
    /// (set by the first input it absorbs).
    merge_thread: Mutex<Option<(usize, usize)>>,
}

impl Frame {
    pub(crate) fn new(prefix: MsgId, parent: Option<Arc<Frame>>) -> Self {
        Self {
            prefix,
            parent,
            remaining: AtomicI64::new(0),
            merge_thread: Mutex::new(None),
        }
    }

    /// The merge instance on thread `thread` (node `node`) absorbs its first input: every
    /// input of the instance must go to that thread.
    pub(crate) fn register_merge(&self, thread: &ThreadInfo, node: usize) -> Result<(), String> {
        let mut m = lock(&self.merge_thread);
        match *m {
            Some((t, _)) if t != thread.global => Err(format!(
                "inputs of merge instance {} were routed to different threads (thread #{t} and {}); route all of them to one thread",
                self.prefix, thread.name
            )),
            _ => {
                *m = Some((thread.global, node));
                Ok(())
            }
        }
    }

    /// The merge absorbed one more input. Returns whether that was the last.
    pub(crate) fn absorbed(&self) -> bool {
        self.remaining.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// The split finished after posting `n` outputs. Returns the merge's thread and node
    /// when every output has already been absorbed there (it must then be told to finish).
    pub(crate) fn set_expected(&self, n: u64) -> Option<(usize, usize)> {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        if self.remaining.fetch_add(n, Ordering::AcqRel) + n == 0 {
            *lock(&self.merge_thread)
        } else {
            None
        }
    }
}

/// A message on its way to (or waiting in the queue of) a thread.
///
/// Every message is written by one core and read by another: the fields are kept narrow
/// (indexes as `u32`, the sender as a pair of them) so that an envelope fits in 96 bytes.
pub(crate) struct Envelope {
    pub(crate) id: MsgId,
    pub(crate) graph: Arc<GraphInner>,
    pub(crate) payload: Box<dyn Payload>,
    pub(crate) frame: Option<Arc<Frame>>,
    pub(crate) sched: Arc<Sched>,
    /// The destination node of `graph`.
    pub(crate) node: u32,
    /// The sending node of `graph` and the index of the sending thread in its collection
    /// (indexes rather than shared handles: no reference count to touch per message).
    pub(crate) from: Sender,
    pub(crate) traced: bool,
}

/// Where a message comes from: a node of its graph and a thread of that node's collection
/// (32 bits each, in one word: written and copied whole), or nowhere (the input of a
/// schedule call).
#[derive(Clone, Copy)]
pub(crate) struct Sender(u64);

impl Sender {
    /// The input of a schedule call.
    pub(crate) const NONE: Sender = Sender(u64::MAX);

    pub(crate) fn new(node: usize, thread: usize) -> Self {
        match (u32::try_from(node), u32::try_from(thread)) {
            (Ok(node), Ok(thread)) if node != u32::MAX => Self(u64::from(node) << 32 | u64::from(thread)),
            _ => Self::NONE,
        }
    }

    fn get(self) -> Option<(usize, usize)> {
        (self.0 != u64::MAX).then_some(((self.0 >> 32) as usize, (self.0 & 0xffff_ffff) as usize))
    }

    /// The sending thread's index among all threads of the runtime (`None`: a schedule's
    /// input).
    pub(crate) fn global(self, graph: &GraphInner) -> Option<usize> {
        let (node, thread) = self.get()?;
        Some(graph.nodes.get(node)?.threads.get(thread)?.info.global)
    }
}

const _: () = assert!(std::mem::size_of::<Item>() <= 96, "an envelope grew");

impl Envelope {
    pub(crate) fn dest_op(&self) -> &Arc<OpInfo> {
        &self.graph.nodes[self.node as usize].info
    }

    /// The operation and thread that sent this message.
    pub(crate) fn sender(&self) -> Option<(Arc<OpInfo>, Arc<ThreadInfo>)> {
        let (node, thread) = self.from.get()?;
        let n = self.graph.nodes.get(node)?;
        Some((n.info.clone(), n.threads.get(thread)?.info.clone()))
    }
}

/// What a thread's queue holds: messages, and the internal notice that a merge instance on
/// this thread became complete after its last input was absorbed.
pub(crate) enum Item {
    Msg(Envelope),
    /// Several messages at once (see [`Batch`]).
    Batch(Box<Batch>),
    Finalize {
        graph: Arc<GraphInner>,
        node: usize,
        frame: Arc<Frame>,
        sched: Arc<Sched>,
    },
}

/// Messages from one sender (a split's outputs, or the leaf outputs a thread gathered) to
/// one thread, gathered while no hook may hold them (no debugger, or one that only
/// streams): one queue entry for up to [`BATCH_MAX`] messages, their payloads unboxed in
/// one `VecDeque`. The destination and the sending node are the same for every message of
/// a batch (and none is traced), and so are its graph, frame and schedule call: the batch
/// holds one handle of each for all its messages, so a message touches no reference count
/// on its way (those are cache lines every core writes). Whoever needs to see the messages
/// one by one (listings, snapshots, reorders, a thread taking messages one at a time for a
/// hook that may hold them) splits it first.
pub(crate) struct Batch {
    pub(crate) node: u32,
    /// The handles all its messages share.
    pub(crate) handles: Handles,
    /// The messages' ids and senders, in order (never empty in a queue). Senders differ
    /// once batches from several threads were joined at their destination (see
    /// [`ThreadShared::push_batch`]).
    pub(crate) msgs: VecDeque<(MsgId, Sender)>,
    /// The payloads, in the same order.
    pub(crate) payloads: Box<dyn PayloadQueue>,
    /// The session (see [`Hook::session`]) in which each message's send was reported to a
    /// streaming hook as it was gathered (`None`: not reported). Its receives are reported
    /// as it is enqueued if that is still the hook's session.
    pub(crate) session: Option<u64>,
}

/// The graph, schedule call and frame of a message, shared by the messages of a batch and
/// kept by a thread while it runs them.
pub(crate) struct Handles {
    pub(crate) graph: Arc<GraphInner>,
    pub(crate) sched: Arc<Sched>,
    pub(crate) frame: Option<Arc<Frame>>,
}

impl Handles {
    pub(crate) fn new(graph: &Arc<GraphInner>, sched: &Arc<Sched>, frame: Option<&Arc<Frame>>) -> Self {
        Self {
            graph: graph.clone(),
            sched: sched.clone(),
            frame: frame.cloned(),
        }
    }

    /// Whether these are the same handles (the same graph, call and frame).
    pub(crate) fn same(&self, (graph, sched, frame): (&GraphInner, &Sched, Option<&Frame>)) -> bool {
        std::ptr::eq(&*self.graph, graph)
            && std::ptr::eq(&*self.sched, sched)
            && match (self.frame.as_deref(), frame) {
                (Some(a), Some(b)) => std::ptr::eq(a, b),
                (None, None) => true,
                _ => false,
            }
    }

    pub(crate) fn of(&self) -> (&GraphInner, &Sched, Option<&Frame>) {
        (&self.graph, &self.sched, self.frame.as_deref())
    }
}

/// How many messages a batch holds at most: the split pushes it then and starts another,
/// so that the destination can start while the split goes on.
pub(crate) const BATCH_MAX: usize = 64;

impl Batch {
    pub(crate) fn len(&self) -> usize {
        self.msgs.len()
    }

    /// Its messages as envelopes of their own (each with its own handles), in order.
    pub(crate) fn into_envelopes(mut self) -> impl Iterator<Item = Envelope> {
        std::iter::from_fn(move || {
            let (id, from) = self.msgs.pop_front()?;
            let payload = self.payloads.pop_boxed()?;
            let h = &self.handles;
            Some(Envelope {
                id,
                graph: h.graph.clone(),
                payload,
                frame: h.frame.clone(),
                sched: h.sched.clone(),
                node: self.node,
                from,
                traced: false,
            })
        })
    }
}

/// Split every batch in `items` into its messages, in place.
pub(crate) fn expand(items: &mut VecDeque<Item>) {
    if !items.iter().any(|i| matches!(i, Item::Batch(_))) {
        return;
    }
    let all = std::mem::take(items);
    for item in all {
        match item {
            Item::Batch(b) => items.extend(b.into_envelopes().map(Item::Msg)),
            other => items.push_back(other),
        }
    }
}

/// What a thread takes from its queue: an item, or the first message of a batch.
pub(crate) enum Popped {
    Item(Item),
    FromBatch(BatchHead),
}

/// A message taken from a batch: its id, the batch's destination and sender, and the
/// batch's handles if they are not those the thread keeps (the payload is in the slot
/// given to [`ThreadShared::pop`]).
pub(crate) struct BatchHead {
    pub(crate) id: MsgId,
    /// A whole word, like every field here: the head is copied as words, which must not
    /// wait for narrower stores of its parts.
    pub(crate) node: usize,
    pub(crate) from: Sender,
    pub(crate) handles: Option<Handles>,
}

/// The step an operation takes a message in.
fn step_of(kind: OpKind) -> StepKind {
    match kind {
        OpKind::Split | OpKind::Leaf => StepKind::Run,
        OpKind::Merge | OpKind::Stream => StepKind::Absorb,
    }
}

/// The step a thread takes for `p` (`kept`: the handles it keeps, those of a message
/// taken from a batch if the message came without).
pub(crate) fn current_of(p: &Popped, kept: Option<&Handles>) -> Option<Running> {
    let item = match p {
        Popped::Item(item) => item,
        Popped::FromBatch(h) => {
            let graph = &h.handles.as_ref().or(kept)?.graph;
            let op = &graph.nodes.get(h.node)?.info;
            return Some(Running {
                op: op.id,
                msg: h.id.clone(),
                step: step_of(op.kind),
            });
        }
    };
    Some(match item {
        Item::Batch(b) => Running {
            op: b.handles.graph.nodes.get(b.node as usize)?.info.id,
            msg: b.msgs.front()?.0.clone(),
            step: StepKind::Run,
        },
        Item::Msg(e) => {
            let op = e.dest_op();
            Running {
                op: op.id,
                msg: e.id.clone(),
                step: step_of(op.kind),
            }
        }
        Item::Finalize {
            graph, node, frame, ..
        } => Running {
            op: graph.nodes[*node].info.id,
            msg: frame.prefix.clone(),
            step: StepKind::Final,
        },
    })
}
