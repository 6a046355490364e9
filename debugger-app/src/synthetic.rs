//! Synthetic event streams for the benchmarks of the model and the GUI
//! (`benches/ingest.rs`, `examples/gui_frame_time.rs`): a flow of messages over `ops`
//! leaf operations on a collection `proc` of `threads` threads, each message a send, a
//! receive, a step start and a step stop.

use racetrack_protocol::{CollectionDesc, Event, OperationDesc, RecvEv, SendEv, Step, StepEv};

/// The `structure` of the synthetic program.
pub fn structure(ops: usize, threads: usize) -> Event {
    let names: Vec<String> = (0..threads).map(|i| format!("proc[{i}]")).collect();
    Event::Structure {
        operations: (0..ops)
            .map(|o| OperationDesc {
                name: format!("Op{o}"),
                kind: "leaf".into(),
                collection: "proc".into(),
                threads: names.clone(),
            })
            .collect(),
        collections: vec![CollectionDesc {
            name: "proc".into(),
            threads: names,
        }],
        edges: vec![],
    }
}

/// The four events of message number `n`, numbered from `first_id`: sent by `Op(k-1)` on
/// one thread to `Opk` on the next, received, started and stopped there. Consecutive
/// messages visit every (operation, thread) node in turn.
pub fn message(n: u64, ops: usize, threads: usize, first_id: u64) -> [Event; 4] {
    let op = (n as usize) % ops;
    let thread = format!("proc[{}]", (n as usize / ops) % threads);
    let from_thread = format!("proc[{}]", (n as usize / ops + 1) % threads);
    let msg = format!("0.{n}");
    let step = |event_id| StepEv {
        event_id,
        thread: thread.clone().into(),
        op: format!("Op{op}").into(),
        msg: msg.clone().into(),
        instance: msg.clone().into(),
        step: Step::Run,
        traced: false,
        held: false,
        reason: None,
        call: None,
    };
    [
        Event::Send(SendEv {
            event_id: first_id,
            thread: Some(from_thread.into()),
            op: Some(format!("Op{}", (op + ops - 1) % ops).into()),
            msg: msg.clone().into(),
            to_op: Some(format!("Op{op}").into()),
            to_thread: Some(thread.clone().into()),
            type_name: "Task".into(),
            traced: false,
            held: false,
            reason: None,
            content: None,
            call: None,
        }),
        Event::Recv(RecvEv {
            event_id: first_id + 1,
            thread: thread.clone().into(),
            op: format!("Op{op}").into(),
            msg: msg.clone().into(),
            position: 0,
            traced: false,
            from: None,
            call: None,
        }),
        Event::Start(step(first_id + 2)),
        Event::Stop(step(first_id + 3)),
    ]
}
