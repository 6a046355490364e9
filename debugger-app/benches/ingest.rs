#![allow(missing_docs)] // criterion_group! generates undocumented functions
//! Criterion micro-benchmark of the debugger model's ingest (what the GUI and `ctl` do with
//! every event): a send / recv / start / stop cycle over 100 threads × 20 operations.
//!
//! `cargo bench -p racetrack --bench ingest`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use racetrack::model::Model;
use racetrack_protocol::{CollectionDesc, Event, OperationDesc, RecvEv, SendEv, Step, StepEv};

fn events(n: u64) -> Vec<Event> {
    let threads: Vec<String> = (0..100).map(|i| format!("proc[{i}]")).collect();
    let mut v = vec![Event::Structure {
        operations: (0..20)
            .map(|o| OperationDesc {
                name: format!("Op{o}"),
                kind: "leaf".into(),
                collection: "proc".into(),
                threads: threads.clone(),
            })
            .collect(),
        collections: vec![CollectionDesc {
            name: "proc".into(),
            threads: threads.clone(),
        }],
        edges: vec![],
    }];
    for i in 0..n {
        let (op, t, from) = (
            format!("Op{}", i % 20),
            threads[(i / 20 % 100) as usize].clone(),
            threads[((i / 20 + 1) % 100) as usize].clone(),
        );
        let msg = format!("0.{i}");
        let step = |id| StepEv {
            event_id: id,
            thread: t.clone(),
            op: op.clone(),
            msg: msg.clone(),
            instance: msg.clone(),
            step: Step::Run,
            traced: false,
            held: false,
            reason: None,
        };
        v.push(Event::Send(SendEv {
            event_id: 4 * i,
            thread: Some(from),
            op: Some(format!("Op{}", (i + 19) % 20)),
            msg: msg.clone(),
            to_op: Some(op.clone()),
            to_thread: Some(t.clone()),
            type_name: "Task".into(),
            traced: false,
            held: false,
            reason: None,
            content: None,
        }));
        v.push(Event::Recv(RecvEv {
            event_id: 4 * i + 1,
            thread: t.clone(),
            op: op.clone(),
            msg: msg.clone(),
            position: 0,
            traced: false,
        }));
        v.push(Event::Start(step(4 * i + 2)));
        v.push(Event::Stop(step(4 * i + 3)));
    }
    v
}

fn bench(c: &mut Criterion) {
    let evs = events(25_000);
    let mut g = c.benchmark_group("model_ingest");
    g.throughput(Throughput::Elements(evs.len() as u64));
    g.sample_size(20);
    g.bench_function("100k events", |b| {
        b.iter(|| {
            let mut m = Model::default();
            for e in &evs {
                m.ingest(e);
            }
            m.event_count
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
