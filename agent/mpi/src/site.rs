//! What the debugger sees of a rank and changes in it: the rank as the agent's debuggee
//! (one thread, no visible queue: MPI keeps its messages) and a held call as its site
//! (an edited send, a forced match, the rank's state).

use crate::core::InFlight;
use racetrack_agent::agent::front::{Debuggee, Site, SiteError, Thread};
use racetrack_protocol::{Forced, QueueEntry, Rest, ThreadSnapshot};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// The rank as the agent's commands and attaches see it.
#[derive(Clone)]
pub(crate) struct RankView {
    thread: Arc<str>,
    rank: i32,
    size: i32,
    implementation: Arc<str>,
    now: Arc<Mutex<Now>>,
}

/// What the rank is doing, for its `state`.
#[derive(Default)]
struct Now {
    /// The call it is in (and its number), if any.
    call: Option<(Arc<str>, u64)>,
    /// The last `MPI_Pcontrol` label.
    label: Option<String>,
    calls: u64,
}

impl RankView {
    pub(crate) fn new(thread: Arc<str>, rank: i32, size: i32, implementation: &str) -> Self {
        Self {
            thread,
            rank,
            size,
            implementation: implementation.into(),
            now: Arc::default(),
        }
    }

    fn now(&self) -> std::sync::MutexGuard<'_, Now> {
        self.now.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The rank entered call `name`, its `seq`-th.
    pub(crate) fn calling(&self, name: &Arc<str>, seq: u64) {
        let mut now = self.now();
        now.call = Some((name.clone(), seq));
        now.calls = seq + 1;
    }

    /// The call returned.
    pub(crate) fn returned(&self) {
        self.now().call = None;
    }

    /// `MPI_Pcontrol(2, label)`.
    pub(crate) fn label(&self, label: Option<String>) {
        self.now().label = label;
    }

    fn state(&self) -> Value {
        let now = self.now();
        json!({
            "rank": self.rank,
            "size": self.size,
            "implementation": &*self.implementation,
            "call": now.call.as_ref().map(|c| &*c.0),
            "call_number": now.call.as_ref().map(|c| c.1),
            "calls": now.calls,
            "label": now.label,
        })
    }
}

impl Debuggee for RankView {
    fn threads(&self) -> Vec<Thread> {
        // `rank[R]` is thread R of the job (see `core`).
        vec![Thread::new(
            usize::try_from(self.rank).unwrap_or_default(),
            0,
            self.thread.clone(),
        )]
    }

    fn tick(&self) {
        crate::core::tick();
    }

    fn has_calls(&self) -> bool {
        true
    }

    fn queue(&self, _global: usize, _max: usize, _content: bool) -> (Vec<QueueEntry>, usize) {
        (Vec::new(), 0)
    }

    fn snapshot(&self, _per_thread: usize, cut: &mut dyn FnMut(Vec<ThreadSnapshot>)) {
        cut(vec![ThreadSnapshot {
            thread: self.thread.to_string(),
            queue: Vec::new(),
            more: 0,
            current: None,
            // The session's `hello` is one rank's: each rank says which process it is.
            pid: Some(std::process::id()),
        }]);
    }
}

/// A held call, as the debugger's commands change it.
pub(crate) struct RankSite<'a> {
    pub(crate) fl: &'a mut InFlight,
    /// The held event is the call's `send` (its content can be edited).
    pub(crate) is_send: bool,
    pub(crate) view: &'a RankView,
}

impl Site for RankSite<'_> {
    fn reorder(&mut self, _order: &[String], _rest: Option<Rest>) -> Result<bool, SiteError> {
        Err(SiteError::NotApplicable("MPI fixes the order of a rank's messages; to choose the message a wildcard receive takes, `match` its held start".into()))
    }

    fn edit(&mut self, content: Value) -> Result<(), SiteError> {
        let call = &self.fl.call;
        if !self.is_send {
            return Err(SiteError::NotApplicable(format!(
                "of {} cannot be edited: only a held send's can",
                call.name
            )));
        }
        if call.starts.is_some() {
            return Err(SiteError::NotApplicable(
                "of a persistent send cannot be edited: its request is bound to the program's buffer".into(),
            ));
        }
        let Some(elem) = call.elem else {
            return Err(SiteError::NotApplicable(format!(
                "of a send of {} cannot be edited (only basic datatypes can)",
                self.fl.info.datatype.as_deref().unwrap_or("a derived datatype")
            )));
        };
        let count = usize::try_from(call.count.unwrap_or(0)).unwrap_or(0);
        let bytes = elem.encode(&content, count).map_err(|e| {
            SiteError::Content(
                format!(
                    "{e} ({count} × {})",
                    self.fl.info.datatype.as_deref().unwrap_or("element")
                )
                .into(),
            )
        })?;
        self.fl.edited = Some(bytes);
        Ok(())
    }

    fn force_match(&mut self, source: i32, tag: Option<i32>) -> Result<(), SiteError> {
        let call = &self.fl.call;
        if !call.can_force() || self.is_send {
            return Err(SiteError::NotAWildcard {
                call: call.name.to_string(),
                peer: call.recv_peer(),
            });
        }
        let world = self.fl.info.comm.as_deref() == Some("MPI_COMM_WORLD");
        if source < 0 || (world && source >= self.view.size) {
            return Err(SiteError::NoSuchRank {
                rank: source,
                comm: self
                    .fl
                    .info
                    .comm
                    .as_deref()
                    .unwrap_or("its communicator")
                    .to_owned(),
            });
        }
        if let (Some(tag), Some(only)) = (tag, call.tag) {
            if only != -1 && tag != only {
                return Err(SiteError::OtherTag { only, tag });
            }
        }
        let from = call.recv_peer();
        if from != Some(-1) && from != Some(source) {
            return Err(SiteError::OtherSource {
                only: from.unwrap_or(-1),
            });
        }
        self.fl.forced = Some(Forced { source, tag });
        Ok(())
    }

    fn state(&self) -> Result<Value, SiteError> {
        Ok(self.view.state())
    }

    fn set_state(&mut self, _content: Value) -> Result<(), SiteError> {
        Err(SiteError::NotApplicable(
            "an MPI rank's state is its memory, which Racetrack does not replace; edit a held send instead"
                .into(),
        ))
    }

    fn queue(&self, _max: usize) -> (Vec<QueueEntry>, usize) {
        (Vec::new(), 0)
    }
}
