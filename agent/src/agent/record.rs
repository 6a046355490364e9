//! What the agent buffers between the program's threads and its network thread.
//!
//! The common streamed events (a `send`, `recv`, `start` or `stop` that is not held and
//! carries no content) are recorded as compact [`Record`]s: indexes, inline message ids,
//! static or inline type names and a shared MPI call, so recording one allocates nothing
//! on the program's thread. The agent's thread turns runs of them into binary packed
//! frames with the protocol's writer (for a client that asked for text: the events they
//! stand for, in `batch` frames); every other event is buffered as the protocol [`Event`]
//! it is.

use racetrack_protocol::{BinaryWriter, Event, Names, Record};
use std::borrow::Cow;
use std::time::Instant;

/// One buffered event.
pub(crate) enum Rec {
    /// A streamed event in compact form.
    Fast(Record),
    /// Anything else (boxed: these are rare, and the records stay small).
    Full(Box<Event>),
}

// Records are moved on every event (into the buffer, out of it): up to 128 bytes, a move
// is a few vector instructions, past that a call to `memcpy` on the program's thread for
// every event.
const _: () = assert!(std::mem::size_of::<Rec>() <= 128, "a record grew");

/// The agent's buffer: records in fixed-size chunks, so that appending never moves what
/// is already there (a growing vector would copy every record, on the program's threads
/// and under the buffer's lock, each time it doubles). Chunks the network thread has
/// emptied come back ([`Chunks::recycle`]): a fresh chunk is a `malloc` and first-touch
/// page faults on a program's thread, under the buffer's lock.
#[derive(Default)]
pub(crate) struct Chunks {
    chunks: Vec<Vec<Rec>>,
    len: usize,
    spare: Vec<Vec<Rec>>,
    /// Set when writing a trace file: each record's time (nanoseconds since this
    /// instant, read under the buffer's lock, so they never decrease) goes into `times`.
    clock: Option<Instant>,
    times: Vec<u64>,
}

/// Records per chunk.
const CHUNK: usize = 1024;

/// Empty chunks kept for reuse (about 1 MiB).
pub(crate) const SPARE_MAX: usize = 8;

impl Chunks {
    pub(crate) fn push(&mut self, r: Rec) {
        if let Some(clock) = self.clock {
            self.times
                .push(u64::try_from(clock.elapsed().as_nanos()).unwrap_or(u64::MAX));
        }
        match self.chunks.last_mut() {
            Some(c) if c.len() < CHUNK => c.push(r),
            _ => {
                let mut c = self.spare.pop().unwrap_or_else(|| Vec::with_capacity(CHUNK));
                c.push(r);
                self.chunks.push(c);
            }
        }
        self.len += 1;
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Time every record pushed from now on (a trace file's clock).
    pub(crate) fn set_clock(&mut self, clock: Instant) {
        self.clock = Some(clock);
    }

    /// The times of the records [`Chunks::take`] hands out (empty without a clock).
    pub(crate) fn take_times(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.times)
    }

    /// Drop everything buffered, and the spare chunks.
    pub(crate) fn clear(&mut self) {
        self.take();
        self.times.clear();
        self.spare = Vec::new();
    }

    /// Keep emptied chunks (as [`Chunks::take`] handed them out) for the next records,
    /// up to [`SPARE_MAX`]; what is not kept stays in `chunks`.
    pub(crate) fn recycle(&mut self, chunks: &mut Vec<Vec<Rec>>) {
        while self.spare.len() < SPARE_MAX {
            match chunks.pop() {
                Some(c) if c.is_empty() && c.capacity() == CHUNK => self.spare.push(c),
                Some(_) => {}
                None => break,
            }
        }
    }

    /// Everything buffered, oldest first.
    pub(crate) fn take(&mut self) -> Vec<Vec<Rec>> {
        self.len = 0;
        std::mem::take(&mut self.chunks)
    }
}

impl Rec {
    /// Whether the record takes an event number.
    pub(crate) fn is_numbered(&self) -> bool {
        match self {
            Rec::Fast(_) => true,
            Rec::Full(ev) => ev.event_id().is_some(),
        }
    }

    pub(crate) fn set_event_id(&mut self, id: u64) {
        match self {
            Rec::Fast(f) => f.event_id = id,
            Rec::Full(ev) => super::stream::set_event_id(ev, id),
        }
    }
}

/// One frame to send.
#[derive(Debug)]
pub(crate) enum Frame {
    Text(String),
    Binary(Vec<u8>),
}

impl Frame {
    #[cfg(test)]
    fn len(&self) -> usize {
        match self {
            Frame::Text(t) => t.len(),
            Frame::Binary(b) => b.len(),
        }
    }
}

/// How the network thread writes streamed events: what the client asked for in its
/// handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Packing {
    /// JSON text: every event as itself, in `batch` frames.
    Text,
    /// Binary packed frames for compact records, JSON for the rest.
    Binary,
}

/// Frames for drained records, in order, with the number of events in each, each of at
/// most `max` events. Binary (`text` is `None`): runs of fast records become binary packed
/// frames, runs of full events `batch` frames.
/// Text: every event in `batch` frames, fast records expanded with the names `text` gives.
/// Records are read in place: moving each record out of its chunk would copy every event
/// once more on the agent's thread.
pub(crate) fn frames<'a>(
    recs: impl IntoIterator<Item = &'a Rec>,
    max: usize,
    text: Option<&Names>,
) -> Vec<(Frame, usize)> {
    let mut f = Framer::new(max);
    for r in recs {
        match (r, text) {
            (Rec::Fast(fast), None) => f.fast(fast),
            (Rec::Fast(fast), Some(names)) => f.full(Cow::Owned(expand(fast, names))),
            (Rec::Full(ev), _) => f.full(Cow::Borrowed(&**ev)),
        }
    }
    f.finish()
}

/// A fast record as the event it stands for. The structure only grows, so the latest
/// names cover every record; one they do not (a bug) becomes an `error` in its place.
fn expand(r: &Record, names: &Names) -> Event {
    names.expand(r.to_packed()).unwrap_or_else(|e| Event::Error {
        message: format!("event {} could not be written as text: {e}", r.event_id),
        req: None,
    })
}

/// The frames [`frames`] is writing: a run of one kind goes on until another kind comes
/// (the other runs are flushed first, so the order is kept) or it holds `max` events.
struct Framer<'a> {
    out: Vec<(Frame, usize)>,
    max: usize,
    packer: BinaryWriter,
    n_packed: usize,
    full: Vec<Cow<'a, Event>>,
}

impl<'a> Framer<'a> {
    fn new(max: usize) -> Self {
        Framer {
            out: Vec::new(),
            max,
            packer: Self::packer(max),
            n_packed: 0,
            full: Vec::new(),
        }
    }

    /// About 12 bytes an event (an MPI call's adds some tens).
    fn packer(max: usize) -> BinaryWriter {
        BinaryWriter::with_capacity(16 * max)
    }

    fn fast(&mut self, f: &Record) {
        self.flush_full();
        self.packer.push(f);
        self.n_packed += 1;
        if self.n_packed >= self.max || self.packer.bytes() >= PACKED_FRAME_BYTES {
            self.flush_packed();
        }
    }

    fn full(&mut self, ev: Cow<'a, Event>) {
        self.flush_packed();
        self.full.push(ev);
        if self.full.len() >= self.max {
            self.flush_full();
        }
    }

    fn flush_packed(&mut self) {
        if self.n_packed == 0 {
            return;
        }
        let w = std::mem::replace(&mut self.packer, Self::packer(self.max));
        self.out
            .push((Frame::Binary(w.finish()), std::mem::take(&mut self.n_packed)));
    }

    fn flush_full(&mut self) {
        flush_full(&mut self.full, &mut self.out);
    }

    fn finish(mut self) -> Vec<(Frame, usize)> {
        self.flush_packed();
        self.flush_full();
        self.out
    }
}

/// A binary packed frame is cut once this long: far below the frame limit even after the
/// largest event (whose strings are an MPI call's names and site).
const PACKED_FRAME_BYTES: usize = 1 << 20;

/// `batch` frames for a run of full events (emptied), each within the frame limit.
fn flush_full(full: &mut Vec<Cow<'_, Event>>, out: &mut Vec<(Frame, usize)>) {
    // A frame larger than the limit would make the debugger close the connection:
    // such batches are split, and an event too large by itself is replaced by an error.
    let limit = racetrack_protocol::MAX_FRAME_BYTES - 64;
    let mut text = String::new();
    let mut n = 0;
    for ev in full.drain(..) {
        let mut one = ev.to_json();
        if one.len() > limit {
            let what = match (ev.event_id(), ev.thread()) {
                (Some(id), Some(t)) => format!("event {id} of {t}"),
                _ => "an event".to_owned(),
            };
            let message = format!(
                "{what} was not sent: it is {} bytes, more than a frame's {} (a held thread stays held: continue it by its event id)",
                one.len(),
                racetrack_protocol::MAX_FRAME_BYTES
            );
            one = Event::Error { message, req: None }.to_json();
        }
        if n > 0 && text.len() + one.len() + 2 > limit {
            text.push_str("]}");
            out.push((Frame::Text(std::mem::take(&mut text)), std::mem::take(&mut n)));
        }
        text.push_str(if n == 0 {
            r#"{"event":"batch","events":["#
        } else {
            ","
        });
        text.push_str(&one);
        n += 1;
    }
    if n > 0 {
        text.push_str("]}");
        out.push((Frame::Text(text), n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use racetrack_protocol as proto;
    use racetrack_protocol::{Decoded, Decoder, Kind, MsgPath, RecordText};

    /// The events a frame carries, packed ones expanded.
    fn decode(d: &mut Decoder, frame: &Frame) -> Vec<Event> {
        match frame {
            Frame::Text(t) => d.decode(t).expect("decodes"),
            Frame::Binary(b) => match d.decode_binary(b).expect("decodes") {
                Decoded::Packed(names, ps) => ps
                    .into_iter()
                    .map(|p| names.expand(p).expect("expands"))
                    .collect(),
                Decoded::Events(evs) => evs,
            },
        }
    }

    #[test]
    fn no_frame_exceeds_the_limit() {
        let big = |n: usize| {
            Rec::Full(Box::new(Event::State {
                thread: "main[0]".into(),
                content: "x".repeat(n).into(),
            }))
        };
        let max = racetrack_protocol::MAX_FRAME_BYTES;
        let frames = frames(
            &[big(max / 2), big(max / 2), big(max + 1), big(10)],
            1024,
            Some(&proto::Names::default()),
        );
        assert!(frames.iter().all(|(t, _)| t.len() <= max));
        let evs: Vec<Event> = frames
            .iter()
            .flat_map(|(t, _)| decode(&mut Decoder::default(), t))
            .collect();
        assert_eq!(
            evs.len(),
            4,
            "two halves, the error in place of the too-large one, the small one"
        );
        assert!(matches!(&evs[2], Event::Error { message, .. } if message.contains("was not sent")));
        assert!(
            matches!(&evs[3], Event::State { content, .. } if content.as_str().is_some_and(|s| s.len() == 10))
        );
    }

    /// The MPI library's notifications: compact records with their call go in binary
    /// packed frames when the debugger reads binary, cut where a held one (a full event)
    /// comes, in order; all in JSON for a text client.
    #[test]
    fn mpi_records_go_in_binary_packed_frames_with_their_calls() {
        let call = std::sync::Arc::new(proto::CallInfo {
            comm: Some("MPI_COMM_WORLD".into()),
            peer: Some(proto::Peer::Rank(2)),
            site: Some("ring.c:46 (pass_token)".into()),
            ..proto::CallInfo::default()
        });
        let fast = |id: u64| {
            Rec::Fast(Record {
                from: None,
                kind: Kind::Start,
                event_id: id,
                thread: 1,
                op: 0,
                msg: MsgPath::from_slice(&[1, id]),
                a: 0,
                b: 0,
                traced: false,
                text: RecordText::None,
                call: Some(call.clone()),
            })
        };
        let held = Rec::Full(Box::new(Event::Start(proto::StepEv {
            event_id: 3,
            thread: "rank[1]".into(),
            op: "MPI_Send".into(),
            msg: "1.3".into(),
            instance: "1.3".into(),
            step: proto::Step::Run,
            traced: false,
            held: true,
            reason: Some(proto::HoldReason::Break),
            call: Some(Box::new(proto::CallInfo::clone(&call))),
        })));
        let recs = vec![fast(1), fast(2), held, fast(4), fast(5)];
        let names = proto::Names::new(vec!["MPI_Send".into()], vec!["rank[0]".into(), "rank[1]".into()]);
        let expected: Vec<Event> = recs
            .iter()
            .map(|r| match r {
                Rec::Full(ev) => (**ev).clone(),
                Rec::Fast(f) => expand(f, &names),
            })
            .collect();
        assert!(matches!(&expected[0], Event::Start(s) if s.call.as_deref() == Some(&*call)));
        for text in [None, Some(&names)] {
            let frames = frames(&recs, 1024, text);
            let kinds: Vec<(bool, usize)> = (frames.iter())
                .map(|(f, n)| (matches!(f, Frame::Binary(_)), *n))
                .collect();
            let want: &[(bool, usize)] = match text {
                None => &[(true, 2), (false, 1), (true, 2)],
                Some(_) => &[(false, 5)],
            };
            assert_eq!(kinds, want, "text: {}", text.is_some());
            let mut d = Decoder::default();
            d.observe(&Event::Structure {
                operations: vec![proto::OperationDesc {
                    name: "MPI_Send".into(),
                    kind: "call".into(),
                    collection: "rank".into(),
                    threads: names.threads.clone(),
                }],
                collections: vec![proto::CollectionDesc {
                    name: "rank".into(),
                    threads: names.threads.clone(),
                }],
                edges: Vec::new(),
            });
            let evs: Vec<Event> = frames.iter().flat_map(|(f, _)| decode(&mut d, f)).collect();
            assert_eq!(evs, expected, "text: {}", text.is_some());
        }
    }

    #[test]
    fn a_record_the_names_do_not_cover_is_an_error_for_a_text_client() {
        let rec = Rec::Fast(Record {
            from: None,
            kind: Kind::Recv,
            event_id: 9,
            thread: 4,
            op: 0,
            msg: MsgPath::from_slice(&[1]),
            a: 0,
            b: 0,
            traced: false,
            text: RecordText::None,
            call: None,
        });
        let frames = frames([&rec], 8, Some(&proto::Names::default()));
        let evs = decode(&mut Decoder::default(), &frames[0].0);
        assert!(
            matches!(&evs[..], [Event::Error { message, .. }] if message.contains("event 9") && message.contains("thread #4")),
            "{evs:?}"
        );
    }

    #[test]
    fn packed_frames_decode_to_the_events_they_record() {
        let text = packed_frames_decode(true);
        let binary = packed_frames_decode(false);
        assert_eq!(
            text, binary,
            "a text client gets the events binary frames stand for"
        );
    }

    /// Check the events of a few records, written as text or binary; returns them.
    fn packed_frames_decode(text: bool) -> Vec<Event> {
        let path = |msg: &str| {
            let parts: Vec<u64> = msg.split('.').map(|c| c.parse().expect("id")).collect();
            MsgPath::from_slice(&parts)
        };
        let fast = |kind, msg: &str, a, text| {
            Rec::Fast(Record {
                from: None,
                kind,
                event_id: 7,
                thread: 1,
                op: 0,
                msg: path(msg),
                a,
                b: -1,
                traced: true,
                text,
                call: None,
            })
        };
        let recs = vec![
            fast(Kind::Send, "0.3", -1, RecordText::Type("Task".into())),
            Rec::Full(Box::new(Event::Error {
                message: "x".into(),
                req: None,
            })),
            fast(
                Kind::Stop,
                "0.3.1",
                2,
                RecordText::Instance(Box::new(path("0.3"))),
            ),
            fast(Kind::Recv, "0", 2, RecordText::None),
            fast(Kind::Start, "0.3.2", 1, RecordText::Parent),
        ];
        let structure = Event::Structure {
            operations: vec![proto::OperationDesc {
                name: "Work".into(),
                kind: "leaf".into(),
                collection: "proc".into(),
                threads: vec!["proc[0]".into(), "proc[1]".into()],
            }],
            collections: vec![proto::CollectionDesc {
                name: "proc".into(),
                threads: vec!["proc[0]".into(), "proc[1]".into()],
            }],
            edges: vec![],
        };
        let names = proto::Names::of(&structure).expect("names");
        let frames = frames(&recs, 1, text.then_some(&names));
        assert_eq!(frames.iter().map(|f| f.1).collect::<Vec<_>>(), [1, 1, 1, 1, 1]);
        let binary = frames.iter().filter(|f| matches!(f.0, Frame::Binary(_))).count();
        assert_eq!(binary, if text { 0 } else { 4 });
        let mut d = Decoder::default();
        d.observe(&structure);
        let evs: Vec<Event> = frames.iter().flat_map(|(f, _)| decode(&mut d, f)).collect();
        let Event::Send(s) = &evs[0] else {
            panic!("{:?}", evs[0])
        };
        assert_eq!(
            (
                s.thread.as_deref(),
                s.op.as_deref(),
                s.msg.as_str(),
                s.to_op.as_deref(),
                s.to_thread.as_deref()
            ),
            (Some("proc[1]"), Some("Work"), "0.3", None, None)
        );
        assert_eq!((s.type_name.as_str(), s.traced, s.held), ("Task", true, false));
        assert!(matches!(&evs[1], Event::Error { message, .. } if message == "x"));
        let Event::Stop(st) = &evs[2] else {
            panic!("{:?}", evs[2])
        };
        assert_eq!(
            (st.msg.as_str(), st.instance.as_str(), st.step),
            ("0.3.1", "0.3", proto::Step::Final)
        );
        let Event::Recv(r) = &evs[3] else {
            panic!("{:?}", evs[3])
        };
        assert_eq!((r.thread.as_str(), r.position, r.event_id), ("proc[1]", 2, 7));
        let Event::Start(sa) = &evs[4] else {
            panic!("{:?}", evs[4])
        };
        assert_eq!(
            (sa.msg.as_str(), sa.instance.as_str(), sa.step),
            ("0.3.2", "0.3", proto::Step::Absorb)
        );
        // A packed event naming a thread the structure lacks is an error, not a panic.
        let mut w = BinaryWriter::with_capacity(16);
        w.push(&Record {
            from: None,
            kind: Kind::Recv,
            event_id: 1,
            thread: 9,
            op: 0,
            msg: MsgPath::from_slice(&[0]),
            a: 0,
            b: 0,
            traced: false,
            text: RecordText::None,
            call: None,
        });
        assert!(d
            .decode_binary(&w.finish())
            .unwrap_err()
            .to_string()
            .contains("thread #9"));
        evs
    }
}
