//! Racetrack's parallel runtime: thread collections, flow graphs and schedule calls (the
//! Dynamic Parallel Schedules programming model; `docs/GUIDE.md`, "Concepts").
//!
//! - [`Runtime`] owns thread collections ([`Runtime::collection`]); each thread is a named
//!   OS thread with a FIFO queue and a thread-local state.
//! - [`ops`] builds operations; `>>` composes them into a [`Chain`], which
//!   [`Runtime::graph`] checks (nesting of splits and merges) and registers.
//! - [`Runtime::schedule`] posts an input and waits for the final message.
//!
//! Every event passes through the optional [`Hook`] (module [`hook`]); the runtime knows
//! nothing else of a debugger. Programs usually build their runtime through the
//! `racetrack-agent` crate (`racetrack_agent::runtime()`), which installs the debugging
//! agent as that hook when the environment asks for it.
//!
//! ```
//! use racetrack_runtime::{ops, Route, Runtime};
//!
//! let rt = Runtime::builder().build();
//! let main = rt.collection::<()>("main", 1);
//! let workers = rt.collection::<u64>("proc", 2);
//! let graph = rt
//!     .graph(
//!         ops::split("Split", &main, Route::constant(0), |n: u32, _ctx, out| {
//!             for i in 0..n {
//!                 out.post(i);
//!             }
//!         }) >> ops::leaf("Square", &workers, Route::round_robin(), |x: u32, ctx| {
//!             *ctx.state += 1; // how many this thread squared
//!             u64::from(x) * u64::from(x)
//!         }) >> ops::merge(
//!             "Sum",
//!             &main,
//!             Route::constant(0),
//!             |acc: &mut u64, x: u64, _ctx| *acc += x,
//!             |acc, _ctx| acc,
//!         ),
//!     )
//!     .expect("well-formed graph");
//! assert_eq!(rt.schedule(&graph, 4).expect("no panic"), 0 + 1 + 4 + 9);
//! ```

// The API programs are written against: every public item says what it is for.
#![warn(missing_docs)]

pub mod error;
mod exec;
pub mod graph;
pub mod hook;
pub mod ids;
mod merge;
mod message;
pub mod ops;
mod order;
pub(crate) mod payload;
mod post;
pub mod route;
mod stuck;
pub mod thread;

use graph::{GraphInner, Node, PostSink};
use hook::{CollectionInfo, OpInfo, ThreadInfo};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashSet;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use thread::{lock, Sched, ThreadShared};

pub use error::{BuildError, ContentError, ReorderError, ScheduleError};
pub use graph::{Chain, FlowGraph};
pub use hook::Hook;
pub use ids::MsgId;
pub use payload::{ErasedState, Payload};
pub use route::Route;
pub use stuck::StuckWait;

/// What can travel as a message: any serde type that can cross threads.
pub trait Message: Serialize + DeserializeOwned + Send + 'static {}
impl<T: Serialize + DeserializeOwned + Send + 'static> Message for T {}

/// What can be a thread-local state.
pub trait ThreadState: Serialize + DeserializeOwned + Default + Send + 'static {}
impl<T: Serialize + DeserializeOwned + Default + Send + 'static> ThreadState for T {}

static NEXT_RUNTIME: AtomicUsize = AtomicUsize::new(0);

type ThreadEntry = (Arc<ThreadShared>, Option<JoinHandle<()>>);

pub(crate) struct Shared {
    pub(crate) id: usize,
    pub(crate) hook: Option<Arc<dyn Hook>>,
    /// The hook's [`Hook::active_flag`], read instead of calling [`Hook::active`].
    pub(crate) hook_on: Option<Arc<AtomicBool>>,
    threads: Mutex<Vec<ThreadEntry>>,
    collections: Mutex<Vec<Arc<CollectionInfo>>>,
    ops: Mutex<(Vec<Arc<OpInfo>>, HashSet<String>)>,
    next_call: AtomicU64,
    /// Schedule calls blocked on the runtime's own threads (see [`stuck`]).
    nested: Mutex<stuck::Nested>,
    /// The runtime is being dropped: calls still waiting (nested ones, whose messages
    /// no thread will take now) give up with [`ScheduleError::Shutdown`].
    stopping: AtomicBool,
}

impl Shared {
    pub(crate) fn thread(&self, global: usize) -> Option<Arc<ThreadShared>> {
        lock(&self.threads).get(global).map(|(t, _)| t.clone())
    }
}

/// Where a [`RuntimeBuilder`] gets its hook when none was given: asked once, at build.
pub type HookSource = fn() -> Option<Arc<dyn Hook>>;

/// Builds a [`Runtime`].
#[derive(Default)]
pub struct RuntimeBuilder {
    hook: Option<Arc<dyn Hook>>,
    source: Option<HookSource>,
}

impl RuntimeBuilder {
    /// Route every event through `hook` (tests, recorders, the debugging agent).
    pub fn hook(mut self, hook: Arc<dyn Hook>) -> Self {
        self.hook = Some(hook);
        self
    }

    /// Without an explicit [`hook`](Self::hook), ask `source` for one when the runtime is
    /// built (the agent crate's: the agent if the environment asks for a debugger).
    pub fn hook_source(mut self, source: HookSource) -> Self {
        self.source = Some(source);
        self
    }

    /// Create the runtime (no threads yet: add collections). Without a hook (given, or
    /// from the hook source) every event costs one branch.
    pub fn build(self) -> Runtime {
        let hook = self.hook.or_else(|| self.source.and_then(|s| s()));
        let shared = Arc::new(Shared {
            id: NEXT_RUNTIME.fetch_add(1, Ordering::Relaxed),
            hook_on: hook.as_ref().and_then(|h| h.active_flag()),
            hook,
            threads: Mutex::new(Vec::new()),
            collections: Mutex::new(Vec::new()),
            ops: Mutex::new((Vec::new(), HashSet::new())),
            next_call: AtomicU64::new(0),
            nested: Mutex::new(stuck::Nested::default()),
            stopping: AtomicBool::new(false),
        });
        if let Some(h) = &shared.hook {
            h.on_runtime(RuntimeView(Arc::downgrade(&shared)));
        }
        Runtime { shared }
    }
}

/// The runtime: thread collections, registered graphs and schedule calls. Dropping it
/// stops and joins its threads.
pub struct Runtime {
    shared: Arc<Shared>,
}

/// A handle on a thread collection whose threads keep a state of type `S`.
pub struct Collection<S> {
    pub(crate) runtime: usize,
    pub(crate) id: usize,
    pub(crate) threads: Arc<[Arc<ThreadShared>]>,
    name: String,
    _state: PhantomData<fn() -> S>,
}

impl<S> Clone for Collection<S> {
    fn clone(&self) -> Self {
        Self {
            runtime: self.runtime,
            id: self.id,
            threads: self.threads.clone(),
            name: self.name.clone(),
            _state: PhantomData,
        }
    }
}

impl<S> Collection<S> {
    /// Number of threads.
    pub fn len(&self) -> usize {
        self.threads.len()
    }
    /// Always false: a collection has at least one thread.
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }
    /// The collection's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// What an operation knows about the step it runs.
pub(crate) struct StepInfo<'a> {
    pub(crate) thread: &'a ThreadInfo,
    pub(crate) threads: usize,
    pub(crate) msg_id: &'a MsgId,
}

/// An operation's context: the thread-local state and where it runs.
pub struct Ctx<'a, S> {
    /// The thread-local state of the thread running the step.
    pub state: &'a mut S,
    info: &'a StepInfo<'a>,
}

impl<'a, S> Ctx<'a, S> {
    pub(crate) fn new(state: &'a mut S, info: &'a StepInfo<'a>) -> Self {
        Self { state, info }
    }
    /// Index of the running thread in its collection.
    pub fn thread_index(&self) -> usize {
        self.info.thread.index
    }
    /// Number of threads in the running thread's collection.
    pub fn threads(&self) -> usize {
        self.info.threads
    }
    /// Name of the running thread, e.g. `proc[2]`.
    pub fn thread_name(&self) -> &str {
        &self.info.thread.name
    }
    /// Id of the message being processed (for a merge's final step: its output id).
    pub fn msg_id(&self) -> &MsgId {
        self.info.msg_id
    }
}

/// Where a split or stream posts its outputs.
pub struct Outputs<'a, T> {
    sink: &'a mut dyn PostSink,
    _type: PhantomData<fn(T)>,
}

impl<'a, T: Message> Outputs<'a, T> {
    pub(crate) fn new(sink: &'a mut dyn PostSink) -> Self {
        Self {
            sink,
            _type: PhantomData,
        }
    }
    /// Post one output: it is routed at once (and passes the send hook, which may hold it,
    /// while a debugger that may hold messages is attached), and enqueued at its
    /// destination when the step ends, or once 64 wait for the same thread — in every
    /// mode, so a debugger changes nothing in when messages arrive. A step must not wait
    /// for its own outputs to be consumed.
    pub fn post(&mut self, msg: T) {
        match self
            .sink
            .batch(&msg, payload::new_queue::<T>, payload::short_type_name::<T>)
        {
            Some(q) => match q.as_any_mut().downcast_mut::<std::collections::VecDeque<T>>() {
                Some(q) => q.push_back(msg),
                None => self.sink.fail(format!(
                    "internal error: a batch of outputs is not of {}",
                    std::any::type_name::<T>()
                )),
            },
            None => self.sink.post(Box::new(msg)),
        }
    }
}

impl Runtime {
    /// A runtime without a hook.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// Add a collection of `threads` named OS threads `name[0]`, `name[1]`, ..., each with
    /// state `S::default()`.
    ///
    /// # Panics
    /// If `threads` is 0.
    pub fn collection<S: ThreadState>(&self, name: &str, threads: usize) -> Collection<S> {
        assert!(threads > 0, "collection `{name}` needs at least one thread");
        let sh = &self.shared;
        let mut colls = lock(&sh.collections);
        let mut all = lock(&sh.threads);
        let id = colls.len();
        let mut infos = Vec::with_capacity(threads);
        let mut members = Vec::with_capacity(threads);
        for index in 0..threads {
            let info = Arc::new(ThreadInfo {
                global: all.len(),
                collection: id,
                index,
                name: format!("{name}[{index}]").into(),
            });
            let ts = Arc::new(ThreadShared::new(info.clone()));
            let handle = {
                let (sh, ts) = (sh.clone(), ts.clone());
                std::thread::Builder::new()
                    .name(info.name.to_string())
                    .spawn(move || exec::thread_main::<S>(&sh, &ts))
                    .map_err(|e| eprintln!("racetrack: cannot spawn thread {}: {e}", info.name))
                    .ok()
            };
            all.push((ts.clone(), handle));
            infos.push(info);
            members.push(ts);
        }
        let info = Arc::new(CollectionInfo {
            id,
            name: name.to_owned(),
            threads: infos,
        });
        colls.push(info.clone());
        // Announced under the registration locks, so the hook sees collections (and
        // threads) in the order of their numbers.
        if let Some(h) = &sh.hook {
            h.on_collection(&info);
        }
        drop((colls, all));
        Collection {
            runtime: sh.id,
            id,
            threads: members.into(),
            name: name.to_owned(),
            _state: PhantomData,
        }
    }

    /// Check and register a flow graph.
    pub fn graph<I, O>(&self, chain: Chain<I, O>) -> Result<FlowGraph<I, O>, BuildError> {
        graph::check_nesting(&chain.nodes)?;
        let sh = &self.shared;
        let mut ops = lock(&sh.ops);
        let mut seen = HashSet::new();
        for n in &chain.nodes {
            if n.collection.runtime != sh.id {
                return Err(BuildError::ForeignCollection(n.name.clone()));
            }
            if ops.1.contains(&n.name) || !seen.insert(n.name.clone()) {
                return Err(BuildError::DuplicateName(n.name.clone()));
            }
        }
        let mut nodes = Vec::with_capacity(chain.nodes.len());
        for n in chain.nodes {
            let info = Arc::new(OpInfo {
                id: ops.0.len(),
                name: n.name.as_str().into(),
                kind: n.op.kind(),
                collection: n.collection.id,
            });
            ops.0.push(info.clone());
            ops.1.insert(n.name);
            nodes.push(Node {
                info,
                route: n.route,
                op: n.op,
                threads: n.collection.threads,
            });
        }
        let inner = Arc::new(GraphInner { nodes });
        // Announced under the registration lock, so the hook sees operations in the order
        // of their ids.
        if let Some(h) = &sh.hook {
            h.on_graph(&graph::graph_info(&inner));
        }
        drop(ops);
        Ok(FlowGraph::new(inner))
    }

    /// Post `input` to the graph's first operation and wait for the final message. The
    /// k-th call (from 0) gives the input the id `k`.
    pub fn schedule<I: Message, O: Message>(
        &self,
        graph: &FlowGraph<I, O>,
        input: I,
    ) -> Result<O, ScheduleError> {
        schedule_on(&self.shared, graph, input)
    }

    /// A handle for the runtime's own steps: a step may call
    /// [`RuntimeHandle::schedule`] (a nested schedule). It does not keep the runtime alive.
    pub fn handle(&self) -> RuntimeHandle {
        RuntimeHandle(Arc::downgrade(&self.shared))
    }

    /// The thread collections added so far.
    pub fn collections(&self) -> Vec<Arc<CollectionInfo>> {
        lock(&self.shared.collections).clone()
    }
}

/// [`Runtime::schedule`] on the runtime `shared`.
fn schedule_on<I: Message, O: Message>(
    shared: &Arc<Shared>,
    graph: &FlowGraph<I, O>,
    input: I,
) -> Result<O, ScheduleError> {
    let call = shared.next_call.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = mpsc::sync_channel(1);
    let sched = Arc::new(Sched::new(tx));
    // Called from a step, the call may wait for that very thread (see [`stuck`]); through
    // a handle from elsewhere, it may outlive the runtime. Both wait looking.
    let me = stuck::caller(shared);
    let looking = (me.is_some() || Arc::strong_count(shared) > 1).then(|| sched.clone());
    let out = post::Output {
        graph: graph.inner.clone(),
        dest: Some(0),
        id: MsgId::root(call),
        payload: Box::new(input),
        frame: None,
        sched,
        traced: false,
    };
    let injected = post::deliver(shared, None, &graph.inner, out);
    if let Err(message) = injected {
        let op = graph.inner.nodes[0].info.name.to_string();
        return Err(ScheduleError::Operation {
            op,
            thread: "(caller)".to_owned(),
            msg: call.to_string(),
            message,
        });
    }
    let got = match looking {
        Some(sched) => stuck::wait(shared, me, &sched, &rx).ok_or(mpsc::RecvError),
        None => rx.recv(),
    };
    match got {
        Ok(Ok(out)) => out
            .into_any()
            .downcast::<O>()
            .map(|b| *b)
            .map_err(|_| ScheduleError::Shutdown),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(ScheduleError::Shutdown),
    }
}

/// A runtime seen from its own steps (see [`Runtime::handle`]): a step may schedule a
/// graph and wait for it. While it waits its thread runs nothing else, so a call whose
/// messages come back to that thread never returns (the hook is told: [`Hook::on_stuck`]).
#[derive(Clone)]
pub struct RuntimeHandle(std::sync::Weak<Shared>);

impl RuntimeHandle {
    /// [`Runtime::schedule`], or [`ScheduleError::Shutdown`] once the runtime is gone.
    pub fn schedule<I: Message, O: Message>(
        &self,
        graph: &FlowGraph<I, O>,
        input: I,
    ) -> Result<O, ScheduleError> {
        let shared = self.0.upgrade().ok_or(ScheduleError::Shutdown)?;
        schedule_on(&shared, graph, input)
    }
}

/// Read access to a runtime's threads and queues, for a hook (the agent's snapshots and
/// queue listings). Holds no strong reference.
#[derive(Clone)]
pub struct RuntimeView(std::sync::Weak<Shared>);

impl RuntimeView {
    fn all(&self) -> Vec<Arc<ThreadShared>> {
        self.0
            .upgrade()
            .map(|sh| lock(&sh.threads).iter().map(|(t, _)| t.clone()).collect())
            .unwrap_or_default()
    }

    /// Every thread, in global order.
    pub fn threads(&self) -> Vec<Arc<ThreadInfo>> {
        self.all().iter().map(|t| t.info.clone()).collect()
    }

    /// How many threads the runtime has.
    pub fn thread_count(&self) -> usize {
        self.0.upgrade().map_or(0, |sh| lock(&sh.threads).len())
    }

    /// The pending messages of thread number `global`.
    pub fn pending(&self, global: usize) -> Option<Vec<hook::QueuedMsg>> {
        self.all().get(global).map(|t| t.pending())
    }

    /// The content of pending message `id` of thread number `global`.
    pub fn pending_content(
        &self,
        global: usize,
        id: &MsgId,
    ) -> Option<Result<serde_json::Value, error::ContentError>> {
        self.all().get(global).and_then(|t| t.pending_content(id))
    }

    /// Lock every queue (in global order), describe them, and run `f` while they are still
    /// locked: no message can be enqueued or taken meanwhile, so `f` can start a stream of
    /// events consistent with the description.
    /// `limit`: pending messages described per thread (the others are counted).
    pub fn snapshot<R>(&self, limit: usize, f: impl FnOnce(Vec<thread::ThreadSnap>) -> R) -> R {
        let all = self.all();
        let sh = self.0.upgrade();
        // Locked inside the queue locks: registration takes no queue lock, so the order is
        // safe, and an operation that is running is registered.
        let op = |id: usize| sh.as_ref().and_then(|sh| lock(&sh.ops).0.get(id).cloned());
        let mut guards = Vec::with_capacity(all.len());
        let mut snaps = Vec::with_capacity(all.len());
        for t in &all {
            let (g, s) = t.lock_for_snapshot(&op, limit);
            guards.push(g);
            snaps.push(s);
        }
        let r = f(snaps);
        drop(guards);
        r
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::Relaxed);
        if let Some(h) = &self.shared.hook {
            h.on_shutdown();
        }
        let threads = std::mem::take(&mut *lock(&self.shared.threads));
        for (t, _) in &threads {
            t.shutdown();
        }
        for (_, h) in threads {
            if let Some(h) = h {
                let _ = h.join();
            }
        }
        if let Some(h) = &self.shared.hook {
            h.on_finished();
        }
    }
}

#[cfg(test)]
mod tests;
