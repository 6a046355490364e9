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

use crate::varint::{get_u, put_u, Bad};
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
        while i < b.len() {
            let at = i;
            if log.end.is_some() {
                return Err(err(at, "bytes after the log's end record".into()));
            }
            match b[i] {
                TAG_RUNS => {
                    i += 1;
                    let varint = |i: &mut usize, what: &str| {
                        get_u(b, i).map_err(|e| {
                            let why = match e {
                                Bad::Truncated => "the file ends inside it",
                                Bad::TooLarge => "more than 64 bits",
                            };
                            err(*i, format!("{what}: {why}"))
                        })
                    };
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
    pub fn read(path: &std::path::Path) -> Result<Self, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Self::parse(&bytes).map_err(|e| format!("{}: {e}", path.display()))
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
}
