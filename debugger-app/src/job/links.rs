//! Links in the merge: every rank's `recv` goes out naming the `send` it matched
//! ([`racetrack_model::links`]). A receive whose send has not arrived yet (the sender's
//! stream is behind) waits, and the rank's later events wait behind it, so each rank's
//! events still go out in order. The sender reported its send before calling MPI, so it
//! is on its way: the wait lasts a batch or two. A receive that waits [`GIVE_UP`] (a
//! send from a call the library does not cover), or whose job ended, goes out unlinked.

use racetrack_model::links::{Linked, Linker};
use racetrack_protocol::Event;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How long a receive waits for its send.
pub(super) const GIVE_UP: Duration = Duration::from_secs(3);

/// The merge's linker and the ranks' events waiting behind an unlinked receive.
pub(super) struct Links {
    linker: Linker,
    /// Per rank connection: events held back, the first a `recv` waiting since then.
    waiting: Vec<VecDeque<(Instant, Event)>>,
}

impl Links {
    pub(super) fn new(ranks: usize) -> Self {
        Self {
            linker: Linker::new(),
            waiting: (0..ranks).map(|_| VecDeque::new()).collect(),
        }
    }

    /// Whether some rank's events wait.
    pub(super) fn any_waiting(&self) -> bool {
        self.waiting.iter().any(|w| !w.is_empty())
    }

    /// Rank `i`'s next event: out through `out` now, linked, or held back.
    pub(super) fn push(&mut self, i: usize, ev: Event, out: &mut impl FnMut(Event)) {
        // Sends enter their channel as they arrive, in each rank's order, even behind a
        // waiting receive: that receive may wait for one of them.
        self.linker.observe(&ev);
        let sent = matches!(ev, Event::Send(_));
        self.waiting[i].push_back((Instant::now(), ev));
        self.drain(i, false, out);
        if sent {
            for j in (0..self.waiting.len()).filter(|j| *j != i) {
                self.drain(j, false, out);
            }
        }
    }

    /// Give up on receives that waited too long (or on every one: `all`, the job ended).
    pub(super) fn expire(&mut self, all: bool, out: &mut impl FnMut(Event)) {
        for i in 0..self.waiting.len() {
            self.drain(i, all, out);
        }
    }

    /// Send out rank `i`'s events up to the first receive that must still wait.
    fn drain(&mut self, i: usize, all: bool, out: &mut impl FnMut(Event)) {
        while let Some((since, mut ev)) = self.waiting[i].pop_front() {
            if let Event::Recv(r) = &mut ev {
                match self.linker.link(r) {
                    Linked::Send(l) => r.from = Some(l),
                    Linked::Wait(ch) => {
                        if all || since.elapsed() >= GIVE_UP {
                            self.linker.give_up(ch);
                        } else {
                            self.waiting[i].push_front((since, ev));
                            return;
                        }
                    }
                    Linked::No => {}
                }
            }
            out(ev);
        }
    }
}
