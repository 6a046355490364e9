//! Deadlocks, watched for in the merge, where every rank's calls meet
//! ([`racetrack_model::deadlock`]). A rank counts as stuck only once its connection has
//! been quiet for [`QUIET`] (its last events are in: an agent with events flushes every
//! 10 ms) and the debugger holds none of its events; the wait-for graph is looked at
//! every [`LOOK`] while some rank is in a blocking call, so a deadlock is told within
//! `QUIET + LOOK` of the last progress. Each one is told once, as a `deadlock` event,
//! and again if it changes; the program is left as it is.

use super::links::{Item, Links};
use racetrack_model::deadlock::{Deadlock, Waits};
use racetrack_protocol::{Event, Kind};
use std::sync::Arc;
use std::time::Duration;

/// How long a rank's connection must have been quiet before the rank counts as stuck.
pub(super) const QUIET: Duration = Duration::from_millis(500);

/// How often the wait-for graph is looked at while a rank is in a blocking call.
pub(super) const LOOK: Duration = Duration::from_millis(200);

/// The ranks' blocking calls, and the deadlock last told.
pub(super) struct Watch {
    waits: Waits,
    told: Option<Deadlock>,
    /// `match` commands sent, by the held `start` they name: the source and tag, until
    /// the rank says the match applied (a refused one changes nothing).
    matching: std::collections::HashMap<u64, (i32, Option<i32>)>,
}

impl Watch {
    pub(super) fn new(ranks: usize) -> Self {
        Self {
            waits: Waits::new(ranks),
            told: None,
            matching: std::collections::HashMap::new(),
        }
    }

    /// A `match` of held event `id` onto `source` (and `tag`) was sent.
    pub(super) fn matching(&mut self, id: u64, source: i32, tag: Option<i32>) {
        self.matching.insert(id, (source, tag));
    }

    /// Whether the receive `thread` is held at can be forced onto `source`: the reason
    /// when that source cannot send its message ([`Waits::pick`]).
    pub(super) fn pick(
        &self,
        thread: &str,
        source: i32,
        tag: Option<i32>,
        links: &mut Links,
    ) -> Result<(), String> {
        let Some(r) = racetrack_model::links::world_rank(thread).and_then(|r| usize::try_from(r).ok()) else {
            return Ok(());
        };
        self.waits
            .pick(r, source, tag, links.linker())
            .map_err(|why| format!("source {source} for {thread}'s receive: {why}"))
    }

    /// A rank said its `match` of held event `target` applied: the receive waits for
    /// that source only.
    pub(super) fn matched(&mut self, target: &str) {
        let Ok(id) = target.parse::<u64>() else { return };
        if let Some((source, tag)) = self.matching.remove(&id) {
            self.waits.forced(id, source, tag);
        }
    }

    /// An event on its way out.
    pub(super) fn observe(&mut self, it: &Item) {
        match it {
            Item::Packed(names, p) if matches!(p.kind, Kind::Start | Kind::Stop) => {
                let (Ok(Some(thread)), Ok(Some(op))) = (names.thread(p.thread), names.op(p.op)) else {
                    return;
                };
                self.waits
                    .observe(p.kind, thread, op, p.event_id, p.call.as_ref());
            }
            Item::Full(Event::Start(s)) => {
                let call = s.call.as_deref().map(|c| Arc::new(c.clone()));
                self.waits
                    .observe(Kind::Start, &s.thread, &s.op, s.event_id, call.as_ref());
            }
            Item::Full(Event::Stop(s)) => self.waits.observe(Kind::Stop, &s.thread, &s.op, s.event_id, None),
            _ => {}
        }
    }

    /// The ranks `threads` (`rank[R]`) exited.
    pub(super) fn closed(&mut self, threads: &[String]) {
        for t in threads {
            if let Some(r) = racetrack_model::links::world_rank(t).and_then(|r| usize::try_from(r).ok()) {
                self.waits.finished(r);
            }
        }
    }

    /// Whether a look is worth it: some rank is in a blocking call.
    pub(super) fn armed(&self) -> bool {
        self.waits.any_blocked()
    }

    /// A `deadlock` event, when ranks are stuck in a way not told yet. `held`: whether
    /// the debugger holds an event of connection `i`.
    pub(super) fn look(&mut self, links: &mut Links, held: impl Fn(usize) -> bool) -> Option<Event> {
        let conns: Vec<Option<usize>> = (0..self.waits.len())
            .map(|r| links.conn_of(i32::try_from(r).unwrap_or(i32::MAX)))
            .collect();
        let moving: Vec<bool> = conns
            .iter()
            .map(|c| c.is_none_or(|i| held(i) || links.recent(i, QUIET)))
            .collect();
        let found = self
            .waits
            .find(links.linker(), |r| moving.get(r).copied().unwrap_or(true));
        if found == self.told {
            return None;
        }
        self.told = found.clone();
        found.map(|d| Event::Deadlock {
            waits: d.waits,
            cycle: d.cycle,
        })
    }
}
