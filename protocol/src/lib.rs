//! Racetrack's wire protocol: the only crate that defines what travels between the
//! in-process agent and the debugger. JSON text frames over a WebSocket (streamed events
//! optionally in binary [`binary`] frames); see
//! `docs/PROTOCOL.md` for the prose version.
//!
//! - The agent sends [`Event`]s: `hello` and `structure` first, then `snapshot`, then
//!   `batch` frames of streamed events and single frames for held events and replies.
//! - The debugger sends [`Command`]s. The same JSON objects, one per line, are the
//!   `racetrack ctl` scripting interface (`docs/PROTOCOL.md`, "Commands"); `ctl` adds `wait` and
//!   prints `output` and `exit` itself.
//!
//! Field names are part of the contract; golden tests (`tests/golden.rs`) pin them.

pub mod binary;
mod call;
mod command;
mod compact;
mod ctl;
mod deadlock;
mod error;
mod full;
pub mod launch;
mod packed;
pub mod replay_log;
pub mod trace;
mod varint;

pub use binary::{BinaryWriter, BINARY_HEADER};
pub use call::{
    AnyTag, Awaited, CallInfo, Collective, ConditionError, Created, Forced, Matched, Peer, SpecialPeer, Tag,
    When,
};
pub use command::{Command, Request, Rest};
pub use compact::{Compact, Kind, MsgPath, PackedEv, PackedTuple, Record, RecordText, SentBy};
pub use ctl::CtlEvent;
pub use deadlock::{Needs, Waiting};
pub use error::{BinaryFrame, CommandError, DecodeError, RequestError};
pub use packed::{Decoded, Decoder, Names};
use serde::{Deserialize, Serialize};
use serde_json::Value;
pub use smol_str::SmolStr;

/// Version of the wire protocol, sent in `hello`. A debugger refuses other versions.
pub const PROTOCOL_VERSION: u32 = 4;

/// Largest frame either side accepts (bytes). Larger frames close that connection.
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// What a step of an operation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// The single step of a split or leaf.
    Run,
    /// A merge or stream absorbing one input.
    Absorb,
    /// The final step of a merge or stream.
    Final,
}

/// Why an event is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HoldReason {
    /// `RACETRACK_WAIT=1`: the first operation waits for Continue.
    Wait,
    /// Global step mode.
    Step,
    /// An operation breakpoint.
    Break,
    /// The thread is paused (thread breakpoint).
    Pause,
    /// The step consumes a traced message.
    Trace,
    /// "Ack every event" mode (the thesis' design, for comparison).
    AckAll,
}

/// An operation of the flow graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperationDesc {
    /// The operation's name, unique across the program's graphs.
    pub name: String,
    /// `split`, `leaf`, `merge` or `stream`.
    pub kind: String,
    /// Collection it runs on.
    pub collection: String,
    /// The threads where it may run (its collection's threads).
    pub threads: Vec<String>,
}

/// A thread collection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectionDesc {
    /// Name, e.g. `proc`.
    pub name: String,
    /// Thread names, e.g. `proc[0]`.
    pub threads: Vec<String>,
}

/// A pending message in a thread's queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueEntry {
    /// Message id (inline: ids are short, and a debugger keeps one per pending message).
    pub id: SmolStr,
    /// Rust type name.
    #[serde(rename = "type")]
    pub type_name: String,
    /// Sending operation and thread, `Op@thread` (absent for a schedule's input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Destination operation and thread, `Op@thread`.
    pub to: String,
    /// The destination operation (what `to` names before its `@`).
    pub op: SmolStr,
    /// Whether it is traced.
    #[serde(default)]
    pub traced: bool,
    /// Content, when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
}

/// The step a thread is running (or about to run) when a snapshot is taken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CurrentStep {
    /// The operation whose step it is.
    pub op: String,
    /// The message the step consumes (final steps: the output id).
    pub msg: String,
    /// Run, absorb or final.
    pub step: Step,
}

/// One thread in a snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadSnapshot {
    /// The thread's name, as in the `structure`.
    pub thread: String,
    /// Pending messages in order (the first ones, when there are many).
    pub queue: Vec<QueueEntry>,
    /// Pending messages after `queue`, not listed (absent: none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more: usize,
    /// Running step, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<CurrentStep>,
    /// The process the thread runs in, when it is not the `hello`'s: each rank of an MPI
    /// job, whose ranks are the threads of one session (absent: the `hello`'s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A send event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendEv {
    /// Event number (what acknowledgments and `edit` refer to).
    pub event_id: u64,
    /// Sending thread (absent: the schedule caller injects an input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<SmolStr>,
    /// The operation that posted the message (absent with `thread`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<SmolStr>,
    /// The message's id (deterministic: dotted, as `0.3.1`).
    pub msg: SmolStr,
    /// Destination operation (absent: the result returns to the schedule caller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_op: Option<SmolStr>,
    /// Destination thread as routed before any edit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_thread: Option<SmolStr>,
    /// Rust type name.
    #[serde(rename = "type")]
    pub type_name: SmolStr,
    /// Whether the message is traced.
    pub traced: bool,
    /// Whether the sending thread waits for an acknowledgment.
    pub held: bool,
    /// Why it is held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<HoldReason>,
    /// Content (always when held; otherwise when content streaming is on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
    /// An MPI call's parameters (the MPI library's events; absent for the runtime's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<Box<CallInfo>>,
}

/// A receive (enqueue) event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecvEv {
    /// The event's number in the stream.
    pub event_id: u64,
    /// The thread whose queue the message joined.
    pub thread: SmolStr,
    /// Operation the message is for.
    pub op: SmolStr,
    /// The id of the message enqueued.
    pub msg: SmolStr,
    /// Position in the queue (0 = head).
    pub position: usize,
    /// Whether it is traced.
    pub traced: bool,
    /// The send this receive matched, when known (see [`Link`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Link>,
    /// An MPI call's parameters (the MPI library's events; absent for the runtime's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<Box<CallInfo>>,
}

/// The `send` event a receive matched: its thread and event number. An MPI job's
/// debugger fills it in from MPI's non-overtaking rule (docs/PROTOCOL.md, "Links").
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Link {
    /// The sending thread (`rank[2]`).
    pub thread: SmolStr,
    /// The `send` event's number.
    pub event_id: u64,
}

/// A step start or stop event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepEv {
    /// The event's number (what `continue` and acknowledgments refer to).
    pub event_id: u64,
    pub thread: SmolStr,
    /// The operation whose step it is.
    pub op: SmolStr,
    /// Message id (final steps: the output id).
    pub msg: SmolStr,
    /// Operation instance (message id; merges and streams: their output id).
    pub instance: SmolStr,
    /// Run, absorb or final.
    pub step: Step,
    /// Start: whether the consumed message is traced. Stop: whether outputs were traced.
    pub traced: bool,
    /// Whether the thread waits for an acknowledgment.
    pub held: bool,
    /// Why it is held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<HoldReason>,
    /// An MPI call's parameters (the MPI library's events; absent for the runtime's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<Box<CallInfo>>,
}

/// Everything the agent reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// First frame of a connection.
    Hello {
        /// The program's name (`RACETRACK_PROGRAM`, or its executable's).
        program: String,
        /// The program's process id.
        pid: u32,
        /// The protocol version the agent speaks ([`PROTOCOL_VERSION`]).
        protocol: u32,
    },
    /// The flow graphs and collections (sent again when a graph is added).
    Structure {
        /// Every operation of every graph, in registration order (packed events index them).
        operations: Vec<OperationDesc>,
        /// Every thread collection, in order (packed events number threads across them).
        collections: Vec<CollectionDesc>,
        /// Message flow between operations.
        edges: Vec<[String; 2]>,
    },
    /// State at attach time; every later event is consistent with it.
    Snapshot {
        /// Next event number: every event in the stream has a number at least this.
        next_event_id: u64,
        /// Per thread: queue and running step.
        threads: Vec<ThreadSnapshot>,
        /// Events held at attach time (e.g. the `RACETRACK_WAIT` hold).
        held: Vec<Event>,
    },
    /// Several streamed events in order.
    Batch { events: Vec<Event> },
    /// A message is sent (before delivery).
    Send(SendEv),
    /// A message is enqueued.
    Recv(RecvEv),
    /// A step is about to start.
    Start(StepEv),
    /// A step stopped.
    Stop(StepEv),
    /// A held event was released.
    Released {
        event_id: u64,
        /// The thread that resumes.
        thread: String,
    },
    /// Reply to `queue`, and after a reorder.
    Queue {
        thread: String,
        /// Pending messages in order (the first ones, when there are many).
        messages: Vec<QueueEntry>,
        /// Pending messages after `messages`, not listed (absent: none).
        #[serde(default, skip_serializing_if = "is_zero")]
        more: usize,
    },
    /// Reply to `state`.
    State {
        thread: String,
        /// The thread-local state.
        content: Value,
    },
    /// A command was applied (`edit`, `reorder`, `set_state`; and any command sent with
    /// a request number: see [`Request`]).
    Ok {
        /// The command's name.
        cmd: String,
        /// What it applied to, when useful (thread name or event id).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<String>,
        /// The request number the command carried (absent: it carried none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        req: Option<u64>,
    },
    /// Ranks of an MPI job that can never go on (added by the job's debugger; see
    /// [`Waiting`]): each waits in a call for ranks that are themselves stuck or
    /// finished. The program is left as it is.
    Deadlock {
        /// Every stuck rank: its call and whom it waits for.
        waits: Vec<Waiting>,
        /// A cycle among them, when there is one: each waits for the next, the last for
        /// the first (empty: they wait for finished ranks).
        cycle: Vec<String>,
    },
    /// An MPI rank is inside an MPI call the interposition library does not report (an
    /// MPI-IO call, a neighbour collective, ...; or a covered call it made before the
    /// debugger attached), as a sample of its stack found it after the rank had reported
    /// nothing for a second; or, without `call`, it has left such a call without
    /// reporting anything since. The rank's next `start` ends it too.
    Unreported {
        /// The rank (`rank[1]`).
        thread: String,
        /// The call, as the C binding spells it (`MPI_File_write_all`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call: Option<String>,
        /// Where the program called it from, when known (as a call's `site`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        site: Option<String>,
        /// A call the library covers, begun before the debugger attached.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        before_attach: bool,
    },
    /// A scenario: the session's choices as a replay log, in hex, for the debugger to
    /// write on its own machine. With `path`: the answer to `save_scenario` (an MPI
    /// rank's is its part of the job's scenario, which the job's debugger merges). Without:
    /// the program's session as it ended (a runtime program's when its runtime is dropped,
    /// an MPI rank's as it calls `MPI_Finalize`), which the debugger keeps so that a
    /// scenario can still be saved once the program, or the rank, is gone. The debugger
    /// does not pass it on: it writes the file and answers `ok` or `error`.
    Scenario {
        /// Where `save_scenario` asked for it (absent: the session as it ended).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
        /// The replay log's bytes, two lowercase hex digits each.
        log: String,
        /// What it holds, in words.
        summary: String,
        /// The request number `save_scenario` carried.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        req: Option<u64>,
    },
    /// An operation panicked or broke a rule; the schedule call fails.
    Panic {
        thread: String,
        /// The operation that panicked.
        op: String,
        /// The message it was processing.
        msg: String,
        /// Panic text or rule.
        message: String,
    },
    /// A command could not be applied (nothing changed), or something went wrong.
    Error {
        /// What was wrong.
        message: String,
        /// The request number of the refused command, when it carried one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        req: Option<u64>,
    },
}

impl Event {
    /// The event number, for events that have one.
    pub fn event_id(&self) -> Option<u64> {
        match self {
            Event::Send(e) => Some(e.event_id),
            Event::Recv(e) => Some(e.event_id),
            Event::Start(e) | Event::Stop(e) => Some(e.event_id),
            _ => None,
        }
    }

    /// Whether the event holds its thread.
    pub fn is_held(&self) -> bool {
        match self {
            Event::Send(e) => e.held,
            Event::Start(e) | Event::Stop(e) => e.held,
            _ => false,
        }
    }

    /// The thread the event belongs to.
    pub fn thread(&self) -> Option<&str> {
        match self {
            Event::Send(e) => e.thread.as_deref(),
            Event::Recv(e) => Some(&e.thread),
            Event::Start(e) | Event::Stop(e) => Some(&e.thread),
            Event::Released { thread, .. }
            | Event::Queue { thread, .. }
            | Event::State { thread, .. }
            | Event::Unreported { thread, .. } => Some(thread),
            _ => None,
        }
    }

    /// The event as one JSON line.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"event\":\"error\",\"message\":\"{e}\"}}"))
    }
}
