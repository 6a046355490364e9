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
        },
        Some(5),
    );
    agent.apply(
        Command::Break {
            op: "Work".into(),
            thread: None,
            on: true,
            trace: false,
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
    assert!(agent.policy.start_reason_of(1, 0, false).is_some());
    assert!(agent.policy.start_reason_of(2, 0, false).is_some());
    assert!(agent.policy.start_reason_of(0, 0, false).is_none());
}

#[test]
fn the_attach_snapshot_lists_the_debuggees_queues() {
    let agent = Agent::new(false, None);
    agent.set_debuggee(Box::new(Fake));
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
