//! The connection's life cycle in one byte: whether a debugger connection holds the
//! agent's controlling slot, whether it streams, and how far the program's exit flush got.
//! It replaces four flags (claimed, attached, finishing, finished) whose combinations were
//! kept consistent by hand: a flag set after another was checked could make one that
//! means nothing, such as "finishing" with nobody attached. Each change is a named
//! transition, one compare-and-swap that refuses to start from a phase it does not apply
//! to.
//!
//! ```text
//!            claim              attach             begin_finishing
//!   Free ───────────► Claimed ─────────► Attached ────────────────► Finishing
//!    ▲                 │   ▲                 │                          │  │
//!    └──── release ────┘   └──── detach ─────┴───────── detach ─────────┘  │ end
//!                                                                          ▼
//!   Free, Claimed ───────────────────────── end ───────────────────────► Finished
//! ```
//!
//! - `claim` (Free → Claimed): a connection, before its `hello` (`server`), or the trace
//!   writer, for good. Refused in any other phase: one controlling debugger at a time, and
//!   none once Finished (the program is exiting).
//! - `attach` (Claimed → Attached): the connection's attach (`Agent::attach_structure`;
//!   the snapshot cut after it then changes nothing): from here events are recorded and
//!   holds taken. Refused elsewhere, so that a Finishing that came in between is kept.
//! - `detach` (Attached or Finishing → Claimed): a `detach` command, the end of a session,
//!   the trace writer stopping (`Agent::detach`, which releases every hold with it).
//! - `release` (Claimed → Free): the session is over; another debugger may connect.
//! - `begin_finishing` (Attached → Finishing; also true in Finishing): the program exits
//!   (`Agent::finish` on a program thread, `Agent::flush_before_death` in a signal or exit
//!   handler). Events are still recorded; the connection closes once it sent them all.
//!   Refused unattached: there is nobody to flush to.
//! - `end` (Free, Claimed or Finishing → Finished): the connection's side is done for
//!   good: the final flush was sent and answered, a dialled connection ended (the program
//!   runs free), or the trace file is complete or cannot be written. Never from Attached:
//!   a live stream is detached first. Nothing leaves Finished: `Agent::finish` waits for
//!   it, and a dying program's flush stops at it.
//!
//! Outside the phase, because they change independently of it: the program shutting down
//! (`Agent::shutdown`: no new holds and no waiting for room, in any phase, and a listening
//! agent may still take a debugger afterwards), the `RACETRACK_WAIT` start hold (pending
//! attached or not), and the `hot` flag, a cache of "attached or start hold pending" that
//! the runtime reads without going through the agent.
//!
//! Orderings: relaxed, as the flags were: an attach or a detach happens under the lock
//! that orders it with what it changes (the structure's or the stream's). Only Finished is
//! stored with `Release` and read with `Acquire`: a dying program's flush, which may take
//! no lock, learns from it that everything was sent.

use std::sync::atomic::{AtomicU8, Ordering};

/// Where the connection's life cycle is (see the module's diagram).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Phase {
    /// No connection holds the controlling slot: nothing is recorded; only the start hold
    /// holds.
    Free = 0,
    /// A connection holds the slot and does not stream: it is sending its `hello`, or it
    /// detached and its session is ending. The trace writer keeps it after stopping.
    Claimed = 1,
    /// Events are recorded and streamed; holds are taken.
    Attached = 2,
    /// Attached, and the program exits: the connection closes once the buffer is empty.
    Finishing = 3,
    /// No debugger is served any more; the program's exit may go on.
    Finished = 4,
}

impl Phase {
    /// The phase stored as `byte`. Only [`AtomicPhase`] stores, and only a phase's own
    /// byte, so the last arm is Finished alone.
    const fn from_byte(byte: u8) -> Self {
        match byte {
            0 => Self::Free,
            1 => Self::Claimed,
            2 => Self::Attached,
            3 => Self::Finishing,
            _ => Self::Finished,
        }
    }

    /// Whether events are recorded and holds taken.
    const fn streams(self) -> bool {
        matches!(self, Self::Attached | Self::Finishing)
    }
}

/// A [`Phase`] shared between the program's threads, the agent's thread and the death
/// handlers, changed only through its transitions.
#[derive(Debug)]
pub(super) struct AtomicPhase(AtomicU8);

impl AtomicPhase {
    /// Free: no debugger yet.
    pub(super) const fn new() -> Self {
        Self(AtomicU8::new(Phase::Free as u8))
    }

    /// The current phase (relaxed); the agent asks only the questions below.
    #[cfg(test)]
    pub(super) fn get(&self) -> Phase {
        Phase::from_byte(self.0.load(Ordering::Relaxed))
    }

    /// Attached or Finishing: events are recorded. On every event's path, so compared on
    /// the byte itself: one relaxed load.
    #[inline]
    pub(super) fn is_attached(&self) -> bool {
        let byte = self.0.load(Ordering::Relaxed);
        byte == Phase::Attached as u8 || byte == Phase::Finishing as u8
    }

    /// Whether the connection is to close once the buffer is empty.
    #[inline]
    pub(super) fn is_finishing(&self) -> bool {
        self.0.load(Ordering::Relaxed) == Phase::Finishing as u8
    }

    /// Whether the connection's side is done for good (acquire: see the module).
    #[inline]
    pub(super) fn is_finished(&self) -> bool {
        self.0.load(Ordering::Acquire) == Phase::Finished as u8
    }

    /// Free → Claimed; `Err`: the phase that refused.
    pub(super) fn claim(&self) -> Result<(), Phase> {
        self.step(|p| p == Phase::Free, Phase::Claimed, Ordering::Relaxed)
            .map(drop)
    }

    /// Claimed → Attached.
    pub(super) fn attach(&self) -> bool {
        self.step(|p| p == Phase::Claimed, Phase::Attached, Ordering::Relaxed)
            .is_ok()
    }

    /// Attached or Finishing → Claimed.
    pub(super) fn detach(&self) -> bool {
        self.step(Phase::streams, Phase::Claimed, Ordering::Relaxed)
            .is_ok()
    }

    /// Claimed → Free.
    pub(super) fn release(&self) -> bool {
        self.step(|p| p == Phase::Claimed, Phase::Free, Ordering::Relaxed)
            .is_ok()
    }

    /// Attached → Finishing; true in Finishing too (the exit flush was begun already).
    pub(super) fn begin_finishing(&self) -> bool {
        match self.step(|p| p == Phase::Attached, Phase::Finishing, Ordering::Relaxed) {
            Ok(_) => true,
            Err(p) => p == Phase::Finishing,
        }
    }

    /// Free, Claimed or Finishing → Finished (release: see the module).
    pub(super) fn end(&self) -> bool {
        let from = |p| matches!(p, Phase::Free | Phase::Claimed | Phase::Finishing);
        self.step(from, Phase::Finished, Ordering::Release).is_ok()
    }

    /// Move to `to` if the current phase is one `from` accepts, in one compare-and-swap
    /// (retried only if another transition came between the load and the swap); returns
    /// the phase it was in, `Err` if refused.
    fn step(&self, from: impl Fn(Phase) -> bool, to: Phase, order: Ordering) -> Result<Phase, Phase> {
        self.0
            .fetch_update(order, Ordering::Relaxed, |b| {
                from(Phase::from_byte(b)).then_some(to as u8)
            })
            .map(Phase::from_byte)
            .map_err(Phase::from_byte)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const ALL: [Phase; 5] = [
        Phase::Free,
        Phase::Claimed,
        Phase::Attached,
        Phase::Finishing,
        Phase::Finished,
    ];

    fn at(p: Phase) -> AtomicPhase {
        AtomicPhase(AtomicU8::new(p as u8))
    }

    type Transition = fn(&AtomicPhase) -> bool;

    /// Every transition from every phase: where it leads, `None` where it is refused (the
    /// phase then unchanged).
    #[test]
    fn each_transition_goes_where_the_diagram_says_and_refuses_elsewhere() {
        use Phase::*;
        let transitions: [(&str, Transition, [Option<Phase>; 5]); 6] = [
            (
                "claim",
                |a| a.claim().is_ok(),
                [Some(Claimed), None, None, None, None],
            ),
            (
                "attach",
                AtomicPhase::attach,
                [None, Some(Attached), None, None, None],
            ),
            (
                "detach",
                AtomicPhase::detach,
                [None, None, Some(Claimed), Some(Claimed), None],
            ),
            (
                "release",
                AtomicPhase::release,
                [None, Some(Free), None, None, None],
            ),
            (
                "begin_finishing",
                AtomicPhase::begin_finishing,
                [None, None, Some(Finishing), Some(Finishing), None],
            ),
            (
                "end",
                AtomicPhase::end,
                [Some(Finished), Some(Finished), None, Some(Finished), None],
            ),
        ];
        for (name, t, to) in transitions {
            for (from, to) in ALL.into_iter().zip(to) {
                let a = at(from);
                let moved = t(&a);
                assert_eq!(moved, to.is_some(), "{name} from {from:?}");
                assert_eq!(a.get(), to.unwrap_or(from), "{name} from {from:?}");
            }
        }
    }

    #[test]
    fn a_refused_claim_says_which_phase_refused_it() {
        for p in ALL.into_iter().skip(1) {
            assert_eq!(at(p).claim(), Err(p));
        }
    }

    #[test]
    fn only_attached_and_finishing_record_events() {
        for p in ALL {
            let a = at(p);
            assert_eq!(
                a.is_attached(),
                matches!(p, Phase::Attached | Phase::Finishing),
                "{p:?}"
            );
            assert_eq!(a.is_finishing(), p == Phase::Finishing, "{p:?}");
            assert_eq!(a.is_finished(), p == Phase::Finished, "{p:?}");
            assert_eq!(Phase::from_byte(p as u8), p);
        }
    }

    /// A session, a detach, another session, and the program's exit.
    #[test]
    fn a_listening_agents_life() {
        let a = AtomicPhase::new();
        assert_eq!(a.get(), Phase::Free);
        assert!(a.claim().is_ok() && a.attach());
        assert!(a.detach() && a.release(), "the first debugger detaches");
        assert!(a.claim().is_ok() && a.attach(), "a second one attaches");
        assert!(
            a.begin_finishing() && a.begin_finishing(),
            "finish, then a dying flush"
        );
        assert!(!a.attach(), "a late attach leaves Finishing");
        assert!(a.end());
        assert!(!a.detach() && !a.release(), "the session's end leaves Finished");
        assert_eq!(a.claim(), Err(Phase::Finished));
        assert_eq!(a.get(), Phase::Finished);
    }

    #[test]
    fn of_connections_claiming_at_once_one_wins() {
        let a = Arc::new(AtomicPhase::new());
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let a = a.clone();
                std::thread::spawn(move || a.claim().is_ok())
            })
            .collect();
        let won = threads
            .into_iter()
            .map(|t| t.join().unwrap_or(false))
            .filter(|&w| w)
            .count();
        assert_eq!(won, 1);
        assert_eq!(a.get(), Phase::Claimed);
    }
}
