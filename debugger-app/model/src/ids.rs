//! The model's keys: small indexes instead of names. A name is hashed once, when it is
//! interned (or looked up by a view); every map after that is keyed by a few `u32`s.
//!
//! Threads and operations are numbered per process (two ranks of an MPI job both have a
//! `main[0]`), so a thread is named across the session by a [`ThreadKey`] (process and
//! thread) and an unfolded node by a [`NodeKey`] (process, operation and thread).

use std::collections::HashMap;

/// FNV-1a: the model's maps are looked up for every event with short keys (a few `u32`s,
/// or the program's own names when interning), with no untrusted input to defend
/// against, where it is several times faster than the default SipHash.
#[derive(Default, Clone, Copy)]
pub struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

/// A hash map with [`Fnv`] hashing.
pub type FastMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<Fnv>>;

macro_rules! index_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(pub u32);

        impl $name {
            /// As an index into the vector it numbers.
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

index_type!(
    /// A debugged program, by order of connection: 0 is the session's (a runtime
    /// program, or a whole MPI job; see [`crate::Process`]).
    ProcId
);
index_type!(
    /// A thread of one process, by order of first sight (see [`crate::Process`]).
    ThreadId
);
index_type!(
    /// An operation of one process, by order of first sight.
    OpId
);
index_type!(
    /// A node of the unfolded graph, by order of appearance (a node is never removed).
    NodeId
);
index_type!(
    /// An edge of the unfolded graph, by order of appearance.
    EdgeId
);

impl ProcId {
    /// The session's program (the only one until programs spread over several processes
    /// are debugged).
    pub const FIRST: ProcId = ProcId(0);
}

/// A thread across the session: which process, which of its threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ThreadKey {
    pub proc: ProcId,
    pub thread: ThreadId,
}

/// An (operation, thread) pair of one process: an unfolded node, or a breakpoint slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct NodeKey {
    pub proc: ProcId,
    pub op: OpId,
    pub thread: ThreadId,
}

impl NodeKey {
    /// The thread this node runs on.
    pub fn thread_key(self) -> ThreadKey {
        ThreadKey {
            proc: self.proc,
            thread: self.thread,
        }
    }
}

/// A held event: agents number their events per process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct HeldId {
    pub proc: ProcId,
    /// The agent's event number, what `continue` and `edit` name.
    pub event_id: u64,
}

/// Names ↔ dense indexes, in order of first sight.
#[derive(Debug, Default, Clone)]
pub struct Interner {
    names: Vec<String>,
    ids: FastMap<String, u32>,
}

impl Interner {
    /// The index of `name`, numbering it if it is new.
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.ids.get(name) {
            return i;
        }
        let i = u32::try_from(self.names.len()).expect("fewer than 2^32 names");
        self.names.push(name.to_owned());
        self.ids.insert(name.to_owned(), i);
        i
    }

    /// The index of `name`, if it was seen.
    pub fn get(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }

    /// The name numbered `i` (empty if none is).
    pub fn name(&self, i: u32) -> &str {
        self.names.get(i as usize).map_or("", String::as_str)
    }

    /// How many names are numbered.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no name is numbered yet.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}
