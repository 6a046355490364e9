//! The entry points and calls behind the watch for unreported calls
//! (`core::unreported`): the wrappers' sampler, and the covered call a rank is in while
//! nothing reports it, which a debugger that attaches meanwhile adopts.

use super::{read, RtCall};
use crate::call::Call;
use crate::core;
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

/// The covered call the MPI_Init thread is in while the core does not report it (it
/// began with no debugger attached; its `rt_call`'s address is [`OPEN_CALL`]): what the
/// `rt_call` said, copied at its `rt_start` (without the send's content: the watcher
/// that adopts it never reads the rank's stack), and the token the core gave it when a
/// debugger that attached meanwhile adopted it (0: not adopted; see `core::unreported`).
struct Open {
    copy: Option<Call>,
    token: u64,
}

const NO_CALL: Open = Open { copy: None, token: 0 };

static OPEN: Mutex<Open> = Mutex::new(NO_CALL);

/// The remembered call's `rt_call` address (0: none), read without the lock on every
/// unreported call's match and stop: only the MPI_Init thread sets it (the watcher
/// changes the token and the copy), so its own read is exact, and the lock is taken
/// only for the call remembered.
static OPEN_CALL: AtomicUsize = AtomicUsize::new(0);

fn open_call() -> std::sync::MutexGuard<'static, Open> {
    OPEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `rt_start`, not reporting `c`: remember it, on the MPI_Init thread of a rank with a
/// core no debugger attached to yet (one may attach while it is in the call). A call
/// made inside an adopted one (a callback MPI runs, an error handler) is not: the
/// adopted call keeps its token.
///
/// # Safety
/// As [`read`]: `c` is the wrapper's `rt_call`, inside its `rt_start`.
pub(super) unsafe fn begin_unreported(c: &RtCall) {
    if !core::reporting() || !core::never_attached() {
        return;
    }
    let mut open = open_call();
    if open.token != 0 {
        return;
    }
    // SAFETY: as the function's contract says.
    let mut call = unsafe { read(c) };
    call.content = None;
    let addr = std::ptr::from_ref(c) as usize;
    *open = Open {
        copy: Some(call),
        token: 0,
    };
    OPEN_CALL.store(addr, Relaxed);
}

/// The token call `c` got if a debugger adopted it (0: none). Called as the call
/// returns (its match, its requests, its stop): from then on it cannot be adopted, and
/// `end` (its stop) forgets it.
pub(super) fn adopted(c: &RtCall, end: bool) -> u64 {
    let addr = std::ptr::from_ref(c) as usize;
    if !core::reporting() || OPEN_CALL.load(Relaxed) != addr {
        return 0;
    }
    let mut open = open_call();
    let token = open.token;
    if end || token == 0 {
        *open = NO_CALL;
        OPEN_CALL.store(0, Relaxed);
    }
    token
}

/// What became of the call the MPI_Init thread was in, unreported.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Adoption {
    /// Its `start` was reported; its `stop` will be.
    Adopted,
    /// There is none to adopt: not remembered (a rank whose wrappers pass calls
    /// straight on until a debugger attaches), returned already, not the call `name`
    /// (one made inside another), or not reported (nothing attached).
    Not,
}

/// Adopt the covered call `name` the MPI_Init thread is in, which began unreported:
/// `report` gets the call as its `rt_start` saw it, reports its start, and gives its
/// token. It runs under the lock that the call's match and stop take: keep it short.
pub(crate) fn adopt_open(name: &str, report: impl FnOnce(Call) -> Option<u64>) -> Adoption {
    let mut open = open_call();
    let Some(call) = open.copy.as_ref().filter(|c| open.token == 0 && c.name == name) else {
        return Adoption::Not;
    };
    match report(call.clone()) {
        Some(token) => {
            open.token = token;
            open.copy = None;
            Adoption::Adopted
        }
        None => Adoption::Not,
    }
}

/// The wrappers' sampler (`rt_sample_fn` in `racetrack_mpi.h`).
type SampleFn = extern "C" fn(name: *mut c_char, cap: i32, site: *mut *mut c_void) -> i32;

static SAMPLER: std::sync::OnceLock<SampleFn> = std::sync::OnceLock::new();

/// `rt_has_core`: whether `rt_init` started a core (a debugger to report to).
#[no_mangle]
pub extern "C" fn rt_has_core() -> i32 {
    i32::from(core::has_core())
}

/// `rt_sampler`: the wrappers can sample the MPI_Init thread, kernel thread `tid`, with
/// signal `sig`.
#[no_mangle]
pub extern "C" fn rt_sampler(sample: Option<SampleFn>, tid: i32, sig: i32) {
    let Some(sample) = sample else { return };
    if SAMPLER.set(sample).is_ok() {
        let _ = std::panic::catch_unwind(|| core::unreported::watch(tid, sig));
    }
}

/// What a sample of the MPI_Init thread found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Sampled {
    /// Inside an MPI call the wrappers do not cover: its name and the program's return
    /// address (0: unknown).
    Unreported(String, usize),
    /// Inside a wrapper: a covered call (the same).
    Covered(String, usize),
    /// Not in MPI.
    Elsewhere,
}

/// Sample the MPI_Init thread (`None`: no sampler, or the thread could not be sampled).
pub(crate) fn sample() -> Option<Sampled> {
    let sample = SAMPLER.get()?;
    let mut name = [0 as c_char; 96];
    let mut site: *mut c_void = std::ptr::null_mut();
    let cap = i32::try_from(name.len()).unwrap_or(0);
    let found = sample(name.as_mut_ptr(), cap, &mut site);
    if !matches!(found, 1 | 2) {
        return (found == 0).then_some(Sampled::Elsewhere);
    }
    // SAFETY: on 1 and 2 the sampler wrote a NUL-terminated name into `name`.
    let call = unsafe { CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    Some(match found {
        1 => Sampled::Unreported(call, site as usize),
        _ => Sampled::Covered(call, site as usize),
    })
}
