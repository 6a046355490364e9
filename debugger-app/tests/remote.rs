//! Ranks on another host reach `racetrack listen` only with its token (SECURITY.md). The
//! other host is a network namespace: a veth pair joins it to this one, the listener
//! binds the address on this side (not loopback, so it makes a token), and the MPI job
//! runs inside the namespace (`ip netns exec NS mpiexec …`) with the environment the
//! listener printed. With the token the job is debugged; without it, or with a wrong
//! one, the listener refuses each rank saying why, and the program runs free to its
//! correct result. Each case runs on both MPI implementations.
//!
//! Needs:
//! - root and `ip` (iproute2), to make the namespace. Otherwise every test fails saying
//!   so, unless `RACETRACK_NO_NETNS=1` is set: then each test prints that it was left out
//!   and passes.
//! - MPICH and Open MPI, and the MPI library beside `racetrack`, as `tests/mpi.rs` does
//!   (`RACETRACK_NO_MPI=1` leaves these tests out too).
//!
//! Every namespace is named after this process and a counter (tests run in parallel) and
//! deleted when its test ends, passed or failed; every wait has a deadline, and the
//! process groups a test started are killed when it ends.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The ranks of every job here.
const RANKS: usize = 2;
/// How long any one step (listener banner, job, event) may take.
const LIMIT: Duration = Duration::from_secs(30);

#[derive(Clone, Copy)]
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

    /// `ip netns exec NS mpiexec …` with `RANKS` ranks and `env` in the ranks' environment.
    fn mpiexec_in(self, ns: &str, env: &[(&str, String)]) -> Command {
        let mut cmd = Command::new("timeout");
        cmd.args([&LIMIT.as_secs().to_string(), "ip", "netns", "exec", ns]);
        match self {
            Impl::Mpich => {
                cmd.args(["mpiexec.mpich", "-n", &RANKS.to_string()]);
                for (k, v) in env {
                    cmd.arg("-genv").arg(k).arg(v);
                }
            }
            Impl::OpenMpi => {
                cmd.args(["mpiexec.openmpi", "--allow-run-as-root", "--oversubscribe", "-n"]);
                cmd.arg(RANKS.to_string());
                for (k, v) in env {
                    cmd.arg("-x").arg(format!("{k}={v}"));
                }
            }
        }
        cmd
    }

    fn racetrack(self) -> racetrack::mpirun::Impl {
        match self {
            Impl::Mpich => racetrack::mpirun::Impl::Mpich,
            Impl::OpenMpi => racetrack::mpirun::Impl::OpenMpi,
        }
    }
}

fn opted_out(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| v == "1")
}

fn is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        == Some("0")
}

/// The test's `ring` program and the libraries to preload, or `None` when left out.
fn setup(imp: Impl) -> Option<(PathBuf, String)> {
    if opted_out("RACETRACK_NO_NETNS") {
        println!("left out: RACETRACK_NO_NETNS=1");
        return None;
    }
    assert!(
        is_root(),
        "making a network namespace needs root (or set RACETRACK_NO_NETNS=1 to leave these tests out)"
    );
    let mpicc = format!("mpicc.{}", imp.key());
    let have = |tool: &str| {
        std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
    };
    if !have(&mpicc) && opted_out("RACETRACK_NO_MPI") {
        println!("left out: {mpicc} not installed (RACETRACK_NO_MPI=1)");
        return None;
    }
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_racetrack")).parent().unwrap();
    let [core, wrappers] = racetrack::mpirun::libs(imp.racetrack(), bin_dir)
        .unwrap_or_else(|e| panic!("{e} (`cargo test --workspace` builds the MPI library)"));
    let preload = format!("{}:{}", core.display(), wrappers.display());
    Some((ring(imp, bin_dir), preload))
}

/// `ring` built for `imp`, once per test run: into a directory of this process's own,
/// then moved into place (a rename replaces atomically, so a test binary running at once
/// never sees a half-written program).
fn ring(imp: Impl, bin_dir: &Path) -> PathBuf {
    static BUILT: [OnceLock<Result<PathBuf, String>>; 2] = [OnceLock::new(), OnceLock::new()];
    let build = || {
        let dir = bin_dir.join("remote-examples").join(imp.key());
        let tmp = dir.join(format!("tmp-{}", std::process::id()));
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/mpi/build.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg(imp.key())
            .arg(&tmp)
            .output();
        let built = match out {
            Ok(o) if o.status.success() => std::fs::rename(tmp.join("ring"), dir.join("ring"))
                .map(|()| dir.join("ring"))
                .map_err(|e| e.to_string()),
            Ok(o) => Err(format!(
                "building the MPI examples for {} failed (install MPICH, Open MPI and gfortran, or set RACETRACK_NO_MPI=1):\n{}",
                imp.key(),
                String::from_utf8_lossy(&o.stderr)
            )),
            Err(e) => Err(format!("cannot run {}: {e}", script.display())),
        };
        let _ = std::fs::remove_dir_all(&tmp);
        built
    };
    BUILT[imp as usize]
        .get_or_init(build)
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// `ip ARGS`, which must succeed.
fn ip(args: &[&str]) {
    let out = Command::new("timeout")
        .arg("10")
        .arg("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `ip` ({e}): install iproute2, or set RACETRACK_NO_NETNS=1"));
    assert!(
        out.status.success(),
        "`ip {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A network namespace joined to this one by a veth pair; deleted (with the pair) on drop.
struct Netns {
    name: String,
    host_if: String,
    /// This side's address, and the namespace's.
    host_ip: String,
    ns_ip: String,
}

impl Netns {
    fn create() -> Netns {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        // A /30 of its own: 64 per process, the third byte from the pid, so that
        // parallel tests and runs rarely share a subnet.
        let (c, d) = (pid % 250 + 1, (n % 64) * 4);
        let ns = Netns {
            name: format!("racetrack-{pid}-{n}"),
            // Interface names have at most 15 characters.
            host_if: format!("rt{}h{n}", pid % 1_000_000),
            host_ip: format!("10.231.{c}.{}", d + 1),
            ns_ip: format!("10.231.{c}.{}", d + 2),
        };
        let peer = format!("rt{}n{n}", pid % 1_000_000);
        ip(&["netns", "add", &ns.name]);
        // From here on, drop deletes what was made.
        ip(&["link", "add", &ns.host_if, "type", "veth", "peer", "name", &peer]);
        ip(&["link", "set", &peer, "netns", &ns.name]);
        ip(&["addr", "add", &format!("{}/30", ns.host_ip), "dev", &ns.host_if]);
        ip(&["link", "set", &ns.host_if, "up"]);
        let inside = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &ns.name, "ip"];
            all.extend_from_slice(args);
            ip(&all);
        };
        inside(&["addr", "add", &format!("{}/30", ns.ns_ip), "dev", &peer]);
        inside(&["link", "set", &peer, "up"]);
        inside(&["link", "set", "lo", "up"]);
        ns
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace deletes its end of the pair, and with it this one.
        for args in [
            vec!["netns", "del", self.name.as_str()],
            vec!["link", "del", self.host_if.as_str()],
        ] {
            let _ = Command::new("timeout")
                .arg("10")
                .arg("ip")
                .args(&args)
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// A process in its own group, killed with its group when dropped.
struct Group(Child);

impl Group {
    fn spawn(cmd: &mut Command) -> Group {
        Group(cmd.process_group(0).spawn().expect("the process starts"))
    }

    fn wait_until(&mut self, deadline: Instant, what: &str) -> std::process::ExitStatus {
        loop {
            if let Some(st) = self.0.try_wait().unwrap() {
                return st;
            }
            assert!(Instant::now() < deadline, "{what} did not finish in time");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.0.wait();
    }
}

/// `racetrack listen --ctl -n RANKS --addr ADDR:0` (no token in its environment: it
/// makes one), its events and what it says on stderr.
struct Listener {
    _proc: Group,
    stdin: ChildStdin,
    events: mpsc::Receiver<Value>,
    seen: Vec<Value>,
    stderr: Arc<Mutex<Vec<String>>>,
    url: String,
    token: String,
}

impl Listener {
    fn start(addr: &str) -> Listener {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_racetrack"));
        cmd.args(["listen", "--ctl", "-n", &RANKS.to_string(), "--addr"])
            .arg(format!("{addr}:0"))
            .env_remove("RACETRACK_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut proc = Group::spawn(&mut cmd);
        let events = support::json_lines(proc.0.stdout.take().unwrap());
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let said = stderr.clone();
        let err = proc.0.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                said.lock().unwrap().push(line);
            }
        });
        let stdin = proc.0.stdin.take().unwrap();
        let mut l = Listener {
            _proc: proc,
            stdin,
            events,
            seen: Vec::new(),
            stderr,
            url: String::new(),
            token: String::new(),
        };
        l.url = l.said("the URL", |line| {
            line.strip_prefix(&format!("racetrack: waiting for {RANKS} ranks at "))
                .map(str::to_owned)
        });
        assert!(l.url.starts_with(&format!("ws://{addr}:")), "{}", l.url);
        l.token = l.said("the token", |line| {
            let rest = line.split_once("RACETRACK_TOKEN=")?.1;
            Some(rest.split_whitespace().next()?.to_owned())
        });
        assert_eq!(l.token.len(), 32, "128 bits in hex: {}", l.token);
        l
    }

    /// The first stderr line `pick` finds something in, waiting for it.
    fn said<T>(&self, what: &str, pick: impl Fn(&str) -> Option<T>) -> T {
        let deadline = Instant::now() + LIMIT;
        loop {
            if let Some(v) = self.stderr.lock().unwrap().iter().find_map(|l| pick(l)) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "racetrack listen did not say {what}; it said:\n{}",
                self.stderr.lock().unwrap().join("\n")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn send(&mut self, cmd: Value) {
        writeln!(self.stdin, "{cmd}")
            .and_then(|()| self.stdin.flush())
            .unwrap();
    }

    /// The next event satisfying `pred` (earlier ones are kept in `seen`).
    fn expect(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + LIMIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(v) => {
                    self.seen.push(v.clone());
                    if pred(&v) {
                        return v;
                    }
                }
                Err(_) => panic!(
                    "no {what}; last events:\n{}\nstderr:\n{}",
                    self.seen
                        .iter()
                        .rev()
                        .take(10)
                        .map(Value::to_string)
                        .collect::<Vec<_>>()
                        .join("\n"),
                    self.stderr.lock().unwrap().join("\n")
                ),
            }
        }
    }
}

/// The job run inside `ns`: (its exit code, its stdout, its stderr).
fn run_job(imp: Impl, ns: &str, prog: &Path, env: &[(&str, String)]) -> (Option<i32>, String, String) {
    let mut cmd = imp.mpiexec_in(ns, env);
    cmd.arg(prog)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut g = Group::spawn(&mut cmd);
    let mut out = g.0.stdout.take().unwrap();
    let mut err = g.0.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut stdout = String::new();
    let _ = out.read_to_string(&mut stdout);
    let st = g.wait_until(Instant::now() + LIMIT, "the job in the namespace");
    (st.code(), stdout, reader.join().unwrap())
}

/// The program's last line, which must say it computed the reference result.
fn assert_correct(code: Option<i32>, stdout: &str, stderr: &str) {
    let line = stdout.lines().last().unwrap_or_default();
    let last: Value = serde_json::from_str(line).unwrap_or(Value::Null);
    assert!(
        code == Some(0) && last["matches_reference"] == true,
        "the job: exit {code:?}, last line {line:?}; stderr:\n{stderr}"
    );
}

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

on_both!(with_the_token, without_a_token, with_a_wrong_token);

/// With the printed token the ranks in the namespace are debugged: both held at their
/// start, a breakpoint holds rank 0's send, continuing it lets the job finish correctly.
fn with_the_token(imp: Impl) {
    let Some((prog, preload)) = setup(imp) else { return };
    let ns = Netns::create();
    let mut l = Listener::start(&ns.host_ip);
    let env = [
        ("RACETRACK_CONNECT", l.url.clone()),
        ("RACETRACK_TOKEN", l.token.clone()),
        ("RACETRACK_WAIT", "1".to_owned()),
        ("LD_PRELOAD", preload),
    ];
    let name = ns.name.clone();
    let job = std::thread::spawn(move || run_job(imp, &name, &prog, &env));
    l.expect("the job's snapshot", |v| v["event"] == "snapshot");
    for r in 0..RANKS {
        l.send(json!({"cmd":"wait","until":"held","thread":format!("rank[{r}]"),"timeout_ms":20000}));
        let v = l.expect("an answer to wait", |v| {
            v["event"] == "waited" || v["event"] == "error"
        });
        assert_eq!(v["event"], "waited", "rank[{r}] held at its start: {v}");
    }
    l.send(json!({"cmd":"break","op":"MPI_Send","thread":"rank[0]","on":true}));
    l.send(json!({"cmd":"continue"}));
    let held = l.expect("rank[0] held at MPI_Send", |v| {
        v["event"] == "start" && v["thread"] == "rank[0]" && v["held"] == true
    });
    assert_eq!(held["op"], "MPI_Send", "{held}");
    l.send(json!({"cmd":"break","op":"MPI_Send","thread":"rank[0]","on":false}));
    l.send(json!({"cmd":"continue","event_id":held["event_id"]}));
    l.send(json!({"cmd":"wait","until":"exit","timeout_ms":20000}));
    l.expect("the job's end", |v| v["event"] == "exit");
    let (code, stdout, stderr) = job.join().unwrap();
    assert_correct(code, &stdout, &stderr);
    for r in 0..RANKS {
        let t = format!("rank[{r}]");
        let finalized = l
            .seen
            .iter()
            .any(|v| v["event"] == "stop" && v["thread"] == t.as_str() && v["op"] == "MPI_Finalize");
        assert!(finalized, "{t}'s MPI_Finalize was reported");
    }
    let refused: Vec<String> = l
        .stderr
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.contains("refused a connection"))
        .cloned()
        .collect();
    assert!(refused.is_empty(), "{refused:?}");
    println!(
        "{}: {} events from the namespace {}",
        imp.key(),
        l.seen.len(),
        ns.ns_ip
    );
}

/// The ranks dial with `token` (`None`: none in their environment): each is refused,
/// with `why` in the listener's message, and the program runs free to its result.
fn refused(imp: Impl, token: Option<&str>, why: &str) {
    let Some((prog, preload)) = setup(imp) else { return };
    let ns = Netns::create();
    let l = Listener::start(&ns.host_ip);
    let mut env = vec![
        ("RACETRACK_CONNECT", l.url.clone()),
        ("RACETRACK_WAIT", "1".to_owned()),
        ("LD_PRELOAD", preload),
    ];
    if let Some(t) = token {
        env.push(("RACETRACK_TOKEN", t.to_owned()));
    }
    let (code, stdout, stderr) = run_job(imp, &ns.name, &prog, &env);
    assert_correct(code, &stdout, &stderr);
    assert!(
        stderr.contains("403") && stderr.contains("the program runs free"),
        "the ranks say they run free: {stderr}"
    );
    let prefix = format!("racetrack: refused a connection from {}:", ns.ns_ip);
    let deadline = Instant::now() + LIMIT;
    loop {
        let lines = l.stderr.lock().unwrap().clone();
        let refusals: Vec<&String> = lines.iter().filter(|s| s.starts_with(&prefix)).collect();
        if refusals.len() == RANKS {
            for r in &refusals {
                assert!(r.contains(why), "{r:?} does not say {why:?}");
            }
            println!("{}: {}", imp.key(), refusals[0]);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "expected {RANKS} refusals from {}; the listener said:\n{}",
            ns.ns_ip,
            lines.join("\n")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        l.events.try_recv().is_err(),
        "no rank got through, so the controller printed nothing"
    );
}

fn without_a_token(imp: Impl) {
    refused(imp, None, "it sent no token");
}

fn with_a_wrong_token(imp: Impl) {
    refused(
        imp,
        Some("0123456789abcdef0123456789abcdef"),
        "it sent a wrong token",
    );
}
