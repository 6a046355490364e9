//! Replay logs (`racetrack record`, `RACETRACK_RECORD=FILE`): what a free run of a program
//! on Racetrack's runtime did not determine itself, so that `racetrack replay` can force it
//! again. `docs/PROTOCOL.md` ("Replay logs") documents the layout.
//!
//! Message ids are deterministic, routing is a function of the message, and the messages
//! one thread sends to another arrive in the order they were sent (every queue is FIFO).
//! What a run leaves to timing is therefore only, for each thread, how the messages of its
//! different senders interleaved in its queue. A log holds exactly that, per thread, as
//! runs: "the next `count` steps take messages from `sender`". A thread fed by one sender
//! costs one run in all; the log grows only where senders alternate, that is where their
//! messages raced (Netzer and Miller's observation that only racing messages need
//! tracing, with the prediction "the same sender as the previous step").
//!
//! Layout: an 8-byte magic ([`LOG_MAGIC`]), the format (u16 LE, [`LOG_FORMAT`]), 2 bytes
//! of flags (0), then the header's JSON ([`LogHeader`]) as a u32 LE length and the text.
//! Then records, each a tag byte:
//! - [`TAG_RUNS`]: the thread's global index (varint), the number of runs (varint), then
//!   each run's sender (varint: 0 for a schedule's input, else the sending thread's global
//!   index plus one) and count, together as one varint `sender × 2 + (count > 1)`,
//!   followed by `count − 2` as a varint when count > 1. Most runs are one step long
//!   where senders race, and cost one byte. A thread's runs are the concatenation of its
//!   records in file order.
//! - [`TAG_EDIT`]: the JSON of an [`Edit`] (a u32 LE length and the text): a change the
//!   user made in the recorded session (a scenario), made again at the same step.
//! - [`TAG_END`]: the summary's JSON ([`LogEnd`]) as a u32 LE length and the text; the
//!   last record of a log whose recorded program finished, or of a scenario saved
//!   mid-session (`prefix`).
//! - [`TAG_CALLS`] (MPI jobs): a rank (varint), the number of choices (varint), then each
//!   [`Choice`]: the calls skipped since the previous choice's last call (varint), a byte
//!   `kind << 6 | op` (op: the call's index in the MPI library's call list), and the
//!   kind's numbers as varints: [`Chose::Match`] source and tag (zigzag), [`Chose::Miss`]
//!   the run's length minus one, [`Chose::Index`] the index, [`Chose::Indices`] their
//!   count and each.
//! - [`TAG_RANK_END`] (MPI jobs): a rank (varint) and the calls it made (varint): that
//!   rank reached `MPI_Finalize`.
//! - [`TAG_CLOCKS`] (MPI jobs): a rank (varint), a count (varint), then each clock
//!   reading (`MPI_Wtime`, or `time()` as a double), its IEEE 754 bits (as an i64) less the rank's previous
//!   reading's (zigzag varint; the first less 0). Exact: a replay returns the very value,
//!   and readings a millisecond apart differ by a few thousand in their bits (2 bytes).
//!   A rank's readings are the concatenation of its records.
//!
//! An MPI job's log holds, per rank, only what MPI leaves to timing: the source and tag
//! each receive or probe from `MPI_ANY_SOURCE` matched, the polls (`MPI_Test*`, `MPI_Iprobe`) that
//! found nothing (as runs; a poll not in one found something), and which requests each
//! `MPI_Waitany`/`Testany`/`Waitsome`/`Testsome` completed; and what the program's clocks
//! read (`MPI_Wtime`, `time()`), since a program may size its loops by the clock or seed a
//! choice with it (hpcc does both). Receives that name their
//! source and tag cost nothing: MPI's non-overtaking rule makes their match a function of
//! the sends.

mod read;

use crate::varint::{put_u, zigzag};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The first 8 bytes of a replay log (a non-ASCII byte first, as PNG does).
pub const LOG_MAGIC: [u8; 8] = *b"\x89RTREPL\n";
/// The layout version this crate writes and reads.
pub const LOG_FORMAT: u16 = 1;
/// A record of runs of one thread.
pub const TAG_RUNS: u8 = 1;
/// The summary that ends a complete log.
pub const TAG_END: u8 = 2;
/// An edit of the recorded session.
pub const TAG_EDIT: u8 = 3;
/// An MPI rank's choices.
pub const TAG_CALLS: u8 = 4;
/// An MPI rank reached `MPI_Finalize`.
pub const TAG_RANK_END: u8 = 5;
/// An MPI rank's clock readings.
pub const TAG_CLOCKS: u8 = 6;
/// The sender code of a schedule's input (the program's own thread, outside the runtime).
pub const SENDER_INPUT: u64 = 0;
/// Largest JSON part accepted (a header or summary beyond it is damage, not data).
const MAX_JSON: usize = 64 * 1024 * 1024;

/// What the recorded run was.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogHeader {
    /// The program as it was started (`argv[0]`).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// An MPI job's: how it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpi: Option<MpiJob>,
}

/// How a recorded MPI job ran.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MpiJob {
    /// Its number of ranks.
    pub ranks: usize,
    /// `mpich` or `openmpi`.
    pub implementation: String,
}

/// One nondeterministic outcome of an MPI rank's call number `call` (from 0, counting
/// every MPI call the rank made on its `MPI_Init` thread).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// The call's number (the first, for a [`Chose::Miss`] run).
    pub call: u64,
    /// The call's index in the MPI library's call list (a check that a replay makes the
    /// same call there).
    pub op: u8,
    /// What it came to.
    pub what: Chose,
}

/// What an MPI call's outcome was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chose {
    /// A wildcard receive or probe (or an `MPI_Iprobe` that found) matched a message from
    /// `source` (in the call's communicator) with `tag`.
    Match {
        /// The source rank.
        source: i32,
        /// The tag.
        tag: i32,
    },
    /// The `n` polls from this call on (identical calls, one after the other) found
    /// nothing.
    Miss {
        /// How many.
        n: u64,
    },
    /// `MPI_Waitany`/`Testany` completed the request at this index.
    Index(u32),
    /// `MPI_Waitsome`/`Testsome` completed the requests at these indices, in order.
    Indices(Vec<u32>),
}

impl Choice {
    /// The calls it covers: one, or a [`Chose::Miss`] run's.
    pub fn calls(&self) -> u64 {
        match self.what {
            Chose::Miss { n } => n.max(1),
            _ => 1,
        }
    }
}

/// One MPI rank's part of a log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RankLog {
    /// Its choices, by call.
    pub choices: Vec<Choice>,
    /// The calls it made up to `MPI_Finalize`; `None` if it did not get there (the log
    /// covers a prefix of its run).
    pub calls: Option<u64>,
    /// What its `MPI_Wtime` calls read, in order, as `f64::to_bits`.
    pub clocks: Vec<u64>,
}

/// One thread of the recorded run, in the summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogThread {
    /// `collection[index]`, e.g. `proc[1]`.
    pub name: String,
    /// Steps on messages it made (final steps, which need no message, are not counted).
    pub steps: u64,
}

/// The summary a complete log ends with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEnd {
    /// Every thread of the run, by global index.
    pub threads: Vec<LogThread>,
    /// Every operation of the run's flow graphs, by index among all of them.
    #[serde(default)]
    pub ops: Vec<String>,
    /// The log stops before the run ended (a scenario saved mid-session): a replay
    /// follows it, then runs free. `threads[].steps` count the steps logged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prefix: bool,
}

/// A change the user made during a recorded session, and where: thread `thread`'s step
/// number `step` (from 1: its steps on messages, in order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Edit {
    /// The thread's global index.
    pub thread: usize,
    /// The step it happened in (a send), or at (a state replaced at a start or stop).
    pub step: u64,
    /// What changed.
    #[serde(flatten)]
    pub what: EditKind,
}

/// What an [`Edit`] changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "edit", rename_all = "snake_case")]
pub enum EditKind {
    /// The content of the message `msg` for operation `op`, sent in the step.
    Send {
        /// The message id.
        msg: String,
        /// The operation it is for.
        op: String,
        /// The content it was given.
        content: serde_json::Value,
    },
    /// The thread's state, at the step's start (`stop`: false) or stop.
    State {
        /// At the step's stop.
        stop: bool,
        /// The state it was given.
        content: serde_json::Value,
    },
}

/// "The next `count` steps of this thread take messages from `sender`."
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Run {
    /// [`SENDER_INPUT`], or the sending thread's global index plus one.
    pub sender: u64,
    /// Steps in the run (at least 1).
    pub count: u64,
}

/// A replay log read back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplayLog {
    /// What was recorded.
    pub header: LogHeader,
    /// Each thread's runs, by global index (threads that made no step have none).
    pub threads: Vec<Vec<Run>>,
    /// The summary; `None` when the recorded program did not finish normally (the log
    /// then covers a prefix of its run).
    pub end: Option<LogEnd>,
    /// The user's edits, in the order they were made.
    pub edits: Vec<Edit>,
    /// An MPI job's ranks, by rank.
    pub ranks: Vec<RankLog>,
}

/// Why a replay log cannot be read: the problem and the byte offset where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogError {
    /// Offset in the file of the part at fault.
    pub offset: u64,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for LogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "damaged replay log at byte {}: {}", self.offset, self.what)
    }
}

impl std::error::Error for LogError {}

/// Why the replay log at a path cannot be read: the file, or its content.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadLogError {
    /// The file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The log.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a valid log.
    #[error("{}: {source}", path.display())]
    Damaged {
        /// The log.
        path: std::path::PathBuf,
        /// Where and how.
        source: LogError,
    },
}

/// The header every log begins with: magic, format, flags, then `header` as JSON.
pub fn header_bytes(header: &LogHeader) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&LOG_MAGIC);
    out.extend_from_slice(&LOG_FORMAT.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    put_json(&mut out, header);
    out
}

/// Append a record of `thread`'s runs, already encoded by [`put_run`] (`n` of them).
pub fn put_runs_record(out: &mut Vec<u8>, thread: usize, n: u64, runs: &[u8]) {
    out.push(TAG_RUNS);
    put_u(out, thread as u64);
    put_u(out, n);
    out.extend_from_slice(runs);
}

/// Append one run (`count` at least 1), encoded as a [`TAG_RUNS`] record holds it.
pub fn put_run(out: &mut Vec<u8>, run: Run) {
    let long = run.count > 1;
    put_u(out, run.sender << 1 | u64::from(long));
    if long {
        put_u(out, run.count - 2);
    }
}

/// Where rank `rank` of a job recording the log `log` writes its part
/// (`LOG.rank<R>`, a log of its own); `racetrack mpirun --record` merges the parts.
pub fn rank_part_path(log: &str, rank: usize) -> std::path::PathBuf {
    std::path::PathBuf::from(format!("{log}.rank{rank}"))
}

/// `bytes` as lowercase hex (a scenario in a `scenario` event).
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(2 * bytes.len());
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// The bytes of hex text `s`, or `None` if it is not an even number of hex digits.
pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| char::from(c).to_digit(16);
    s.as_bytes()
        .chunks(2)
        .map(|p| match p {
            [a, b] => Some((digit(*a)? << 4 | digit(*b)?) as u8),
            _ => None,
        })
        .collect()
}

/// Append a record of `rank`'s choices (consecutive, in call order), `next` being the
/// first call after the rank's previous record (0 for its first); returns the `next` of
/// the record after it.
pub fn put_calls_record(out: &mut Vec<u8>, rank: usize, mut next: u64, choices: &[Choice]) -> u64 {
    out.push(TAG_CALLS);
    put_u(out, rank as u64);
    put_u(out, choices.len() as u64);
    for c in choices {
        put_u(out, c.call.saturating_sub(next));
        let (kind, nums): (u8, Vec<u64>) = match &c.what {
            Chose::Match { source, tag } => (0, vec![zigzag(i64::from(*source)), zigzag(i64::from(*tag))]),
            Chose::Miss { n } => (1, vec![n.max(&1) - 1]),
            Chose::Index(i) => (2, vec![u64::from(*i)]),
            Chose::Indices(v) => (
                3,
                std::iter::once(v.len() as u64)
                    .chain(v.iter().map(|&i| u64::from(i)))
                    .collect(),
            ),
        };
        out.push(kind << 6 | (c.op & 63));
        for n in nums {
            put_u(out, n);
        }
        next = c.call + c.calls();
    }
    next
}

/// Append a record of `rank`'s clock readings (`f64::to_bits`), `prev` being its last
/// reading before them (0 for its first record); returns the last.
pub fn put_clocks_record(out: &mut Vec<u8>, rank: usize, mut prev: u64, readings: &[u64]) -> u64 {
    out.push(TAG_CLOCKS);
    put_u(out, rank as u64);
    put_u(out, readings.len() as u64);
    for &r in readings {
        put_u(out, zigzag(r.wrapping_sub(prev) as i64));
        prev = r;
    }
    prev
}

/// The record that says `rank` reached `MPI_Finalize` after `calls` calls.
pub fn rank_end_record(rank: usize, calls: u64) -> Vec<u8> {
    let mut out = vec![TAG_RANK_END];
    put_u(&mut out, rank as u64);
    put_u(&mut out, calls);
    out
}

/// The record of one edit.
pub fn edit_record(edit: &Edit) -> Vec<u8> {
    let mut out = vec![TAG_EDIT];
    put_json(&mut out, edit);
    out
}

/// The record that ends a complete log.
pub fn end_record(end: &LogEnd) -> Vec<u8> {
    let mut out = vec![TAG_END];
    put_json(&mut out, end);
    out
}

fn put_json(out: &mut Vec<u8>, value: &impl Serialize) {
    let text = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    let len = u32::try_from(text.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&text);
}

impl ReplayLog {
    /// Read a log from its bytes. Every damage is an error naming its byte, never a panic.
    pub fn parse(b: &[u8]) -> Result<Self, LogError> {
        read::Reader::new(b).log()
    }

    /// Read the log at `path`.
    pub fn read(path: &std::path::Path) -> Result<Self, ReadLogError> {
        let bytes = std::fs::read(path).map_err(|source| ReadLogError::Io {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&bytes).map_err(|source| ReadLogError::Damaged {
            path: path.to_owned(),
            source,
        })
    }

    /// Steps the log holds, over all threads.
    pub fn steps(&self) -> u64 {
        self.threads.iter().flatten().map(|r| r.count).sum()
    }

    /// Whether the log covers the whole recorded run (not a prefix).
    pub fn complete(&self) -> bool {
        self.end.as_ref().is_some_and(|e| !e.prefix)
    }

    /// Runs the log holds, over all threads.
    pub fn runs(&self) -> usize {
        self.threads.iter().map(Vec::len).sum()
    }

    /// Choices the log holds, over all MPI ranks.
    pub fn choices(&self) -> usize {
        self.ranks.iter().map(|r| r.choices.len()).sum()
    }
}

#[cfg(test)]
mod tests;
