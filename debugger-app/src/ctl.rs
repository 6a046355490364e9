//! `racetrack ctl`: the headless controller. Commands are JSON lines on stdin
//! (`shared/DESIGN.md` §5), events JSON lines on stdout. `wait` is handled here:
//!
//! - `{"cmd":"wait","until":"held"}` — some event is held (optionally `"thread"`, `"op"`);
//! - `{"cmd":"wait","until":"exit"}` — the program exited (or the connection closed);
//! - `{"cmd":"wait","until":"queue","thread":"proc[1]","count":3}` — that many messages are
//!   pending on the thread (optionally only those for `"op"`);
//! - `{"cmd":"wait","until":"event","match":{"event":"recv","thread":"proc[1]"}}` — an event
//!   whose fields include all of `match`, received since the previous command was sent.
//!
//! Each takes `timeout_ms` (default 10000) and answers `{"event":"waited","until":..}` or an
//! `error`. At the end of stdin the controller detaches (the program runs free) and waits
//! for the program to finish.

use crate::conn::{CommandSender, ConnEvent, Connection};
use crate::launch::Launched;
use crate::model::Model;
use racetrack_protocol::{Command, Event, HoldReason};
use serde_json::Value;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

const RECENT_MAX: usize = 200_000;
/// Events the printer takes at once.
const CHUNK: usize = 4096;

#[derive(Default)]
struct State {
    model: Model,
    /// Recent events, with their arrival index.
    recent: VecDeque<(u64, Event)>,
    received: u64,
    /// Arrival index when the last command was sent.
    mark: u64,
    closed: bool,
    exit_code: Option<Option<i32>>,
}

struct Ctl {
    exit_printed: std::sync::atomic::AtomicBool,
    state: Mutex<State>,
    changed: Condvar,
    out: Mutex<std::io::Stdout>,
}

impl Ctl {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Print `exit` once, however the session ends.
    fn print_exit(&self, code: Option<i32>) {
        if !self.exit_printed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            self.print(&Event::Exit { code });
        }
    }

    fn print_all(&self, evs: &[Event]) {
        let mut out = self.out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut w = std::io::BufWriter::with_capacity(1 << 16, &mut *out);
        for ev in evs {
            let _ = serde_json::to_writer(&mut w, ev);
            let _ = w.write_all(b"\n");
        }
        let _ = w.flush();
    }

    fn print(&self, ev: &Event) {
        let mut out = self.out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = writeln!(out, "{}", ev.to_json());
        let _ = out.flush();
    }
}

/// Run the controller on an open connection; with `launched`, forward the program's
/// output and exit code. Returns the process exit code.
pub fn run(conn: Connection, launched: Option<Launched>) -> i32 {
    let ctl = Arc::new(Ctl {
        exit_printed: Default::default(),
        state: Mutex::new(State::default()),
        changed: Condvar::new(),
        out: Mutex::new(std::io::stdout()),
    });
    let (conn, rx) = conn.split();
    // Events from the agent.
    {
        let (ctl2, conn) = (ctl.clone(), conn.clone());
        let spawned = std::thread::Builder::new()
            .name("racetrack-ctl-events".into())
            .spawn(move || {
                let ctl = ctl2;
                // Take what has arrived (up to a chunk), print it with one flush, ingest it
                // under one lock: per-event syscalls and locking would make the controller
                // the bottleneck of a fast program.
                let mut chunk = Vec::with_capacity(CHUNK);
                'outer: while let Ok(first) = rx.recv() {
                    chunk.clear();
                    chunk.push(first);
                    while chunk.len() < CHUNK {
                        match rx.try_recv() {
                            Ok(ce) => chunk.push(ce),
                            Err(_) => break,
                        }
                    }
                    let mut closed = None;
                    let mut events = Vec::with_capacity(chunk.len());
                    for ce in chunk.drain(..) {
                        match ce {
                            ConnEvent::Event(ev) => {
                                if let (Some(id), true) = (ev.event_id(), is_ack_all(&ev)) {
                                    // The thesis' design: acknowledge every event over the network.
                                    conn.send(Command::Continue {
                                        thread: None,
                                        event_id: Some(id),
                                        trace: None,
                                    });
                                }
                                events.push(ev);
                            }
                            ConnEvent::Closed(reason) => {
                                closed = Some(reason);
                                break;
                            }
                        }
                    }
                    ctl.print_all(&events);
                    let mut st = ctl.lock();
                    for ev in events {
                        st.model.ingest(&ev);
                        st.received += 1;
                        let n = st.received;
                        st.recent.push_back((n, ev));
                    }
                    while st.recent.len() > RECENT_MAX {
                        st.recent.pop_front();
                    }
                    drop(st);
                    ctl.changed.notify_all();
                    if let Some(reason) = closed {
                        if let Some(r) = reason {
                            ctl.print(&Event::Error { message: r });
                        }
                        break 'outer;
                    }
                }
                ctl.lock().closed = true;
                ctl.changed.notify_all();
            });
        if let Err(e) = spawned {
            ctl.print(&Event::Error {
                message: format!("cannot start the event thread: {e}"),
            });
            return 1;
        }
    }
    // The program's output and exit.
    let program_mode = launched.is_some();
    if let Some(l) = launched {
        spawn_program_watch(ctl.clone(), l);
    } else {
        let ctl2 = ctl.clone();
        let _ = std::thread::Builder::new()
            .name("racetrack-ctl-exit".into())
            .spawn(move || {
                let mut st = ctl2.lock();
                while !st.closed {
                    st = ctl2
                        .changed
                        .wait(st)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                drop(st);
                ctl2.print(&Event::Exit { code: None });
                std::process::exit(0);
            });
    }
    // Commands from stdin.
    let stdin = std::io::stdin();
    for line in BufReader::new(stdin.lock()).lines() {
        let Ok(line) = line else { break };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        handle_line(&ctl, &conn, line);
    }
    // End of the script: let the program run free and wait for it.
    conn.send(Command::Detach);
    let mut st = ctl.lock();
    loop {
        if program_mode {
            if let Some(code) = st.exit_code {
                return code.unwrap_or(1);
            }
        } else if st.closed {
            drop(st);
            ctl.print_exit(None);
            return 0;
        }
        st = ctl
            .changed
            .wait(st)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }
}

fn is_ack_all(ev: &Event) -> bool {
    match ev {
        Event::Send(e) => e.held && e.reason == Some(HoldReason::AckAll),
        Event::Start(e) | Event::Stop(e) => e.held && e.reason == Some(HoldReason::AckAll),
        _ => false,
    }
}

fn handle_line(ctl: &Ctl, conn: &CommandSender, line: &str) {
    let v: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => {
            return ctl.print(&Event::Error {
                message: format!("malformed JSON: {e}"),
            })
        }
    };
    if v.get("cmd").and_then(Value::as_str) == Some("wait") {
        if let Err(e) = wait(ctl, &v) {
            ctl.print(&Event::Error { message: e });
        }
        return;
    }
    match Command::parse(line) {
        Ok(cmd) => {
            ctl.lock().model.note_command(&cmd);
            {
                let mut st = ctl.lock();
                st.mark = st.received;
            }
            if !conn.send(cmd) {
                ctl.print(&Event::Error {
                    message: "not connected: the command was not sent".into(),
                });
            }
        }
        Err(e) => ctl.print(&Event::Error { message: e }),
    }
}

fn matches(ev: &Event, pattern: &Value) -> bool {
    let Ok(Value::Object(ev)) = serde_json::to_value(ev) else {
        return false;
    };
    let Value::Object(p) = pattern else { return false };
    p.iter().all(|(k, v)| ev.get(k) == Some(v))
}

fn wait(ctl: &Ctl, v: &Value) -> Result<(), String> {
    let until = v
        .get("until")
        .and_then(Value::as_str)
        .ok_or("wait: `until` must be one of held, exit, queue, event")?;
    let timeout = Duration::from_millis(v.get("timeout_ms").and_then(Value::as_u64).unwrap_or(10_000));
    let thread = v.get("thread").and_then(Value::as_str);
    let op = v.get("op").and_then(Value::as_str);
    let count = v.get("count").and_then(Value::as_u64).unwrap_or(1) as usize;
    let pattern = v.get("match").cloned();
    match until {
        "held" | "exit" => {}
        "queue" if thread.is_some() => {}
        "queue" => return Err("wait until queue needs `thread`".into()),
        "event" if pattern.as_ref().is_some_and(Value::is_object) => {}
        "event" => return Err("wait until event needs `match`: an object of fields".into()),
        other => {
            return Err(format!(
                "wait: unknown `until` value `{other}` (held, exit, queue, event)"
            ))
        }
    }
    let deadline = Instant::now() + timeout;
    let mut st = ctl.lock();
    loop {
        let ok = match until {
            "held" => st.model.held.values().any(|e| {
                thread.is_none_or(|t| e.thread() == Some(t))
                    && op.is_none_or(|o| match e {
                        Event::Send(s) => s.op.as_deref() == Some(o),
                        Event::Start(s) | Event::Stop(s) => s.op == o,
                        _ => false,
                    })
            }),
            "exit" => st.exit_code.is_some() || st.closed,
            "queue" => st
                .model
                .queues
                .get(thread.unwrap_or_default())
                .is_some_and(|q| q.iter().filter(|m| op.is_none_or(|o| m.op == o)).count() >= count),
            _ => {
                let mark = st.mark;
                let p = pattern.as_ref().unwrap_or(&Value::Null);
                st.recent.iter().any(|(i, e)| *i > mark && matches(e, p))
            }
        };
        if ok {
            drop(st);
            ctl.print(&Event::Waited {
                until: until.to_owned(),
            });
            return Ok(());
        }
        if until != "exit" && (st.closed || st.exit_code.is_some()) {
            return Err(format!("wait until {until}: the program ended first"));
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(format!(
                "wait until {until} timed out after {} ms",
                timeout.as_millis()
            ));
        }
        st = ctl
            .changed
            .wait_timeout(st, deadline - now)
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0;
    }
}

fn spawn_program_watch(ctl: Arc<Ctl>, mut l: Launched) {
    let out_thread = l.stdout.take().map(|stdout| {
        let ctl = ctl.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                ctl.print(&Event::Output {
                    stream: "stdout".into(),
                    line,
                });
            }
        })
    });
    let err_rx = std::mem::replace(&mut l.stderr_lines, std::sync::mpsc::channel().1);
    let err_thread = {
        let ctl = ctl.clone();
        std::thread::spawn(move || {
            for line in err_rx {
                ctl.print(&Event::Output {
                    stream: "stderr".into(),
                    line,
                });
            }
        })
    };
    let _ = std::thread::Builder::new()
        .name("racetrack-ctl-exit".into())
        .spawn(move || {
            let status = l.child.wait();
            if let Some(t) = out_thread {
                let _ = t.join();
            }
            let _ = err_thread.join();
            // The program is gone; its socket ends after the last frames it sent, so every
            // event is printed before `exit` (bounded in case the connection hangs).
            let deadline = Instant::now() + Duration::from_secs(120);
            let mut st = ctl.lock();
            while !st.closed && Instant::now() < deadline {
                st = ctl
                    .changed
                    .wait_timeout(st, Duration::from_millis(50))
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
            }
            drop(st);
            let code = status.ok().and_then(|s| s.code());
            ctl.print(&Event::Exit { code });
            ctl.lock().exit_code = Some(code);
            ctl.changed.notify_all();
            std::process::exit(code.unwrap_or(1));
        });
}
