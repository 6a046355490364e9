use super::*;

fn sample() -> Vec<u8> {
    let mut b = header_bytes(&LogHeader {
        program: "heat".into(),
        args: vec!["--iters".into(), "3".into()],
        mpi: None,
    });
    let mut runs = Vec::new();
    put_run(&mut runs, Run { sender: 0, count: 3 });
    put_run(
        &mut runs,
        Run {
            sender: 2,
            count: 300,
        },
    );
    let two = runs.len();
    put_run(&mut runs, Run { sender: 3, count: 1 });
    assert_eq!(
        runs.len(),
        two + 1,
        "a run of one step from a small sender is one byte"
    );
    put_runs_record(&mut b, 1, 3, &runs);
    runs.clear();
    put_run(&mut runs, Run { sender: 1, count: 1 });
    put_runs_record(&mut b, 1, 1, &runs);
    b.extend(edit_record(&Edit {
        thread: 1,
        step: 4,
        what: EditKind::Send {
            msg: "0.1".into(),
            op: "Update".into(),
            content: serde_json::json!({"x": 1}),
        },
    }));
    b.extend(end_record(&LogEnd {
        threads: vec![
            LogThread {
                name: "main[0]".into(),
                steps: 0,
            },
            LogThread {
                name: "proc[0]".into(),
                steps: 305,
            },
        ],
        ops: vec!["Split".into()],
        prefix: false,
    }));
    b
}

#[test]
fn reads_back_what_was_written() {
    let log = ReplayLog::parse(&sample()).expect("a valid log");
    assert_eq!(log.header.program, "heat");
    assert_eq!(log.header.args, ["--iters", "3"]);
    assert_eq!(log.threads.len(), 2);
    assert!(log.threads[0].is_empty());
    assert_eq!(
        log.threads[1],
        [
            Run { sender: 0, count: 3 },
            Run {
                sender: 2,
                count: 300
            },
            Run { sender: 3, count: 1 },
            Run { sender: 1, count: 1 }
        ]
    );
    assert_eq!(log.steps(), 305);
    assert_eq!(log.runs(), 4);
    assert_eq!(log.edits.len(), 1);
    assert_eq!(log.edits[0].step, 4);
    assert!(matches!(&log.edits[0].what, EditKind::Send { msg, .. } if msg == "0.1"));
    assert!(log.complete());
    let end = log.end.expect("complete");
    assert_eq!(end.threads[1].name, "proc[0]");
    assert_eq!(end.threads[1].steps, 305);
}

fn mpi_sample() -> (Vec<u8>, Vec<Choice>) {
    let mut b = header_bytes(&LogHeader {
        program: "master_worker".into(),
        args: vec![],
        mpi: Some(MpiJob {
            ranks: 2,
            implementation: "mpich".into(),
        }),
    });
    let choices = vec![
        Choice {
            call: 3,
            op: 12,
            what: Chose::Match { source: 2, tag: 7 },
        },
        Choice {
            call: 4,
            op: 19,
            what: Chose::Miss { n: 1000 },
        },
        Choice {
            call: 1004,
            op: 19,
            what: Chose::Index(3),
        },
        Choice {
            call: 2000,
            op: 22,
            what: Chose::Indices(vec![0, 5, 1]),
        },
    ];
    let next = put_calls_record(&mut b, 1, 0, &choices[..2]);
    assert_eq!(next, 1004);
    let before = b.len();
    put_calls_record(&mut b, 1, next, &choices[2..3]);
    assert_eq!(
        b.len() - before,
        6,
        "tag, rank, count, and 3 bytes for the choice"
    );
    put_calls_record(&mut b, 1, 1005, &choices[3..]);
    let clocks = [1.764e9_f64, 1.764e9 + 0.001, 1.764e9 - 2.5].map(f64::to_bits);
    let last = put_clocks_record(&mut b, 0, 0, &clocks[..2]);
    let before = b.len();
    put_clocks_record(&mut b, 0, last, &clocks[2..]);
    assert!(
        b.len() - before <= 7,
        "a reading 2.5 s back costs 4 bytes or less"
    );
    b.extend(rank_end_record(1, 2100));
    b.extend(rank_end_record(0, 10));
    (b, choices)
}

#[test]
fn mpi_choices_read_back() {
    let (b, choices) = mpi_sample();
    let log = ReplayLog::parse(&b).expect("a valid log");
    assert_eq!(log.header.mpi.as_ref().map(|m| m.ranks), Some(2));
    assert_eq!(log.ranks.len(), 2);
    assert_eq!(log.ranks[1].choices, choices);
    assert_eq!(log.ranks[1].calls, Some(2100));
    assert_eq!(log.ranks[0].calls, Some(10));
    assert!(log.ranks[0].choices.is_empty());
    assert_eq!(
        log.ranks[0]
            .clocks
            .iter()
            .map(|&c| f64::from_bits(c))
            .collect::<Vec<_>>(),
        [1.764e9, 1.764e9 + 0.001, 1.764e9 - 2.5],
        "readings come back exactly"
    );
    assert!(log.ranks[1].clocks.is_empty());
    assert_eq!(log.choices(), 4);
    for n in 0..b.len() {
        let _ = ReplayLog::parse(&b[..n]);
        let mut c = b.clone();
        c[n] ^= 0xff;
        let _ = ReplayLog::parse(&c);
    }
    // An end that says fewer calls than the choices cover.
    let mut c = b.clone();
    c.extend(rank_end_record(1, 5));
    let e = ReplayLog::parse(&c).expect_err("too few calls");
    assert!(e.what.contains("fewer than its choices cover"), "{e}");
}

#[test]
fn a_log_without_its_end_is_a_prefix() {
    let b = sample();
    let cut = b.len() - end_record(&ReplayLog::parse(&b).expect("valid").end.expect("an end")).len();
    let log = ReplayLog::parse(&b[..cut]).expect("a prefix is valid");
    assert!(log.end.is_none());
    assert_eq!(log.steps(), 305);
}

#[test]
fn damage_is_an_error_naming_its_byte_never_a_panic() {
    let b = sample();
    // Every truncation, and every byte flipped, reads as a log or an error.
    for n in 0..b.len() {
        let _ = ReplayLog::parse(&b[..n]);
        let mut c = b.clone();
        c[n] ^= 0xff;
        let _ = ReplayLog::parse(&c);
    }
    let e = ReplayLog::parse(b"hello world, not a log").expect_err("not a log");
    assert_eq!(e.offset, 0);
    assert!(e.to_string().contains("not a replay log"), "{e}");
    let mut c = b.clone();
    c.push(9);
    let e = ReplayLog::parse(&c).expect_err("trailing bytes");
    assert_eq!(e.offset, b.len() as u64);
    let mut c = b.clone();
    c[8] = 7;
    assert!(ReplayLog::parse(&c)
        .expect_err("format")
        .what
        .contains("format 7"));
    // A run cut short.
    let mut c = header_bytes(&LogHeader::default());
    let at = c.len();
    c.extend([TAG_RUNS, 0, 1, 1]);
    let e = ReplayLog::parse(&c).expect_err("cut run");
    assert_eq!(e.offset, at as u64 + 4);
    assert!(e.what.contains("run length: the file ends inside it"), "{e}");
}

#[test]
fn a_log_that_cannot_be_read_names_its_path() {
    let dir = std::env::temp_dir().join(format!("racetrack-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let missing = dir.join("missing.rtrec");
    let e = ReplayLog::read(&missing).expect_err("no file");
    assert!(
        matches!(&e, ReadLogError::Io { path, .. } if *path == missing),
        "{e}"
    );
    assert!(e.to_string().starts_with("cannot read "), "{e}");
    let damaged = dir.join("damaged.rtrec");
    std::fs::write(&damaged, b"hello world, not a log").expect("written");
    let e = ReplayLog::read(&damaged).expect_err("not a log");
    assert!(
        matches!(&e, ReadLogError::Damaged { source, .. } if source.offset == 0),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hex_round_trips_and_refuses_what_is_not_hex() {
    let bytes: Vec<u8> = (0..=255).collect();
    let text = to_hex(&bytes);
    assert_eq!(&text[..8], "00010203");
    assert_eq!(from_hex(&text), Some(bytes));
    assert_eq!(from_hex("0g"), None);
    assert_eq!(from_hex("abc"), None);
    assert_eq!(from_hex(""), Some(Vec::new()));
}
