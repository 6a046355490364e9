//! The event stream: one buffer the program's threads append to and the agent's thread
//! drains. Events are numbered as they enter it, under its lock, so numbering order is
//! stream order; held events are registered under the same lock (see `Agent::hold`), which
//! is where releases happen. The buffer is bounded: a producer that finds it full waits for
//! the agent's thread to drain it (backpressure), unless it holds a queue lock.

use super::held::Held;
use super::record::{self, Rec};
use super::{lock, Agent};
use racetrack_protocol::{Event, Record};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Condvar, Mutex};

/// Streamed events buffered before producers wait for the debugger (backpressure).
const BUFFER_CAP: usize = 65_536;
/// Buffered events that make the agent's thread flush before its next tick.
const FLUSH_AT: usize = 1024;

/// The stream and what the agent's thread and the program's threads signal each other
/// through it.
#[derive(Default)]
pub(super) struct Stream {
    pub(super) state: Mutex<StreamState>,
    /// Signalled when the buffer was drained (producers waiting for room) or the program
    /// shuts down.
    pub(super) space: Condvar,
    /// Wakes the agent's thread to flush before its next tick.
    pub(super) wake: tokio::sync::Notify,
    /// Counts attach snapshots (changed under the stream lock, at the cut): see
    /// the runtime's `Hook::session`.
    pub(super) session: AtomicU64,
    /// Times a program thread waited for room in the buffer (backpressure).
    pub(super) waits: AtomicU64,
    /// Frames sent to the debugger so far (progress of a final flush).
    pub(super) sent: AtomicU64,
    pub(super) sent_events: AtomicU64,
}

/// What the stream lock guards.
#[derive(Default)]
pub(super) struct StreamState {
    pub(super) next_id: u64,
    pub(super) buf: record::Chunks,
    /// Held events by event number.
    pub(super) held: BTreeMap<u64, Held>,
    /// A global `continue` came: the start hold (`RACETRACK_WAIT`) is over, even where
    /// the program had not reached it yet (a rank of a job may connect and be continued
    /// before its first call).
    pub(super) continued: bool,
}

impl Agent {
    /// Append a full event to the stream (numbered if it is a `send`, `recv`, `start` or
    /// `stop`; a held one goes through [`Agent::hold`] instead). Nothing is recorded while
    /// no debugger is attached. `backpressure`: wait for room when the buffer is full (see
    /// [`front`](super::front)); pass false where the thread must not wait.
    pub fn emit(&self, ev: Event, backpressure: bool) {
        let _ = self.push_all(std::iter::once(Rec::Full(Box::new(ev))), backpressure);
    }

    /// Append a compact record (a `send`, `recv`, `start` or `stop` that is not held and
    /// carries no content) to the stream, numbered; it allocates nothing. Returns the
    /// session (see [`Agent::session`]) it was recorded in, `None` if it was not (nobody
    /// attached). `backpressure`: as in [`emit`](Self::emit).
    #[inline]
    pub fn record(&self, rec: Record, backpressure: bool) -> Option<u64> {
        self.push_all(std::iter::once(Rec::Fast(rec)), backpressure)
    }

    /// Append compact records under one lock of the buffer, numbered in turn (see
    /// [`record`](Self::record)).
    #[inline]
    pub fn record_all(&self, recs: impl IntoIterator<Item = Record>, backpressure: bool) -> Option<u64> {
        self.push_all(recs.into_iter().map(Rec::Fast), backpressure)
    }

    /// Append buffered records under one lock of the buffer, numbered in turn.
    fn push_all(&self, recs: impl IntoIterator<Item = Rec>, backpressure: bool) -> Option<u64> {
        let mut s = lock(&self.stream.state);
        if !self.phase.is_attached() {
            return None;
        }
        if backpressure {
            while s.buf.len() >= BUFFER_CAP && self.phase.is_attached() && !self.closing.load(Relaxed) {
                self.stream.waits.fetch_add(1, Relaxed);
                s = self
                    .stream
                    .space
                    .wait(s)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        }
        let before = s.buf.len();
        for mut ev in recs {
            if ev.is_numbered() {
                ev.set_event_id(s.next_id);
                s.next_id += 1;
            }
            s.buf.push(ev);
        }
        let flush = s.buf.len() / FLUSH_AT > before / FLUSH_AT;
        // Read under the lock the attach cut takes to change it.
        let session = self.stream.session.load(Relaxed);
        drop(s);
        if flush {
            self.stream.wake.notify_one();
        }
        Some(session)
    }

    /// Append a notice (an `error`, a `panic`) or a reply to the stream and flush it at
    /// once, not numbered; nothing is recorded while no debugger is attached.
    pub fn reply(&self, ev: Event) {
        {
            let mut s = lock(&self.stream.state);
            if !self.phase.is_attached() {
                return;
            }
            s.buf.push(Rec::Full(Box::new(ev)));
        }
        self.stream.wake.notify_one();
    }

    pub(super) fn error(&self, message: String, req: Option<u64>) {
        self.reply(Event::Error { message, req });
    }

    /// The `ok` of a command that carried a request number (without one, only the
    /// commands that always had an `ok` get one: see [`Agent::held_loop`]).
    pub(super) fn ok(&self, cmd: &str, req: Option<u64>) {
        if req.is_some() {
            self.reply(Event::Ok {
                cmd: cmd.to_owned(),
                target: None,
                req,
            });
        }
    }

    /// Take what is buffered (the server's side).
    pub(super) fn drain(&self) -> Vec<Vec<Rec>> {
        let out = lock(&self.stream.state).buf.take();
        self.stream.space.notify_all();
        out
    }

    /// Take what is buffered with each record's time (a trace file's writer).
    pub(super) fn drain_timed(&self) -> (Vec<Vec<Rec>>, Vec<u64>) {
        let out = {
            let mut s = lock(&self.stream.state);
            (s.buf.take(), s.buf.take_times())
        };
        self.stream.space.notify_all();
        out
    }

    /// Hand back chunks [`Agent::drain`] gave out, once emptied, for reuse (dropped when
    /// no debugger is attached any more).
    pub(super) fn recycle(&self, mut chunks: Vec<Vec<Rec>>) {
        // Records, and chunks beyond what is kept, are dropped here, not under the lock
        // the program's threads take.
        chunks.truncate(record::SPARE_MAX);
        for c in &mut chunks {
            c.clear();
        }
        let mut s = lock(&self.stream.state);
        if self.phase.is_attached() {
            s.buf.recycle(&mut chunks);
        }
    }

    pub(super) fn drain_is_empty(&self) -> bool {
        lock(&self.stream.state).buf.is_empty()
    }
}

/// Number a full event (the kinds that take a number).
pub(super) fn set_event_id(ev: &mut Event, id: u64) {
    match ev {
        Event::Send(e) => e.event_id = id,
        Event::Recv(e) => e.event_id = id,
        Event::Start(e) | Event::Stop(e) => e.event_id = id,
        _ => {}
    }
}
