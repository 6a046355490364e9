//! The rank's side of a debugging session: one agent per rank (the agent core, driven
//! through its front-end API), the rank as thread `rank[R]` of the collection `rank`,
//! each MPI call a step of the operation named after it (`names`: how). The C wrappers
//! call in here through `ffi` on the thread that called `MPI_Init`; nothing else reports.

use crate::call::Call;
use crate::site::{RankSite, RankView};
use racetrack_agent::agent::front::{Collection, Decision, HoldReason, Operation};
use racetrack_agent::agent::{self, Agent, ReplayError};
use racetrack_protocol::{
    CallInfo, Created, Event, Forced, Kind, Matched, RecordText, SendEv, SmolStr, Step, StepEv,
};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// Each rank numbers its events from `rank × EVENT_ID_STRIDE`: an event number names one
/// event across the job (and stays below 2^53 for 9,000 ranks, exact in JSON).
const EVENT_ID_STRIDE: u64 = 1_000_000_000_000;

mod calls;
mod names;
mod polls;
mod requests;
pub(crate) mod unreported;
pub use calls::CALLS;
use names::{job_threads, start_point};
pub(crate) use polls::tick;
use polls::PollRun;
use requests::Pending;
pub use requests::{completed, request};

static CORE: OnceLock<Core> = OnceLock::new();

thread_local! {
    /// Set on the thread that called `MPI_Init`: the only one whose calls are reported.
    static REPORTING: Cell<bool> = const { Cell::new(false) };
}

/// One rank's core.
pub(crate) struct Core {
    agent: Arc<Agent>,
    /// What the agent's `take_over` reaches (it holds it weakly).
    _control: Arc<dyn racetrack_agent::agent::ReplayControl>,
    hot: Arc<AtomicBool>,
    /// `MPI_Pcontrol(0)` switched reporting off.
    off: AtomicBool,
    pub(crate) rank: i32,
    pub(crate) thread: Arc<str>,
    ops: Mutex<Ops>,
    /// Calls reported so far (numbers them: `R.N` is the call's message id).
    seq: AtomicU64,
    /// Calls between their `rt_start` and `rt_stop`, by token.
    in_flight: Mutex<Flights>,
    /// Nonblocking calls' requests, by `MPI_Request_c2f`, until completed.
    requests: Mutex<HashMap<i64, Pending, crate::site_lines::IdHash>>,
    /// The polling step whose `stop` waits for the run's end (see [`PollRun`]).
    run: Mutex<Option<PollRun>>,
    sites: Mutex<crate::site_lines::Sites>,
    pub(crate) view: RankView,
    /// `MPI_Finalize` was called: nothing more is sampled.
    finished: AtomicBool,
}

/// The calls between their `rt_start` and `rt_stop`, by token: one at a time, as only
/// the thread that called `MPI_Init` reports and no wrapper calls another (a list, not a
/// hash map: nothing to hash, nothing to move around).
#[derive(Default)]
struct Flights(Vec<(u64, InFlight)>);

impl Flights {
    fn insert(&mut self, token: u64, fl: InFlight) {
        self.0.push((token, fl));
    }

    fn remove(&mut self, token: &u64) -> Option<InFlight> {
        let i = self.0.iter().rposition(|(t, _)| t == token)?;
        Some(self.0.swap_remove(i).1)
    }

    fn get(&self, token: &u64) -> Option<&InFlight> {
        self.0.iter().rev().find(|(t, _)| t == token).map(|(_, f)| f)
    }

    fn get_mut(&mut self, token: &u64) -> Option<&mut InFlight> {
        self.0.iter_mut().rev().find(|(t, _)| t == token).map(|(_, f)| f)
    }
}

/// A call being made.
pub(crate) struct InFlight {
    pub(crate) seq: u64,
    pub(crate) op: usize,
    /// The operation's name (shared with the events).
    op_name: Arc<str>,
    pub(crate) call: Call,
    /// The call's parameters, shared by its events until one adds to them.
    pub(crate) info: Arc<CallInfo>,
    pub(crate) forced: Option<Forced>,
    /// The content an edit put in place of the program's buffer.
    pub(crate) edited: Option<Vec<u8>>,
    /// A poll that continues the open [`PollRun`] (its `start` was not reported).
    pub(crate) in_run: bool,
}

/// The operations (calls) by index, and the index of each call name the wrappers used,
/// by the name's address.
struct Ops {
    names: Vec<Arc<str>>,
    by_address: HashMap<usize, usize, crate::site_lines::IdHash>,
}

/// What `rt_start` tells the wrapper.
#[derive(Default)]
pub struct Started {
    /// 0: the call is not reported (no core, or nothing attached).
    pub token: u64,
    /// The source (and tag) a wildcard receive or probe must match.
    pub forced: Option<(i32, Option<i32>)>,
    /// The content to send instead of the program's buffer (valid until `rt_stop`).
    pub edited: Option<*const u8>,
}

/// Start the agent for this rank as the environment says (`RACETRACK_CONNECT` from
/// `racetrack mpirun`); without one, the rank runs with no reporting at all.
pub fn init(rank: i32, size: i32, implementation: &str) {
    let base = u64::try_from(rank).unwrap_or(0) * EVENT_ID_STRIDE;
    let thread: Arc<str> = format!("rank[{rank}]").into();
    let view = RankView::new(thread.clone(), rank, size, implementation);
    // Registered before the agent dials: the job's snapshot then has this rank.
    let setup = |agent: &Agent| {
        agent.set_debuggee(Box::new(view.clone()));
        agent.add_collection(Collection::new("rank", job_threads(rank, size, &thread)));
        agent.add_operations(CALLS.iter().map(|c| Operation::new(*c, "call", 0)), &[]);
    };
    let replaying = crate::choices::init(rank, size, implementation);
    if replaying {
        REPORTING.with(|r| r.set(true));
    }
    let Some(agent) = agent::start_from_env_with(base, setup) else {
        return;
    };
    let control: Arc<dyn racetrack_agent::agent::ReplayControl> = Arc::new(TakeOver);
    agent.set_replay_control(Arc::downgrade(&control));
    let core = Core {
        _control: control,
        hot: agent.hot_flag(),
        agent,
        off: AtomicBool::new(false),
        rank,
        thread,
        ops: Mutex::new(Ops {
            names: CALLS.iter().map(|c| Arc::from(*c)).collect(),
            by_address: HashMap::default(),
        }),
        seq: AtomicU64::new(0),
        in_flight: Mutex::default(),
        requests: Mutex::default(),
        run: Mutex::default(),
        sites: Mutex::default(),
        view,
        finished: AtomicBool::new(false),
    };
    if CORE.set(core).is_ok() {
        REPORTING.with(|r| r.set(true));
    }
}

/// Whether `init` started a core for this rank.
pub fn has_core() -> bool {
    CORE.get().is_some()
}

/// Whether this rank has a core that no debugger attached to yet: one may still come (a
/// rank dials its debugger once; after a session, none comes back).
pub fn never_attached() -> bool {
    CORE.get().is_some_and(|c| c.agent.session() == 0)
}

/// Whether this is the thread that called `MPI_Init` (whose calls are reported).
#[inline]
pub fn reporting() -> bool {
    REPORTING.with(Cell::get)
}

/// Whether the debugger should hear of this call.
#[inline]
pub fn active() -> bool {
    reporting()
        && CORE
            .get()
            .is_some_and(|c| c.hot.load(Relaxed) && !c.off.load(Relaxed))
}

/// Tell the debugger of an error (a replay's divergence); `false` if none is attached.
pub(crate) fn report_error(message: &str) -> bool {
    let Some(core) = CORE.get().filter(|c| c.agent.is_attached()) else {
        return false;
    };
    core.agent.reply(racetrack_protocol::Event::Error {
        message: message.to_owned(),
        req: None,
    });
    true
}

/// The agent's `take_over` and `save_scenario` for an MPI rank.
struct TakeOver;

impl racetrack_agent::agent::ReplayControl for TakeOver {
    fn take_over(&self) -> Result<String, ReplayError> {
        match crate::choices::take_over() {
            Some((made, recorded)) => Ok(format!(
                "taken over after {made} of the {recorded} recorded calls"
            )),
            None => Err(ReplayError::NotReplaying),
        }
    }

    fn scenario(&self) -> Result<(Vec<u8>, String), ReplayError> {
        crate::choices::part()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Core {
    /// The rank is finishing: its part of a scenario goes to the debugger, which keeps it
    /// for a `save_scenario` after this rank is gone (nothing when it records nothing).
    fn send_part(&self) {
        if let Ok((bytes, summary)) = crate::choices::part() {
            if let Ok(ev) = racetrack_agent::agent::scenario_event(None, &bytes, summary, None) {
                self.agent.emit(ev, true);
            }
        }
    }

    /// The operation index and name of call `name` (registering a call outside
    /// [`CALLS`]).
    fn op(&self, name: &'static str) -> (usize, Arc<str>) {
        let mut ops = lock(&self.ops);
        // The wrappers name each call with one static string: its address finds it.
        let address = name.as_ptr() as usize;
        if let Some(&i) = ops.by_address.get(&address) {
            return (i, ops.names[i].clone());
        }
        let i = match ops.names.iter().position(|o| &**o == name) {
            Some(i) => i,
            None => {
                ops.names.push(name.into());
                self.agent.add_operations([Operation::new(name, "call", 0)], &[]);
                ops.names.len() - 1
            }
        };
        ops.by_address.insert(address, i);
        (i, ops.names[i].clone())
    }

    fn site(&self, caller: usize) -> Option<SmolStr> {
        lock(&self.sites).site(caller)
    }

    fn msg(&self, seq: u64) -> String {
        format!("{}.{seq}", self.rank)
    }

    fn step(&self, fl: &InFlight, info: CallInfo, reason: Option<HoldReason>) -> StepEv {
        StepEv {
            event_id: 0,
            thread: SmolStr::new(&*self.thread),
            op: SmolStr::new(&*fl.op_name),
            msg: self.msg(fl.seq).into(),
            instance: self.msg(fl.seq).into(),
            step: Step::Run,
            traced: false,
            held: reason.is_some(),
            reason,
            call: Some(Box::new(info)),
        }
    }

    /// Hold `ev` for `reason` with `fl` as what the debugger's commands change.
    fn hold(
        &self,
        ev: Event,
        reason: HoldReason,
        fl: &mut InFlight,
        is_send: bool,
        still: &dyn Fn() -> bool,
    ) {
        let mut site = RankSite {
            fl,
            is_send,
            view: &self.view,
        };
        let _ = self
            .agent
            .hold(ev, (self.global(), &self.thread), reason, &mut site, still);
    }

    /// Why the `start` of the call with `info` is held: the start hold, a breakpoint, a
    /// pause or step mode. Asked once per call (it counts hits); `Err(())`: not reported
    /// (nothing attached).
    fn start_reason(&self, op: usize, info: &CallInfo) -> Result<Option<HoldReason>, ()> {
        match self.agent.decide(&start_point(self.global(), op, info)) {
            Decision::Skip => Err(()),
            Decision::Stream { .. } => Ok(None),
            Decision::Hold { reason, .. } => Ok(Some(reason)),
        }
    }

    /// The `start` event, held for `reason`.
    fn report_start(&self, fl: &mut InFlight, reason: Option<HoldReason>) {
        let agent = &self.agent;
        let op = fl.op;
        let Some(r) = reason else {
            agent.record(self.record(Kind::Start, fl.seq, op, fl.info.clone()), true);
            return;
        };
        let ev = Event::Start(self.step(fl, CallInfo::clone(&fl.info), reason));
        let info = fl.info.clone();
        let still = || agent.still_holds(&start_point(self.global(), op, &info));
        self.hold(ev, r, fl, false, &still);
    }

    /// A send call's `send` event, with the content when held or asked for.
    fn report_send(&self, fl: &mut InFlight) {
        let agent = &self.agent;
        let (reason, wants) = match agent.decide(&self.send_point()) {
            Decision::Skip => return,
            Decision::Stream { content } => (None, content),
            Decision::Hold { reason, .. } => (Some(reason), true),
        };
        let content = match (&fl.call.elem, &fl.call.content) {
            (Some(e), Some(buf)) if wants => Some(e.decode(&buf.copy())),
            _ => None,
        };
        let type_name = fl.info.datatype.as_deref().unwrap_or("MPI_BYTE");
        if reason.is_none() && content.is_none() {
            let mut rec = self.record(Kind::Send, fl.seq, fl.op, fl.info.clone());
            rec.b = fl.call.peer_world.map_or(-1, i64::from);
            rec.text = RecordText::Type(type_name.into());
            agent.record(rec, true);
            return;
        }
        let ev = Event::Send(SendEv {
            event_id: 0,
            thread: Some(SmolStr::new(&*self.thread)),
            op: Some(SmolStr::new(&*fl.op_name)),
            msg: self.msg(fl.seq).into(),
            to_op: None,
            to_thread: fl.call.peer_world.map(|p| format!("rank[{p}]").into()),
            type_name: type_name.into(),
            traced: false,
            held: reason.is_some(),
            reason,
            content,
            call: Some(Box::new(CallInfo::clone(&fl.info))),
        });
        match reason {
            None => agent.emit(ev, true),
            Some(r) => self.hold(ev, r, fl, true, &|| agent.still_holds(&self.send_point())),
        }
    }
}

/// `rt_start`.
pub fn start(mut call: Call) -> Started {
    let Some(core) = CORE.get() else {
        return Started::default();
    };
    let seq = core.seq.fetch_add(1, Relaxed);
    if call.name == "MPI_Finalize" {
        core.send_part();
    }
    let (op, op_name) = core.op(call.name);
    let mut info = call.info(core.site(call.caller));
    match call.name {
        "MPI_Wait" | "MPI_Waitall" | "MPI_Waitany" | "MPI_Waitsome" => {
            let any = matches!(call.name, "MPI_Waitany" | "MPI_Waitsome");
            info.awaits = call.awaits.as_deref().and_then(|ids| core.awaited(ids, any));
        }
        "MPI_Request_free" => core.forget(call.awaits.as_deref().unwrap_or_default()),
        _ => {}
    }
    if matches!(call.name, "MPI_Recv" | "MPI_Probe" | "MPI_Mprobe") {
        info.posted = core.posted();
    }
    let info = Arc::new(info);
    let sends = call.sends();
    let polls = call.polls();
    core.view.calling(&op_name, seq);
    let reason = core.start_reason(op, &info);
    {
        let mut run = lock(&core.run);
        if let (Some(r), Ok(None), true) = (run.as_mut(), reason, polls) {
            if r.fl.op == op && *r.fl.info == *info {
                // The run goes on: this poll reports nothing unless it ends it.
                r.polls += 1;
                r.last = Instant::now();
                drop(run);
                let token = seq + 1;
                let fl = InFlight::new((seq, op, op_name), call, info, true);
                lock(&core.in_flight).insert(token, fl);
                return Started {
                    token,
                    ..Started::default()
                };
            }
        }
        let ended = run.take();
        drop(run);
        if let Some(r) = ended {
            core.end_run(r, None, None, true);
        }
    }
    let mut fl = InFlight::new((seq, op, op_name), call, info, false);
    if let Ok(reason) = reason {
        core.report_start(&mut fl, reason);
    }
    if sends {
        core.report_send(&mut fl);
    }
    let started = Started {
        token: seq + 1,
        forced: fl.forced.as_ref().map(|f| (f.source, f.tag)),
        edited: fl.edited.as_ref().map(|b| b.as_ptr()),
    };
    lock(&core.in_flight).insert(seq + 1, fl);
    started
}

/// `rt_stop`. `found`: a poll's outcome (`None` for other calls).
pub fn stop(token: u64, rc: i32, created: Option<(String, Option<i32>, Option<i32>)>, found: Option<bool>) {
    let Some(core) = CORE.get() else { return };
    let Some(fl) = lock(&core.in_flight).remove(&token) else {
        return;
    };
    core.view.returned();
    let agent = &core.agent;
    let held = match agent.decide(&core.stop_point()) {
        Decision::Skip => {
            lock(&core.run).take();
            return;
        }
        Decision::Stream { .. } => None,
        Decision::Hold { reason, .. } => Some(reason),
    };
    // A poll that found nothing, held by nothing, leaves its step open.
    let idle = found == Some(false) && rc == 0 && fl.forced.is_none() && held.is_none();
    if fl.in_run {
        let mut run = lock(&core.run);
        if idle && run.is_some() {
            return;
        }
        let ended = run.take();
        drop(run);
        if let Some(r) = ended {
            core.end_run(r, Some(&fl), Some(rc), true);
        }
        return;
    }
    if idle && fl.call.polls() {
        *lock(&core.run) = Some(PollRun {
            fl,
            polls: 1,
            last: Instant::now(),
        });
        return;
    }
    let created = created.and_then(|(comm, rank, leader)| {
        Some(Created {
            comm,
            rank: rank?,
            leader: leader?,
        })
    });
    // The start's parameters, unless the call added to them.
    let info = if fl.forced.is_none() && rc == 0 && created.is_none() {
        fl.info.clone()
    } else {
        let mut info = CallInfo::clone(&fl.info);
        info.forced = fl.forced.clone();
        info.rc = (rc != 0).then_some(rc);
        info.created = created;
        Arc::new(info)
    };
    let Some(r) = held else {
        agent.record(core.record(Kind::Stop, fl.seq, fl.op, info), true);
        return;
    };
    let ev = Event::Stop(core.step(&fl, CallInfo::clone(&info), Some(r)));
    let mut fl = fl;
    core.hold(ev, r, &mut fl, false, &|| agent.still_holds(&core.stop_point()));
}

/// `rt_matched`: a blocking receive or a probe matched.
pub fn matched(token: u64, source: i32, tag: i32, bytes: i64) {
    let Some(core) = CORE.get() else { return };
    let mut flights = lock(&core.in_flight);
    let Some(fl) = flights.get_mut(&token) else { return };
    Arc::make_mut(&mut fl.info).matched = Some(Matched { source, tag, bytes });
    if fl.call.receives() {
        let (seq, op, info) = (fl.seq, fl.op, fl.info.clone());
        drop(flights);
        core.report_recv(seq, op, info);
    }
}

impl InFlight {
    fn new(
        (seq, op, op_name): (u64, usize, Arc<str>),
        call: Call,
        info: Arc<CallInfo>,
        in_run: bool,
    ) -> Self {
        Self {
            seq,
            op,
            op_name,
            call,
            info,
            forced: None,
            edited: None,
            in_run,
        }
    }
}

impl Core {
    /// A receive matched: the `recv` event (never held: the rank is inside MPI).
    fn report_recv(&self, seq: u64, op: usize, info: Arc<CallInfo>) {
        if !self.agent.is_attached() {
            return;
        }
        self.agent.record(self.record(Kind::Recv, seq, op, info), true);
    }
}

/// `rt_pcontrol`.
pub fn pcontrol(level: i32, label: Option<String>) {
    let Some(core) = CORE.get() else { return };
    match level {
        0 => core.off.store(true, Relaxed),
        1 => core.off.store(false, Relaxed),
        _ => core.view.label(label),
    }
}

/// `rt_finalize`: release every hold and flush every event to the debugger.
pub fn finalize() {
    let Some(core) = CORE.get() else { return };
    core.finished.store(true, Relaxed);
    let ended = lock(&core.run).take();
    if let Some(r) = ended {
        core.end_run(r, None, None, true);
    }
    core.agent.shutdown();
    core.agent.finish();
}
