#![allow(missing_docs)] // criterion_group! generates undocumented functions
//! Criterion micro-benchmark of the debugger model's ingest (what the GUI and `ctl` do with
//! every event):
//! - `model_ingest`: a send / recv / start / stop cycle over 100 threads × 20 operations,
//!   into the GUI's model (the unfolded graph), `ctl`'s (happens-before clocks) and the
//!   bare one;
//! - `mpi_ingest`: an MPI job's events as its connection receives them (binary packed
//!   frames of a 4-rank ring, every call with its parameters and site), decoded, every
//!   `recv` linked to its `send` as the job's merge links it, and ingested into `ctl`'s
//!   model and the GUI's, or decoded only: what each MPI event costs the debugger from
//!   the wire to the model.
//!
//! `cargo bench -p racetrack --bench ingest`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use racetrack::model::Model;
use racetrack::synthetic;
use racetrack_protocol::{
    BinaryWriter, CallInfo, CollectionDesc, Decoded, Decoder, Event, Kind, Link, Matched, MsgPath,
    OperationDesc, Peer, Record, RecordText, RecvEv, SendEv, SentBy, Step, StepEv, Tag,
};
use std::sync::Arc;

fn events(n: u64) -> Vec<Event> {
    let mut v = vec![synthetic::structure(20, 100)];
    for i in 0..n {
        v.extend(synthetic::message(i, 20, 100, 4 * i));
    }
    v
}

fn bench(c: &mut Criterion) {
    let evs = events(25_000);
    let mut g = c.benchmark_group("model_ingest");
    g.throughput(Throughput::Elements(evs.len() as u64));
    g.sample_size(20);
    type NewModel = fn() -> Model;
    let models: [(&str, NewModel); 3] = [
        ("100k events", || Model::new().with_unfolded()),
        ("100k events, ctl (clocks)", || Model::new().with_clocks()),
        ("100k events, bare", Model::new),
    ];
    for (name, model) in models {
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut m = model();
                for e in &evs {
                    m.ingest(e);
                }
                m.control.event_count
            })
        });
    }
    g.finish();
}

const RANKS: u64 = 4;

/// The job's merged structure: the ring's two calls on the collection `rank`.
fn mpi_structure() -> Event {
    let threads: Vec<String> = (0..RANKS).map(|r| format!("rank[{r}]")).collect();
    Event::Structure {
        operations: ["MPI_Send", "MPI_Recv"]
            .map(|name| OperationDesc {
                name: name.into(),
                kind: "call".into(),
                collection: "rank".into(),
                threads: threads.clone(),
            })
            .to_vec(),
        collections: vec![CollectionDesc {
            name: "rank".into(),
            threads,
        }],
        edges: Vec::new(),
    }
}

/// An `MPI_Send` or `MPI_Recv` of one int with `peer`, as the wrappers describe it.
fn ring_call(peer: i32, recv: bool) -> Box<CallInfo> {
    Box::new(CallInfo {
        comm: Some("MPI_COMM_WORLD".into()),
        peer: Some(Peer::Rank(peer)),
        tag: Some(Tag::Tag(7)),
        count: Some(1),
        datatype: Some("MPI_INT".into()),
        bytes: Some(4),
        site: Some(format!("ring.c:{} (main)", if recv { 52 } else { 47 }).into()),
        matched: recv.then_some(Matched {
            source: peer,
            tag: 7,
            bytes: 4,
        }),
        ..CallInfo::default()
    })
}

fn step(event_id: u64, thread: &str, op: &str, msg: &str, call: &CallInfo) -> StepEv {
    StepEv {
        event_id,
        thread: thread.into(),
        op: op.into(),
        msg: msg.into(),
        instance: msg.into(),
        step: Step::Run,
        traced: false,
        held: false,
        reason: None,
        call: Some(Box::new(call.clone())),
    }
}

/// `rounds` rounds of a ring: each rank sends to the next and receives from the previous,
/// every receive after its send, as the job's merge lets them out.
fn mpi_events(rounds: u64) -> Vec<Event> {
    let mut out = Vec::new();
    let mut next = [0u64; RANKS as usize];
    let mut id = |r: u64| {
        next[r as usize] += 1;
        r * 1_000_000_000_000 + next[r as usize]
    };
    for k in 0..rounds {
        let mut sends = Vec::new();
        for r in 0..RANKS {
            let (thread, to) = (format!("rank[{r}]"), (r + 1) % RANKS);
            let call = ring_call(i32::try_from(to).unwrap_or(0), false);
            let msg = format!("{r}.{}", 2 * k);
            out.push(Event::Start(step(id(r), &thread, "MPI_Send", &msg, &call)));
            let send = id(r);
            sends.push(send);
            out.push(Event::Send(SendEv {
                event_id: send,
                thread: Some(thread.clone().into()),
                op: Some("MPI_Send".into()),
                msg: msg.clone().into(),
                to_op: None,
                to_thread: Some(format!("rank[{to}]").into()),
                type_name: "MPI_INT".into(),
                traced: false,
                held: false,
                reason: None,
                content: None,
                call: Some(call.clone()),
            }));
            out.push(Event::Stop(step(id(r), &thread, "MPI_Send", &msg, &call)));
        }
        for r in 0..RANKS {
            let (thread, from) = (format!("rank[{r}]"), (r + RANKS - 1) % RANKS);
            let call = ring_call(i32::try_from(from).unwrap_or(0), true);
            let msg = format!("{r}.{}", 2 * k + 1);
            out.push(Event::Start(step(id(r), &thread, "MPI_Recv", &msg, &call)));
            out.push(Event::Recv(RecvEv {
                event_id: id(r),
                thread: thread.clone().into(),
                op: "MPI_Recv".into(),
                msg: msg.clone().into(),
                position: 0,
                traced: false,
                from: Some(Link {
                    thread: format!("rank[{from}]").into(),
                    event_id: sends[from as usize],
                }),
                call: Some(call.clone()),
            }));
            out.push(Event::Stop(step(id(r), &thread, "MPI_Recv", &msg, &call)));
        }
    }
    out
}

/// `rank[R]`'s index R, an operation's index in [`mpi_structure`].
fn index(name: &str) -> i64 {
    match name {
        "MPI_Send" => 0,
        "MPI_Recv" => 1,
        t => t
            .trim_start_matches("rank[")
            .trim_end_matches(']')
            .parse()
            .expect("a rank"),
    }
}

/// `ev` as a rank's agent records it.
fn record(ev: &Event) -> Record {
    let msg = |m: &str| {
        MsgPath::from_slice(
            &m.split('.')
                .map(|c| c.parse().expect("a component"))
                .collect::<Vec<u64>>(),
        )
    };
    let call = |c: &Option<Box<CallInfo>>| c.as_deref().cloned().map(Arc::new);
    let (kind, event_id, thread, op, m, b, text, c) = match ev {
        Event::Send(s) => (
            Kind::Send,
            s.event_id,
            s.thread.as_deref().unwrap_or_default(),
            s.op.as_deref().unwrap_or_default(),
            &s.msg,
            s.to_thread.as_deref().map_or(-1, index),
            RecordText::Type(s.type_name.clone()),
            call(&s.call),
        ),
        Event::Recv(r) => (
            Kind::Recv,
            r.event_id,
            &*r.thread,
            &*r.op,
            &r.msg,
            0,
            RecordText::None,
            call(&r.call),
        ),
        Event::Start(s) | Event::Stop(s) => {
            let kind = if matches!(ev, Event::Start(_)) {
                Kind::Start
            } else {
                Kind::Stop
            };
            (
                kind,
                s.event_id,
                &*s.thread,
                &*s.op,
                &s.msg,
                0,
                RecordText::None,
                call(&s.call),
            )
        }
        _ => unreachable!("only notifications"),
    };
    Record {
        kind,
        event_id,
        thread: index(thread),
        op: index(op),
        msg: msg(m),
        a: if kind == Kind::Send { -1 } else { 0 },
        b,
        traced: false,
        text,
        call: c,
        ..Record::default()
    }
}

/// `evs` as binary packed frames of 1,024 events, as an agent writes them.
fn frames(evs: &[Event]) -> Vec<Vec<u8>> {
    evs.chunks(1024)
        .map(|chunk| {
            let mut w = BinaryWriter::with_capacity(160 * chunk.len());
            for e in chunk {
                w.push(&record(e));
            }
            w.finish()
        })
        .collect()
}

/// Each `recv`'s link (what the job's merge adds), in order.
fn links(evs: &[Event]) -> Vec<Option<SentBy>> {
    evs.iter()
        .map(|e| match e {
            Event::Recv(r) => r.from.as_ref().map(|l| SentBy {
                thread: index(&l.thread),
                event_id: l.event_id,
            }),
            _ => None,
        })
        .collect()
}

fn bench_mpi(c: &mut Criterion) {
    // 4,167 rounds × 4 ranks × 6 events: 100,008 events.
    let evs = mpi_events(4_167);
    let bytes = frames(&evs);
    let links = links(&evs);
    let mut g = c.benchmark_group("mpi_ingest");
    g.throughput(Throughput::Elements(evs.len() as u64));
    g.sample_size(10);
    type NewModel = fn() -> Option<Model>;
    let models: [(&str, NewModel); 3] = [
        ("100k MPI events, decoded into ctl's model", || {
            Some(Model::new().with_clocks())
        }),
        ("100k MPI events, decoded into the GUI's model", || {
            Some(Model::new().with_unfolded())
        }),
        ("100k MPI events, decoded only", || None),
    ];
    for (name, model) in models {
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut m = model();
                if let Some(m) = &mut m {
                    m.ingest(&mpi_structure());
                }
                let mut decoder = Decoder::default();
                decoder.observe(&mpi_structure());
                let mut n = 0;
                for f in &bytes {
                    let Ok(Decoded::Packed(names, ps)) = decoder.decode_binary(f) else {
                        panic!("a binary packed frame");
                    };
                    for mut p in ps {
                        p.from = links[n].map(Box::new);
                        n += 1;
                        if let Some(m) = &mut m {
                            m.ingest_packed(&names, &p);
                        }
                    }
                }
                assert_eq!(n, evs.len());
                m.map_or(0, |m| m.control.event_count)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench, bench_mpi);
criterion_main!(benches);
