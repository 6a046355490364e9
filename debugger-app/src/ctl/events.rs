//! The controller's event thread: takes what the connection received, acknowledges held
//! events in ack-all mode, prints, numbers and ingests them.

use super::state::{Ctl, Recent, PRINT_CHUNK};
use super::{CHUNK, RECENT_MAX};
use crate::conn::{CommandSender, ConnEvent};
use racetrack_protocol::{Command, Event, HoldReason};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::mpsc::Receiver;
use std::sync::Arc;

/// Start the `racetrack-ctl-events` thread on the connection's events `rx`.
pub(super) fn spawn(ctl: Arc<Ctl>, conn: CommandSender, rx: Receiver<ConnEvent>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("racetrack-ctl-events".into())
        .spawn(move || {
            // Take what has arrived (up to a chunk), print it with one flush, ingest it
            // under one lock: per-event syscalls and locking would make the controller the
            // bottleneck of a fast program.
            let mut chunk = Vec::with_capacity(CHUNK);
            let mut printed = Vec::with_capacity(PRINT_CHUNK + 4096);
            while let Ok(first) = rx.recv() {
                chunk.clear();
                push_flat(&mut chunk, first);
                while chunk.len() < CHUNK {
                    match rx.try_recv() {
                        Ok(ce) => push_flat(&mut chunk, ce),
                        Err(_) => break,
                    }
                }
                acknowledge_ack_all(&conn, &chunk);
                let closed = chunk.iter().find_map(|ce| match ce {
                    ConnEvent::Closed(reason) => Some(reason.clone()),
                    _ => None,
                });
                take_chunk(&ctl, &mut chunk, &mut printed);
                if let Some(reason) = closed {
                    if let Some(message) = reason {
                        ctl.print(&Event::Error { message, req: None });
                    }
                    break;
                }
            }
            ctl.lock().closed = true;
            ctl.changed.notify_all();
        })
        .map(drop)
}

/// Ingest one event (noting a command's verdict); what `wait until event` keeps of it.
fn ingest_event(st: &mut super::state::State, ev: Event) -> Recent {
    match &ev {
        Event::Ok { req: Some(n), .. } => {
            st.verdicts.insert(*n, Ok(()));
        }
        Event::Error {
            req: Some(n),
            message,
        } => {
            st.verdicts.insert(*n, Err(message.clone()));
        }
        _ => {}
    }
    st.model.ingest(&ev);
    Recent::Event(Box::new(ev))
}

/// Append `ce` to `chunk`, a batch of events as its events.
fn push_flat(chunk: &mut Vec<ConnEvent>, ce: ConnEvent) {
    match ce {
        ConnEvent::Events(evs) => chunk.extend(evs.into_iter().map(ConnEvent::Event)),
        other => chunk.push(other),
    }
}

/// The thesis' design, kept as a switch: acknowledge every event over the network.
fn acknowledge_ack_all(conn: &CommandSender, chunk: &[ConnEvent]) {
    for ce in chunk {
        // Packed events are never held: nothing to acknowledge.
        if let ConnEvent::Event(ev) = ce {
            if let (Some(id), true) = (ev.event_id(), is_ack_all(ev)) {
                conn.send(Command::Continue {
                    thread: None,
                    event_id: Some(id),
                    trace: None,
                });
            }
        }
    }
}

fn is_ack_all(ev: &Event) -> bool {
    match ev {
        Event::Send(e) => e.held && e.reason == Some(HoldReason::AckAll),
        Event::Start(e) | Event::Stop(e) => e.held && e.reason == Some(HoldReason::AckAll),
        _ => false,
    }
}

/// Count, print, then ingest a chunk (up to the connection's close), keeping the recent
/// events `wait until event` looks at.
fn take_chunk(ctl: &Ctl, chunk: &mut Vec<ConnEvent>, printed: &mut Vec<u8>) {
    // Counted before printed: see `Ctl::announced`. Numbered from there (up to the close).
    let arrived: usize = chunk
        .iter()
        .map_while(|ce| match ce {
            ConnEvent::Event(_) => Some(1),
            ConnEvent::Events(evs) => Some(evs.len()),
            ConnEvent::Packed(_, ps) => Some(ps.len()),
            ConnEvent::Closed(_) => None,
        })
        .sum();
    let mut next = 1 + ctl.announced.fetch_add(arrived as u64, SeqCst);
    ctl.print_all(chunk, printed);
    let mut st = ctl.lock();
    for ce in chunk.drain(..) {
        let item = match ce {
            ConnEvent::Event(ev) => ingest_event(&mut st, ev),
            ConnEvent::Events(evs) => {
                // (`push_flat` flattens them; kept whole here, they are still each kept.)
                for ev in evs {
                    let item = ingest_event(&mut st, ev);
                    st.recent_len += 1;
                    st.recent.push_back((next, item));
                    next += 1;
                }
                continue;
            }
            ConnEvent::Packed(names, ps) => {
                for p in &ps {
                    st.model.ingest_packed(&names, p);
                }
                Recent::Frame(names, ps)
            }
            ConnEvent::Closed(_) => break,
        };
        let first = next;
        next += item.len() as u64;
        st.recent_len += item.len();
        st.recent.push_back((first, item));
    }
    st.ingested = next - 1;
    // Keep at least RECENT_MAX events.
    while st
        .recent
        .front()
        .is_some_and(|(_, r)| st.recent_len - r.len() >= RECENT_MAX)
    {
        if let Some((_, r)) = st.recent.pop_front() {
            st.recent_len -= r.len();
        }
    }
    drop(st);
    ctl.changed.notify_all();
}
