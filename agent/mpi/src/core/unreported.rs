//! A rank inside an MPI call the wrappers do not cover (MPI-IO, the neighbour
//! collectives, …) reports nothing: to the debugger it would look as if it computed. So
//! does one inside a covered call it made before the debugger attached (its `start` was
//! never sent).
//!
//! A thread of the core's own watches for a rank that has reported nothing for
//! [`QUIET`] while no reported call is open, and then samples where the MPI_Init thread
//! is (`c/sample.c`: a signal, and the frames of its stack). A finding is told once a
//! second sample, a tick later, agrees: the rank sends an `unreported` event with the
//! call and its site (and, for a covered call, that it began before the debugger
//! attached). Sampling goes on while the rank stays quiet, less and less often (up to
//! every [`LONGEST`]): a rank that computed first and calls later is still found, and
//! one that left the call without reporting anything says so (an `unreported` without a
//! call). Calls that never wait (`MPI_Wtime`, `MPI_Comm_rank`, …) are not told: a loop
//! around them is computing.
//!
//! The signal goes only to a thread the watcher just saw on a CPU or yielding it (MPI
//! implementations wait by polling), not blocked in a system call, which the signal
//! could end early (`sleep` returns early on a signal), and with the signal neither
//! blocked nor pending. A thread that could not be sampled [`GIVE_UP`] times in a row is
//! left alone until it reports again. Nothing is sampled while no debugger is attached
//! or reporting is off (`MPI_Pcontrol(0)`); a new attach is told afresh.

use super::{lock, Core, InFlight, CORE};
use crate::call::Call;
use crate::ffi::{self, Adoption, Sampled};
use crate::site_lines::Sites;
use racetrack_protocol::{Event, Kind, RecordText, SmolStr};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the watcher looks.
const TICK: Duration = Duration::from_millis(250);
/// How long a rank must have reported nothing before it is sampled.
pub(crate) const QUIET: Duration = Duration::from_secs(1);
/// The longest time between two samples of a rank that stays quiet.
const LONGEST: Duration = Duration::from_secs(4);
/// Failed samples in a row after which the watcher waits for the rank to report again.
const GIVE_UP: u32 = 3;

/// MPI calls that never wait for another rank: a sample inside one is computing.
const LOCAL: &[&str] = &[
    "MPI_Wtime",
    "MPI_Wtick",
    "MPI_Comm_rank",
    "MPI_Comm_size",
    "MPI_Initialized",
    "MPI_Finalized",
    "MPI_Query_thread",
    "MPI_Is_thread_main",
    "MPI_Get_count",
    "MPI_Get_elements",
    "MPI_Get_processor_name",
    "MPI_Get_version",
    "MPI_Get_library_version",
    "MPI_Type_size",
    "MPI_Error_string",
];

/// Start the watcher of the MPI_Init thread, kernel thread `tid`, sampled with signal
/// `sig`.
pub(crate) fn watch(tid: i32, sig: i32) {
    let _ = std::thread::Builder::new()
        .name("racetrack-sample".into())
        .spawn(move || run(tid, sig));
}

/// What the debugger was told of the rank: the call, its site, and whether it is a
/// covered call begun before the debugger attached.
type Told = (String, Option<SmolStr>, bool);

fn run(tid: i32, sig: i32) {
    let Some(core) = CORE.get() else { return };
    // Sites resolved here, apart from the rank's: reading a module's DWARF must not
    // hold up the rank's next call.
    let mut sites = Sites::default();
    let mut seen = u64::MAX;
    // When to sample next, and the time to the one after.
    let mut next = Instant::now() + QUIET;
    let mut interval = QUIET;
    let mut failed = 0;
    let mut told: Option<Told> = None;
    // The last sample's finding, not told yet: a second one must agree.
    let mut last: Option<Option<Told>> = None;
    while !core.finished.load(Relaxed) {
        std::thread::sleep(TICK);
        let seq = core.seq.load(Relaxed);
        let busy = !lock(&core.in_flight).0.is_empty();
        let looking = core.hot.load(Relaxed) && !core.off.load(Relaxed);
        if seq != seen || busy || !looking {
            if seq != seen || !looking {
                // Its calls say where it is; a debugger that attaches next hears afresh.
                told = None;
            }
            seen = seq;
            next = Instant::now() + QUIET;
            interval = QUIET;
            failed = 0;
            last = None;
            continue;
        }
        if Instant::now() < next || failed >= GIVE_UP || !on_cpu(tid) || !deliverable(tid, sig) {
            continue;
        }
        let now = match ffi::sample() {
            Some(Sampled::Unreported(call, _) | Sampled::Covered(call, _))
                if LOCAL.contains(&call.as_str()) =>
            {
                None
            }
            Some(Sampled::Unreported(call, caller)) => Some((call, sites.site(caller), false)),
            // A covered call that is not reported: one the wrappers pass straight on
            // (they report only the calls in CALLS).
            Some(Sampled::Covered(call, caller)) if super::CALLS.contains(&call.as_str()) => {
                Some((call, sites.site(caller), true))
            }
            Some(Sampled::Covered(..) | Sampled::Elsewhere) => None,
            None => {
                failed += 1;
                interval = interval.saturating_mul(2).min(LONGEST);
                next = Instant::now() + interval;
                continue;
            }
        };
        failed = 0;
        // A call reported meanwhile (one the sample caught in its wrapper before the
        // wrapper reported it) says where the rank is itself.
        if core.seq.load(Relaxed) != seen || !lock(&core.in_flight).0.is_empty() {
            continue;
        }
        // A covered call begun before the attach is adopted once confirmed, told or not
        // (an earlier attempt may have failed); anything else is told when it changes.
        let covered = matches!(&now, Some((_, _, true)));
        if last.as_ref() != Some(&now) && (now != told || covered) {
            // Acted on only when the next sample, a tick later, finds the same; one
            // that disagrees waits its turn.
            let first = last.is_none();
            last = Some(now);
            if !first {
                interval = interval.saturating_mul(2).min(LONGEST);
            }
            next = Instant::now() + if first { Duration::ZERO } else { interval };
            continue;
        }
        if let Some((call, site, true)) = &now {
            // Reported now, its start like any other's (the deadlock detection then
            // sees it); told as unreported only if it cannot be.
            if ffi::adopt_open(call, |c| adopt(core, c, site.clone())) == Adoption::Adopted {
                continue;
            }
        }
        if now != told && !core.finished.load(Relaxed) {
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
        last = None;
        interval = interval.saturating_mul(2).min(LONGEST);
        next = Instant::now() + interval;
    }
}

/// Report the start of `call`, which the rank began before the debugger attached and
/// is still in, at `site`, and for a send its `send` (without content); its token, for
/// the call's `stop`, which is reported as any other's. Never held (the rank is inside
/// MPI), and not asked of the policy (a breakpoint's hit count leaves it out). What it
/// waits for is not known beyond its own fields: the requests and receives it may await
/// were made before the attach, untold.
fn adopt(core: &Core, mut call: Call, site: Option<SmolStr>) -> Option<u64> {
    if !core.agent.is_attached() || core.off.load(Relaxed) {
        return None;
    }
    let seq = core.seq.fetch_add(1, Relaxed);
    let (op, op_name) = core.op(call.name);
    let info = Arc::new(call.info(site));
    core.view.calling(&op_name, seq);
    let sends = call.sends();
    let fl = InFlight::new((seq, op, op_name), call, info, false);
    // Without backpressure: the rank's next match or stop waits for this lock.
    core.agent
        .record(core.record(Kind::Start, fl.seq, fl.op, fl.info.clone()), false);
    if sends {
        let mut rec = core.record(Kind::Send, fl.seq, fl.op, fl.info.clone());
        rec.b = fl.call.peer_world.map_or(-1, i64::from);
        let type_name = fl.info.datatype.as_deref().unwrap_or("MPI_BYTE");
        rec.text = RecordText::Type(type_name.into());
        core.agent.record(rec, false);
    }
    lock(&core.in_flight).insert(seq + 1, fl);
    Some(seq + 1)
}

/// Whether kernel thread `tid` of this process runs, or yields its CPU: not blocked in a
/// system call (`/proc/self/task/TID/syscall`: `running`, or the call's number first).
fn on_cpu(tid: i32) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")) else {
        return false;
    };
    let first = text.split_whitespace().next().unwrap_or("");
    first == "running" || first.parse::<i64>().is_ok_and(|n| n == SCHED_YIELD)
}

/// Whether signal `sig` would reach thread `tid` now: neither blocked there nor already
/// pending (`/proc/self/task/TID/status`: `SigBlk`, `SigPnd`, `ShdPnd`).
fn deliverable(tid: i32, sig: i32) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")) else {
        return false;
    };
    let Some(bit) = u32::try_from(sig - 1).ok().and_then(|b| 1u64.checked_shl(b)) else {
        return false;
    };
    let masks = ["SigBlk:", "SigPnd:", "ShdPnd:"].map(|key| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
    });
    masks.iter().all(|m| m.is_some_and(|m| m & bit == 0))
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
    fn a_signal_nobody_blocks_is_deliverable_and_no_signal_is_not() {
        let me = tid().expect("this thread's id");
        // The test harness blocks no real-time signal.
        assert!(deliverable(me, 60));
        assert!(!deliverable(me, 0));
        assert!(!deliverable(me, 99));
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
