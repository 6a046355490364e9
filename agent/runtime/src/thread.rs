//! Threads of a collection: the pending queue each OS thread serves, the envelopes that
//! travel through it, and the per-split frames that tell a merge when it is complete.

use super::error::ScheduleError;
use super::graph::GraphInner;
use super::hook::{Hook, OpInfo, OpKind, QueuedMsg, RecvEvent, StepKind, ThreadInfo};
use super::ids::MsgId;
use super::payload::{Payload, PayloadQueue, Slot};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Back-off steps of an idle thread: spin `2^step` times up to this step...
const BACKOFF_SPIN_LIMIT: u32 = 6;
/// ...then yield the CPU up to this step, then sleep on the condition variable.
const BACKOFF_YIELD_LIMIT: u32 = 10;

/// Lock a mutex, ignoring poisoning: no user code runs while our locks are held.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

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
fn expand(items: &mut VecDeque<Item>) {
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

/// Where producers append: the shared half of a thread's queue.
#[derive(Default)]
struct Inbox {
    items: VecDeque<Item>,
    /// Entries in `items`, a batch counting as its messages: what a receive position
    /// counts.
    entries: usize,
    /// Batches in `items`.
    batches: usize,
    shutdown: bool,
    sleeping: bool,
}

/// The consumer's half: items taken from the inbox in one batch, not yet started (they are
/// still pending: listings, reorders and snapshots see them first), and the running step.
#[derive(Default)]
struct Front {
    items: VecDeque<Item>,
    /// The step this thread is in, tracked only when a hook is installed (snapshots).
    current: Option<Running>,
}

/// The step a thread is in, as tracked on every step: plain data (an operation id, not a
/// shared handle whose reference count every thread would touch).
#[derive(Debug, Clone)]
pub(crate) struct Running {
    pub(crate) op: usize,
    pub(crate) msg: MsgId,
    pub(crate) step: StepKind,
}

/// The step a thread has taken from its queue and not yet finished.
#[derive(Debug, Clone)]
pub struct CurrentStep {
    /// Operation.
    pub op: Arc<OpInfo>,
    /// Message id (final steps: the output id).
    pub msg: MsgId,
    /// Which step.
    pub step: StepKind,
}

/// One thread as seen in a consistent snapshot.
#[derive(Debug, Clone)]
pub struct ThreadSnap {
    /// The thread.
    pub info: Arc<ThreadInfo>,
    /// Its first pending messages (at most the snapshot's limit per thread).
    pub pending: Vec<QueuedMsg>,
    /// Pending messages after those, not described.
    pub more: usize,
    /// Its running step.
    pub current: Option<CurrentStep>,
}

/// The part of a thread that other threads see: its identity and its pending queue.
///
/// The queue has two halves, each under its own lock (always taken front first): the
/// `inbox` producers append to, and the `front` where the thread moves the whole inbox in
/// one go while no hook may hold messages, so it locks the producers' cache line once per
/// batch rather than once per message. Pending messages are `front` then `inbox`, and
/// receive positions count both. While a hook that may hold messages is active the thread
/// takes them one at a time from the inbox (after moving any batch back into it). With no
/// hook installed the thread keeps its front to itself instead (see
/// [`ThreadShared::pop_unwatched`]): `front` then stays empty.
pub(crate) struct ThreadShared {
    pub(crate) info: Arc<ThreadInfo>,
    /// What the thread itself uses on every step (one cache line)...
    own: Padded<OwnHalf>,
    /// ...apart from what producers write on every push (another).
    shared: Padded<InboxHalf>,
}

/// Aligns its content to a cache line of its own.
#[repr(align(64))]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

struct OwnHalf {
    front: Mutex<Front>,
    /// The entries in `front.items` (or in the thread's own front, without a hook; a
    /// batch counting as its messages), readable by producers holding only the inbox lock.
    front_len: AtomicUsize,
    /// Set at shutdown (also in the inbox), read without locking.
    stopping: AtomicBool,
    /// The thread has taken a message, while a hook is active, whose step start the hook
    /// has not recorded yet: receive positions count it (see [`ThreadShared::push`]).
    /// Cleared by [`ThreadShared::started`].
    taking: AtomicBool,
}

struct InboxHalf {
    queue: Mutex<Inbox>,
    /// Whether the inbox has items, for the idle thread to poll without locking (written
    /// under the lock).
    arrived: AtomicBool,
    cv: Condvar,
}

impl ThreadShared {
    pub(crate) fn new(info: Arc<ThreadInfo>) -> Self {
        Self {
            info,
            own: Padded(OwnHalf {
                front: Mutex::new(Front::default()),
                front_len: AtomicUsize::new(0),
                stopping: AtomicBool::new(false),
                taking: AtomicBool::new(false),
            }),
            shared: Padded(InboxHalf {
                queue: Mutex::new(Inbox::default()),
                arrived: AtomicBool::new(false),
                cv: Condvar::new(),
            }),
        }
    }

    /// Append a message; the hook's `on_recv` runs under the queue lock so that the
    /// receive is recorded before any step can consume the message.
    pub(crate) fn push(&self, env: Envelope, hook: Option<&dyn Hook>) {
        let mut q = lock(&self.shared.queue);
        if let Some(hook) = hook.filter(|h| h.active()) {
            hook.on_recv(&RecvEvent {
                thread: &self.info,
                op: env.dest_op(),
                msg_id: &env.id,
                // A batch taken before the hook became active is still pending in front;
                // it only goes back into the inbox, under this lock, all at once. A
                // message taken whose start is not recorded yet is still in the queue for
                // whoever follows the events (it leaves with its start event).
                position: self.own.front_len.load(Ordering::Acquire)
                    + q.entries
                    + usize::from(self.own.taking.load(Ordering::Acquire)),
                traced: env.traced,
            });
        }
        q.items.push_back(Item::Msg(env));
        q.entries += 1;
        self.wake(q);
    }

    /// Append a batch of messages. With a hook active now (checked under the queue lock,
    /// like a receive), each message's receive is recorded here if its send was, in the
    /// hook's current session (the batch was gathered for a streaming hook); else the batch
    /// comes back: its messages must be sent one by one, through the hooks. (An attach
    /// snapshot, which changes the session, locks every queue: it cannot come between.)
    ///
    /// When the inbox ends with a batch of the same destination, handles and session with
    /// room for these messages (the thread is behind: a merge's inputs pile up), they join
    /// it, whoever sent them: the queue's order is the same, the receiver takes fewer
    /// entries, and the emptied batch comes back (`Ok(Some)`) for the sender to reuse.
    pub(crate) fn push_batch(
        &self,
        mut batch: Box<Batch>,
        hook: Option<&dyn Hook>,
    ) -> Result<Option<Box<Batch>>, Box<Batch>> {
        let mut q = lock(&self.shared.queue);
        if let Some(hook) = hook.filter(|h| h.active()) {
            if batch.session != Some(hook.session()) {
                return Err(batch);
            }
            // Positions as one by one (see `push`), read afresh for each: the thread may
            // start messages meanwhile.
            let entries = q.entries;
            if let Some(n) = batch.handles.graph.nodes.get(batch.node as usize) {
                let mut msgs = batch.msgs.iter().enumerate().map(|(i, (id, _))| {
                    let position = self.own.front_len.load(Ordering::Acquire)
                        + entries
                        + i
                        + usize::from(self.own.taking.load(Ordering::Acquire));
                    (id, position)
                });
                hook.on_recv_batch(&self.info, &n.info, &mut msgs);
            }
        }
        q.entries += batch.len();
        if let Some(Item::Batch(tail)) = q.items.back_mut() {
            if tail.node == batch.node
                && tail.session == batch.session
                && tail.len() + batch.len() <= BATCH_MAX
                && tail.handles.same(batch.handles.of())
                && tail.payloads.append(&mut *batch.payloads)
            {
                tail.msgs.append(&mut batch.msgs);
                self.wake(q);
                return Ok(Some(batch));
            }
        }
        q.batches += 1;
        q.items.push_back(Item::Batch(batch));
        self.wake(q);
        Ok(None)
    }

    /// The start of the step for the message last taken has been recorded (or will not
    /// be): receive positions stop counting that message.
    pub(crate) fn started(&self) {
        if self.own.taking.load(Ordering::Relaxed) {
            self.own.taking.store(false, Ordering::Release);
        }
    }

    /// Whether this thread's queue looks empty (its batch is done and nothing arrived):
    /// read without locking, a hint for its own thread.
    pub(crate) fn out_of_work(&self) -> bool {
        self.own.front_len.load(Ordering::Relaxed) == 0 && !self.shared.arrived.load(Ordering::Relaxed)
    }

    pub(crate) fn push_item(&self, item: Item) {
        let mut q = lock(&self.shared.queue);
        q.entries += 1;
        q.items.push_back(item);
        self.wake(q);
    }

    fn wake(&self, q: MutexGuard<'_, Inbox>) {
        self.shared.arrived.store(true, Ordering::Relaxed);
        let sleeping = q.sleeping;
        drop(q);
        if sleeping {
            self.shared.cv.notify_one();
        }
    }

    /// Block until an item is available; `None` once the runtime shuts down. `track`:
    /// record the step taken (a hook is installed); `holding`: a hook that may hold
    /// messages is active now (take one message at a time, see [`ThreadShared`]);
    /// `active`: a hook is active (holding or streaming). A message at the head of a batch
    /// is taken by moving its payload into `slot`; its batch's handles come with it unless
    /// they are `kept` (those the thread keeps from its last message). `unwatched`: the
    /// thread's own front, when the runtime has no hook (see [`Self::pop_unwatched`]).
    pub(crate) fn pop(
        &self,
        (track, unwatched): (bool, Option<&mut VecDeque<Item>>),
        (holding, active): (&dyn Fn() -> bool, &dyn Fn() -> bool),
        (slot, kept): (&mut Option<Box<dyn Slot>>, Option<&Handles>),
    ) -> Option<Popped> {
        if let Some(front) = unwatched {
            return self.pop_unwatched(front, (slot, kept));
        }
        loop {
            if self.own.stopping.load(Ordering::Relaxed) {
                return None;
            }
            let on = holding();
            let mut f = lock(&self.own.front);
            let mut popped = None;
            if on || f.items.is_empty() {
                let mut q = lock(&self.shared.queue);
                if q.shutdown {
                    return None;
                }
                if on {
                    self.unbatch(&mut f, &mut q);
                    popped = q.items.pop_front().map(Popped::Item);
                    q.entries -= usize::from(popped.is_some());
                    if matches!(popped, Some(Popped::Item(Item::Msg(_)))) {
                        self.own.taking.store(true, Ordering::Relaxed);
                    }
                } else {
                    std::mem::swap(&mut f.items, &mut q.items);
                    self.own.front_len.store(q.entries, Ordering::Relaxed);
                    (q.entries, q.batches) = (0, 0);
                }
                self.shared.arrived.store(!q.items.is_empty(), Ordering::Relaxed);
            }
            if !on {
                popped = self.take_head(&mut f.items, slot, kept);
                if popped.is_some() {
                    // A hook that turned active since `on` was read (a debugger attached,
                    // its snapshot listing this message as pending) records this step's
                    // start: until then the message counts in receive positions. Set
                    // before the front shrinks: a producer that sees the shorter front
                    // sees the flag too.
                    if track && active() {
                        self.own.taking.store(true, Ordering::Relaxed);
                    }
                    let n = self.own.front_len.load(Ordering::Relaxed);
                    self.own.front_len.store(n.saturating_sub(1), Ordering::Release);
                }
            }
            if let Some(p) = popped {
                if track {
                    f.current = current_of(&p, kept);
                }
                return Some(p);
            }
            // Nothing yet: spin, then yield, before sleeping. A producer usually posts
            // again within microseconds, and a futex sleep and wake-up costs more than that
            // on both sides (the same back-off std's channels use).
            drop(f);
            self.idle_wait();
        }
    }

    /// [`Self::pop`] for a runtime without a hook: nobody can list, snapshot or reorder
    /// the queues, so the thread keeps its front to itself (`front`, moved from the inbox
    /// in one go) and takes each message without locking.
    fn pop_unwatched(
        &self,
        front: &mut VecDeque<Item>,
        (slot, kept): (&mut Option<Box<dyn Slot>>, Option<&Handles>),
    ) -> Option<Popped> {
        loop {
            if self.own.stopping.load(Ordering::Relaxed) {
                return None;
            }
            if front.is_empty() {
                let mut q = lock(&self.shared.queue);
                if q.shutdown {
                    return None;
                }
                std::mem::swap(front, &mut q.items);
                self.own.front_len.store(q.entries, Ordering::Relaxed);
                (q.entries, q.batches) = (0, 0);
                self.shared.arrived.store(false, Ordering::Relaxed);
            }
            if let Some(p) = self.take_head(front, slot, kept) {
                let n = self.own.front_len.load(Ordering::Relaxed);
                self.own.front_len.store(n.saturating_sub(1), Ordering::Relaxed);
                return Some(p);
            }
            if front.is_empty() {
                self.idle_wait();
            }
        }
    }

    /// Nothing to take: wait for an item.
    fn idle_wait(&self) {
        let mut q = self.wait_a_little();
        if q.items.is_empty() && !q.shutdown {
            q.sleeping = true;
            q = self
                .shared
                .cv
                .wait(q)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        q.sleeping = false;
    }

    /// The first entry of `items`: an item, or the first message of a batch (its payload
    /// moved into `slot`, the rest of the batch staying where it is; its handles cloned
    /// unless they are `kept`).
    fn take_head(
        &self,
        items: &mut VecDeque<Item>,
        slot: &mut Option<Box<dyn Slot>>,
        kept: Option<&Handles>,
    ) -> Option<Popped> {
        let Some(Item::Batch(b)) = items.front_mut() else {
            return items.pop_front().map(Popped::Item);
        };
        let all = b.len();
        let Some((id, from)) = b.msgs.pop_front().filter(|_| b.payloads.pop_into(slot)) else {
            // Ids and payloads out of step (typed operations never do that): the batch is
            // dropped rather than left to block the queue.
            items.pop_front();
            let n = self.own.front_len.load(Ordering::Relaxed);
            self.own.front_len.store(n.saturating_sub(all), Ordering::Relaxed);
            return None;
        };
        let head = BatchHead {
            id,
            node: b.node as usize,
            from,
            handles: (!kept.is_some_and(|k| k.same(b.handles.of()))).then(|| {
                let h = &b.handles;
                Handles::new(&h.graph, &h.sched, h.frame.as_ref())
            }),
        };
        if b.msgs.is_empty() {
            items.pop_front();
        }
        Some(Popped::FromBatch(head))
    }

    /// Move a batch taken before a hook became active back into the inbox, ahead of what
    /// came since, and split every batch of messages into its messages: the same pending
    /// order, one queue of single entries again, and receive positions (front length plus
    /// inbox entries) unchanged. Both halves locked.
    fn unbatch(&self, f: &mut Front, q: &mut Inbox) {
        if !f.items.is_empty() {
            let mut batch = std::mem::take(&mut f.items);
            batch.append(&mut q.items);
            q.items = batch;
            q.entries += self.own.front_len.swap(0, Ordering::Relaxed);
            q.batches = usize::from(q.items.iter().any(|i| matches!(i, Item::Batch(_))));
        }
        if q.batches > 0 {
            expand(&mut q.items);
            q.batches = 0;
        }
    }

    /// Back off for a few microseconds, or until an item arrives; returns the queue locked.
    fn wait_a_little(&self) -> MutexGuard<'_, Inbox> {
        for step in 0..=BACKOFF_YIELD_LIMIT {
            if step <= BACKOFF_SPIN_LIMIT {
                for _ in 0..1u32 << step {
                    std::hint::spin_loop();
                }
            } else {
                std::thread::yield_now();
            }
            // Polled without the lock: producers keep the lock's cache line.
            if self.shared.arrived.load(Ordering::Relaxed) || self.own.stopping.load(Ordering::Relaxed) {
                break;
            }
        }
        lock(&self.shared.queue)
    }

    /// Record the running step (for snapshots).
    pub(crate) fn set_current(&self, current: Option<Running>) {
        lock(&self.own.front).current = current;
    }

    /// Every pending message, front then inbox, batches split into their messages first
    /// (so that each can be described, edited or reordered).
    fn all_items<'q>(f: &'q mut Front, q: &'q mut Inbox) -> impl Iterator<Item = &'q Envelope> {
        expand(&mut f.items);
        if q.batches > 0 {
            expand(&mut q.items);
            q.batches = 0;
        }
        f.items.iter().chain(&q.items).filter_map(|i| match i {
            Item::Msg(e) => Some(e),
            Item::Batch(_) | Item::Finalize { .. } => None,
        })
    }

    /// Lock this queue and describe it, its first `limit` pending messages in full (the
    /// caller holds every queue's guard at once); `op` finds an operation by id.
    pub(crate) fn lock_for_snapshot(
        &self,
        op: &dyn Fn(usize) -> Option<Arc<OpInfo>>,
        limit: usize,
    ) -> (impl Sized + '_, ThreadSnap) {
        let mut f = lock(&self.own.front);
        let mut q = lock(&self.shared.queue);
        let mut msgs = Self::all_items(&mut f, &mut q);
        let pending: Vec<QueuedMsg> = msgs.by_ref().take(limit).map(QueuedMsg::of).collect();
        let more = msgs.count();
        let snap = ThreadSnap {
            info: self.info.clone(),
            pending,
            more,
            current: f.current.as_ref().and_then(|r| {
                Some(CurrentStep {
                    op: op(r.op)?,
                    msg: r.msg.clone(),
                    step: r.step,
                })
            }),
        };
        ((f, q), snap)
    }

    pub(crate) fn shutdown(&self) {
        self.own.stopping.store(true, Ordering::Relaxed);
        lock(&self.shared.queue).shutdown = true;
        self.shared.cv.notify_all();
    }

    pub(crate) fn pending(&self) -> Vec<QueuedMsg> {
        let mut f = lock(&self.own.front);
        let mut q = lock(&self.shared.queue);
        let all = Self::all_items(&mut f, &mut q).map(QueuedMsg::of).collect();
        all
    }

    pub(crate) fn pending_content(&self, id: &MsgId) -> Option<Result<serde_json::Value, String>> {
        let mut f = lock(&self.own.front);
        let mut q = lock(&self.shared.queue);
        let content = Self::all_items(&mut f, &mut q)
            .find(|e| &e.id == id)
            .map(|e| e.payload.to_json());
        content
    }

    /// See [`super::hook::ThreadAccess::reorder`].
    pub(crate) fn reorder(
        &self,
        order: &[String],
        current: Option<&mut Option<Envelope>>,
        rest: super::hook::Rest,
    ) -> Result<(), String> {
        let mut f = lock(&self.own.front);
        let mut q = lock(&self.shared.queue);
        self.unbatch(&mut f, &mut q);
        drop(f);
        let cur_env = current.as_ref().and_then(|c| c.as_ref());
        // Candidates: the message about to start (if any) and every pending message.
        let mut names: Vec<(String, &str)> = Vec::new();
        if let Some(e) = cur_env {
            names.push((e.id.to_string(), &e.dest_op().name));
        }
        for item in &q.items {
            if let Item::Msg(e) = item {
                names.push((e.id.to_string(), &e.dest_op().name));
            }
        }
        let picks = resolve_order(order, &names, rest)?;
        drop(names);

        // Valid: rebuild the queue. Internal notices keep their place at the front.
        let mut envs: Vec<Option<Envelope>> = Vec::with_capacity(picks.len());
        if let Some(c) = current {
            if let Some(e) = c.take() {
                envs.push(Some(e));
            }
        }
        let mut notices = VecDeque::new();
        for item in q.items.drain(..) {
            match item {
                Item::Msg(e) => envs.push(Some(e)),
                other => notices.push_back(other),
            }
        }
        q.items = notices;
        for i in picks {
            if let Some(e) = envs[i].take() {
                q.items.push_back(Item::Msg(e));
            }
        }
        q.entries = q.items.len();
        Ok(())
    }
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
fn current_of(p: &Popped, kept: Option<&Handles>) -> Option<Running> {
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

/// Map each entry of `order` (an id, or `id@op`) to exactly one candidate, each at most
/// once, and return the new order of all candidates: with [`Rest::Named`] `order` must name
/// every one; with [`Rest::After`] / [`Rest::Before`] the unnamed ones follow / precede the
/// named ones in their present order.
fn resolve_order(
    order: &[String],
    names: &[(String, &str)],
    rest: super::hook::Rest,
) -> Result<Vec<usize>, String> {
    use super::hook::Rest;
    let mut used = vec![false; names.len()];
    let mut picks = Vec::with_capacity(names.len());
    for entry in order {
        let (id, op) = match entry.split_once('@') {
            Some((id, op)) => (id, Some(op)),
            None => (entry.as_str(), None),
        };
        let matches: Vec<usize> = names
            .iter()
            .enumerate()
            .filter(|(_, (nid, nop))| nid == id && op.is_none_or(|op| op == *nop))
            .map(|(i, _)| i)
            .collect();
        let i = match matches.as_slice() {
            [] => return Err(format!("`{entry}` is not pending on this thread")),
            [i] => *i,
            many => {
                let alts: Vec<String> = many.iter().map(|&i| format!("{id}@{}", names[i].1)).collect();
                return Err(format!(
                    "`{entry}` is ambiguous here: write one of {}",
                    alts.join(", ")
                ));
            }
        };
        if std::mem::replace(&mut used[i], true) {
            return Err(format!("`{entry}` appears twice in the new order"));
        }
        picks.push(i);
    }
    let unnamed = (0..names.len()).filter(|&i| !used[i]);
    match rest {
        Rest::Named => {
            let missing: Vec<&str> = unnamed.map(|i| names[i].0.as_str()).collect();
            if !missing.is_empty() {
                return Err(format!(
                    "the new order must name every pending message; missing: {}",
                    missing.join(", ")
                ));
            }
        }
        Rest::After => picks.extend(unnamed),
        Rest::Before => {
            let mut all: Vec<usize> = unnamed.collect();
            all.append(&mut picks);
            picks = all;
        }
    }
    Ok(picks)
}

#[cfg(test)]
mod tests {
    use super::super::hook::Rest;
    use super::resolve_order;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    /// Wrapper for the full-order rule (`Rest::Named`).
    fn full(order: &[String], names: &[(String, &str)]) -> Result<Vec<usize>, String> {
        resolve_order(order, names, Rest::Named)
    }

    #[test]
    fn order_must_be_a_permutation() {
        let names = [
            ("0.1".to_owned(), "A"),
            ("0.2".to_owned(), "A"),
            ("0.2".to_owned(), "B"),
        ];
        assert_eq!(full(&s(&["0.2@B", "0.1", "0.2@A"]), &names), Ok(vec![2, 0, 1]));
        let e = full(&s(&["0.2", "0.1"]), &names).unwrap_err();
        assert!(e.contains("ambiguous"), "{e}");
        let e = full(&s(&["0.1", "0.2@A"]), &names).unwrap_err();
        assert!(e.contains("missing: 0.2"), "{e}");
        let e = full(&s(&["0.1", "0.1", "0.2@A", "0.2@B"]), &names).unwrap_err();
        assert!(e.contains("twice"), "{e}");
        let e = full(&s(&["0.9"]), &names).unwrap_err();
        assert!(e.contains("not pending"), "{e}");
    }

    #[test]
    fn a_partial_order_puts_the_unnamed_messages_after_or_before() {
        // Candidates in queue order (the first may be the held start's message); 0.5 and
        // 0.6 stand for messages that arrived after the debugger looked at the queue.
        let names = [
            ("0.1".to_owned(), "A"),
            ("0.2".to_owned(), "A"),
            ("0.3".to_owned(), "A"),
            ("0.3".to_owned(), "B"),
            ("0.5".to_owned(), "A"),
            ("0.6".to_owned(), "A"),
        ];
        // `after`: the named ones first, in the given order; the others keep theirs.
        assert_eq!(
            resolve_order(&s(&["0.3@B", "0.2"]), &names, Rest::After),
            Ok(vec![3, 1, 0, 2, 4, 5])
        );
        // `before`: the named ones last.
        assert_eq!(
            resolve_order(&s(&["0.2", "0.1"]), &names, Rest::Before),
            Ok(vec![2, 3, 4, 5, 1, 0])
        );
        // Naming nothing, or everything, is allowed.
        assert_eq!(
            resolve_order(&[], &names, Rest::After),
            Ok(vec![0, 1, 2, 3, 4, 5])
        );
        assert_eq!(
            resolve_order(
                &s(&["0.6", "0.5", "0.3@B", "0.3@A", "0.2", "0.1"]),
                &names,
                Rest::Before
            ),
            Ok(vec![5, 4, 3, 2, 1, 0])
        );
        // The same refusals as the full rule: not pending, duplicates, ambiguity.
        for rest in [Rest::After, Rest::Before] {
            let e = resolve_order(&s(&["0.2", "0.9"]), &names, rest).unwrap_err();
            assert!(e.contains("`0.9` is not pending"), "{e}");
            let e = resolve_order(&s(&["0.2", "0.2"]), &names, rest).unwrap_err();
            assert!(e.contains("twice"), "{e}");
            let e = resolve_order(&s(&["0.3"]), &names, rest).unwrap_err();
            assert!(e.contains("ambiguous"), "{e}");
        }
        // Without `rest`, the unnamed ones are still refused.
        let e = full(&s(&["0.2"]), &names).unwrap_err();
        assert!(e.contains("missing: 0.1, 0.3, 0.3, 0.5, 0.6"), "{e}");
    }
}
