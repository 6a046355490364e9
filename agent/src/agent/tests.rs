//! The core driven without the runtime: a fake [`Debuggee`] of two collections stands in
//! for the program.

use super::debuggee::{Collection, Debuggee, Operation, Thread};
use super::*;
use racetrack_protocol::{Command, QueueEntry, ThreadSnapshot};

/// Two collections, `main` (one thread) and `proc` (two), each thread with one message
/// pending per global index.
struct Fake;

fn thread(global: usize, collection: usize, name: &str) -> Thread {
    Thread {
        global,
        collection,
        name: name.into(),
    }
}

impl Fake {
    fn collections() -> Vec<Collection> {
        vec![
            Collection {
                name: "main".into(),
                threads: vec![thread(0, 0, "main[0]")],
            },
            Collection {
                name: "proc".into(),
                threads: vec![thread(1, 1, "proc[0]"), thread(2, 1, "proc[1]")],
            },
        ]
    }

    fn entry(global: usize, i: usize) -> QueueEntry {
        QueueEntry {
            id: format!("0.{i}").into(),
            type_name: "u32".into(),
            from: None,
            to: format!("Work@{}", Self::collections_threads()[global].name),
            op: "Work".into(),
            traced: false,
            content: None,
        }
    }

    fn collections_threads() -> Vec<Thread> {
        Self::collections().into_iter().flat_map(|c| c.threads).collect()
    }
}

impl Debuggee for Fake {
    fn threads(&self) -> Vec<Thread> {
        Self::collections_threads()
    }

    fn queue(&self, global: usize, max: usize, _content: bool) -> (Vec<QueueEntry>, usize) {
        let all: Vec<QueueEntry> = (0..=global).map(|i| Self::entry(global, i)).collect();
        let more = all.len().saturating_sub(max);
        (all.into_iter().take(max).collect(), more)
    }

    fn snapshot(&self, per_thread: usize, cut: &mut dyn FnMut(Vec<ThreadSnapshot>)) {
        let snaps = self
            .threads()
            .iter()
            .map(|t| {
                let (queue, more) = self.queue(t.global, per_thread, false);
                ThreadSnapshot {
                    thread: t.name.to_string(),
                    queue,
                    more,
                    current: None,
                    pid: None,
                }
            })
            .collect();
        cut(snaps);
    }
}

/// An agent attached to the fake program, its structure registered.
fn attached() -> Agent {
    let agent = Agent::new(false, None);
    agent.set_debuggee(Box::new(Fake));
    for c in Fake::collections() {
        agent.add_collection(c);
    }
    let work = Operation {
        name: "Work".into(),
        kind: "leaf".into(),
        collection: 1,
    };
    agent.add_operations([work], &[]);
    assert!(agent.phase.claim().is_ok(), "a fresh agent's slot is free");
    let _ = agent.attach_structure();
    let _ = agent.attach();
    let _ = agent.drain();
    agent
}

/// The full events buffered since the last drain.
fn replies(agent: &Agent) -> Vec<Event> {
    agent
        .drain()
        .into_iter()
        .flatten()
        .filter_map(|r| match r {
            Rec::Full(ev) => Some(*ev),
            _ => None,
        })
        .collect()
}

#[test]
fn a_command_naming_an_unknown_thread_gets_an_error_listing_the_threads() {
    let agent = attached();
    agent.apply(
        Command::Queue {
            thread: "proc[7]".into(),
            content: false,
        },
        Some(3),
    );
    let evs = replies(&agent);
    assert!(
        matches!(&evs[..], [Event::Error { message, req: Some(3) }]
            if message == "queue: unknown thread `proc[7]` (threads: main[0], proc[0], proc[1])"),
        "{evs:?}"
    );
}

#[test]
fn a_known_thread_is_found_and_its_queue_listed() {
    let agent = attached();
    agent.apply(
        Command::Queue {
            thread: "proc[1]".into(),
            content: false,
        },
        Some(4),
    );
    let evs = replies(&agent);
    let [Event::Queue {
        thread,
        messages,
        more,
    }, Event::Ok { req: Some(4), .. }] = &evs[..]
    else {
        panic!("{evs:?}")
    };
    assert_eq!((thread.as_str(), messages.len(), *more), ("proc[1]", 3, 0));
    assert_eq!(messages[0].to, "Work@proc[1]");
}

#[test]
fn a_breakpoint_checks_the_thread_against_the_operations_collection() {
    let agent = attached();
    agent.apply(
        Command::Break {
            op: "Work".into(),
            thread: Some("main[0]".into()),
            on: true,
            trace: false,
            when: None,
            hit: None,
        },
        Some(5),
    );
    agent.apply(
        Command::Break {
            op: "Work".into(),
            thread: None,
            on: true,
            trace: false,
            when: None,
            hit: None,
        },
        Some(6),
    );
    let evs = replies(&agent);
    assert!(
        matches!(&evs[0], Event::Error { message, req: Some(5) }
            if message == "break: `Work` runs on collection `proc`, not on main[0]"),
        "{evs:?}"
    );
    assert!(matches!(&evs[1], Event::Ok { req: Some(6), .. }), "{evs:?}");
    // Every thread of `proc` holds at `Work` (operation 0); `main` does not.
    assert!(agent.policy.start_reason_of(1, 0, false, None, true).is_some());
    assert!(agent.policy.start_reason_of(2, 0, false, None, true).is_some());
    assert!(agent.policy.start_reason_of(0, 0, false, None, true).is_none());
}

#[test]
fn the_attach_snapshot_lists_the_debuggees_queues() {
    let agent = Agent::new(false, None);
    agent.set_debuggee(Box::new(Fake));
    assert!(agent.phase.claim().is_ok(), "a fresh agent's slot is free");
    let _ = agent.attach_structure();
    let Event::Snapshot { threads, .. } = agent.attach() else {
        panic!("not a snapshot")
    };
    let listed: Vec<(&str, usize)> = threads
        .iter()
        .map(|t| (t.thread.as_str(), t.queue.len()))
        .collect();
    assert_eq!(listed, [("main[0]", 1), ("proc[0]", 2), ("proc[1]", 3)]);
}

#[test]
fn a_graph_registered_during_attach_reaches_the_debugger() {
    let agent = Agent::new(false, None);
    assert!(agent.phase.claim().is_ok(), "a fresh agent's slot is free");
    let structure = agent.attach_structure();
    assert!(matches!(&structure, Event::Structure { operations, .. } if operations.is_empty()));
    // The program registers a graph after the structure was sent, before the snapshot.
    let split = Operation {
        name: "Split".into(),
        kind: "split".into(),
        collection: 0,
    };
    agent.add_operations([split], &[]);
    let _snapshot = agent.attach();
    let names: Vec<_> = replies(&agent).iter().filter_map(proto::Names::of).collect();
    assert_eq!(
        names.last().map(|n| n.ops.clone()),
        Some(vec!["Split".to_owned()])
    );
}

fn brk(
    op: &str,
    thread: Option<&str>,
    on: bool,
    when: Option<racetrack_protocol::When>,
    hit: Option<u64>,
) -> Command {
    Command::Break {
        op: op.into(),
        thread: thread.map(Into::into),
        on,
        trace: false,
        when,
        hit,
    }
}

#[test]
fn a_hit_count_holds_from_the_threads_nth_start_on() {
    let agent = attached();
    agent.apply(brk("Work", Some("proc[1]"), true, None, Some(3)), Some(1));
    let held = |thread| {
        agent
            .policy
            .start_reason_of(thread, 0, false, None, true)
            .is_some()
    };
    // proc[0]'s starts neither hold nor count for proc[1].
    assert!(!held(1) && !held(1) && !held(1));
    assert!(!held(2) && !held(2), "the 1st and 2nd go by");
    assert!(held(2), "the 3rd holds");
    // A held start checked again is not counted again; later starts hold too.
    assert!(agent.policy.start_reason_of(2, 0, false, None, false).is_some());
    assert!(held(2));
    // Setting it again restarts its count; clearing the op clears it.
    agent.apply(brk("Work", Some("proc[1]"), true, None, Some(2)), Some(2));
    assert!(!held(2) && held(2));
    agent.apply(brk("Work", None, false, None, None), Some(3));
    assert!(!held(2) && !held(1));
    let evs = replies(&agent);
    assert!(evs.iter().all(|e| matches!(e, Event::Ok { .. })), "{evs:?}");
}

#[test]
fn a_breakpoint_on_every_operation_covers_every_thread() {
    let agent = attached();
    agent.apply(brk("*", None, true, None, Some(2)), Some(1));
    let held = |thread, op| {
        agent
            .policy
            .start_reason_of(thread, op, false, None, true)
            .is_some()
    };
    assert!(!held(0, 0) && held(0, 0), "main[0]: its 2nd start");
    assert!(!held(1, 0) && held(1, 0), "proc[0]: counted on its own");
    agent.apply(brk("*", Some("proc[0]"), false, None, None), Some(2));
    assert!(
        held(0, 0),
        "a clear of proc[0] leaves the breakpoint on every thread"
    );
    agent.apply(brk("*", None, false, None, None), Some(3));
    assert!(!held(0, 0) && !held(1, 0) && !held(2, 0));
    assert!(!agent.policy.may_hold(), "nothing left to hold");
}

#[test]
fn call_conditions_are_refused_for_a_program_without_calls() {
    let agent = attached();
    let when = racetrack_protocol::When {
        tag: Some(racetrack_protocol::Tag::Tag(1)),
        min_bytes: Some(4),
        ..Default::default()
    };
    agent.apply(brk("Work", None, true, Some(when), None), Some(1));
    agent.apply(brk("Work", None, true, None, Some(0)), Some(2));
    agent.apply(brk("Nope", None, true, None, Some(2)), Some(3));
    let evs = replies(&agent);
    let msgs: Vec<&str> = evs
        .iter()
        .map(|e| match e {
            Event::Error { message, .. } => message.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        msgs[0],
        "break: a condition on `tag`, `min_bytes` needs MPI calls: this program's steps carry no call parameters"
    );
    assert_eq!(msgs[1], "break: `hit` counts matching starts from 1");
    assert!(
        msgs[2].starts_with("break: unknown operation `Nope`"),
        "{}",
        msgs[2]
    );
    assert!(!agent.policy.may_hold(), "nothing was set");
}

/// A held thread's site: a state to read and a send to edit.
struct StateSite;

impl held::Site for StateSite {
    fn reorder(&mut self, _: &[String], _: Option<proto::Rest>) -> Result<bool, held::SiteError> {
        Err(held::SiteError::NotApplicable("no queue".into()))
    }
    fn edit(&mut self, _: serde_json::Value) -> Result<(), held::SiteError> {
        Ok(())
    }
    fn state(&self) -> Result<serde_json::Value, held::SiteError> {
        Ok(serde_json::json!({"x": 1}))
    }
    fn set_state(&mut self, _: serde_json::Value) -> Result<(), held::SiteError> {
        Ok(())
    }
    fn queue(&self, _: usize) -> (Vec<QueueEntry>, usize) {
        (Vec::new(), 0)
    }
}

/// The events up to the verdict of request `req` (a held thread answers on its own
/// thread: wait for it, at most 10 s).
fn until_verdict(agent: &Agent, req: u64) -> Vec<Event> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut evs = Vec::new();
    loop {
        evs.extend(replies(agent));
        let done = evs.iter().any(
            |e| matches!(e, Event::Ok { req: Some(n), .. } | Event::Error { req: Some(n), .. } if *n == req),
        );
        if done {
            return evs;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no verdict for {req}: {evs:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

fn error_of(evs: &[Event], req: u64) -> String {
    match evs
        .iter()
        .find(|e| matches!(e, Event::Error { req: Some(n), .. } if *n == req))
    {
        Some(Event::Error { message, .. }) => message.clone(),
        _ => panic!("request {req} was not refused: {evs:?}"),
    }
}

/// `edit`, `match`, `state` and `set_state` name the held event by number, by the thread
/// held at it, or by both (which must agree); with neither, the error lists what is held.
#[test]
fn a_held_event_is_named_by_its_thread_or_its_number() {
    let agent = Arc::new(attached());
    let name: Arc<str> = "proc[0]".into();
    let send = Event::Send(proto::SendEv {
        event_id: 0,
        thread: Some("proc[0]".into()),
        op: Some("Work".into()),
        msg: "0.1".into(),
        to_op: None,
        to_thread: None,
        type_name: "u32".into(),
        traced: false,
        held: true,
        reason: Some(proto::HoldReason::Pause),
        content: Some(serde_json::json!(1)),
        call: None,
    });
    let held = {
        let (agent, name) = (agent.clone(), name.clone());
        std::thread::spawn(move || {
            agent.hold(
                send,
                (1, &name),
                proto::HoldReason::Pause,
                &mut StateSite,
                &|| true,
            )
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let id = loop {
        if let Some(id) = lock(&agent.stream.state).held.keys().next() {
            break *id;
        }
        assert!(std::time::Instant::now() < deadline, "never held");
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    let _ = replies(&agent);
    let t = |s: &str| Some(s.to_owned());

    // By thread.
    agent.apply(
        Command::State {
            thread: t("proc[0]"),
            event_id: None,
        },
        Some(1),
    );
    let evs = until_verdict(&agent, 1);
    assert!(
        matches!(&evs[..], [Event::State { thread, .. }, Event::Ok { req: Some(1), .. }] if thread == "proc[0]"),
        "{evs:?}"
    );
    agent.apply(
        Command::Edit {
            event_id: None,
            thread: t("proc[0]"),
            content: serde_json::json!(2),
        },
        Some(2),
    );
    let evs = until_verdict(&agent, 2);
    assert!(
        matches!(&evs[..], [Event::Ok { cmd, target: Some(target), req: Some(2) }] if cmd == "edit" && *target == id.to_string()),
        "{evs:?}"
    );
    // By both, agreeing.
    agent.apply(
        Command::SetState {
            thread: t("proc[0]"),
            event_id: Some(id),
            content: serde_json::json!({"x": 2}),
        },
        Some(3),
    );
    let evs = until_verdict(&agent, 3);
    assert!(matches!(&evs[..], [Event::Ok { req: Some(3), .. }]), "{evs:?}");
    // By both, disagreeing: the thread is not the one held at that event.
    agent.apply(
        Command::Match {
            event_id: Some(id),
            thread: t("proc[1]"),
            source: 1,
            tag: None,
        },
        Some(4),
    );
    let e = error_of(&until_verdict(&agent, 4), 4);
    assert!(
        e.contains(&format!("event {id} and thread proc[1] disagree")) && e.contains("holds proc[0]"),
        "{e}"
    );
    // Another event of the held thread.
    agent.apply(
        Command::State {
            thread: t("proc[0]"),
            event_id: Some(id + 7),
        },
        Some(5),
    );
    let e = error_of(&until_verdict(&agent, 5), 5);
    assert!(
        e.contains(&format!("event {} and thread proc[0] disagree", id + 7))
            && e.contains(&format!("proc[0] is held at event {id}")),
        "{e}"
    );
    // Neither: the error says what is held.
    agent.apply(
        Command::Edit {
            event_id: None,
            thread: None,
            content: serde_json::json!(3),
        },
        Some(6),
    );
    let e = error_of(&until_verdict(&agent, 6), 6);
    assert!(
        e.contains("name the held event by `thread` or `event_id`")
            && e.contains(&format!("proc[0] (event {id})")),
        "{e}"
    );
    // A thread that is not held, an unknown one.
    agent.apply(
        Command::SetState {
            thread: t("proc[1]"),
            event_id: None,
            content: serde_json::json!({}),
        },
        Some(7),
    );
    let e = error_of(&until_verdict(&agent, 7), 7);
    assert!(e.contains("proc[1] is running"), "{e}");
    agent.apply(
        Command::Match {
            event_id: None,
            thread: t("proc[9]"),
            source: 1,
            tag: None,
        },
        Some(8),
    );
    let e = error_of(&until_verdict(&agent, 8), 8);
    assert!(e.contains("unknown thread `proc[9]`"), "{e}");
    // An edit of a thread held at a send: a match there is the site's refusal (no MPI).
    agent.apply(
        Command::Match {
            event_id: None,
            thread: t("proc[0]"),
            source: 1,
            tag: None,
        },
        Some(9),
    );
    let e = error_of(&until_verdict(&agent, 9), 9);
    assert!(e.contains("not a wildcard receive"), "{e}");

    agent.apply(
        Command::Continue {
            thread: None,
            event_id: None,
            trace: None,
        },
        None,
    );
    assert_eq!(held.join().ok(), Some(None), "released");
    // Nothing held any more: the error says so.
    agent.apply(
        Command::State {
            thread: None,
            event_id: None,
        },
        Some(10),
    );
    let e = error_of(&until_verdict(&agent, 10), 10);
    assert!(e.contains("no thread is held now"), "{e}");
}

/// `finish` returns at once with no debugger; attached, it waits for the connection's
/// final flush (the phase Finished), after which the agent serves no debugger any more.
#[test]
fn the_exit_waits_for_the_final_flush_only_when_attached() {
    let free = Agent::new(false, None);
    free.finish();
    free.flush_before_death();
    assert_eq!(free.phase.get(), phase::Phase::Free, "nobody to flush to");

    let agent = Arc::new(attached());
    let (tx, rx) = std::sync::mpsc::channel();
    let a = agent.clone();
    let exit = std::thread::spawn(move || {
        a.finish();
        let _ = tx.send(());
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !agent.phase.is_finishing() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(agent.phase.is_finishing(), "finish begins the exit flush");
    assert!(agent.is_attached(), "events of the exit are still recorded");
    assert!(rx.try_recv().is_err(), "finish waits for the flush");
    // The connection's side: everything sent and the close answered.
    let _ = agent.drain();
    agent.signal_finished();
    assert!(
        rx.recv_timeout(std::time::Duration::from_secs(10)).is_ok(),
        "finish returns"
    );
    let _ = exit.join();
    agent.detach();
    assert!(!agent.phase.release(), "the session's end leaves Finished");
    assert!(agent.phase.is_finished() && !agent.is_attached() && !agent.is_hot());
    assert_eq!(agent.phase.claim(), Err(phase::Phase::Finished));
    agent.flush_before_death();
}
