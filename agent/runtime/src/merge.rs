//! Merges and streams: an instance per split instance and thread, its absorb steps, its
//! final step when every input has been absorbed, and what a split (or a stream's final
//! step) tells the matching merge.

use super::exec::active_hook;
use super::exec::At;
use super::exec::{run_guarded, Exec, StepFailure};
use super::graph::{AbsorbFn, GraphInner, InitFn, Input, OpFn, PostSink, ShowFn};
use super::hook::StepKind;
use super::post::{IdMode, Poster};
use super::thread::{Frame, Item, Running, Sched};
use super::{StepInfo, ThreadState};
use std::any::Any;
use std::collections::hash_map::Entry;
use std::hash::Hasher;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

/// A merge or stream instance in progress on this thread.
pub(crate) struct Instance {
    pub(crate) acc: Option<Box<dyn Any + Send>>,
    /// Keeps the frame alive, so its address (the map key) stays unique.
    pub(crate) _frame: Arc<Frame>,
    pub(crate) sched: Arc<Sched>,
    pub(crate) traced: bool,
    /// Streams: the frame of the outputs, and how many were posted so far.
    pub(crate) out_frame: Option<Arc<Frame>>,
    pub(crate) posted: u64,
}

/// Hashes the address of a frame (the key of [`Exec::instances`]): one multiply. Every
/// absorbed input looks its instance up, and an address needs no protection against
/// chosen keys, which is what the default SipHash pays for.
#[derive(Default)]
pub(crate) struct AddrHasher(u64);

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

impl<S: ThreadState> Exec<'_, S> {
    /// A merge or stream instance absorbed one more input: run its final step if that was
    /// the last.
    pub(crate) fn count_absorbed(&mut self, graph: &Arc<GraphInner>, node: usize, frame: &Arc<Frame>) {
        if frame.absorbed() {
            self.finish_instance(graph, node, frame);
        }
    }

    /// A merge or stream absorbs one input into its instance's accumulator.
    pub(crate) fn absorb(
        &mut self,
        at: At<'_>,
        (init, absorb, show): (&InitFn, &AbsorbFn, Option<&ShowFn>),
        payload: Input<'_>,
        frame: Option<&Arc<Frame>>,
    ) -> Result<(), StepFailure> {
        let At {
            graph,
            sched,
            node,
            id,
            trace,
        } = at;
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
        let ids = IdMode::Child(frame.prefix.clone());
        let mut poster = Poster::new((self.sh, self.me), at, ids, out_frame);
        poster.count = posted;
        let info = StepInfo {
            thread: &self.me.info,
            threads: graph.nodes[node].threads.len(),
            msg_id: id,
        };
        let r = run_guarded(|| absorb(&mut *acc, payload, &mut self.state, &info, &mut poster));
        // For this step's stop only (a failed step has none). The program's `Serialize`
        // may panic: that costs the hook its view, not the thread.
        self.shown = show
            .filter(|_| r.is_ok() && active_hook(self.sh).is_some_and(|h| h.instance_states()))
            .and_then(|show| {
                std::panic::catch_unwind(AssertUnwindSafe(|| show(&*acc)))
                    .ok()
                    .flatten()
            });
        if let Some(inst) = self.instances.get_mut(&(Arc::as_ptr(frame) as usize)) {
            inst.acc = Some(acc);
            inst.posted = poster.count;
        }
        poster.end_step(r, id)
    }

    /// The final step of a merge or stream instance whose inputs have all been absorbed.
    pub(crate) fn finish_instance(&mut self, graph: &Arc<GraphInner>, node: usize, frame: &Arc<Frame>) {
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
        let mut at = At {
            graph,
            sched: &inst.sched,
            node,
            id: &out_id,
            trace: inst.traced,
        };
        let trace = self.boundary(at, StepKind::Final, &out_id, true);
        at.trace = trace;
        let info = StepInfo {
            thread: &self.me.info,
            threads: n.threads.len(),
            msg_id: &out_id,
        };
        let Some(acc) = inst.acc else { return };
        let r = match &n.op {
            OpFn::Merge { finish, .. } => {
                run_guarded(|| finish(acc, &mut self.state, &info)).and_then(|out| {
                    let ids = IdMode::Same(out_id.clone());
                    let mut poster = Poster::new((self.sh, self.me), at, ids, frame.parent.clone());
                    poster.post(out);
                    poster.end_step(Ok(()), &out_id)
                })
            }
            OpFn::Stream { finish, .. } => {
                let out_frame = inst
                    .out_frame
                    .clone()
                    .unwrap_or_else(|| Arc::new(Frame::new(out_id.clone(), frame.parent.clone())));
                let ids = IdMode::Child(out_id.clone());
                let mut poster = Poster::new((self.sh, self.me), at, ids, Some(out_frame.clone()));
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
        self.boundary(at, StepKind::Final, &out_id, false);
    }

    /// After a split (or a stream's final step): check the outputs and tell the matching
    /// merge how many to expect.
    pub(crate) fn after_posting(
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
