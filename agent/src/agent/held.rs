//! Held events. A thread whose event the policy holds registers the hold (under the stream
//! lock, where releases happen, and only if the policy still holds it then), flushes the
//! event, and serves the debugger's commands for it itself (release, reorder, edit,
//! state) through its [`Site`], until released: nothing else touches a suspended thread.

use super::record::Rec;
use super::stream::set_event_id;
use super::{lock, Agent, QUEUE_LIST_MAX};
use racetrack_protocol::{Event, HoldReason, QueueEntry, Rest};
use serde_json::Value;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{mpsc, Arc};

/// A command for a thread suspended at a held event; `req` is the request number the
/// debugger's command carried, for its verdict.
pub(super) enum HeldCmd {
    Release {
        trace: Option<bool>,
    },
    Reorder {
        order: Vec<String>,
        /// Where the messages `order` does not name go (`None`: it names them all).
        rest: Option<Rest>,
        req: Option<u64>,
    },
    Edit {
        content: Value,
        req: Option<u64>,
    },
    Match {
        source: i32,
        tag: Option<i32>,
        req: Option<u64>,
    },
    GetState {
        req: Option<u64>,
    },
    SetState {
        content: Value,
        req: Option<u64>,
    },
}

impl HeldCmd {
    /// The command's wire name and request number (none for a release: it has no verdict
    /// of its own).
    fn verdict_of(&self) -> Option<(&'static str, Option<u64>)> {
        match self {
            HeldCmd::Release { .. } => None,
            HeldCmd::Reorder { req, .. } => Some(("reorder", *req)),
            HeldCmd::Edit { req, .. } => Some(("edit", *req)),
            HeldCmd::Match { req, .. } => Some(("match", *req)),
            HeldCmd::GetState { req } => Some(("state", *req)),
            HeldCmd::SetState { req, .. } => Some(("set_state", *req)),
        }
    }
}

/// A registered hold: what the debugger's commands are routed by, and the channel to the
/// held thread.
pub(super) struct Held {
    /// The thread's global index.
    pub(super) thread: usize,
    pub(super) thread_name: Arc<str>,
    /// Only a held send can be edited.
    pub(super) is_send: bool,
    pub(super) tx: mpsc::Sender<HeldCmd>,
    /// The held event as streamed, for the snapshot of a later attach.
    pub(super) event: Event,
}

/// A front end's own error, as a [`SiteError`] carries it.
pub type FrontError = Box<dyn std::error::Error + Send + Sync>;

/// Why a front end cannot apply a debugger's command to a held event: nothing changed and
/// the thread stays held. The agent tells the debugger in the command's `error`, whose
/// sentence the message continues — `reorder of proc[1] not applied: {e}`, `edit of event
/// 4 not applied: the content {e}; …`, `match of event 4 not applied: it {e}; …`,
/// `state of proc[1]: {e}`, `set_state of proc[1] not applied: {e}` — so a front end
/// words what it gives to fit.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SiteError {
    /// The command does not apply to this event or front end (a reorder where the order
    /// is fixed, an edit of a step, a state the front end cannot replace…): why.
    #[error("{0}")]
    NotApplicable(String),
    /// The new order does not fit the thread's pending messages.
    #[error(transparent)]
    Order(FrontError),
    /// The message's content or the thread's state cannot be read, or the new one does
    /// not fit its type.
    #[error(transparent)]
    Content(FrontError),
    /// A `match` of a call that is not a wildcard receive or probe.
    #[error("is {call} (peer {}), not a wildcard receive or probe", peer.map_or("none".to_owned(), |p| p.to_string()))]
    NotAWildcard {
        /// The held call.
        call: String,
        /// The rank it names, if any.
        peer: Option<i32>,
    },
    /// A `match` naming a source that is no rank of the call's communicator.
    #[error("names source {rank}: no such rank in {comm}")]
    NoSuchRank {
        /// The source asked for.
        rank: i32,
        /// The call's communicator.
        comm: String,
    },
    /// A `match` naming another source than the one the call receives from.
    #[error("receives from rank {only} only")]
    OtherSource {
        /// The rank the call names.
        only: i32,
    },
    /// A `match` naming another tag than the one the call receives.
    #[error("receives tag {only} only, not {tag}")]
    OtherTag {
        /// The tag the call names.
        only: i32,
        /// The tag asked for.
        tag: i32,
    },
}

/// Where a held thread applies the debugger's commands: the held event, as its front end
/// gives access to the thread's queue, message and state. Called on the held thread itself
/// (inside [`Agent::hold`]), so it may touch what only that thread owns. A front end that
/// cannot do something returns a [`SiteError`] saying why: the debugger gets it as the
/// command's `error`, nothing changes, and the thread stays held.
pub trait Site {
    /// Reorder the thread's pending messages (`rest`: where those `order` does not name go,
    /// `None` if it names them all); returns whether the message that was about to start
    /// went back into the queue (the hold is then over).
    fn reorder(&mut self, order: &[String], rest: Option<Rest>) -> Result<bool, SiteError>;
    /// Replace the held message's content.
    fn edit(&mut self, content: Value) -> Result<(), SiteError>;
    /// Make the held wildcard receive or probe match `source` (and `tag`). Only an MPI
    /// front end has such calls: the default refuses.
    fn force_match(&mut self, source: i32, tag: Option<i32>) -> Result<(), SiteError> {
        let _ = (source, tag);
        Err(SiteError::NotApplicable(
            "is not a wildcard receive or probe of an MPI program".into(),
        ))
    }
    /// The thread's state.
    fn state(&self) -> Result<Value, SiteError>;
    /// Replace the thread's state.
    fn set_state(&mut self, content: Value) -> Result<(), SiteError>;
    /// The first `max` pending messages of the thread, and how many more there are.
    fn queue(&self, max: usize) -> (Vec<QueueEntry>, usize);
}

/// Mark a held event as streamed, not held (the hold was not taken).
fn unhold(ev: &mut Event) {
    match ev {
        Event::Send(e) => {
            e.held = false;
            e.reason = None;
        }
        Event::Start(e) | Event::Stop(e) => {
            e.held = false;
            e.reason = None;
        }
        _ => {}
    }
}

impl Agent {
    /// Hold event `ev` of thread `(global index, name)`: register it as held, flush it, and
    /// block the calling thread, serving the debugger's commands for it (`reorder`,
    /// `edit`, `state`, `set_state`; `queue` after a reorder) through `site`, until the
    /// debugger releases it (`continue`, `step`, a detach or [`Agent::shutdown`]). Returns
    /// the trace override of the release (`continue` with `trace`), if any.
    ///
    /// `ev` is the full `send`, `start` or `stop` event with `held: true` and `reason`;
    /// its `event_id` is assigned here. `reason` is what [`Agent::decide`] answered
    /// ([`HoldReason::Wait`] for the start hold, which holds even with no debugger
    /// attached yet).
    ///
    /// `still`: whether the policy holds the event now (ask it again). It is called under
    /// the stream lock, where releases happen: a `continue` sent with, say, step mode just
    /// turned off may have come between the decision and this registration, and the hold
    /// then stands only if the policy still asks for it; otherwise (or detached meanwhile)
    /// the event is streamed as not held and this returns at once.
    pub fn hold(
        &self,
        mut ev: Event,
        (global, name): (usize, &Arc<str>),
        reason: HoldReason,
        site: &mut dyn Site,
        still: &dyn Fn() -> bool,
    ) -> Option<bool> {
        let (tx, rx) = mpsc::channel();
        let id;
        {
            let mut s = lock(&self.stream.state);
            let attached = self.phase.is_attached();
            let stale = if reason == HoldReason::Wait {
                s.continued
            } else {
                !still()
            };
            if self.closing.load(Relaxed) || !(attached || reason == HoldReason::Wait) || stale {
                // Detached meanwhile, or no longer held by the policy: stream it as not
                // held.
                drop(s);
                unhold(&mut ev);
                self.emit(ev, false);
                return None;
            }
            id = s.next_id;
            s.next_id += 1;
            set_event_id(&mut ev, id);
            if attached {
                s.buf.push(Rec::Full(Box::new(ev.clone())));
            }
            let is_send = matches!(ev, Event::Send(_));
            s.held.insert(
                id,
                Held {
                    thread: global,
                    thread_name: name.clone(),
                    is_send,
                    tx,
                    event: ev,
                },
            );
        }
        self.stream.wake.notify_one();
        if reason == HoldReason::Wait {
            let t0 = std::time::Instant::now();
            let r = self.held_loop(id, name, &rx, site);
            let us = u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX);
            self.start_hold_us.fetch_add(us, Relaxed);
            return r;
        }
        self.held_loop(id, name, &rx, site)
    }

    /// Serve a held event's commands until it is released; then refuse whatever reached
    /// the thread after its release was decided (every command gets its answer).
    fn held_loop(
        &self,
        id: u64,
        name: &str,
        rx: &mpsc::Receiver<HeldCmd>,
        site: &mut dyn Site,
    ) -> Option<bool> {
        let trace = self.serve_held(id, name, rx, site);
        // The hold is no longer registered (whoever ended it removed it under the stream
        // lock, and commands are sent only to registered holds): what is left came before.
        while let Ok(cmd) = rx.try_recv() {
            if let Some((what, req)) = cmd.verdict_of() {
                self.error(
                    format!("{what}: {name} was released before the command reached it; nothing changed"),
                    req,
                );
            }
        }
        trace
    }

    fn serve_held(
        &self,
        id: u64,
        name: &str,
        rx: &mpsc::Receiver<HeldCmd>,
        site: &mut dyn Site,
    ) -> Option<bool> {
        loop {
            match rx.recv() {
                Err(_) => return None,
                Ok(HeldCmd::Release { trace }) => return trace,
                Ok(HeldCmd::Reorder { order, rest, req }) => match site.reorder(&order, rest) {
                    Ok(put_back) => {
                        // The new queue first: whoever waits for the verdict sees it.
                        let (messages, more) = site.queue(QUEUE_LIST_MAX);
                        self.reply(Event::Queue { thread: name.to_string(), messages, more });
                        self.reply(Event::Ok { cmd: "reorder".into(), target: Some(name.to_string()), req });
                        if put_back {
                            // The step will not start: this hold is over; the thread
                            // starts the new head (a new start event).
                            let mut s = lock(&self.stream.state);
                            if s.held.remove(&id).is_some() && self.phase.is_attached() {
                                s.buf.push(Rec::Full(Box::new(Event::Released { event_id: id, thread: name.to_string() })));
                            }
                            drop(s);
                            self.stream.wake.notify_one();
                            return None;
                        }
                    }
                    Err(e) => self.error(format!("reorder of {name} not applied: {e}"), req),
                },
                Ok(HeldCmd::Edit { content, req }) => match site.edit(content) {
                    Ok(()) => self.reply(Event::Ok { cmd: "edit".into(), target: Some(id.to_string()), req }),
                    Err(e) => self.error(
                        format!(
                            "edit of event {id} not applied: the content {e}; the original message is kept and {name} stays held"
                        ),
                        req,
                    ),
                },
                Ok(HeldCmd::Match { source, tag, req }) => match site.force_match(source, tag) {
                    Ok(()) => self.reply(Event::Ok { cmd: "match".into(), target: Some(id.to_string()), req }),
                    Err(e) => self.error(format!("match of event {id} not applied: it {e}; {name} stays held"), req),
                },
                Ok(HeldCmd::GetState { req }) => match site.state() {
                    Ok(content) => {
                        self.reply(Event::State { thread: name.to_string(), content });
                        self.ok("state", req);
                    }
                    Err(e) => self.error(format!("state of {name}: {e}"), req),
                },
                Ok(HeldCmd::SetState { content, req }) => match site.set_state(content) {
                    Ok(()) => self.reply(Event::Ok { cmd: "set_state".into(), target: Some(name.to_string()), req }),
                    Err(e) => self.error(format!("set_state of {name} not applied: {e}"), req),
                },
            }
        }
    }

    /// Release held events chosen by `pick`, emitting `released` for each.
    pub(super) fn release(&self, trace: Option<bool>, pick: impl Fn(u64, &Held) -> bool) -> usize {
        let mut s = lock(&self.stream.state);
        let ids: Vec<u64> = s
            .held
            .iter()
            .filter(|(id, h)| pick(**id, h))
            .map(|(id, _)| *id)
            .collect();
        for id in &ids {
            if let Some(h) = s.held.remove(id) {
                if self.phase.is_attached() {
                    s.buf.push(Rec::Full(Box::new(Event::Released {
                        event_id: *id,
                        thread: h.thread_name.to_string(),
                    })));
                }
                let _ = h.tx.send(HeldCmd::Release { trace });
            }
        }
        drop(s);
        self.stream.wake.notify_one();
        ids.len()
    }

    /// Send a command to the thread held at event `id`.
    pub(super) fn to_held(&self, pick: impl Fn(u64, &Held) -> bool, cmd: HeldCmd) -> bool {
        let s = lock(&self.stream.state);
        match s.held.iter().find(|(id, h)| pick(**id, h)) {
            Some((_, h)) => h.tx.send(cmd).is_ok(),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use racetrack_protocol::{self as proto, Command};
    use std::time::Duration;

    /// A held thread's site with nothing to act on.
    struct NoSite;

    impl Site for NoSite {
        fn reorder(&mut self, _: &[String], _: Option<Rest>) -> Result<bool, SiteError> {
            Err(SiteError::NotApplicable("no queue".into()))
        }
        fn edit(&mut self, _: Value) -> Result<(), SiteError> {
            Err(SiteError::NotApplicable("no message".into()))
        }
        fn state(&self) -> Result<Value, SiteError> {
            Err(SiteError::NotApplicable("no state".into()))
        }
        fn set_state(&mut self, _: Value) -> Result<(), SiteError> {
            Err(SiteError::NotApplicable("no state".into()))
        }
        fn queue(&self, _: usize) -> (Vec<QueueEntry>, usize) {
            (Vec::new(), 0)
        }
    }

    fn held_send(id: u64) -> Event {
        Event::Send(proto::SendEv {
            event_id: id,
            thread: Some("proc[0]".into()),
            op: Some("Work".into()),
            msg: format!("0.{id}").into(),
            to_op: None,
            to_thread: None,
            type_name: "u32".into(),
            traced: false,
            held: true,
            reason: Some(HoldReason::Step),
            content: None,
            call: None,
        })
    }

    /// The race of a thread that decides to hold (step mode on) while the debugger turns
    /// step mode off and says continue: the continue comes before the hold is registered.
    /// Played in that order here: the decision, then the commands, then the hold.
    #[test]
    fn site_and_replay_errors_continue_the_agents_sentence() {
        let e = SiteError::NotAWildcard {
            call: "MPI_Send".into(),
            peer: Some(1),
        };
        assert_eq!(
            e.to_string(),
            "is MPI_Send (peer 1), not a wildcard receive or probe"
        );
        let e = SiteError::NotAWildcard {
            call: "MPI_Barrier".into(),
            peer: None,
        };
        assert_eq!(
            e.to_string(),
            "is MPI_Barrier (peer none), not a wildcard receive or probe"
        );
        let e = SiteError::OtherTag { only: 3, tag: 4 };
        assert_eq!(e.to_string(), "receives tag 3 only, not 4");
        // A front end's own error is shown, and kept, as itself.
        let e = SiteError::Content("must be a string".into());
        assert_eq!(e.to_string(), "must be a string");
        let e = super::super::ReplayError::Rank {
            rank: 2,
            error: Box::new(super::super::ReplayError::RecordingStopped),
        };
        assert_eq!(
            e.to_string(),
            "rank 2: its recording stopped (too many choices buffered)"
        );
    }

    #[test]
    fn a_hold_decided_before_a_continue_stands_only_if_the_policy_still_holds() {
        let agent = Arc::new(Agent::new(false, None));
        assert!(agent.phase.claim().is_ok(), "a fresh agent's slot is free");
        let _ = agent.attach_structure();
        let _ = agent.attach();
        let thread: Arc<str> = "proc[0]".into();
        let cont = || Command::Continue {
            thread: None,
            event_id: None,
            trace: None,
        };
        let hold_in_thread = |id: u64| {
            let (agent, thread) = (agent.clone(), thread.clone());
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                let still = || agent.policy.other_reason(0).is_some();
                let r = agent.hold(held_send(id), (0, &thread), HoldReason::Step, &mut NoSite, &still);
                let _ = tx.send(r);
            });
            rx
        };
        let held_count = || lock(&agent.stream.state).held.len();

        // Step mode turned off before the continue: the hold does not stand.
        agent.apply(Command::StepMode { on: true }, None);
        assert_eq!(
            agent.policy.other_reason(0),
            Some(HoldReason::Step),
            "the decision"
        );
        agent.apply(Command::StepMode { on: false }, None);
        agent.apply(cont(), None);
        let done = hold_in_thread(1);
        let returned = done.recv_timeout(Duration::from_secs(10));
        if returned.is_err() {
            agent.apply(cont(), None); // let the thread go before failing
        }
        assert!(
            returned.is_ok(),
            "the thread stayed held after step mode off and continue"
        );
        assert_eq!(held_count(), 0);
        let streamed: Vec<(u64, bool)> = agent
            .drain()
            .into_iter()
            .flatten()
            .filter_map(|r| match r {
                Rec::Full(ev) => match *ev {
                    Event::Send(s) => Some((s.event_id, s.held)),
                    _ => None,
                },
                Rec::Fast(_) => None,
            })
            .collect();
        assert_eq!(streamed.len(), 1, "{streamed:?}");
        assert!(!streamed[0].1, "streamed as not held: {streamed:?}");

        // Step mode still on after the continue: the next event is held, as step mode
        // asks, until the next continue.
        agent.apply(Command::StepMode { on: true }, None);
        agent.apply(cont(), None);
        let done = hold_in_thread(2);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while held_count() == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(held_count(), 1, "the hold stands while step mode is on");
        agent.apply(cont(), None);
        assert!(
            done.recv_timeout(Duration::from_secs(10)).is_ok(),
            "released by the next continue"
        );
    }

    /// A rank of an MPI job may be continued before its first call (it connected, the
    /// job's snapshot went out, the user said continue): the start hold is then not taken,
    /// neither when the continue came before the decision to take it nor between that
    /// decision and the hold's registration.
    #[test]
    fn a_continue_before_the_start_hold_means_it_is_not_taken() {
        let cont = || Command::Continue {
            thread: None,
            event_id: None,
            trace: None,
        };
        // Before the decision: there is none to take.
        let agent = Agent::new(true, None);
        assert!(agent.phase.claim().is_ok(), "a fresh agent's slot is free");
        let _ = agent.attach_structure();
        let _ = agent.attach();
        agent.apply(cont(), None);
        assert!(!agent.take_start_hold(), "continued before the first start");

        // Between the decision and the registration: the hold returns at once, the
        // event streamed as not held.
        let agent = Arc::new(Agent::new(true, None));
        assert!(agent.phase.claim().is_ok(), "a fresh agent's slot is free");
        let _ = agent.attach_structure();
        let _ = agent.attach();
        let _ = agent.drain();
        assert!(agent.take_start_hold(), "the decision");
        agent.apply(cont(), None);
        let (tx, rx) = mpsc::channel();
        let a = agent.clone();
        std::thread::spawn(move || {
            let thread: Arc<str> = "proc[0]".into();
            let _ = tx.send(
                a.hold(held_send(1), (0, &thread), HoldReason::Wait, &mut NoSite, &|| {
                    true
                }),
            );
        });
        let r = rx.recv_timeout(Duration::from_secs(10));
        if r.is_err() {
            agent.apply(cont(), None); // let the thread go before failing
        }
        assert_eq!(r, Ok(None), "not held");
        assert!(lock(&agent.stream.state).held.is_empty());
        let held: Vec<bool> = agent
            .drain()
            .into_iter()
            .flatten()
            .filter_map(|r| match r {
                Rec::Full(ev) => match *ev {
                    Event::Send(s) => Some(s.held),
                    _ => None,
                },
                Rec::Fast(_) => None,
            })
            .collect();
        assert_eq!(held, [false]);
    }
}
