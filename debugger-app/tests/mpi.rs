//! MPI jobs under the debugger, over real `mpiexec` runs on both implementations Debian
//! ships: `racetrack mpirun --ctl` (and `racetrack listen`) drive the
//! example programs of `examples/mpi/`, built here with each implementation's compiler
//! wrappers, with the interposition library preloaded into every rank.
//!
//! Every scenario runs once per implementation: `free_run::mpich`, `free_run::openmpi`, …
//!
//! Needs:
//! - MPICH (`mpich`, `libmpich-dev`), Open MPI (`openmpi-bin`, `libopenmpi-dev`) and
//!   `gfortran`. Without them every test fails saying which packages are missing, unless
//!   `RACETRACK_NO_MPI=1` is set: then each test prints that it was left out and passes.
//! - The MPI library beside the `racetrack` binary (`libracetrack_mpi.so` and
//!   `libracetrack_mpi_<impl>.so`): `cargo build -p racetrack-mpi` (which `cargo test
//!   --workspace` does).
//!
//! Every wait has a deadline: a hung job fails its test, and the process group of
//! `racetrack` (the launcher and the ranks with it) is killed when a test ends.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long one job under the debugger may take, start to exit.
const JOB_LIMIT: Duration = Duration::from_secs(40);
/// The ranks of every job here.
const RANKS: usize = 4;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Impl {
    Mpich,
    OpenMpi,
}

impl Impl {
    fn key(self) -> &'static str {
        match self {
            Impl::Mpich => "mpich",
            Impl::OpenMpi => "openmpi",
        }
    }

    fn other(self) -> Impl {
        match self {
            Impl::Mpich => Impl::OpenMpi,
            Impl::OpenMpi => Impl::Mpich,
        }
    }

    /// The tools the tests use, and the Debian packages that bring them.
    fn tools(self) -> ([&'static str; 3], &'static str) {
        match self {
            Impl::Mpich => (
                ["mpicc.mpich", "mpif90.mpich", "mpiexec.mpich"],
                "mpich libmpich-dev gfortran",
            ),
            Impl::OpenMpi => (
                ["mpicc.openmpi", "mpifort.openmpi", "mpiexec.openmpi"],
                "openmpi-bin libopenmpi-dev gfortran",
            ),
        }
    }

    /// `mpiexec` with `n` ranks, the environment `env` given to the ranks only.
    fn mpiexec(self, n: usize, env: &[(&str, String)]) -> Command {
        let mut cmd;
        match self {
            Impl::Mpich => {
                cmd = Command::new("mpiexec.mpich");
                cmd.args(["-n", &n.to_string()]);
                for (k, v) in env {
                    cmd.arg("-genv").arg(k).arg(v);
                }
            }
            Impl::OpenMpi => {
                cmd = Command::new("mpiexec.openmpi");
                cmd.args(["--allow-run-as-root", "--oversubscribe", "-n", &n.to_string()]);
                for (k, v) in env {
                    cmd.arg("-x").arg(format!("{k}={v}"));
                }
            }
        }
        cmd
    }
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// The debugger's name for the implementation.
fn racetrack_impl(imp: Impl) -> racetrack::mpirun::Impl {
    match imp {
        Impl::Mpich => racetrack::mpirun::Impl::Mpich,
        Impl::OpenMpi => racetrack::mpirun::Impl::OpenMpi,
    }
}

/// Where `racetrack` and the MPI libraries are.
fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_racetrack"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The example programs built for `imp`, or `None` when MPI is absent and
/// `RACETRACK_NO_MPI=1` says to leave the tests out. Fails when MPI or the library is
/// missing otherwise.
fn setup(imp: Impl) -> Option<PathBuf> {
    let (tools, packages) = imp.tools();
    let missing: Vec<&str> = tools.into_iter().filter(|t| !on_path(t)).collect();
    if !missing.is_empty() {
        if std::env::var("RACETRACK_NO_MPI").is_ok_and(|v| v == "1") {
            println!(
                "left out: {} not installed (RACETRACK_NO_MPI=1)",
                missing.join(", ")
            );
            return None;
        }
        panic!(
            "{} not found: scripts/test.sh installs {packages} (or set RACETRACK_NO_MPI=1 to leave the MPI tests out)",
            missing.join(", ")
        );
    }
    // As `racetrack mpirun` finds them (the core may be in `deps/` after `cargo test`).
    if let Err(e) = racetrack::mpirun::libs(racetrack_impl(imp), &bin_dir()) {
        panic!("{e} (`cargo test --workspace` builds the MPI library)");
    }
    Some(examples(imp))
}

/// Build the example programs once per test run, per implementation.
fn examples(imp: Impl) -> PathBuf {
    static BUILT: [OnceLock<Result<PathBuf, String>>; 2] = [OnceLock::new(), OnceLock::new()];
    let slot = &BUILT[imp as usize];
    slot.get_or_init(|| build_examples(imp))
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn build_examples(imp: Impl) -> Result<PathBuf, String> {
    let dir = bin_dir().join("mpi-examples").join(imp.key());
    // Into a directory of this process's own, then moved into place file by file (a
    // rename replaces atomically): another test binary running at once never sees a
    // half-written program.
    let tmp = dir.join(format!("tmp-{}", std::process::id()));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/mpi/build.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(imp.key())
        .arg(&tmp)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "building the MPI examples for {} failed:\n{}",
            imp.key(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    for prog in [
        "ring",
        "mergesort",
        "heat",
        "master_worker",
        "dies",
        "receives",
        "deadlock",
        "sendrecv_any",
        "coverage",
        "threads",
        "ring_f",
    ] {
        std::fs::rename(tmp.join(prog), dir.join(prog)).map_err(|e| e.to_string())?;
    }
    let _ = std::fs::remove_dir_all(&tmp);
    Ok(dir)
}

/// Kill a process group (the process started with `process_group(0)` and what it started).
fn kill_group(pid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pid}")])
        .stderr(Stdio::null())
        .status();
}

/// A process in its own group, killed with its group when dropped.
struct Group(Child);

impl Group {
    fn spawn(cmd: &mut Command) -> Group {
        Group(cmd.process_group(0).spawn().expect("the process starts"))
    }

    /// Wait for the exit, at most until `deadline` (then kill the group and fail).
    fn wait_until(&mut self, deadline: Instant, what: &str) -> std::process::ExitStatus {
        loop {
            if let Some(st) = self.0.try_wait().unwrap() {
                return st;
            }
            if Instant::now() >= deadline {
                kill_group(self.0.id());
                panic!("{what} did not finish in time");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        kill_group(self.0.id());
        let _ = self.0.wait();
    }
}

/// The program's final line, run with plain `mpiexec`: (exit code, its JSON).
fn plain_run(imp: Impl, prog: &Path, args: &[&str]) -> (Option<i32>, Value) {
    let mut cmd = imp.mpiexec(RANKS, &[]);
    cmd.arg(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut g = Group::spawn(&mut cmd);
    let mut stdout = g.0.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let st = g.wait_until(Instant::now() + JOB_LIMIT, "the plain mpiexec run");
    let out = reader.join().unwrap();
    (st.code(), last_json(&out))
}

fn last_json(out: &str) -> Value {
    let line = out.lines().last().unwrap_or_else(|| panic!("no output: {out:?}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

/// A `racetrack … --ctl` process, the events it printed and what it said on stderr.
struct Ctl {
    proc: Group,
    stdin: Option<ChildStdin>,
    rx: mpsc::Receiver<Value>,
    seen: Vec<Value>,
    cursor: usize,
    deadline: Instant,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Ctl {
    /// `racetrack mpirun --ctl --impl IMP -n 4 -- PROG ARGS`.
    fn mpirun(imp: Impl, prog: &Path, args: &[&str]) -> Ctl {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_racetrack"));
        cmd.args(["mpirun", "--ctl", "--impl", imp.key(), "-n"])
            .arg(RANKS.to_string())
            .arg("--")
            .arg(prog)
            .args(args);
        Ctl::spawn(cmd)
    }

    fn spawn(mut cmd: Command) -> Ctl {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut proc = Group::spawn(&mut cmd);
        let stdout = proc.0.stdout.take().unwrap();
        let stderr = proc.0.stderr.take().unwrap();
        let rx = support::json_lines(stdout);
        let said = Arc::new(Mutex::new(Vec::new()));
        let s = said.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                s.lock().unwrap().push(line);
            }
        });
        let stdin = proc.0.stdin.take();
        Ctl {
            proc,
            stdin,
            rx,
            seen: Vec::new(),
            cursor: 0,
            deadline: Instant::now() + JOB_LIMIT,
            stderr: said,
        }
    }

    fn send(&mut self, cmd: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        let _ = writeln!(stdin, "{cmd}").and_then(|()| stdin.flush());
    }

    /// Several commands in one write: the controller reads them as one batch, so it
    /// handles the later ones even after the program exited (a session ends when no
    /// command is pending).
    fn send_together(&mut self, cmds: &[Value]) {
        let text: String = cmds.iter().map(|c| format!("{c}\n")).collect();
        let stdin = self.stdin.as_mut().expect("stdin open");
        let _ = stdin.write_all(text.as_bytes()).and_then(|()| stdin.flush());
    }

    fn pull(&mut self) -> bool {
        let now = Instant::now();
        if now >= self.deadline {
            return false;
        }
        match self.rx.recv_timeout(self.deadline - now) {
            Ok(v) => {
                self.seen.push(v);
                true
            }
            Err(_) => false,
        }
    }

    fn fail(&self, why: &str) -> ! {
        let tail: Vec<String> = self
            .seen
            .iter()
            .rev()
            .take(20)
            .rev()
            .map(Value::to_string)
            .collect();
        kill_group(self.proc.0.id());
        panic!(
            "{why}; last events:\n{}\nstderr:\n{}",
            tail.join("\n"),
            self.stderr.lock().unwrap().join("\n")
        );
    }

    /// Every event that comes within `d` (kept in `seen`).
    fn gather_for(&mut self, d: Duration) {
        let until = Instant::now() + d;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match self.rx.recv_timeout(left) {
                Ok(v) => self.seen.push(v),
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// The next event (in order) satisfying `pred`; earlier ones are skipped (kept in
    /// `seen`).
    fn expect(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            while self.cursor < self.seen.len() {
                let v = &self.seen[self.cursor];
                self.cursor += 1;
                if pred(v) {
                    return v.clone();
                }
            }
            if !self.pull() {
                self.fail(&format!("no {what} (timed out, or the controller ended)"));
            }
        }
    }

    /// The answer to a `wait` just sent: `waited`, else fail.
    fn waited(&mut self, what: &str) {
        let v = self.expect(what, |v| v["event"] == "waited" || v["event"] == "error");
        if v["event"] != "waited" {
            self.fail(&format!("{what}: {v}"));
        }
    }

    /// The next `error` event (the answer to a refused command); its message.
    fn error(&mut self, what: &str) -> String {
        let v = self.expect(what, |v| v["event"] == "error");
        v["message"].as_str().unwrap().to_owned()
    }

    /// Wait until every rank is held before its first call (`RACETRACK_WAIT`).
    fn all_held_at_start(&mut self) {
        self.expect("snapshot", |v| v["event"] == "snapshot");
        for r in 0..RANKS {
            self.send(json!({"cmd":"wait","until":"held","thread":format!("rank[{r}]")}));
            self.waited(&format!("rank[{r}] held at its start"));
        }
    }

    /// Wait for the exit; returns (the `exit` event's code, the program's last stdout line).
    fn finish(&mut self) -> (Option<i64>, Value) {
        let exit = self.expect("exit", |v| v["event"] == "exit");
        let st = self.proc.wait_until(self.deadline, "racetrack");
        let last = self
            .seen
            .iter()
            .rev()
            .find(|v| v["event"] == "output" && v["stream"] == "stdout")
            .map(|v| serde_json::from_str(v["line"].as_str().unwrap()).unwrap())
            .unwrap_or(Value::Null);
        assert_eq!(
            st.code().map(i64::from),
            exit["code"].as_i64(),
            "racetrack's exit code is the program's"
        );
        (exit["code"].as_i64(), last)
    }

    /// Finish with exit code 0 and a result matching the reference; the result.
    fn finish_correctly(&mut self) -> Value {
        let (code, last) = self.finish();
        if code != Some(0) || last["matches_reference"] != true {
            self.fail(&format!("expected a correct finish: exit {code:?}, {last}"));
        }
        // A job that finished was never deadlocked.
        if let Some(d) = self.seen.iter().find(|v| v["event"] == "deadlock") {
            self.fail(&format!("a false deadlock alarm: {d}"));
        }
        last
    }

    fn errors(&self) -> Vec<&Value> {
        self.seen.iter().filter(|v| v["event"] == "error").collect()
    }
}

/// The events seen, with those the snapshot lists as held (the ranks' first `start`s, when
/// they were held before the snapshot was taken) in its place.
fn events(seen: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for v in seen {
        if v["event"] == "snapshot" {
            out.extend(v["held"].as_array().unwrap().iter().cloned());
        } else {
            out.push(v.clone());
        }
    }
    out
}

/// Per thread, `start`s per call name.
fn starts_per_rank(seen: &[Value]) -> BTreeMap<String, BTreeMap<String, usize>> {
    let mut m: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for v in events(seen).iter().filter(|v| v["event"] == "start") {
        *m.entry(v["thread"].as_str().unwrap().to_owned())
            .or_default()
            .entry(v["op"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    m
}

fn count(seen: &[Value], event: &str, thread: &str) -> usize {
    events(seen)
        .iter()
        .filter(|v| v["event"] == event && v["thread"] == thread)
        .count()
}

/// The calls ring (C or Fortran) makes on every rank with `rounds` rounds and more than
/// one rank: each rank sends and receives once a round.
fn ring_calls(rounds: usize) -> BTreeMap<String, usize> {
    [
        ("MPI_Init", 1),
        ("MPI_Send", rounds),
        ("MPI_Recv", rounds),
        ("MPI_Allreduce", 1),
        ("MPI_Bcast", 1),
        ("MPI_Finalize", 1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// Every rank made exactly the calls ring makes, each reported once (a `start` and a
/// `stop` per call).
fn check_ring_calls(seen: &[Value], rounds: usize) {
    let starts = starts_per_rank(seen);
    for r in 0..RANKS {
        let t = format!("rank[{r}]");
        assert_eq!(starts.get(&t), Some(&ring_calls(rounds)), "{t}: starts per call");
        assert_eq!(
            count(seen, "start", &t),
            count(seen, "stop", &t),
            "{t}: starts and stops"
        );
    }
}

/// One test per implementation for each scenario: `scenario::mpich`, `scenario::openmpi`.
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn mpich() {
                super::$name(super::Impl::Mpich)
            }
            #[test]
            fn openmpi() {
                super::$name(super::Impl::OpenMpi)
            }
        }
    )*};
}

on_both!(free_run);

/// A free run has the result of a run without the debugger, and reports every call once.
fn free_run(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let ring = dir.join("ring");
    let (plain_code, plain) = plain_run(imp, &ring, &[]);
    assert_eq!((plain_code, &plain["matches_reference"]), (Some(0), &json!(true)));
    let mut s = Ctl::mpirun(imp, &ring, &[]);
    s.all_held_at_start();
    s.send(json!({"cmd":"continue"}));
    s.send(json!({"cmd":"wait","until":"exit","timeout_ms":30000}));
    let last = s.finish_correctly();
    assert_eq!(
        last["result"], plain["result"],
        "the same result as without the debugger"
    );
    assert_eq!(last["result"], 60);
    check_ring_calls(&s.seen, 3);
    check_one_program(&s.seen);
    assert!(s.errors().is_empty(), "{:?}", s.errors());
}

/// The job is one program whose ranks are its threads: one `hello` (rank 0's process),
/// and a snapshot that gives each rank thread its own process.
fn check_one_program(seen: &[Value]) {
    let hellos: Vec<&Value> = seen.iter().filter(|e| e["event"] == "hello").collect();
    assert_eq!(hellos.len(), 1, "one hello for the job: {hellos:?}");
    let snapshot = seen
        .iter()
        .find(|e| e["event"] == "snapshot")
        .expect("the job's snapshot");
    let threads = snapshot["threads"].as_array().expect("threads");
    let names: Vec<&str> = threads.iter().filter_map(|t| t["thread"].as_str()).collect();
    let ranks: Vec<String> = (0..RANKS).map(|r| format!("rank[{r}]")).collect();
    assert_eq!(names, ranks);
    let pids: BTreeSet<u64> = threads.iter().filter_map(|t| t["pid"].as_u64()).collect();
    assert_eq!(pids.len(), RANKS, "each rank its own process: {snapshot}");
    assert_eq!(hellos[0]["pid"], threads[0]["pid"], "the hello is rank 0's");
}

on_both!(recvs_name_their_sends);

/// Every `recv` names the `send` it matched, whatever the receive form
/// (`examples/mpi/receives.c`: `MPI_Recv`, `MPI_Probe` + `MPI_Recv`, `MPI_Irecv` completed
/// by each `Wait*` and `Test*`, `MPI_Sendrecv`, `MPI_Sendrecv_replace`, a duplicated
/// communicator). The linked send comes from the source the receive matched, to the
/// receiving rank, with its tag, on its communicator; each send is taken once; and it is
/// the sender's Nth send on that channel exactly when the program says that receive got
/// the sender's Nth message.
fn recvs_name_their_sends(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let mut s = Ctl::mpirun(imp, &dir.join("receives"), &[]);
    s.all_held_at_start();
    s.send(json!({"cmd":"continue"}));
    s.send(json!({"cmd":"wait","until":"exit","timeout_ms":60000}));
    let last = s.finish_correctly();
    let evs = events(&s.seen);
    let rank_of = |t: &Value| -> i64 { t.as_str().unwrap()[5..].trim_end_matches(']').parse().unwrap() };
    // Each send and its index on its channel (sender, communicator, destination, tag).
    let mut sends: BTreeMap<u64, (&Value, i64)> = BTreeMap::new();
    let mut channels: BTreeMap<String, i64> = BTreeMap::new();
    for e in evs
        .iter()
        .filter(|e| e["event"] == "send" && e["call"]["peer"].is_i64())
    {
        let c = &e["call"];
        let n = channels
            .entry(format!(
                "{} {} {} {}",
                e["thread"], c["comm"], c["peer"], c["tag"]
            ))
            .or_default();
        sends.insert(e["event_id"].as_u64().unwrap(), (e, *n));
        *n += 1;
    }
    let mut taken = std::collections::BTreeSet::new();
    let mut rank0 = Vec::new();
    let mut forms = std::collections::BTreeSet::new();
    let mut call_of: BTreeMap<String, String> = BTreeMap::new();
    for e in &evs {
        let thread = e["thread"].as_str().unwrap_or_default().to_owned();
        if e["event"] == "start" {
            call_of.insert(thread.clone(), e["op"].as_str().unwrap().to_owned());
        }
        if e["event"] != "recv" {
            continue;
        }
        let from = &e["from"];
        let id = from["event_id"]
            .as_u64()
            .unwrap_or_else(|| s.fail(&format!("a recv without its send: {e}")));
        let Some((send, nth)) = sends.get(&id) else {
            s.fail(&format!("{e} names no send of the run"))
        };
        let (c, m) = (&send["call"], &e["call"]["matched"]);
        assert_eq!(send["thread"], from["thread"], "{e}");
        assert_eq!(c["comm"], e["call"]["comm"], "the same communicator: {e} {send}");
        assert_eq!(c["tag"], m["tag"], "{e} {send}");
        if c["comm"] == "MPI_COMM_WORLD" {
            assert_eq!(
                rank_of(&send["thread"]),
                m["source"].as_i64().unwrap(),
                "{e} {send}"
            );
            assert_eq!(c["peer"].as_i64(), Some(rank_of(&e["thread"])), "{e} {send}");
        }
        assert!(taken.insert(id), "a send taken twice: {send}");
        assert!(
            evs.iter().position(|x| x["event_id"] == from["event_id"]) < evs.iter().position(|x| x == e),
            "a recv before the send it names: {e}"
        );
        if thread == "rank[0]" {
            rank0.push(json!(rank_of(&send["thread"]) * 1000 + nth));
            forms.insert(call_of[&thread].clone());
        }
    }
    assert_eq!(taken.len(), sends.len(), "every send to a rank was received once");
    assert_eq!(
        json!(rank0),
        last["got"],
        "the Nth message from a sender is linked to its Nth send"
    );
    let want = [
        "MPI_Recv",
        "MPI_Wait",
        "MPI_Test",
        "MPI_Waitall",
        "MPI_Waitany",
        "MPI_Waitsome",
        "MPI_Testall",
        "MPI_Testany",
        "MPI_Testsome",
        "MPI_Sendrecv",
        "MPI_Sendrecv_replace",
    ];
    for f in want {
        assert!(forms.contains(f), "no receive completed by {f}: {forms:?}");
    }
    // A probe names the send it saw: the one the receive after it takes.
    let mut probes = 0;
    for (k, e) in evs.iter().enumerate() {
        if !(e["event"] == "stop" && e["op"] == "MPI_Probe") {
            continue;
        }
        let next = evs[k..]
            .iter()
            .find(|r| r["event"] == "recv" && r["thread"] == e["thread"])
            .expect("a receive after the probe");
        assert_eq!(e["call"]["saw"], next["from"], "{e}");
        probes += 1;
    }
    assert!(probes > 0, "no MPI_Probe");
    // Every collective call names its instance, and every rank made each one.
    let mut instances: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in evs
        .iter()
        .filter(|e| e["event"] == "stop" && !e["call"]["collective"].is_null())
    {
        let k = &e["call"]["collective"];
        let key = format!("{} {} {} {}", e["op"], k["comm"], k["leader"], k["n"]);
        instances
            .entry(key)
            .or_default()
            .push(e["thread"].as_str().unwrap().to_owned());
    }
    let ops: std::collections::BTreeSet<&str> =
        instances.keys().map(|k| k.split(' ').next().unwrap()).collect();
    assert!(
        ops.len() >= 3,
        "MPI_Comm_dup, MPI_Barrier, MPI_Allreduce: {instances:?}"
    );
    for (k, ranks) in &instances {
        assert_eq!(ranks.len(), RANKS, "{k}: {ranks:?}");
    }
    // The GUI's model draws each link as a message edge, sender's call to receiver's.
    let mut model = racetrack::model::Model::new().with_unfolded();
    for ev in s
        .seen
        .iter()
        .filter_map(|v| serde_json::from_value::<racetrack_protocol::Event>(v.clone()).ok())
    {
        model.ingest(&ev);
    }
    let u = model.unfolded().expect("unfolded");
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for e in evs.iter().filter(|e| e["event"] == "recv") {
        let (send, _) = sends[&e["from"]["event_id"].as_u64().unwrap()];
        let pair = format!("{}@{} -> {}@{}", send["op"], send["thread"], e["op"], e["thread"]);
        *want.entry(pair.replace('"', "")).or_default() += 1;
    }
    let mut have: BTreeMap<String, u64> = BTreeMap::new();
    for e in u.edges() {
        let (a, b) = (u.node(e.from).unwrap().key, u.node(e.to).unwrap().key);
        let ((ao, at), (bo, bt)) = (model.node_names(a), model.node_names(b));
        *have.entry(format!("{ao}@{at} -> {bo}@{bt}")).or_default() += e.count;
    }
    assert_eq!(have, want, "one message on an edge per link");
    let node = |op: &str, t: &str| u.find(model.node_key(op, t).unwrap()).unwrap();
    for (from, to) in [
        (("MPI_Send", "rank[1]"), ("MPI_Recv", "rank[0]")),
        (("MPI_Send", "rank[2]"), ("MPI_Irecv", "rank[0]")),
        (("MPI_Sendrecv", "rank[0]"), ("MPI_Sendrecv", "rank[1]")),
    ] {
        let e = u.edge_between(node(from.0, from.1), node(to.0, to.1));
        assert!(e.is_some_and(|e| e.count > 0), "no edge {from:?} -> {to:?}");
    }
}

on_both!(unreported_sends_do_not_stall_the_stream);

/// A receive whose send the library does not report (a persistent request started by
/// `MPI_Startall`) goes out unlinked once its sender's stream has moved on or gone quiet
/// (1 s), not after the merge's longest wait (3 s): rank 0's events after 12 such
/// receives, up to a breakpoint, arrive within 25 s (at 3 s a receive they would take
/// 36 s); the other receives keep their links, and the program's result is right.
fn unreported_sends_do_not_stall_the_stream(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let mut s = Ctl::mpirun(
        imp,
        &dir.join("receives"),
        &["--messages", "3", "--persistent", "12"],
    );
    s.all_held_at_start();
    s.send(json!({"cmd":"break","op":"MPI_Comm_free","thread":"rank[0]","on":true}));
    s.send(json!({"cmd":"continue"}));
    s.send(json!({"cmd":"wait","until":"held","thread":"rank[0]","op":"MPI_Comm_free","timeout_ms":25000}));
    s.expect("waited", |v| v["event"] == "waited");
    s.send(json!({"cmd":"break","op":"MPI_Comm_free","thread":"rank[0]","on":false}));
    s.send(json!({"cmd":"continue"}));
    s.finish_correctly();
    let evs = events(&s.seen);
    let recvs: Vec<&Value> = evs.iter().filter(|e| e["event"] == "recv").collect();
    let (persistent, others): (Vec<&&Value>, Vec<&&Value>) =
        recvs.iter().partition(|e| e["call"]["matched"]["tag"] == 9);
    assert_eq!(persistent.len(), 12, "{persistent:?}");
    assert!(persistent.iter().all(|e| e["from"].is_null()), "no send to name");
    assert!(
        others.iter().all(|e| e["from"].is_object()),
        "the others keep their links"
    );
}

on_both!(happens_before);

/// `ctl`'s `clock` orders events by happens-before, computed from the links and the
/// collectives (`examples/mpi/receives.c`): every send precedes its receive; two ranks'
/// first sends to one wildcard receiver are concurrent; what a rank did before the
/// `MPI_Barrier` precedes what another does after it, and nothing after it precedes
/// anything before it. Asked while every rank is held at its last call (a session ends
/// with its program).
fn happens_before(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let mut s = Ctl::mpirun(imp, &dir.join("receives"), &["--messages", "2"]);
    s.all_held_at_start();
    s.send(json!({"cmd":"break","op":"MPI_Allreduce","on":true}));
    s.send(json!({"cmd":"continue"}));
    for r in 0..RANKS {
        let t = format!("rank[{r}]");
        s.send(json!({"cmd":"wait","until":"held","thread":t,"op":"MPI_Allreduce","timeout_ms":60000}));
        s.expect("waited", |v| v["event"] == "waited");
    }
    let evs = events(&s.seen);
    let id = |e: &Value| e["event_id"].as_u64().unwrap();
    let first = |thread: &str, what: &dyn Fn(&Value) -> bool| -> u64 {
        id(evs
            .iter()
            .find(|e| e["thread"] == thread && what(e))
            .unwrap_or_else(|| panic!("no such event of {thread}")))
    };
    let mut order = |a: u64, b: u64| -> String {
        s.send(json!({"cmd":"clock","event_id":a,"with":b}));
        let v = s.expect("clock", |v| {
            v["event"] == "clock" && v["event_id"] == a && v["with"] == b
        });
        v["order"].as_str().unwrap().to_owned()
    };
    let recvs: Vec<(u64, u64)> = evs
        .iter()
        .filter(|e| e["event"] == "recv")
        .map(|e| (e["from"]["event_id"].as_u64().expect("linked"), id(e)))
        .collect();
    assert!(recvs.len() >= 6, "{recvs:?}");
    for (send, recv) in &recvs {
        assert_eq!(order(*send, *recv), "before", "send {send}, recv {recv}");
        assert_eq!(order(*recv, *send), "after");
    }
    let is_send = |e: &Value| e["event"] == "send";
    let (s1, s2) = (first("rank[1]", &is_send), first("rank[2]", &is_send));
    assert_eq!(order(s1, s2), "concurrent", "two senders racing for rank 0");
    let barrier = |stop: bool| {
        move |e: &Value| e["op"] == "MPI_Barrier" && e["event"] == if stop { "stop" } else { "start" }
    };
    let (before, after) = (
        first("rank[2]", &barrier(false)),
        first("rank[1]", &barrier(true)),
    );
    assert_eq!(
        order(s2, after),
        "before",
        "rank 2's send before the barrier, rank 1 after"
    );
    assert_eq!(order(before, after), "before");
    let later = first("rank[1]", &|e: &Value| {
        e["op"] == "MPI_Sendrecv" && e["event"] == "start"
    });
    assert_eq!(order(later, before), "after");
    let alone = first("rank[3]", &barrier(false));
    assert_eq!(
        order(before, alone),
        "concurrent",
        "two ranks entering the barrier"
    );
    s.send(json!({"cmd":"break","op":"MPI_Allreduce","on":false}));
    s.send(json!({"cmd":"continue"}));
    s.finish_correctly();
}

on_both!(deadlocks_are_named);

/// A job that hangs is told as a `deadlock` naming who waits for whom, on which call, at
/// which site, while the job is left hanging (`examples/mpi/deadlock.c`): a receive–receive
/// cycle, a barrier one rank never enters, a wildcard receive whose senders finished, a
/// wildcard receive forced onto a rank that never sends again, an `MPI_Waitall` on two
/// wildcard receives with one message sent, a blocking receive whose message a posted
/// wildcard `MPI_Irecv` took. A slow rank that others wait for is not a
/// deadlock, nor a waitall whose second message comes: those runs end correctly with none.
fn deadlocks_are_named(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let prog = dir.join("deadlock");
    let start = |kind: &str| {
        let mut s = Ctl::mpirun(imp, &prog, &["--kind", kind]);
        s.all_held_at_start();
        s.send(json!({"cmd":"continue"}));
        s
    };
    let waiter = |d: &Value, thread: &str| -> Value {
        let w = d["waits"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["thread"] == thread);
        w.cloned()
            .unwrap_or_else(|| panic!("{thread} is not among the stuck: {d}"))
    };
    let at_site = |w: &Value| w["site"].as_str().is_some_and(|s| s.contains("deadlock.c:"));

    let mut s = start("recv_recv");
    let d = s.expect("deadlock", |v| v["event"] == "deadlock");
    assert_eq!(d["cycle"], json!(["rank[0]", "rank[1]"]), "{d}");
    assert_eq!(d["waits"].as_array().unwrap().len(), RANKS, "{d}");
    let w0 = waiter(&d, "rank[0]");
    assert_eq!(
        (w0["call"].as_str(), &w0["waits_for"], w0["needs"].as_str()),
        (Some("MPI_Recv"), &json!(["rank[1]"]), Some("all"))
    );
    assert!(at_site(&w0), "{w0}");
    let w3 = waiter(&d, "rank[3]");
    assert_eq!(
        (w3["call"].as_str(), &w3["waits_for"]),
        (Some("MPI_Barrier"), &json!(["rank[0]", "rank[1]"]))
    );
    // The job is left as it is: still there to inspect.
    assert!(s.proc.0.try_wait().unwrap().is_none(), "the job still runs");
    drop(s);

    let mut s = start("collective");
    let d = s.expect("deadlock", |v| v["event"] == "deadlock");
    assert_eq!(d["cycle"], json!(["rank[0]", "rank[1]"]), "{d}");
    let w1 = waiter(&d, "rank[1]");
    assert_eq!(
        (w1["call"].as_str(), &w1["waits_for"]),
        (Some("MPI_Barrier"), &json!(["rank[0]"]))
    );
    assert_eq!(waiter(&d, "rank[0]")["call"], "MPI_Recv");
    drop(s);

    let mut s = start("lost");
    let d = s.expect("deadlock", |v| v["event"] == "deadlock");
    assert_eq!(d["waits"].as_array().unwrap().len(), 1, "{d}");
    let w0 = waiter(&d, "rank[0]");
    assert_eq!(
        (w0["needs"].as_str(), &w0["waits_for"], &w0["finished"]),
        (
            Some("any"),
            &json!(["rank[1]", "rank[2]", "rank[3]"]),
            &json!(["rank[1]", "rank[2]", "rank[3]"])
        )
    );
    assert_eq!(d["cycle"], json!([]));
    drop(s);

    // Both wildcard receives forced onto rank 1, which sends once: rank 2's message is on
    // its way, but the second receive waits for rank 1 only. Rank 1 computes after its
    // send, so the second pick cannot be refused: it might send again.
    let mut s = Ctl::mpirun(imp, &prog, &["--kind", "forced"]);
    s.all_held_at_start();
    s.send(json!({"cmd":"break","op":"MPI_Recv","thread":"rank[0]","on":true}));
    s.send(json!({"cmd":"continue"}));
    for i in 0..2 {
        let start = s.expect("rank[0] held at a receive", |v| {
            v["event"] == "start" && v["thread"] == "rank[0]" && v["held"] == true && v["op"] == "MPI_Recv"
        });
        if i == 1 {
            // Picks that cannot happen are refused with the reason: rank 3 is in the
            // barrier, which waits for rank 0; rank 7 is not in the job.
            let in_barrier =
                |v: &Value| v["event"] == "start" && v["thread"] == "rank[3]" && v["op"] == "MPI_Barrier";
            if !s.seen.iter().any(in_barrier) {
                s.expect("rank 3 in the barrier", in_barrier);
            }
            s.send(json!({"cmd":"match","thread":"rank[0]","source":3}));
            let e = s.expect("a refusal", |v| v["event"] == "error");
            let why = e["message"].as_str().unwrap();
            assert!(
                why.starts_with("match: source 3 for rank[0]'s receive: rank[3] cannot send before this receive completes: it is in MPI_Barrier at "),
                "{why}"
            );
            s.send(json!({"cmd":"match","thread":"rank[0]","source":7}));
            let e = s.expect("a refusal", |v| v["event"] == "error");
            assert!(
                e["message"]
                    .as_str()
                    .unwrap()
                    .ends_with("MPI_COMM_WORLD has no rank 7 (its ranks are 0 … 3)"),
                "{e}"
            );
        }
        s.send(json!({"cmd":"match","thread":"rank[0]","source":1}));
        s.expect("the match applied", |v| v["event"] == "ok" && v["cmd"] == "match");
        s.send(json!({"cmd":"continue","event_id":start["event_id"]}));
    }
    let d = s.expect("deadlock", |v| v["event"] == "deadlock");
    let w0 = waiter(&d, "rank[0]");
    assert_eq!(
        (w0["call"].as_str(), &w0["waits_for"]),
        (Some("MPI_Recv"), &json!(["rank[1]"])),
        "{d}"
    );
    assert_eq!(d["cycle"], json!(["rank[0]", "rank[1]"]), "{d}");
    drop(s);

    let mut s = start("slow");
    let last = s.finish_correctly();
    assert_eq!(last["result"], 1);
    let alarms: Vec<&Value> = s.seen.iter().filter(|v| v["event"] == "deadlock").collect();
    assert!(alarms.is_empty(), "a slow rank is not a deadlock: {alarms:?}");
    drop(s);

    // Two wildcard MPI_Irecv in one MPI_Waitall, one message sent: the waitall waits for
    // a second sender, and the only one left waits for rank 0.
    let mut s = start("waitall");
    let d = s.expect("deadlock", |v| v["event"] == "deadlock");
    let w0 = waiter(&d, "rank[0]");
    assert_eq!(
        (
            w0["call"].as_str(),
            w0["needs"].as_str(),
            &w0["waits_for"],
            &w0["finished"]
        ),
        (
            Some("MPI_Waitall"),
            Some("any"),
            &json!(["rank[1]", "rank[2]", "rank[3]"]),
            &json!(["rank[2]", "rank[3]"])
        ),
        "{d}"
    );
    assert_eq!(waiter(&d, "rank[1]")["call"], "MPI_Recv", "{d}");
    assert_eq!(d["cycle"], json!(["rank[0]", "rank[1]"]), "{d}");
    // The waitall's start said what it waits for.
    let waitall = events(&s.seen)
        .into_iter()
        .find(|e| e["event"] == "start" && e["op"] == "MPI_Waitall")
        .expect("the waitall's start");
    let any = json!({"comm":"MPI_COMM_WORLD","peer":"MPI_ANY_SOURCE","tag":0});
    assert_eq!(waitall["call"]["awaits"], json!([any, any]), "{waitall}");
    drop(s);

    // A wildcard MPI_Irecv posted before a blocking MPI_Recv took the one message there
    // was: the receive waits, on both ranks.
    let mut s = start("posted");
    let d = s.expect("deadlock", |v| v["event"] == "deadlock");
    assert_eq!(d["cycle"], json!(["rank[0]", "rank[1]"]), "{d}");
    let w0 = waiter(&d, "rank[0]");
    assert_eq!(
        (w0["call"].as_str(), &w0["waits_for"]),
        (Some("MPI_Recv"), &json!(["rank[1]"])),
        "{d}"
    );
    let recv = events(&s.seen)
        .into_iter()
        .find(|e| e["event"] == "start" && e["thread"] == "rank[0]" && e["op"] == "MPI_Recv")
        .expect("rank 0's receive");
    assert_eq!(
        recv["call"]["posted"],
        json!([{"comm":"MPI_COMM_WORLD","peer":"MPI_ANY_SOURCE","tag":0}]),
        "{recv}"
    );
    drop(s);

    // Rank 2 sends the second message: no deadlock, whenever it comes.
    let mut s = start("waitall_ok");
    let last = s.finish_correctly();
    assert_eq!(last["result"], 3);
}

on_both!(unreported_calls_are_told);

/// A rank blocked in a call the library does not wrap is told as such: an `unreported`
/// event names the call and its site. In `deadlock --kind unreported` ranks 1 to 3 wait
/// in `MPI_Reduce_scatter_block` for rank 0, which waits in `MPI_Recv` for rank 1 (ranks
/// 2 and 3 compute first: a sample then finds them outside MPI, and tells nothing).
fn unreported_calls_are_told(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let mut s = Ctl::mpirun(imp, &dir.join("deadlock"), &["--kind", "unreported"]);
    s.all_held_at_start();
    s.send(json!({"cmd":"continue"}));
    let mut told = BTreeSet::new();
    while told.len() < RANKS - 1 {
        let v = s.expect("a rank in an unreported call", |v| v["event"] == "unreported");
        assert_eq!(v["call"], "MPI_Reduce_scatter_block", "{v}");
        let site = v["site"].as_str().unwrap_or_default();
        assert!(site.contains("deadlock.c:") && site.ends_with("(main)"), "{v}");
        assert!(
            told.insert(v["thread"].as_str().unwrap().to_owned()),
            "told once: {v}"
        );
    }
    assert_eq!(
        told,
        BTreeSet::from(["rank[1]".into(), "rank[2]".into(), "rank[3]".into()])
    );
    // Samples go on (every 4 s at most): what is told stays told, once. Rank 0 is in a
    // reported call: never sampled.
    s.gather_for(Duration::from_secs(5));
    for (rank, n) in [(0, 0), (1, 1), (2, 1), (3, 1)] {
        assert_eq!(
            count(&s.seen, "unreported", &format!("rank[{rank}]")),
            n,
            "rank {rank}"
        );
    }
    assert!(s.proc.0.try_wait().unwrap().is_none(), "the job still runs");
}

on_both!(late_attach_tells_where_ranks_are);

/// `deadlock ARGS` started by hand before the debugger (no start hold), and `racetrack
/// listen --ctl` started 1.5 s later: its ranks dial it until it comes (5 s). The job's
/// standard output goes to the file returned.
fn attach_late(imp: Impl, dir: &Path, args: &[&str]) -> (Ctl, Group, PathBuf) {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap();
    let [core, wrappers] = racetrack::mpirun::libs(racetrack_impl(imp), &bin_dir()).unwrap();
    let env = [
        ("RACETRACK_CONNECT", format!("ws://{addr}")),
        ("LD_PRELOAD", format!("{}:{}", core.display(), wrappers.display())),
    ];
    let out = scratch(imp, &format!("late-{}.out", args.join("-")));
    let mut job = imp.mpiexec(RANKS, &env);
    job.arg(dir.join("deadlock"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::null());
    let job = Group::spawn(&mut job);
    // Long enough for every rank to block (they do at once), short of the dial's 5 s.
    std::thread::sleep(Duration::from_millis(1500));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_racetrack"));
    cmd.args(["listen", "--ctl", "-n"])
        .arg(RANKS.to_string())
        .args(["--addr", &addr.to_string()]);
    (Ctl::spawn(cmd), job, out)
}

/// A job whose ranks blocked before the debugger attached: their calls' `start`s were
/// never sent. A second after the attach each rank's call is adopted (a sample finds the
/// rank inside a wrapper; what the wrapper's `rt_start` saw says the rest): its `start`
/// is reported, and the deadlock among them is named as if the debugger had been there
/// all along. An adopted call that completes reports its `recv` and `stop` as any call.
fn late_attach_tells_where_ranks_are(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let (mut s, _job, _) = attach_late(imp, &dir, &["--kind", "recv_recv"]);
    // Told as each rank's call is adopted (a rank not adopted yet counts as able to go
    // on), again as it grows: the last tells all four.
    let d = s.expect("the deadlock of all four ranks", |v| {
        v["event"] == "deadlock" && v["waits"].as_array().is_some_and(|w| w.len() == RANKS)
    });
    assert_eq!(d["cycle"], json!(["rank[0]", "rank[1]"]), "{d}");
    let calls: Vec<(&str, &str)> = d["waits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["thread"].as_str().unwrap(), w["call"].as_str().unwrap()))
        .collect();
    assert_eq!(
        calls,
        [
            ("rank[0]", "MPI_Recv"),
            ("rank[1]", "MPI_Recv"),
            ("rank[2]", "MPI_Barrier"),
            ("rank[3]", "MPI_Barrier")
        ],
        "{d}"
    );
    for w in d["waits"].as_array().unwrap() {
        assert!(
            w["site"].as_str().unwrap_or_default().contains("deadlock.c:"),
            "{w}"
        );
    }
    // Each rank's one start is its adopted call's; adopted, not told as unreported.
    for r in 0..RANKS {
        assert_eq!(count(&s.seen, "start", &format!("rank[{r}]")), 1, "rank {r}");
        assert_eq!(count(&s.seen, "unreported", &format!("rank[{r}]")), 0, "rank {r}");
    }
    drop(s);

    // Rank 0's wildcard receive, begun before the attach, is adopted; rank 1 sends 4 s
    // into the run: the receive's `recv` names that send, one `stop` follows, and the
    // job ends with its result and no deadlock.
    let (mut s, _job, out) = attach_late(imp, &dir, &["--kind", "late"]);
    let start = s.expect("rank 0's adopted receive", |v| {
        v["event"] == "start" && v["thread"] == "rank[0]" && v["op"] == "MPI_Recv"
    });
    assert_eq!(start["call"]["peer"], "MPI_ANY_SOURCE", "{start}");
    let recv = s.expect("its recv", |v| v["event"] == "recv" && v["thread"] == "rank[0]");
    let send = s
        .seen
        .iter()
        .find(|v| v["event"] == "send" && v["thread"] == "rank[1]")
        .cloned()
        .expect("rank 1's send, reported (it came after the attach)");
    assert_eq!(recv["from"]["event_id"], send["event_id"], "{recv}");
    s.expect("the job's end", |v| v["event"] == "exit");
    let stops = events(&s.seen)
        .iter()
        .filter(|v| v["event"] == "stop" && v["thread"] == "rank[0]" && v["op"] == "MPI_Recv")
        .count();
    assert_eq!(stops, 1);
    assert!(!s.seen.iter().any(|v| v["event"] == "deadlock"), "no deadlock");
    let printed = std::fs::read_to_string(&out).unwrap();
    assert!(printed.contains("\"result\":42"), "{printed}");
}

on_both!(
    the_window_shows_a_deadlock,
    the_window_tells_unreported_calls,
    the_message_graph_shows_the_job,
    the_window_picks_the_mergesort_race
);

type Window = egui_kittest::Harness<'static, racetrack::gui::app::App>;

/// The window's real widgets (egui_kittest) on a job of example `prog`, its ranks
/// connected to an in-process job listener, once every rank is held at its start,
/// `prepare` has acted, and the toolbar's Continue released them, as a user would. The
/// job's standard output goes to the file returned.
fn window_on_job(
    imp: Impl,
    prog: &str,
    args: &[&str],
    prepare: impl FnOnce(&mut Window),
) -> Option<(Window, Group, PathBuf)> {
    use egui_kittest::kittest::Queryable;
    let dir = setup(imp)?;
    let listener = racetrack::job::JobListener::bind("127.0.0.1:0", None).unwrap();
    let [core, wrappers] = racetrack::mpirun::libs(racetrack_impl(imp), &bin_dir()).unwrap();
    let env = [
        ("RACETRACK_CONNECT", listener.url().to_owned()),
        ("RACETRACK_WAIT", "1".to_owned()),
        ("LD_PRELOAD", format!("{}:{}", core.display(), wrappers.display())),
    ];
    let out = scratch(imp, &format!("{prog}-window.out"));
    let mut job = imp.mpiexec(RANKS, &env);
    job.arg(dir.join(prog))
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(Stdio::null());
    let job = Group::spawn(&mut job);
    let conn = listener
        .accept(RANKS, JOB_LIMIT, Box::new(|| {}), || None)
        .unwrap();
    let session = racetrack::gui::session::Session::from_connection(conn, "job".into());
    let mut h = egui_kittest::Harness::builder()
        .with_size((1400.0, 1000.0))
        .build_ui_state(
            |ui, app: &mut racetrack::gui::app::App| app.frame_ui(ui),
            racetrack::gui::app::App::new(session, None),
        );
    pump_window(&mut h, "every rank held at its start", |a| {
        a.model.control.held.len() >= RANKS
    });
    h.step();
    prepare(&mut h);
    h.step();
    // The toolbar's Continue comes first (each rank's own follow in the ranks panel).
    h.get_all_by_label("Continue").next().unwrap().click();
    h.step();
    Some((h, job, out))
}

/// Step the window until `done` holds of its app, within [`JOB_LIMIT`].
fn pump_window(h: &mut Window, what: &str, done: impl Fn(&racetrack::gui::app::App) -> bool) {
    let deadline = Instant::now() + JOB_LIMIT;
    while !done(h.state()) {
        let m = &h.state().model.control;
        assert!(
            Instant::now() < deadline,
            "{what}: not reached; attached {}, {} events, log {:?}",
            m.attached,
            m.event_count,
            m.log
        );
        h.step();
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The GUI's toolbar names a deadlock and the log tells it in words (egui_kittest on the
/// real widgets, the job's ranks connected to an in-process job listener).
fn the_window_shows_a_deadlock(imp: Impl) {
    use egui_kittest::kittest::Queryable;
    let Some((mut h, _job, _)) = window_on_job(imp, "deadlock", &["--kind", "recv_recv"], |_| {}) else {
        return;
    };
    pump_window(&mut h, "a deadlock", |a| a.model.control.deadlock.is_some());
    h.step();
    let _ = h.get_by_label("deadlock: 4 ranks stuck, cycle rank[0] -> rank[1]");
    let _ = h.get_by_label_contains("[deadlock] rank[0] in MPI_Recv at ");
    let _ = h.get_by_label_contains("rank[3] in MPI_Barrier at ");
    // The stuck calls are drawn as such: the legend says what their colour means.
    let _ = h.get_by_label("deadlocked");
    let app = h.state();
    let key = |op: &str, thread: &str| app.model.node_key(op, thread).unwrap();
    assert!(app.model.deadlocked(key("MPI_Recv", "rank[0]")));
    assert!(app.model.deadlocked(key("MPI_Barrier", "rank[3]")));
    assert!(!app.model.deadlocked(key("MPI_Init", "rank[0]")));
    // The ranks panel says where each rank is stuck; in the message-passing graph the
    // stuck calls are each rank's last.
    assert_eq!(h.get_all_by_label("deadlocked in MPI_Recv").count(), 2);
    assert_eq!(h.get_all_by_label("deadlocked in MPI_Barrier").count(), 2);
    let g = app.model.messages().unwrap();
    for lane in g.lanes() {
        let last = &g.vertices()[*lane.vertices.last().unwrap() as usize];
        let call = app.model.first().op_name(last.call);
        assert!(matches!(call, "MPI_Recv" | "MPI_Barrier"), "{call}");
        assert!(last.open, "still in {call}");
    }
}

/// The ranks panel says which call the library does not report a rank is in, and the
/// log says it in words.
fn the_window_tells_unreported_calls(imp: Impl) {
    use egui_kittest::kittest::Queryable;
    let Some((mut h, _job, _)) = window_on_job(imp, "deadlock", &["--kind", "unreported"], |_| {}) else {
        return;
    };
    pump_window(&mut h, "three ranks in an unreported call", |a| {
        a.model.control.unreported.len() == RANKS - 1
    });
    h.step();
    let status = |h: &Window| {
        h.get_all_by_label_contains("in MPI_Reduce_scatter_block at deadlock.c:")
            .count()
    };
    assert_eq!(status(&h), RANKS - 1);
    let _ = h.get_by_label("in MPI_Recv");
    let _ = h.get_by_label_contains("rank[1] is in MPI_Reduce_scatter_block at ");
}

/// The thesis' merge-sort race forced from the window: race mode on rank 0 only (its
/// toggle in the ranks panel) holds its first wildcard receive; both children's sends
/// are offered; a click on one forces it. Rank 1's is the one the receive is sized for:
/// the sort is right. Rank 2's is too big: the receive is truncated, and the program
/// says so.
fn the_window_picks_the_mergesort_race(imp: Impl) {
    for (source, right) in [("rank[1]", true), ("rank[2]", false)] {
        let Some(last) = mergesort_race_in_window(imp, source) else {
            return;
        };
        assert_eq!(last["matches_reference"], right, "{source}: {last}");
        if !right {
            let error = last["error"].as_str().unwrap_or_default();
            assert!(
                error.contains("MPI_ERR_TRUNCATE") || error.contains("truncat"),
                "{last}"
            );
        }
    }
}

/// One merge-sort job in the window, rank 0's first wildcard receive forced onto
/// `source` by a click; the program's last JSON line.
fn mergesort_race_in_window(imp: Impl, source: &str) -> Option<Value> {
    use egui_kittest::kittest::Queryable;
    let race_on_rank0 = |h: &mut Window| {
        h.get_all_by_label("Race").next().unwrap().click();
    };
    let (mut h, mut job, out) = window_on_job(imp, "mergesort", &["--size", "4000"], race_on_rank0)?;
    let both = |a: &racetrack::gui::app::App| {
        a.races()
            .iter()
            .any(|r| r.thread == "rank[0]" && r.candidates.len() == 2)
    };
    pump_window(&mut h, "rank 0 held with both children's sends", both);
    h.step();
    let _ = h.get_by_label_contains("race: rank[0]'s MPI_Recv at ");
    let sizes: Vec<bool> = h.state().races()[0].candidates.iter().map(|c| c.fits).collect();
    assert_eq!(
        sizes,
        [true, false],
        "rank 2's half does not fit the first receive"
    );
    h.get_by_label_contains(&format!("{source}: ")).click();
    h.step();
    // Once the rank agreed to the match, the window released it: its receive is done.
    pump_window(&mut h, "the pick applied and released", |a| {
        let done =
            |g: &racetrack::model::MpGraph| g.vertices().iter().any(|v| v.params.forced.is_some() && !v.open);
        a.model.messages().is_some_and(done)
    });
    let g = h.state().model.messages().unwrap();
    let forced = g
        .vertices()
        .iter()
        .find(|v| v.params.forced.is_some())
        .expect("the forced receive");
    let want: i32 = source[5..6].parse().unwrap();
    assert_eq!(forced.params.forced, Some(want));
    // Race mode off for rank 0, every later hold released: the job runs to its end.
    h.get_all_by_label("Race").next().unwrap().click();
    h.step();
    let deadline = Instant::now() + JOB_LIMIT;
    while h.state().model.control.exited.is_none() {
        assert!(Instant::now() < deadline, "the job did not end");
        if !h.state().model.control.held.is_empty() {
            h.get_all_by_label("Continue").next().unwrap().click();
        }
        h.step();
        std::thread::sleep(Duration::from_millis(10));
    }
    job.wait_until(deadline, "the job");
    let text = std::fs::read_to_string(&out).unwrap();
    Some(last_json(&text))
}

/// The name of call `v` of the window's message-passing graph.
fn call_of(app: &racetrack::gui::app::App, v: u32) -> String {
    let g = app.model.messages().unwrap();
    app.model
        .first()
        .op_name(g.vertices()[v as usize].call)
        .to_owned()
}

/// The message-passing graph of a whole `mergesort` job, through the window's widgets:
/// one column per rank, every receive below the send it took, collectives lined up; a
/// call's tooltip; a click selects it; a rank hidden; a file's calls highlighted.
fn the_message_graph_shows_the_job(imp: Impl) {
    use egui_kittest::kittest::Queryable;
    use racetrack::gui::mpstyle::Family;
    let Some((mut h, _job, _)) = window_on_job(imp, "mergesort", &[], |_| {}) else {
        return;
    };
    pump_window(&mut h, "the job's end", |a| a.model.control.exited.is_some());
    h.step();
    let app = h.state();
    let g = app.model.messages().unwrap();
    let name = |v: u32| call_of(app, v);
    let label = format!("message-passing graph, {} calls, 4 ranks", g.vertices().len());
    assert!(h.query_by_label(&label).is_some(), "{label}");
    assert_eq!(g.lanes().len(), RANKS);
    assert!(
        g.lanes().iter().all(|l| l.finished),
        "every rank called MPI_Finalize"
    );
    // mergesort scatters, exchanges halves point to point, and gathers.
    assert!(g.edges().len() >= 3, "{} edges", g.edges().len());
    for &(s, r) in g.edges() {
        let (xs, xr) = (&g.vertices()[s as usize], &g.vertices()[r as usize]);
        let (rs, rr) = (g.row(s), g.row(r));
        assert!(rs < rr, "{} at {} -> {} at {}", name(s), rs, name(r), rr);
        assert_ne!(xs.lane, xr.lane);
        let family = Family::of(&name(s), false);
        assert!(matches!(family, Family::Send | Family::SendRecv), "{}", name(s));
    }
    let scatter = g
        .collectives()
        .iter()
        .find(|c| name(c.members[0]) == "MPI_Scatterv")
        .expect("the scatter");
    assert_eq!(scatter.members.len(), RANKS);
    assert!(scatter.members.iter().all(|&m| g.row(m) == scatter.row));

    // The wildcard receive of rank 0: its tooltip, then a click selects it.
    let lane0 = g.lane_order()[0];
    let recv = *g.lanes()[lane0 as usize]
        .vertices
        .iter()
        .find(|&&v| name(v) == "MPI_Recv" && g.vertices()[v as usize].params.wildcard())
        .expect("rank 0's wildcard receive");
    let site = g
        .name(g.vertices()[recv as usize].params.site.unwrap())
        .to_owned();
    {
        let app = h.state_mut();
        app.mp.reveal(app.model.messages().unwrap(), recv);
    }
    h.step();
    let rect = {
        let app = h.state();
        app.mp.screen_rect(app.model.messages().unwrap(), recv).unwrap()
    };
    // A tooltip shows once the pointer rests (egui's delay, in the harness's frames).
    h.hover_at(rect.center());
    for _ in 0..120 {
        h.step();
        if h.query_by_label_contains("MPI_Recv on rank[0]").is_some() {
            break;
        }
    }
    assert!(
        h.query_by_label_contains("MPI_Recv on rank[0]").is_some(),
        "the tooltip"
    );
    assert!(
        h.query_by_label(&format!("at {site}")).is_some(),
        "its site: {site}"
    );
    for pressed in [true, false] {
        h.event(egui::Event::PointerButton {
            pos: rect.center(),
            button: egui::PointerButton::Primary,
            pressed,
            modifiers: egui::Modifiers::default(),
        });
    }
    h.step();
    h.step();
    assert_eq!(h.state().mp.selected, Some(recv));
    let key = h.state().model.node_key("MPI_Recv", "rank[0]").unwrap();
    let node = h.state().model.unfolded().unwrap().find(key);
    assert_eq!(h.state().ui.selected, node, "its rank's details below");

    // Hide rank 2: three columns, none of its calls drawn.
    h.get_by_label("rank[2]").click();
    h.step();
    h.step();
    let app = h.state();
    let g = app.model.messages().unwrap();
    assert!(h.query_by_label_contains("calls, 3 ranks").is_some());
    let lane2 = g.lane_order()[2];
    let hidden = g.lanes()[lane2 as usize].vertices[0];
    assert_eq!(app.mp.screen_rect(g, hidden), None);

    // A file's calls highlighted from the call-site tree.
    h.get_by_label("Call sites").click();
    h.step();
    h.get_all_by_label("every call in this file")
        .next()
        .unwrap()
        .click();
    h.step();
    let app = h.state();
    let g = app.model.messages().unwrap();
    let name = |v: u32| call_of(app, v);
    assert!(!app.mp.sites.is_empty());
    let file_of = |s: u32| g.name(s).split(':').next().unwrap_or("").to_owned();
    let file = |v: u32| g.vertices()[v as usize].params.site.map(file_of);
    let first_file = g.sites().iter().map(|&s| file_of(s)).min();
    let mut lit = 0;
    for v in 0..g.vertices().len() as u32 {
        let on = app.mp.highlighted(g, v);
        assert_eq!(
            on,
            file(v).is_some() && file(v) == first_file,
            "{} at {:?}",
            name(v),
            file(v)
        );
        lit += usize::from(on);
    }
    assert!(lit > 0);

    // Folded between collectives: the stretch from the scatter to the gather is one band
    // that says how many calls it holds, those calls are not drawn; a click opens it.
    use egui_kittest::kittest::NodeT;
    h.state_mut().mp.whole();
    h.step();
    let (before, _) = h.state().mp.drawn();
    h.get_by_label("Fold between collectives").click();
    h.step();
    h.step();
    let bands: Vec<String> = h
        .query_all_by_label_contains("folded: click to open")
        .map(|n| n.accesskit_node().label().unwrap_or_default())
        .collect();
    assert!(!bands.is_empty(), "a fold between the scatter and the gather");
    let held: usize = bands
        .iter()
        .map(|b| {
            b.trim_start_matches("⋯ ")
                .split(' ')
                .next()
                .unwrap()
                .parse::<usize>()
                .unwrap()
        })
        .sum();
    let (folded, _) = h.state().mp.drawn();
    assert!(
        held > 0 && folded + held <= before,
        "{before} drawn, {folded} folded, {held} in the folds: {bands:?}"
    );
    h.get_by_label(&bands[0]).click();
    h.step();
    h.step();
    assert!(h.query_by_label(&bands[0]).is_none(), "opened: {bands:?}");
    assert!(h.state().mp.drawn().0 > folded, "its calls drawn again");
}

on_both!(dies_after_a_wildcard_receive);

/// A rank that dies right after a wildcard receive still delivers that receive, whatever
/// kills it: `MPI_Abort`, `abort()`, `exit` without `MPI_Finalize`, a segmentation fault,
/// `SIGTERM` (`examples/mpi/dies.c`). Events leave in batches, so without the flush on
/// death the last ones were lost in most such runs. Every run must show rank 0's `recv`,
/// matched to one of the senders (the one the program says it took, when that line
/// survives the job's end). 20 runs of `abort` (what a failed `assert` does) and 10 of
/// each other way.
fn dies_after_a_wildcard_receive(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let dies = dir.join("dies");
    let (mut tally, mut misses) = (Vec::new(), Vec::new());
    for (how, runs) in [
        ("abort", 20),
        ("mpi_abort", 10),
        ("exit", 10),
        ("segv", 10),
        ("term", 10),
    ] {
        let mut delivered = 0;
        for _ in 0..runs {
            let mut s = Ctl::mpirun(imp, &dies, &["--how", how]);
            s.all_held_at_start();
            s.send(json!({"cmd":"continue"}));
            s.send(json!({"cmd":"wait","until":"exit","timeout_ms":30000}));
            let exit = s.expect("exit", |v| v["event"] == "exit");
            assert_ne!(exit["code"], 0, "{how}: the job fails");
            // What the program says it took, when its last words reach the launcher (MPICH's
            // Hydra may drop them when the job is torn down).
            let took = s.seen.iter().find_map(|v| {
                let line = v["line"].as_str()?.strip_prefix("dies: rank 0 took rank ")?;
                line.split('\'').next()?.parse::<i64>().ok()
            });
            let recv = s
                .seen
                .iter()
                .find(|v| v["event"] == "recv" && v["thread"] == "rank[0]");
            if let Some(recv) = recv {
                let source = recv["call"]["matched"]["source"].as_i64();
                assert!(matches!(source, Some(1..=3)), "{how}: {recv}");
                if let Some(took) = took {
                    assert_eq!(source, Some(took), "{how}: {recv}");
                }
                delivered += 1;
            } else if misses.len() < 3 {
                let rank0: Vec<String> = (s.seen.iter())
                    .filter(|v| v["thread"] == "rank[0]" || v["event"] == "output")
                    .map(Value::to_string)
                    .collect();
                misses.push(format!("{how}: {}", rank0.join("\n")));
            }
        }
        tally.push((how, delivered, runs));
    }
    let all_delivered = tally.iter().all(|(_, delivered, runs)| delivered == runs);
    let tally: Vec<String> = (tally.iter())
        .map(|(how, delivered, runs)| format!("{how}: {delivered} of {runs}"))
        .collect();
    println!(
        "{}: the receive reached the debugger in {}",
        imp.key(),
        tally.join(", ")
    );
    assert!(
        all_delivered,
        "{}: the receive reached the debugger in {}; rank 0 in the first runs without it:\n{}",
        imp.key(),
        tally.join(", "),
        misses.join("\n\n")
    );
}

on_both!(
    global_step,
    process_breakpoint,
    edited_send,
    wildcard_sources,
    conditional_break,
    thread_multiple,
    fortran_once
);

/// Step mode holds every event; continuing all of them, again and again, reaches the end.
fn global_step(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let mut s = Ctl::mpirun(imp, &dir.join("ring"), &[]);
    s.all_held_at_start();
    s.send(json!({"cmd":"step_mode","on":true}));
    s.send(json!({"cmd":"continue"}));
    let mut steps = 0;
    loop {
        s.send(json!({"cmd":"wait","until":"held","timeout_ms":10000}));
        let v = s.expect("held or the end", |v| {
            v["event"] == "waited" || v["event"] == "error" || v["event"] == "exit"
        });
        if v["event"] != "waited" {
            break;
        }
        s.send(json!({"cmd":"continue"}));
        steps += 1;
        assert!(steps < 400, "still holding after {steps} global steps");
    }
    s.finish_correctly();
    check_ring_calls(&s.seen, 3);
    for r in 0..RANKS {
        let t = format!("rank[{r}]");
        let stepped = s
            .seen
            .iter()
            .filter(|v| v["thread"] == t.as_str() && v["held"] == true && v["reason"] == "step")
            .count();
        // Every start, stop and send after the first hold: 10 calls, 3 of them sends.
        assert!(stepped >= 2 * 10 + 3 - 1, "{t}: {stepped} step holds");
    }
    assert!(steps >= 20, "{steps} global steps");
}

/// A paused rank stays held while the others run, and nothing of it is reported until it
/// is unpaused and continued.
fn process_breakpoint(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let mut s = Ctl::mpirun(imp, &dir.join("ring"), &[]);
    s.all_held_at_start();
    // rank[2] is paused too, so that it runs only once rank[1] is seen held: its events
    // then certainly come while rank[1] is held.
    for t in ["rank[1]", "rank[2]"] {
        s.send(json!({"cmd":"pause","thread":t,"on":true}));
    }
    s.send(json!({"cmd":"continue"}));
    let held = s.expect("rank[1] held by its pause", |v| {
        v["thread"] == "rank[1]" && v["held"] == true && v["reason"] == "pause"
    });
    s.send(json!({"cmd":"wait","until":"held","thread":"rank[2]"}));
    s.waited("rank[2] held");
    let mark = s.seen.len();
    s.send(json!({"cmd":"pause","thread":"rank[2]","on":false}));
    s.send(json!({"cmd":"continue","thread":"rank[2]"}));
    // rank[2] goes on to its first receive (from rank[1]: it waits there).
    s.expect("rank[2]'s next start", |v| {
        v["event"] == "start" && v["thread"] == "rank[2]" && v["op"] == "MPI_Recv"
    });
    s.send(json!({"cmd":"wait","until":"quiet","ms":500}));
    s.waited("quiet");
    let of_rank1: Vec<&Value> = s.seen[mark..]
        .iter()
        .filter(|v| v["thread"] == "rank[1]")
        .collect();
    assert!(of_rank1.is_empty(), "rank[1] reported while paused: {of_rank1:?}");
    s.send(json!({"cmd":"pause","thread":"rank[1]","on":false}));
    s.send(json!({"cmd":"continue"}));
    s.expect("rank[1]'s hold released", |v| {
        v["event"] == "released" && v["event_id"] == held["event_id"]
    });
    s.send(json!({"cmd":"wait","until":"exit","timeout_ms":30000}));
    s.finish_correctly();
    check_ring_calls(&s.seen, 3);
}

/// The first token rank 0 sends, edited while held: everyone adds to the edited token,
/// so the result is off by exactly the change (the all-reduced sum is not).
fn edited_send(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let mut s = Ctl::mpirun(imp, &dir.join("ring"), &[]);
    s.all_held_at_start();
    s.send(json!({"cmd":"break","op":"MPI_Send","thread":"rank[0]","on":true}));
    s.send(json!({"cmd":"continue"}));
    let start = s.expect("rank[0]'s MPI_Send held", |v| {
        v["event"] == "start" && v["thread"] == "rank[0]" && v["held"] == true
    });
    assert_eq!(
        (&start["op"], &start["reason"]),
        (&json!("MPI_Send"), &json!("break"))
    );
    s.send(json!({"cmd":"pause","thread":"rank[0]","on":true}));
    s.send(json!({"cmd":"continue","event_id":start["event_id"]}));
    let send = s.expect("the held send", |v| {
        v["event"] == "send" && v["thread"] == "rank[0]" && v["held"] == true
    });
    // Round 0: rank 0 adds (0 + 1) × (0 + 1) to a token of 0.
    assert_eq!(send["content"], json!([1]), "{send}");
    assert_eq!(send["call"]["datatype"], send["type"]);
    let delta = 1000;
    s.send(json!({"cmd":"edit","event_id":send["event_id"],"content":[1 + delta]}));
    s.expect("the edit applied", |v| {
        v["event"] == "ok" || v["event"] == "error"
    });
    assert!(s.errors().is_empty(), "{:?}", s.errors());
    s.send(json!({"cmd":"break","op":"MPI_Send","thread":"rank[0]","on":false}));
    s.send(json!({"cmd":"pause","thread":"rank[0]","on":false}));
    s.send(json!({"cmd":"continue"}));
    s.send(json!({"cmd":"wait","until":"exit","timeout_ms":30000}));
    let (code, last) = s.finish();
    assert_eq!(code, Some(1), "a mismatch: {last}");
    assert_eq!(last["matches_reference"], false, "{last}");
    assert_eq!(last["reference"], 60);
    assert_eq!(last["result"], 60 + delta, "{last}");
    assert_eq!(last["allreduce"], 60, "{last}");
    // Rank 1 received the edited token.
    let recv = s
        .seen
        .iter()
        .find(|v| v["event"] == "recv" && v["thread"] == "rank[1]")
        .unwrap();
    assert_eq!(recv["call"]["matched"]["source"], 0, "{recv}");
}

/// master_worker's wildcard receives on rank 0 report the source each one matched.
fn wildcard_sources(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let tasks = 60;
    let mut s = Ctl::mpirun(imp, &dir.join("master_worker"), &["--tasks", &tasks.to_string()]);
    s.all_held_at_start();
    s.send(json!({"cmd":"continue"}));
    s.send(json!({"cmd":"wait","until":"exit","timeout_ms":30000}));
    let last = s.finish_correctly();
    let wild = |v: &&Value| {
        v["thread"] == "rank[0]" && v["op"] == "MPI_Recv" && v["call"]["peer"] == "MPI_ANY_SOURCE"
    };
    for kind in ["recv", "stop"] {
        let mut per_source = [0u64; RANKS];
        for v in s.seen.iter().filter(|v| v["event"] == kind).filter(wild) {
            assert_eq!(v["call"]["tag"], "MPI_ANY_TAG", "{v}");
            let src = v["call"]["matched"]["source"]
                .as_u64()
                .unwrap_or_else(|| panic!("{v}"));
            assert!((1..RANKS as u64).contains(&src), "{v}");
            per_source[src as usize] += 1;
        }
        // One wildcard receive per task: each worker's count is its results'.
        let per_worker: Vec<u64> = last["per_worker"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap())
            .collect();
        assert_eq!(
            per_source[1..],
            per_worker[..],
            "{kind} events per source: {last}"
        );
        assert_eq!(per_source.iter().sum::<u64>(), tasks, "{kind} events");
    }
}

/// Conditional breakpoints with hit counts on master_worker: the 3rd task rank 0 sends to
/// rank 2, then rank 0's 5th wildcard receive. Bad conditions are refused.
fn conditional_break(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let mut s = Ctl::mpirun(imp, &dir.join("master_worker"), &["--tasks", "60"]);
    s.all_held_at_start();
    for (cmd, words) in [
        (
            json!({"cmd":"break","op":"MPI_Send","on":true,"hit":0}),
            &["`hit`", "from 1"][..],
        ),
        (
            json!({"cmd":"break","op":"*","on":true,"when":{"min_bytes":9,"max_bytes":8}}),
            &["min_bytes 9 is above max_bytes 8"],
        ),
        (
            json!({"cmd":"break","op":"*","on":true,"when":{"source":1}}),
            &["unknown field `source`"],
        ),
        (
            json!({"cmd":"break","op":"*","thread":"rank[7]","on":true}),
            &["rank[7]"],
        ),
    ] {
        s.send(cmd.clone());
        let e = s.error(&format!("the refusal of {cmd}"));
        for w in words {
            assert!(e.contains(w), "{cmd}: {e:?} does not say {w:?}");
        }
    }
    // Workers 1 and 3 paused (each holds at its first result): every task after the first
    // three goes to rank 2, so its 3rd comes whatever the scheduling (unpaused, a starved
    // rank 2 can get fewer than 3 of the 60 tasks).
    for r in [1, 3] {
        s.send(json!({"cmd":"pause","thread":format!("rank[{r}]"),"on":true}));
    }
    // TAG_TASK is 1; a task is one MPI_LONG_LONG.
    let when = json!({"peer":2,"tag":1,"datatype":"MPI_LONG_LONG","comm":"MPI_COMM_WORLD","bytes":8});
    s.send(json!({"cmd":"break","op":"MPI_Send","thread":"rank[0]","on":true,"when":when,"hit":3}));
    s.send(json!({"cmd":"continue"}));
    let held = s.expect("rank[0]'s 3rd task for rank 2", |v| {
        v["event"] == "start" && v["held"] == true && v["thread"] == "rank[0]"
    });
    assert_eq!(
        (&held["thread"], &held["op"], &held["reason"]),
        (&json!("rank[0]"), &json!("MPI_Send"), &json!("break")),
        "{held}"
    );
    assert_eq!(
        (&held["call"]["peer"], &held["call"]["tag"]),
        (&json!(2), &json!(1))
    );
    let sends: Vec<&Value> = s
        .seen
        .iter()
        .filter(|v| v["event"] == "start" && v["thread"] == "rank[0]" && v["op"] == "MPI_Send")
        .collect();
    let to_2 = sends.iter().filter(|v| v["call"]["peer"] == 2).count();
    assert_eq!(to_2, 3, "the held one is the 3rd send to rank 2");
    assert!(sends.len() > to_2, "sends to other workers went by unheld");
    assert!(sends[..sends.len() - 1].iter().all(|v| v["held"] == false));
    // Rank 0 is held: count its wildcard receives from here.
    let mark = s.seen.len();
    s.send(json!({"cmd":"break","op":"MPI_Send","thread":"rank[0]","on":false}));
    s.send(json!({"cmd":"break","op":"*","on":true,"when":{"peer":"MPI_ANY_SOURCE"},"hit":5}));
    s.send(json!({"cmd":"continue"}));
    let held = s.expect("rank[0]'s 5th wildcard receive", |v| {
        v["event"] == "start" && v["held"] == true && v["thread"] == "rank[0]"
    });
    assert_eq!(
        (&held["thread"], &held["op"]),
        (&json!("rank[0]"), &json!("MPI_Recv")),
        "{held}"
    );
    let wild = s.seen[mark..]
        .iter()
        .filter(|v| v["event"] == "start" && v["call"]["peer"] == "MPI_ANY_SOURCE")
        .count();
    assert_eq!(
        wild, 5,
        "held at the 5th wildcard receive since the breakpoint was set"
    );
    // Cleared and unpaused: nothing holds any more.
    s.send(json!({"cmd":"break","op":"*","on":false}));
    for r in [1, 3] {
        s.send(json!({"cmd":"pause","thread":format!("rank[{r}]"),"on":false}));
    }
    s.send(json!({"cmd":"continue"}));
    s.send(json!({"cmd":"wait","until":"exit","timeout_ms":30000}));
    s.finish_correctly();
    let held_starts = s.seen[mark..]
        .iter()
        .filter(|v| v["event"] == "start" && v["held"] == true && v["thread"] == "rank[0]")
        .count();
    assert_eq!(held_starts, 1, "no hold of rank[0] after the clear");
    assert_eq!(s.errors().len(), 4, "{:?}", s.errors());
}

/// `threads`: four rings at once per rank under MPI_THREAD_MULTIPLE keep working under the
/// debugger. Only the MPI_Init thread's calls are reported; the rings' threads pass
/// through (80 sends and 80 receives per rank, none reported).
fn thread_multiple(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let args = ["--threads", "4", "--rounds", "20"];
    let (code, plain) = plain_run(imp, &dir.join("threads"), &args);
    assert_eq!(
        (code, &plain["thread_multiple"]),
        (Some(0), &json!(true)),
        "{plain}"
    );
    let mut s = Ctl::mpirun(imp, &dir.join("threads"), &args);
    s.all_held_at_start();
    s.send(json!({"cmd":"continue"}));
    s.send(json!({"cmd":"wait","until":"exit","timeout_ms":30000}));
    let last = s.finish_correctly();
    assert_eq!(
        (&last["result"], &last["thread_multiple"]),
        (&plain["result"], &json!(true))
    );
    let calls: BTreeMap<String, usize> = ["MPI_Init_thread", "MPI_Allreduce", "MPI_Bcast", "MPI_Finalize"]
        .into_iter()
        .map(|c| (c.to_owned(), 1))
        .collect();
    let starts = starts_per_rank(&s.seen);
    for r in 0..RANKS {
        let t = format!("rank[{r}]");
        assert_eq!(starts.get(&t), Some(&calls), "{t}: the MPI_Init thread's calls");
        assert_eq!(count(&s.seen, "start", &t), count(&s.seen, "stop", &t), "{t}");
    }
    assert!(s.errors().is_empty(), "{:?}", s.errors());
}

/// ring.f90: under Open MPI its calls go through the Fortran bindings; each is reported
/// exactly once on both implementations.
fn fortran_once(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let mut s = Ctl::mpirun(imp, &dir.join("ring_f"), &["--rounds", "4"]);
    s.all_held_at_start();
    s.send(json!({"cmd":"continue"}));
    s.send(json!({"cmd":"wait","until":"exit","timeout_ms":30000}));
    let last = s.finish_correctly();
    assert_eq!(last["language"], "fortran");
    check_ring_calls(&s.seen, 4);
    let sends = s
        .seen
        .iter()
        .filter(|v| v["event"] == "send" && v["thread"] == "rank[2]")
        .count();
    assert_eq!(sends, 4, "rank[2]'s send events");
}

on_both!(
    killed_debugger,
    forced_wrong_match,
    forced_expected_match,
    bad_commands,
    bad_launch
);

/// A job started by hand dials `racetrack listen`; the debugger is killed while a rank
/// is held at a breakpoint: every rank runs on and the job finishes correctly.
fn killed_debugger(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_racetrack"));
    cmd.args(["listen", "--ctl", "-n"]).arg(RANKS.to_string());
    let mut s = Ctl::spawn(cmd);
    let prefix = format!("racetrack: waiting for {RANKS} ranks at ");
    let url = loop {
        let found = s
            .stderr
            .lock()
            .unwrap()
            .iter()
            .find_map(|l| l.strip_prefix(&prefix).map(str::to_owned));
        if let Some(u) = found {
            break u;
        }
        if Instant::now() > s.deadline {
            s.fail("racetrack listen did not say where it waits");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let [core, wrappers] = racetrack::mpirun::libs(racetrack_impl(imp), &bin_dir()).unwrap();
    let preload = format!("{}:{}", core.display(), wrappers.display());
    let env = [
        ("RACETRACK_CONNECT", url),
        ("RACETRACK_WAIT", "1".to_owned()),
        ("LD_PRELOAD", preload),
    ];
    let mut job = imp.mpiexec(RANKS, &env);
    job.arg(dir.join("ring"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut job = Group::spawn(&mut job);
    let mut stdout = job.0.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        out
    });
    s.all_held_at_start();
    s.send(json!({"cmd":"break","op":"MPI_Send","thread":"rank[0]","on":true}));
    s.send(json!({"cmd":"continue"}));
    s.expect("rank[0] held at MPI_Send", |v| {
        v["event"] == "start" && v["thread"] == "rank[0]" && v["held"] == true && v["op"] == "MPI_Send"
    });
    kill_group(s.proc.0.id());
    let st = job.wait_until(
        Instant::now() + Duration::from_secs(20),
        "the job after the debugger was killed",
    );
    let out = reader.join().unwrap();
    assert_eq!(st.code(), Some(0), "the job's exit; it printed {out}");
    let last = last_json(&out);
    assert_eq!(last["matches_reference"], true, "{last}");
    assert_eq!(last["result"], 60, "{last}");
}

/// mergesort's level-0 wildcard receive on rank 0, held at a breakpoint and forced to
/// match `source`; the forced match is reported and the program's report returned.
fn forced_match(imp: Impl, source: i64) -> (Ctl, Option<i64>, Value) {
    let dir = setup(imp).unwrap();
    let mut s = Ctl::mpirun(imp, &dir.join("mergesort"), &["--size", "4000"]);
    s.all_held_at_start();
    s.send(json!({"cmd":"break","op":"MPI_Recv","thread":"rank[0]","on":true}));
    s.send(json!({"cmd":"continue"}));
    let start = s.expect("rank[0]'s wildcard receive held", |v| {
        v["event"] == "start" && v["thread"] == "rank[0]" && v["held"] == true
    });
    assert_eq!(start["op"], "MPI_Recv", "{start}");
    assert_eq!(start["call"]["peer"], "MPI_ANY_SOURCE", "{start}");
    s.send(json!({"cmd":"match","event_id":start["event_id"],"source":source}));
    s.send(json!({"cmd":"break","op":"MPI_Recv","thread":"rank[0]","on":false}));
    s.send(json!({"cmd":"continue"}));
    s.send(json!({"cmd":"wait","until":"exit","timeout_ms":30000}));
    let (code, last) = s.finish();
    assert!(s.errors().is_empty(), "{:?}", s.errors());
    let msg = start["msg"].clone();
    let of_call = |kind: &str| {
        s.seen
            .iter()
            .find(|v| v["event"] == kind && v["thread"] == "rank[0]" && v["msg"] == msg)
            .unwrap_or_else(|| panic!("no {kind} of the forced receive"))
            .clone()
    };
    let stop = of_call("stop");
    assert_eq!(stop["call"]["forced"]["source"], source, "{stop}");
    assert_eq!(stop["call"]["matched"]["source"], source, "{stop}");
    let recv = of_call("recv");
    assert_eq!(recv["call"]["matched"]["source"], source, "{recv}");
    (s, code, last)
}

/// Forcing the other candidate (rank 2's level-1 send) provokes the thesis' race: the
/// message is truncated and the program says so, without crashing or hanging.
fn forced_wrong_match(imp: Impl) {
    if setup(imp).is_none() {
        return;
    }
    let (_s, code, last) = forced_match(imp, 2);
    assert_eq!(code, Some(1), "{last}");
    assert_eq!(last["matches_reference"], false, "{last}");
    let error = last["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("matched rank 2's message") && error.contains("MPI_ERR_TRUNCATE"),
        "{last}"
    );
}

/// Forcing the expected source (rank 1) sorts correctly.
fn forced_expected_match(imp: Impl) {
    if setup(imp).is_none() {
        return;
    }
    let (_s, code, last) = forced_match(imp, 1);
    assert_eq!(
        (code, &last["matches_reference"]),
        (Some(0), &json!(true)),
        "{last}"
    );
}

/// Commands that cannot apply are refused with a clear error and change nothing.
fn bad_commands(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let mut s = Ctl::mpirun(imp, &dir.join("ring"), &[]);
    s.all_held_at_start();
    let refused = |s: &mut Ctl, cmd: Value, words: &[&str]| {
        s.send(cmd.clone());
        let e = s.error(&format!("the refusal of {cmd}"));
        println!("{cmd} → {e}");
        for w in words {
            assert!(e.contains(w), "{cmd}: {e:?} does not say {w:?}");
        }
    };
    refused(
        &mut s,
        json!({"cmd":"break","op":"MPI_Sned","on":true}),
        &["MPI_Sned"],
    );
    refused(
        &mut s,
        json!({"cmd":"pause","thread":"rank[9]","on":true}),
        &["rank[9]", "rank[3]"],
    );
    s.send(json!({"cmd":"break","op":"MPI_Send","thread":"rank[0]","on":true}));
    s.send(json!({"cmd":"continue"}));
    let start = s.expect("rank[0]'s MPI_Send held", |v| {
        v["event"] == "start" && v["thread"] == "rank[0]" && v["held"] == true
    });
    let id = start["event_id"].clone();
    refused(
        &mut s,
        json!({"cmd":"match","event_id":id,"source":1}),
        &["MPI_Send", "not a wildcard"],
    );
    // The held event named by neither its number nor its thread: the error lists what
    // is held; by both, disagreeing: the error names both.
    refused(
        &mut s,
        json!({"cmd":"match","source":1}),
        &["held now", &format!("rank[0] (event {id})")],
    );
    refused(
        &mut s,
        json!({"cmd":"match","event_id":id,"thread":"rank[1]","source":0}),
        &[&format!("event {id} and thread rank[1] disagree"), "rank[0]"],
    );
    // rank[1]'s first start, released long ago.
    let gone = 1_000_000_000_000u64;
    refused(
        &mut s,
        json!({"cmd":"match","event_id":gone,"source":0}),
        &[&gone.to_string(), "not held"],
    );
    s.send(json!({"cmd":"pause","thread":"rank[0]","on":true}));
    s.send(json!({"cmd":"continue","event_id":id}));
    let send = s.expect("the held send", |v| {
        v["event"] == "send" && v["thread"] == "rank[0]" && v["held"] == true
    });
    let id = send["event_id"].clone();
    refused(
        &mut s,
        json!({"cmd":"edit","event_id":id,"content":[1, 2]}),
        &["2 values", "carries 1"],
    );
    refused(
        &mut s,
        json!({"cmd":"edit","event_id":id,"content":[9_223_372_036_854_775_808u64]}),
        &["does not fit 8 signed bytes"],
    );
    refused(
        &mut s,
        json!({"cmd":"edit","event_id":id,"content":"x"}),
        &["array of 1"],
    );
    s.send(json!({"cmd":"break","op":"MPI_Send","thread":"rank[0]","on":false}));
    s.send(json!({"cmd":"pause","thread":"rank[0]","on":false}));
    s.send(json!({"cmd":"continue"}));
    s.send(json!({"cmd":"wait","until":"exit","timeout_ms":30000}));
    let last = s.finish_correctly();
    assert_eq!(last["result"], 60, "nothing was edited: {last}");
    // One error per refused command (a command for every rank included).
    assert_eq!(s.errors().len(), 9, "{:?}", s.errors());
}

/// `racetrack mpirun` refuses a missing program, and a program built for the other
/// implementation, before launching anything.
fn bad_launch(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let run = |prog: &Path| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_racetrack"));
        cmd.args(["mpirun", "--ctl", "--impl", imp.key(), "-n", "4", "--"])
            .arg(prog)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut g = Group::spawn(&mut cmd);
        let mut err = String::new();
        g.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        let st = g.wait_until(Instant::now() + Duration::from_secs(10), "racetrack mpirun");
        (st.code(), err)
    };
    let missing = dir.join("no-such-program");
    let (code, err) = run(&missing);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(&missing.display().to_string()), "{err}");
    println!("missing program → {err}");
    let other = examples(imp.other()).join("ring");
    let (code, err) = run(&other);
    println!("wrong implementation → {err}");
    assert_eq!(code, Some(2), "{err}");
    let (linked, asked) = match imp {
        Impl::Mpich => ("Open MPI", "MPICH"),
        Impl::OpenMpi => ("MPICH", "Open MPI"),
    };
    assert!(
        err.contains(&format!("linked against {linked}, not {asked}")),
        "{err}"
    );
    assert!(!err.contains("ranks of"), "launched anyway: {err}");
}

on_both!(forced_wrong_irecv);

/// mergesort --irecv: rank 0's level-0 wildcard `MPI_Irecv`, forced onto rank 2, is
/// truncated; the `MPI_Wait` that completes it fails with `MPI_ERR_TRUNCATE` yet still
/// reports what the receive matched, in a `recv` naming the `MPI_Irecv`.
fn forced_wrong_irecv(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let mut s = Ctl::mpirun(imp, &dir.join("mergesort"), &["--size", "4000", "--irecv"]);
    s.all_held_at_start();
    s.send(json!({"cmd":"break","op":"MPI_Irecv","thread":"rank[0]","on":true}));
    s.send(json!({"cmd":"continue"}));
    let start = s.expect("rank[0]'s wildcard MPI_Irecv held", |v| {
        v["event"] == "start" && v["thread"] == "rank[0]" && v["held"] == true
    });
    assert_eq!(start["op"], "MPI_Irecv", "{start}");
    assert_eq!(start["call"]["peer"], "MPI_ANY_SOURCE", "{start}");
    s.send(json!({"cmd":"match","event_id":start["event_id"],"source":2}));
    s.send(json!({"cmd":"break","op":"MPI_Irecv","thread":"rank[0]","on":false}));
    s.send(json!({"cmd":"continue"}));
    s.send(json!({"cmd":"wait","until":"exit","timeout_ms":30000}));
    let (code, last) = s.finish();
    assert_eq!(code, Some(1), "{last}");
    let error = last["error"].as_str().unwrap_or_default();
    assert!(error.contains("MPI_ERR_TRUNCATE"), "{last}");
    let msg = start["msg"].clone();
    let recv = s
        .seen
        .iter()
        .find(|v| v["event"] == "recv" && v["thread"] == "rank[0]" && v["msg"] == msg)
        .unwrap_or_else(|| panic!("no recv of the truncated MPI_Irecv"))
        .clone();
    assert_eq!(recv["op"], "MPI_Irecv", "{recv}");
    assert_eq!(recv["call"]["matched"]["source"], 2, "{recv}");
    // The Wait that completed it reports the truncation.
    let wait = s
        .seen
        .iter()
        .find(|v| {
            v["event"] == "stop"
                && v["thread"] == "rank[0]"
                && v["op"] == "MPI_Wait"
                && !v["call"]["rc"].is_null()
        })
        .unwrap_or_else(|| panic!("no MPI_Wait stop with an error rc"))
        .clone();
    println!("{recv}\n{wait}");
}

on_both!(wrapper_reports);

/// The wrappers alone, under a stub core that prints each report (`agent/mpi/c/test/
/// run.sh`): every call reported once with its fields, a forced match, the Fortran
/// bindings, and a new communicator named `comm 1` in the `Comm_split` that made it and
/// in the calls on it.
fn wrapper_reports(imp: Impl) {
    if setup(imp).is_none() {
        return;
    }
    let [_, wrappers] = racetrack::mpirun::libs(racetrack_impl(imp), &bin_dir()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../agent/mpi/c/test/run.sh");
    let mut cmd = Command::new("sh");
    cmd.arg(&script)
        .arg(imp.key())
        .env("RACETRACK_MPI_LIB", &wrappers)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut g = Group::spawn(&mut cmd);
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = read(Box::new(g.0.stdout.take().unwrap()));
    let err = read(Box::new(g.0.stderr.take().unwrap()));
    // Deadline first: a hung run.sh is killed with its group, which ends the readers.
    let st = g.wait_until(Instant::now() + JOB_LIMIT, "run.sh");
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    assert!(
        st.success() && out.contains("all checks passed"),
        "run.sh {}: {st}\n{out}\n{err}",
        imp.key()
    );
}

on_both!(call_sites);

/// Each call's `site` is the file, line and function of the call in the program's
/// source, from its DWARF: for C (a PIE as `build.sh` builds it, and a `-no-pie` build
/// of the same source, whose DWARF addresses are absolute) and for Fortran.
fn call_sites(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/mpi");
    let (ring_c, ring_f90) = (src.join("ring.c"), src.join("ring.f90"));
    let no_pie = build_no_pie(imp, &ring_c, &dir);
    let c_calls = [
        ("MPI_Send", "MPI_Send(&token", "pass_token"),
        ("MPI_Allreduce", "MPI_Allreduce(", "main"),
    ];
    for prog in [dir.join("ring"), no_pie.clone()] {
        check_sites(imp, &prog, &ring_c, &c_calls);
    }
    let f_calls = [
        ("MPI_Send", "call MPI_Send(", "pass_token"),
        ("MPI_Allreduce", "call MPI_Allreduce(", "ring"),
    ];
    check_sites(imp, &dir.join("ring_f"), &ring_f90, &f_calls);
    let _ = std::fs::remove_file(no_pie);
}

/// ring.c built as a non-PIE executable (checked: ELF type `ET_EXEC`), into `dir`.
fn build_no_pie(imp: Impl, ring_c: &Path, dir: &Path) -> PathBuf {
    let out = dir.join(format!("ring-no-pie-{}", std::process::id()));
    let cc = imp.tools().0[0];
    let st = Command::new(cc)
        .args(["-std=c11", "-O2", "-g", "-no-pie", "-o"])
        .arg(&out)
        .arg(ring_c)
        .status()
        .unwrap();
    assert!(st.success(), "{cc} -no-pie failed");
    let elf = std::fs::read(&out).unwrap();
    assert_eq!(elf[16..18], [2, 0], "ET_EXEC: not a PIE");
    out
}

/// Run `prog` freely; every rank's `start` of each call (`op`, `text`, `function`) has
/// the site `SRC:LINE (function)`, LINE being the one line of `src` that contains `text`.
fn check_sites(imp: Impl, prog: &Path, src: &Path, calls: &[(&str, &str, &str)]) {
    let source = std::fs::read_to_string(src).unwrap();
    let mut s = Ctl::mpirun(imp, prog, &[]);
    s.all_held_at_start();
    s.send(json!({"cmd":"continue"}));
    s.send(json!({"cmd":"wait","until":"exit","timeout_ms":30000}));
    s.finish_correctly();
    let starts: Vec<Value> = events(&s.seen)
        .into_iter()
        .filter(|v| v["event"] == "start")
        .collect();
    for &(op, text, function) in calls {
        let lines: Vec<usize> = (source.lines().enumerate())
            .filter(|(_, l)| l.contains(text))
            .map(|(i, _)| i + 1)
            .collect();
        assert_eq!(lines.len(), 1, "{text:?} in {}: lines {lines:?}", src.display());
        let sites: BTreeMap<&str, &str> = (starts.iter())
            .filter(|v| v["op"] == op)
            .map(|v| (v["thread"].as_str().unwrap(), v["call"]["site"].as_str().unwrap()))
            .collect();
        assert_eq!(sites.len(), RANKS, "ranks calling {op} in {}", prog.display());
        for site in (starts.iter())
            .filter(|v| v["op"] == op)
            .map(|v| v["call"]["site"].as_str().unwrap())
        {
            println!("{} {op}: {site}", prog.display());
            let (place, func) = site.rsplit_once(" (").unwrap();
            let (file, line) = place.rsplit_once(':').unwrap();
            assert_eq!(
                Path::new(file).canonicalize().unwrap(),
                src.canonicalize().unwrap(),
                "{site}"
            );
            assert_eq!(line.parse::<usize>().unwrap(), lines[0], "{site}");
            assert_eq!(func, format!("{function})"), "{site}");
        }
    }
}

on_both!(poll_runs);

/// `ring --poll` (MPI_Irecv, then MPI_Test until it completes): a run of polls that find
/// nothing is one step, whose `stop` counts its calls (`polls`); rank by rank they add up
/// to the MPI_Test calls the program counted itself. A breakpoint on MPI_Test still holds
/// every poll, each as its own step.
fn poll_runs(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let mut s = Ctl::mpirun(imp, &dir.join("ring"), &["--poll", "--rounds", "20"]);
    s.all_held_at_start();
    s.send(json!({"cmd":"break","op":"MPI_Test","thread":"rank[1]","on":true}));
    s.send(json!({"cmd":"continue"}));
    let mut held = Vec::new();
    for i in 0..3 {
        let v = s.expect(&format!("rank[1]'s MPI_Test held, {i}"), |v| {
            v["event"] == "start" && v["held"] == true && v["thread"] == "rank[1]"
        });
        assert_eq!(v["op"], "MPI_Test", "{v}");
        held.push(v["msg"].clone());
        s.send(json!({"cmd":"continue","thread":"rank[1]"}));
    }
    held.dedup();
    assert_eq!(held.len(), 3, "three polls, three steps: {held:?}");
    s.send(json!({"cmd":"break","op":"MPI_Test","thread":"rank[1]","on":false}));
    s.send(json!({"cmd":"continue"}));
    s.send(json!({"cmd":"wait","until":"exit","timeout_ms":30000}));
    let last = s.finish_correctly();
    let (mut steps, mut calls) = (0, 0);
    for r in 0..RANKS {
        let t = format!("rank[{r}]");
        let is_test = |v: &&Value, ev: &str| v["event"] == ev && v["thread"] == t && v["op"] == "MPI_Test";
        let evs = events(&s.seen);
        let stops: Vec<&Value> = evs.iter().filter(|v| is_test(v, "stop")).collect();
        let starts = evs.iter().filter(|v| is_test(v, "start")).count();
        assert_eq!(starts, stops.len(), "{t}: one stop a step");
        for v in &stops {
            let polls = &v["call"]["polls"];
            assert!(polls.is_null() || polls.as_u64() > Some(1), "{t}: {v}");
        }
        let made: u64 = stops
            .iter()
            .map(|v| v["call"]["polls"].as_u64().unwrap_or(1))
            .sum();
        assert_eq!(
            Some(made),
            last["tests"][r].as_u64(),
            "{t}: polls reported, calls made"
        );
        assert_eq!(count(&s.seen, "start", &t), count(&s.seen, "stop", &t), "{t}");
        steps += stops.len() as u64;
        calls += made;
    }
    println!("{imp:?}: {calls} MPI_Test calls in {steps} steps");
    assert!(
        steps < calls,
        "runs of polls were merged: {calls} calls, {steps} steps"
    );
}

on_both!(idle_poll_run);

/// `ring --idle-ms 1500`: five MPI_Iprobe calls that find nothing, then 1.5 s without a
/// call. The polling step's `stop` (5 polls) comes while the rank computes, at the agent's
/// next tick, not with the rank's next call.
fn idle_poll_run(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let mut s = Ctl::mpirun(imp, &dir.join("ring"), &["--idle-ms", "1500"]);
    s.all_held_at_start();
    s.send(json!({"cmd":"continue"}));
    let stop = s.expect("rank[1]'s probing step", |v| {
        v["event"] == "stop" && v["thread"] == "rank[1]" && v["op"] == "MPI_Iprobe"
    });
    let stopped = Instant::now();
    assert_eq!(stop["call"]["polls"], json!(5), "{stop}");
    s.expect("rank[1]'s next call", |v| {
        v["event"] == "start" && v["thread"] == "rank[1]" && v["op"] == "MPI_Allreduce"
    });
    let gap = stopped.elapsed();
    assert!(
        gap > Duration::from_millis(1000),
        "the step's stop came {gap:?} before the rank's next call"
    );
    s.send(json!({"cmd":"wait","until":"exit","timeout_ms":30000}));
    s.finish_correctly();
}

// ---- record and replay ----

/// A file in a directory of this test's own, emptied first.
fn scratch(imp: Impl, name: &str) -> PathBuf {
    let dir = bin_dir()
        .join("mpi-replay")
        .join(format!("{}-{}", imp.key(), std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

/// `racetrack ARGS -- PROG PROG_ARGS` to its end: (exit code, the last stdout line as
/// JSON or `Null`, stderr).
fn racetrack_cli(args: &[&str], prog: &Path, prog_args: &[&str]) -> (Option<i32>, Value, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_racetrack"));
    cmd.args(args)
        .arg("--")
        .arg(prog)
        .args(prog_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    job_output(cmd, "racetrack")
}

/// Run `cmd` (in its own process group, killed at the deadline): (exit code, the last
/// stdout line as JSON or `Null`, stderr).
fn job_output(mut cmd: Command, what: &str) -> (Option<i32>, Value, String) {
    let mut g = Group::spawn(&mut cmd);
    let (mut out, mut err) = (g.0.stdout.take().unwrap(), g.0.stderr.take().unwrap());
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let st = g.wait_until(Instant::now() + JOB_LIMIT, what);
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    let last = out
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or(Value::Null);
    (st.code(), last, err)
}

/// A report without its timing (what must be the same in every replay).
fn outcome_of(report: &Value) -> Value {
    let mut r = report.clone();
    r.as_object_mut().expect("a JSON report").remove("elapsed_ms");
    r
}

fn read_log(path: &Path) -> racetrack_protocol::replay_log::ReplayLog {
    racetrack_protocol::replay_log::ReplayLog::read(path).unwrap_or_else(|e| panic!("{e}"))
}

/// Record `prog args` with `racetrack mpirun --record`; its report and its log.
fn record_job(
    imp: Impl,
    prog: &Path,
    args: &[&str],
    log: &Path,
) -> (Value, racetrack_protocol::replay_log::ReplayLog) {
    let l = log.to_str().unwrap();
    let (code, report, err) = racetrack_cli(
        &["mpirun", "--record", l, "--impl", imp.key(), "-n", "4"],
        prog,
        args,
    );
    assert_eq!(code, Some(0), "the recorded run: {err}");
    assert!(err.contains("racetrack: replay log"), "{err}");
    (report, read_log(log))
}

/// The ranks of `imp` with the MPI library preloaded and `env`, running `prog args`
/// free (no debugger): (exit code, last stdout JSON, stderr).
fn preloaded_run(
    imp: Impl,
    prog: &Path,
    args: &[&str],
    env: &[(&str, String)],
) -> (Option<i32>, Value, String) {
    let libs = racetrack::mpirun::libs(racetrack_impl(imp), &bin_dir()).unwrap();
    let mut vars = vec![(
        "LD_PRELOAD",
        format!("{}:{}", libs[0].display(), libs[1].display()),
    )];
    vars.extend(env.iter().cloned());
    let mut cmd = imp.mpiexec(RANKS, &vars);
    cmd.arg(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    job_output(cmd, "the preloaded job")
}

on_both!(
    replay_master_worker,
    replay_polls,
    replay_divergence,
    replay_under_ctl
);

/// master_worker, whose rank 0 takes results with `MPI_Recv(MPI_ANY_SOURCE,
/// MPI_ANY_TAG)`: recorded, then replayed 20 times with the recorded outcome (which
/// worker did how many tasks) and the recorded matches, each replay recorded in turn and
/// its log compared choice by choice. Free runs differ, so the comparison can fail.
fn replay_master_worker(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let prog = dir.join("master_worker");
    let args = ["--tasks", "40"];
    let log = scratch(imp, "mw.rtrec");
    let (recorded, rec_log) = record_job(imp, &prog, &args, &log);
    assert_eq!(recorded["matches_reference"], true, "{recorded}");
    // Rank 0 matched 40 results from MPI_ANY_SOURCE; the workers' receives name rank 0.
    assert_eq!(rec_log.ranks.len(), RANKS);
    assert_eq!(rec_log.ranks[0].choices.len(), 40, "{:?}", rec_log.ranks[0]);
    assert!(rec_log.ranks[1..].iter().all(|r| r.choices.is_empty()));
    assert!(rec_log.complete(), "every rank reached MPI_Finalize");
    let sources: Vec<i32> = rec_log.ranks[0]
        .choices
        .iter()
        .map(|c| match c.what {
            racetrack_protocol::replay_log::Chose::Match { source, tag } => {
                assert_eq!(tag, 2, "a result's tag");
                source
            }
            ref other => panic!("rank 0's choice {other:?}"),
        })
        .collect();
    let mut counted = [0i64; RANKS];
    for s in &sources {
        counted[usize::try_from(*s).unwrap()] += 1;
    }
    assert_eq!(
        recorded["per_worker"],
        json!(counted[1..]),
        "the log's matches are the report's tasks per worker"
    );

    // Free runs do not all come out as the recording did.
    let differs = (0..20).any(|_| {
        let (code, free) = plain_run(imp, &prog, &args);
        assert_eq!(code, Some(0));
        free["per_worker"] != recorded["per_worker"]
    });
    assert!(
        differs,
        "20 free runs all gave {}: the comparison could not fail",
        recorded["per_worker"]
    );

    let l = log.to_str().unwrap();
    for i in 0..20 {
        if i % 2 == 0 {
            let (code, report, err) = racetrack_cli(&["replay", l], &prog, &args);
            assert_eq!(code, Some(0), "replay {i}: {err}");
            assert_eq!(outcome_of(&report), outcome_of(&recorded), "replay {i}");
        } else {
            // Replayed and recorded at once: the replay's own log has the same choices.
            let again = scratch(imp, &format!("again-{i}.rtrec"));
            let a = again.to_str().unwrap().to_owned();
            let env = [
                ("RACETRACK_REPLAY", l.to_owned()),
                ("RACETRACK_RECORD", a.clone()),
            ];
            let (code, report, err) = preloaded_run(imp, &prog, &args, &env);
            assert_eq!(code, Some(0), "replay {i}: {err}");
            assert_eq!(outcome_of(&report), outcome_of(&recorded), "replay {i}");
            let merged = racetrack::mpirun::merge_parts(&a, RANKS, Some(&rec_log.header), false).unwrap();
            assert!(merged.unfinished.is_empty());
            let replayed = read_log(&again);
            for r in 0..RANKS {
                assert_eq!(
                    replayed.ranks[r], rec_log.ranks[r],
                    "replay {i}: rank {r}'s matches and calls"
                );
            }
        }
    }

    // The log names ranks and tags, not handles: it replays under the other implementation.
    let other = examples(imp.other()).join("master_worker");
    let (code, report, err) = racetrack_cli(&["replay", l], &other, &args);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        outcome_of(&report),
        outcome_of(&recorded),
        "replayed under {}",
        imp.other().key()
    );
}

/// ring --poll, whose ranks spin on `MPI_Test` and count the calls: the counts are
/// timing's, and a replay makes exactly the recorded ones (missed tests are forced to
/// find nothing, the one that found waits for its message).
fn replay_polls(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let prog = dir.join("ring");
    let args = ["--poll"];
    let log = scratch(imp, "ring-poll.rtrec");
    let (recorded, rec_log) = record_job(imp, &prog, &args, &log);
    let tests: i64 = recorded["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_i64().unwrap())
        .sum();
    let misses: u64 = rec_log
        .ranks
        .iter()
        .flat_map(|r| &r.choices)
        .map(|c| match c.what {
            racetrack_protocol::replay_log::Chose::Miss { n } => n,
            _ => 0,
        })
        .sum();
    // Each rank's last test of a round found its message; the others missed.
    assert_eq!(
        misses,
        u64::try_from(tests).unwrap() - 3 * RANKS as u64,
        "the log's misses are the program's tests less those that found: {recorded}"
    );
    assert!(
        rec_log.choices() <= 3 * RANKS,
        "one run of misses per round and rank at most: {} choices",
        rec_log.choices()
    );
    let l = log.to_str().unwrap();
    for i in 0..3 {
        let (code, report, err) = racetrack_cli(&["replay", l], &prog, &args);
        assert_eq!(code, Some(0), "replay {i}: {err}");
        assert_eq!(
            report["tests"], recorded["tests"],
            "replay {i}: every rank's MPI_Test calls"
        );
        assert_eq!(outcome_of(&report), outcome_of(&recorded));
    }
}

/// A replay that cannot follow its log says where: other arguments are refused before
/// the job starts; a rank whose calls differ from the recorded ones stops the job (exit
/// code 3) naming its call; a damaged log is refused naming its byte.
fn replay_divergence(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let mw = dir.join("master_worker");
    let log = scratch(imp, "mw-div.rtrec");
    record_job(imp, &mw, &["--tasks", "12"], &log);
    let l = log.to_str().unwrap();

    // A log nobody can write is refused before the job starts.
    let (code, _, err) = racetrack_cli(
        &["mpirun", "--record", "/nonexistent-dir/mw.rtrec", "-n", "4"],
        &mw,
        &["--tasks", "12"],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("cannot write the replay log /nonexistent-dir/mw.rtrec"),
        "{err}"
    );

    let (code, _, err) = racetrack_cli(&["replay", l], &mw, &["--tasks", "13"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("master_worker --tasks 12") && err.contains("--tasks 13"),
        "{err}"
    );

    // The ranks themselves, given another program's log (as a job started by hand is).
    // The rank exits with code 3; Hydra may report the others' kill signal instead.
    let (code, _, err) = preloaded_run(imp, &dir.join("ring"), &[], &[("RACETRACK_REPLAY", l.to_owned())]);
    assert!(code.is_some_and(|c| c != 0), "{code:?}: {err}");
    assert!(
        err.contains("racetrack: replay diverged from the log: rank "),
        "{err}"
    );
    // Whichever rank gets there first: "its call 7 is MPI_Send, and the recorded rank
    // made only 6 calls", or "its call 9 is MPI_Bcast; the recorded rank's was MPI_Recv".
    assert!(
        err.contains(": its call ") && err.contains(" is MPI_") && err.contains("the recorded rank"),
        "the call that differs is named: {err}"
    );

    // Damaged: cut inside a record, and not a log at all.
    let bytes = std::fs::read(&log).unwrap();
    let cut = scratch(imp, "cut.rtrec");
    std::fs::write(&cut, &bytes[..bytes.len() - 3]).unwrap();
    let (code, _, err) = racetrack_cli(&["replay", cut.to_str().unwrap()], &mw, &["--tasks", "12"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("damaged replay log at byte"), "{err}");
    let (code, _, err) = preloaded_run(
        imp,
        &mw,
        &["--tasks", "12"],
        &[("RACETRACK_REPLAY", cut.to_str().unwrap().to_owned())],
    );
    assert_ne!(code, Some(0), "{err}");
    assert!(
        err.contains("damaged replay log at byte"),
        "each rank refuses it too: {err}"
    );
}

/// A replay under the controller: every rank held at its start, a breakpoint on rank 0's
/// receives holds, the `recv` events show the recorded sources in order, and the result
/// is the recording's. `take_over` answers from every rank and the job then runs free.
fn replay_under_ctl(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let prog = dir.join("master_worker");
    let args = ["--tasks", "20"];
    let log = scratch(imp, "mw-ctl.rtrec");
    let (recorded, rec_log) = record_job(imp, &prog, &args, &log);
    let sources: Vec<i64> = rec_log.ranks[0]
        .choices
        .iter()
        .filter_map(|c| match c.what {
            racetrack_protocol::replay_log::Chose::Match { source, .. } => Some(i64::from(source)),
            _ => None,
        })
        .collect();
    let l = log.to_str().unwrap();
    let replay_ctl = |script: Option<&Path>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_racetrack"));
        cmd.args(["replay", l, "--ctl"]);
        if let Some(s) = script {
            cmd.arg("--script").arg(s);
        }
        cmd.arg("--").arg(&prog).args(args);
        Ctl::spawn(cmd)
    };

    let mut c = replay_ctl(None);
    c.all_held_at_start();
    c.send(json!({"cmd":"break","op":"MPI_Recv","thread":"rank[0]","on":true}));
    c.send(json!({"cmd":"continue"}));
    let held = c.expect("held at rank 0's MPI_Recv", |v| {
        v["event"] == "start" && v["op"] == "MPI_Recv" && v["thread"] == "rank[0]" && v["held"] == true
    });
    assert_eq!(held["reason"], "break", "{held}");
    c.send(json!({"cmd":"break","op":"MPI_Recv","thread":"rank[0]","on":false}));
    c.send(json!({"cmd":"continue"}));
    let report = c.finish_correctly();
    assert_eq!(outcome_of(&report), outcome_of(&recorded));
    let seen: Vec<i64> = events(&c.seen)
        .iter()
        .filter(|v| v["event"] == "recv" && v["thread"] == "rank[0]")
        .map(|v| v["call"]["matched"]["source"].as_i64().unwrap())
        .collect();
    assert_eq!(
        seen, sources,
        "rank 0's receives matched the recorded sources, in order"
    );

    // A scenario: a command sent to every rank is answered there (interactively, only a
    // refusal of one is).
    let script = scratch(imp, "take-over.jsonl");
    let waits: String = (0..RANKS)
        .map(|r| format!("{{\"cmd\":\"wait\",\"until\":\"held\",\"thread\":\"rank[{r}]\"}}\n"))
        .collect();
    std::fs::write(
        &script,
        format!("{waits}{{\"cmd\":\"take_over\"}}\n{{\"cmd\":\"continue\"}}\n{{\"cmd\":\"wait\",\"until\":\"exit\",\"timeout_ms\":30000}}\n"),
    )
    .unwrap();
    let mut c = replay_ctl(Some(&script));
    let ok = c.expect("take_over answered", |v| {
        v["cmd"] == "take_over" || v["event"] == "error"
    });
    assert_eq!(ok["event"], "ok", "{ok}");
    assert!(
        ok["target"]
            .as_str()
            .unwrap()
            .contains("taken over after 1 of the"),
        "{ok}"
    );
    c.finish_correctly();
}

on_both!(scenario_from_session);

/// The thesis' race provoked in a session and saved, by the shipped script
/// `examples/mpi/mergesort_race.jsonl`: rank 0's first wildcard receive forced onto rank
/// 2's message (truncated) by `match` naming the held rank, no event id in the file;
/// `save_scenario` while every rank is held at `MPI_Finalize`. Replayed with no debugger,
/// the race happens every time; a free run sorts correctly.
fn scenario_from_session(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let prog = dir.join("mergesort");
    let args = ["--size", "4000"];
    let scenario = scratch(imp, "mergesort-race.rtrec");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/mpi/mergesort_race.jsonl");
    let text = std::fs::read_to_string(&script).unwrap();
    let commands: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        commands.iter().all(|c| c.get("event_id").is_none()),
        "the scenario names no event: {commands:?}"
    );
    assert!(
        commands
            .iter()
            .any(|c| c["cmd"] == "match" && c["thread"] == "rank[0]" && c["source"] == 2),
        "the scenario forces rank[0]'s receive by its thread: {commands:?}"
    );
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_racetrack"));
    cmd.args(["mpirun", "--ctl", "--script"])
        .arg(&script)
        .arg("--set")
        .arg(format!("SCENARIO={}", scenario.display()))
        .args(["--impl", imp.key(), "-n"])
        .arg(RANKS.to_string())
        .arg("--")
        .arg(&prog)
        .args(args);
    let mut s = Ctl::spawn(cmd);
    let held = s.expect("rank[0]'s wildcard receive held", |v| {
        v["event"] == "start" && v["thread"] == "rank[0]" && v["op"] == "MPI_Recv" && v["held"] == true
    });
    let matched = s.expect("match answered", |v| v["cmd"] == "match" || v["event"] == "error");
    assert_eq!(matched["event"], "ok", "{matched}");
    // The match applied to the receive rank[0] was held at, named by the thread.
    assert_eq!(
        matched["target"],
        held["event_id"].to_string(),
        "{matched} {held}"
    );
    let ok = s.expect("save_scenario answered", |v| {
        v["cmd"] == "save_scenario" || v["event"] == "error"
    });
    assert_eq!(ok["event"], "ok", "{ok}");
    assert!(ok["target"].as_str().unwrap().contains("choices in"), "{ok}");
    let (code, last) = s.finish();
    assert_eq!(
        (code, &last["matches_reference"]),
        (Some(1), &json!(false)),
        "{last}"
    );

    let log = read_log(&scenario);
    assert!(
        log.end.as_ref().is_some_and(|e| e.prefix),
        "a scenario is a prefix"
    );
    let first = &log.ranks[0].choices[0];
    assert_eq!(
        first.what,
        racetrack_protocol::replay_log::Chose::Match { source: 2, tag: 0 },
        "{log:?}"
    );
    let (code, free) = plain_run(imp, &prog, &args);
    assert_eq!(
        (code, &free["matches_reference"]),
        (Some(0), &json!(true)),
        "{free}"
    );
    for i in 0..5 {
        let (code, report, err) = racetrack_cli(&["replay", scenario.to_str().unwrap()], &prog, &args);
        assert_eq!(code, Some(1), "replay {i}: {err}");
        assert_eq!(report["matches_reference"], false, "replay {i}: {report}");
        let error = report["error"].as_str().unwrap_or_default();
        assert!(error.contains("matched rank 2's message"), "replay {i}: {report}");
    }
}

on_both!(replay_clock);

/// ring --min-ms, whose rank 0 decides by `MPI_Wtime` how many rounds to make: the log
/// keeps rank 0's readings (one per decision, plus the start and the end: none of the MPI
/// library's own), and a replay makes the recorded number of rounds and reports the
/// recorded time, exactly. Free runs make different numbers of rounds.
fn replay_clock(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let prog = dir.join("ring");
    // MPICH's ranks, oversubscribed, make a round in about 10 ms; Open MPI's in µs.
    let args = ["--rounds", "1", "--min-ms", "300"];
    let log = scratch(imp, "ring-clock.rtrec");
    let (recorded, rec_log) = record_job(imp, &prog, &args, &log);
    let rounds = recorded["rounds"].as_u64().unwrap();
    assert!(
        rounds >= 2,
        "the clock decided at least once to go on: {recorded}"
    );
    assert_eq!(
        rec_log.ranks[0].clocks.len() as u64,
        rounds + 2,
        "rank 0 read the clock at its start, before each round after the first, and at its end"
    );
    let differs = (0..10).any(|_| {
        let (code, free) = plain_run(imp, &prog, &args);
        assert_eq!(code, Some(0));
        free["rounds"] != recorded["rounds"]
    });
    assert!(
        differs,
        "10 free runs all made {rounds} rounds: the comparison could not fail"
    );
    for i in 0..3 {
        let (code, report, err) = racetrack_cli(&["replay", log.to_str().unwrap()], &prog, &args);
        assert_eq!(code, Some(0), "replay {i}: {err}");
        assert_eq!(
            report, recorded,
            "replay {i}: the same rounds, and the recorded elapsed_ms"
        );
    }
}

/// The merge sort on `imp`, rank 0's first wildcard receive forced onto rank 2 (the
/// truncation), its breakpoint off again: the session the scenario tests save.
fn forced_mergesort_race(imp: Impl, prog: &Path, args: &[&str]) -> Ctl {
    let mut s = Ctl::mpirun(imp, prog, args);
    s.all_held_at_start();
    s.send(json!({"cmd":"break","op":"MPI_Recv","thread":"rank[0]","on":true}));
    s.send(json!({"cmd":"continue"}));
    s.expect("rank[0]'s receive held", |v| {
        v["event"] == "start" && v["thread"] == "rank[0]" && v["op"] == "MPI_Recv" && v["held"] == true
    });
    s.send(json!({"cmd":"match","thread":"rank[0]","source":2}));
    s.expect("the match applied", |v| v["event"] == "ok" && v["cmd"] == "match");
    s.send(json!({"cmd":"break","op":"MPI_Recv","thread":"rank[0]","on":false}));
    s
}

/// `scenario` replayed twice with no debugger: the truncation each time.
fn replays_the_truncation(scenario: &Path, prog: &Path, args: &[&str]) {
    for i in 0..2 {
        let (code, report, err) = racetrack_cli(&["replay", scenario.to_str().unwrap()], prog, args);
        assert_eq!(code, Some(1), "replay {i}: {err}");
        let error = report["error"].as_str().unwrap_or_default();
        assert!(error.contains("matched rank 2's message"), "replay {i}: {report}");
    }
}

on_both!(scenario_after_ranks_finished);

/// A scenario saved while rank 0 is held at `MPI_Finalize` and the other ranks may be
/// gone (their parts are those they sent as they finished): it replays the forced race.
fn scenario_after_ranks_finished(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let prog = dir.join("mergesort");
    let args = ["--size", "4000"];
    let scenario = scratch(imp, "after-finish.rtrec");
    let mut s = forced_mergesort_race(imp, &prog, &args);
    s.send(json!({"cmd":"break","op":"MPI_Finalize","thread":"rank[0]","on":true}));
    s.send(json!({"cmd":"continue","thread":"rank[0]"}));
    s.expect("rank[0] held at MPI_Finalize", |v| {
        v["event"] == "start" && v["thread"] == "rank[0]" && v["op"] == "MPI_Finalize" && v["held"] == true
    });
    // The others finish meanwhile: their stops of MPI_Finalize, or their exit.
    s.send(json!({"cmd":"save_scenario","path":scenario.display().to_string()}));
    let ok = s.expect("save_scenario answered", |v| {
        v["cmd"] == "save_scenario" || v["event"] == "error"
    });
    assert_eq!(ok["event"], "ok", "{ok}");
    eprintln!("{}: {}", imp.key(), ok["target"]);
    s.send(json!({"cmd":"continue"}));
    s.send(json!({"cmd":"wait","until":"exit","timeout_ms":30000}));
    let (code, last) = s.finish();
    assert_eq!(
        (code, &last["matches_reference"]),
        (Some(1), &json!(false)),
        "{last}"
    );
    replays_the_truncation(&scenario, &prog, &args);
}

on_both!(scenario_after_exit);

/// A forced race saved after the whole job exited, from the ranks' parts as they
/// finished: it replays the race.
fn scenario_after_exit(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let prog = dir.join("mergesort");
    let args = ["--size", "4000"];
    let scenario = scratch(imp, "after-exit.rtrec");
    let mut s = forced_mergesort_race(imp, &prog, &args);
    s.send_together(&[
        json!({"cmd":"continue"}),
        json!({"cmd":"wait","until":"exit","timeout_ms":30000}),
        json!({"cmd":"save_scenario","path":scenario.display().to_string(),"req":77}),
    ]);
    let ok = s.expect("save_scenario answered", |v| v["req"] == 77);
    assert_eq!(ok["event"], "ok", "{ok}");
    let target = ok["target"].as_str().unwrap();
    assert!(
        target
            .ends_with("(ranks 0, 1, 2, 3: their parts as they finished) (the session as the program ended)"),
        "{target}"
    );
    let (code, last) = s.finish();
    assert_eq!(
        (code, &last["matches_reference"]),
        (Some(1), &json!(false)),
        "{last}"
    );
    assert!(
        s.seen.iter().position(|v| v["req"] == 77) < s.seen.iter().position(|v| v["event"] == "exit"),
        "saved before the controller ended"
    );
    replays_the_truncation(&scenario, &prog, &args);
}

on_both!(sendrecv_wildcard_forced);

/// An `MPI_Sendrecv` from `MPI_ANY_SOURCE` is a receive like any other: race mode (a
/// break on `peer: MPI_ANY_SOURCE`) holds it, its `source` says so, and `match` by thread
/// forces either sender's message first.
fn sendrecv_wildcard_forced(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let prog = dir.join("sendrecv_any");
    for source in [1, 2] {
        let mut s = Ctl::mpirun(imp, &prog, &[]);
        s.all_held_at_start();
        s.send(json!({"cmd":"break","op":"*","thread":"rank[0]","on":true,"when":{"peer":"MPI_ANY_SOURCE"}}));
        s.send(json!({"cmd":"continue"}));
        let held = s.expect("rank[0] held at its sendrecv", |v| {
            v["event"] == "start" && v["thread"] == "rank[0]" && v["held"] == true
        });
        assert_eq!(held["op"], "MPI_Sendrecv", "{held}");
        assert_eq!(
            (&held["call"]["peer"], &held["call"]["source"]),
            (&json!(1), &json!("MPI_ANY_SOURCE")),
            "{held}"
        );
        s.send(json!({"cmd":"match","thread":"rank[0]","source":source}));
        s.expect("the match applied", |v| v["event"] == "ok" && v["cmd"] == "match");
        s.send(
            json!({"cmd":"break","op":"*","thread":"rank[0]","on":false,"when":{"peer":"MPI_ANY_SOURCE"}}),
        );
        s.send(json!({"cmd":"continue"}));
        s.send(json!({"cmd":"wait","until":"exit","timeout_ms":30000}));
        let (code, last) = s.finish();
        assert_eq!((code, &last["first"]), (Some(0), &json!(source)), "{last}");
        assert!(s.errors().is_empty(), "{:?}", s.errors());
    }
}

on_both!(coverage_calls_are_reported);

/// The calls of `examples/mpi/coverage.c` beyond the older examples' (nonblocking
/// collectives, persistent requests, `MPI_Request_free`, matched probes, one-sided) are
/// each reported, a `start` and a `stop` per call on every rank, with their parameters and
/// a site in coverage.c; started persistent sends and receives and matched receives are
/// messages linked to their sends; the job ends with the right result and no deadlock.
fn coverage_calls_are_reported(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let mut s = Ctl::mpirun(imp, &dir.join("coverage"), &[]);
    s.all_held_at_start();
    s.send(json!({"cmd":"continue"}));
    s.send(json!({"cmd":"wait","until":"exit","timeout_ms":30000}));
    let last = s.finish_correctly();
    assert_eq!(last["result"], last["reference"], "{last}");
    assert!(s.errors().is_empty(), "{:?}", s.errors());
    let starts = starts_per_rank(&s.seen);
    let once = [
        "MPI_Ibarrier",
        "MPI_Ibcast",
        "MPI_Ireduce",
        "MPI_Iallreduce",
        "MPI_Igather",
        "MPI_Igatherv",
        "MPI_Iscatter",
        "MPI_Iscatterv",
        "MPI_Iallgather",
        "MPI_Iallgatherv",
        "MPI_Ialltoall",
        "MPI_Ialltoallv",
        "MPI_Ireduce_scatter",
        "MPI_Iscan",
        "MPI_Iexscan",
        "MPI_Send_init",
        "MPI_Ssend_init",
        "MPI_Bsend_init",
        "MPI_Rsend_init",
        "MPI_Imrecv",
        "MPI_Win_create",
        "MPI_Win_allocate",
        "MPI_Win_lock",
        "MPI_Win_unlock",
        "MPI_Win_lock_all",
        "MPI_Win_unlock_all",
        "MPI_Win_flush",
        "MPI_Win_flush_all",
        "MPI_Win_post",
        "MPI_Win_start",
        "MPI_Win_complete",
        "MPI_Win_wait",
        "MPI_Accumulate",
    ];
    let more = [
        ("MPI_Recv_init", 4),
        ("MPI_Start", 6),
        ("MPI_Startall", 2),
        ("MPI_Request_free", 9),
        ("MPI_Win_fence", 5),
        ("MPI_Win_free", 2),
        ("MPI_Put", 4),
        ("MPI_Get", 2),
    ];
    for r in 0..RANKS {
        let t = format!("rank[{r}]");
        let mine = &starts[&t];
        let probes = if r == 0 { 3 } else { 1 };
        let expected = once
            .iter()
            .map(|c| (*c, 1))
            .chain(more)
            .chain([("MPI_Mprobe", probes), ("MPI_Mrecv", probes)]);
        for (call, n) in expected {
            assert_eq!(mine.get(call), Some(&n), "{t}: starts of {call}: {mine:?}");
        }
        // A run of empty polls is one step: at least one.
        assert!(mine.get("MPI_Improbe").is_some_and(|n| *n >= 1), "{t}: {mine:?}");
        assert_eq!(count(&s.seen, "start", &t), count(&s.seen, "stop", &t), "{t}");
    }
    check_coverage_parameters(&events(&s.seen));
}

/// The parameters and links of coverage.c's calls (see [`coverage_calls_are_reported`]).
fn check_coverage_parameters(evs: &[Value]) {
    let rank_of = |t: &Value| -> i64 { t.as_str().unwrap()[5..].trim_end_matches(']').parse().unwrap() };
    let n = RANKS as i64;
    let new_ops: BTreeSet<&str> = [
        "MPI_Ibcast",
        "MPI_Start",
        "MPI_Mprobe",
        "MPI_Mrecv",
        "MPI_Put",
        "MPI_Win_fence",
        "MPI_Win_create",
    ]
    .into_iter()
    .collect();
    let mut seen_ops = BTreeSet::new();
    for e in evs.iter().filter(|e| e["event"] == "start") {
        let op = e["op"].as_str().unwrap();
        let c = &e["call"];
        let r = rank_of(&e["thread"]);
        let (right, left) = ((r + 1) % n, (r + n - 1) % n);
        let site = c["site"].as_str().unwrap_or_default();
        if op != "MPI_Init" && op != "MPI_Finalize" {
            assert!(site.contains("coverage.c:"), "a site in coverage.c: {e}");
        }
        match op {
            "MPI_Ibcast" | "MPI_Ireduce" | "MPI_Igather" | "MPI_Iscatterv" => {
                assert_eq!(
                    (&c["root"], &c["comm"]),
                    (&json!(0), &json!("MPI_COMM_WORLD")),
                    "{e}"
                );
                assert_eq!(
                    (&c["count"], &c["datatype"]),
                    (
                        &json!(if op == "MPI_Iscatterv" && r == 0 { n } else { 1 }),
                        &json!("MPI_INT")
                    ),
                    "{e}"
                );
            }
            "MPI_Send_init" | "MPI_Ssend_init" | "MPI_Bsend_init" | "MPI_Rsend_init" => {
                assert_eq!((&c["peer"], &c["count"]), (&json!(right), &json!(1)), "{e}");
            }
            "MPI_Recv_init" => assert_eq!(c["peer"], json!(left), "{e}"),
            "MPI_Start" => assert!(c["peer"] == json!(left) || c["peer"] == json!(right), "{e}"),
            "MPI_Startall" => assert_eq!(c["count"], json!(2), "{e}"),
            "MPI_Mprobe" if c["tag"] == 30 => assert_eq!(c["peer"], json!(left), "{e}"),
            "MPI_Mprobe" => {
                assert_eq!(
                    (r, &c["peer"], &c["tag"]),
                    (0, &json!("MPI_ANY_SOURCE"), &json!(32)),
                    "{e}"
                )
            }
            "MPI_Mrecv" | "MPI_Imrecv" => assert_eq!(c["comm"], "MPI_COMM_WORLD", "{e}"),
            "MPI_Win_create" | "MPI_Win_allocate" => assert_eq!(c["comm"], "MPI_COMM_WORLD", "{e}"),
            "MPI_Put" | "MPI_Get" | "MPI_Win_lock" | "MPI_Win_flush" => {
                assert_eq!(c["peer"], json!(right), "{e}");
                assert!(c["comm"].as_str().is_some_and(|w| w.starts_with("win ")), "{e}");
            }
            "MPI_Accumulate" => assert_eq!((&c["peer"], &c["count"]), (&json!(0), &json!(1)), "{e}"),
            "MPI_Win_fence" => assert!(c["comm"] == "win 1" || c["comm"] == "win 2", "{e}"),
            _ => {}
        }
        seen_ops.insert(op);
    }
    assert!(new_ops.is_subset(&seen_ops), "{seen_ops:?}");
    // Started persistent sends are messages; their receives, the matched ones and the
    // started persistent receives, are linked to them.
    let sends: BTreeMap<u64, &Value> = evs
        .iter()
        .filter(|e| e["event"] == "send")
        .map(|e| (e["event_id"].as_u64().unwrap(), e))
        .collect();
    let started_sends = sends.values().filter(|e| e["op"] == "MPI_Start").count();
    assert_eq!(
        started_sends,
        3 * RANKS,
        "Start of a Send, Bsend and Rsend on each rank"
    );
    for op in ["MPI_Start", "MPI_Mrecv", "MPI_Imrecv"] {
        let recvs: Vec<&Value> = evs
            .iter()
            .filter(|e| e["event"] == "recv" && e["op"] == op)
            .collect();
        let want = match op {
            "MPI_Start" => 3 * RANKS,
            "MPI_Mrecv" => RANKS + 2,
            _ => RANKS,
        };
        assert_eq!(recvs.len(), want, "{op}: {recvs:?}");
        for e in recvs {
            let from = e["from"]["event_id"]
                .as_u64()
                .unwrap_or_else(|| panic!("unlinked: {e}"));
            let send = sends.get(&from).unwrap_or_else(|| panic!("no such send: {e}"));
            assert_eq!(
                rank_of(&send["thread"]),
                e["call"]["matched"]["source"].as_i64().unwrap(),
                "{e} {send}"
            );
            assert_eq!(send["call"]["tag"], e["call"]["matched"]["tag"], "{e} {send}");
        }
    }
}

on_both!(ibarrier_wait_deadlock);

/// Rank 0 waits for an `MPI_Ibarrier` the others never enter (they receive from rank 0,
/// which sends after its wait: `deadlock --kind ibarrier`): a deadlock, rank 0 in
/// `MPI_Wait` waiting for any of the others, each of them for rank 0.
fn ibarrier_wait_deadlock(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let mut s = Ctl::mpirun(imp, &dir.join("deadlock"), &["--kind", "ibarrier"]);
    s.all_held_at_start();
    s.send(json!({"cmd":"continue"}));
    let d = s.expect("deadlock", |v| v["event"] == "deadlock");
    let waits = d["waits"].as_array().unwrap();
    assert_eq!(waits.len(), RANKS, "{d}");
    let w0 = waits.iter().find(|w| w["thread"] == "rank[0]").unwrap();
    assert_eq!(
        (w0["call"].as_str(), w0["needs"].as_str(), &w0["waits_for"]),
        (
            Some("MPI_Wait"),
            Some("any"),
            &json!(["rank[1]", "rank[2]", "rank[3]"])
        ),
        "{d}"
    );
    assert!(
        w0["site"].as_str().is_some_and(|s| s.contains("deadlock.c:")),
        "{w0}"
    );
    for w in waits.iter().filter(|w| w["thread"] != "rank[0]") {
        assert_eq!(
            (w["call"].as_str(), &w["waits_for"]),
            (Some("MPI_Recv"), &json!(["rank[0]"])),
            "{d}"
        );
    }
    assert_eq!(d["cycle"].as_array().map(Vec::len), Some(2), "{d}");
    // The wait's request is the Ibarrier's: rank 0 reported that call before it.
    let ibarrier = events(&s.seen)
        .into_iter()
        .find(|e| e["event"] == "stop" && e["thread"] == "rank[0]" && e["op"] == "MPI_Ibarrier");
    assert!(ibarrier.is_some(), "rank 0's MPI_Ibarrier");
    assert!(s.proc.0.try_wait().unwrap().is_none(), "the job still runs");
}

on_both!(mprobe_wildcard_forced);

/// A wildcard `MPI_Mprobe` is a race point: held by a break on `MPI_ANY_SOURCE`, `match`
/// forces either sender's message first (coverage.c's rank 0 probes tag 32 twice; ranks
/// 1 and 2 send one each), and `MPI_Mrecv` receives the message probed.
fn mprobe_wildcard_forced(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let prog = dir.join("coverage");
    for source in [1, 2] {
        let mut s = Ctl::mpirun(imp, &prog, &[]);
        s.all_held_at_start();
        s.send(json!({"cmd":"break","op":"MPI_Mprobe","thread":"rank[0]","on":true,"when":{"peer":"MPI_ANY_SOURCE"}}));
        s.send(json!({"cmd":"continue"}));
        let held = s.expect("rank[0] held at its wildcard probe", |v| {
            v["event"] == "start" && v["thread"] == "rank[0]" && v["held"] == true
        });
        assert_eq!(
            (&held["op"], &held["call"]["peer"], &held["call"]["tag"]),
            (&json!("MPI_Mprobe"), &json!("MPI_ANY_SOURCE"), &json!(32)),
            "{held}"
        );
        s.send(json!({"cmd":"match","thread":"rank[0]","source":source}));
        s.expect("the match applied", |v| v["event"] == "ok" && v["cmd"] == "match");
        s.send(json!({"cmd":"break","op":"MPI_Mprobe","thread":"rank[0]","on":false,"when":{"peer":"MPI_ANY_SOURCE"}}));
        s.send(json!({"cmd":"continue"}));
        s.send(json!({"cmd":"wait","until":"exit","timeout_ms":30000}));
        let last = s.finish_correctly();
        assert_eq!(last["first"], json!(source), "{last}");
        assert!(s.errors().is_empty(), "{:?}", s.errors());
        let mrecv = events(&s.seen).into_iter().find(|e| {
            e["event"] == "recv"
                && e["thread"] == "rank[0]"
                && e["op"] == "MPI_Mrecv"
                && e["call"]["matched"]["tag"] == 32
        });
        let mrecv = mrecv.unwrap_or_else(|| panic!("rank 0's first Mrecv of tag 32"));
        assert_eq!(mrecv["call"]["matched"]["source"], json!(source), "{mrecv}");
    }
}

on_both!(replay_coverage);

/// coverage.c recorded, then replayed: rank 0's wildcard `MPI_Mprobe`s are choices (their
/// sources, tag 32) and the `MPI_Improbe` polls runs of misses, and each replay follows
/// the log to the recorded outcome, `first` included.
fn replay_coverage(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let prog = dir.join("coverage");
    let log = scratch(imp, "coverage.rtrec");
    let (recorded, rec_log) = record_job(imp, &prog, &[], &log);
    assert_eq!(recorded["matches_reference"], true, "{recorded}");
    let probed: Vec<i32> = rec_log.ranks[0]
        .choices
        .iter()
        .filter_map(|c| match c.what {
            racetrack_protocol::replay_log::Chose::Match { source, tag: 32 } => Some(source),
            _ => None,
        })
        .collect();
    assert_eq!(probed.len(), 2, "{:?}", rec_log.ranks[0]);
    assert_eq!(
        i64::from(probed[0]),
        recorded["first"].as_i64().unwrap(),
        "{recorded}"
    );
    assert!(rec_log.complete(), "every rank reached MPI_Finalize");
    let l = log.to_str().unwrap();
    for i in 0..3 {
        let (code, report, err) = racetrack_cli(&["replay", l], &prog, &[]);
        assert_eq!(code, Some(0), "replay {i}: {err}");
        assert_eq!(outcome_of(&report), outcome_of(&recorded), "replay {i}");
    }
}

on_both!(explore_finds_races_and_deadlocks);

/// `racetrack explore --mpi`: on the merge sort, two runs find both outcomes (the sort,
/// and the truncation of rank 0's first wildcard receive by rank 2's message), the walk
/// is complete, and the failing outcome's scenario replays the truncation; the same
/// through `MPI_Irecv`; with `--jobs 2` the same (and the master/worker's branches run two
/// at a time). A message race that cannot hang (`deadlock --kind forced`: rank 1 sends
/// once) has one outcome and no deadlock; a wildcard `MPI_Irecv` forced onto the sender a
/// later receive needs (`--kind posted_race`) is a deadlock, named; so is a lost message
/// (`--kind lost`).
fn explore_finds_races_and_deadlocks(imp: Impl) {
    let Some(dir) = setup(imp) else { return };
    let explore_jobs = |prog: &str, args: &[&str], out: &Path, jobs: &str| {
        let out = out.display().to_string();
        let a = [
            "explore",
            "--mpi",
            "--impl",
            imp.key(),
            "-n",
            "4",
            "--run-limit-s",
            "20",
            "--jobs",
            jobs,
            "--out",
            &out,
        ];
        racetrack_cli(&a, &dir.join(prog), args)
    };
    let explore = |prog: &str, args: &[&str], out: &Path| explore_jobs(prog, args, out, "1");
    let out = scratch(imp, "explore-mergesort");
    let (code, s, err) = explore("mergesort", &["--size", "4000"], &out);
    assert_eq!((code, &s["event"]), (Some(1), &json!("explored")), "{s}\n{err}");
    assert_eq!((&s["complete"], &s["runs"]), (&json!(true), &json!(2)), "{s}");
    let outcomes = s["outcomes"].as_array().unwrap();
    assert_eq!(outcomes.len(), 2, "{s}");
    let report =
        |o: &Value| -> Value { serde_json::from_str(o["result"]["output"].as_str().unwrap()).unwrap() };
    let good = outcomes
        .iter()
        .find(|o| o["result"]["exit"] == 0)
        .expect("the sort");
    assert_eq!(report(good)["matches_reference"], true, "{s}");
    let bad = outcomes
        .iter()
        .find(|o| o["result"]["exit"] == 1)
        .expect("the race");
    assert!(
        report(bad)["error"]
            .as_str()
            .unwrap()
            .contains("matched rank 2's message"),
        "{s}"
    );
    assert_eq!(bad["departures"], 1, "{s}");
    // The ordering that reaches it: one departure, nothing to shrink.
    let departed = &bad["ordering"][0];
    assert_eq!(
        (
            &departed["thread"],
            &departed["receive"],
            &departed["source"],
            &departed["instead_of"]
        ),
        (&json!("rank[0]"), &json!(0), &json!(2), &json!(1)),
        "{s}"
    );
    assert_eq!(bad["ordering"].as_array().map(Vec::len), Some(1), "{s}");
    assert_eq!(
        (&bad["ordering_replay"], &s["shrink_runs"]),
        (&bad["replay"], &json!(0)),
        "{s}"
    );
    assert_eq!(
        (&good["ordering"], &good["ordering_replay"]),
        (&json!([]), &Value::Null),
        "{s}"
    );
    let differs = bad["differs"].as_str().unwrap();
    assert!(
        differs.starts_with("rank[0]'s receive #1 at ")
            && differs.ends_with("matched rank 2 instead of rank 1"),
        "{differs}"
    );
    let pick = &bad["picks"][0];
    assert_eq!(
        (&pick["thread"], &pick["source"]),
        (&json!("rank[0]"), &json!(2)),
        "{s}"
    );
    assert!(pick["site"].as_str().unwrap().contains("mergesort.c"), "{s}");
    let (code, replayed, err) = racetrack_cli(
        &["replay", bad["replay"].as_str().unwrap()],
        &dir.join("mergesort"),
        &["--size", "4000"],
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(
        replayed["error"]
            .as_str()
            .unwrap()
            .contains("matched rank 2's message"),
        "{replayed}"
    );

    // Two runs side by side (--jobs 2): the same walk, the same outcomes.
    let (code, s2, err) = explore_jobs(
        "mergesort",
        &["--size", "4000"],
        &scratch(imp, "explore-jobs"),
        "2",
    );
    assert_eq!(
        (
            code,
            &s2["complete"],
            &s2["runs"],
            s2["outcomes"].as_array().map(Vec::len)
        ),
        (Some(1), &json!(true), &json!(2), Some(2)),
        "{s2}\n{err}"
    );
    let results = |s: &Value| -> Vec<Value> {
        let mut r: Vec<Value> = s["outcomes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["result"].clone())
            .collect();
        r.sort_by_key(|v| v.to_string());
        r
    };
    assert_eq!(results(&s2), results(&s), "{s2}");
    // The master/worker's first run leaves many branches: its next runs go two at a time.
    let out = scratch(imp, "explore-jobs-mw");
    let (_, s3, err) = racetrack_cli(
        &[
            "explore",
            "--mpi",
            "--impl",
            imp.key(),
            "-n",
            "4",
            "--run-limit-s",
            "20",
            "--jobs",
            "2",
            "--max-runs",
            "5",
            "--out",
            &out.display().to_string(),
        ],
        &dir.join("master_worker"),
        &[],
    );
    assert_eq!(
        (&s3["runs"], &s3["complete"], &s3["stopped"]),
        (&json!(5), &json!(false), &json!("--max-runs 5 reached")),
        "{s3}\n{err}"
    );
    for o in s3["outcomes"].as_array().unwrap() {
        let file = o["replay"].as_str().expect("a scenario per outcome");
        assert!(Path::new(file).is_file(), "{file}");
    }
    for k in 2..=5 {
        assert!(
            err.contains(&format!("racetrack: run {k}: ")),
            "run {k} told\n{err}"
        );
    }

    // The same race through MPI_Irecv, which matches in its completion (MPI_Wait).
    let (code, s, err) = explore(
        "mergesort",
        &["--size", "4000", "--irecv"],
        &scratch(imp, "explore-irecv"),
    );
    assert_eq!(
        (code, &s["complete"], &s["runs"]),
        (Some(1), &json!(true), &json!(2)),
        "{s}\n{err}"
    );
    let bad = s["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["result"]["exit"] == 1)
        .expect("the race");
    assert!(
        bad["differs"]
            .as_str()
            .unwrap()
            .ends_with("matched rank 2 instead of rank 1"),
        "{s}"
    );

    let (code, s, err) = explore("deadlock", &["--kind", "forced"], &scratch(imp, "explore-forced"));
    assert_eq!(code, Some(0), "{s}\n{err}");
    assert_eq!(
        (&s["complete"], s["outcomes"].as_array().unwrap().len()),
        (&json!(true), 1),
        "{s}"
    );
    assert_eq!(s["outcomes"][0]["result"]["exit"], 0, "{s}");

    // A wildcard MPI_Irecv matched to the other sender starves a later blocking receive:
    // the forced run is the program's deadlock, named, not an infeasible pick.
    let (code, s, err) = explore(
        "deadlock",
        &["--kind", "posted_race"],
        &scratch(imp, "explore-posted"),
    );
    assert_eq!(
        (code, &s["complete"], &s["runs"]),
        (Some(1), &json!(true), &json!(2)),
        "{s}\n{err}"
    );
    let results: Vec<&Value> = s["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| &o["result"])
        .collect();
    assert_eq!(results[0]["exit"], 0, "{s}");
    let told = results[1]["deadlock"].as_str().unwrap_or_default();
    assert!(told.starts_with("rank[0] in MPI_Recv waiting for rank[1]"), "{s}");
    assert_eq!(s["infeasible"], 0, "{s}");

    let (code, s, err) = explore("deadlock", &["--kind", "lost"], &scratch(imp, "explore-lost"));
    assert_eq!(code, Some(1), "{s}\n{err}");
    let told = s["outcomes"][0]["result"]["deadlock"]
        .as_str()
        .unwrap_or_default();
    assert!(told.starts_with("rank[0] in MPI_Recv waiting for"), "{s}");
}
