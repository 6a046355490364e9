//! `racetrack export --perfetto`: a trace file (`RACETRACK_TRACE`) as the Chrome /
//! Perfetto trace-event JSON that `ui.perfetto.dev` and `chrome://tracing` read: one
//! track (`tid`) per thread, each step a complete slice (`X`) named by its operation, each
//! message a flow (`s` → `f`, bound to the step that consumed it), thread and process
//! names as metadata (`M`). Times are the trace's, in microseconds.

use racetrack_protocol::trace::{TraceError, TraceReader};
use racetrack_protocol::{Event, SendEv, Step, StepEv};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

/// The track of sends no thread made (the schedule caller injecting inputs).
const CALLER: &str = "(schedule caller)";

/// What an export wrote.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Events read from the trace.
    pub events: u64,
    /// Step slices written.
    pub slices: u64,
    /// Message flows written.
    pub flows: u64,
    /// Tracks (threads) named.
    pub tracks: u64,
    /// The reader's warning (a record cut short at the end), if any.
    pub warning: Option<String>,
}

/// Why an export failed.
#[derive(Debug)]
pub enum ExportError {
    /// The trace could not be read.
    Trace(TraceError),
    /// The output could not be written.
    Write(std::path::PathBuf, std::io::Error),
}

impl std::fmt::Display for ExportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExportError::Trace(e) => write!(f, "{e}"),
            ExportError::Write(p, e) => write!(f, "cannot write {}: {e}", p.display()),
        }
    }
}

/// The JSON a trace becomes, built as the events are read.
#[derive(Default)]
struct Builder {
    pid: u64,
    out: Vec<Value>,
    tids: HashMap<String, u64>,
    /// Each thread's step in progress: its start event and time (ns).
    open: HashMap<u64, (StepEv, u64)>,
    /// Each message's send: its track and time (ns).
    sends: HashMap<String, (u64, u64)>,
    summary: Summary,
}

impl Builder {
    /// The track of `thread`, named on first use.
    fn tid(&mut self, thread: &str) -> u64 {
        if let Some(&t) = self.tids.get(thread) {
            return t;
        }
        let t = self.tids.len() as u64 + 1;
        self.tids.insert(thread.to_owned(), t);
        self.out.push(json!({
            "ph": "M", "name": "thread_name", "pid": self.pid, "tid": t, "ts": 0,
            "args": {"name": thread},
        }));
        // Tracks sorted as the program numbers its threads.
        self.out.push(json!({
            "ph": "M", "name": "thread_sort_index", "pid": self.pid, "tid": t, "ts": 0,
            "args": {"sort_index": t},
        }));
        self.summary.tracks += 1;
        t
    }

    fn event(&mut self, ev: Event, ns: u64) {
        match ev {
            Event::Hello { program, pid, .. } => {
                self.pid = u64::from(pid);
                self.out.push(json!({
                    "ph": "M", "name": "process_name", "pid": self.pid, "tid": 0, "ts": 0,
                    "args": {"name": program},
                }));
            }
            Event::Structure { collections, .. } => {
                for t in collections.iter().flat_map(|c| &c.threads) {
                    self.tid(t);
                }
            }
            Event::Send(s) => self.send(s, ns),
            Event::Start(s) => {
                let tid = self.tid(&s.thread);
                self.flow_to(&s, tid, ns);
                self.open.insert(tid, (s, ns));
            }
            Event::Stop(s) => {
                let tid = self.tid(&s.thread);
                if let Some((start, t0)) = self.open.remove(&tid) {
                    self.slice(tid, &start, t0, ns);
                }
            }
            _ => {}
        }
    }

    fn send(&mut self, s: SendEv, ns: u64) {
        let tid = match &s.thread {
            Some(t) => self.tid(t),
            None => {
                // An input from outside any step: a point on the caller's track, so that
                // its flow has a slice to leave from.
                let tid = self.tid(CALLER);
                self.out.push(json!({
                    "ph": "X", "name": "schedule", "pid": self.pid, "tid": tid, "ts": us(ns), "dur": 0,
                    "args": {"msg": s.msg},
                }));
                tid
            }
        };
        self.sends.insert(s.msg.to_string(), (tid, ns));
    }

    /// The flow of the message a step consumes (final steps consume none), from its send.
    fn flow_to(&mut self, s: &StepEv, tid: u64, ns: u64) {
        if s.step == Step::Final {
            return;
        }
        let Some((from, sent)) = self.sends.remove(s.msg.as_str()) else {
            return;
        };
        self.summary.flows += 1;
        let id = self.summary.flows;
        // A send is reported when its step's outputs are posted, which may be read after
        // the step's stop: the flow leaves at the send, or within the slice it belongs to.
        self.out.push(json!({
            "ph": "s", "name": "message", "cat": "message", "id": id, "pid": self.pid,
            "tid": from, "ts": us(sent.min(ns)),
        }));
        self.out.push(json!({
            "ph": "f", "bp": "e", "name": "message", "cat": "message", "id": id,
            "pid": self.pid, "tid": tid, "ts": us(ns),
        }));
    }

    fn slice(&mut self, tid: u64, start: &StepEv, t0: u64, t1: u64) {
        let step = match start.step {
            Step::Run => "run",
            Step::Absorb => "absorb",
            Step::Final => "final",
        };
        self.out.push(json!({
            "ph": "X", "name": start.op, "cat": step, "pid": self.pid, "tid": tid,
            "ts": us(t0), "dur": us(t1.saturating_sub(t0)),
            "args": {"msg": start.msg, "instance": start.instance, "event": start.event_id},
        }));
        self.summary.slices += 1;
    }
}

/// Nanoseconds as the format's microseconds (nanosecond precision).
fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// Convert the trace at `trace` into Perfetto JSON at `out`.
pub fn perfetto(trace: &Path, out: &Path) -> Result<Summary, ExportError> {
    let mut reader = TraceReader::open(trace).map_err(ExportError::Trace)?;
    let mut b = Builder::default();
    for ev in reader.by_ref() {
        let ev = ev.map_err(ExportError::Trace)?;
        b.summary.events += 1;
        b.event(ev.event, ev.time_ns);
    }
    b.summary.warning = reader.warning().map(str::to_owned);
    let write = || -> std::io::Result<()> {
        let f = std::fs::File::create(out)?;
        let mut w = std::io::BufWriter::new(f);
        serde_json::to_writer(&mut w, &json!({"traceEvents": b.out, "displayTimeUnit": "ns"}))?;
        w.flush()
    };
    write().map_err(|e| ExportError::Write(out.to_owned(), e))?;
    Ok(b.summary)
}
