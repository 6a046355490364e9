//! Trace files (`RACETRACK_TRACE=FILE`): every event an agent would stream to a debugger,
//! written to a file instead, as the same frames (JSON text frames, binary packed frames),
//! each with the times of its events. `docs/PROTOCOL.md` ("Trace files") documents the
//! layout; [`TraceReader`] reads one back as [`Event`]s.
//!
//! Layout: a 16-byte header — [`TRACE_MAGIC`] (8 bytes), the format version (u16 LE,
//! [`TRACE_FORMAT`]), 2 bytes of flags (0), the protocol version (u32 LE) — then records
//! until the end of the file. A record: its form (one byte: [`FORM_TEXT`] or
//! [`FORM_BINARY`]), the body's length (u32 LE), then the body: the number of events in
//! the frame (varint), each event's time as a varint difference in nanoseconds to the
//! previous event's in the file (the first: to the trace's start), then the frame's bytes.

use crate::varint::put_u;
use crate::{DecodeError, Decoded, Decoder, Event, MAX_FRAME_BYTES, PROTOCOL_VERSION};
use std::collections::VecDeque;
use std::io::{self, Read, Write};

/// The first 8 bytes of a trace file (a non-ASCII byte first, as PNG does, so a text
/// file is never taken for one).
pub const TRACE_MAGIC: [u8; 8] = *b"\x89RTRACE\n";
/// The layout version this crate writes and reads.
pub const TRACE_FORMAT: u16 = 1;
/// A record holding a JSON text frame (`hello`, `structure`, `snapshot`, `batch`, …).
pub const FORM_TEXT: u8 = 0;
/// A record holding a binary packed frame ([`crate::binary`]).
pub const FORM_BINARY: u8 = 1;
/// Bytes of the header.
pub const HEADER_BYTES: usize = 16;
/// Largest body a record may have: a frame and its times.
const MAX_BODY: usize = MAX_FRAME_BYTES + 16 * 1024 * 1024;

/// The header every trace file begins with.
pub fn header() -> [u8; HEADER_BYTES] {
    let mut h = [0; HEADER_BYTES];
    h[..8].copy_from_slice(&TRACE_MAGIC);
    h[8..10].copy_from_slice(&TRACE_FORMAT.to_le_bytes());
    h[12..16].copy_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    h
}

/// Writes trace records: the times of a frame's events are differences to the previous
/// event's, which it remembers.
#[derive(Debug, Default)]
pub struct TraceWriter {
    last_ns: u64,
    times: Vec<u8>,
}

impl TraceWriter {
    /// Write one record: a frame (`binary`: a binary packed frame, else JSON text) and
    /// the times of its events (nanoseconds since the trace started, not decreasing).
    pub fn write_frame(
        &mut self,
        w: &mut impl Write,
        binary: bool,
        frame: &[u8],
        times_ns: &[u64],
    ) -> io::Result<()> {
        self.times.clear();
        put_u(&mut self.times, times_ns.len() as u64);
        for &t in times_ns {
            put_u(&mut self.times, t.saturating_sub(self.last_ns));
            self.last_ns = self.last_ns.max(t);
        }
        let len = u32::try_from(self.times.len() + frame.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame too large for a trace record"))?;
        w.write_all(&[if binary { FORM_BINARY } else { FORM_TEXT }])?;
        w.write_all(&len.to_le_bytes())?;
        w.write_all(&self.times)?;
        w.write_all(frame)
    }
}

/// Why a trace file cannot be read: the problem and the byte offset where it is.
#[derive(Debug, thiserror::Error)]
#[error("trace file, byte {offset}: {problem}")]
pub struct TraceError {
    /// Offset in the file of the header or record at fault.
    pub offset: u64,
    /// What is wrong.
    #[source]
    pub problem: TraceProblem,
}

/// What is wrong with a trace file (a [`TraceError`] says where).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceProblem {
    /// The file cannot be opened.
    #[error("cannot open {}: {source}", path.display())]
    Open {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The header cannot be read.
    #[error("cannot read the header: {0}")]
    ReadHeader(#[source] io::Error),
    /// A record cannot be read.
    #[error("read: {0}")]
    Read(#[source] io::Error),
    /// The file does not begin with [`TRACE_MAGIC`].
    #[error("not a racetrack trace file (bad magic)")]
    BadMagic,
    /// The file ends inside its header.
    #[error("truncated header ({got} of {HEADER_BYTES} bytes)")]
    TruncatedHeader {
        /// The bytes there are.
        got: usize,
    },
    /// A layout version this reader does not read.
    #[error("trace format version {found}; this reader reads version {expected}")]
    Format {
        /// The file's.
        found: u16,
        /// [`TRACE_FORMAT`].
        expected: u16,
    },
    /// Written by an agent of a protocol version this reader does not read.
    #[error("written with protocol {found}; this reader reads protocols 1 to {expected}")]
    Protocol {
        /// The file's.
        found: u32,
        /// [`PROTOCOL_VERSION`].
        expected: u32,
    },
    /// A record of neither [`FORM_TEXT`] nor [`FORM_BINARY`].
    #[error("unknown record form {0} (damaged file?)")]
    UnknownForm(u8),
    /// A record longer than any frame.
    #[error("record length {len} exceeds the limit of {limit} (damaged file?)")]
    TooLong {
        /// The record's length.
        len: usize,
        /// The largest body a record may have.
        limit: usize,
    },
    /// A record's event count its body cannot hold.
    #[error("record claims {count} events in {bytes} bytes (damaged file?)")]
    CountTooLarge {
        /// The count.
        count: u64,
        /// The body's length.
        bytes: usize,
    },
    /// The times end inside a varint.
    #[error("record cut inside its times (damaged file?)")]
    TimesCut,
    /// A time of more than 64 bits.
    #[error("a time that is not a valid varint (damaged file?)")]
    TimeTooLarge,
    /// The times add up past `u64::MAX` nanoseconds.
    #[error("an event's time overflows (damaged file?)")]
    TimeOverflow,
    /// A text frame that is not UTF-8.
    #[error("text frame is not UTF-8: {0} (damaged file?)")]
    TextNotUtf8(#[source] std::str::Utf8Error),
    /// A text frame that does not decode.
    #[error("text frame: {0}")]
    Text(#[source] DecodeError),
    /// A binary frame that does not decode.
    #[error("{0}")]
    Binary(#[source] DecodeError),
    /// A frame of another number of events than the record has times.
    #[error("frame holds {events} events but the record gives {times} times (damaged file?)")]
    TimesMismatch {
        /// The frame's events.
        events: usize,
        /// The record's times.
        times: usize,
    },
}

/// One event of a trace, with its time.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEvent {
    /// Nanoseconds since the trace started (monotonic clock).
    pub time_ns: u64,
    /// The event (packed ones expanded with the latest `structure`'s names).
    pub event: Event,
}

/// Reads a trace file's events in order. Every problem is a [`TraceError`] (iteration
/// then ends); a record cut short at the end of the file — a program that died while
/// writing — ends the iteration after every complete event, with a [`warning`].
///
/// [`warning`]: TraceReader::warning
pub struct TraceReader<R> {
    r: R,
    offset: u64,
    decoder: Decoder,
    pending: VecDeque<TraceEvent>,
    last_ns: u64,
    protocol: u32,
    warning: Option<String>,
    done: bool,
}

impl TraceReader<io::BufReader<std::fs::File>> {
    /// Open the trace file at `path` and check its header.
    pub fn open(path: &std::path::Path) -> Result<Self, TraceError> {
        let f = std::fs::File::open(path).map_err(|source| TraceError {
            offset: 0,
            problem: TraceProblem::Open {
                path: path.to_owned(),
                source,
            },
        })?;
        Self::new(io::BufReader::with_capacity(1 << 20, f))
    }
}

impl<R: Read> TraceReader<R> {
    /// Read a trace from `r`, checking its header first.
    pub fn new(mut r: R) -> Result<Self, TraceError> {
        let err = |problem| TraceError { offset: 0, problem };
        let mut h = [0u8; HEADER_BYTES];
        let got = read_full(&mut r, &mut h).map_err(|e| err(TraceProblem::ReadHeader(e)))?;
        if got < 8 || h[..8] != TRACE_MAGIC {
            return Err(err(TraceProblem::BadMagic));
        }
        if got < HEADER_BYTES {
            return Err(err(TraceProblem::TruncatedHeader { got }));
        }
        let format = u16::from_le_bytes([h[8], h[9]]);
        if format != TRACE_FORMAT {
            return Err(TraceError {
                offset: 8,
                problem: TraceProblem::Format {
                    found: format,
                    expected: TRACE_FORMAT,
                },
            });
        }
        let protocol = u32::from_le_bytes([h[12], h[13], h[14], h[15]]);
        // Protocol 1's files read on: its frames are this protocol's, but for the MPI
        // library's binary event frames, which are refused by name as they come.
        if !(1..=PROTOCOL_VERSION).contains(&protocol) {
            return Err(TraceError {
                offset: 12,
                problem: TraceProblem::Protocol {
                    found: protocol,
                    expected: PROTOCOL_VERSION,
                },
            });
        }
        Ok(Self {
            r,
            offset: HEADER_BYTES as u64,
            decoder: Decoder::default(),
            pending: VecDeque::new(),
            last_ns: 0,
            protocol,
            warning: None,
            done: false,
        })
    }

    /// The protocol version the trace was written with.
    pub fn protocol(&self) -> u32 {
        self.protocol
    }

    /// Set once the iteration ended at a record cut short (the program died while
    /// writing it): what was lost, and where.
    pub fn warning(&self) -> Option<&str> {
        self.warning.as_deref()
    }

    /// Bytes read so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Read the next record into `pending`; `Ok(false)` at the end of the file.
    fn next_record(&mut self) -> Result<bool, TraceError> {
        let at = self.offset;
        let err = |problem| TraceError { offset: at, problem };
        let mut head = [0u8; 5];
        let got = read_full(&mut self.r, &mut head).map_err(|e| err(TraceProblem::Read(e)))?;
        if got == 0 {
            return Ok(false);
        }
        if got < head.len() {
            self.warning = Some(format!(
                "the trace ends inside a record's head at byte {at} (the program stopped while writing it)"
            ));
            return Ok(false);
        }
        let form = head[0];
        if form != FORM_TEXT && form != FORM_BINARY {
            return Err(err(TraceProblem::UnknownForm(form)));
        }
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if len > MAX_BODY {
            return Err(err(TraceProblem::TooLong { len, limit: MAX_BODY }));
        }
        let mut body = vec![0u8; len];
        let got = read_full(&mut self.r, &mut body).map_err(|e| err(TraceProblem::Read(e)))?;
        if got < len {
            self.warning = Some(format!(
                "the trace ends inside the record at byte {at} ({got} of its {len} bytes; the program stopped while writing it): the events before it are complete"
            ));
            return Ok(false);
        }
        self.offset += 5 + len as u64;
        self.decode_record(form, &body).map_err(err)?;
        Ok(true)
    }

    /// Decode one record's body: its times, then its frame's events.
    fn decode_record(&mut self, form: u8, body: &[u8]) -> Result<(), TraceProblem> {
        let mut i = 0;
        let count = get_u(body, &mut i)?;
        if count > body.len() as u64 {
            return Err(TraceProblem::CountTooLarge {
                count,
                bytes: body.len(),
            });
        }
        let mut times = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let d = get_u(body, &mut i)?;
            self.last_ns = self.last_ns.checked_add(d).ok_or(TraceProblem::TimeOverflow)?;
            times.push(self.last_ns);
        }
        let frame = &body[i..];
        let events = if form == FORM_BINARY {
            match self.decoder.decode_binary(frame).map_err(TraceProblem::Binary)? {
                Decoded::Packed(names, ps) => ps
                    .into_iter()
                    .map(|p| names.expand(p))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(TraceProblem::Binary)?,
                Decoded::Events(evs) => evs,
            }
        } else {
            let text = std::str::from_utf8(frame).map_err(TraceProblem::TextNotUtf8)?;
            self.decoder.decode(text).map_err(TraceProblem::Text)?
        };
        if events.len() != times.len() {
            return Err(TraceProblem::TimesMismatch {
                events: events.len(),
                times: times.len(),
            });
        }
        self.pending.extend(
            times
                .into_iter()
                .zip(events)
                .map(|(time_ns, event)| TraceEvent { time_ns, event }),
        );
        Ok(())
    }
}

impl<R: Read> Iterator for TraceReader<R> {
    type Item = Result<TraceEvent, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Some(Ok(ev));
            }
            if self.done {
                return None;
            }
            match self.next_record() {
                Ok(true) => {}
                Ok(false) => self.done = true,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// Read until `buf` is full or the input ends; returns the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn get_u(b: &[u8], i: &mut usize) -> Result<u64, TraceProblem> {
    crate::varint::get_u(b, i).map_err(|bad| match bad {
        crate::varint::Bad::Truncated => TraceProblem::TimesCut,
        crate::varint::Bad::TooLarge => TraceProblem::TimeTooLarge,
    })
}

#[cfg(test)]
mod tests;
