//! Nothing lost when the program dies. Events leave in batches (every 10 ms, see
//! `server`), so a program that dies between two flushes would take its last events with
//! it — and those are the ones that matter: the receive that decided the failure. Armed
//! once per process by the first agent started from the environment:
//!
//! - `exit` without the usual end (no `MPI_Finalize`, the runtime not dropped): an
//!   `atexit` handler;
//! - `abort` and the fatal signals (`SIGABRT`, `SIGSEGV`, `SIGBUS`, `SIGFPE`, `SIGILL`,
//!   `SIGTERM`, `SIGINT`, `SIGHUP`, `SIGQUIT`): a handler that flushes, then puts back
//!   the action it displaced and lets the signal take its course — raised again, or, for
//!   a fault the hardware raised, by returning to the faulting instruction, so that the
//!   previous handler (Open MPI's backtrace, Rust's stack-overflow message) sees the real
//!   fault. `SIGTERM`, `SIGINT`, `SIGHUP` and `SIGQUIT` are caught only where they would
//!   end the program (no handler of its own: one may keep it running).
//!
//! The flush ([`Agent::flush_before_death`]) reads atomics and sleeps only: in a signal
//! handler, a lock the dying thread holds would never be released. The agent's own
//! thread blocks the asynchronous signals, so that a `SIGTERM` for the process is handled
//! on a program thread while the agent's thread does the sending. `SIGKILL` cannot be
//! caught: a killed process loses what it had not sent.
//!
//! The only unsafe code of the crate, each use said sound where it is.
#![allow(unsafe_code)]

use super::Agent;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// The signals that end a process by default and that a handler can catch.
const FATAL: [libc::c_int; 9] = [
    libc::SIGABRT,
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
];

/// The signals another process (or `kill`) sends, which the agent's thread leaves to the
/// program's threads.
const ASYNC: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

/// The agent whose events are flushed: the process's first.
static AGENT: OnceLock<Arc<Agent>> = OnceLock::new();
/// Set by the first death handler to run: a second (the `SIGABRT` of a stack-overflow
/// report, `exit` from a handler) does not flush again.
static DYING: AtomicBool = AtomicBool::new(false);

/// The action each caught signal had before, to put back (index as in [`FATAL`]).
struct Displaced([Option<libc::sigaction>; FATAL.len()]);
// SAFETY: a `sigaction` is plain data (a handler address, a mask, flags); it is written
// once before any handler can read it and never changed after.
unsafe impl Sync for Displaced {}
unsafe impl Send for Displaced {}
static DISPLACED: OnceLock<Displaced> = OnceLock::new();

/// Flush on death for `agent`, once per process (later agents are not armed).
pub(super) fn arm(agent: &Arc<Agent>) {
    if AGENT.set(agent.clone()).is_err() {
        return;
    }
    // SAFETY: `at_exit` is an `extern "C" fn()` that never unwinds.
    if unsafe { libc::atexit(at_exit) } != 0 {
        eprintln!("racetrack: cannot register the exit handler; events of an exit may be lost");
    }
    let mut displaced = Displaced([None; FATAL.len()]);
    for (i, &sig) in FATAL.iter().enumerate() {
        displaced.0[i] = install(sig);
    }
    let _ = DISPLACED.set(displaced);
}

/// Catch `sig`, returning the action it displaced; `None` when it is left alone: ignored
/// (the program or its parent chose so), an asynchronous signal the program handles
/// itself (its handler may well go on running: if it ends the program with `exit`, the
/// exit handler flushes), or the call failed. A fault's or `abort`'s handler never
/// returns to the program, so those are caught whatever handles them (Open MPI's
/// backtrace, Rust's stack-overflow report), and handed on.
fn install(sig: libc::c_int) -> Option<libc::sigaction> {
    // SAFETY: zeroed `sigaction`s are valid values; `sigaction` reads `new` and writes
    // `old`, both live locals; the handler has the `SA_SIGINFO` signature.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 || old.sa_sigaction == libc::SIG_IGN {
            return None;
        }
        if ASYNC.contains(&sig) && old.sa_sigaction != libc::SIG_DFL {
            return None;
        }
        let mut new: libc::sigaction = std::mem::zeroed();
        let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = on_signal;
        new.sa_sigaction = handler as libc::sighandler_t;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
        libc::sigemptyset(&mut new.sa_mask);
        if libc::sigaction(sig, &new, &mut old) != 0 {
            return None;
        }
        Some(old)
    }
}

/// Called on the agent's own thread: the asynchronous signals go to the program's
/// threads instead (a handler on this thread would wait for itself to send).
pub(super) fn keep_off_this_thread() {
    // SAFETY: `set` is a live local initialised by `sigemptyset`; `pthread_sigmask` only
    // changes this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in ASYNC {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

fn flush_once() {
    if DYING.swap(true, Ordering::SeqCst) {
        return;
    }
    if let Some(agent) = AGENT.get() {
        agent.flush_before_death();
    }
}

extern "C" fn at_exit() {
    flush_once();
}

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _context: *mut libc::c_void) {
    flush_once();
    let index = FATAL.iter().position(|&s| s == sig);
    let old = index.and_then(|i| DISPLACED.get().and_then(|d| d.0[i]));
    // SAFETY: `info` is the kernel's siginfo for this delivery (`SA_SIGINFO`), valid for
    // the handler's duration; `sigaction` and `raise` are async-signal-safe.
    unsafe {
        if let Some(old) = old {
            libc::sigaction(sig, &old, std::ptr::null_mut());
        } else {
            libc::signal(sig, libc::SIG_DFL);
        }
        // A fault the hardware raised (si_code > 0) happens again on return, now under
        // the old action; a signal sent by `kill`, `raise` or `abort` is sent again: it
        // stays pending (blocked in its own handler) until this handler returns.
        let from_hardware = !info.is_null() && (*info).si_code > 0;
        let synchronous = matches!(sig, libc::SIGSEGV | libc::SIGBUS | libc::SIGFPE | libc::SIGILL);
        if !(synchronous && from_hardware) {
            libc::raise(sig);
        }
    }
}
