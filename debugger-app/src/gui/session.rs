//! What the GUI is attached to: the connection (events in, commands out) and, when the
//! GUI started the program, that process's output and exit code. Nothing here blocks: the
//! GUI polls with `try_recv` each frame.

use crate::conn::{CommandSender, ConnEvent, ConnectError, Connection};
use crate::launch::{launch, LaunchError, Launched};
use racetrack_protocol::Command;
use std::io::{BufRead, BufReader};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Wakes the UI when something arrives (set once the window exists).
pub type Waker = Arc<OnceLock<egui::Context>>;

/// Something that happened outside the agent's stream.
#[derive(Debug, Clone, PartialEq)]
pub enum ProcessEvent {
    /// A line the program printed (`stdout` or `stderr`).
    Output(&'static str, String),
    /// The program exited: its code, or the signal that killed it.
    Exited(Option<i32>, Option<i32>),
}

/// Why a session could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The program could not be started, or its agent never listened.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// The agent could not be reached.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// A thread forwarding the program's output or exit could not be started.
    #[error("{0}")]
    Thread(#[source] std::io::Error),
}

/// A debugging session.
pub struct Session {
    /// The agent's URL.
    pub url: String,
    sender: CommandSender,
    /// Events from the agent.
    pub events: Receiver<ConnEvent>,
    /// Output and exit of the program, when the GUI started it.
    pub process: Option<Receiver<ProcessEvent>>,
    /// The program, when the GUI started it. Closing the GUI detaches: it runs on.
    _child: Option<Arc<std::sync::Mutex<std::process::Child>>>,
}

/// New events: a frame within [`STREAM_FRAME`](super::app::STREAM_FRAME), not at once (see
/// there why the window draws few frames while events pour in).
fn wake(w: &Waker) {
    if let Some(ctx) = w.get() {
        ctx.request_repaint_after(super::app::STREAM_FRAME);
    }
}

/// A connection's waker that asks the GUI behind `w` for a repaint.
pub fn conn_waker(w: &Waker) -> crate::conn::Waker {
    let w = w.clone();
    Box::new(move || wake(&w))
}

impl Session {
    /// Attach to a running program's agent.
    pub fn attach(url: &str, waker: Waker) -> Result<Self, SessionError> {
        let w = waker.clone();
        let conn = Connection::connect_with_waker(url, Duration::from_secs(10), Box::new(move || wake(&w)))?;
        let (sender, events) = conn.split();
        Ok(Self {
            url: url.to_owned(),
            sender,
            events,
            process: None,
            _child: None,
        })
    }

    /// Start `program args` with the agent (held at its first operation) and attach.
    pub fn launch(program: &str, args: &[String], waker: Waker) -> Result<Self, SessionError> {
        let l = launch(program, args, Duration::from_secs(15))?;
        let s = Self::attach(&l.url, waker.clone())?;
        s.with_program(l, waker)
    }

    /// A session on a connection made elsewhere (a job's merged ranks, [`crate::job`]),
    /// without a program of its own; `url` names it.
    pub fn from_connection(conn: Connection, url: String) -> Self {
        let (sender, events) = conn.split();
        Self {
            url,
            sender,
            events,
            process: None,
            _child: None,
        }
    }

    /// An MPI job's session: `conn` merges its ranks ([`crate::job`]), `l` is its
    /// launcher.
    pub fn job(conn: Connection, l: Launched, waker: Waker) -> Result<Self, SessionError> {
        Self::from_connection(conn, l.url.clone()).with_program(l, waker)
    }

    /// This session, forwarding the output and exit of the program it started.
    fn with_program(mut self, mut l: Launched, waker: Waker) -> Result<Self, SessionError> {
        let (tx, rx) = mpsc::channel();
        // The readers hold `done`: the exit is sent after their last lines (or a bound).
        let (done, readers_done) = mpsc::channel::<()>();
        if let Some(out) = l.stdout.take() {
            let (tx, w, done) = (tx.clone(), waker.clone(), done.clone());
            std::thread::spawn(move || {
                let _done = done;
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    let _ = tx.send(ProcessEvent::Output("stdout", line));
                    wake(&w);
                }
            });
        }
        let err_rx = std::mem::replace(&mut l.stderr_lines, mpsc::channel().1);
        {
            let (tx, w, done) = (tx.clone(), waker.clone(), done);
            std::thread::spawn(move || {
                let _done = done;
                for line in err_rx {
                    let _ = tx.send(ProcessEvent::Output("stderr", line));
                    wake(&w);
                }
            });
        }
        let child = Arc::new(std::sync::Mutex::new(l.child));
        {
            let child = child.clone();
            let w = waker;
            std::thread::Builder::new()
                .name("racetrack-child".into())
                .spawn(move || loop {
                    let status = child.lock().map(|mut c| c.try_wait());
                    match status {
                        Ok(Ok(Some(st))) => {
                            // The output's last lines first (a child of the program may
                            // keep the pipes open: not longer than a bound).
                            let _ = readers_done.recv_timeout(Duration::from_secs(2));
                            let signal = std::os::unix::process::ExitStatusExt::signal(&st);
                            let _ = tx.send(ProcessEvent::Exited(st.code(), signal));
                            wake(&w);
                            break;
                        }
                        Ok(Ok(None)) => std::thread::sleep(Duration::from_millis(20)),
                        _ => {
                            let _ = tx.send(ProcessEvent::Exited(None, None));
                            wake(&w);
                            break;
                        }
                    }
                })
                .map_err(SessionError::Thread)?;
        }
        self.process = Some(rx);
        self._child = Some(child);
        Ok(self)
    }

    /// Send a command; false if the connection is closed.
    pub fn send(&self, cmd: Command) -> bool {
        self.sender.send(cmd)
    }

    /// `save_scenario` to `path` once the program has ended: its `ok` or `error`.
    pub fn save_kept(&self, path: &str) -> racetrack_protocol::Event {
        self.sender.save_kept(path, None)
    }
}
