//! Recording (`RACETRACK_RECORD=FILE`, or in memory for a session under the debugger):
//! each thread extends its current run (the sender of its last step, and how many steps
//! took that sender's messages in a row) under a lock of its own, and encodes a run only
//! when the sender changes. For a file, the `racetrack-record` thread takes the encoded
//! runs every [`FLUSH`] and writes them, so a program thread never waits on the disk; in
//! memory they stay until `scenario` takes the log so far. A thread whose encoded runs
//! pass [`MAX_PENDING`] (the disk is far behind) stops the recording: the log then ends without its summary and covers
//! the run up to there, and the program is told on stderr.

use super::sender_code;
use crate::agent::ReplayError;
use racetrack_protocol::replay_log::{
    edit_record, end_record, header_bytes, put_run, put_runs_record, Edit, EditKind, LogEnd, LogHeader,
    LogThread, Run,
};
use racetrack_runtime::hook::{CollectionInfo, GraphInfo};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Duration;

/// How often the writer takes the threads' runs.
const FLUSH: Duration = Duration::from_millis(50);
/// Encoded runs one thread may have waiting for the writer.
const MAX_PENDING: usize = 16 << 20;

/// One thread's part of the log.
#[derive(Default)]
struct ThreadLog {
    /// The run being extended (`count` 0: none yet).
    run: Run,
    /// Encoded runs not written yet, and how many.
    buf: Vec<u8>,
    n: u64,
    steps: u64,
}

struct Shared {
    /// By global thread index.
    threads: RwLock<Vec<Arc<Mutex<ThreadLog>>>>,
    names: Mutex<Vec<String>>,
    ops: Mutex<Vec<String>>,
    /// The user's edits, in order.
    edits: Mutex<Vec<Edit>>,
    header: LogHeader,
    /// Set when the recording stopped (disk error, or too far behind).
    lost: AtomicBool,
    done: (Mutex<bool>, Condvar),
}

impl Shared {
    /// The log's summary: every thread with its `steps`, every operation.
    fn summary(&self, steps: Vec<u64>, prefix: bool) -> LogEnd {
        let names = lock(&self.names).clone();
        LogEnd {
            threads: names
                .into_iter()
                .zip(steps)
                .map(|(name, steps)| LogThread { name, steps })
                .collect(),
            ops: lock(&self.ops).clone(),
            prefix,
        }
    }
}

pub(super) struct Recorder {
    shared: Arc<Shared>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Kept in memory (a session's), not written to a file.
    memory: bool,
}

impl Recorder {
    /// Create the log at `path`, write its header, start the writer.
    pub(super) fn create(path: &str) -> std::io::Result<Self> {
        let shared = Self::shared();
        let mut out = BufWriter::new(File::create(path)?);
        out.write_all(&header_bytes(&shared.header))?;
        let s = shared.clone();
        let path = path.to_owned();
        let writer = std::thread::Builder::new()
            .name("racetrack-record".into())
            .spawn(move || {
                if let Err(e) = write_loop(&s, out) {
                    s.lost.store(true, Relaxed);
                    eprintln!("racetrack: cannot write the replay log {path}: {e}; the rest of the run is unrecorded");
                }
            })?;
        Ok(Self {
            shared,
            writer: Mutex::new(Some(writer)),
            memory: false,
        })
    }

    /// A recording kept in memory, for `scenario`.
    pub(super) fn in_memory() -> Self {
        Self {
            shared: Self::shared(),
            writer: Mutex::new(None),
            memory: true,
        }
    }

    fn shared() -> Arc<Shared> {
        let mut argv = std::env::args();
        Arc::new(Shared {
            threads: RwLock::new(Vec::new()),
            names: Mutex::new(Vec::new()),
            ops: Mutex::new(Vec::new()),
            edits: Mutex::new(Vec::new()),
            header: LogHeader {
                program: argv.next().unwrap_or_default(),
                args: argv.collect(),
                mpi: None,
            },
            lost: AtomicBool::new(false),
            done: (Mutex::new(false), Condvar::new()),
        })
    }

    /// The steps `thread` took so far.
    fn steps(&self, thread: usize) -> u64 {
        let threads = self.shared.threads.read().unwrap_or_else(|p| p.into_inner());
        threads.get(thread).map_or(0, |t| lock(t).steps)
    }

    /// A send of `thread`'s current step was given `content` by the user.
    pub(super) fn edit_send(&self, thread: usize, msg: String, op: String, content: serde_json::Value) {
        let step = self.steps(thread);
        lock(&self.shared.edits).push(Edit {
            thread,
            step,
            what: EditKind::Send { msg, op, content },
        });
    }

    /// The user replaced `thread`'s state at its current step's start (`stop`: stop); at
    /// a start whose message was put back, the edit belongs to the next step.
    pub(super) fn edit_state(&self, thread: usize, stop: bool, put_back: bool, content: serde_json::Value) {
        let step = self.steps(thread) + u64::from(put_back);
        lock(&self.shared.edits).push(Edit {
            thread,
            step,
            what: EditKind::State { stop, content },
        });
    }

    /// The session so far as a scenario's bytes (a log that ends with a summary marked
    /// `prefix`), and what they hold in words.
    pub(super) fn scenario(&self) -> Result<(Vec<u8>, String), ReplayError> {
        if !self.memory {
            return Err(ReplayError::RecordedToFile);
        }
        let mut out = header_bytes(&self.shared.header);
        let threads: Vec<_> = self
            .shared
            .threads
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let (mut steps, mut runs) = (Vec::new(), 0);
        for (g, t) in threads.iter().enumerate() {
            let l = lock(t);
            steps.push(l.steps);
            let mut buf = l.buf.clone();
            let mut n = l.n;
            if l.run.count > 0 {
                put_run(&mut buf, l.run);
                n += 1;
            }
            drop(l);
            if n > 0 {
                put_runs_record(&mut out, g, n, &buf);
                runs += n;
            }
        }
        let edits = lock(&self.shared.edits).clone();
        for e in &edits {
            out.extend(edit_record(e));
        }
        let total: u64 = steps.iter().sum();
        out.extend(end_record(&self.shared.summary(steps, true)));
        let summary = format!(
            "{} bytes, {total} steps in {runs} runs, {} edits",
            out.len(),
            edits.len()
        );
        Ok((out, summary))
    }

    pub(super) fn collection(&self, info: &CollectionInfo) {
        let mut threads = self.shared.threads.write().unwrap_or_else(|p| p.into_inner());
        let mut names = lock(&self.shared.names);
        for t in &info.threads {
            if threads.len() <= t.global {
                threads.resize_with(t.global + 1, Default::default);
                names.resize(t.global + 1, String::new());
            }
            names[t.global] = t.name.to_string();
        }
    }

    pub(super) fn graph(&self, info: &GraphInfo) {
        let mut ops = lock(&self.shared.ops);
        for op in &info.ops {
            if ops.len() <= op.id {
                ops.resize(op.id + 1, String::new());
            }
            ops[op.id] = op.name.to_string();
        }
    }

    /// Thread `thread` starts a step on a message from `from`.
    pub(super) fn step(&self, thread: usize, from: Option<usize>) {
        if self.shared.lost.load(Relaxed) {
            return;
        }
        let sender = sender_code(from);
        let threads = self.shared.threads.read().unwrap_or_else(|p| p.into_inner());
        let Some(t) = threads.get(thread) else {
            return;
        };
        let mut l = lock(t);
        l.steps += 1;
        if l.run.count > 0 && l.run.sender == sender {
            l.run.count += 1;
            return;
        }
        if l.run.count > 0 {
            let run = l.run;
            put_run(&mut l.buf, run);
            l.n += 1;
            if !self.memory && l.buf.len() > MAX_PENDING && !self.shared.lost.swap(true, Relaxed) {
                eprintln!("racetrack: the replay log is not written fast enough; the recording stops here");
            }
        }
        l.run = Run { sender, count: 1 };
    }

    /// The runtime's threads have stopped: write the last runs and the summary, and wait
    /// for the writer.
    pub(super) fn finish(&self) {
        {
            let (m, cv) = &self.shared.done;
            *lock(m) = true;
            cv.notify_all();
        }
        if let Some(w) = lock(&self.writer).take() {
            let _ = w.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Every [`FLUSH`], write what the threads encoded; once the runtime finished, their open
/// runs and the summary.
fn write_loop(s: &Shared, mut out: BufWriter<File>) -> std::io::Result<()> {
    let mut record = Vec::new();
    loop {
        let finished = {
            let (m, cv) = &s.done;
            let done = lock(m);
            let (done, _) = cv
                .wait_timeout_while(done, FLUSH, |d| !*d)
                .unwrap_or_else(|p| p.into_inner());
            *done
        };
        if s.lost.load(Relaxed) {
            return Ok(());
        }
        let threads: Vec<_> = s.threads.read().unwrap_or_else(|p| p.into_inner()).clone();
        let mut steps = Vec::with_capacity(threads.len());
        for (g, t) in threads.iter().enumerate() {
            let (buf, n) = {
                let mut l = lock(t);
                if finished && l.run.count > 0 {
                    let run = std::mem::take(&mut l.run);
                    put_run(&mut l.buf, run);
                    l.n += 1;
                }
                steps.push(l.steps);
                (std::mem::take(&mut l.buf), std::mem::take(&mut l.n))
            };
            if n > 0 {
                record.clear();
                put_runs_record(&mut record, g, n, &buf);
                out.write_all(&record)?;
            }
        }
        if finished {
            for e in lock(&s.edits).iter() {
                out.write_all(&edit_record(e))?;
            }
            out.write_all(&end_record(&s.summary(steps, false)))?;
            return out.flush();
        }
        out.flush()?;
    }
}
