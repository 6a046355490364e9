//! Threads of a collection: the pending queue each OS thread serves (an inbox producers
//! push into, a front the thread takes from), listings and snapshots of it, and reorders.
//! What travels through it is in [`super::message`].

use super::hook::{Hook, OpInfo, QueuedMsg, RecvEvent, StepKind, ThreadInfo};
use super::ids::MsgId;
use super::payload::Slot;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

pub(crate) use super::message::*;
use super::order::resolve_order;

/// Back-off steps of an idle thread: spin `2^step` times up to this step...
const BACKOFF_SPIN_LIMIT: u32 = 6;
/// ...then yield the CPU up to this step, then sleep on the condition variable.
const BACKOFF_YIELD_LIMIT: u32 = 10;

/// Lock a mutex, ignoring poisoning: no user code runs while our locks are held.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
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
    /// The operation whose step it is.
    pub op: Arc<OpInfo>,
    /// Message id (final steps: the output id).
    pub msg: MsgId,
    /// Run, absorb or final.
    pub step: StepKind,
}

/// One thread as seen in a consistent snapshot.
#[derive(Debug, Clone)]
pub struct ThreadSnap {
    /// The thread's name, collection and global index.
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

    /// The first item queued (in the front the thread took, then in the inbox) for which
    /// `f` says something. With a hook only: without one the front is the thread's own.
    pub(crate) fn queued_find<R>(&self, mut f: impl FnMut(&Item) -> Option<R>) -> Option<R> {
        let front = lock(&self.own.front);
        let q = lock(&self.shared.queue);
        front.items.iter().chain(q.items.iter()).find_map(&mut f)
    }

    /// The step the thread is in, as far as it tells (a hook tracks steps).
    pub(crate) fn current_step(&self, op: &dyn Fn(usize) -> Option<Arc<OpInfo>>) -> Option<CurrentStep> {
        let f = lock(&self.own.front);
        let r = f.current.as_ref()?;
        Some(CurrentStep {
            op: op(r.op)?,
            msg: r.msg.clone(),
            step: r.step,
        })
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

    pub(crate) fn pending_content(
        &self,
        id: &MsgId,
    ) -> Option<Result<serde_json::Value, crate::error::ContentError>> {
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
    ) -> Result<(), crate::error::ReorderError> {
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
