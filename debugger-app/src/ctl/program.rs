//! How a controller session ends: a started program's output and exit, or the end of the
//! connection to a program it attached to.

use super::state::Ctl;
use crate::launch::Launched;
use racetrack_protocol::CtlEvent;
use std::io::{BufRead, BufReader};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Attached to a running program: when the connection ends and no command is being
/// handled, print `exit` and end the process.
pub(super) fn watch_connection(ctl: Arc<Ctl>) {
    let _ = std::thread::Builder::new()
        .name("racetrack-ctl-exit".into())
        .spawn(move || {
            let mut st = ctl.lock();
            while !st.closed || st.busy {
                st = ctl
                    .changed
                    .wait(st)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            drop(st);
            ctl.print_exit(None);
            std::process::exit(ctl.exit_code(0));
        });
}

/// A program the controller started: forward its output lines as `output` events, and at
/// its exit (after its last events) print `exit` and end the process with its code.
pub(super) fn watch_program(ctl: Arc<Ctl>, mut l: Launched) {
    let out_thread = l.stdout.take().map(|stdout| {
        let ctl = ctl.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                *ctl.last_stdout
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = line.clone();
                ctl.print(&CtlEvent::Output {
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
                ctl.print(&CtlEvent::Output {
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
            while (!st.closed || st.busy) && Instant::now() < deadline {
                st = ctl
                    .changed
                    .wait_timeout(st, Duration::from_millis(50))
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
            }
            drop(st);
            let status = status.ok();
            let code = status.and_then(|s| s.code());
            let signal = status.and_then(|s| std::os::unix::process::ExitStatusExt::signal(&s));
            // `exit` (and a scenario's `outcome`) are the last lines: stdout stays locked
            // while the process ends, so nothing woken by the exit prints after them.
            let _last = ctl.print_exit_and_hold(code, signal);
            ctl.lock().exit_code = Some(code);
            ctl.changed.notify_all();
            // A program killed by a signal: the shell's convention, 128 + the signal.
            std::process::exit(ctl.exit_code(code.or(signal.map(|s| 128 + s)).unwrap_or(1)));
        });
}
