//! The C entry points of `racetrack_mpi.h`, called by the per-implementation wrappers.
//! The only unsafe code of the crate: it reads the wrappers' `rt_call` structs and the
//! buffers and strings they point to, for the duration of the call that passed them.

#![allow(unsafe_code)]

use crate::call::{Call, Elem, Starts};
use crate::{choices, core};
use racetrack_agent::choice::{self, Pick};
use racetrack_protocol::SmolStr;
use std::ffi::{c_char, c_void, CStr};

mod unreported;
pub(crate) use unreported::{adopt_open, sample, Adoption, Sampled};
use unreported::{adopted, begin_unreported};

/// `RT_NONE`: a field that does not apply.
pub const RT_NONE: i32 = i32::MIN;
/// `RT_ANY`: `MPI_ANY_SOURCE` or `MPI_ANY_TAG`, normalised.
pub const RT_ANY: i32 = -1;
/// `RT_STARTS_SEND` and `RT_STARTS_RECV`: what an `MPI_Start` started.
const RT_STARTS_SEND: i32 = 1;
const RT_STARTS_RECV: i32 = 2;

/// The wrappers' `rt_call` (see `c/racetrack_mpi.h`, which is the authority on the
/// layout: keep the two in the same order).
#[repr(C)]
pub struct RtCall {
    name: *const c_char,
    peer: i32,
    peer_world: i32,
    tag: i32,
    count: i32,
    root: i32,
    bytes: i64,
    datatype: *const c_char,
    comm: *const c_char,
    send_buf: *const c_void,
    elem_kind: c_char,
    elem_size: i32,
    caller: *mut c_void,
    source: i32,
    starts: i32,
    awaits: *const i64,
    awaits_live: *const u8,
    awaits_count: i32,
    forced_source: i32,
    forced_tag: i32,
    edited_buf: *const c_void,
    new_rank: i32,
    new_leader: i32,
    new_comm: *const c_char,
    found: i32,
    forced_found: i32,
    forced_count: i32,
    forced_indices: *const i32,
    core: u64,
    choice: u64,
}

/// A C string the wrappers passed, or `None` for NULL.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string valid for the call (the header's contract).
unsafe fn text<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated per the header's contract.
    unsafe { CStr::from_ptr(p) }.to_str().ok()
}

fn opt(v: i32) -> Option<i32> {
    (v != RT_NONE).then_some(v)
}

/// A send's buffer: `len` bytes at `addr`, which the program may not touch while the
/// call is in progress (MPI's rule for every send, blocking or not), and which this
/// library reads only then: between the call's `rt_start` and its `rt_stop`.
#[derive(Debug, Clone, Copy)]
pub struct SendBuf {
    addr: usize,
    len: usize,
}

impl SendBuf {
    /// A copy of the bytes, taken only when they are shown (a held send, or content
    /// asked for): copying every message sent costs a busy program more than anything
    /// else the library does. Call it before the call's `rt_stop`.
    pub fn copy(&self) -> Vec<u8> {
        // SAFETY: a send's buffer holds `len` bytes, unmodified and valid until the call
        // returns (the header's contract, MPI's rule); callers read it before rt_stop.
        unsafe { std::slice::from_raw_parts(self.addr as *const u8, self.len) }.to_vec()
    }
}

/// What `c` describes, copied out (names, numbers and where the send's content is).
///
/// # Safety
/// `c` points to a valid `rt_call` whose pointers follow the header's contract.
unsafe fn read(c: &RtCall) -> Call {
    // SAFETY: the header's contract for every pointer field; `name` is a static string.
    let (name, datatype, comm) = unsafe { (text::<'static>(c.name), text(c.datatype), text(c.comm)) };
    let elem = Elem::of(c.elem_kind as u8, c.elem_size);
    let content = match (elem, c.send_buf.is_null(), usize::try_from(c.count)) {
        (Some(e), false, Ok(n)) => Some(SendBuf {
            addr: c.send_buf as usize,
            len: n.saturating_mul(e.size),
        }),
        _ => None,
    };
    Call {
        name: name.unwrap_or("MPI_(unknown)"),
        peer: opt(c.peer),
        source: opt(c.source),
        peer_world: opt(c.peer_world),
        tag: opt(c.tag),
        count: opt(c.count),
        root: opt(c.root),
        bytes: (c.bytes >= 0).then_some(c.bytes),
        datatype: datatype.map(SmolStr::new),
        comm: comm.map(SmolStr::new),
        elem,
        content,
        caller: c.caller as usize,
        starts: match c.starts {
            RT_STARTS_SEND => Some(Starts::Send),
            RT_STARTS_RECV => Some(Starts::Recv),
            _ => None,
        },
        // SAFETY: the header's contract: `awaits_count` ids and liveness flags, valid
        // until `rt_start` returns (this runs inside it).
        awaits: unsafe { awaited(c) },
    }
}

/// The live requests a `Wait*` call was given (see `rt_call.awaits`).
///
/// # Safety
/// `c.awaits` and `c.awaits_live` point to `c.awaits_count` elements, or are NULL.
unsafe fn awaited(c: &RtCall) -> Option<Vec<i64>> {
    let n = usize::try_from(c.awaits_count).ok()?;
    if c.awaits.is_null() || c.awaits_live.is_null() {
        return None;
    }
    // SAFETY: as the function's contract says.
    let (ids, live) = unsafe {
        (
            std::slice::from_raw_parts(c.awaits, n),
            std::slice::from_raw_parts(c.awaits_live, n),
        )
    };
    Some(
        ids.iter()
            .zip(live)
            .filter(|(_, &l)| l != 0)
            .map(|(&id, _)| id)
            .collect(),
    )
}

/// Run `f` on the call `c` points to, if it is not NULL; a panic stops here (the core
/// is a guest in the program: it never unwinds into C).
fn with_call(c: *mut RtCall, f: impl FnOnce(&mut RtCall)) {
    if c.is_null() {
        return;
    }
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: the wrapper passes its own `rt_call`, valid and unaliased for the call.
        f(unsafe { &mut *c })
    }));
}

/// `rt_init`: start the agent for this rank.
#[no_mangle]
pub extern "C" fn rt_init(world_rank: i32, world_size: i32, implementation: *const c_char) {
    // SAFETY: NULL or the wrappers' static string.
    let implementation = unsafe { text(implementation) }.unwrap_or("MPI").to_owned();
    let _ = std::panic::catch_unwind(move || core::init(world_rank, world_size, &implementation));
}

/// `rt_active`: whether to report this call (one atomic read and a thread-local one).
#[no_mangle]
pub extern "C" fn rt_active() -> i32 {
    i32::from(core::reporting() && (choices::on() || core::active()))
}

/// `rt_start`: the `start` (and a send's `send`) event; may hold the rank.
#[no_mangle]
pub extern "C" fn rt_start(c: *mut RtCall) {
    with_call(c, |c| {
        // SAFETY: `name` is NULL or the wrapper's static string.
        let name = unsafe { text::<'static>(c.name) }.unwrap_or("MPI_(unknown)");
        let (token, replay) = choices::start(name, c.peer);
        c.choice = token;
        (c.forced_source, c.forced_tag) = replay.matched.unwrap_or((RT_NONE, RT_NONE));
        c.forced_found = replay.found.map_or(RT_NONE, i32::from);
        (c.forced_indices, c.forced_count) = replay.indices.unwrap_or((std::ptr::null(), RT_NONE));
        c.core = 0;
        c.edited_buf = std::ptr::null();
        if !core::active() {
            // SAFETY: `with_call` checked the pointer; the wrapper filled the struct.
            unsafe { begin_unreported(c) };
            return;
        }
        // SAFETY: `with_call` checked the pointer; the wrapper filled the struct.
        let call = unsafe { read(c) };
        let out = core::start(call);
        c.core = out.token;
        // The choice point's precedence: the debugger's pick for the held call (live
        // control) wins over the log's.
        let logged = replay
            .matched
            .map_or(Pick::AsItComes, |(source, tag)| Pick::Match { source, tag });
        let live = out.forced.map_or(Pick::AsItComes, |(source, tag)| Pick::Match {
            source,
            tag: tag.unwrap_or(RT_NONE),
        });
        if let Pick::Match { source, tag } = choice::first([live, logged]) {
            c.forced_source = source;
            c.forced_tag = tag;
        }
        c.edited_buf = out.edited.map_or(std::ptr::null(), |b| b.cast());
    });
}

/// `rt_stop`: the `stop` event.
#[no_mangle]
pub extern "C" fn rt_stop(c: *mut RtCall, rc: i32) {
    with_call(c, |c| {
        // SAFETY: as in `rt_start`.
        let new_comm = unsafe { text(c.new_comm) }.map(str::to_owned);
        let created = new_comm.map(|comm| (comm, opt(c.new_rank), opt(c.new_leader)));
        let found = opt(c.found).map(|f| f != 0);
        choices::stop(c.choice, rc, found);
        if c.core == 0 {
            c.core = adopted(c, true);
        }
        core::stop(c.core, rc, created, found);
        c.edited_buf = std::ptr::null();
    });
}

/// `rt_matched`: a receive or probe of the call matched.
#[no_mangle]
pub extern "C" fn rt_matched(c: *mut RtCall, source: i32, tag: i32, bytes: i64) {
    with_call(c, |c| {
        choices::matched(c.choice, source, tag);
        if c.core == 0 {
            c.core = adopted(c, false);
        }
        core::matched(c.core, source, tag, bytes);
    });
}

/// `rt_indices`: the request indices an `any`/`some` completion completed.
#[no_mangle]
pub extern "C" fn rt_indices(c: *mut RtCall, indices: *const i32, n: i32) {
    with_call(c, |c| {
        let n = usize::try_from(n).unwrap_or(0);
        if indices.is_null() || n == 0 {
            return;
        }
        // SAFETY: the wrapper passes `n` ints it owns, valid for the call.
        let done = unsafe { std::slice::from_raw_parts(indices, n) };
        choices::indices(c.choice, done);
    });
}

/// `rt_request`: a nonblocking call created `request`.
#[no_mangle]
pub extern "C" fn rt_request(c: *mut RtCall, request: i64) {
    with_call(c, |c| {
        choices::request(c.choice, request);
        if c.core == 0 {
            c.core = adopted(c, false);
        }
        core::request(c.core, request);
    });
}

/// `rt_completed`: a completion call completed `request`.
#[no_mangle]
pub extern "C" fn rt_completed(
    c: *mut RtCall,
    request: i64,
    source: i32,
    tag: i32,
    bytes: i64,
    cancelled: i32,
) {
    with_call(c, |c| {
        choices::completed(request, source, tag, cancelled != 0);
        if c.core == 0 {
            c.core = adopted(c, false);
        }
        core::completed(c.core, request, (source, tag, bytes), cancelled != 0);
    });
}

/// `rt_clock`: what `MPI_Wtime` (`libc` 0) or `time()` (1) returns, given what it read
/// and who called it (a replay's recorded reading, for the program's own calls).
#[no_mangle]
pub extern "C" fn rt_clock(t: f64, caller: *const c_void, libc: i32) -> f64 {
    std::panic::catch_unwind(|| choices::clock(t, caller as usize, libc != 0)).unwrap_or(t)
}

/// `rt_pcontrol`: reporting on or off, or a label.
#[no_mangle]
pub extern "C" fn rt_pcontrol(level: i32, label: *const c_char) {
    // SAFETY: NULL or a C string the program passed to MPI_Pcontrol.
    let label = unsafe { text(label) }.map(str::to_owned);
    let _ = std::panic::catch_unwind(move || core::pcontrol(level, label));
}

/// `rt_finalize`: flush every event before MPI goes away.
#[no_mangle]
pub extern "C" fn rt_finalize() {
    let _ = std::panic::catch_unwind(|| {
        choices::finalize();
        core::finalize();
    });
}

/// glibc's `Dl_info`.
#[repr(C)]
struct DlInfo {
    fname: *const c_char,
    fbase: *mut c_void,
    sname: *const c_char,
    saddr: *mut c_void,
}

extern "C" {
    fn dladdr(addr: *const c_void, info: *mut DlInfo) -> i32;
}

/// Where the program called MPI from, when its debug information does not say (see
/// `site_lines`): `function+0xOFF (module)` from the dynamic symbol table (functions the
/// executable exports, or a shared library's), else `module+0xOFF`, else the address;
/// `None` without an address.
pub(crate) fn symbol_site(caller: usize) -> Option<String> {
    if caller == 0 {
        return None;
    }
    // The return address is just after the call instruction: look up the byte before it,
    // which is inside the call even when the call is a function's last instruction.
    let addr = (caller - 1) as *const c_void;
    let mut info = DlInfo {
        fname: std::ptr::null(),
        fbase: std::ptr::null_mut(),
        sname: std::ptr::null(),
        saddr: std::ptr::null_mut(),
    };
    // SAFETY: dladdr only reads the address and fills `info`; it returns 0 if it knows
    // nothing about the address.
    if unsafe { dladdr(addr, &mut info) } == 0 {
        return Some(format!("{caller:#x}"));
    }
    // SAFETY: dladdr's strings are NULL or point into the loaded objects' tables, which
    // stay loaded (program and MPI libraries are never unloaded while MPI runs).
    let (module, symbol) = unsafe { (text(info.fname), text(info.sname)) };
    let module = module.map(|m| m.rsplit('/').next().unwrap_or(m)).unwrap_or("?");
    Some(match symbol {
        Some(sym) => format!("{sym}+{:#x} ({module})", caller - 1 - info.saddr as usize),
        None => format!("{module}+{:#x}", caller - 1 - info.fbase as usize),
    })
}

/// A loaded object (the executable or a shared library) that contains an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Loaded {
    /// Its file as the dynamic linker names it; `None` for the executable (whose
    /// file is `/proc/self/exe`, even when the executable was deleted or replaced).
    pub path: Option<String>,
    /// The load bias: what was added to the file's addresses (0 for a non-PIE
    /// executable), so the file's address of `addr` is `addr - bias`.
    pub bias: usize,
}

#[cfg(target_pointer_width = "64")]
#[repr(C)]
#[allow(dead_code)] // glibc's layout: every field is needed to find the next header
struct Phdr {
    p_type: u32,
    p_flags: u32,
    p_offset: u64,
    p_vaddr: u64,
    p_paddr: u64,
    p_filesz: u64,
    p_memsz: u64,
    p_align: u64,
}

#[cfg(target_pointer_width = "32")]
#[repr(C)]
#[allow(dead_code)] // glibc's layout: every field is needed to find the next header
struct Phdr {
    p_type: u32,
    p_offset: u32,
    p_vaddr: u32,
    p_paddr: u32,
    p_filesz: u32,
    p_memsz: u32,
    p_flags: u32,
    p_align: u32,
}

/// The leading fields of `struct dl_phdr_info` (the callback gets the size of the
/// whole; these four have been there since the start).
#[repr(C)]
struct DlPhdrInfo {
    addr: usize,
    name: *const c_char,
    phdr: *const Phdr,
    phnum: u16,
}

const PT_LOAD: u32 = 1;

extern "C" {
    fn dl_iterate_phdr(
        callback: extern "C" fn(*mut DlPhdrInfo, usize, *mut c_void) -> i32,
        data: *mut c_void,
    ) -> i32;
}

/// `dl_iterate_phdr`'s search for the object containing `addr`.
struct Search {
    addr: usize,
    visited: usize,
    found: Option<Loaded>,
}

/// One loaded object: stop (1) at the one with a loaded segment containing the address.
/// Never panics (a panic here would abort: it is called from C).
extern "C" fn visit(info: *mut DlPhdrInfo, _size: usize, data: *mut c_void) -> i32 {
    // SAFETY: `data` is the `Search` that `module_at` passed, alive and unaliased for the
    // iteration; `info` is glibc's, valid during this callback.
    let (search, info) = unsafe { (&mut *data.cast::<Search>(), &*info) };
    let first = search.visited == 0;
    search.visited += 1;
    if info.phdr.is_null() {
        return 0;
    }
    // SAFETY: `phdr` points to the object's `phnum` program headers.
    let phdrs = unsafe { std::slice::from_raw_parts(info.phdr, usize::from(info.phnum)) };
    let inside = phdrs.iter().any(|ph| {
        let start = info.addr.wrapping_add(ph.p_vaddr as usize);
        ph.p_type == PT_LOAD && search.addr.wrapping_sub(start) < ph.p_memsz as usize
    });
    if !inside {
        return 0;
    }
    search.found = Some(Loaded {
        // The first object visited is the executable (its name is empty).
        // SAFETY: NULL or the object's NUL-terminated name, valid during the callback.
        path: if first {
            None
        } else {
            unsafe { text(info.name) }.map(str::to_owned)
        },
        bias: info.addr,
    });
    1
}

/// The loaded object that contains `addr`, if any.
pub(crate) fn module_at(addr: usize) -> Option<Loaded> {
    let mut search = Search {
        addr,
        visited: 0,
        found: None,
    };
    // SAFETY: `visit` reads only what glibc passes it and the `Search` it is given,
    // which outlives the call.
    unsafe { dl_iterate_phdr(visit, (&mut search as *mut Search).cast()) };
    search.found
}

/// An address inside glibc, which has no debug information here.
#[cfg(test)]
pub(crate) fn dladdr_address() -> usize {
    dladdr as *const () as usize
}
