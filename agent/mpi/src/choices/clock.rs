//! The program's clock readings: kept when recording, returned from the log when
//! replaying, and told apart from the MPI library's own.

use super::{lock, CHOICES, MAX_PENDING};
use racetrack_agent::choice::{Chooser, Pick, Point};

/// `rt_clock`: `MPI_Wtime` (or `time()`, `libc`) read `t`. Recording keeps it; a replay
/// returns the recorded reading instead (the real one past the log's).
pub(crate) fn clock(t: f64, caller: usize, libc: bool) -> f64 {
    let Some(ch) = CHOICES.get() else { return t };
    let mut st = lock(&ch.state);
    let from = *st.callers.entry(caller).or_insert_with(|| Module::of(caller));
    // Read by the MPI library itself (Open MPI's progress does, as time and load decide),
    // or by libc for itself: not the program's, and a replay need not make the same.
    let program = if libc {
        from == Module::Program
    } else {
        from != Module::Mpi
    };
    if st.current.is_some() || !program {
        return t;
    }
    let mut t = t;
    if let Some(rp) = st.replay.as_mut().filter(|r| r.active) {
        if let Pick::Reading(bits) = rp.script.choose(0, Point::Clock { n: rp.clock_at }) {
            rp.clock_at += 1;
            t = f64::from_bits(bits);
        }
    }
    if let Some(rec) = st.record.as_mut().filter(|r| !r.lost) {
        if rec.clocks.len() + rec.pending.len() >= MAX_PENDING {
            eprintln!(
                "racetrack: rank {}: {MAX_PENDING} clock readings and choices wait to be written; recording stops here",
                ch.rank
            );
            rec.lost = true;
            rec.clocks.clear();
            rec.pending.clear();
        } else {
            rec.clocks.push(t.to_bits());
        }
    }
    t
}

/// Where a clock's caller is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Module {
    /// The program's executable.
    Program,
    /// The MPI library (`libmpi*`, `libmpich*`, Open MPI's `libopen-*`).
    Mpi,
    /// Any other library.
    Other,
}

impl Module {
    pub(super) fn of(caller: usize) -> Module {
        match crate::ffi::module_at(caller).map(|m| m.path) {
            Some(None) => Module::Program,
            Some(Some(p)) => {
                let name = p.rsplit('/').next().unwrap_or(&p);
                if ["libmpi", "libopen-", "libpmpi"]
                    .iter()
                    .any(|l| name.starts_with(l))
                {
                    Module::Mpi
                } else {
                    Module::Other
                }
            }
            None => Module::Other,
        }
    }
}
