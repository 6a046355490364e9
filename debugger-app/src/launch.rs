//! Starting a program with the agent: `RACETRACK_LISTEN=127.0.0.1:0 RACETRACK_WAIT=1`,
//! then reading the `racetrack: listening on ws://...` line from its stderr.

use racetrack_protocol::launch::{self as env, LISTENING};
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Why a program or a job's launcher could not be started, or its agent never listened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The program cannot be started.
    #[error("cannot start `{program}`: {source}")]
    Start {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// A job's launcher cannot be started.
    #[error("cannot start {command}: {source}")]
    StartJob {
        /// The launcher's command line, as `Debug` shows it.
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// The child has no stderr pipe.
    #[error("no stderr pipe")]
    NoStderr,
    /// The thread reading its stderr cannot be started.
    #[error("{0}")]
    Thread(#[source] std::io::Error),
    /// The program exited before its agent listened.
    #[error(
        "`{program}` exited ({status}) before its agent listened; does it use the Racetrack runtime? It said:\n{}",
        said.join("\n")
    )]
    Exited {
        /// The program.
        program: String,
        /// How it exited.
        status: std::process::ExitStatus,
        /// Its stderr lines.
        said: Vec<String>,
    },
    /// The program did not print its `listening` line in time (it is killed).
    #[error("`{program}` did not print `{LISTENING}...` within {ms} ms")]
    Timeout {
        /// The program.
        program: String,
        /// The timeout.
        ms: u128,
    },
}

/// A started program whose agent is listening.
pub struct Launched {
    /// The program's process (to wait for, or kill when the debugger quits).
    pub child: Child,
    /// The agent's WebSocket URL.
    pub url: String,
    /// Its stdout (not yet read).
    pub stdout: Option<ChildStdout>,
    /// Its stderr lines after the `listening` line (and the ones before it, first).
    pub stderr_lines: mpsc::Receiver<String>,
}

/// Start `program args` with the agent, held at its first operation.
pub fn launch(program: &str, args: &[String], timeout: Duration) -> Result<Launched, LaunchError> {
    let mut child = Command::new(program)
        .args(args)
        .env(env::ENV_LISTEN, "127.0.0.1:0")
        .env(env::ENV_WAIT, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| LaunchError::Start {
            program: program.to_owned(),
            source,
        })?;
    let stderr = child.stderr.take().ok_or(LaunchError::NoStderr)?;
    let (url_tx, url_rx) = mpsc::channel();
    let (line_tx, line_rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("racetrack-stderr".into())
        .spawn(move || {
            let mut found = false;
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if !found {
                    if let Some(url) = env::listening_url(&line) {
                        found = true;
                        let _ = url_tx.send(url.trim().to_owned());
                        continue;
                    }
                }
                if line_tx.send(line).is_err() {
                    break;
                }
            }
        })
        .map_err(LaunchError::Thread)?;
    let deadline = Instant::now() + timeout;
    loop {
        match url_rx.recv_timeout(Duration::from_millis(50)) {
            Ok(url) => {
                let stdout = child.stdout.take();
                return Ok(Launched {
                    child,
                    url,
                    stdout,
                    stderr_lines: line_rx,
                });
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {}
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(LaunchError::Exited {
                program: program.to_owned(),
                status,
                said: line_rx.try_iter().collect(),
            });
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            return Err(LaunchError::Timeout {
                program: program.to_owned(),
                ms: timeout.as_millis(),
            });
        }
    }
}

/// Resident memory of process `pid` in KiB (`None` once it is gone).
pub fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Start a job's launcher (`mpiexec …`, its command built by the caller) with its output
/// piped: its ranks dial the debugger, so nothing is awaited here. `url` is what they
/// dial.
pub fn spawn_job(mut cmd: Command, url: &str) -> Result<Launched, LaunchError> {
    let command = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| LaunchError::StartJob { command, source })?;
    let stderr = child.stderr.take().ok_or(LaunchError::NoStderr)?;
    let (line_tx, line_rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("racetrack-stderr".into())
        .spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line_tx.send(line).is_err() {
                    break;
                }
            }
        })
        .map_err(LaunchError::Thread)?;
    let stdout = child.stdout.take();
    Ok(Launched {
        child,
        url: url.to_owned(),
        stdout,
        stderr_lines: line_rx,
    })
}
