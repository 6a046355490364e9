//! Flow graphs: typed chains of operations composed with `>>`, checked and registered
//! with a runtime.

use super::error::BuildError;
use super::hook::{GraphInfo, OpInfo, OpKind};
use super::payload::{Payload, PayloadQueue, Slot};
use super::route::RouteKind;
use super::thread::ThreadShared;
use super::StepInfo;
use std::any::Any;
use std::marker::PhantomData;
use std::ops::Shr;
use std::sync::Arc;

/// Where outputs of a step go; `Outputs<T>` is its typed face.
pub(crate) trait PostSink {
    fn post(&mut self, payload: Box<dyn Payload>);
    /// While no hook may hold messages, a split gathers its outputs per destination thread:
    /// route `msg`, give it its id, and return the payload queue of its destination's
    /// batch to append it to (created with `new`). `None`: post it boxed instead.
    /// `type_name`: the message's (for a debugger that hears of it).
    fn batch(
        &mut self,
        msg: &dyn Any,
        new: fn() -> Box<dyn PayloadQueue>,
        type_name: fn() -> &'static str,
    ) -> Option<&mut dyn PayloadQueue>;
    /// Fail the step (an internal error the typed side found).
    fn fail(&mut self, error: String);
}

type Res<T> = Result<T, String>;
pub(crate) type SplitFn =
    dyn Fn(Box<dyn Payload>, &mut dyn Any, &StepInfo<'_>, &mut dyn PostSink) -> Res<()> + Send + Sync;
/// A leaf posts its one output through the sink (which may gather it into a batch).
pub(crate) type LeafFn =
    dyn Fn(Input<'_>, &mut dyn Any, &StepInfo<'_>, &mut dyn PostSink) -> Res<()> + Send + Sync;
pub(crate) type InitFn = dyn Fn() -> Box<dyn Any + Send> + Send + Sync;
pub(crate) type AbsorbFn =
    dyn Fn(&mut dyn Any, Input<'_>, &mut dyn Any, &StepInfo<'_>, &mut dyn PostSink) -> Res<()> + Send + Sync;

/// The input of a leaf or a merge step: a message of its own, or the payload of a message
/// taken from a batch (see [`PostSink::batch`]).
pub(crate) enum Input<'s> {
    Boxed(Box<dyn Payload>),
    Slot(&'s mut dyn Slot),
}
pub(crate) type MergeFinishFn =
    dyn Fn(Box<dyn Any + Send>, &mut dyn Any, &StepInfo<'_>) -> Res<Box<dyn Payload>> + Send + Sync;
pub(crate) type StreamFinishFn =
    dyn Fn(Box<dyn Any + Send>, &mut dyn Any, &StepInfo<'_>, &mut dyn PostSink) -> Res<()> + Send + Sync;

/// A merge's accumulator as JSON (merges made with [`crate::ops::merge_serde`]).
pub(crate) type ShowFn = dyn Fn(&dyn Any) -> Option<serde_json::Value> + Send + Sync;

/// An operation's code, type-erased.
pub(crate) enum OpFn {
    Split(Box<SplitFn>),
    Leaf(Box<LeafFn>),
    Merge {
        init: Box<InitFn>,
        absorb: Box<AbsorbFn>,
        finish: Box<MergeFinishFn>,
        show: Option<Box<ShowFn>>,
    },
    Stream {
        init: Box<InitFn>,
        absorb: Box<AbsorbFn>,
        finish: Box<StreamFinishFn>,
    },
}

impl OpFn {
    pub(crate) fn kind(&self) -> OpKind {
        match self {
            OpFn::Split(_) => OpKind::Split,
            OpFn::Leaf(_) => OpKind::Leaf,
            OpFn::Merge { .. } => OpKind::Merge,
            OpFn::Stream { .. } => OpKind::Stream,
        }
    }
}

/// The collection an operation runs on, as the graph sees it.
#[derive(Clone)]
pub(crate) struct CollectionRef {
    pub(crate) runtime: usize,
    pub(crate) id: usize,
    pub(crate) threads: Arc<[Arc<ThreadShared>]>,
}

/// An operation before registration.
pub(crate) struct NodeSpec {
    pub(crate) name: String,
    pub(crate) collection: CollectionRef,
    pub(crate) route: RouteKind,
    pub(crate) op: OpFn,
}

/// A sequence of operations taking `I` and producing `O`, built with the functions of
/// [`super::ops`] and composed with `>>` (the types must line up).
pub struct Chain<I, O> {
    pub(crate) nodes: Vec<NodeSpec>,
    _types: PhantomData<fn(I) -> O>,
}

impl<I, O> Chain<I, O> {
    pub(crate) fn single(node: NodeSpec) -> Self {
        Self {
            nodes: vec![node],
            _types: PhantomData,
        }
    }
}

impl<I, M, O> Shr<Chain<M, O>> for Chain<I, M> {
    type Output = Chain<I, O>;
    fn shr(mut self, rhs: Chain<M, O>) -> Chain<I, O> {
        self.nodes.extend(rhs.nodes);
        Chain {
            nodes: self.nodes,
            _types: PhantomData,
        }
    }
}

/// A registered operation.
pub(crate) struct Node {
    pub(crate) info: Arc<OpInfo>,
    pub(crate) route: RouteKind,
    pub(crate) op: OpFn,
    pub(crate) threads: Arc<[Arc<ThreadShared>]>,
}

/// A registered flow graph, shared by every message travelling through it.
///
/// Aligned to a cache line so that, behind an `Arc`, the reference counts (written as
/// messages are created and consumed) and the data (read by every thread on every step)
/// sit on different lines.
#[repr(align(64))]
pub(crate) struct GraphInner {
    pub(crate) nodes: Vec<Node>,
}

/// A checked flow graph from `I` to `O`, ready for [`super::Runtime::schedule`].
pub struct FlowGraph<I, O> {
    pub(crate) inner: Arc<GraphInner>,
    _types: PhantomData<fn(I) -> O>,
}

impl<I, O> FlowGraph<I, O> {
    pub(crate) fn new(inner: Arc<GraphInner>) -> Self {
        Self {
            inner,
            _types: PhantomData,
        }
    }

    /// Operation names in flow order.
    pub fn op_names(&self) -> Vec<String> {
        self.inner.nodes.iter().map(|n| n.info.name.to_string()).collect()
    }
}

/// Check that every merge matches a split (or stream) before it and every split is closed.
/// Streams close one level and open one.
pub(crate) fn check_nesting(nodes: &[NodeSpec]) -> Result<(), BuildError> {
    if nodes.is_empty() {
        return Err(BuildError::Empty);
    }
    let mut open: Vec<&str> = Vec::new();
    for n in nodes {
        let kind = n.op.kind();
        match kind {
            OpKind::Leaf => {}
            OpKind::Split => open.push(&n.name),
            OpKind::Merge | OpKind::Stream => {
                if open.pop().is_none() {
                    return Err(BuildError::UnmatchedMerge(n.name.clone(), kind.as_str()));
                }
                if kind == OpKind::Stream {
                    open.push(&n.name);
                }
            }
        }
    }
    match open.pop() {
        Some(name) => Err(BuildError::UnclosedSplit(name.to_owned())),
        None => Ok(()),
    }
}

pub(crate) fn graph_info(inner: &GraphInner) -> GraphInfo {
    let ops: Vec<Arc<OpInfo>> = inner.nodes.iter().map(|n| n.info.clone()).collect();
    let edges = ops.windows(2).map(|w| (w[0].id, w[1].id)).collect();
    GraphInfo { ops, edges }
}
