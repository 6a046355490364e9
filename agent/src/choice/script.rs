//! The replay engine: a replay log as the picks it makes, for runtime threads and MPI ranks
//! alike.
//!
//! A log says, per line, what happened at some positions (runs of steps that took one
//! sender's messages; the MPI calls whose outcome timing decided, with runs of polls that
//! missed), how many positions it covers, and whether it covers the whole recorded run.
//! Positions are counted by the front end (a thread's steps, a rank's calls), so a lookup
//! is a binary search and the script is never changed: threads ask it concurrently, and a
//! step put back by the debugger simply asks again at the same position.

use super::{Chooser, Pick, Point};
use racetrack_protocol::replay_log::{Chose, ReplayLog};

/// A replay log's picks (see the module's documentation).
#[derive(Debug, Default)]
pub struct Script {
    lines: Vec<Line>,
}

#[derive(Debug, Default)]
struct Line {
    /// By position, not overlapping.
    entries: Vec<Entry>,
    /// Positions the log covers.
    covers: u64,
    /// Past `covers` the recorded run had nothing more (else the log is a prefix).
    strict: bool,
    /// Clock readings (`f64::to_bits`), in order.
    clocks: Vec<u64>,
}

#[derive(Debug)]
struct Entry {
    at: u64,
    n: u64,
    /// The call the log has there (MPI).
    op: Option<u8>,
    what: Stored,
}

#[derive(Debug)]
enum Stored {
    Sender(u64),
    Match { source: i32, tag: i32 },
    Miss,
    Requests(Box<[i32]>),
}

impl Script {
    /// A runtime program's log: line `g` is the thread of global index `g`, its positions
    /// its steps on messages.
    pub fn of_threads(log: &ReplayLog) -> Self {
        let n = log
            .end
            .as_ref()
            .map_or(0, |e| e.threads.len())
            .max(log.threads.len());
        let strict = log.complete();
        let lines = (0..n)
            .map(|g| {
                let runs = log.threads.get(g).map_or(&[][..], Vec::as_slice);
                let mut at = 0;
                let entries = runs
                    .iter()
                    .map(|r| {
                        let e = Entry {
                            at,
                            n: r.count,
                            op: None,
                            what: Stored::Sender(r.sender),
                        };
                        at += r.count;
                        e
                    })
                    .collect();
                Line {
                    entries,
                    covers: at,
                    strict,
                    clocks: Vec::new(),
                }
            })
            .collect();
        Self { lines }
    }

    /// MPI rank `rank`'s part of a job's log, as line 0: its positions are its calls.
    pub fn of_rank(log: &ReplayLog, rank: usize) -> Self {
        let mine = log.ranks.get(rank).cloned().unwrap_or_default();
        let last = mine.choices.last().map_or(0, |c| c.call + c.calls());
        let entries = mine
            .choices
            .iter()
            .map(|c| Entry {
                at: c.call,
                n: c.calls(),
                op: Some(c.op),
                what: match &c.what {
                    Chose::Match { source, tag } => Stored::Match {
                        source: *source,
                        tag: *tag,
                    },
                    Chose::Miss { .. } => Stored::Miss,
                    Chose::Index(i) => Stored::Requests(Box::new([index(*i)])),
                    Chose::Indices(v) => Stored::Requests(v.iter().map(|&i| index(i)).collect()),
                },
            })
            .collect();
        let line = Line {
            entries,
            covers: mine.calls.unwrap_or(last),
            strict: log.complete() && mine.calls.is_some(),
            clocks: mine.clocks,
        };
        Self { lines: vec![line] }
    }

    /// Whether the log has line `line` at all.
    pub fn has_line(&self, line: usize) -> bool {
        line < self.lines.len()
    }

    /// Positions the log covers on `line`.
    pub fn covers(&self, line: usize) -> u64 {
        self.lines.get(line).map_or(0, |l| l.covers)
    }

    /// Whether `line` ends where the log does (a complete log), rather than running free.
    pub fn strict(&self, line: usize) -> bool {
        self.lines.get(line).is_some_and(|l| l.strict)
    }

    /// Where position `pos` of `line` is among the line's entries: the entry's index (the
    /// count when past them all) and how many there are. For messages that cite the log.
    pub fn place(&self, line: usize, pos: u64) -> (usize, usize) {
        self.lines.get(line).map_or((0, 0), |l| {
            let i = l.entries.partition_point(|e| e.at + e.n.max(1) <= pos);
            (i, l.entries.len())
        })
    }
}

/// A request index as MPI takes it (an index no request has: out of `i32`'s range).
fn index(i: u32) -> i32 {
    i32::try_from(i).unwrap_or(-1)
}

impl Line {
    fn at(&self, pos: u64) -> Option<&Entry> {
        let i = self.entries.partition_point(|e| e.at + e.n.max(1) <= pos);
        self.entries.get(i).filter(|e| e.at <= pos)
    }

    fn past(&self) -> Pick<'static> {
        if self.strict {
            Pick::Overrun
        } else {
            Pick::Done
        }
    }
}

impl Chooser for Script {
    fn choose(&self, line: usize, at: Point<'_>) -> Pick<'_> {
        let Some(l) = self.lines.get(line) else {
            return Pick::Overrun;
        };
        match at {
            Point::Message { step, .. } => match l.at(step) {
                Some(Entry {
                    what: Stored::Sender(s),
                    ..
                }) => Pick::Sender(*s),
                _ if step >= l.covers => l.past(),
                _ => Pick::AsItComes,
            },
            Point::Call { call, op, poll } => {
                if call >= l.covers {
                    return l.past();
                }
                match l.at(call) {
                    Some(e) if e.op.is_some_and(|o| o != op) => Pick::Mismatch {
                        expected: e.op.unwrap_or(op),
                    },
                    Some(e) => match &e.what {
                        Stored::Match { source, tag } => Pick::Match {
                            source: *source,
                            tag: *tag,
                        },
                        Stored::Miss => Pick::Miss,
                        Stored::Requests(r) => Pick::Requests(r),
                        Stored::Sender(s) => Pick::Sender(*s),
                    },
                    // A poll the log does not name found something.
                    None if poll => Pick::Found,
                    None => Pick::AsItComes,
                }
            }
            Point::Clock { n } => usize::try_from(n)
                .ok()
                .and_then(|n| l.clocks.get(n))
                .map_or(Pick::AsItComes, |&bits| Pick::Reading(bits)),
        }
    }
}
