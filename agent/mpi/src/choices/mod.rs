//! Record and replay of what MPI leaves to timing, per rank (`RACETRACK_RECORD`,
//! `RACETRACK_REPLAY`; `racetrack mpirun --record`, `racetrack replay`).
//!
//! A rank's calls are numbered from 0 on its `MPI_Init` thread. What a run does not
//! determine itself is, by MPI's non-overtaking rule, only: the message each receive or
//! probe from `MPI_ANY_SOURCE` matched (its source and tag), whether each poll (`MPI_Test*`,
//! `MPI_Iprobe`) found something, and which requests `MPI_Waitany`/`Testany`/
//! `Waitsome`/`Testsome` completed. Recording keeps exactly those, as
//! [`racetrack_protocol::replay_log::Choice`]s; the prediction for a poll is "it found",
//! so only misses are written, as runs, and a program that polls a thousand times before
//! a message arrives costs one choice.
//!
//! A replay forces them: a wildcard receive or probe gets the recorded source and tag
//! (the wrappers pass them to MPI in place of the wildcard); a poll that missed returns
//! "nothing" without calling MPI, one that found calls the blocking form (`MPI_Wait`,
//! `MPI_Probe`, …) so it finds the same thing however late it comes; `any`/`some`
//! completions wait for the recorded requests. A call that is not the recorded one, or
//! calls past the recorded run's, stop the job (exit code 3) saying where, or, under a
//! debugger, become an `error` event and the rank runs free.
//!
//! Recording never writes on the program's thread until `MPI_Finalize`: choices are
//! buffered and a `racetrack-record` thread appends them to the rank's part file
//! (`LOG.rank<R>`) every 50 ms; `racetrack mpirun --record` merges the parts into `LOG`.

use racetrack_agent::choice::{Chooser, Pick, Point, Script};
use racetrack_protocol::launch as env;
use racetrack_protocol::replay_log::{self, Choice, Chose, LogHeader, MpiJob, ReplayLog};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

/// Choices buffered before recording gives up (bounds the memory a rank spends on it).
const MAX_PENDING: usize = 1 << 20;
/// How often the writer thread appends buffered choices to the part file.
const WRITE_EVERY: Duration = Duration::from_millis(50);

static CHOICES: OnceLock<Choices> = OnceLock::new();

mod clock;
mod kind;
mod session;

pub(crate) use clock::clock;
use clock::Module;
use kind::{kind, op_name, op_of, Kind};
pub(crate) use session::{finalize, part, take_over};

/// What a replay makes of a call (the wrappers apply it).
#[derive(Debug, Default)]
pub struct Forcing {
    /// The source and tag a wildcard receive or probe must match.
    pub matched: Option<(i32, i32)>,
    /// A poll: `Some(false)` finds nothing (MPI is not called), `Some(true)` finds (the
    /// blocking form is called).
    pub found: Option<bool>,
    /// The request indices an `any`/`some` completion must complete (valid until the
    /// call's `rt_stop`: they live in the replay's choices, which never change).
    pub indices: Option<(*const i32, i32)>,
}

/// The call in progress (one at a time: only the `MPI_Init` thread reports).
struct Current {
    call: u64,
    name: &'static str,
    kind: Kind,
    matched: Option<(i32, i32)>,
    indices: Vec<u32>,
}

struct Recording {
    /// The part file; `None`: a debugging session's, kept in memory until saved as a
    /// scenario.
    file: Option<PathBuf>,
    /// Choices not yet written, by call (an `MPI_Irecv`'s arrives at its completion,
    /// after later calls').
    pending: BTreeMap<u64, Choice>,
    /// Wildcard `MPI_Irecv`s not completed yet: their request, and their call.
    irecvs: HashMap<i64, u64>,
    open: BTreeSet<u64>,
    /// The first call after the last choice written.
    written_next: u64,
    /// `MPI_Wtime` readings not yet written (`f64::to_bits`), and the last one written.
    clocks: Vec<u64>,
    clock_written: u64,
    /// Recording stopped (too much buffered, or the file could not be written).
    lost: bool,
}

impl Recording {
    fn new(file: Option<PathBuf>) -> Self {
        Recording {
            file,
            pending: BTreeMap::new(),
            irecvs: HashMap::new(),
            open: BTreeSet::new(),
            written_next: 0,
            clocks: Vec::new(),
            clock_written: 0,
            lost: false,
        }
    }
}

/// A replay: the agent core's replay engine on this rank's part of the log (line 0). It
/// covers the calls the recorded rank made up to `MPI_Finalize`, or a scenario's, or up
/// to its last choice; when the log is complete, a call past those, or `MPI_Finalize`
/// before, is a divergence (else the rank runs free from there).
struct Replay {
    script: Script,
    /// Still forcing (a divergence under a debugger, or taking over, ends it).
    active: bool,
    /// Clock readings returned so far.
    clock_at: u64,
}

impl Replay {
    /// The calls the log covers.
    fn calls(&self) -> u64 {
        self.script.covers(0)
    }
}

struct State {
    /// Calls made so far.
    next: u64,
    current: Option<Current>,
    record: Option<Recording>,
    replay: Option<Replay>,
    finished: bool,
    /// Clock callers, and where each is.
    callers: HashMap<usize, Module>,
}

/// One rank's record and replay.
pub(crate) struct Choices {
    rank: usize,
    state: Mutex<State>,
    /// Set at `MPI_Finalize`: the writer thread's last round.
    done: Arc<(Mutex<bool>, Condvar)>,
    header: LogHeader,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether this rank records or replays (then every call goes through the core).
#[inline]
pub(crate) fn on() -> bool {
    CHOICES.get().is_some()
}

/// Set up record and replay as the environment says; `false` if neither applies. A log
/// that cannot be read stops the rank (exit 2): the job would otherwise run unforced.
pub(crate) fn init(rank: i32, size: i32, implementation: &str) -> bool {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let (record_to, replay_from) = (var(env::ENV_RECORD), var(env::ENV_REPLAY));
    // A debugging session records in memory, for `save_scenario`.
    let session = var(env::ENV_CONNECT).is_some();
    if record_to.is_none() && replay_from.is_none() && !session {
        return false;
    }
    let rank = usize::try_from(rank).unwrap_or(0);
    let replay = replay_from.map(|path| match ReplayLog::read(std::path::Path::new(&path)) {
        Ok(log) => {
            if log.header.mpi.is_none() {
                eprintln!("racetrack: {path} is the replay log of a program on Racetrack's runtime, not of an MPI job");
                std::process::exit(2);
            }
            Replay {
                script: Script::of_rank(&log, rank),
                active: true,
                clock_at: 0,
            }
        }
        Err(e) => {
            eprintln!("racetrack: rank {rank}: {e}");
            std::process::exit(2);
        }
    });
    let record = (record_to.is_some() || session)
        .then(|| Recording::new(record_to.map(|log| replay_log::rank_part_path(&log, rank))));
    let mut argv = std::env::args();
    let header = LogHeader {
        program: argv.next().unwrap_or_default(),
        args: argv.collect(),
        mpi: Some(MpiJob {
            ranks: usize::try_from(size).unwrap_or(0),
            implementation: implementation.to_owned(),
        }),
    };
    let recording = record.as_ref().is_some_and(|r| r.file.is_some());
    let choices = Choices {
        rank,
        state: Mutex::new(State {
            next: 0,
            current: None,
            record,
            replay,
            finished: false,
            callers: HashMap::new(),
        }),
        done: Arc::new((Mutex::new(false), Condvar::new())),
        header,
    };
    if CHOICES.set(choices).is_err() {
        return true;
    }
    if recording {
        start_writer();
    }
    true
}

/// The writer thread: the part file's header now, then buffered choices every 50 ms.
fn start_writer() {
    let Some(ch) = CHOICES.get() else { return };
    {
        let mut st = lock(&ch.state);
        let Some(rec) = st.record.as_mut() else { return };
        let Some(file) = rec.file.as_ref() else { return };
        let header = replay_log::header_bytes(&ch.header);
        if let Err(e) = std::fs::write(file, header) {
            eprintln!(
                "racetrack: rank {}: cannot write {}: {e}; this rank is not recorded",
                ch.rank,
                file.display()
            );
            rec.lost = true;
            return;
        }
    }
    let done = ch.done.clone();
    let spawned = std::thread::Builder::new()
        .name("racetrack-record".into())
        .spawn(move || loop {
            let (flag, cv) = &*done;
            let finished = {
                let g = lock(flag);
                let (g, _) = cv
                    .wait_timeout(g, WRITE_EVERY)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                *g
            };
            if finished {
                return;
            }
            ch.write(false);
        });
    if spawned.is_err() {
        // Written at MPI_Finalize instead.
        eprintln!(
            "racetrack: rank {}: no writer thread; choices are written at MPI_Finalize",
            ch.rank
        );
    }
}

impl Choices {
    /// Append what can be written: every choice before the oldest open wildcard
    /// `MPI_Irecv` (`all`: everything, at the end), but a run of misses that may go on.
    fn write(&self, all: bool) {
        let (bytes, file) = {
            let mut st = lock(&self.state);
            // The first call whose outcome is not recorded yet: the one in progress (it
            // may be another miss of the run before it), else the next.
            let next = st.current.as_ref().map_or(st.next, |c| c.call);
            let Some(rec) = st.record.as_mut().filter(|r| !r.lost && r.file.is_some()) else {
                return;
            };
            let limit = if all {
                u64::MAX
            } else {
                let open = rec.open.first().copied().unwrap_or(u64::MAX);
                // A miss run ending where the calls not yet recorded begin may still grow.
                let growing = rec
                    .pending
                    .last_key_value()
                    .filter(|(_, c)| matches!(c.what, Chose::Miss { .. }) && c.call + c.calls() == next)
                    .map_or(u64::MAX, |(k, _)| *k);
                open.min(growing)
            };
            let rest = rec.pending.split_off(&limit);
            let ready = std::mem::replace(&mut rec.pending, rest);
            if ready.is_empty() && rec.clocks.is_empty() {
                return;
            }
            let ready: Vec<Choice> = ready.into_values().collect();
            let mut bytes = Vec::with_capacity(ready.len() * 4 + rec.clocks.len() * 4 + 16);
            if !ready.is_empty() {
                rec.written_next =
                    replay_log::put_calls_record(&mut bytes, self.rank, rec.written_next, &ready);
            }
            if !rec.clocks.is_empty() {
                rec.clock_written =
                    replay_log::put_clocks_record(&mut bytes, self.rank, rec.clock_written, &rec.clocks);
                rec.clocks.clear();
            }
            (bytes, rec.file.clone().unwrap_or_default())
        };
        if let Err(e) = append(&file, &bytes) {
            eprintln!(
                "racetrack: rank {}: cannot write {}: {e}; recording stops",
                self.rank,
                file.display()
            );
            if let Some(rec) = lock(&self.state).record.as_mut() {
                rec.lost = true;
            }
        }
    }

    /// A divergence: under a debugger an `error` event, and the rank runs free; else the
    /// job stops (exit code 3).
    fn diverged(&self, replay: &mut Replay, what: &str) {
        replay.active = false;
        let message = format!("replay diverged from the log: rank {}: {what}", self.rank);
        if crate::core::report_error(&format!("{message}; the rank runs free from here")) {
            eprintln!("racetrack: {message}");
            return;
        }
        eprintln!("racetrack: {message}");
        std::process::exit(3);
    }
}

fn append(file: &PathBuf, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new().append(true).open(file)?;
    f.write_all(bytes)
}

/// `rt_start`: number the call and say what a replay forces. Returns the call's token
/// (its number plus one).
pub(crate) fn start(name: &'static str, peer: i32) -> (u64, Forcing) {
    let Some(ch) = CHOICES.get() else {
        return (0, Forcing::default());
    };
    let mut st = lock(&ch.state);
    let call = st.next;
    st.next += 1;
    let kind = kind(name, peer);
    st.current = Some(Current {
        call,
        name,
        kind,
        matched: None,
        indices: Vec::new(),
    });
    let mut forcing = Forcing::default();
    let Some(rp) = st.replay.as_mut().filter(|r| r.active) else {
        return (call + 1, forcing);
    };
    let poll = matches!(
        kind,
        Kind::Poll | Kind::Pick { poll: true } | Kind::Wildcard { poll: true, .. }
    );
    let op = op_of(name);
    let diverged = match rp.script.choose(0, Point::Call { call, op, poll }) {
        Pick::Match { source, tag } => {
            forcing.matched = Some((source, tag));
            forcing.found = poll.then_some(true);
            None
        }
        Pick::Miss => {
            forcing.found = Some(false);
            None
        }
        Pick::Found => {
            forcing.found = Some(true);
            None
        }
        Pick::Requests(r) => {
            // Valid until the call's `rt_stop`: the script never changes.
            forcing.found = Some(true);
            forcing.indices = Some((r.as_ptr(), i32::try_from(r.len()).unwrap_or(0)));
            None
        }
        Pick::Overrun => Some(format!(
            "its call {} is {name}, and the recorded rank made only {} calls",
            call + 1,
            rp.calls()
        )),
        Pick::Mismatch { expected } => Some(format!(
            "its call {} is {name}; the recorded rank's was {}",
            call + 1,
            op_name(expected)
        )),
        // A scenario, or a recording cut short: the log ends here.
        Pick::Done => {
            rp.active = false;
            None
        }
        // Runtime and clock picks mean nothing for a call.
        Pick::AsItComes | Pick::Sender(_) | Pick::Order { .. } | Pick::Reading(_) => None,
    };
    if let Some(what) = diverged {
        ch.diverged(rp, &what);
    }
    (call + 1, forcing)
}

/// `rt_matched`: the call's receive or probe matched.
pub(crate) fn matched(token: u64, source: i32, tag: i32) {
    with_current(token, |c| c.matched = Some((source, tag)));
}

/// `rt_indices`: the requests an `any`/`some` completion completed.
pub(crate) fn indices(token: u64, done: &[i32]) {
    with_current(token, |c| {
        c.indices = done.iter().filter_map(|&i| u32::try_from(i).ok()).collect();
    });
}

fn with_current(token: u64, f: impl FnOnce(&mut Current)) {
    let Some(ch) = CHOICES.get() else { return };
    let mut st = lock(&ch.state);
    if let Some(c) = st.current.as_mut().filter(|c| c.call + 1 == token) {
        f(c);
    }
}

/// `rt_request`: a wildcard `MPI_Irecv`'s request, whose completion says its match.
pub(crate) fn request(token: u64, request: i64) {
    let Some(ch) = CHOICES.get() else { return };
    let mut st = lock(&ch.state);
    let Some(call) = st
        .current
        .as_ref()
        .filter(|c| {
            c.call + 1 == token
                && matches!(
                    c.kind,
                    Kind::Wildcard {
                        nonblocking: true,
                        ..
                    }
                )
        })
        .map(|c| c.call)
    else {
        return;
    };
    if let Some(rec) = st.record.as_mut() {
        rec.irecvs.insert(request, call);
        rec.open.insert(call);
    }
}

/// `rt_completed`: a request completed; a wildcard `MPI_Irecv`'s says what it matched.
pub(crate) fn completed(request: i64, source: i32, tag: i32, cancelled: bool) {
    let Some(ch) = CHOICES.get() else { return };
    let mut st = lock(&ch.state);
    let Some(rec) = st.record.as_mut() else { return };
    let Some(call) = rec.irecvs.remove(&request) else {
        return;
    };
    rec.open.remove(&call);
    if !cancelled {
        let choice = Choice {
            call,
            op: op_of("MPI_Irecv"),
            what: Chose::Match { source, tag },
        };
        keep(ch.rank, rec, choice);
    }
}

/// Buffer `choice`, or give up recording when too much is buffered.
fn keep(rank: usize, rec: &mut Recording, choice: Choice) {
    if rec.lost {
        return;
    }
    if rec.pending.len() >= MAX_PENDING {
        eprintln!(
            "racetrack: rank {rank}: {MAX_PENDING} choices wait to be written (a wildcard MPI_Irecv never completed?); recording stops here"
        );
        rec.lost = true;
        rec.pending.clear();
        return;
    }
    // A miss right after a run of the same call's misses extends it.
    if let Chose::Miss { .. } = choice.what {
        if let Some((_, last)) = rec.pending.iter_mut().next_back() {
            if let Chose::Miss { n } = &mut last.what {
                if last.op == choice.op && last.call + *n == choice.call {
                    *n += 1;
                    return;
                }
            }
        }
    }
    rec.pending.insert(choice.call, choice);
}

/// `rt_stop`: record the call's outcome. `found`: a poll's.
pub(crate) fn stop(token: u64, rc: i32, found: Option<bool>) {
    let Some(ch) = CHOICES.get() else { return };
    let mut st = lock(&ch.state);
    let Some(cur) = st.current.take().filter(|c| c.call + 1 == token) else {
        return;
    };
    let Some(rec) = st.record.as_mut() else { return };
    // A failed call decides nothing, but a receive's truncated message was matched.
    if rc != 0 && cur.matched.is_none() {
        return;
    }
    let what = match (cur.kind, found) {
        (Kind::Poll | Kind::Pick { poll: true } | Kind::Wildcard { poll: true, .. }, Some(false)) => {
            Some(Chose::Miss { n: 1 })
        }
        (
            Kind::Wildcard {
                nonblocking: false, ..
            },
            _,
        ) => cur.matched.map(|(source, tag)| Chose::Match { source, tag }),
        (Kind::Pick { .. }, _) => match cur.indices.as_slice() {
            [] => None,
            [i] if matches!(cur.name, "MPI_Waitany" | "MPI_Testany") => Some(Chose::Index(*i)),
            _ => Some(Chose::Indices(cur.indices.clone())),
        },
        _ => None,
    };
    if let Some(what) = what {
        let op = op_of(cur.name);
        keep(
            ch.rank,
            rec,
            Choice {
                call: cur.call,
                op,
                what,
            },
        );
    }
}

#[cfg(test)]
mod tests;
