//! Reading a replay log: one method per record kind, each error naming its byte.

use super::{
    Choice, Chose, Edit, LogEnd, LogError, LogHeader, RankLog, ReplayLog, Run, LOG_FORMAT, LOG_MAGIC,
    MAX_JSON, TAG_CALLS, TAG_CLOCKS, TAG_EDIT, TAG_END, TAG_RANK_END, TAG_RUNS,
};
use crate::varint::{get_u, unzigzag, Bad};
use serde::Deserialize;

/// Thread and rank indexes beyond this are damage, not a program.
const MAX_INDEX: usize = 1 << 20;

/// A log's bytes, the position reached, and what the records read so far imply.
pub(super) struct Reader<'a> {
    b: &'a [u8],
    i: usize,
    log: ReplayLog,
    /// Where each rank's next record starts counting calls.
    next_call: Vec<u64>,
    /// Each rank's last clock reading.
    last_clock: Vec<u64>,
}

fn err(offset: usize, what: impl Into<String>) -> LogError {
    LogError {
        offset: offset as u64,
        what: what.into(),
    }
}

impl<'a> Reader<'a> {
    pub(super) fn new(b: &'a [u8]) -> Self {
        Reader {
            b,
            i: 0,
            log: ReplayLog::default(),
            next_call: Vec::new(),
            last_clock: Vec::new(),
        }
    }

    /// The whole log: the magic, the format, the header, then every record.
    pub(super) fn log(mut self) -> Result<ReplayLog, LogError> {
        let b = self.b;
        if b.len() < 12 || b[..8] != LOG_MAGIC {
            return Err(err(
                0,
                "not a replay log (it does not begin with the log's magic bytes)",
            ));
        }
        let format = u16::from_le_bytes([b[8], b[9]]);
        if format != LOG_FORMAT {
            return Err(err(
                8,
                format!("log format {format}; this racetrack reads format {LOG_FORMAT}"),
            ));
        }
        self.i = 12;
        self.log.header = self.json::<LogHeader>("header")?;
        while self.i < b.len() {
            let at = self.i;
            if self.log.end.is_some() {
                return Err(err(at, "bytes after the log's end record"));
            }
            self.i += 1;
            match b[at] {
                TAG_RUNS => self.runs(at)?,
                TAG_EDIT => {
                    let edit = self.json::<Edit>("edit record")?;
                    self.log.edits.push(edit);
                }
                TAG_CALLS => self.calls(at)?,
                TAG_CLOCKS => self.clocks(at)?,
                TAG_RANK_END => self.rank_end(at)?,
                TAG_END => self.log.end = Some(self.json::<LogEnd>("end record")?),
                tag => return Err(err(at, format!("unknown record tag {tag}"))),
            }
        }
        Ok(self.log)
    }

    fn varint(&mut self, what: &str) -> Result<u64, LogError> {
        get_u(self.b, &mut self.i).map_err(|e| {
            let why = match e {
                Bad::Truncated => "the file ends inside it",
                Bad::TooLarge => "more than 64 bits",
            };
            err(self.i, format!("{what}: {why}"))
        })
    }

    /// A count of items (a byte each at least) of the record at `at`, checked against the
    /// bytes left.
    fn count(&mut self, items: &str, at: usize) -> Result<u64, LogError> {
        let n = self.varint(&format!("count of {items}"))?;
        if n > (self.b.len() - self.i) as u64 {
            return Err(err(
                at,
                format!("{n} {items} announced, more than the bytes left"),
            ));
        }
        Ok(n)
    }

    /// A thread or rank index of the record at `at`.
    fn index(&mut self, what: &str, at: usize) -> Result<usize, LogError> {
        let n = self.varint(what)?;
        usize::try_from(n)
            .ok()
            .filter(|&t| t < MAX_INDEX)
            .ok_or_else(|| err(at, format!("{what} {n} out of range")))
    }

    /// A rank's index, with room made for it.
    fn rank(&mut self, at: usize) -> Result<usize, LogError> {
        let rank = self.index("rank", at)?;
        if self.log.ranks.len() <= rank {
            self.log.ranks.resize_with(rank + 1, RankLog::default);
        }
        self.next_call.resize(self.next_call.len().max(rank + 1), 0);
        self.last_clock.resize(self.last_clock.len().max(rank + 1), 0);
        Ok(rank)
    }

    /// A JSON value: a u32 LE length and the text.
    fn json<T: for<'de> Deserialize<'de>>(&mut self, what: &str) -> Result<T, LogError> {
        let (b, at) = (self.b, self.i);
        let len = b
            .get(at..at + 4)
            .map(|l| u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize)
            .ok_or_else(|| err(at, format!("{what}: the file ends inside its length")))?;
        if len > MAX_JSON || at + 4 + len > b.len() {
            return Err(err(
                at,
                format!("{what}: a length of {len} bytes, beyond the end of the file"),
            ));
        }
        let value = serde_json::from_slice(&b[at + 4..at + 4 + len])
            .map_err(|e| err(at + 4, format!("{what}: bad JSON: {e}")))?;
        self.i = at + 4 + len;
        Ok(value)
    }

    /// [`TAG_RUNS`]: a thread's runs of one sender.
    fn runs(&mut self, at: usize) -> Result<(), LogError> {
        let thread = self.index("thread index", at)?;
        let n = self.varint("run count")?;
        if n > (self.b.len() - self.i) as u64 {
            return Err(err(at, format!("{n} runs announced, more than the bytes left")));
        }
        if self.log.threads.len() <= thread {
            self.log.threads.resize_with(thread + 1, Vec::new);
        }
        for _ in 0..n {
            let head = self.varint("run sender")?;
            let count = if head & 1 == 1 {
                let at = self.i;
                self.varint("run length")?
                    .checked_add(2)
                    .ok_or_else(|| err(at, "a run longer than 2^64 steps"))?
            } else {
                1
            };
            self.log.threads[thread].push(Run {
                sender: head >> 1,
                count,
            });
        }
        Ok(())
    }

    /// [`TAG_CALLS`]: a rank's choices.
    fn calls(&mut self, at: usize) -> Result<(), LogError> {
        let rank = self.rank(at)?;
        let n = self.count("choices", at)?;
        for _ in 0..n {
            let c_at = self.i;
            let skip = self.varint("choice's call")?;
            let call = self.next_call[rank]
                .checked_add(skip)
                .ok_or_else(|| err(c_at, "a call number beyond 2^64"))?;
            let head = *self
                .b
                .get(self.i)
                .ok_or_else(|| err(self.i, "choice kind: the file ends inside it"))?;
            self.i += 1;
            let choice = Choice {
                call,
                op: head & 63,
                what: self.chose(head >> 6, c_at)?,
            };
            self.next_call[rank] = call
                .checked_add(choice.calls())
                .ok_or_else(|| err(c_at, "a call number beyond 2^64"))?;
            self.log.ranks[rank].choices.push(choice);
        }
        Ok(())
    }

    /// What a choice of `kind` (its top two bits) chose, at `c_at`.
    fn chose(&mut self, kind: u8, c_at: usize) -> Result<Chose, LogError> {
        Ok(match kind {
            0 => Chose::Match {
                source: self.small("matched source")?,
                tag: self.small("matched tag")?,
            },
            1 => Chose::Miss {
                n: self
                    .varint("run of polls")?
                    .checked_add(1)
                    .ok_or_else(|| err(c_at, "a run of 2^64 polls"))?,
            },
            2 => Chose::Index(self.request()?),
            _ => {
                let k = self.varint("index count")?;
                if k > (self.b.len() - self.i) as u64 {
                    return Err(err(
                        c_at,
                        format!("{k} indices announced, more than the bytes left"),
                    ));
                }
                Chose::Indices((0..k).map(|_| self.request()).collect::<Result<_, _>>()?)
            }
        })
    }

    /// A zigzag varint that fits an `i32` (a source or tag).
    fn small(&mut self, what: &str) -> Result<i32, LogError> {
        let at = self.i;
        i32::try_from(unzigzag(self.varint(what)?)).map_err(|_| err(at, format!("{what} out of range")))
    }

    /// A request index.
    fn request(&mut self) -> Result<u32, LogError> {
        let at = self.i;
        u32::try_from(self.varint("request index")?).map_err(|_| err(at, "request index out of range"))
    }

    /// [`TAG_CLOCKS`]: a rank's clock readings, each less the previous.
    fn clocks(&mut self, at: usize) -> Result<(), LogError> {
        let rank = self.rank(at)?;
        let n = self.count("clock readings", at)?;
        for _ in 0..n {
            let d = unzigzag(self.varint("clock reading")?);
            self.last_clock[rank] = self.last_clock[rank].wrapping_add(d as u64);
            self.log.ranks[rank].clocks.push(self.last_clock[rank]);
        }
        Ok(())
    }

    /// [`TAG_RANK_END`]: a rank reached `MPI_Finalize` after this many calls.
    fn rank_end(&mut self, at: usize) -> Result<(), LogError> {
        let rank = self.rank(at)?;
        let calls = self.varint("calls made")?;
        if calls < self.next_call[rank] {
            return Err(err(
                at,
                format!("rank {rank} made {calls} calls, fewer than its choices cover"),
            ));
        }
        self.log.ranks[rank].calls = Some(calls);
        Ok(())
    }
}
