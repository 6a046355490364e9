//! Call sites as `file:line (function)`: the caller's return address looked up in the
//! DWARF of the object that contains it (the executable or a shared library), with
//! `addr2line`.
//!
//! Each distinct call site is resolved once; each object's file is read once, on the
//! first call site inside it, on the thread of that call. Only the file's DWARF
//! sections and symbol table are read (into memory owned here, kept for the process's
//! life: no file stays open or mapped, so a file replaced or truncated meanwhile cannot
//! fault the program). Anything odd (no file, stripped, no debug information, compressed
//! or split DWARF, unparsable) falls back silently along the chain
//! `file:line (function)` → `function+0xOFF (module)` (from the file's symbol table,
//! which a program not linked `-rdynamic` keeps `main` in) → what `dladdr` knows
//! (`function+0xOFF (module)` from the dynamic symbols, `module+0xOFF`, the address).
//!
//! `file` is the path the DWARF gives, made absolute with the compilation directory when
//! the compiler recorded it relative, in full (clients shorten it if they need to).
//! `function` is the DWARF subprogram's name (its linkage name demangled for Rust; C++
//! linkage names stay mangled), for an inlined call the inlined function's.

use crate::ffi;
use addr2line::Context;
use gimli::{EndianArcSlice, RunTimeEndian, SectionId};
use object::read::ReadCache;
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};
use racetrack_protocol::SmolStr;
use std::collections::HashMap;
use std::fs::File;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

type Reader = EndianArcSlice<RunTimeEndian>;

/// The call sites resolved so far, and the objects read to resolve them.
#[derive(Default)]
pub(crate) struct Sites {
    by_caller: HashMap<usize, Option<SmolStr>, IdHash>,
    /// By file (`None`: the executable); `None` when the file could not be read.
    modules: HashMap<Option<String>, Option<Module>>,
}

/// What one object's file says about its addresses (file addresses: before the bias).
struct Module {
    /// The file's name, to show in the fallback.
    name: String,
    lines: Option<Context<Reader>>,
    /// The symbol table's functions: start, size, name; by start.
    functions: Vec<(u64, u64, String)>,
}

impl Sites {
    /// Where the program called from, for the return address `caller` (see the module
    /// doc); `None` without an address.
    /// The site of the call that returns to `caller` (resolved once; a clone is a
    /// reference count, not a copy).
    pub(crate) fn site(&mut self, caller: usize) -> Option<SmolStr> {
        if let Some(site) = self.by_caller.get(&caller) {
            return site.clone();
        }
        let site = self.resolve(caller).map(SmolStr::from);
        self.by_caller.insert(caller, site.clone());
        site
    }

    fn resolve(&mut self, caller: usize) -> Option<String> {
        if caller == 0 {
            return None;
        }
        // The byte before the return address is inside the call instruction, even when
        // the call is the last instruction of its function.
        let pc = caller - 1;
        let from_file = ffi::module_at(pc).and_then(|loaded| {
            let module = self
                .modules
                .entry(loaded.path.clone())
                .or_insert_with(|| guarded(|| Module::load(loaded.path.as_deref())))
                .as_ref()?;
            guarded(|| module.describe(pc.wrapping_sub(loaded.bias) as u64))
        });
        from_file.or_else(|| ffi::symbol_site(caller))
    }
}

/// `f`'s answer, or `None` if it panicked: a parser's bug on an odd file must not
/// take the program down.
fn guarded<T>(f: impl FnOnce() -> Option<T>) -> Option<T> {
    catch_unwind(AssertUnwindSafe(f)).ok().flatten()
}

impl Module {
    /// Read the file `path` (`None`: the executable's).
    fn load(path: Option<&str>) -> Option<Module> {
        let file = File::open(path.unwrap_or("/proc/self/exe")).ok()?;
        let exe = || Some(std::env::current_exe().ok()?.to_string_lossy().into_owned());
        let name = path
            .map(str::to_owned)
            .or_else(exe)
            .unwrap_or_else(|| "?".to_owned());
        let name = name.rsplit('/').next().unwrap_or(&name).to_owned();
        let cache = ReadCache::new(file);
        let object = object::File::parse(&cache).ok()?;
        let mut functions: Vec<(u64, u64, String)> = object
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.size() > 0)
            .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.to_owned())))
            .collect();
        functions.sort_unstable();
        Some(Module {
            name,
            lines: lines(&object),
            functions,
        })
    }

    /// The site at file address `addr`, if this file knows the function there.
    fn describe(&self, addr: u64) -> Option<String> {
        let symbol = self.function_at(addr);
        if let Some((file, line, function)) = self.lines.as_ref().and_then(|c| line_at(c, addr)) {
            return Some(
                match function.or_else(|| symbol.map(|(name, _)| name.to_owned())) {
                    Some(f) => format!("{file}:{line} ({f})"),
                    None => format!("{file}:{line}"),
                },
            );
        }
        symbol.map(|(name, off)| format!("{name}+{off:#x} ({})", self.name))
    }

    /// The symbol table's function containing `addr`, and the offset in it.
    fn function_at(&self, addr: u64) -> Option<(&str, u64)> {
        let i = self.functions.partition_point(|f| f.0 <= addr).checked_sub(1)?;
        let (start, size, name) = &self.functions[i];
        let off = addr - start;
        (off < *size).then_some((name.as_str(), off))
    }
}

/// The file's DWARF, if it has some it can read.
fn lines<'a>(object: &object::File<'a, &'a ReadCache<File>>) -> Option<Context<Reader>> {
    object.section_by_name(".debug_info")?;
    let endian = if object.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    let load = |id: SectionId| -> Result<Reader, gimli::Error> {
        let data = object
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok())
            .unwrap_or_default();
        Ok(EndianArcSlice::new(Arc::from(&*data), endian))
    };
    let dwarf = gimli::Dwarf::load(load).ok()?;
    Context::from_dwarf(dwarf).ok()
}

/// File, line and function at `addr`: the innermost frame, so the function whose source
/// holds the call even when it was inlined.
fn line_at(ctx: &Context<Reader>, addr: u64) -> Option<(String, u32, Option<String>)> {
    // Split DWARF (`-gsplit-dwarf`) would need other files: lines from the skeleton only.
    let mut frames = ctx.find_frames(addr).skip_all_loads().ok()?;
    let frame = frames.next().ok()??;
    let location = frame.location?;
    let function = frame
        .function
        .and_then(|f| f.demangle().ok().map(|n| n.into_owned()));
    Some((location.file?.to_owned(), location.line?, function))
}

/// Hashing for integer keys that are addresses or ids (a call site, a request handle):
/// one multiplication, where the default hasher runs SipHash on every call a rank makes.
pub(crate) type IdHash = std::hash::BuildHasherDefault<IdHasher>;

/// See [`IdHash`].
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(*b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_i64(&mut self, n: i64) {
        self.write_u64(n as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A function of this test binary (built with debug information, as a PIE).
    #[inline(never)]
    fn marker() -> usize {
        std::hint::black_box(marker as *const () as usize)
    }

    #[test]
    fn a_function_with_debug_information_resolves_to_its_file_and_line() {
        let line = line!() - 6; // `fn marker`
        let site = Sites::default().site(marker() + 1).unwrap();
        let (place, function) = site.split_once(' ').unwrap();
        assert!(place.ends_with(&format!("site_lines.rs:{line}")), "{site}");
        assert_eq!(function, "(racetrack_mpi::site_lines::tests::marker)");
    }

    #[test]
    fn an_address_without_debug_information_falls_back_to_its_symbol() {
        // glibc ships without DWARF (its debug information is a separate package) and
        // stripped of its symbol table: `dladdr`'s dynamic symbols name the function.
        let addr = ffi::dladdr_address();
        let module = ffi::module_at(addr).unwrap();
        assert!(module.path.as_deref().unwrap().contains("libc.so"), "{module:?}");
        let site = Sites::default().site(addr + 1).unwrap();
        assert!(site.starts_with("dladdr"), "{site}");
        assert!(site.ends_with("+0x0 (libc.so.6)"), "{site}");
    }

    #[test]
    fn no_object_no_address() {
        let mut sites = Sites::default();
        assert_eq!(sites.site(0), None);
        assert_eq!(sites.site(1), Some("0x1".into()));
        assert_eq!(ffi::module_at(0), None);
    }
}
