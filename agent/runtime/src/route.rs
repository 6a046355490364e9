//! Routing functions: which thread of its collection an operation runs a message on.

use std::any::Any;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

type RouteFn = dyn Fn(&dyn Any, usize) -> Option<usize> + Send + Sync;

/// A routing function for messages of type `M`: constant, round-robin, or any closure.
pub struct Route<M> {
    pub(crate) kind: RouteKind,
    _msg: PhantomData<fn(&M)>,
}

pub(crate) enum RouteKind {
    Constant(usize),
    RoundRobin(Arc<AtomicUsize>),
    By(Arc<RouteFn>),
}

impl<M: 'static> Route<M> {
    /// Always thread `index` of the collection.
    pub fn constant(index: usize) -> Self {
        Self::new(RouteKind::Constant(index))
    }

    /// Threads 0, 1, ..., n-1, 0, ... in the order messages are posted to this operation.
    pub fn round_robin() -> Self {
        Self::new(RouteKind::RoundRobin(Arc::new(AtomicUsize::new(0))))
    }

    /// Any function of the message and the collection's thread count, e.g.
    /// `Route::by(|m: &Chunk, n| m.target % n)`. An index `>= n` is reported as an error
    /// of the schedule call, not wrapped silently.
    pub fn by(f: impl Fn(&M, usize) -> usize + Send + Sync + 'static) -> Self {
        Self::new(RouteKind::By(Arc::new(move |m: &dyn Any, n| {
            m.downcast_ref::<M>().map(|m| f(m, n))
        })))
    }

    fn new(kind: RouteKind) -> Self {
        Self {
            kind,
            _msg: PhantomData,
        }
    }
}

impl RouteKind {
    /// The destination index for `msg` in a collection of `n` threads.
    pub(crate) fn pick(&self, msg: &dyn Any, n: usize) -> Result<usize, String> {
        let i = match self {
            RouteKind::Constant(i) => *i,
            RouteKind::RoundRobin(c) => c.fetch_add(1, Ordering::Relaxed) % n,
            RouteKind::By(f) => f(msg, n).ok_or("message has an unexpected type")?,
        };
        if i < n {
            Ok(i)
        } else {
            Err(format!(
                "routing function returned thread index {i} for a collection of {n} threads"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_round_robin_and_closure() {
        let c = Route::<u32>::constant(2).kind;
        assert_eq!(c.pick(&7u32, 4), Ok(2));
        assert!(c.pick(&7u32, 2).is_err(), "out of range must be an error");

        let rr = Route::<u32>::round_robin().kind;
        let picks: Vec<usize> = (0..7).map(|_| rr.pick(&0u32, 3).unwrap()).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2, 0]);

        let by = Route::by(|m: &u32, n| *m as usize % n).kind;
        assert_eq!(by.pick(&10u32, 4), Ok(2));
        assert!(by.pick(&"wrong type", 4).is_err());
        let bad = Route::by(|m: &u32, _n| *m as usize).kind;
        let err = bad.pick(&9u32, 4).unwrap_err();
        assert!(err.contains("index 9"), "{err}");
    }
}
