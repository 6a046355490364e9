//! A rank inside an MPI call the wrappers do not cover (MPI-IO, the neighbour
//! collectives, …) reports nothing: to the debugger it would look as if it computed. So
//! does one inside a covered call it made before the debugger attached (its `start` was
//! never sent).
//! A thread of the core's own watches for a rank that has reported nothing for
//! [`QUIET`] while no reported call is open, and then samples where the MPI_Init thread
//! is (`c/sample.c`: a signal, and the frames of its stack). Inside an unreported MPI
//! call, the rank says so with an `unreported` event: the call and its site (and, for a
//! covered call, that it began before the debugger attached). Sampling
//! goes on while the rank stays quiet, less and less often (up to every [`LONGEST`]): a
//! rank that computed first and calls later is still found, and one that left the call
//! without reporting anything says so too (an `unreported` without a call).
//!
//! The signal goes only to a thread that is on a CPU or yielding it (MPI
//! implementations wait by polling), never to one blocked in a system call, which the
//! signal could end early (`sleep` returns early on a signal). Nothing is sampled while
//! no debugger is attached or reporting is off (`MPI_Pcontrol(0)`).

use super::{lock, CORE};
use crate::ffi::{self, Sampled};
use racetrack_protocol::{Event, SmolStr};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// How often the watcher looks.
const TICK: Duration = Duration::from_millis(250);
/// How long a rank must have reported nothing before it is sampled.
pub(crate) const QUIET: Duration = Duration::from_secs(1);
/// The longest time between two samples of a rank that stays quiet.
const LONGEST: Duration = Duration::from_secs(4);

/// Start the watcher of the MPI_Init thread, kernel thread `tid`.
pub(crate) fn watch(tid: i32) {
    let _ = std::thread::Builder::new()
        .name("racetrack-sample".into())
        .spawn(move || run(tid));
}

fn run(tid: i32) {
    let Some(core) = CORE.get() else { return };
    let mut seen = u64::MAX;
    // When to sample next, and the time to the one after.
    let mut next = Instant::now() + QUIET;
    let mut interval = QUIET;
    let mut told: Option<Told> = None;
    while !core.finished.load(Relaxed) {
        std::thread::sleep(TICK);
        let seq = core.seq.load(Relaxed);
        let busy = !lock(&core.in_flight).0.is_empty();
        let looking = core.hot.load(Relaxed) && !core.off.load(Relaxed);
        if seq != seen || busy || !looking {
            if seq != seen {
                // Its calls since say where it is: the debugger drops what was told.
                told = None;
            }
            seen = seq;
            next = Instant::now() + QUIET;
            interval = QUIET;
            continue;
        }
        if Instant::now() < next || !on_cpu(tid) {
            continue;
        }
        let now = match ffi::sample() {
            Some(Sampled::Unreported(call, caller)) => Some((call, core.site(caller), false)),
            Some(Sampled::Covered(call, caller)) => Some((call, core.site(caller), true)),
            Some(Sampled::Elsewhere) => None,
            None => continue,
        };
        // A call reported meanwhile (one the sample caught in its wrapper before the
        // wrapper reported it) says where the rank is itself.
        let moved = core.seq.load(Relaxed) != seen || !lock(&core.in_flight).0.is_empty();
        if now != told && !moved && !core.finished.load(Relaxed) {
            let (call, site, before_attach) = now
                .clone()
                .map_or((None, None, false), |(c, s, b)| (Some(c), s, b));
            core.agent.reply(Event::Unreported {
                thread: core.thread.to_string(),
                call,
                site: site.map(|s| s.to_string()),
                before_attach,
            });
            told = now;
        }
        interval = interval.saturating_mul(2).min(LONGEST);
        next = Instant::now() + interval;
    }
}

/// What the debugger was told of the rank: the call, its site, and whether it is a
/// covered call begun before the debugger attached.
type Told = (String, Option<SmolStr>, bool);

/// Whether kernel thread `tid` of this process runs, or yields its CPU: not blocked in a
/// system call (`/proc/self/task/TID/syscall`: `running`, or the call's number first).
fn on_cpu(tid: i32) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")) else {
        return false;
    };
    let first = text.split_whitespace().next().unwrap_or("");
    first == "running" || first.parse::<i64>().is_ok_and(|n| n == SCHED_YIELD)
}

#[cfg(target_arch = "x86_64")]
const SCHED_YIELD: i64 = 24;
#[cfg(target_arch = "aarch64")]
const SCHED_YIELD: i64 = 124;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const SCHED_YIELD: i64 = -2;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// This thread's kernel id.
    fn tid() -> Option<i32> {
        let link = std::fs::read_link("/proc/thread-self").ok()?;
        link.file_name()?.to_str()?.parse().ok()
    }

    /// Whether `on_cpu` of a thread doing `work` (until the flag is set) reaches `want`.
    fn reaches(want: bool, work: fn(&AtomicBool)) -> bool {
        let stop = Arc::new(AtomicBool::new(false));
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let flag = stop.clone();
        let t = std::thread::spawn(move || {
            tid_tx.send(tid()).ok();
            work(&flag);
        });
        let tid = tid_rx.recv().ok().flatten().expect("its thread id");
        let deadline = Instant::now() + Duration::from_secs(10);
        while on_cpu(tid) != want && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let reached = on_cpu(tid) == want;
        stop.store(true, Relaxed);
        t.join().ok();
        reached
    }

    #[test]
    fn a_thread_that_computes_is_on_a_cpu_and_one_that_sleeps_is_not() {
        assert!(reaches(true, |stop| while !stop.load(Relaxed) {
            std::hint::spin_loop();
        }));
        assert!(reaches(false, |stop| while !stop.load(Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }));
    }
}
