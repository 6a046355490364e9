//! The one interface through which every send, receive (enqueue), step start and step stop
//! passes. The runtime calls it on the thread that produced the event, so an
//! implementation can:
//!
//! - block the calling thread until the debugger releases it (hold);
//! - replace an outgoing message ([`SendEvent::replace_content`]);
//! - reorder the suspended thread's pending queue ([`ThreadAccess::reorder`]);
//! - at a step start, put the message about to start back into the queue (include its id
//!   in a reorder); the thread then starts whatever is at the head;
//! - read and replace the thread-local state at a step start or stop
//!   ([`ThreadAccess::state_json`], [`ThreadAccess::set_state_json`]);
//! - mark a step's outputs traced ([`StepEvent::trace_outputs`]).
//!
//! Without a debugger there is no hook at all and each event costs one branch. A hook
//! that only records for now ([`Hook::streaming`]: a debugger attached in free run) lets
//! messages travel in batches, as without one, and hears of each through calls that never
//! hold a message (they may wait for room in the debugger's buffer, receives excepted).

use super::error::{ContentError, ReorderError, ScheduleError};
use super::ids::MsgId;
use super::payload::{ErasedState, Payload};
use super::thread::{Envelope, ThreadShared};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The kind of a flow-graph operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// One input, one or more outputs.
    Split,
    /// One input, exactly one output.
    Leaf,
    /// Many inputs (all outputs of the matching split), one output.
    Merge,
    /// A merge and a split in one: many inputs, outputs at any time.
    Stream,
}

impl OpKind {
    /// `split`, `leaf`, `merge` or `stream`.
    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::Split => "split",
            OpKind::Leaf => "leaf",
            OpKind::Merge => "merge",
            OpKind::Stream => "stream",
        }
    }
}

/// One operation of a registered flow graph.
#[derive(Debug)]
pub struct OpInfo {
    /// Index among all operations of the runtime (all graphs).
    pub id: usize,
    /// Unique name, e.g. `Sort`.
    pub name: Arc<str>,
    /// Split, leaf, merge or stream.
    pub kind: OpKind,
    /// Index of the collection it runs on.
    pub collection: usize,
}

/// One thread of a collection.
#[derive(Debug)]
pub struct ThreadInfo {
    /// Index among all threads of the runtime.
    pub global: usize,
    /// Index of its collection.
    pub collection: usize,
    /// Index within its collection.
    pub index: usize,
    /// `collection[index]`, e.g. `proc[1]`.
    pub name: Arc<str>,
}

/// A thread collection as announced to the hook.
#[derive(Debug)]
pub struct CollectionInfo {
    /// Index among the runtime's collections.
    pub id: usize,
    /// Its name, e.g. `proc`.
    pub name: String,
    /// Its threads, by index (`proc[0]` first).
    pub threads: Vec<Arc<ThreadInfo>>,
}

/// A flow graph as announced to the hook.
#[derive(Debug)]
pub struct GraphInfo {
    /// Its operations in flow order.
    pub ops: Vec<Arc<OpInfo>>,
    /// Message flow between operations, as pairs of operation ids.
    pub edges: Vec<(usize, usize)>,
}

/// Description of a pending message.
#[derive(Debug, Clone)]
pub struct QueuedMsg {
    /// Its id (with the operation, what names it in a reorder).
    pub id: MsgId,
    /// The operation it is for.
    pub op: Arc<OpInfo>,
    /// Its Rust type name.
    pub type_name: &'static str,
    /// The operation and thread that sent it (`None` for a schedule's input).
    pub from: Option<(Arc<OpInfo>, Arc<ThreadInfo>)>,
    /// Whether it is traced.
    pub traced: bool,
}

impl QueuedMsg {
    pub(crate) fn of(env: &Envelope) -> Self {
        Self {
            id: env.id.clone(),
            op: env.dest_op().clone(),
            type_name: env.payload.type_name(),
            from: env.sender(),
            traced: env.traced,
        }
    }

    /// The key that names this message in a reorder: its id, or `id@op` when the id alone
    /// is ambiguous in the queue.
    pub fn key(&self) -> String {
        self.id.to_string()
    }
}

/// Where a reorder puts the candidates (pending messages, plus the one about to start at a
/// held start) that its order does not name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Rest {
    /// There may be none: the order names every candidate exactly once.
    #[default]
    Named,
    /// After the named ones, in their present order.
    After,
    /// Before the named ones, in their present order.
    Before,
}

/// Access to a suspended thread: its pending queue and (at step boundaries) its state.
pub struct ThreadAccess<'a> {
    pub(crate) thread: &'a ThreadShared,
    /// At a step start: the message about to start (taken when it is put back).
    pub(crate) current: Option<&'a mut Option<Envelope>>,
    pub(crate) state: Option<&'a mut dyn ErasedState>,
    /// Whether [`ThreadAccess::set_state_json`] replaced the state.
    pub(crate) state_set: bool,
    /// At an absorb step's stop: its instance's accumulator as JSON (see
    /// [`ThreadAccess::instance_json`]).
    pub(crate) instance: Option<serde_json::Value>,
}

impl ThreadAccess<'_> {
    /// The pending messages in queue order (not including the one about to start).
    pub fn pending(&self) -> Vec<QueuedMsg> {
        self.thread.pending()
    }

    /// JSON content of a pending message (or of the one about to start), by id.
    pub fn pending_content(&self, id: &MsgId) -> Option<Result<serde_json::Value, ContentError>> {
        if let Some(Some(env)) = self.current.as_deref() {
            if &env.id == id {
                return Some(env.payload.to_json());
            }
        }
        self.thread.pending_content(id)
    }

    /// The message this thread is about to start, while held at a step start.
    pub fn current(&self) -> Option<QueuedMsg> {
        self.current
            .as_deref()
            .and_then(|c| c.as_ref())
            .map(QueuedMsg::of)
    }

    /// Reorder the pending queue. `order` names every pending message exactly once (by id,
    /// or `id@op` when an id is ambiguous), plus, when held at a step start, the message
    /// about to start: it then goes back into the queue at that place and the thread
    /// starts the new head. On error nothing changes.
    pub fn reorder(&mut self, order: &[String]) -> Result<(), ReorderError> {
        self.reorder_with(order, Rest::Named)
    }

    /// Like [`ThreadAccess::reorder`], with `rest` saying where the candidates `order`
    /// does not name go ([`Rest::Named`]: nowhere, `order` names every one). The unnamed
    /// ones keep their relative order, whatever arrived since the debugger looked.
    pub fn reorder_with(&mut self, order: &[String], rest: Rest) -> Result<(), ReorderError> {
        let current = self.current.as_deref_mut();
        self.thread.reorder(order, current, rest)
    }

    /// Whether the message that was about to start has been put back into the queue.
    pub fn put_back(&self) -> bool {
        matches!(self.current.as_deref(), Some(None))
    }

    /// The thread-local state as JSON; an error when the thread is suspended mid-step
    /// (at a send), where the operation itself holds the state.
    pub fn state_json(&self) -> Result<serde_json::Value, ContentError> {
        match &self.state {
            Some(s) => s.to_json(),
            None => Err(ContentError::StateBusy),
        }
    }

    /// Replace the thread-local state; on error (wrong shape, mid-step) nothing changes.
    pub fn set_state_json(&mut self, value: serde_json::Value) -> Result<(), ContentError> {
        match &mut self.state {
            Some(s) => {
                s.replace_from_json(value)?;
                self.state_set = true;
                Ok(())
            }
            None => Err(ContentError::StateBusy),
        }
    }

    /// At an absorb step's stop, when the hook asks for it ([`Hook::instance_states`]):
    /// the accumulator of the merge instance the step absorbed into, as JSON. Only for
    /// merges made with [`crate::ops::merge_serde`] (others' accumulators are not
    /// serializable).
    pub fn instance_json(&self) -> Option<&serde_json::Value> {
        self.instance.as_ref()
    }

    /// Whether the state was replaced through this access.
    pub fn state_replaced(&self) -> bool {
        self.state_set
    }
}

/// An operation posts a message, before it is delivered.
pub struct SendEvent<'a> {
    /// Sending thread (`None`: the caller of `schedule` injects the input).
    pub thread: Option<&'a Arc<ThreadInfo>>,
    /// Sending operation (`None` for a schedule's input).
    pub from_op: Option<&'a Arc<OpInfo>>,
    /// Destination operation (`None`: the final result returns to the schedule caller).
    pub to_op: Option<&'a Arc<OpInfo>>,
    /// Destination thread as routed now (a replacement is routed again).
    pub to_thread: Option<&'a Arc<ThreadInfo>>,
    /// The message id.
    pub msg_id: &'a MsgId,
    /// Whether the message is traced; the hook may change it.
    pub traced: bool,
    pub(crate) payload: &'a mut Box<dyn Payload>,
    pub(crate) replaced: bool,
    /// The sending thread's queue (its state is held by the running operation).
    pub access: Option<ThreadAccess<'a>>,
}

impl SendEvent<'_> {
    /// Rust type name of the message.
    pub fn type_name(&self) -> &'static str {
        self.payload.type_name()
    }
    /// Content as JSON.
    pub fn content_json(&self) -> Result<serde_json::Value, ContentError> {
        self.payload.to_json()
    }
    /// Whether the content was replaced.
    pub fn replaced(&self) -> bool {
        self.replaced
    }
    /// Replace the content (deserialized into the message's own type). On error the
    /// original is kept.
    pub fn replace_content(&mut self, value: serde_json::Value) -> Result<(), ContentError> {
        self.payload.replace_from_json(value)?;
        self.replaced = true;
        Ok(())
    }
}

/// A message was appended to a thread's pending queue. Called with that queue locked:
/// implementations must not block.
pub struct RecvEvent<'a> {
    /// Receiving thread.
    pub thread: &'a Arc<ThreadInfo>,
    /// Operation the message is for.
    pub op: &'a Arc<OpInfo>,
    /// The message id.
    pub msg_id: &'a MsgId,
    /// Position in the queue (0 = head).
    pub position: usize,
    /// Whether the message is traced.
    pub traced: bool,
}

/// A message gathered into a batch was sent (see [`Hook::streaming`]).
#[derive(Debug)]
pub struct StreamedSend<'a> {
    /// Sending thread.
    pub thread: &'a ThreadInfo,
    /// Sending operation.
    pub from_op: &'a OpInfo,
    /// Destination operation.
    pub to_op: &'a OpInfo,
    /// Destination thread.
    pub to_thread: &'a ThreadInfo,
    /// The message id.
    pub msg_id: &'a MsgId,
    /// Its Rust type name (short form).
    pub type_name: &'static str,
}

/// A step on a message taken from a batch starts or stops (see [`Hook::streaming`]).
#[derive(Debug)]
pub struct StreamedStep<'a> {
    /// The thread running it.
    pub thread: &'a ThreadInfo,
    /// The operation the step belongs to.
    pub op: &'a OpInfo,
    /// Run (a leaf) or absorb (a merge or stream).
    pub step: StepKind,
    /// The message it takes.
    pub msg_id: &'a MsgId,
    /// The instance (the message id for a leaf, the merge instance's id for an absorb).
    pub instance: &'a MsgId,
    /// The thread that sent the message, by its index among all threads of the runtime
    /// ([`ThreadInfo::global`]); `None` for a schedule's input.
    pub from: Option<usize>,
}

/// Which step of an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// The single step of a split or leaf.
    Run,
    /// A merge or stream absorbing one input.
    Absorb,
    /// The final step of a merge or stream.
    Final,
}

/// A step is about to start, or has stopped.
pub struct StepEvent<'a> {
    /// The thread that runs the step (and is suspended while a hook holds it).
    pub thread: &'a Arc<ThreadInfo>,
    /// The operation the step belongs to.
    pub op: &'a Arc<OpInfo>,
    /// Run, absorb or final: which of the operation's steps this is.
    pub step: StepKind,
    /// The input message id (for a final step: the output id).
    pub msg_id: &'a MsgId,
    /// The operation instance: the message id for splits and leaves, the id the merge or
    /// stream outputs for merges and streams.
    pub instance: &'a MsgId,
    /// The thread that sent the message, by its index among all threads of the runtime
    /// ([`ThreadInfo::global`]); `None` for a schedule's input and for a final step.
    pub from: Option<usize>,
    /// Whether the consumed message is traced (for a final step: any absorbed input).
    pub input_traced: bool,
    /// Whether this step's outputs will be traced; defaults to `input_traced`.
    pub trace_outputs: bool,
    /// The suspended thread.
    pub access: ThreadAccess<'a>,
}

/// Observer and controller of every event of a runtime. All methods default to nothing.
pub trait Hook: Send + Sync + 'static {
    /// Whether the hook wants events now. When it answers `false` the runtime builds no
    /// event at all (the fast path of an agent with no debugger attached). Called once per
    /// event; must be cheap.
    fn active(&self) -> bool {
        true
    }
    /// A flag that always holds what [`Self::active`] answers, if the hook has one: the
    /// runtime then reads it (one load) instead of calling `active` (a call through the
    /// trait object, several times per message).
    fn active_flag(&self) -> Option<Arc<AtomicBool>> {
        None
    }
    /// Whether the hook, while active, only records for now: nothing could hold, edit or
    /// trace a message (no breakpoint, paused thread, step mode, ...). Messages then keep
    /// travelling in batches, as without a hook, and the runtime reports each of them
    /// through [`Hook::streamed_send`], [`Hook::on_recv_batch`] and
    /// [`Hook::streamed_step`], which never hold a message. Otherwise an active hook has
    /// messages sent, received and started one by one, through the calls that may hold
    /// them. Called often; must be cheap.
    fn streaming(&self) -> bool {
        false
    }
    /// The current session: a number that changes when what was recorded before can no
    /// longer reach the debugger (a debugger attaches, and its snapshot replaces what was
    /// buffered). A batch whose sends were recorded in another session than the current
    /// one is sent again, one by one, through [`Hook::on_send`].
    fn session(&self) -> u64 {
        0
    }
    /// A message was gathered into a batch (while streaming); its receive follows when the
    /// batch is enqueued. Returns the session the send was recorded in (`None`: it was
    /// not, e.g. the debugger left).
    fn streamed_send(&self, _ev: &StreamedSend<'_>) -> Option<u64> {
        Some(self.session())
    }
    /// A step on a message taken from a batch starts (`stop`: stops), while streaming.
    fn streamed_step(&self, _ev: &StreamedStep<'_>, _stop: bool) {}
    /// A collection was added (its threads exist and wait for messages).
    fn on_collection(&self, _info: &CollectionInfo) {}
    /// A flow graph was registered.
    fn on_graph(&self, _info: &GraphInfo) {}
    /// A message is posted (may block, may replace the message).
    fn on_send(&self, _ev: &mut SendEvent<'_>) {}
    /// A message was enqueued (must not block).
    fn on_recv(&self, _ev: &RecvEvent<'_>) {}
    /// Messages of a batch for `op` were enqueued on `thread` (must not block), each with
    /// its position; none is traced. By default, one [`Hook::on_recv`] each.
    fn on_recv_batch(
        &self,
        thread: &Arc<ThreadInfo>,
        op: &Arc<OpInfo>,
        msgs: &mut dyn Iterator<Item = (&MsgId, usize)>,
    ) {
        for (msg_id, position) in msgs {
            self.on_recv(&RecvEvent {
                thread,
                op,
                msg_id,
                position,
                traced: false,
            });
        }
    }
    /// A step is about to start (may block, reorder, put back, touch the state).
    fn on_start(&self, _ev: &mut StepEvent<'_>) {}
    /// A step finished (may block, reorder, touch the state).
    fn on_stop(&self, _ev: &mut StepEvent<'_>) {}
    /// Whether an absorb step's stop should carry its merge's accumulator
    /// ([`ThreadAccess::instance_json`]); serializing it costs, so only when asked.
    fn instance_states(&self) -> bool {
        false
    }
    /// A schedule call failed (an operation panicked or broke a rule).
    fn on_error(&self, _err: &ScheduleError) {}
    /// Threads that can never go on: each is in a step that called `schedule`, and that
    /// call waits for a message queued at one of them (see [`crate::StuckWait`]). Told
    /// from a blocked caller's thread, again until the hook says it heard (`true`: a
    /// debugger attached later still hears of it); the program is left as it is.
    fn on_stuck(&self, _waits: &[crate::StuckWait]) -> bool {
        false
    }
    /// The runtime was created; `view` reads its queues (for snapshots).
    fn on_runtime(&self, _view: super::RuntimeView) {}
    /// The runtime is being dropped: release every hold (threads are joined next).
    fn on_shutdown(&self) {}
    /// The runtime's threads have stopped: flush what is left.
    fn on_finished(&self) {}
}

/// The hook that does nothing (what a program without a debugger gets, in effect).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopHook;
impl Hook for NoopHook {}
