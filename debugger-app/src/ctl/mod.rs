//! `racetrack ctl`: the headless controller. Commands are JSON lines on stdin (those of
//! `docs/PROTOCOL.md`), events JSON lines on stdout. `wait` is handled here:
//!
//! - `{"cmd":"wait","until":"held"}` — some event is held (optionally `"thread"`, `"op"`);
//! - `{"cmd":"wait","until":"exit"}` — the program exited (or the connection closed);
//! - `{"cmd":"wait","until":"queue","thread":"proc[1]","count":3}` — that many messages are
//!   pending on the thread (optionally only those for `"op"`);
//! - `{"cmd":"wait","until":"event","match":{"event":"recv","thread":"proc[1]"}}` — an event
//!   whose fields include all of `match`, received since the previous command was sent
//!   (`"since":"command"`, the default), or since the previous `continue` was sent
//!   (`"since":"continue"`; before any, since the session began): for an event that may
//!   come before a later command, such as a neighbour's update that was already done when
//!   a `move` went out.
//!
//! Each takes `timeout_ms` (default 10000) and answers `{"event":"waited","until":..}` or an
//! `error`. `move` sends a partial `reorder` (`"rest"`: the messages it does not name keep
//! their order, arrivals included). At the end of stdin the controller detaches (the
//! program runs free) and waits for the program to finish.
//!
//! A scenario ([`Input::Script`]) sends each command with its line number as request
//! number (`"req": N`) and waits for the agent's verdict (`ok` or `error` carrying it)
//! before the next line: any line refused, by the agent or here, stops the scenario with
//! `scenario line N: …; stopping the scenario`; the controller detaches, waits for the
//! program (printing its `exit` and the `outcome`) and exits with [`SCENARIO_STOPPED`].
//! A stdin line is sent with the request number it carries, if any (`"req": N`, which any
//! command may carry, the controller's own ones too), and then awaited like a scenario's
//! (without stopping anything): its verdict carries `N`. A line without one is not awaited.

mod clock;
mod command;
mod events;
mod program;
mod state;
mod wait;

use crate::conn::{CommandSender, Connection};
use crate::launch::Launched;
use crate::model::Model;
use racetrack_protocol::{Command, Event};
use state::{Ctl, State};
use std::io::{BufRead, BufReader};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Recent events kept at least, for `wait until event`.
const RECENT_MAX: usize = 200_000;
/// Items (single events, or packed frames of up to 1,024) the printer takes at once.
const CHUNK: usize = 64;
/// The controller's exit code when a scenario stopped at a failing line (whatever the
/// program's own exit, which is printed in its `exit` event).
pub const SCENARIO_STOPPED: i32 = 3;
/// How long a scenario waits for a command's verdict while nothing arrives (events still
/// arriving restart the wait: the verdict may be behind them in the stream).
const VERDICT_TIMEOUT: Duration = Duration::from_secs(10);

/// Run the controller on an open connection; with `launched`, forward the program's
/// output and exit code. Returns the process exit code.
pub fn run(conn: Connection, launched: Option<Launched>) -> i32 {
    run_with(conn, launched, Input::Stdin)
}

/// Where commands come from.
pub enum Input {
    /// JSON lines on stdin (interactive or piped).
    Stdin,
    /// A scenario file's lines (variables already substituted). Each command waits for its
    /// verdict; the first failing or refused line stops it (exit code
    /// [`SCENARIO_STOPPED`]); at its end the controller detaches, waits for the program and
    /// prints `{"event":"outcome","result":...}` with the program's final line.
    Script(String),
}

/// Substitute `${NAME}` by its value in a scenario; a value `coll[i]` also defines
/// `${NAME-1}` = `coll[i-1]` and `${NAME+1}` = `coll[i+1]` (a thread's neighbours).
pub fn substitute(text: &str, vars: &[(String, String)]) -> Result<String, UnsetVariable> {
    let mut out = text.to_owned();
    for (k, v) in vars {
        out = out.replace(&format!("${{{k}}}"), v);
        if let Some((coll, rest)) = v.split_once('[') {
            if let Some(Ok(i)) = rest.strip_suffix(']').map(str::parse::<usize>) {
                if let Some(prev) = i.checked_sub(1) {
                    out = out.replace(&format!("${{{k}-1}}"), &format!("{coll}[{prev}]"));
                }
                out = out.replace(&format!("${{{k}+1}}"), &format!("{coll}[{}]", i + 1));
            }
        }
    }
    if let Some(i) = out.find("${") {
        let name: String = out[i + 2..].chars().take_while(|c| *c != '}').collect();
        return Err(UnsetVariable { name });
    }
    Ok(out)
}

/// A scenario names a variable no `--set` gave a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("scenario variable `${{{name}}}` has no value (pass --set {name}=VALUE)")]
pub struct UnsetVariable {
    /// The variable's name, without `${` and `}`.
    pub name: String,
}

/// Like [`run`], with commands from `input`.
pub fn run_with(conn: Connection, launched: Option<Launched>, input: Input) -> i32 {
    let ctl = Arc::new(Ctl {
        exit_printed: Default::default(),
        scenario_stopped: Default::default(),
        outcome_pending: Mutex::new(matches!(input, Input::Script(_))),
        last_stdout: Mutex::new(String::new()),
        state: Mutex::new(State {
            model: Model::new().with_clocks(),
            ..State::default()
        }),
        changed: Condvar::new(),
        out: Mutex::new(std::io::stdout()),
        announced: Default::default(),
    });
    let (conn, rx) = conn.split();
    if let Err(e) = events::spawn(ctl.clone(), conn.clone(), rx) {
        ctl.print(&Event::Error {
            message: format!("cannot start the event thread: {e}"),
            req: None,
        });
        return 1;
    }
    let program_mode = launched.is_some();
    match launched {
        Some(l) => program::watch_program(ctl.clone(), l),
        None => program::watch_connection(ctl.clone()),
    }
    match input {
        Input::Stdin => read_stdin(&ctl, &conn),
        Input::Script(text) => run_script(&ctl, &conn, &text),
    }
    // The end of the commands: let the program run free and wait for it.
    conn.send(Command::Detach);
    let mut st = ctl.lock();
    loop {
        if program_mode {
            if let Some(code) = st.exit_code {
                return ctl.exit_code(code.unwrap_or(1));
            }
        } else if st.closed {
            drop(st);
            ctl.print_exit(None);
            return ctl.exit_code(0);
        }
        st = ctl
            .changed
            .wait(st)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }
}

/// Commands from stdin, each answered (or its error printed) before the next is read.
fn read_stdin(ctl: &Ctl, conn: &CommandSender) {
    let mut reader = BufReader::new(std::io::stdin().lock());
    let mut line = String::new();
    // Busy from a line's arrival until its answer; a line already received (a whole one
    // in the buffer) keeps it busy, so the session does not end between two commands
    // sent together.
    let mut busy = Busy::idle(ctl);
    loop {
        line.clear();
        if !reader.read_line(&mut line).is_ok_and(|k| k > 0) {
            break;
        }
        busy.set();
        let cmd = line.trim();
        if !cmd.is_empty() {
            handle_line_printing(ctl, conn, cmd, None, None);
        }
        if !reader.buffer().contains(&b'\n') {
            busy.clear();
        }
    }
}

/// A scenario's lines, each sent with its line number as request number and its verdict
/// awaited: the first line refused (by the agent or here) stops the scenario.
fn run_script(ctl: &Ctl, conn: &CommandSender, text: &str) {
    // The whole scenario is known: busy until its end.
    let mut busy = Busy::idle(ctl);
    busy.set();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if !handle_line_printing(ctl, conn, line, Some(n as u64 + 1), Some(n + 1)) {
            ctl.scenario_stopped
                .store(true, std::sync::atomic::Ordering::SeqCst);
            break;
        }
    }
}

/// [`command::handle_line`], its error printed; whether it succeeded. `scenario_line`:
/// the line of a scenario, which a failure stops (said in the error). A refusal the agent
/// printed itself (its `error` carries the line's `req`) is not printed again on stdin;
/// an error of the controller's carries the `req` the line itself carried.
fn handle_line_printing(
    ctl: &Ctl,
    conn: &CommandSender,
    line: &str,
    default_req: Option<u64>,
    scenario_line: Option<usize>,
) -> bool {
    let r = command::handle_line(ctl, conn, line, default_req);
    if let Err(f) = &r {
        let message = match scenario_line {
            Some(n) => format!("scenario line {n}: {}; stopping the scenario", f.message),
            None if f.answered => return false,
            None => f.message.clone(),
        };
        ctl.print(&Event::Error {
            message,
            req: if f.answered { None } else { f.req },
        });
    }
    r.is_ok()
}

/// Commands are being handled (see [`State::busy`]) while one of these is set: the
/// session's end waits. Cleared (and the end told) by [`Busy::clear`] or when dropped,
/// however the handling ends.
struct Busy<'a> {
    ctl: &'a Ctl,
    on: bool,
}

impl<'a> Busy<'a> {
    /// Not set yet.
    fn idle(ctl: &'a Ctl) -> Self {
        Busy { ctl, on: false }
    }

    fn set(&mut self) {
        if !self.on {
            self.ctl.lock().busy = true;
            self.on = true;
        }
    }

    /// Not busy any more (until the next [`Busy::set`]).
    fn clear(&mut self) {
        if std::mem::take(&mut self.on) {
            self.ctl.lock().busy = false;
            self.ctl.changed.notify_all();
        }
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_variables_and_their_neighbours() {
        let vars = [("T".to_owned(), "proc[1]".to_owned())];
        let out = substitute("${T} ${T-1} ${T+1}", &vars).expect("all set");
        assert_eq!(out, "proc[1] proc[0] proc[2]");
        let e = substitute("{\"thread\":\"${THREAD}\"}", &vars).expect_err("unset");
        assert_eq!(e.name, "THREAD");
        assert_eq!(
            e.to_string(),
            "scenario variable `${THREAD}` has no value (pass --set THREAD=VALUE)"
        );
    }
}
