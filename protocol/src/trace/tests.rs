//! Trace files: written and read back, and every kind of damage an error or a warning.

use super::*;
use crate::{BinaryWriter, CollectionDesc, Kind, MsgPath, OperationDesc, Record, RecordText};

fn structure() -> Event {
    Event::Structure {
        operations: vec![OperationDesc {
            name: "Work".into(),
            kind: "leaf".into(),
            collection: "proc".into(),
            threads: vec!["proc[0]".into()],
        }],
        collections: vec![CollectionDesc {
            name: "proc".into(),
            threads: vec!["proc[0]".into()],
        }],
        edges: vec![],
    }
}

fn hello() -> Event {
    Event::Hello {
        program: "t".into(),
        pid: 1,
        protocol: PROTOCOL_VERSION,
    }
}

/// A trace: hello, structure, then a binary packed frame of `n` starts; returns the bytes
/// and the offset of the packed frame's record.
fn trace(n: u64) -> (Vec<u8>, usize) {
    let mut out = header().to_vec();
    let mut w = TraceWriter::default();
    w.write_frame(&mut out, false, hello().to_json().as_bytes(), &[5])
        .unwrap();
    w.write_frame(&mut out, false, structure().to_json().as_bytes(), &[7])
        .unwrap();
    let at = out.len();
    let mut b = BinaryWriter::with_capacity(64);
    for i in 0..n {
        b.push(&Record {
            kind: Kind::Start,
            event_id: i,
            thread: 0,
            op: 0,
            msg: MsgPath::from_slice(&[0, i]),
            a: 0,
            b: 0,
            traced: false,
            text: RecordText::None,
            from: None,
            call: None,
        });
    }
    let times: Vec<u64> = (0..n).map(|i| 1_000 + 300 * i).collect();
    w.write_frame(&mut out, true, &b.finish(), &times).unwrap();
    (out, at)
}

fn read_all(bytes: &[u8]) -> (Vec<TraceEvent>, Option<TraceError>, Option<String>) {
    let mut r = match TraceReader::new(bytes) {
        Ok(r) => r,
        Err(e) => return (Vec::new(), Some(e), None),
    };
    let mut evs = Vec::new();
    let mut err = None;
    for ev in r.by_ref() {
        match ev {
            Ok(e) => evs.push(e),
            Err(e) => err = Some(e),
        }
    }
    (evs, err, r.warning().map(str::to_owned))
}

#[test]
fn a_trace_reads_back_with_its_times() {
    let (bytes, _) = trace(3);
    let (evs, err, warning) = read_all(&bytes);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(warning, None);
    assert_eq!(evs.len(), 5);
    assert_eq!(evs[0].event, hello());
    assert_eq!(evs[1].event, structure());
    let times: Vec<u64> = evs.iter().map(|e| e.time_ns).collect();
    assert_eq!(times, [5, 7, 1_000, 1_300, 1_600]);
    let Event::Start(s) = &evs[4].event else {
        panic!("{:?}", evs[4])
    };
    assert_eq!(
        (s.thread.as_str(), s.op.as_str(), s.msg.as_str()),
        ("proc[0]", "Work", "0.2")
    );
}

#[test]
fn a_truncated_last_record_keeps_the_events_before_it_and_warns() {
    let (bytes, at) = trace(3);
    for cut in [at + 2, at + 9, bytes.len() - 1] {
        let (evs, err, warning) = read_all(&bytes[..cut]);
        assert!(err.is_none(), "cut at {cut}: {err:?}");
        assert_eq!(evs.len(), 2, "hello and structure, cut at {cut}");
        let warning = warning.expect("a warning");
        assert!(warning.contains(&format!("byte {at}")), "{warning}");
        assert!(warning.contains("stopped while writing"), "{warning}");
    }
}

#[test]
fn a_bad_magic_is_named() {
    let (mut bytes, _) = trace(1);
    bytes[1] = b'X';
    let e = TraceReader::new(&bytes[..]).err().expect("an error");
    assert_eq!(e.offset, 0);
    assert!(e.to_string().contains("bad magic"), "{e}");
    let e = TraceReader::new(&b"{\"event\":\"hello\"}"[..])
        .err()
        .expect("an error");
    assert!(matches!(e.problem, TraceProblem::BadMagic), "{e}");
    assert!(e.to_string().contains("not a racetrack trace file"), "{e}");
}

#[test]
fn a_newer_format_is_refused() {
    let (mut bytes, _) = trace(1);
    bytes[8] = 2;
    let e = TraceReader::new(&bytes[..]).err().expect("an error");
    assert_eq!(e.offset, 8);
    assert!(
        matches!(
            e.problem,
            TraceProblem::Format {
                found: 2,
                expected: 1
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("format version 2"), "{e}");
}

#[test]
fn garbage_inside_a_frame_is_an_error_at_its_record() {
    let (mut bytes, at) = trace(3);
    // The binary frame's layout byte, after the head (5), the count and 3 times (7 bytes).
    bytes[at + 5 + 7] = 0xee;
    let (evs, err, _) = read_all(&bytes);
    assert_eq!(evs.len(), 2);
    let err = err.expect("an error");
    assert_eq!(err.offset, at as u64);
    assert!(
        matches!(
            err.problem,
            TraceProblem::Binary(DecodeError::UnknownLayout { found: 0xee })
        ),
        "{err}"
    );
    assert!(err.to_string().contains("unknown layout"), "{err}");
    // A record length pointing past any sane frame.
    let (mut bytes, at) = trace(3);
    bytes[at + 4] = 0xff;
    let (_, err, _) = read_all(&bytes);
    let err = err.expect("an error");
    assert!(matches!(err.problem, TraceProblem::TooLong { .. }), "{err}");
    assert!(err.to_string().contains("exceeds the limit"), "{err}");
    // An unknown record form.
    let (mut bytes, at) = trace(3);
    bytes[at] = 7;
    let (_, err, _) = read_all(&bytes);
    let err = err.expect("an error");
    assert!(matches!(err.problem, TraceProblem::UnknownForm(7)), "{err}");
    assert!(err.to_string().contains("unknown record form 7"), "{err}");
}

#[test]
fn no_flipped_byte_panics() {
    let (bytes, _) = trace(4);
    for i in 0..bytes.len() {
        for flip in [0x01, 0x80, 0xff] {
            let mut b = bytes.clone();
            b[i] ^= flip;
            // Whatever it yields: an error, a warning or events, but it returns.
            let _ = read_all(&b);
        }
    }
}

/// A trace written under protocol 1 still reads: its packed frames are this protocol's.
/// An MPI rank's binary event frame of protocol 1 (layout 2) is refused, by layout.
#[test]
fn a_protocol_1_trace_reads_but_for_its_old_mpi_frames() {
    let (mut bytes, _) = trace(2);
    bytes[12..16].copy_from_slice(&1u32.to_le_bytes());
    let (evs, err, _) = read_all(&bytes);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(evs.len(), 4);
    // A layout-2 frame (byte 2, one event) after the packed one.
    let mut w = TraceWriter::default();
    w.write_frame(&mut bytes, true, &[2, 1, 0, 0, 0, 2, 0], &[9_000])
        .unwrap();
    let (evs, err, _) = read_all(&bytes);
    assert_eq!(evs.len(), 4, "the events before it");
    let err = err.expect("the old frame refused").to_string();
    assert!(err.contains("unknown layout 2"), "{err}");
    assert!(err.contains("MPI event frame of protocol 1"), "{err}");
    // Protocol 2's traces read as they are (3 changed no event a trace holds); the next
    // protocol is from the future.
    bytes[12..16].copy_from_slice(&2u32.to_le_bytes());
    assert!(TraceReader::new(&bytes[..]).is_ok());
    let next = PROTOCOL_VERSION + 1;
    bytes[12..16].copy_from_slice(&next.to_le_bytes());
    let e = TraceReader::new(&bytes[..]).err().expect("refused");
    assert!(
        e.to_string().contains(&format!("written with protocol {next}")),
        "{e}"
    );
}
