//! Trace mode (`RACETRACK_TRACE=FILE`): the agent writes every event to a trace file
//! instead of serving a debugger. It is attached from its start with an empty policy (so
//! nothing is ever held), and its own thread (`racetrack-trace`) drains the buffer as a
//! debugger's session would, in binary packed frames, into the file with each event's
//! time (`racetrack_protocol::trace`). The program never waits on the disk beyond the
//! buffer's backpressure; `Agent::finish` waits for the last records to be written.

use super::record;
use super::server::{BATCH_MAX, TICK};
use super::{lock, Agent};
use racetrack_protocol::trace::{header, TraceWriter};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

/// The file's output buffer: the writer thread writes through it once per drain.
const FILE_BUFFER: usize = 1 << 20;

/// Start an agent that writes every event to the trace file at `path`, numbering its
/// events from `first_event_id`. A file that cannot be created is reported on stderr in
/// one line and the program runs untraced (`None`).
pub fn start_trace(path: &str, first_event_id: u64) -> Option<Arc<Agent>> {
    let file = match File::create(path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("racetrack: cannot write the trace file {path}: {e}; the program runs untraced");
            return None;
        }
    };
    let agent = Arc::new(Agent::new(false, None));
    // No debugger may take the controlling slot: the writer holds it for good (a fresh
    // agent's slot is free, so this claim is granted).
    let _ = agent.phase.claim();
    let _ = agent.url.set(path.to_owned());
    let clock = Instant::now();
    {
        let mut s = lock(&agent.stream.state);
        s.next_id = first_event_id;
        s.buf.set_clock(clock);
    }
    // Attached here, on the caller's thread, before the program registers anything or
    // reports an event: the file misses nothing.
    let opening = [agent.hello(), agent.attach_structure(), agent.attach()];
    let mut out = BufWriter::with_capacity(FILE_BUFFER, file);
    let mut writer = TraceWriter::default();
    let written = out.write_all(&header()).and_then(|()| {
        opening.iter().try_for_each(|ev| {
            let now = nanos(clock);
            writer.write_frame(&mut out, false, ev.to_json().as_bytes(), &[now])
        })
    });
    if let Err(e) = written {
        eprintln!("racetrack: cannot write the trace file {path}: {e}; the program runs untraced");
        agent.detach();
        return None;
    }
    let thread_agent = agent.clone();
    let path_owned = path.to_owned();
    let spawned = std::thread::Builder::new()
        .name("racetrack-trace".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("racetrack: trace writer: {e}; the program runs untraced");
                    return stop(&thread_agent);
                }
            };
            if let Err(e) = rt.block_on(write_loop(&thread_agent, out, writer)) {
                eprintln!("racetrack: cannot write the trace file {path_owned}: {e}; the rest of the run is untraced");
            }
            stop(&thread_agent);
        });
    if let Err(e) = spawned {
        eprintln!("racetrack: cannot start the trace writer: {e}; the program runs untraced");
        agent.detach();
        return None;
    }
    Some(agent)
}

/// Stop recording (the file is complete or cannot be written) and let the program's exit
/// go on.
fn stop(agent: &Agent) {
    agent.detach();
    agent.signal_finished();
}

fn nanos(clock: Instant) -> u64 {
    u64::try_from(clock.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Drain the buffer into the file when woken or every tick, until the program finishes.
async fn write_loop(agent: &Agent, mut out: BufWriter<File>, mut writer: TraceWriter) -> std::io::Result<()> {
    let mut tick = tokio::time::interval(TICK);
    loop {
        tokio::select! {
            () = agent.stream.wake.notified() => {}
            _ = tick.tick() => {}
        }
        let (chunks, times) = agent.drain_timed();
        let frames = record::frames(chunks.iter().flatten(), BATCH_MAX, None);
        if !chunks.is_empty() {
            agent.recycle(chunks);
        }
        let mut at = 0;
        for (frame, n) in &frames {
            let (binary, bytes) = match frame {
                record::Frame::Binary(b) => (true, b.as_slice()),
                record::Frame::Text(t) => (false, t.as_bytes()),
            };
            let stamps = times.get(at..at + n).unwrap_or_default();
            writer.write_frame(&mut out, binary, bytes, stamps)?;
            at += n;
            agent.stream.sent.fetch_add(1, Relaxed);
            agent.stream.sent_events.fetch_add(*n as u64, Relaxed);
        }
        if !frames.is_empty() {
            // Written out at every drain, so that a program that dies loses at most the
            // last tick's events.
            out.flush()?;
        }
        if agent.phase.is_finishing() && agent.drain_is_empty() {
            return out.flush();
        }
    }
}

/// Say once on stderr what a trace run ignores of the environment.
pub(super) fn note_ignored(wait: bool, debugger: bool) {
    if wait {
        eprintln!("racetrack: RACETRACK_WAIT is ignored with RACETRACK_TRACE (nothing is held)");
    }
    if debugger {
        eprintln!("racetrack: RACETRACK_TRACE is set: events go to the trace file, no debugger is served");
    }
}
