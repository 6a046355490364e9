//! Constructors of the four kinds of operations. Each returns a one-operation [`Chain`];
//! compose them with `>>`.
//!
//! Every operation names the thread collection it runs on and a [`Route`] that picks the
//! thread for each incoming message. The closures get the message, a [`Ctx`] (thread-local
//! state, thread index, message id) and, for operations with several outputs, [`Outputs`].

use super::graph::{Chain, CollectionRef, Input, NodeSpec, OpFn, PostSink};
use super::payload::Payload;
use super::route::Route;
use super::{Collection, Ctx, Message, Outputs, StepInfo, ThreadState};
use serde::Serialize;
use std::any::Any;

fn take<M: Message>(p: Box<dyn Payload>) -> Result<M, String> {
    take_input(Input::Boxed(p))
}

fn take_input<M: Message>(input: Input<'_>) -> Result<M, String> {
    let m = match input {
        Input::Boxed(p) => p.into_any().downcast::<M>().ok().map(|b| *b),
        Input::Slot(s) => s.as_any_mut().downcast_mut::<Option<M>>().and_then(Option::take),
    };
    m.ok_or_else(|| format!("internal error: message is not a {}", std::any::type_name::<M>()))
}

fn state<S: ThreadState>(s: &mut dyn Any) -> Result<&mut S, String> {
    s.downcast_mut::<S>()
        .ok_or_else(|| "internal error: thread state has an unexpected type".to_owned())
}

fn node<S: ThreadState, I: 'static>(name: &str, coll: &Collection<S>, route: Route<I>, op: OpFn) -> NodeSpec {
    NodeSpec {
        name: name.to_owned(),
        collection: CollectionRef {
            runtime: coll.runtime,
            id: coll.id,
            threads: coll.threads.clone(),
        },
        route: route.kind,
        op,
    }
}

/// A split: one input, one or more outputs posted with `out.post(..)`. Posting none is
/// an error of the schedule call.
pub fn split<I: Message, O: Message, S: ThreadState>(
    name: &str,
    coll: &Collection<S>,
    route: Route<I>,
    f: impl Fn(I, &mut Ctx<'_, S>, &mut Outputs<'_, O>) + Send + Sync + 'static,
) -> Chain<I, O> {
    let op = OpFn::Split(Box::new(
        move |msg: Box<dyn Payload>, st: &mut dyn Any, info: &StepInfo<'_>, sink: &mut dyn PostSink| {
            let msg = take::<I>(msg)?;
            let mut ctx = Ctx::new(state::<S>(st)?, info);
            f(msg, &mut ctx, &mut Outputs::new(sink));
            Ok(())
        },
    ));
    Chain::single(node(name, coll, route, op))
}

/// A leaf: one input, exactly one output (the closure's return value), enqueued at its
/// destination when the step ends (see [`Outputs::post`]).
pub fn leaf<I: Message, O: Message, S: ThreadState>(
    name: &str,
    coll: &Collection<S>,
    route: Route<I>,
    f: impl Fn(I, &mut Ctx<'_, S>) -> O + Send + Sync + 'static,
) -> Chain<I, O> {
    let op = OpFn::Leaf(Box::new(
        move |msg: Input<'_>, st: &mut dyn Any, info: &StepInfo<'_>, sink: &mut dyn PostSink| {
            let msg = take_input::<I>(msg)?;
            let mut ctx = Ctx::new(state::<S>(st)?, info);
            let out = f(msg, &mut ctx);
            Outputs::new(sink).post(out);
            Ok(())
        },
    ));
    Chain::single(node(name, coll, route, op))
}

/// A merge: absorbs every output of the matching split (one step each, in arrival order)
/// into an accumulator `A` that starts as `A::default()`, then `finish` produces the one
/// output in a final step. All inputs of one instance must be routed to the same thread.
pub fn merge<I: Message, O: Message, A: Default + Send + 'static, S: ThreadState>(
    name: &str,
    coll: &Collection<S>,
    route: Route<I>,
    absorb: impl Fn(&mut A, I, &mut Ctx<'_, S>) + Send + Sync + 'static,
    finish: impl Fn(A, &mut Ctx<'_, S>) -> O + Send + Sync + 'static,
) -> Chain<I, O> {
    merge_op(name, coll, route, (absorb, finish), None)
}

/// A merge whose accumulator can be shown as JSON: the same as [`merge`], but a hook may
/// read the accumulator after each absorb step ([`crate::hook::ThreadAccess::instance_json`]).
/// The explorer then tells two orders of inputs that leave the same accumulator apart
/// from none: a merge that commutes is explored once per set of inputs, not per order.
pub fn merge_serde<I: Message, O: Message, A: Default + Serialize + Send + 'static, S: ThreadState>(
    name: &str,
    coll: &Collection<S>,
    route: Route<I>,
    absorb: impl Fn(&mut A, I, &mut Ctx<'_, S>) + Send + Sync + 'static,
    finish: impl Fn(A, &mut Ctx<'_, S>) -> O + Send + Sync + 'static,
) -> Chain<I, O> {
    let show = |acc: &dyn Any| serde_json::to_value(acc.downcast_ref::<A>()?).ok();
    merge_op(name, coll, route, (absorb, finish), Some(Box::new(show)))
}

fn merge_op<I: Message, O: Message, A: Default + Send + 'static, S: ThreadState>(
    name: &str,
    coll: &Collection<S>,
    route: Route<I>,
    (absorb, finish): (
        impl Fn(&mut A, I, &mut Ctx<'_, S>) + Send + Sync + 'static,
        impl Fn(A, &mut Ctx<'_, S>) -> O + Send + Sync + 'static,
    ),
    show: Option<Box<super::graph::ShowFn>>,
) -> Chain<I, O> {
    let op = OpFn::Merge {
        show,
        init: Box::new(|| Box::new(A::default()) as Box<dyn Any + Send>),
        absorb: Box::new(
            move |acc: &mut dyn Any,
                  msg: Input<'_>,
                  st: &mut dyn Any,
                  info: &StepInfo<'_>,
                  _: &mut dyn PostSink| {
                let acc = acc
                    .downcast_mut::<A>()
                    .ok_or("internal error: accumulator type")?;
                let msg = take_input::<I>(msg)?;
                absorb(acc, msg, &mut Ctx::new(state::<S>(st)?, info));
                Ok(())
            },
        ),
        finish: Box::new(
            move |acc: Box<dyn Any + Send>, st: &mut dyn Any, info: &StepInfo<'_>| {
                let acc = acc
                    .downcast::<A>()
                    .map_err(|_| "internal error: accumulator type")?;
                Ok(Box::new(finish(*acc, &mut Ctx::new(state::<S>(st)?, info))) as Box<dyn Payload>)
            },
        ),
    };
    Chain::single(node(name, coll, route, op))
}

/// A stream: a merge and a split in one. Absorbs every output of the matching split, may
/// post outputs at any step, and must have posted at least one by the end of its final step;
/// the next merge collects all of them.
pub fn stream<I: Message, O: Message, A: Default + Send + 'static, S: ThreadState>(
    name: &str,
    coll: &Collection<S>,
    route: Route<I>,
    absorb: impl Fn(&mut A, I, &mut Ctx<'_, S>, &mut Outputs<'_, O>) + Send + Sync + 'static,
    finish: impl Fn(A, &mut Ctx<'_, S>, &mut Outputs<'_, O>) + Send + Sync + 'static,
) -> Chain<I, O> {
    let op = OpFn::Stream {
        init: Box::new(|| Box::new(A::default()) as Box<dyn Any + Send>),
        absorb: Box::new(
            move |acc: &mut dyn Any,
                  msg: Input<'_>,
                  st: &mut dyn Any,
                  info: &StepInfo<'_>,
                  sink: &mut dyn PostSink| {
                let acc = acc
                    .downcast_mut::<A>()
                    .ok_or("internal error: accumulator type")?;
                let msg = take_input::<I>(msg)?;
                absorb(
                    acc,
                    msg,
                    &mut Ctx::new(state::<S>(st)?, info),
                    &mut Outputs::new(sink),
                );
                Ok(())
            },
        ),
        finish: Box::new(
            move |acc: Box<dyn Any + Send>,
                  st: &mut dyn Any,
                  info: &StepInfo<'_>,
                  sink: &mut dyn PostSink| {
                let acc = acc
                    .downcast::<A>()
                    .map_err(|_| "internal error: accumulator type")?;
                finish(
                    *acc,
                    &mut Ctx::new(state::<S>(st)?, info),
                    &mut Outputs::new(sink),
                );
                Ok(())
            },
        ),
    };
    Chain::single(node(name, coll, route, op))
}
