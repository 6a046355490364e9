//! The step loop each runtime thread runs, and message delivery (routing, the send and
//! receive hooks, merge completion).

use super::error::ScheduleError;
use super::graph::{AbsorbFn, GraphInner, InitFn, Input, Node, OpFn, PostSink};
use super::hook::{Hook, SendEvent, StepEvent, StepKind, StreamedSend, StreamedStep, ThreadAccess};
use super::ids::MsgId;
use super::payload::{ErasedState, Payload};
use super::payload::{PayloadQueue, Slot};
use super::thread::{
    Batch, BatchHead, Envelope, Frame, Handles, Item, Popped, Running, Sched, Sender, ThreadShared, BATCH_MAX,
};
use super::{Shared, StepInfo, ThreadState};
use std::any::Any;
use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::collections::VecDeque;
use std::hash::{BuildHasherDefault, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// A merge or stream instance in progress on this thread.
struct Instance {
    acc: Option<Box<dyn Any + Send>>,
    /// Keeps the frame alive, so its address (the map key) stays unique.
    _frame: Arc<Frame>,
    sched: Arc<Sched>,
    traced: bool,
    /// Streams: the frame of the outputs, and how many were posted so far.
    out_frame: Option<Arc<Frame>>,
    posted: u64,
}

/// Hashes the address of a frame (the key of [`Exec::instances`]): one multiply, where
/// the default SipHash showed in profiles of merges absorbing millions of inputs.
#[derive(Default)]
struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_usize(&mut self, n: usize) {
        let h = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 32);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A message's graph, schedule call and frame (borrowed when it came from a batch).
type MsgHandles<'h> = (&'h Arc<GraphInner>, &'h Arc<Sched>, Option<Cow<'h, Arc<Frame>>>);

/// Per-thread executor state.
struct Exec<'a, S> {
    sh: &'a Shared,
    me: &'a ThreadShared,
    state: S,
    instances: HashMap<usize, Instance, BuildHasherDefault<AddrHasher>>,
    /// A batch emptied when the outputs it carried joined one waiting at their
    /// destination, kept for the next leaf output (no allocation per message).
    spare: Option<Box<Batch>>,
}

/// A batch to node `node` (`spare`, an emptied one, if its payloads are of `item`'s type);
/// `session`: see [`Batch::session`]. `full`: with room for a full batch (a split's; a
/// single-output step's holds one message).
fn new_batch(
    node: usize,
    (graph, sched, frame): (&Arc<GraphInner>, &Arc<Sched>, Option<&Arc<Frame>>),
    (new, item): (fn() -> Box<dyn PayloadQueue>, std::any::TypeId),
    (session, full): (Option<u64>, bool),
    spare: Option<&mut Option<Box<Batch>>>,
) -> Box<Batch> {
    if let Some(mut b) = spare
        .and_then(Option::take)
        .filter(|b| b.msgs.is_empty() && b.payloads.is_empty() && b.payloads.item_type() == item)
    {
        b.node = node as u32;
        // The same handles as the last output's, usually: no reference count touched.
        if !b.handles.same((graph, sched, frame.map(|f| &**f))) {
            b.handles = Handles::new(graph, sched, frame);
        }
        b.session = session;
        return b;
    }
    let mut payloads = new();
    if full {
        payloads.reserve_batch();
    }
    Box::new(Batch {
        node: node as u32,
        handles: Handles::new(graph, sched, frame),
        msgs: VecDeque::with_capacity(if full { BATCH_MAX } else { 1 }),
        payloads,
        session,
    })
}

/// The hook, when it is active.
fn active_hook(sh: &Shared) -> Option<&dyn Hook> {
    let hook = sh.hook.as_deref()?;
    let on = match &sh.hook_on {
        Some(flag) => flag.load(std::sync::atomic::Ordering::Relaxed),
        None => hook.active(),
    };
    on.then_some(hook)
}

/// Whether an active hook may hold messages now: they then travel one by one (see
/// [`Hook::streaming`]).
fn holding(sh: &Shared) -> bool {
    active_hook(sh).is_some_and(|h| !h.streaming())
}

/// Push a batch `me` gathered to thread `t` of its destination. Should a hook be active
/// whose current session did not hear of its sends (gathered before it attached), each is
/// delivered on its own, through the send hook, as if posted now (a failure then fails
/// that message's schedule call). Returns the batch emptied, when its messages joined one
/// waiting at the destination (see [`ThreadShared::push_batch`]).
fn send_batch(sh: &Shared, me: &ThreadShared, batch: Box<Batch>, t: usize) -> Option<Box<Batch>> {
    let graph = batch.handles.graph.clone();
    let node = batch.node as usize;
    let dest = graph.nodes.get(node)?.threads.get(t)?;
    let batch = match dest.push_batch(batch, sh.hook.as_deref()) {
        Ok(emptied) => return emptied,
        Err(batch) => batch,
    };
    let from_node = node.saturating_sub(1);
    for env in batch.into_envelopes() {
        let (id, sched) = (env.id.clone(), env.sched.clone());
        let r = run_guarded(|| {
            let out = Output {
                graph: env.graph,
                dest: Some(node),
                id: env.id,
                payload: env.payload,
                frame: env.frame,
                sched: env.sched,
                traced: false,
            };
            deliver(sh, Some((from_node, me)), &graph, out)
        });
        if let Err(e) = r {
            fail_schedule(sh, me, &sched, &graph.nodes[from_node].info.name, &id, e);
        }
    }
    None
}

/// Fail the schedule call `sched` because of a step of `op` on `me` with message `msg`.
fn fail_schedule(sh: &Shared, me: &ThreadShared, sched: &Sched, op: &str, msg: &MsgId, err: StepFailure) {
    let (op, thread, msg) = (op.to_owned(), me.info.name.to_string(), msg.to_string());
    let e = match err {
        StepFailure::Panic(message) => ScheduleError::Panic {
            op,
            thread,
            msg,
            message,
        },
        StepFailure::Rule(message) => ScheduleError::Operation {
            op,
            thread,
            msg,
            message,
        },
        StepFailure::Reported => return,
    };
    if let Some(h) = sh.hook.as_deref() {
        h.on_error(&e);
    }
    sched.fail(e);
}

pub(crate) fn thread_main<S: ThreadState>(sh: &Shared, me: &ThreadShared) {
    let mut ex = Exec {
        sh,
        me,
        state: S::default(),
        instances: HashMap::default(),
        spare: None,
    };
    let track = sh.hook.is_some();
    // Without a hook the thread's front is its own (see `ThreadShared::pop_unwatched`).
    let mut unwatched = (!track).then(VecDeque::new);
    // The graph and schedule (and, for messages from batches, the frame) of the last
    // message, kept alive by this thread: messages taken from a batch share them, and a
    // leaf can hand its input's handles on to its output instead of cloning them (every
    // clone and drop of those shared reference counts is a cache line bouncing between
    // cores; messages sent one by one still carry their own). Released when the thread
    // runs out of work, so a finished schedule or a dropped graph is not kept for long.
    let mut alive: Option<Handles> = None;
    let active = || active_hook(sh).is_some();
    let holding = || holding(sh);
    // Where a message taken from a batch leaves its payload (reused while the type stays).
    let mut slot = None;
    loop {
        if (alive.is_some() || ex.spare.is_some()) && me.out_of_work() {
            alive = None;
            // The spare batch keeps its last handles (reused as they are for the next
            // output of the same call): dropped once that call is over.
            if ex
                .spare
                .as_ref()
                .is_some_and(|b| Arc::strong_count(&b.handles.sched) == 1)
            {
                ex.spare = None;
            }
        }
        me.started();
        let Some(popped) = me.pop(
            (track, unwatched.as_mut()),
            (&holding, &active),
            (&mut slot, alive.as_ref()),
        ) else {
            break;
        };
        let item = match popped {
            Popped::Item(item) => item,
            Popped::FromBatch(mut head) => {
                if let Some(h) = head.handles.take() {
                    alive = Some(h);
                }
                let Some(h) = alive.as_ref().filter(|h| !h.sched.is_failed()) else {
                    ex.instances.retain(|_, i| !i.sched.is_failed());
                    drop(slot.as_mut().and_then(|s: &mut Box<dyn Slot>| s.take_boxed()));
                    continue;
                };
                ex.on_batch_message(head, &mut slot, h);
                continue;
            }
        };
        match item {
            Item::Msg(env) => {
                if env.sched.is_failed() {
                    ex.instances.retain(|_, i| !i.sched.is_failed());
                    continue;
                }
                let (graph, sched) = keep_alive(&mut alive, &env.graph, &env.sched);
                ex.on_message(env, graph, sched);
            }
            // `pop` hands out the messages of a batch one by one; should one come whole,
            // its messages are run in order.
            Item::Batch(b) => {
                for env in b.into_envelopes() {
                    if !env.sched.is_failed() {
                        let (graph, sched) = keep_alive(&mut alive, &env.graph, &env.sched);
                        ex.on_message(env, graph, sched);
                    }
                }
            }
            Item::Finalize {
                graph,
                node,
                frame,
                sched,
            } => {
                if !sched.is_failed() {
                    ex.finish_instance(&graph, node, &frame);
                }
            }
        }
    }
}

/// The graph and schedule handles a thread keeps (see `alive` in [`thread_main`]): the
/// kept ones if they are these, else clones of these.
fn keep_alive<'k>(
    alive: &'k mut Option<Handles>,
    graph: &Arc<GraphInner>,
    sched: &Arc<Sched>,
) -> (&'k Arc<GraphInner>, &'k Arc<Sched>) {
    if !alive
        .as_ref()
        .is_some_and(|h| Arc::ptr_eq(&h.graph, graph) && Arc::ptr_eq(&h.sched, sched))
    {
        *alive = None;
    }
    let h = alive.get_or_insert_with(|| Handles::new(graph, sched, None));
    (&h.graph, &h.sched)
}

fn panic_text(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

impl<S: ThreadState> Exec<'_, S> {
    fn fail(&self, sched: &Sched, op: &str, msg: &MsgId, err: StepFailure) {
        fail_schedule(self.sh, self.me, sched, op, msg, err);
    }

    /// Emit a step start. Returns `None` when the hook put the message back into the queue.
    fn start(&mut self, env: Envelope, step: StepKind, instance: &MsgId) -> Option<(Envelope, bool)> {
        let sh = self.sh;
        let Some(hook) = active_hook(sh) else {
            let traced = env.traced;
            return Some((env, traced));
        };
        let (id, op, traced) = (env.id.clone(), env.dest_op().clone(), env.traced);
        let mut cur = Some(env);
        let mut ev = StepEvent {
            thread: &self.me.info,
            op: &op,
            step,
            msg_id: &id,
            instance,
            input_traced: traced,
            trace_outputs: traced,
            access: ThreadAccess {
                thread: self.me,
                current: Some(&mut cur),
                state: Some(&mut self.state as &mut dyn ErasedState),
            },
        };
        hook.on_start(&mut ev);
        self.me.started();
        let trace = ev.trace_outputs;
        cur.map(|e| (e, trace))
    }

    /// Emit a step start or stop that has no message to put back (final steps, stops).
    #[allow(clippy::too_many_arguments)]
    fn boundary(
        &mut self,
        graph: &GraphInner,
        node: usize,
        step: StepKind,
        msg: &MsgId,
        instance: &MsgId,
        traced: bool,
        start: bool,
    ) -> bool {
        let sh = self.sh;
        let Some(hook) = active_hook(sh) else {
            return traced;
        };
        let mut ev = StepEvent {
            thread: &self.me.info,
            op: &graph.nodes[node].info,
            step,
            msg_id: msg,
            instance,
            input_traced: traced,
            trace_outputs: traced,
            access: ThreadAccess {
                thread: self.me,
                current: None,
                state: Some(&mut self.state as &mut dyn ErasedState),
            },
        };
        if start {
            hook.on_start(&mut ev);
        } else {
            hook.on_stop(&mut ev);
        }
        ev.trace_outputs
    }

    /// Run one message's step; `graph` and `sched` are the envelope's own, kept alive by
    /// the caller (so the envelope's handles can move on with its output).
    fn on_message(&mut self, env: Envelope, graph: &Arc<GraphInner>, sched: &Arc<Sched>) {
        let node = env.node as usize;
        let is_instance = matches!(env.graph.nodes[node].op, OpFn::Merge { .. } | OpFn::Stream { .. });
        let (step, instance) = if is_instance {
            let prefix = env
                .frame
                .as_ref()
                .map_or_else(|| env.id.clone(), |f| f.prefix.clone());
            (StepKind::Absorb, prefix)
        } else {
            (StepKind::Run, env.id.clone())
        };
        let Some((env, trace)) = self.start(env, step, &instance) else {
            return; // put back: the loop pops the new head
        };
        // The envelope's handles are moved, not cloned: every clone and drop of these
        // shared reference counts is a cache line bouncing between cores.
        let Envelope {
            id,
            graph: own_graph,
            payload,
            frame,
            sched: own_sched,
            ..
        } = env;
        let n = &graph.nodes[node];
        let threads = n.threads.len();
        let mut completion = None;
        let result = match &n.op {
            OpFn::Split(f) => {
                let out_frame = Arc::new(Frame::new(id.clone(), frame.clone()));
                let mut poster = Poster::new(
                    self.sh,
                    self.me,
                    graph,
                    node,
                    sched,
                    IdMode::Child(id.clone()),
                    Some(out_frame.clone()),
                    trace,
                );
                poster.batch_if_free();
                let info = StepInfo {
                    thread: &self.me.info,
                    threads,
                    msg_id: &id,
                };
                let r = run_guarded(|| f(payload, &mut self.state, &info, &mut poster));
                if let Err(e) = self.after_posting(r, &mut poster, &out_frame) {
                    self.fail(sched, &n.info.name, &id, e);
                    poster.push_reported();
                    return;
                }
                Ok(())
            }
            OpFn::Leaf(f) => {
                let owned = (own_graph, own_sched);
                self.run_leaf(
                    f,
                    Input::Boxed(payload),
                    (graph, sched, frame.map(Cow::Owned)),
                    node,
                    &id,
                    Some(owned),
                    trace,
                )
            }
            OpFn::Merge { init, absorb, .. } | OpFn::Stream { init, absorb, .. } => self
                .absorb(
                    graph,
                    node,
                    (init, absorb),
                    Input::Boxed(payload),
                    frame.as_ref(),
                    sched,
                    &id,
                    trace,
                )
                .map(|()| completion = frame.as_ref()),
        };
        if let Err(e) = result {
            self.fail(sched, &n.info.name, &id, e);
            return;
        }
        self.boundary(graph, node, step, &id, &instance, trace, false);
        // Completion is counted after the absorb step's stop, so the final step follows it.
        if let Some(frame) = completion {
            self.count_absorbed(graph, node, frame);
        }
    }

    /// A merge or stream instance absorbed one more input: run its final step if that was
    /// the last.
    fn count_absorbed(&mut self, graph: &Arc<GraphInner>, node: usize, frame: &Arc<Frame>) {
        if frame.absorbed() {
            self.finish_instance(graph, node, frame);
        }
    }

    /// Run a leaf step on `input` (message `id` of `graph` and `sched`, in `frame`): its
    /// output (with the input's handles, `owned`, when the input had handles of its own)
    /// leaves when the step ends.
    #[allow(clippy::too_many_arguments)]
    fn run_leaf(
        &mut self,
        f: &super::graph::LeafFn,
        input: Input<'_>,
        (graph, sched, frame): MsgHandles<'_>,
        node: usize,
        id: &MsgId,
        owned: Option<(Arc<GraphInner>, Arc<Sched>)>,
        trace: bool,
    ) -> Result<(), StepFailure> {
        let mut poster = Poster::new(
            self.sh,
            self.me,
            graph,
            node,
            sched,
            IdMode::Same(id.clone()),
            None,
            trace,
        );
        poster.frame = frame;
        poster.owned = owned;
        poster.spare = Some(&mut self.spare);
        poster.batch_if_free();
        let info = StepInfo {
            thread: &self.me.info,
            threads: graph.nodes[node].threads.len(),
            msg_id: id,
        };
        // Routing (user code) and the send hook run in the output's post: guarded too.
        let state = &mut self.state;
        let r = run_guarded(|| f(input, state, &info, &mut poster));
        poster.end_step(r, id)
    }

    /// Run a leaf, or a merge's absorb step, on a message taken from a batch (its payload
    /// in `slot`); `handles` are its batch's, kept by the caller.
    fn on_batch_message(&mut self, head: BatchHead, slot: &mut Option<Box<dyn Slot>>, handles: &Handles) {
        let node = head.node;
        let (graph, sched, frame) = (&handles.graph, &handles.sched, handles.frame.as_ref());
        let n = &graph.nodes[node];
        // Looked up once: a streaming hook hears of the step's start and stop (as
        // `on_message` tells an active hook, which may hold them).
        let hook = active_hook(self.sh);
        let free = hook.is_none_or(|h| h.streaming());
        let id = head.id;
        let (s, true) = (slot.as_deref_mut(), free) else {
            // A hook that may hold messages became active since the message was taken: it
            // goes the usual way, boxed, through the step hooks.
            if let Some(payload) = slot.as_mut().and_then(|s| s.take_boxed()) {
                let env = Envelope {
                    id,
                    graph: graph.clone(),
                    payload,
                    frame: frame.cloned(),
                    sched: sched.clone(),
                    node: head.node as u32,
                    from: head.from,
                    traced: false,
                };
                self.on_message(env, graph, sched);
            }
            return;
        };
        let Some(s) = s else {
            return;
        };
        let step = match n.op {
            OpFn::Merge { .. } | OpFn::Stream { .. } => StepKind::Absorb,
            _ => StepKind::Run,
        };
        let instance = hook.map(|_| match (step, &frame) {
            (StepKind::Absorb, Some(f)) => f.prefix.clone(),
            _ => id.clone(),
        });
        let streamed = || StreamedStep {
            thread: &self.me.info,
            op: &n.info,
            step,
            msg_id: &id,
            instance: instance.as_ref().unwrap_or(&id),
        };
        if let Some(h) = hook {
            h.streamed_step(&streamed(), false);
            // The start is recorded: receive positions stop counting the message.
            self.me.started();
        }
        let mut completion = None;
        let r = match &n.op {
            OpFn::Leaf(f) => {
                let handles = (graph, sched, frame.map(Cow::Borrowed));
                self.run_leaf(f, Input::Slot(s), handles, node, &id, None, false)
            }
            OpFn::Merge { init, absorb, .. } | OpFn::Stream { init, absorb, .. } => {
                let input = Input::Slot(s);
                self.absorb(graph, node, (init, absorb), input, frame, sched, &id, false)
                    .map(|()| completion = frame)
            }
            OpFn::Split(_) => Err(StepFailure::Rule(
                "internal error: a split was given a message from a batch".to_owned(),
            )),
        };
        if let Err(e) = r {
            self.fail(sched, &n.info.name, &id, e);
            return;
        }
        if let Some(h) = hook {
            h.streamed_step(&streamed(), true);
        }
        // Completion is counted after the absorb step's stop, so the final step follows it.
        if let Some(frame) = completion {
            self.count_absorbed(graph, node, frame);
        }
    }

    /// A merge or stream absorbs one input into its instance's accumulator.
    #[allow(clippy::too_many_arguments)]
    fn absorb(
        &mut self,
        graph: &Arc<GraphInner>,
        node: usize,
        (init, absorb): (&InitFn, &AbsorbFn),
        payload: Input<'_>,
        frame: Option<&Arc<Frame>>,
        sched: &Arc<Sched>,
        id: &MsgId,
        trace: bool,
    ) -> Result<(), StepFailure> {
        let frame = frame.ok_or_else(|| {
            StepFailure::Rule("a merge received a message that no split produced".to_owned())
        })?;
        let is_stream = matches!(graph.nodes[node].op, OpFn::Stream { .. });
        let inst = match self.instances.entry(Arc::as_ptr(frame) as usize) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => {
                // The instance's first input here: its other inputs must come here too.
                frame
                    .register_merge(&self.me.info, node)
                    .map_err(StepFailure::Rule)?;
                v.insert(Instance {
                    acc: Some(init()),
                    _frame: frame.clone(),
                    sched: sched.clone(),
                    traced: false,
                    out_frame: is_stream
                        .then(|| Arc::new(Frame::new(frame.prefix.clone(), frame.parent.clone()))),
                    posted: 0,
                })
            }
        };
        inst.traced |= trace;
        let mut acc = inst
            .acc
            .take()
            .ok_or_else(|| StepFailure::Rule("internal error: accumulator missing".to_owned()))?;
        let (out_frame, posted) = (inst.out_frame.clone(), inst.posted);
        let mut poster = Poster::new(
            self.sh,
            self.me,
            graph,
            node,
            sched,
            IdMode::Child(frame.prefix.clone()),
            out_frame,
            trace,
        );
        poster.count = posted;
        let info = StepInfo {
            thread: &self.me.info,
            threads: graph.nodes[node].threads.len(),
            msg_id: id,
        };
        let r = run_guarded(|| absorb(&mut *acc, payload, &mut self.state, &info, &mut poster));
        if let Some(inst) = self.instances.get_mut(&(Arc::as_ptr(frame) as usize)) {
            inst.acc = Some(acc);
            inst.posted = poster.count;
        }
        poster.end_step(r, id)
    }

    /// The final step of a merge or stream instance whose inputs have all been absorbed.
    fn finish_instance(&mut self, graph: &Arc<GraphInner>, node: usize, frame: &Arc<Frame>) {
        let Some(inst) = self.instances.remove(&(Arc::as_ptr(frame) as usize)) else {
            return;
        };
        let n = &graph.nodes[node];
        let out_id = frame.prefix.clone();
        if self.sh.hook.is_some() {
            self.me.set_current(Some(Running {
                op: n.info.id,
                msg: out_id.clone(),
                step: StepKind::Final,
            }));
        }
        let trace = self.boundary(graph, node, StepKind::Final, &out_id, &out_id, inst.traced, true);
        let info = StepInfo {
            thread: &self.me.info,
            threads: n.threads.len(),
            msg_id: &out_id,
        };
        let Some(acc) = inst.acc else { return };
        let r = match &n.op {
            OpFn::Merge { finish, .. } => {
                run_guarded(|| finish(acc, &mut self.state, &info)).and_then(|out| {
                    let mut poster = Poster::new(
                        self.sh,
                        self.me,
                        graph,
                        node,
                        &inst.sched,
                        IdMode::Same(out_id.clone()),
                        frame.parent.clone(),
                        trace,
                    );
                    poster.post(out);
                    poster.end_step(Ok(()), &out_id)
                })
            }
            OpFn::Stream { finish, .. } => {
                let out_frame = inst
                    .out_frame
                    .clone()
                    .unwrap_or_else(|| Arc::new(Frame::new(out_id.clone(), frame.parent.clone())));
                let mut poster = Poster::new(
                    self.sh,
                    self.me,
                    graph,
                    node,
                    &inst.sched,
                    IdMode::Child(out_id.clone()),
                    Some(out_frame.clone()),
                    trace,
                );
                poster.count = inst.posted;
                let r = run_guarded(|| finish(acc, &mut self.state, &info, &mut poster));
                if let Err(e) = self.after_posting(r, &mut poster, &out_frame) {
                    self.fail(&inst.sched, &n.info.name, &out_id, e);
                    poster.push_reported();
                    return;
                }
                Ok(())
            }
            OpFn::Split(_) | OpFn::Leaf(..) => Ok(()),
        };
        if let Err(e) = r {
            self.fail(&inst.sched, &n.info.name, &out_id, e);
            return;
        }
        self.boundary(graph, node, StepKind::Final, &out_id, &out_id, trace, false);
    }

    /// After a split (or a stream's final step): check the outputs and tell the matching
    /// merge how many to expect.
    fn after_posting(
        &self,
        r: Result<(), StepFailure>,
        poster: &mut Poster<'_>,
        out_frame: &Arc<Frame>,
    ) -> Result<(), StepFailure> {
        r?;
        if let Some(e) = &poster.error {
            return Err(StepFailure::Rule(e.clone()));
        }
        // Routing and hooks run user code.
        run_guarded(|| {
            poster.flush();
            poster.error.take().map_or(Ok(()), Err)
        })?;
        if poster.count == 0 {
            return Err(StepFailure::Rule(
                "posted no output; a split or stream must post at least one".to_owned(),
            ));
        }
        if let Some((thread, node)) = out_frame.set_expected(poster.count) {
            if let Some(t) = self.sh.thread(thread) {
                t.push_item(Item::Finalize {
                    graph: poster.graph.clone(),
                    node,
                    frame: out_frame.clone(),
                    sched: poster.sched.clone(),
                });
            }
        }
        Ok(())
    }
}

enum StepFailure {
    Panic(String),
    Rule(String),
    /// The schedule call was failed already, where the failure was found.
    Reported,
}

fn run_guarded<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, StepFailure> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(StepFailure::Rule(e)),
        Err(p) => Err(StepFailure::Panic(panic_text(&*p))),
    }
}

/// How output ids are formed.
enum IdMode {
    /// Leaf and merge: one output with this id.
    Same(MsgId),
    /// Split and stream: `base.k` for the k-th output.
    Child(MsgId),
}

/// Posts a step's outputs: assigns ids, routes, calls the send hook, enqueues.
struct Poster<'a> {
    sh: &'a Shared,
    me: &'a ThreadShared,
    graph: &'a Arc<GraphInner>,
    node: usize,
    sched: &'a Arc<Sched>,
    /// Handles of `graph` and `sched` that the first output may take instead of cloning
    /// (a single-output step handing its input's handles on).
    owned: Option<(Arc<GraphInner>, Arc<Sched>)>,
    ids: IdMode,
    /// The outputs' frame (a leaf's input's, which it may only borrow when the input came
    /// from a batch).
    frame: Option<Cow<'a, Arc<Frame>>>,
    traced: bool,
    count: u64,
    error: Option<String>,
    /// Whether outputs are gathered in batches (see [`PostSink::batch`]).
    batching: bool,
    /// The batches being gathered, by destination thread...
    batches: Vec<Option<Box<Batch>>>,
    /// ...or, for messages that travel one by one, their envelopes (and the session their
    /// send was reported in, see [`Batch::session`]), by destination thread. Either way a
    /// step's outputs leave when the step ends, or when 64 wait for one thread: delivery
    /// is the same whether or not a debugger is attached or may hold.
    singles: Vec<Vec<(Envelope, Option<u64>)>>,
    /// Where an emptied batch is kept for reuse (a leaf's: its thread's).
    spare: Option<&'a mut Option<Box<Batch>>>,
}

impl<'a> Poster<'a> {
    // Inlined: built in place, its id is not copied again (a copy just after the id's
    // fields were written waited for them: 5% of the trivial farm's samples).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn new(
        sh: &'a Shared,
        me: &'a ThreadShared,
        graph: &'a Arc<GraphInner>,
        node: usize,
        sched: &'a Arc<Sched>,
        ids: IdMode,
        frame: Option<Arc<Frame>>,
        traced: bool,
    ) -> Self {
        Self {
            sh,
            me,
            graph,
            node,
            sched,
            owned: None,
            ids,
            frame: frame.map(Cow::Owned),
            traced,
            count: 0,
            error: None,
            batching: false,
            batches: Vec::new(),
            singles: Vec::new(),
            spare: None,
        }
    }
}

impl<'a> Poster<'a> {
    /// Gather the outputs in batches if no hook may hold them (none is active, or it is
    /// streaming), the outputs are not traced and go to a leaf or a merge (the operations
    /// that take messages from a batch).
    fn batch_if_free(&mut self) {
        let free = !holding(self.sh);
        let to = self
            .graph
            .nodes
            .get(self.node + 1)
            .is_some_and(|n| matches!(n.op, OpFn::Leaf(_) | OpFn::Merge { .. }));
        self.batching = free && to && !self.traced;
    }

    /// The next output's id.
    fn next_id(&mut self) -> MsgId {
        let id = match &self.ids {
            IdMode::Same(id) => id.clone(),
            IdMode::Child(base) => base.child(self.count),
        };
        self.count += 1;
        id
    }

    /// The next output's id, graph, frame and schedule, for a message of its own: a
    /// single-output step hands its frame and (when it has them) its input's handles over;
    /// a split shares its frame among its outputs and clones the handles.
    fn next_output(&mut self) -> (MsgId, Arc<GraphInner>, Option<Arc<Frame>>, Arc<Sched>) {
        let frame = match self.ids {
            IdMode::Same(_) => self.frame.take().map(Cow::into_owned),
            IdMode::Child(_) => self.frame.as_deref().cloned(),
        };
        let id = self.next_id();
        let (graph, sched) = self
            .owned
            .take()
            .unwrap_or_else(|| (self.graph.clone(), self.sched.clone()));
        (id, graph, frame, sched)
    }

    /// After the step failed (and its call was marked failed): push the messages whose
    /// sends a debugger heard of (their receivers drop them, as they drop anything of a
    /// failed call), drop the others.
    fn push_reported(&mut self) {
        let _ = run_guarded(|| {
            for t in 0..self.batches.len() {
                if self.batches[t].as_ref().is_some_and(|b| b.session.is_some()) {
                    self.flush_one(t);
                }
            }
            for t in 0..self.singles.len() {
                self.singles[t].retain(|(_, session)| session.is_some());
                self.push_singles(t);
            }
            Ok(())
        });
        self.batches.clear();
        self.singles.clear();
    }

    /// The step on message `msg` returned `r`: its outputs leave now. Guarded like the
    /// step itself: pushing a batch gathered before a debugger attached routes its messages
    /// again (user code) through the hooks, and a panic there must fail the schedule call,
    /// not unwind the thread. A step that failed fails its call here, then pushes the
    /// outputs a debugger heard of (see [`Self::push_reported`]) and drops the others.
    fn end_step(&mut self, r: Result<(), StepFailure>, msg: &MsgId) -> Result<(), StepFailure> {
        let r = r
            .and_then(|()| self.error.take().map_or(Ok(()), |e| Err(StepFailure::Rule(e))))
            .and_then(|()| {
                run_guarded(|| {
                    self.flush();
                    self.error.take().map_or(Ok(()), Err)
                })
            });
        match r {
            Ok(()) => Ok(()),
            Err(e) => {
                let op = &self.graph.nodes[self.node].info.name;
                fail_schedule(self.sh, self.me, self.sched, op, msg, e);
                self.push_reported();
                Err(StepFailure::Reported)
            }
        }
    }

    /// Push everything gathered so far.
    fn flush(&mut self) {
        for t in 0..self.batches.len() {
            self.flush_one(t);
        }
        for t in 0..self.singles.len() {
            self.push_singles(t);
        }
    }

    /// Push the batch gathered for thread `t` of the next operation.
    fn flush_one(&mut self, t: usize) {
        if let Some(batch) = self.batches.get_mut(t).and_then(Option::take) {
            let emptied = send_batch(self.sh, self.me, batch, t);
            if let (Some(spare), Some(b)) = (self.spare.as_deref_mut(), emptied) {
                *spare = Some(b);
            }
        }
    }

    /// Push the single messages gathered for thread `t` of the next operation, in order.
    /// One whose send the active hook's session did not hear of (posted before a debugger
    /// attached) goes through the send hook first, as if posted now.
    fn push_singles(&mut self, t: usize) {
        let Some(envs) = self
            .singles
            .get_mut(t)
            .filter(|e| !e.is_empty())
            .map(std::mem::take)
        else {
            return;
        };
        let Some(dest) = self.graph.nodes.get(self.node + 1).and_then(|n| n.threads.get(t)) else {
            return;
        };
        let now = active_hook(self.sh).map(|h| h.session());
        for (env, session) in envs {
            if now.is_none() || session == now {
                dest.push(env, self.sh.hook.as_deref());
                continue;
            }
            let out = Output {
                graph: env.graph,
                dest: Some(self.node + 1),
                id: env.id,
                payload: env.payload,
                frame: env.frame,
                sched: env.sched,
                traced: env.traced,
            };
            if let Err(e) = deliver(self.sh, Some((self.node, self.me)), self.graph, out) {
                self.error.get_or_insert(e);
            }
        }
    }
}

impl PostSink for Poster<'_> {
    fn batch(
        &mut self,
        msg: &dyn Any,
        new: fn() -> Box<dyn PayloadQueue>,
        type_name: fn() -> &'static str,
    ) -> Option<&mut dyn PayloadQueue> {
        if !self.batching || self.error.is_some() {
            return None;
        }
        let hook = active_hook(self.sh);
        if hook.is_some_and(|h| !h.streaming()) {
            // A hook that may hold messages became active during the step: what was
            // gathered goes out now, in order, and the rest one by one, through the hooks.
            self.batching = false;
            self.flush();
            return None;
        }
        let next = self.node + 1;
        let n = self.graph.nodes.get(next)?;
        let id = self.next_id();
        let t = match route_to(n, msg, &id) {
            Ok(t) => t,
            Err(e) => {
                self.error = Some(e);
                return None;
            }
        };
        let from = Sender::new(self.node, self.me.info.index);
        // A streaming hook hears of the send now (the receive when the batch is enqueued);
        // the batch remembers in which of its sessions.
        let session = match (hook, n.threads.get(t)) {
            (Some(hook), Some(to_thread)) => hook.streamed_send(&StreamedSend {
                thread: &self.me.info,
                from_op: &self.graph.nodes[self.node].info,
                to_op: &n.info,
                to_thread: &to_thread.info,
                msg_id: &id,
                type_name: type_name(),
            }),
            _ => None,
        };
        if self.batches.len() < n.threads.len() {
            self.batches.resize_with(n.threads.len(), || None);
        }
        if self.batches[t]
            .as_ref()
            .is_some_and(|b| b.len() >= BATCH_MAX || b.session != session)
        {
            self.flush_one(t);
        }
        let handles = (self.graph, self.sched, self.frame.as_deref());
        let full = matches!(self.ids, IdMode::Child(_));
        let spare = self.spare.as_deref_mut();
        let b = self.batches[t]
            .get_or_insert_with(|| new_batch(next, handles, (new, msg.type_id()), (session, full), spare));
        b.msgs.push_back((id, from));
        Some(&mut *b.payloads)
    }

    fn fail(&mut self, error: String) {
        self.error.get_or_insert(error);
    }

    fn post(&mut self, payload: Box<dyn Payload>) {
        if self.error.is_some() {
            return;
        }
        let (id, graph, frame, sched) = self.next_output();
        let next = self.node + 1;
        let dest = (next < self.graph.nodes.len()).then_some(next);
        let from = Some((self.node, self.me));
        let out = Output {
            graph,
            dest,
            id,
            payload,
            frame,
            sched,
            traced: self.traced,
        };
        match prepare(self.sh, from, self.graph, out) {
            Ok(Some((t, env, session))) => {
                if self.singles.len() <= t {
                    self.singles.resize_with(t + 1, Vec::new);
                }
                self.singles[t].push((env, session));
                if self.singles[t].len() >= BATCH_MAX {
                    self.push_singles(t);
                }
            }
            Ok(None) => {}
            Err(e) => self.error = Some(e),
        }
    }
}

/// The thread of node `n` that message `id` goes to.
fn route_to(n: &Node, msg: &dyn Any, id: &MsgId) -> Result<usize, String> {
    n.route
        .pick(msg, n.threads.len())
        .map_err(|e| format!("cannot route message {id} to `{}`: {e}", n.info.name))
}

/// A message on its way out: its handles (`graph` is the sender's graph, moved in, not
/// cloned), destination operation (`None`: back to the schedule caller), id and content.
pub(crate) struct Output {
    pub(crate) graph: Arc<GraphInner>,
    pub(crate) dest: Option<usize>,
    pub(crate) id: MsgId,
    pub(crate) payload: Box<dyn Payload>,
    pub(crate) frame: Option<Arc<Frame>>,
    pub(crate) sched: Arc<Sched>,
    pub(crate) traced: bool,
}

/// Route a message to operation `out.dest` of `g` and pass it through the send hook (which
/// may hold it, or replace it: it is routed again). Returns the destination thread, the
/// envelope to enqueue there and the hook's session that heard of the send (`None`: no
/// hook was active), or `None` when the message went back to the schedule caller.
fn prepare(
    sh: &Shared,
    from: Option<(usize, &ThreadShared)>,
    g: &GraphInner,
    out: Output,
) -> Result<Option<(usize, Envelope, Option<u64>)>, String> {
    let Output {
        graph,
        dest,
        id,
        mut payload,
        frame,
        sched,
        mut traced,
    } = out;
    debug_assert!(std::ptr::eq(g, &*graph));
    let dest_node = dest.map(|d| &g.nodes[d]);
    let route = |p: &dyn Payload| dest_node.map(|n| route_to(n, p.as_any(), &id)).transpose();
    let mut to = route(&*payload)?;
    let hook = active_hook(sh);
    if let Some(hook) = hook {
        let mut ev = SendEvent {
            thread: from.map(|(_, t)| &t.info),
            from_op: from.map(|(n, _)| &g.nodes[n].info),
            to_op: dest_node.map(|n| &n.info),
            to_thread: dest_node.zip(to).map(|(n, t)| &n.threads[t].info),
            msg_id: &id,
            traced,
            payload: &mut payload,
            replaced: false,
            access: from.map(|(_, t)| ThreadAccess {
                thread: t,
                current: None,
                state: None,
            }),
        };
        hook.on_send(&mut ev);
        traced = ev.traced;
        let replaced = ev.replaced;
        if replaced {
            to = route(&*payload)?;
        }
    }
    match (dest, to) {
        (Some(node), Some(t)) => Ok(Some((
            t,
            Envelope {
                id,
                graph,
                node: node as u32,
                payload,
                frame,
                sched,
                from: from.map_or(Sender::NONE, |(n, t)| Sender::new(n, t.info.index)),
                traced,
            },
            hook.map(|h| h.session()),
        ))),
        _ => {
            sched.complete(payload);
            Ok(None)
        }
    }
}

/// [`prepare`] a message and enqueue it at once.
pub(crate) fn deliver(
    sh: &Shared,
    from: Option<(usize, &ThreadShared)>,
    g: &GraphInner,
    out: Output,
) -> Result<(), String> {
    let dest = out.dest;
    if let Some((t, env, _)) = prepare(sh, from, g, out)? {
        if let Some(to) = dest.and_then(|d| g.nodes[d].threads.get(t)) {
            to.push(env, sh.hook.as_deref());
        }
    }
    Ok(())
}
