//! The merge: the ranks' streams as one connection, commands routed to the rank that
//! has their thread or held event (see the parent module).

use super::links::{Item, Links, TICK};
use super::out::Out;
use super::scenario::{self, Parts};
use super::watch::{Watch, LOOK};
use super::Ws;
use crate::conn::{ConnEvent, Waker};
use crate::scenarios::Kept;
use futures_util::stream::{select_all, SplitSink};
use futures_util::{SinkExt, StreamExt};
use racetrack_protocol::{
    CollectionDesc, Command, Decoded, Decoder, Event, OperationDesc, Request, PROTOCOL_VERSION,
};
use std::collections::HashMap;
use std::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

/// Request numbers the merge gives commands for every rank that came without one (from
/// here up: far above a scenario's line numbers).
const INTERNAL_REQ: u64 = 1 << 62;

/// What the merge knows of one rank's connection.
#[derive(Default)]
struct Rank {
    decoder: Decoder,
    /// The threads it runs (its snapshot's: its own rank's), which commands naming a
    /// thread go to. Its structure names every rank's.
    threads: Vec<String>,
    /// Its last structure's operations and collections.
    ops: Vec<OperationDesc>,
    collections: Vec<CollectionDesc>,
    hello: Option<Event>,
    snapshot: Option<Event>,
    closed: bool,
}

/// The merging side of the job's thread.
pub(super) struct Merge {
    sinks: Vec<SplitSink<Ws, Message>>,
    streams: Vec<futures_util::stream::SplitStream<Ws>>,
    ranks: Vec<Rank>,
    /// Where events go, sent as one item after each frame or command: a rank's frame of
    /// MPI events is one item of the bounded channel, not one item an event.
    out: Out,
    /// Events of ranks that sent their snapshot, until every rank did.
    early: Vec<Item>,
    snapshot_sent: bool,
    last_structure: Option<Event>,
    /// Held events, by number: the rank (connection) holding each, and the thread.
    held: HashMap<u64, (usize, String)>,
    /// Commands sent to every rank with a request number: ranks yet to answer, and the
    /// first error.
    verdicts: HashMap<u64, (Vec<usize>, Option<Event>)>,
    /// Why a connection failed, for the final `Closed`.
    failure: Option<String>,
    /// The request numbers given here, and the next one.
    internal: std::collections::HashSet<u64>,
    next_internal: u64,
    /// Every `recv` linked to its `send` on the way out.
    links: Links,
    /// The ranks' blocking calls, looked at for deadlocks.
    watch: Watch,
    /// The parts of scenarios: the ranks' as they finished, and those being saved.
    parts: Parts,
    /// Where the job's scenario is kept once every rank is gone.
    kept: Kept,
}

/// Where a command goes.
enum Target {
    Thread(String),
    Event(u64),
    /// The held event an `edit`, `match`, `state` or `set_state` names, by number, thread
    /// or both (the rank's agent checks that they agree).
    Held(Option<u64>, Option<String>),
    All,
}

fn target(cmd: &Command) -> Target {
    if let Some((id, thread)) = cmd.held_target() {
        return Target::Held(id, thread.map(str::to_owned));
    }
    match cmd {
        Command::Continue {
            event_id: Some(id), ..
        } => Target::Event(*id),
        Command::Continue { thread: Some(t), .. }
        | Command::Break { thread: Some(t), .. }
        | Command::Pause { thread: t, .. }
        | Command::Queue { thread: t, .. }
        | Command::Reorder { thread: t, .. } => Target::Thread(t.clone()),
        _ => Target::All,
    }
}

/// The number in a thread name's brackets (`rank[12]` → 12), for ordering.
fn index_of(thread: &str) -> usize {
    thread
        .rsplit_once('[')
        .and_then(|(_, r)| r.strip_suffix(']')?.parse().ok())
        .unwrap_or(usize::MAX)
}

impl Merge {
    pub(super) fn new(socks: Vec<Ws>, out: mpsc::SyncSender<ConnEvent>, waker: Waker, kept: Kept) -> Self {
        let (sinks, streams): (Vec<_>, Vec<_>) = socks.into_iter().map(StreamExt::split).unzip();
        let n = streams.len();
        Self {
            sinks,
            streams,
            ranks: (0..n).map(|_| Rank::default()).collect(),
            out: Out::new(out, waker),
            early: Vec::new(),
            snapshot_sent: false,
            last_structure: None,
            held: HashMap::new(),
            verdicts: HashMap::new(),
            failure: None,
            internal: std::collections::HashSet::new(),
            next_internal: INTERNAL_REQ,
            links: Links::new(n),
            watch: Watch::new(n),
            parts: Parts::default(),
            kept,
        }
    }

    pub(super) async fn run(mut self, mut cmds: tokio::sync::mpsc::UnboundedReceiver<Request>) {
        let mut incoming = select_all(std::mem::take(&mut self.streams).into_iter().enumerate().map(
            |(i, s)| {
                s.map(move |m| (i, Some(m)))
                    .chain(futures_util::stream::once(async move { (i, None) }))
                    .boxed()
            },
        ));
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut look = tokio::time::interval(LOOK);
        look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick(), if self.links.any_waiting() => self.expire(false),
                _ = look.tick(), if self.watch.armed() => self.look(),
                m = incoming.next() => match m {
                    Some((i, Some(Ok(msg)))) => self.frame(i, msg),
                    Some((i, Some(Err(e)))) => {
                        self.failure.get_or_insert(format!("rank connection {i} lost: {e}"));
                        self.close(i);
                    }
                    Some((i, None)) => self.close(i),
                    None => break,
                },
                c = cmds.recv() => match c {
                    Some(req) => self.command(req).await,
                    None => {
                        for s in &mut self.sinks {
                            let _ = s.close().await;
                        }
                        break;
                    }
                },
            }
            self.out.flush();
            if self.ranks.iter().all(|r| r.closed) {
                break;
            }
        }
        self.expire(true);
        self.flush_snapshot(true);
        if let Some((bytes, summary)) = self.parts.at_end(self.ranks.len()) {
            self.kept.set(bytes, summary);
        }
        let closed = ConnEvent::Closed(self.failure.take());
        self.out.send(closed);
    }

    fn frame(&mut self, i: usize, msg: Message) {
        let decoded = match msg {
            Message::Text(t) => self.ranks[i].decoder.decode_frame(&t),
            Message::Binary(b) => self.ranks[i].decoder.decode_binary(&b),
            _ => return,
        };
        match decoded {
            Ok(Decoded::Packed(names, ps)) => {
                // Never held: nothing for the merge to note, only links to make.
                let mut links = std::mem::take(&mut self.links);
                for p in ps {
                    links.push(i, Item::Packed(names.clone(), p), &mut |e| self.forward(e));
                }
                self.links = links;
                self.frame_done(i);
            }
            Ok(Decoded::Events(evs)) => {
                evs.into_iter().for_each(|ev| self.event(i, ev));
                self.frame_done(i);
            }
            Err(e) => self.unreadable(i, &e),
        }
    }

    /// Rank `i`'s frame is in: the links it completed go out.
    fn frame_done(&mut self, i: usize) {
        let mut links = std::mem::take(&mut self.links);
        links.frame(i, &mut |e| self.forward(e));
        self.links = links;
    }

    fn unreadable(&mut self, i: usize, e: &dyn std::fmt::Display) {
        self.forward(Item::Full(Event::Error {
            message: format!("unreadable frame from rank connection {i}: {e}"),
            req: None,
        }));
    }

    fn event(&mut self, i: usize, ev: Event) {
        match &ev {
            Event::Hello { protocol, .. } if *protocol != PROTOCOL_VERSION => {
                self.failure.get_or_insert(format!(
                    "a rank's agent speaks protocol {protocol}; this debugger speaks {PROTOCOL_VERSION}"
                ));
            }
            // The job is one program: one `hello` goes out, with the snapshot.
            Event::Hello { .. } => {
                self.ranks[i].hello = Some(ev);
                return;
            }
            Event::Structure {
                operations,
                collections,
                ..
            } => {
                let r = &mut self.ranks[i];
                r.ops = operations.clone();
                r.collections = collections.clone();
                // Before the job's snapshot, the merged structure goes out once with it;
                // after, only when it changed.
                if self.snapshot_sent {
                    self.send_structure();
                }
                return;
            }
            Event::Snapshot { threads, .. } => {
                self.ranks[i].threads = threads.iter().map(|t| t.thread.clone()).collect();
                self.ranks[i].snapshot = Some(ev);
                return self.flush_snapshot(false);
            }
            Event::Ok { req: Some(n), .. } | Event::Error { req: Some(n), .. }
                if self.verdicts.contains_key(n) =>
            {
                return self.verdict(i, *n, ev);
            }
            // A rank's part of a scenario being saved, or of the job's as it ended: kept
            // here, not passed on.
            Event::Scenario { path, log, req, .. } => {
                let got = self.parts.received(self.world_rank(i), path.is_some(), log, *req);
                return match (got, req.filter(|n| self.verdicts.contains_key(n))) {
                    (Err(message), None) => self.forward(Item::Full(Event::Error { message, req: None })),
                    (got, Some(n)) => self.verdict(i, n, scenario::verdict(got, n)),
                    (Ok(()), None) => {}
                };
            }
            Event::Start(s) | Event::Stop(s) if s.held => {
                self.held.insert(s.event_id, (i, s.thread.to_string()));
            }
            Event::Send(s) if s.held => {
                self.held
                    .insert(s.event_id, (i, s.thread.clone().unwrap_or_default().to_string()));
            }
            Event::Released { event_id, .. } => {
                self.held.remove(event_id);
            }
            Event::Ok {
                cmd, target: Some(t), ..
            } if cmd == "match" => self.watch.matched(t),
            _ => {}
        }
        // Taken out for the call: what it lets out goes straight on.
        let mut links = std::mem::take(&mut self.links);
        links.push(i, Item::Full(ev), &mut |e| self.forward(e));
        self.links = links;
    }

    /// Tell a deadlock, if ranks are stuck in a way not told yet.
    fn look(&mut self) {
        let held: std::collections::HashSet<usize> = self.held.values().map(|(i, _)| *i).collect();
        if let Some(ev) = self.watch.look(&mut self.links, |i| held.contains(&i)) {
            self.forward(Item::Full(ev));
        }
    }

    /// Send out the receives that waited too long for their send (all: the job ended).
    fn expire(&mut self, all: bool) {
        let mut links = std::mem::take(&mut self.links);
        links.expire(all, &mut |e| self.forward(e));
        self.links = links;
    }

    /// Every rank's structure as one: the collections' threads and the operations'
    /// threads united, in rank order.
    fn structure(&self) -> Event {
        let mut collections: Vec<CollectionDesc> = Vec::new();
        let mut operations: Vec<OperationDesc> = Vec::new();
        for r in &self.ranks {
            for c in &r.collections {
                match collections.iter_mut().find(|m| m.name == c.name) {
                    Some(m) => m.threads.extend(c.threads.iter().cloned()),
                    None => collections.push(c.clone()),
                }
            }
            for o in &r.ops {
                match operations.iter_mut().find(|m| m.name == o.name) {
                    Some(m) => m.threads.extend(o.threads.iter().cloned()),
                    None => operations.push(o.clone()),
                }
            }
        }
        for t in collections
            .iter_mut()
            .map(|c| &mut c.threads)
            .chain(operations.iter_mut().map(|o| &mut o.threads))
        {
            t.sort_by_key(|n| index_of(n));
            t.dedup();
        }
        Event::Structure {
            operations,
            collections,
            edges: Vec::new(),
        }
    }

    /// Once every rank sent its snapshot (or closed; `end`: now), send one for the job,
    /// then the events that waited for it.
    fn flush_snapshot(&mut self, end: bool) {
        if self.snapshot_sent || !(end || self.ranks.iter().all(|r| r.snapshot.is_some() || r.closed)) {
            return;
        }
        let (mut next, mut threads, mut held) = (u64::MAX, Vec::new(), Vec::new());
        // Released while other ranks' snapshots were awaited (a `continue` sent early):
        // no longer held, though the snapshot lists it.
        let released: std::collections::HashSet<u64> = (self.early.iter())
            .filter_map(|it| match it {
                Item::Full(Event::Released { event_id, .. }) => Some(*event_id),
                _ => None,
            })
            .collect();
        for (i, r) in self.ranks.iter().enumerate() {
            if let Some(Event::Snapshot {
                next_event_id,
                threads: t,
                held: h,
            }) = &r.snapshot
            {
                next = next.min(*next_event_id);
                threads.extend(t.iter().cloned());
                for e in h {
                    if let Some(id) = e.event_id().filter(|id| !released.contains(id)) {
                        self.held
                            .insert(id, (i, e.thread().unwrap_or_default().to_owned()));
                    }
                    held.push(e.clone());
                }
            }
        }
        threads.sort_by_key(|t: &racetrack_protocol::ThreadSnapshot| index_of(&t.thread));
        let next_event_id = if next == u64::MAX { 0 } else { next };
        self.snapshot_sent = true;
        if let Some(hello) = self.job_hello() {
            self.out.push(Item::Full(hello));
        }
        self.send_structure();
        self.out.push(Item::Full(Event::Snapshot {
            next_event_id,
            threads,
            held,
        }));
        for it in std::mem::take(&mut self.early) {
            self.out.push(it);
        }
    }

    /// The job's `hello`: its lowest rank's (each rank's process is in its snapshot).
    fn job_hello(&self) -> Option<Event> {
        self.ranks
            .iter()
            .filter(|r| r.hello.is_some())
            .min_by_key(|r| r.threads.first().map_or(usize::MAX, |t| index_of(t)))
            .and_then(|r| r.hello.clone())
    }

    /// The merged structure, unless it is the one last sent.
    fn send_structure(&mut self) {
        let merged = self.structure();
        if self.last_structure.as_ref() != Some(&merged) {
            self.last_structure = Some(merged.clone());
            self.out.structure(&merged);
            self.out.push(Item::Full(merged));
        }
    }

    fn forward(&mut self, it: Item) {
        self.watch.observe(&it);
        if self.snapshot_sent {
            self.out.push(it);
        } else {
            self.early.push(it);
        }
    }

    /// Rank `i` answered command `n`, sent to every rank.
    fn verdict(&mut self, i: usize, n: u64, ev: Event) {
        let Some((waiting, first_error)) = self.verdicts.get_mut(&n) else {
            return;
        };
        waiting.retain(|w| *w != i);
        if matches!(ev, Event::Error { .. }) && first_error.is_none() {
            *first_error = Some(ev.clone());
        }
        self.settle(n, Some(ev));
    }

    /// Send command `n`'s verdict once no rank is left to answer it.
    fn settle(&mut self, n: u64, last: Option<Event>) {
        let done = self.verdicts.get(&n).is_some_and(|(w, _)| w.is_empty());
        if !done {
            return;
        }
        if let Some((_, first_error)) = self.verdicts.remove(&n) {
            let internal = self.internal.remove(&n);
            let req = if internal { None } else { Some(n) };
            if let Some(ev) = self.parts.finish(n, self.ranks.len(), first_error.clone(), req) {
                return self.forward(Item::Full(ev));
            }
            if internal {
                // Numbered here: only a refusal is told, as it would have been.
                if let Some(Event::Error { message, .. }) = first_error {
                    self.forward(Item::Full(Event::Error { message, req: None }));
                }
                return;
            }
            let ok = || Event::Ok {
                cmd: "?".into(),
                target: None,
                req: Some(n),
            };
            let ev = first_error.or(last).unwrap_or_else(ok);
            self.forward(Item::Full(ev));
        }
    }

    /// Rank `i`'s connection closed: it answers nothing more.
    fn close(&mut self, i: usize) {
        self.ranks[i].closed = true;
        self.watch.closed(&self.ranks[i].threads);
        let pending: Vec<u64> = self.verdicts.keys().copied().collect();
        for n in pending {
            if let Some((w, _)) = self.verdicts.get_mut(&n) {
                w.retain(|r| *r != i);
            }
            self.settle(n, None);
        }
        self.held.retain(|_, (r, _)| *r != i);
        self.flush_snapshot(false);
    }

    /// A `match`: refused when its source cannot send the message (by the ranks'
    /// wait-for graph); else the watch learns which held receive it forces, and onto what.
    fn note_match(&mut self, cmd: &Command) -> Result<(), String> {
        if let Command::Match {
            event_id,
            thread,
            source,
            tag,
        } = cmd
        {
            // The held event it names, as the rank will find it.
            let held = match event_id {
                Some(id) => self.held.get_key_value(id),
                None => self.held.iter().find(|(_, (_, t))| Some(t) == thread.as_ref()),
            };
            if let Some((&id, (_, t))) = held {
                self.watch.pick(t, *source, *tag, &mut self.links)?;
                self.watch.matching(id, *source, *tag);
            }
        }
        Ok(())
    }

    async fn command(&mut self, mut req: Request) {
        let saving = match &req.cmd {
            Command::SaveScenario { path } => Some(path.clone()),
            _ => None,
        };
        if let Err(why) = self.note_match(&req.cmd) {
            return self.refuse(&req, why);
        }
        let to: Vec<usize> = match target(&req.cmd) {
            Target::Event(id) | Target::Held(Some(id), None) => match self.held.get(&id) {
                Some((i, _)) => vec![*i],
                None => return self.refuse(&req, format!("event {id} is not held by any rank")),
            },
            Target::Held(Some(id), Some(t)) if self.held.get(&id).is_some_and(|(_, h)| *h != t) => {
                let holder = self.held.get(&id).map(|(_, h)| h.as_str()).unwrap_or_default();
                let why = format!("event {id} and thread {t} disagree: event {id} holds {holder}");
                return self.refuse(&req, why);
            }
            Target::Held(None, None) => {
                let mut held: Vec<(u64, &str)> =
                    self.held.iter().map(|(id, (_, t))| (*id, t.as_str())).collect();
                held.sort_unstable();
                let list: Vec<String> = held.iter().map(|(id, t)| format!("{t} (event {id})")).collect();
                let why = if list.is_empty() {
                    "name the held event by `thread` or `event_id`; no thread is held now".to_owned()
                } else {
                    format!(
                        "name the held event by `thread` or `event_id`; held now: {}",
                        list.join(", ")
                    )
                };
                return self.refuse(&req, why);
            }
            Target::Thread(t) | Target::Held(_, Some(t)) => {
                match self.ranks.iter().position(|r| r.threads.contains(&t)) {
                    Some(i) => vec![i],
                    None => {
                        let n = self.ranks.len();
                        let why = format!(
                            "no thread `{t}` in this job (its ranks are rank[0] … rank[{}])",
                            n.saturating_sub(1)
                        );
                        return self.refuse(&req, why);
                    }
                }
            }
            Target::All => (0..self.ranks.len()).filter(|i| !self.ranks[*i].closed).collect(),
        };
        if let (Some(path), true) = (&saving, to.is_empty()) {
            // Every rank has finished: the scenario is their kept parts.
            let ev = self.parts.save(path, self.ranks.len(), &HashMap::new(), req.req);
            return self.forward(Item::Full(ev));
        }
        if matches!(target(&req.cmd), Target::All)
            && req.req.is_none()
            && (to.len() > 1 || saving.is_some())
            && !matches!(req.cmd, Command::Detach)
        {
            req.req = Some(self.next_internal);
            self.internal.insert(self.next_internal);
            self.next_internal += 1;
        }
        if let (Target::All, Some(n)) = (target(&req.cmd), req.req) {
            self.verdicts.insert(n, (to.clone(), None));
            if let Some(path) = saving {
                self.parts.begin(n, path);
            }
        }
        let text = req.to_json();
        for i in to {
            if let Err(e) = self.sinks[i].send(Message::Text(text.clone().into())).await {
                self.failure
                    .get_or_insert(format!("rank connection {i} lost: {e}"));
            }
        }
    }

    /// Connection `i`'s rank in the world (its own thread's index).
    fn world_rank(&self, i: usize) -> usize {
        self.ranks[i]
            .threads
            .iter()
            .find_map(|t| racetrack_model::links::world_rank(t).and_then(|r| usize::try_from(r).ok()))
            .unwrap_or(i)
    }

    fn refuse(&mut self, req: &Request, message: String) {
        let message = format!("{}: {message}", req.cmd.name());
        self.out.push(Item::Full(Event::Error {
            message,
            req: req.req,
        }));
    }
}
