//! Errors of graph construction and schedule calls.

/// A flow graph that cannot be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BuildError {
    /// A merge or stream has no open split (or stream) before it to match.
    #[error("operation `{0}` is a {1} but no split or stream before it is left to match")]
    UnmatchedMerge(String, &'static str),
    /// A split or stream is never closed by a merge or stream.
    #[error("the outputs of `{0}` are never merged: add a merge (or stream) after it")]
    UnclosedSplit(String),
    /// Two operations share a name (names identify breakpoints).
    #[error("an operation named `{0}` already exists in this runtime")]
    DuplicateName(String),
    /// An operation runs on a collection of another runtime.
    #[error("operation `{0}` runs on a collection of another runtime")]
    ForeignCollection(String),
    /// The graph has no operations.
    #[error("a flow graph needs at least one operation")]
    Empty,
}

/// Why a schedule call did not return its final message.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ScheduleError {
    /// An operation panicked.
    #[error("operation `{op}` panicked on thread {thread} while processing message {msg}: {message}")]
    Panic {
        /// The operation whose step panicked.
        op: String,
        /// Thread name, e.g. `proc[2]`.
        thread: String,
        /// Message id (for a merge's final step: its output id).
        msg: String,
        /// The panic payload.
        message: String,
    },
    /// An operation broke a rule of the model (routing out of range, a split without
    /// outputs, a merge instance spread over several threads, ...).
    #[error("operation `{op}` on thread {thread}, message {msg}: {message}")]
    Operation {
        /// The operation whose step broke the rule.
        op: String,
        /// The thread it ran on, e.g. `proc[2]`.
        thread: String,
        /// The message it was processing (for a final step: the output id).
        msg: String,
        /// What went wrong.
        message: String,
    },
    /// The runtime shut down before the schedule finished.
    #[error("the runtime shut down before the schedule call finished")]
    Shutdown,
}

/// Why a message's content or a thread's state cannot be read or replaced as JSON.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContentError {
    /// The value does not serialize.
    #[error("{0}")]
    ToJson(#[source] serde_json::Error),
    /// The replacement does not deserialize as the message's type.
    #[error("does not deserialize as {type_name}: {source}")]
    Message {
        /// The message's (short) type name.
        type_name: &'static str,
        /// serde's error.
        source: serde_json::Error,
    },
    /// The replacement does not deserialize as the thread state's type.
    #[error("does not deserialize as the thread state {type_name}: {source}")]
    State {
        /// The state's (short) type name.
        type_name: &'static str,
        /// serde's error.
        source: serde_json::Error,
    },
    /// The thread is suspended mid-step, where the operation holds its state.
    #[error(
        "the thread is suspended inside an operation (at a send); its state is only accessible at a step start or stop"
    )]
    StateBusy,
}

/// Why a debugger's new order of a thread's pending messages is refused (nothing changes).
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReorderError {
    /// An entry names no pending message.
    #[error("`{entry}` is not pending on this thread")]
    NotPending {
        /// The entry (`id` or `id@op`).
        entry: String,
    },
    /// An id that several pending messages share, for different operations.
    #[error("`{entry}` is ambiguous here: write one of {}", alternatives.join(", "))]
    Ambiguous {
        /// The entry.
        entry: String,
        /// The `id@op` forms that would name one message.
        alternatives: Vec<String>,
    },
    /// An entry naming a message already named.
    #[error("`{entry}` appears twice in the new order")]
    Twice {
        /// The entry.
        entry: String,
    },
    /// A full order that leaves pending messages out.
    #[error("the new order must name every pending message; missing: {}", missing.join(", "))]
    Missing {
        /// The ids of the messages left out.
        missing: Vec<String>,
    },
}
