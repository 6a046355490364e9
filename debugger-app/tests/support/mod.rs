//! Test harness: real `racetrack` and example processes talking over real sockets.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The JSON lines a controller prints on `stdout`, parsed, read on a thread of their own
/// (a test waits on the receiver with a deadline).
pub fn json_lines(stdout: std::process::ChildStdout) -> mpsc::Receiver<Value> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            match serde_json::from_str::<Value>(&line) {
                Ok(v) => {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
                // Only a controller killed mid-line prints a partial line: it is the last.
                Err(e) => {
                    eprintln!("ctl printed a non-JSON line ({e}): {line}");
                    break;
                }
            }
        }
    });
    rx
}

/// Path of an example binary, built on demand (they live in another package).
pub fn example_bin(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_BIN_EXE_racetrack"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = dir.join(name);
    static BUILD: std::sync::Once = std::sync::Once::new();
    BUILD.call_once(|| {
        let profile_release = dir.ends_with("release");
        let mut c = Command::new(env!("CARGO"));
        c.args(["build", "-q", "-p", "racetrack-examples", "--bins"]);
        if profile_release {
            c.arg("--release");
        }
        let st = c.status().expect("cargo runs");
        assert!(st.success(), "building the examples failed");
    });
    assert!(path.exists(), "{} missing", path.display());
    path
}

/// A `racetrack` controller process and the events it printed.
pub struct Session {
    pub child: Child,
    stdin: Option<ChildStdin>,
    rx: mpsc::Receiver<Value>,
    /// Every event read so far, in order.
    pub seen: Vec<Value>,
    /// Index in `seen` of the next event `next` returns.
    cursor: usize,
}

impl Session {
    /// `racetrack run --ctl -- EXAMPLE ARGS`.
    pub fn run(example: &str, args: &[&str]) -> Self {
        let prog = example_bin(example);
        let mut a = vec![
            "run".to_owned(),
            "--ctl".into(),
            "--".into(),
            prog.display().to_string(),
        ];
        a.extend(args.iter().map(|s| (*s).to_owned()));
        Self::spawn(&a)
    }

    /// `racetrack replay LOG --ctl -- EXAMPLE ARGS`.
    pub fn replay(log: &std::path::Path, example: &str, args: &[&str]) -> Self {
        let mut a = vec![
            "replay".to_owned(),
            log.display().to_string(),
            "--ctl".into(),
            "--".into(),
            example_bin(example).display().to_string(),
        ];
        a.extend(args.iter().map(|s| (*s).to_owned()));
        Self::spawn(&a)
    }

    /// `racetrack ctl URL`.
    pub fn ctl(url: &str) -> Self {
        Self::spawn(&["ctl".to_owned(), url.to_owned()])
    }

    fn spawn(args: &[String]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_racetrack"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("racetrack starts");
        let rx = json_lines(child.stdout.take().unwrap());
        let stdin = child.stdin.take();
        Self {
            child,
            stdin,
            rx,
            seen: Vec::new(),
            cursor: 0,
        }
    }

    pub fn send(&mut self, cmd: Value) {
        // The controller may already have ended with the program: then nothing to send.
        let stdin = self.stdin.as_mut().expect("stdin open");
        let _ = writeln!(stdin, "{cmd}").and_then(|()| stdin.flush());
    }

    /// Send a line as is (for malformed input).
    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        let _ = writeln!(stdin, "{line}").and_then(|()| stdin.flush());
    }

    /// Close stdin (the controller then detaches).
    pub fn close(&mut self) {
        self.stdin = None;
    }

    fn pull(&mut self, deadline: Instant) -> bool {
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        match self.rx.recv_timeout(deadline - now) {
            Ok(v) => {
                self.seen.push(v);
                true
            }
            Err(_) => false,
        }
    }

    /// The next event (in order) satisfying `pred`; events before it are skipped (but kept
    /// in `seen`).
    pub fn expect(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            while self.cursor < self.seen.len() {
                let v = &self.seen[self.cursor];
                self.cursor += 1;
                if pred(v) {
                    return v.clone();
                }
            }
            if !self.pull(deadline) {
                panic!("timed out waiting for {what}; last events:\n{}", self.tail(15));
            }
        }
    }

    /// The next event satisfying `pred`, or `None` if the controller's output ends first
    /// (for controllers that may legitimately fail to attach, e.g. to a finished program).
    pub fn try_expect(&mut self, limit: Duration, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        let deadline = Instant::now() + limit;
        loop {
            while self.cursor < self.seen.len() {
                let v = &self.seen[self.cursor];
                self.cursor += 1;
                if pred(v) {
                    return Some(v.clone());
                }
            }
            if !self.pull(deadline) {
                return None;
            }
        }
    }

    /// Read everything still coming until the controller's output ends (or `limit`).
    pub fn drain(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.pull(deadline) {}
    }

    /// Like `expect`, but `None` if the program exits first.
    pub fn next_or_exit(&mut self, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        let v = self.expect("an event or exit", |v| pred(v) || v["event"] == "exit");
        (v["event"] != "exit").then_some(v)
    }

    pub fn tail(&self, n: usize) -> String {
        self.seen
            .iter()
            .rev()
            .take(n)
            .rev()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Wait for the `exit` event; returns (code, the program's final JSON line).
    pub fn finish(&mut self) -> (Option<i64>, Value) {
        let exit = match self.seen.iter().find(|v| v["event"] == "exit") {
            Some(e) => e.clone(),
            None => self.expect("exit", |v| v["event"] == "exit"),
        };
        let _ = self.child.wait();
        let last = self
            .seen
            .iter()
            .rev()
            .find(|v| v["event"] == "output" && v["stream"] == "stdout")
            .map(|v| serde_json::from_str(v["line"].as_str().unwrap()).unwrap())
            .unwrap_or(Value::Null);
        (exit["code"].as_i64(), last)
    }

    /// Wait for the end and check the program exited 0 with a result matching its reference.
    pub fn finish_correctly(&mut self) {
        let (code, last) = self.finish();
        assert_eq!(
            (code, &last["matches_reference"]),
            (Some(0), &json!(true)),
            "{last}"
        );
    }

    /// Events of a kind seen so far.
    pub fn all(&self, event: &str) -> Vec<Value> {
        self.seen
            .iter()
            .filter(|v| v["event"] == event)
            .cloned()
            .collect()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Wait for the snapshot and for the `RACETRACK_WAIT` hold of the first operation (it
/// may come in the snapshot or just after it).
pub fn attached_and_held(s: &mut Session) -> Value {
    let snap = s.expect("snapshot", |v| v["event"] == "snapshot");
    s.send(serde_json::json!({"cmd":"wait","until":"held"}));
    s.expect("waited", |v| v["event"] == "waited");
    snap
}

pub fn cont() -> Value {
    json!({"cmd":"continue"})
}

pub fn is_held(v: &Value) -> bool {
    v["held"] == true
}

/// A program started with the agent; its stderr is read for the URL, its stdout kept.
pub struct Program {
    pub child: Child,
    pub url: String,
}

impl Program {
    pub fn start(example: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut cmd = Command::new(example_bin(example));
        cmd.args(args)
            .env("RACETRACK_LISTEN", "127.0.0.1:0")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let mut lines = std::io::BufReader::new(stderr).lines();
        let url = loop {
            let line = lines.next().expect("listening line").unwrap();
            if let Some(u) = line.strip_prefix("racetrack: listening on ") {
                break u.to_owned();
            }
        };
        std::thread::spawn(move || lines.for_each(drop));
        Self { child, url }
    }

    /// Wait for the program; returns (seconds waited, its final report).
    pub fn finish(mut self, limit: Duration) -> (f64, Value) {
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                assert!(st.success(), "program failed: {st}");
                break;
            }
            assert!(
                t0.elapsed() < limit,
                "the program did not finish within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let waited = t0.elapsed().as_secs_f64();
        let mut out = String::new();
        std::io::Read::read_to_string(self.child.stdout.as_mut().unwrap(), &mut out).unwrap();
        let last = out.lines().last().expect("a report");
        (waited, serde_json::from_str(last).unwrap())
    }

    pub fn rss_kib(&self) -> Option<u64> {
        racetrack::launch::rss_kib(self.child.id())
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
