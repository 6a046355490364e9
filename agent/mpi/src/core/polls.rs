//! Polling loops as one step: a run of polls that find nothing (`MPI_Test`,
//! `MPI_Testany`, `MPI_Testall`, `MPI_Testsome`, `MPI_Iprobe`) is reported as its first
//! poll's `start` and one `stop`, which ends it when a poll finds something, the rank makes
//! another call, or the run has been idle for [`RUN_IDLE`] (the agent's tick).

use super::{lock, Core, InFlight, CORE};
use racetrack_agent::agent::front::Decision;
use racetrack_protocol::{CallInfo, Event, Kind};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A run of polls (`MPI_Test`, `MPI_Testany`, `MPI_Testall`, `MPI_Testsome`,
/// `MPI_Iprobe`) at one site with the same parameters that found nothing, none held: one
/// step, reported as its first poll's `start` and, when a poll finds something or the rank
/// makes another call, one `stop` that says how many calls it stood for (`polls`). A
/// program spinning on `MPI_Testany` would otherwise stream two events a spin: most of a
/// free run's events for a program such as hpcc, and none that says anything new.
pub(super) struct PollRun {
    /// The first poll (its `start` was reported).
    pub(super) fl: InFlight,
    /// Calls in the run so far.
    pub(super) polls: u64,
    /// When the latest poll was made.
    pub(super) last: Instant,
}

/// A run of polls whose latest poll is this old ends ([`tick`]): a rank that stopped
/// polling to compute is not shown inside the poll until its next call.
const RUN_IDLE: Duration = Duration::from_millis(20);

impl Core {
    /// The `stop` of a run of polls, which `last` ended with return code `rc` (`None`:
    /// another call, the end or the agent's tick ended it after its last poll found
    /// nothing). `backpressure`: false on the agent's own thread, which must not wait for
    /// itself to drain the buffer.
    pub(super) fn end_run(&self, r: PollRun, last: Option<&InFlight>, rc: Option<i32>, backpressure: bool) {
        let agent = &self.agent;
        // Asked once: a run ended by the tick or the end (no `last`) is never held.
        let decision = agent.decide(&self.stop_point());
        if decision == Decision::Skip {
            return;
        }
        let matched = last.and_then(|l| l.info.matched.clone());
        let rc = rc.filter(|rc| *rc != 0);
        let info = if matched.is_none() && rc.is_none() && r.polls == 1 {
            r.fl.info.clone()
        } else {
            let mut info = CallInfo::clone(&r.fl.info);
            info.matched = matched;
            info.rc = rc;
            info.polls = (r.polls > 1).then_some(r.polls);
            Arc::new(info)
        };
        let reason = match decision {
            Decision::Hold { reason, .. } if last.is_some() => Some(reason),
            _ => None,
        };
        let Some(why) = reason else {
            agent.record(self.record(Kind::Stop, r.fl.seq, r.fl.op, info), backpressure);
            return;
        };
        let ev = Event::Stop(self.step(&r.fl, CallInfo::clone(&info), reason));
        let mut fl = r.fl;
        self.hold(ev, why, &mut fl, false, &|| agent.still_holds(&self.stop_point()));
    }
}

/// The agent's tick: end a run of polls that is [`RUN_IDLE`] old, between calls only (a
/// poll in progress may be continuing it; one that has counted itself in already is in
/// the `stop` reported here, and reports nothing itself).
pub(crate) fn tick() {
    let Some(core) = CORE.get() else { return };
    let flights = lock(&core.in_flight);
    if !flights.0.is_empty() {
        return;
    }
    let mut run = lock(&core.run);
    let ended = if run.as_ref().is_some_and(|r| r.last.elapsed() >= RUN_IDLE) {
        run.take()
    } else {
        None
    };
    drop(run);
    drop(flights);
    if let Some(r) = ended {
        core.end_run(r, None, None, false);
    }
}
