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

use crate::varint::{get_u, put_u, unzigzag, zigzag, Bad};
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
        let err = |offset: usize, what: String| LogError {
            offset: offset as u64,
            what,
        };
        if b.len() < 12 || b[..8] != LOG_MAGIC {
            return Err(err(
                0,
                "not a replay log (it does not begin with the log's magic bytes)".into(),
            ));
        }
        let format = u16::from_le_bytes([b[8], b[9]]);
        if format != LOG_FORMAT {
            return Err(err(
                8,
                format!("log format {format}; this racetrack reads format {LOG_FORMAT}"),
            ));
        }
        let mut i = 12;
        let header: LogHeader =
            get_json(b, &mut i).map_err(|(at, what)| err(at, format!("header: {what}")))?;
        let mut log = ReplayLog {
            header,
            ..Self::default()
        };
        let varint = |i: &mut usize, what: &str| {
            get_u(b, i).map_err(|e| {
                let why = match e {
                    Bad::Truncated => "the file ends inside it",
                    Bad::TooLarge => "more than 64 bits",
                };
                err(*i, format!("{what}: {why}"))
            })
        };
        // Where each rank's next record starts counting calls, and its last clock reading.
        let mut next_call: Vec<u64> = Vec::new();
        let mut last_clock: Vec<u64> = Vec::new();
        // A rank record's count of items (a byte each at least), checked against the bytes.
        let counted = |i: &mut usize, items: &str, at: usize| -> Result<u64, LogError> {
            let n = varint(i, &format!("count of {items}"))?;
            if n > (b.len() - *i) as u64 {
                return Err(err(
                    at,
                    format!("{n} {items} announced, more than the bytes left"),
                ));
            }
            Ok(n)
        };
        let grow = |log: &mut ReplayLog, next_call: &mut Vec<u64>, last_clock: &mut Vec<u64>, rank: usize| {
            if log.ranks.len() <= rank {
                log.ranks.resize_with(rank + 1, RankLog::default);
            }
            next_call.resize(next_call.len().max(rank + 1), 0);
            last_clock.resize(last_clock.len().max(rank + 1), 0);
        };
        while i < b.len() {
            let at = i;
            if log.end.is_some() {
                return Err(err(at, "bytes after the log's end record".into()));
            }
            match b[i] {
                TAG_RUNS => {
                    i += 1;
                    let thread = varint(&mut i, "thread index")?;
                    let thread = usize::try_from(thread)
                        .ok()
                        .filter(|&t| t < 1 << 20)
                        .ok_or_else(|| err(at, format!("thread index {thread} out of range")))?;
                    let n = varint(&mut i, "run count")?;
                    if n > (b.len() - i) as u64 {
                        return Err(err(at, format!("{n} runs announced, more than the bytes left")));
                    }
                    if log.threads.len() <= thread {
                        log.threads.resize_with(thread + 1, Vec::new);
                    }
                    for _ in 0..n {
                        let head = varint(&mut i, "run sender")?;
                        let count = if head & 1 == 1 {
                            let at = i;
                            varint(&mut i, "run length")?
                                .checked_add(2)
                                .ok_or_else(|| err(at, "a run longer than 2^64 steps".into()))?
                        } else {
                            1
                        };
                        log.threads[thread].push(Run {
                            sender: head >> 1,
                            count,
                        });
                    }
                }
                TAG_EDIT => {
                    i += 1;
                    let edit: Edit =
                        get_json(b, &mut i).map_err(|(at, what)| err(at, format!("edit record: {what}")))?;
                    log.edits.push(edit);
                }
                TAG_CALLS => {
                    i += 1;
                    let rank = rank_index(&mut i, &varint, at)?;
                    let n = counted(&mut i, "choices", at)?;
                    grow(&mut log, &mut next_call, &mut last_clock, rank);
                    for _ in 0..n {
                        let c_at = i;
                        let skip = varint(&mut i, "choice's call")?;
                        let call = next_call[rank]
                            .checked_add(skip)
                            .ok_or_else(|| err(c_at, "a call number beyond 2^64".into()))?;
                        let head = *b
                            .get(i)
                            .ok_or_else(|| err(i, "choice kind: the file ends inside it".into()))?;
                        i += 1;
                        let small = |i: &mut usize, what: &str| -> Result<i32, LogError> {
                            let at = *i;
                            i32::try_from(unzigzag(varint(i, what)?))
                                .map_err(|_| err(at, format!("{what} out of range")))
                        };
                        let index = |i: &mut usize| -> Result<u32, LogError> {
                            let at = *i;
                            u32::try_from(varint(i, "request index")?)
                                .map_err(|_| err(at, "request index out of range".into()))
                        };
                        let what = match head >> 6 {
                            0 => Chose::Match {
                                source: small(&mut i, "matched source")?,
                                tag: small(&mut i, "matched tag")?,
                            },
                            1 => Chose::Miss {
                                n: varint(&mut i, "run of polls")?
                                    .checked_add(1)
                                    .ok_or_else(|| err(c_at, "a run of 2^64 polls".into()))?,
                            },
                            2 => Chose::Index(index(&mut i)?),
                            _ => {
                                let k = varint(&mut i, "index count")?;
                                if k > (b.len() - i) as u64 {
                                    return Err(err(
                                        c_at,
                                        format!("{k} indices announced, more than the bytes left"),
                                    ));
                                }
                                (0..k)
                                    .map(|_| index(&mut i))
                                    .collect::<Result<Vec<_>, _>>()
                                    .map(Chose::Indices)?
                            }
                        };
                        let choice = Choice {
                            call,
                            op: head & 63,
                            what,
                        };
                        next_call[rank] = call
                            .checked_add(choice.calls())
                            .ok_or_else(|| err(c_at, "a call number beyond 2^64".into()))?;
                        log.ranks[rank].choices.push(choice);
                    }
                }
                TAG_CLOCKS => {
                    i += 1;
                    let rank = rank_index(&mut i, &varint, at)?;
                    let n = counted(&mut i, "clock readings", at)?;
                    grow(&mut log, &mut next_call, &mut last_clock, rank);
                    for _ in 0..n {
                        let d = unzigzag(varint(&mut i, "clock reading")?);
                        last_clock[rank] = last_clock[rank].wrapping_add(d as u64);
                        log.ranks[rank].clocks.push(last_clock[rank]);
                    }
                }
                TAG_RANK_END => {
                    i += 1;
                    let rank = rank_index(&mut i, &varint, at)?;
                    let calls = varint(&mut i, "calls made")?;
                    grow(&mut log, &mut next_call, &mut last_clock, rank);
                    if calls < next_call[rank] {
                        return Err(err(
                            at,
                            format!("rank {rank} made {calls} calls, fewer than its choices cover"),
                        ));
                    }
                    log.ranks[rank].calls = Some(calls);
                }
                TAG_END => {
                    i += 1;
                    let end: LogEnd =
                        get_json(b, &mut i).map_err(|(at, what)| err(at, format!("end record: {what}")))?;
                    log.end = Some(end);
                }
                tag => return Err(err(at, format!("unknown record tag {tag}"))),
            }
        }
        Ok(log)
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

/// A rank number (varint) at `*i`, of a record at `at`.
fn rank_index(
    i: &mut usize,
    varint: &impl Fn(&mut usize, &str) -> Result<u64, LogError>,
    at: usize,
) -> Result<usize, LogError> {
    let rank = varint(i, "rank")?;
    usize::try_from(rank)
        .ok()
        .filter(|&r| r < 1 << 20)
        .ok_or_else(|| LogError {
            offset: at as u64,
            what: format!("rank {rank} out of range"),
        })
}

fn get_json<T: for<'de> Deserialize<'de>>(b: &[u8], i: &mut usize) -> Result<T, (usize, String)> {
    let at = *i;
    let len = b
        .get(at..at + 4)
        .map(|l| u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize)
        .ok_or((at, "the file ends inside its length".to_owned()))?;
    if len > MAX_JSON || at + 4 + len > b.len() {
        return Err((at, format!("a length of {len} bytes, beyond the end of the file")));
    }
    let value =
        serde_json::from_slice(&b[at + 4..at + 4 + len]).map_err(|e| (at + 4, format!("bad JSON: {e}")))?;
    *i = at + 4 + len;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut b = header_bytes(&LogHeader {
            program: "heat".into(),
            args: vec!["--iters".into(), "3".into()],
            mpi: None,
        });
        let mut runs = Vec::new();
        put_run(&mut runs, Run { sender: 0, count: 3 });
        put_run(
            &mut runs,
            Run {
                sender: 2,
                count: 300,
            },
        );
        let two = runs.len();
        put_run(&mut runs, Run { sender: 3, count: 1 });
        assert_eq!(
            runs.len(),
            two + 1,
            "a run of one step from a small sender is one byte"
        );
        put_runs_record(&mut b, 1, 3, &runs);
        runs.clear();
        put_run(&mut runs, Run { sender: 1, count: 1 });
        put_runs_record(&mut b, 1, 1, &runs);
        b.extend(edit_record(&Edit {
            thread: 1,
            step: 4,
            what: EditKind::Send {
                msg: "0.1".into(),
                op: "Update".into(),
                content: serde_json::json!({"x": 1}),
            },
        }));
        b.extend(end_record(&LogEnd {
            threads: vec![
                LogThread {
                    name: "main[0]".into(),
                    steps: 0,
                },
                LogThread {
                    name: "proc[0]".into(),
                    steps: 305,
                },
            ],
            ops: vec!["Split".into()],
            prefix: false,
        }));
        b
    }

    #[test]
    fn reads_back_what_was_written() {
        let log = ReplayLog::parse(&sample()).expect("a valid log");
        assert_eq!(log.header.program, "heat");
        assert_eq!(log.header.args, ["--iters", "3"]);
        assert_eq!(log.threads.len(), 2);
        assert!(log.threads[0].is_empty());
        assert_eq!(
            log.threads[1],
            [
                Run { sender: 0, count: 3 },
                Run {
                    sender: 2,
                    count: 300
                },
                Run { sender: 3, count: 1 },
                Run { sender: 1, count: 1 }
            ]
        );
        assert_eq!(log.steps(), 305);
        assert_eq!(log.runs(), 4);
        assert_eq!(log.edits.len(), 1);
        assert_eq!(log.edits[0].step, 4);
        assert!(matches!(&log.edits[0].what, EditKind::Send { msg, .. } if msg == "0.1"));
        assert!(log.complete());
        let end = log.end.expect("complete");
        assert_eq!(end.threads[1].name, "proc[0]");
        assert_eq!(end.threads[1].steps, 305);
    }

    fn mpi_sample() -> (Vec<u8>, Vec<Choice>) {
        let mut b = header_bytes(&LogHeader {
            program: "master_worker".into(),
            args: vec![],
            mpi: Some(MpiJob {
                ranks: 2,
                implementation: "mpich".into(),
            }),
        });
        let choices = vec![
            Choice {
                call: 3,
                op: 12,
                what: Chose::Match { source: 2, tag: 7 },
            },
            Choice {
                call: 4,
                op: 19,
                what: Chose::Miss { n: 1000 },
            },
            Choice {
                call: 1004,
                op: 19,
                what: Chose::Index(3),
            },
            Choice {
                call: 2000,
                op: 22,
                what: Chose::Indices(vec![0, 5, 1]),
            },
        ];
        let next = put_calls_record(&mut b, 1, 0, &choices[..2]);
        assert_eq!(next, 1004);
        let before = b.len();
        put_calls_record(&mut b, 1, next, &choices[2..3]);
        assert_eq!(
            b.len() - before,
            6,
            "tag, rank, count, and 3 bytes for the choice"
        );
        put_calls_record(&mut b, 1, 1005, &choices[3..]);
        let clocks = [1.764e9_f64, 1.764e9 + 0.001, 1.764e9 - 2.5].map(f64::to_bits);
        let last = put_clocks_record(&mut b, 0, 0, &clocks[..2]);
        let before = b.len();
        put_clocks_record(&mut b, 0, last, &clocks[2..]);
        assert!(
            b.len() - before <= 7,
            "a reading 2.5 s back costs 4 bytes or less"
        );
        b.extend(rank_end_record(1, 2100));
        b.extend(rank_end_record(0, 10));
        (b, choices)
    }

    #[test]
    fn mpi_choices_read_back() {
        let (b, choices) = mpi_sample();
        let log = ReplayLog::parse(&b).expect("a valid log");
        assert_eq!(log.header.mpi.as_ref().map(|m| m.ranks), Some(2));
        assert_eq!(log.ranks.len(), 2);
        assert_eq!(log.ranks[1].choices, choices);
        assert_eq!(log.ranks[1].calls, Some(2100));
        assert_eq!(log.ranks[0].calls, Some(10));
        assert!(log.ranks[0].choices.is_empty());
        assert_eq!(
            log.ranks[0]
                .clocks
                .iter()
                .map(|&c| f64::from_bits(c))
                .collect::<Vec<_>>(),
            [1.764e9, 1.764e9 + 0.001, 1.764e9 - 2.5],
            "readings come back exactly"
        );
        assert!(log.ranks[1].clocks.is_empty());
        assert_eq!(log.choices(), 4);
        for n in 0..b.len() {
            let _ = ReplayLog::parse(&b[..n]);
            let mut c = b.clone();
            c[n] ^= 0xff;
            let _ = ReplayLog::parse(&c);
        }
        // An end that says fewer calls than the choices cover.
        let mut c = b.clone();
        c.extend(rank_end_record(1, 5));
        let e = ReplayLog::parse(&c).expect_err("too few calls");
        assert!(e.what.contains("fewer than its choices cover"), "{e}");
    }

    #[test]
    fn a_log_without_its_end_is_a_prefix() {
        let b = sample();
        let cut = b.len() - end_record(&ReplayLog::parse(&b).expect("valid").end.expect("an end")).len();
        let log = ReplayLog::parse(&b[..cut]).expect("a prefix is valid");
        assert!(log.end.is_none());
        assert_eq!(log.steps(), 305);
    }

    #[test]
    fn damage_is_an_error_naming_its_byte_never_a_panic() {
        let b = sample();
        // Every truncation, and every byte flipped, reads as a log or an error.
        for n in 0..b.len() {
            let _ = ReplayLog::parse(&b[..n]);
            let mut c = b.clone();
            c[n] ^= 0xff;
            let _ = ReplayLog::parse(&c);
        }
        let e = ReplayLog::parse(b"hello world, not a log").expect_err("not a log");
        assert_eq!(e.offset, 0);
        assert!(e.to_string().contains("not a replay log"), "{e}");
        let mut c = b.clone();
        c.push(9);
        let e = ReplayLog::parse(&c).expect_err("trailing bytes");
        assert_eq!(e.offset, b.len() as u64);
        let mut c = b.clone();
        c[8] = 7;
        assert!(ReplayLog::parse(&c)
            .expect_err("format")
            .what
            .contains("format 7"));
        // A run cut short.
        let mut c = header_bytes(&LogHeader::default());
        let at = c.len();
        c.extend([TAG_RUNS, 0, 1, 1]);
        let e = ReplayLog::parse(&c).expect_err("cut run");
        assert_eq!(e.offset, at as u64 + 4);
        assert!(e.what.contains("run length: the file ends inside it"), "{e}");
    }

    #[test]
    fn a_log_that_cannot_be_read_names_its_path() {
        let dir = std::env::temp_dir().join(format!("racetrack-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let missing = dir.join("missing.rtrec");
        let e = ReplayLog::read(&missing).expect_err("no file");
        assert!(
            matches!(&e, ReadLogError::Io { path, .. } if *path == missing),
            "{e}"
        );
        assert!(e.to_string().starts_with("cannot read "), "{e}");
        let damaged = dir.join("damaged.rtrec");
        std::fs::write(&damaged, b"hello world, not a log").expect("written");
        let e = ReplayLog::read(&damaged).expect_err("not a log");
        assert!(
            matches!(&e, ReadLogError::Damaged { source, .. } if source.offset == 0),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
