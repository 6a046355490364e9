//! Why a frame from an agent cannot be decoded ([`DecodeError`]), and why a command from
//! the debugger cannot be ([`CommandError`], [`RequestError`]).

use std::fmt;

/// The binary layout a [`DecodeError`] was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryFrame {
    /// A binary packed frame ([`crate::binary`]).
    Packed,
}

impl fmt::Display for BinaryFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BinaryFrame::Packed => "binary packed frame",
        })
    }
}

/// Why a frame (text or binary) or a packed event cannot be decoded. Byte offsets (`at`)
/// count from the frame's first byte.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// A text frame that is not a valid event.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// A binary frame of another layout than [`crate::binary::BINARY_PACKED`]. Layout 2,
    /// the MPI library's binary event frames of protocol 1, is one: its events are binary
    /// packed frames now.
    #[error(
        "binary frame of unknown layout {found} (this debugger reads layout {}{})",
        crate::binary::BINARY_PACKED,
        if *found == 2 { "; layout 2 is the MPI event frame of protocol 1, written by an older agent" } else { "" }
    )]
    UnknownLayout {
        /// The frame's first byte.
        found: u8,
    },
    /// A binary frame of no bytes at all.
    #[error("empty binary frame")]
    Empty,
    /// A binary frame too short for its event count.
    #[error("{frame}: no event count")]
    NoCount {
        /// Which layout.
        frame: BinaryFrame,
    },
    /// A header's event count that the frame's bytes cannot hold.
    #[error("{frame}: {count} events cannot fit in {bytes} bytes")]
    CountTooLarge {
        /// Which layout.
        frame: BinaryFrame,
        /// The count in the header.
        count: usize,
        /// The bytes after the header.
        bytes: usize,
    },
    /// A frame whose events are not as many as its header says.
    #[error("{frame}: {found} events where its header says {count}")]
    CountMismatch {
        /// Which layout.
        frame: BinaryFrame,
        /// The events read.
        found: usize,
        /// The count in the header.
        count: usize,
    },
    /// An event head of no known kind.
    #[error("{frame}: bad event head {head:#04x} at byte {at}")]
    BadHead {
        /// Which layout.
        frame: BinaryFrame,
        /// The head byte.
        head: u8,
        /// Where it is.
        at: usize,
    },
    /// The frame ends inside a value.
    #[error("{frame}: truncated at byte {at}")]
    Truncated {
        /// Which layout.
        frame: BinaryFrame,
        /// Where it ends.
        at: usize,
    },
    /// A varint of more than 64 bits.
    #[error("{frame}: number too large at byte {at}")]
    NumberTooLarge {
        /// Which layout.
        frame: BinaryFrame,
        /// Where it is.
        at: usize,
    },
    /// A number out of its field's range.
    #[error("{frame}: number out of range at byte {at}")]
    OutOfRange {
        /// Which layout.
        frame: BinaryFrame,
        /// Where it is.
        at: usize,
    },
    /// A `send`'s type name in a binary packed frame that is not UTF-8.
    #[error("binary packed frame: event {event_id}: text is not UTF-8: {source}")]
    PackedTextNotUtf8 {
        /// The event carrying it.
        event_id: u64,
        /// Where the bytes went wrong.
        source: std::str::Utf8Error,
    },
    /// A call's string in a binary packed frame that is not UTF-8.
    #[error("binary packed frame: text at byte {at} is not UTF-8: {source}")]
    TextNotUtf8 {
        /// Where the string starts.
        at: usize,
        /// Where the bytes went wrong.
        source: std::str::Utf8Error,
    },
    /// A call carrying fields this debugger does not know.
    #[error("binary packed frame: unknown call fields {mask:#x} at byte {at}")]
    UnknownCallFields {
        /// The call's field mask.
        mask: u64,
        /// Where it is.
        at: usize,
    },
    /// A packed event naming an operation or thread the latest `structure` does not have.
    #[error("packed event names {what} #{index}, which the structure does not have")]
    UnknownName {
        /// `"operation"` or `"thread"`.
        what: &'static str,
        /// The index it names.
        index: i64,
    },
    /// A packed `start` or `stop` of no known step.
    #[error("packed event {event_id} has unknown step {step}")]
    UnknownStep {
        /// The event.
        event_id: u64,
        /// Its step code.
        step: i64,
    },
    /// A packed event other than a `send` without its thread or operation.
    #[error("packed event {event_id} has no thread or operation")]
    NoThreadOrOperation {
        /// The event.
        event_id: u64,
    },
}

/// Why a command line (JSON text) is not a valid [`crate::Command`]. The messages are the
/// ones an agent's `error` event and `racetrack ctl` print.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// Not JSON at all.
    #[error("malformed JSON: {0}")]
    MalformedJson(serde_json::Error),
    /// No `cmd` field.
    #[error("missing `cmd` field")]
    MissingCmd,
    /// A `cmd` that is not a string.
    #[error("`cmd` must be a string")]
    CmdNotString,
    /// A `req` that is not a request number.
    #[error("`req` must be a non-negative integer, not {found}")]
    BadReq {
        /// The value it has.
        found: serde_json::Value,
    },
    /// An unknown command, or one with a missing, unknown or mistyped field.
    #[error("bad `{cmd}` command: {error}")]
    Bad {
        /// The command's `cmd`, as sent.
        cmd: String,
        /// What serde found wrong.
        error: serde_json::Error,
    },
}

/// Why a numbered command line is not a valid [`crate::Request`]: the [`CommandError`],
/// with the request number when it could be read (so the refusal can carry it).
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct RequestError {
    /// The line's `req`, if it could be read.
    pub req: Option<u64>,
    /// What is wrong with the command.
    pub error: CommandError,
}
