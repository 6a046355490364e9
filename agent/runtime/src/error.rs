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
