//! The step loop each runtime thread runs: take a message (or a batch's next one), report
//! the step's start to the hook (which may hold it or put the message back), run the
//! operation guarded against panics, report its stop. A step's outputs are in [`super::post`],
//! merge and stream instances in [`super::merge`].

use super::error::ScheduleError;
use super::graph::{GraphInner, Input, OpFn};
use super::hook::{Hook, StepEvent, StepKind, StreamedStep, ThreadAccess};
use super::ids::MsgId;
use super::merge::{AddrHasher, Instance};
use super::payload::ErasedState;
use super::payload::Slot;
use super::post::{IdMode, Poster};
use super::thread::{Batch, BatchHead, Envelope, Frame, Handles, Item, Popped, Sched, ThreadShared};
use super::{Shared, StepInfo, ThreadState};
use std::any::Any;
use std::borrow::Cow;
use std::collections::HashMap;
use std::collections::VecDeque;
use std::hash::BuildHasherDefault;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// The step being run: operation `node` of `graph`, for schedule call `sched`, on message
/// `id`, and whether that message (or, for a final step, the instance) is traced. What
/// the step functions and their outputs' [`Poster`] share.
#[derive(Clone, Copy)]
pub(crate) struct At<'h> {
    pub(crate) graph: &'h Arc<GraphInner>,
    pub(crate) sched: &'h Arc<Sched>,
    pub(crate) node: usize,
    pub(crate) id: &'h MsgId,
    pub(crate) trace: bool,
}

/// Per-thread executor state.
pub(crate) struct Exec<'a, S> {
    pub(crate) sh: &'a Shared,
    pub(crate) me: &'a ThreadShared,
    pub(crate) state: S,
    pub(crate) instances: HashMap<usize, Instance, BuildHasherDefault<AddrHasher>>,
    /// A batch emptied when the outputs it carried joined one waiting at their
    /// destination, kept for the next leaf output (no allocation per message).
    pub(crate) spare: Option<Box<Batch>>,
    /// The accumulator the last absorb step left, as JSON, for its stop (see
    /// [`Hook::instance_states`]).
    pub(crate) shown: Option<serde_json::Value>,
}

/// The hook, when it is active.
pub(crate) fn active_hook(sh: &Shared) -> Option<&dyn Hook> {
    let hook = sh.hook.as_deref()?;
    let on = match &sh.hook_on {
        Some(flag) => flag.load(std::sync::atomic::Ordering::Relaxed),
        None => hook.active(),
    };
    on.then_some(hook)
}

/// Whether an active hook may hold messages now: they then travel one by one (see
/// [`Hook::streaming`]).
pub(crate) fn holding(sh: &Shared) -> bool {
    active_hook(sh).is_some_and(|h| !h.streaming())
}

/// Fail the schedule call `sched` because of a step of `op` on `me` with message `msg`.
pub(crate) fn fail_schedule(
    sh: &Shared,
    me: &ThreadShared,
    sched: &Sched,
    op: &str,
    msg: &MsgId,
    err: StepFailure,
) {
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
    super::stuck::enter_thread(sh.id, me.info.global);
    let mut ex = Exec {
        sh,
        me,
        state: S::default(),
        instances: HashMap::default(),
        spare: None,
        shown: None,
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
            ex.drop_stale_spare();
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
        ex.run_item(item, &mut alive);
    }
}

impl<S: ThreadState> Exec<'_, S> {
    /// Run an item taken whole from the queue; `alive`: see [`thread_main`].
    #[inline]
    fn run_item(&mut self, item: Item, alive: &mut Option<Handles>) {
        match item {
            Item::Msg(env) => {
                if env.sched.is_failed() {
                    self.instances.retain(|_, i| !i.sched.is_failed());
                    return;
                }
                let (graph, sched) = keep_alive(alive, &env.graph, &env.sched);
                self.on_message(env, graph, sched);
            }
            // `pop` hands out the messages of a batch one by one; should one come whole,
            // its messages are run in order.
            Item::Batch(b) => {
                for env in b.into_envelopes() {
                    if !env.sched.is_failed() {
                        let (graph, sched) = keep_alive(alive, &env.graph, &env.sched);
                        self.on_message(env, graph, sched);
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
                    self.finish_instance(&graph, node, &frame);
                }
            }
        }
    }

    /// The spare batch keeps its last handles (reused as they are for the next output of
    /// the same call): dropped, when the thread runs out of work, once that call is over.
    fn drop_stale_spare(&mut self) {
        if self
            .spare
            .as_ref()
            .is_some_and(|b| Arc::strong_count(&b.handles.sched) == 1)
        {
            self.spare = None;
        }
    }
}

/// The step a message starts, and the instance it belongs to: a merge's or stream's
/// (named by its split's input) for an absorb step, else its own.
fn step_and_instance(env: &Envelope) -> (StepKind, MsgId) {
    match env.graph.nodes[env.node as usize].op {
        OpFn::Merge { .. } | OpFn::Stream { .. } => {
            let prefix = env
                .frame
                .as_ref()
                .map_or_else(|| env.id.clone(), |f| f.prefix.clone());
            (StepKind::Absorb, prefix)
        }
        _ => (StepKind::Run, env.id.clone()),
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

pub(crate) fn panic_text(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

impl<S: ThreadState> Exec<'_, S> {
    pub(crate) fn fail(&self, sched: &Sched, op: &str, msg: &MsgId, err: StepFailure) {
        fail_schedule(self.sh, self.me, sched, op, msg, err);
    }

    /// Emit a step start. Returns `None` when the hook put the message back into the queue.
    pub(crate) fn start(
        &mut self,
        env: Envelope,
        step: StepKind,
        instance: &MsgId,
    ) -> Option<(Envelope, bool)> {
        let sh = self.sh;
        let Some(hook) = active_hook(sh) else {
            let traced = env.traced;
            return Some((env, traced));
        };
        let (id, op, traced) = (env.id.clone(), env.dest_op().clone(), env.traced);
        let from = env.from.global(&env.graph);
        let mut cur = Some(env);
        let mut ev = StepEvent {
            thread: &self.me.info,
            op: &op,
            step,
            msg_id: &id,
            instance,
            from,
            input_traced: traced,
            trace_outputs: traced,
            access: ThreadAccess {
                thread: self.me,
                current: Some(&mut cur),
                state: Some(&mut self.state as &mut dyn ErasedState),
                state_set: false,
                instance: None,
            },
        };
        hook.on_start(&mut ev);
        self.me.started();
        let trace = ev.trace_outputs;
        cur.map(|e| (e, trace))
    }

    /// Emit a step start or stop that has no message to put back (final steps, stops).
    pub(crate) fn boundary(&mut self, at: At<'_>, step: StepKind, instance: &MsgId, start: bool) -> bool {
        let At {
            graph,
            node,
            id: msg,
            trace: traced,
            ..
        } = at;
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
            from: None,
            input_traced: traced,
            trace_outputs: traced,
            access: ThreadAccess {
                thread: self.me,
                current: None,
                state: Some(&mut self.state as &mut dyn ErasedState),
                state_set: false,
                instance: match (start, step) {
                    (false, StepKind::Absorb) => self.shown.take(),
                    _ => None,
                },
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
        let (step, instance) = step_and_instance(&env);
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
        let at = At {
            graph,
            sched,
            node,
            id: &id,
            trace,
        };
        let mut completion = None;
        let result = match &n.op {
            OpFn::Split(f) => {
                if !self.run_split(f, payload, frame, at) {
                    return;
                }
                Ok(())
            }
            OpFn::Leaf(f) => {
                let owned = (own_graph, own_sched);
                self.run_leaf(f, Input::Boxed(payload), frame.map(Cow::Owned), at, Some(owned))
            }
            OpFn::Merge {
                init, absorb, show, ..
            } => self
                .absorb(
                    at,
                    (init, absorb, show.as_deref()),
                    Input::Boxed(payload),
                    frame.as_ref(),
                )
                .map(|()| completion = frame.as_ref()),
            OpFn::Stream { init, absorb, .. } => self
                .absorb(at, (init, absorb, None), Input::Boxed(payload), frame.as_ref())
                .map(|()| completion = frame.as_ref()),
        };
        if let Err(e) = result {
            self.fail(sched, &n.info.name, &id, e);
            return;
        }
        self.boundary(at, step, &instance, false);
        // Completion is counted after the absorb step's stop, so the final step follows it.
        if let Some(frame) = completion {
            self.count_absorbed(graph, node, frame);
        }
    }

    /// Run a split step. `false`: it failed, and the failure is reported (with the outputs
    /// the hook already heard of, which still go: see `Poster::push_reported`).
    fn run_split(
        &mut self,
        f: &super::graph::SplitFn,
        payload: Box<dyn super::payload::Payload>,
        frame: Option<Arc<Frame>>,
        at: At<'_>,
    ) -> bool {
        let At {
            graph,
            sched,
            node,
            id,
            ..
        } = at;
        let out_frame = Arc::new(Frame::new(id.clone(), frame));
        let ids = IdMode::Child(id.clone());
        let mut poster = Poster::new((self.sh, self.me), at, ids, Some(out_frame.clone()));
        poster.batch_if_free();
        let info = StepInfo {
            thread: &self.me.info,
            threads: graph.nodes[node].threads.len(),
            msg_id: id,
        };
        let r = run_guarded(|| f(payload, &mut self.state, &info, &mut poster));
        if let Err(e) = self.after_posting(r, &mut poster, &out_frame) {
            self.fail(sched, &graph.nodes[node].info.name, id, e);
            poster.push_reported();
            return false;
        }
        true
    }

    /// Run a leaf step on `input` (in `frame`, borrowed when the message came from a
    /// batch): its output (with the input's handles, `owned`, when the input had handles of
    /// its own) leaves when the step ends.
    fn run_leaf(
        &mut self,
        f: &super::graph::LeafFn,
        input: Input<'_>,
        frame: Option<Cow<'_, Arc<Frame>>>,
        at: At<'_>,
        owned: Option<(Arc<GraphInner>, Arc<Sched>)>,
    ) -> Result<(), StepFailure> {
        let At { graph, node, id, .. } = at;
        let mut poster = Poster::new((self.sh, self.me), at, IdMode::Same(id.clone()), None);
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

    /// A message taken from a batch when a hook that may hold messages became active since:
    /// it goes the usual way, boxed, through the step hooks.
    fn on_boxed_batch_message(
        &mut self,
        head: BatchHead,
        slot: &mut Option<Box<dyn Slot>>,
        handles: &Handles,
    ) {
        let Some(payload) = slot.as_mut().and_then(|s| s.take_boxed()) else {
            return;
        };
        let env = Envelope {
            id: head.id,
            graph: handles.graph.clone(),
            payload,
            frame: handles.frame.clone(),
            sched: handles.sched.clone(),
            node: head.node as u32,
            from: head.from,
            traced: false,
        };
        self.on_message(env, &handles.graph, &handles.sched);
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
        if !free {
            return self.on_boxed_batch_message(head, slot, handles);
        }
        let id = head.id;
        let Some(s) = slot.as_deref_mut() else {
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
        let from = hook.and_then(|_| head.from.global(graph));
        let streamed = || StreamedStep {
            thread: &self.me.info,
            op: &n.info,
            step,
            msg_id: &id,
            instance: instance.as_ref().unwrap_or(&id),
            from,
        };
        if let Some(h) = hook {
            h.streamed_step(&streamed(), false);
            // The start is recorded: receive positions stop counting the message.
            self.me.started();
        }
        let at = At {
            graph,
            sched,
            node,
            id: &id,
            trace: false,
        };
        let mut completion = None;
        let r = match &n.op {
            OpFn::Leaf(f) => self.run_leaf(f, Input::Slot(s), frame.map(Cow::Borrowed), at, None),
            OpFn::Merge { init, absorb, .. } | OpFn::Stream { init, absorb, .. } => self
                .absorb(at, (init, absorb, None), Input::Slot(s), frame)
                .map(|()| completion = frame),
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
}

pub(crate) enum StepFailure {
    Panic(String),
    Rule(String),
    /// The schedule call was failed already, where the failure was found.
    Reported,
}

pub(crate) fn run_guarded<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, StepFailure> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(StepFailure::Rule(e)),
        Err(p) => Err(StepFailure::Panic(panic_text(&*p))),
    }
}
