//! A step's outputs: ids, routing, the send hook, and delivery when the step ends —
//! gathered per destination thread in batches (no hook that may hold) or one by one
//! through the send hook (one that may), pushed the same way in every mode.

use super::exec::At;
use super::exec::{active_hook, fail_schedule, holding, run_guarded, StepFailure};
use super::graph::{GraphInner, Node, OpFn, PostSink};
use super::hook::{SendEvent, StreamedSend, ThreadAccess};
use super::ids::MsgId;
use super::payload::{Payload, PayloadQueue};
use super::thread::{Batch, Envelope, Frame, Handles, Sched, Sender, ThreadShared, BATCH_MAX};
use super::Shared;
use std::any::Any;
use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::Arc;

/// A batch to node `node` (`spare`, an emptied one, if its payloads are of `item`'s type);
/// `session`: see [`Batch::session`]. `full`: with room for a full batch (a split's; a
/// single-output step's holds one message).
pub(crate) fn new_batch(
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

/// Push a batch `me` gathered to thread `t` of its destination. Should a hook be active
/// whose current session did not hear of its sends (gathered before it attached), each is
/// delivered on its own, through the send hook, as if posted now (a failure then fails
/// that message's schedule call). Returns the batch emptied, when its messages joined one
/// waiting at the destination (see [`ThreadShared::push_batch`]).
pub(crate) fn send_batch(sh: &Shared, me: &ThreadShared, batch: Box<Batch>, t: usize) -> Option<Box<Batch>> {
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

/// How output ids are formed.
pub(crate) enum IdMode {
    /// Leaf and merge: one output with this id.
    Same(MsgId),
    /// Split and stream: `base.k` for the k-th output.
    Child(MsgId),
}

/// Posts a step's outputs: assigns ids, routes, calls the send hook, enqueues.
pub(crate) struct Poster<'a> {
    pub(crate) sh: &'a Shared,
    pub(crate) me: &'a ThreadShared,
    pub(crate) graph: &'a Arc<GraphInner>,
    pub(crate) node: usize,
    pub(crate) sched: &'a Arc<Sched>,
    /// Handles of `graph` and `sched` that the first output may take instead of cloning
    /// (a single-output step handing its input's handles on).
    pub(crate) owned: Option<(Arc<GraphInner>, Arc<Sched>)>,
    pub(crate) ids: IdMode,
    /// The outputs' frame (a leaf's input's, which it may only borrow when the input came
    /// from a batch).
    pub(crate) frame: Option<Cow<'a, Arc<Frame>>>,
    pub(crate) traced: bool,
    pub(crate) count: u64,
    pub(crate) error: Option<String>,
    /// Whether outputs are gathered in batches (see [`PostSink::batch`]).
    pub(crate) batching: bool,
    /// The batches being gathered, by destination thread...
    pub(crate) batches: Vec<Option<Box<Batch>>>,
    /// ...or, for messages that travel one by one, their envelopes (and the session their
    /// send was reported in, see [`Batch::session`]), by destination thread. Either way a
    /// step's outputs leave when the step ends, or when 64 wait for one thread: delivery
    /// is the same whether or not a debugger is attached or may hold.
    pub(crate) singles: Vec<Vec<(Envelope, Option<u64>)>>,
    /// Where an emptied batch is kept for reuse (a leaf's: its thread's).
    pub(crate) spare: Option<&'a mut Option<Box<Batch>>>,
}

impl<'a> Poster<'a> {
    // Inlined: built in place, so its id is not copied again (a copy made just after the
    // id's fields were written has to wait for those stores to land).
    #[inline(always)]
    pub(crate) fn new(
        (sh, me): (&'a Shared, &'a ThreadShared),
        at: At<'a>,
        ids: IdMode,
        frame: Option<Arc<Frame>>,
    ) -> Self {
        Self {
            sh,
            me,
            graph: at.graph,
            node: at.node,
            sched: at.sched,
            owned: None,
            ids,
            frame: frame.map(Cow::Owned),
            traced: at.trace,
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
    pub(crate) fn batch_if_free(&mut self) {
        let free = !holding(self.sh);
        let to = self
            .graph
            .nodes
            .get(self.node + 1)
            .is_some_and(|n| matches!(n.op, OpFn::Leaf(_) | OpFn::Merge { .. }));
        self.batching = free && to && !self.traced;
    }

    /// The next output's id.
    pub(crate) fn next_id(&mut self) -> MsgId {
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
    pub(crate) fn next_output(&mut self) -> (MsgId, Arc<GraphInner>, Option<Arc<Frame>>, Arc<Sched>) {
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
    pub(crate) fn push_reported(&mut self) {
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
    pub(crate) fn end_step(&mut self, r: Result<(), StepFailure>, msg: &MsgId) -> Result<(), StepFailure> {
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
    pub(crate) fn flush(&mut self) {
        for t in 0..self.batches.len() {
            self.flush_one(t);
        }
        for t in 0..self.singles.len() {
            self.push_singles(t);
        }
    }

    /// Push the batch gathered for thread `t` of the next operation.
    pub(crate) fn flush_one(&mut self, t: usize) {
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
    pub(crate) fn push_singles(&mut self, t: usize) {
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
pub(crate) fn route_to(n: &Node, msg: &dyn Any, id: &MsgId) -> Result<usize, String> {
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
                state_set: false,
                instance: None,
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
