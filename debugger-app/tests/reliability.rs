//! The debugger never harms the program it debugs: a controller killed at any moment, bad
//! frames, operation panics, random command sequences, a chaos soak, and the security
//! checks of the agent's socket. Real processes, real sockets.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::type_complexity)]

mod support;

use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};
use support::{attached_and_held, cont, is_held, Program, Session};
use tokio_tungstenite::tungstenite;

fn wait_for_held(s: &mut Session) -> Value {
    s.expect("a held event", is_held)
}

#[test]
fn killing_the_controller_at_a_hold_lets_the_program_finish() {
    // Breakpoint, global step, and a held send with an edit in progress.
    type Setup = fn(&mut Session);
    let setups: [(&str, Setup); 3] = [
        ("breakpoint", |s| {
            s.send(json!({"cmd":"break","op":"Sort","on":true}));
            s.send(cont());
            s.expect("a breakpoint hit", |v| is_held(v) && v["op"] == "Sort");
        }),
        ("step mode", |s| {
            s.send(json!({"cmd":"step_mode","on":true}));
            s.send(cont());
            s.expect("a step hold", |v| is_held(v) && v["reason"] == "step");
        }),
        ("mid-edit", |s| {
            s.send(json!({"cmd":"pause","thread":"main[0]","on":true}));
            s.send(cont());
            let h = s.expect("a held send", |v| is_held(v) && v["event"] == "send");
            let mut content = h["content"].clone();
            content["target"] = json!(2);
            s.send(json!({"cmd":"edit","event_id":h["event_id"],"content":content}));
            s.expect("the edit", |v| v["event"] == "ok");
        }),
    ];
    for (name, setup) in setups {
        let prog = Program::start(
            "mergesort",
            &["--threads", "8", "--size", "20000", "--chunks", "16"],
            &[("RACETRACK_WAIT", "1")],
        );
        let mut s = Session::ctl(&prog.url);
        s.expect("snapshot", |v| v["event"] == "snapshot");
        s.send(json!({"cmd":"wait","until":"held"}));
        s.expect("the start hold", |v| v["event"] == "waited");
        setup(&mut s);
        s.child.kill().unwrap(); // SIGKILL: no detach, the socket just dies
        let (secs, report) = prog.finish(Duration::from_secs(10));
        println!("{name}: the program finished {secs:.3} s after the controller was killed");
        assert!(secs < 2.0, "{name}: took {secs} s to resume");
        assert_eq!(report["matches_reference"], true, "{name}: {report}");
    }
}

#[test]
fn a_new_controller_attaches_mid_run_and_controls_it() {
    let prog = Program::start(
        "farm",
        &["--threads", "2", "--tasks", "10000", "--work-us", "300"],
        &[("RACETRACK_WAIT", "1")],
    );
    let mut first = Session::ctl(&prog.url);
    first.expect("snapshot", |v| v["event"] == "snapshot");
    first.send(json!({"cmd":"wait","until":"held"}));
    first.expect("waited", |v| v["event"] == "waited");
    first.send(cont());
    first.expect("a few steps", |v| v["event"] == "stop" && v["op"] == "Work");
    first.child.kill().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut second = Session::ctl(&prog.url);
    let snap = second.expect("snapshot", |v| v["event"] == "snapshot");
    assert!(snap["threads"].as_array().unwrap().len() == 3, "{snap}");
    second.send(json!({"cmd":"break","op":"Work","thread":"proc[1]","on":true}));
    let h = wait_for_held(&mut second);
    assert_eq!(
        (h["op"].as_str(), h["thread"].as_str()),
        (Some("Work"), Some("proc[1]"))
    );
    assert!(h["event_id"].as_u64().unwrap() >= snap["next_event_id"].as_u64().unwrap());
    second.send(json!({"cmd":"detach"}));
    let (_, report) = prog.finish(Duration::from_secs(30));
    assert_eq!(report["matches_reference"], true);
}

#[test]
fn a_frame_above_the_limit_closes_that_connection_not_the_program() {
    let prog = Program::start(
        "farm",
        &["--threads", "2", "--tasks", "6000", "--work-us", "500"],
        &[("RACETRACK_WAIT", "1")],
    );
    let (mut ws, _) = tungstenite::connect(prog.url.as_str()).unwrap();
    let huge = format!(
        "{{\"cmd\":\"queue\",\"thread\":\"{}\"}}",
        "x".repeat(17 * 1024 * 1024)
    );
    let _ = ws.send(tungstenite::Message::Text(huge.into()));
    // The agent drops this connection (and, as for any vanished debugger, releases the
    // start hold: the program runs free)...
    let closed = (0..10_000).any(|_| matches!(ws.read(), Err(_) | Ok(tungstenite::Message::Close(_))));
    assert!(closed, "the oversized frame must close the connection");
    drop(ws);
    // ...another debugger can attach to the running program...
    let mut s = Session::ctl(&prog.url);
    let snap = s.expect("snapshot", |v| v["event"] == "snapshot");
    assert!(snap["held"].as_array().unwrap().is_empty(), "{snap}");
    s.send(json!({"cmd":"detach"}));
    // ...and the program completes correctly.
    let (_, report) = prog.finish(Duration::from_secs(30));
    assert_eq!(report["matches_reference"], true);
}

#[test]
fn an_operation_panic_is_reported_and_nothing_hangs() {
    let mut s = Session::run("farm", &["--threads", "4", "--tasks", "20", "--panic-at", "7"]);
    support::attached_and_held(&mut s);
    s.send(cont());
    let p = s.expect("the panic event", |v| v["event"] == "panic");
    assert_eq!(
        (p["op"].as_str(), p["msg"].as_str()),
        (Some("Work"), Some("0.7")),
        "{p}"
    );
    assert!(p["thread"].as_str().unwrap().starts_with("proc["));
    assert!(
        p["message"]
            .as_str()
            .unwrap()
            .contains("task 7 failed on purpose"),
        "{p}"
    );
    let exit = s.expect("exit", |v| v["event"] == "exit");
    assert_eq!(
        exit["code"], 1,
        "the schedule call returned the error and the program said so"
    );
    let said = s.all("output");
    assert!(said.iter().any(|o| o["line"]
        .as_str()
        .unwrap()
        .contains("operation `Work` panicked on thread")));
}

/// A small deterministic generator (the seed is printed on failure).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[(self.next() % v.len() as u64) as usize]
    }
}

/// A random command, valid or not, for farm / mergesort.
fn random_command(r: &mut Rng, ops: &[&str], threads: &[&str], last_event: u64) -> Value {
    let op = *r.pick(ops);
    let thread = *r.pick(threads);
    let on = r.next() % 2 == 0;
    let id = if r.next() % 3 == 0 {
        r.next() % 100_000
    } else {
        last_event.saturating_sub(r.next() % 5)
    };
    match r.next() % 14 {
        0..=2 => json!({"cmd":"continue"}),
        3 => json!({"cmd":"continue","thread":thread}),
        4 => json!({"cmd":"continue","event_id":id,"trace":on}),
        5 => json!({"cmd":"step_mode","on":on}),
        6 => json!({"cmd":"break","op":op,"thread":thread,"on":on,"trace":r.next() % 2 == 0}),
        7 => json!({"cmd":"pause","thread":thread,"on":on}),
        8 => json!({"cmd":"queue","thread":thread,"content":on}),
        9 => json!({"cmd":"reorder","thread":thread,"order":["0.1","0.0","0.3"]}),
        10 => {
            json!({"cmd":"edit","event_id":id,"content":{"target":r.next() % 9,"index":0,"data":[],"jitter_us":0}})
        }
        11 => json!({"cmd":"state","thread":thread}),
        12 => json!({"cmd":"set_state","thread":thread,"content":{"bogus":true}}),
        _ => json!({"cmd":"ack_all","on":false}),
    }
}

#[test]
fn random_command_sequences_never_break_the_program() {
    let cases: [(&str, &[&str], &[&str], &[&str]); 2] = [
        (
            "farm",
            &["--threads", "4", "--tasks", "300"],
            &["Split", "Work", "Sum", "Nope"],
            &["main[0]", "proc[0]", "proc[1]", "proc[3]", "proc[9]"],
        ),
        (
            "mergesort",
            &["--threads", "4", "--size", "2000", "--chunks", "12"],
            &["Split", "Sort", "Merge"],
            &["main[0]", "proc[0]", "proc[2]", "proc[3]"],
        ),
    ];
    let mut iterations = 0;
    for seed in 1..=4u64 {
        for (prog, args, ops, threads) in cases {
            let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let mut s = Session::run(prog, args);
            support::attached_and_held(&mut s);
            let mut last_event = 0;
            for _ in 0..40 {
                let cmd = random_command(&mut r, ops, threads, last_event);
                s.send(cmd);
                std::thread::sleep(Duration::from_millis(r.next() % 4));
                if let Some(id) = s.seen.iter().rev().find_map(|v| v["event_id"].as_u64()) {
                    last_event = id;
                }
                iterations += 1;
            }
            s.close(); // detach: whatever was held is released
            let (code, report) = s.finish();
            assert_eq!(code, Some(0), "{prog} seed {seed}");
            // An accepted edit may change where a chunk is sorted, never the result.
            assert_eq!(report["matches_reference"], true, "{prog} seed {seed}: {report}");
        }
    }
    println!("{iterations} random commands against live programs");
}

#[test]
fn chaos_soak_with_detach_and_reattach() {
    for (prog_name, args) in [
        (
            "farm",
            &[
                "--threads",
                "8",
                "--tasks",
                "2000",
                "--iters",
                "50",
                "--work-us",
                "100",
            ][..],
        ),
        (
            "mergesort",
            &[
                "--threads",
                "8",
                "--size",
                "400000",
                "--chunks",
                "1000",
                "--jitter-us",
                "10000",
            ][..],
        ),
    ] {
        let prog = Program::start(prog_name, args, &[("RACETRACK_WAIT", "1")]);
        let mut r = Rng(0xDEAD_BEEF);
        let mut events = 0usize;
        let mut peak_kib = 0;
        let mut rounds = 0;
        let threads: Vec<String> = (0..8)
            .map(|i| format!("proc[{i}]"))
            .chain(["main[0]".to_owned()])
            .collect();
        let threads: Vec<&str> = threads.iter().map(String::as_str).collect();
        let ops: &[&str] = if prog_name == "farm" {
            &["Split", "Work", "Sum"]
        } else {
            &["Split", "Sort", "Merge"]
        };
        let t0 = Instant::now();
        while prog_alive(&prog) && t0.elapsed() < Duration::from_secs(60) {
            let mut s = Session::ctl(&prog.url);
            // The program may finish between the check above and this attach.
            if s.try_expect(Duration::from_secs(10), |v| v["event"] == "snapshot")
                .is_none()
            {
                break;
            }
            for _ in 0..30 {
                let cmd = random_command(&mut r, ops, &threads, 0);
                s.send(cmd);
                s.send(cont());
                std::thread::sleep(Duration::from_millis(5));
            }
            peak_kib = peak_kib.max(prog.rss_kib().unwrap_or(0));
            // End the round by detaching politely or by killing the controller.
            if r.next() % 2 == 0 {
                s.send(json!({"cmd":"detach"}));
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = s.child.kill();
            let _ = s.child.wait();
            // Count what this controller received.
            s.drain(Duration::from_secs(5));
            events += s.seen.iter().filter(|v| v.get("event_id").is_some()).count();
            rounds += 1;
        }
        let (_, report) = prog.finish(Duration::from_secs(60));
        println!(
            "{prog_name}: {rounds} attach rounds, {events} events received, agent peak RSS {peak_kib} KiB"
        );
        assert_eq!(report["matches_reference"], true, "{prog_name}: {report}");
        assert!(rounds >= 2, "the soak must attach more than once");
        assert!(
            peak_kib < 512 * 1024,
            "agent memory stays bounded: {peak_kib} KiB"
        );
    }
}

fn prog_alive(p: &Program) -> bool {
    std::path::Path::new(&format!("/proc/{}", p.child.id())).exists()
        && !std::fs::read_to_string(format!("/proc/{}/status", p.child.id()))
            .unwrap_or_default()
            .contains("State:\tZ")
}

/// A snapshot is one frame: attaching to a program with hundreds of thousands of pending
/// messages used to exceed the frame limit and lose the connection. The first messages are
/// listed, the rest counted, and the connection keeps working.
#[test]
fn attaching_to_a_huge_queue_lists_the_first_messages_and_counts_the_rest() {
    // farm's split posts all its tasks at once: far more pending messages than a frame holds.
    let prog = Program::start(
        "farm",
        &["--threads", "2", "--tasks", "150000", "--work-us", "50"],
        &[],
    );
    let t0 = Instant::now();
    let (snapshot, mut s) = loop {
        std::thread::sleep(Duration::from_millis(300));
        let mut s = Session::ctl(&prog.url);
        let snap = s.expect("snapshot", |v| v["event"] == "snapshot");
        let more: u64 = snap["threads"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["more"].as_u64())
            .sum();
        if more > 0 {
            break (snap, s);
        }
        // Attached before the queues grew long: try again.
        s.send(json!({"cmd":"detach"}));
        let _ = s.child.kill();
        let _ = s.child.wait();
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the queues never grew long"
        );
    };
    let threads = snapshot["threads"].as_array().unwrap();
    let listed: usize = threads.iter().map(|t| t["queue"].as_array().unwrap().len()).sum();
    assert!(listed <= 40_000, "{listed} messages listed");
    assert!(snapshot.to_string().len() < 16 * 1024 * 1024);
    // The connection is alive and answers; a queue reply is capped the same way.
    s.send(json!({"cmd":"queue","thread":"proc[0]"}));
    let q = s.expect("queue reply", |v| v["event"] == "queue");
    let n = q["messages"].as_array().unwrap().len();
    assert!(n <= 5_000, "{n} messages in a queue reply");
    assert!(q["more"].as_u64().unwrap_or(0) > 0 || n < 5_000, "{}", q["more"]);
    s.send(json!({"cmd":"detach"}));
}

// ---- security ----

fn handshake(url: &str, headers: &[(&str, &str)]) -> Result<(), String> {
    // The previous test client's close may not have been processed yet: the slot frees
    // up within milliseconds.
    for _ in 0..100 {
        match handshake_once(url, headers) {
            Err(e) if e.contains("already attached") => std::thread::sleep(Duration::from_millis(20)),
            other => return other,
        }
    }
    Err("the controller slot never freed up".into())
}

fn handshake_once(url: &str, headers: &[(&str, &str)]) -> Result<(), String> {
    use tungstenite::client::IntoClientRequest;
    let mut req = url.into_client_request().unwrap();
    for (k, v) in headers {
        req.headers_mut().insert(
            tungstenite::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    match tungstenite::connect(req) {
        Ok((mut ws, _)) => {
            let first = ws.read().map_err(|e| e.to_string())?;
            let v: Value = serde_json::from_str(first.to_text().unwrap()).unwrap();
            if v["event"] == "hello" {
                Ok(())
            } else {
                Err(v.to_string())
            }
        }
        Err(e) => Err(e.to_string()),
    }
}

#[test]
fn non_loopback_listening_needs_a_token() {
    let out = Command::new(support::example_bin("farm"))
        .args(["--tasks", "50"])
        .env("RACETRACK_LISTEN", "0.0.0.0:0")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not a loopback address") && err.contains("RACETRACK_TOKEN"),
        "{err}"
    );
    assert!(!err.contains("listening on"), "{err}");
    assert!(out.status.success(), "the program runs without the agent");
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"matches_reference\":true"));
}

/// Long enough to outlive the checks: an accepted client detaches when it is dropped, which
/// releases the start hold and lets the program run.
const LONG: [&str; 6] = ["--threads", "2", "--tasks", "1000", "--work-us", "5000"];

#[test]
fn tokens_origins_and_hosts_are_checked() {
    let prog = Program::start(
        "farm",
        &LONG,
        &[("RACETRACK_WAIT", "1"), ("RACETRACK_TOKEN", "s3cret")],
    );
    let e = handshake(&prog.url, &[]).unwrap_err();
    assert!(e.contains("403"), "no token: {e}");
    let e = handshake(&format!("{}/?token=wrong", prog.url), &[]).unwrap_err();
    assert!(e.contains("403"), "wrong token: {e}");
    handshake(&format!("{}/?token=s3cret", prog.url), &[]).expect("the token in the URL");
    handshake(&prog.url, &[("authorization", "Bearer s3cret")]).expect("the token in a header");
    drop(prog);

    let prog = Program::start(
        "farm",
        &LONG,
        &[
            ("RACETRACK_WAIT", "1"),
            ("RACETRACK_ALLOW_ORIGIN", "http://ok.example"),
        ],
    );
    let e = handshake(&prog.url, &[("origin", "http://evil.example")]).unwrap_err();
    assert!(e.contains("403"), "a browser origin: {e}");
    let e = handshake(&prog.url, &[("host", "evil.example:80")]).unwrap_err();
    assert!(e.contains("403"), "DNS rebinding host: {e}");
    handshake(&prog.url, &[("origin", "http://ok.example")]).expect("an allowed origin");
    handshake(&prog.url, &[]).expect("a plain loopback client");
}

/// A runtime program that dies in a step — a panic, `abort()`, `exit` — still delivers
/// every event it reported before: the `recv` of the message that killed it and the
/// `start` of the step. Events leave in 10 ms batches; the flush on death (and, for a
/// panic, the runtime's own end) sends the last batch first. 20 runs of each.
#[test]
fn a_program_that_dies_in_a_step_delivers_its_last_events() {
    const RUNS: usize = 20;
    let mut tally = Vec::new();
    for (flag, end) in [
        ("--panic-at", ("code", 1)),
        ("--abort-at", ("signal", 6)),
        ("--exit-at", ("code", 3)),
    ] {
        let mut delivered = 0;
        for _ in 0..RUNS {
            let mut s = Session::run("farm", &["--threads", "3", "--tasks", "40", flag, "17"]);
            attached_and_held(&mut s);
            s.send(cont());
            s.finish();
            let exit = s.all("exit").remove(0);
            assert_eq!(exit[end.0], end.1, "{flag}: {exit}");
            let step = |event: &str| {
                s.seen
                    .iter()
                    .any(|v| v["event"] == event && v["op"] == "Work" && v["msg"] == "0.17")
            };
            if step("recv") && step("start") {
                delivered += 1;
            }
        }
        tally.push((flag, delivered));
    }
    println!("the dying step's recv and start reached the debugger in {tally:?} of {RUNS}");
    assert!(
        tally.iter().all(|&(_, d)| d == RUNS),
        "the dying step's recv and start reached the debugger in {tally:?} of {RUNS}"
    );
}
