//! Deterministic hierarchical message identifiers (`0`, `0.3`, `0.3.1`, ...).
//!
//! The root message of the k-th schedule call has id `k`; a split appends its output
//! counter, a leaf keeps the id, a merge drops the last component, a stream drops the last
//! component and appends its own output counter. Ids therefore depend only on the program
//! and its input, never on timing.

use std::fmt;
use std::str::FromStr;

/// A dotted message identifier such as `0.3.1`.
///
/// Ids of up to three components (every id of a graph nested up to two splits deep)
/// live inline: creating and cloning them allocates nothing, which matters because the
/// runtime makes several per message. Every field is a whole word (no enum tag, no
/// padding): an id is written and read as words, so a copy of one just written is
/// forwarded from the store buffer instead of waiting for a tag byte to reach the cache
/// (such stalls were a third of the time threads spent taking messages from batches).
#[derive(Clone)]
pub struct MsgId {
    /// The components when there are at most [`INLINE`] of them (the rest zero).
    inline: [u64; INLINE],
    /// How many of `inline` are components (zero when they live in `heap`).
    len: u64,
    /// The components of a deeper id (boxed: one word, where a boxed slice takes two).
    #[allow(clippy::box_collection)]
    heap: Option<Box<Vec<u64>>>,
}

/// Components stored without allocating.
const INLINE: usize = 3;

impl MsgId {
    fn from_slice(parts: &[u64]) -> Self {
        if parts.len() <= INLINE {
            let mut inline = [0; INLINE];
            inline[..parts.len()].copy_from_slice(parts);
            Self::inline(inline, parts.len())
        } else {
            Self {
                inline: [0; INLINE],
                len: 0,
                heap: Some(Box::new(parts.to_vec())),
            }
        }
    }

    fn inline(inline: [u64; INLINE], len: usize) -> Self {
        Self {
            inline,
            len: len as u64,
            heap: None,
        }
    }

    /// The id of the root message of schedule call number `call`.
    pub fn root(call: u64) -> Self {
        Self::inline([call, 0, 0], 1)
    }

    /// The id of output number `index` of a split (or stream) whose base id is `self`.
    pub fn child(&self, index: u64) -> Self {
        // The common case first, without going through a slice: a split makes one per
        // output.
        if self.heap.is_none() {
            let [a, b, _] = self.inline;
            // Whole arrays, not a store at a variable index into a copy of `inline`: reading
            // the copy back right after such a store waits for it (store forwarding
            // fails), and a split makes one id per output.
            let parts = match self.len {
                0 => Some([index, 0, 0]),
                1 => Some([a, index, 0]),
                2 => Some([a, b, index]),
                _ => None,
            };
            if let Some(parts) = parts {
                return Self::inline(parts, self.len as usize + 1);
            }
        }
        let parts = self.components();
        let mut v = Vec::with_capacity(parts.len() + 1);
        v.extend_from_slice(parts);
        v.push(index);
        Self::from_slice(&v)
    }

    /// The id with the last component dropped (what a merge outputs), `None` for a root.
    pub fn parent(&self) -> Option<Self> {
        let parts = self.components();
        (parts.len() > 1).then(|| Self::from_slice(&parts[..parts.len() - 1]))
    }

    /// The components, outermost first.
    pub fn components(&self) -> &[u64] {
        match &self.heap {
            Some(parts) => parts,
            None => &self.inline[..(self.len as usize).min(INLINE)],
        }
    }
}

impl PartialEq for MsgId {
    fn eq(&self, other: &Self) -> bool {
        self.components() == other.components()
    }
}

impl Eq for MsgId {}

impl std::hash::Hash for MsgId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.components().hash(state);
    }
}

impl PartialOrd for MsgId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for MsgId {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.components().cmp(other.components())
    }
}

impl fmt::Debug for MsgId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MsgId({self})")
    }
}

impl fmt::Display for MsgId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, c) in self.components().iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

/// Error returned when parsing a malformed message id.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("`{0}` is not a message id (expected dotted numbers such as `0.3.1`)")]
pub struct ParseMsgIdError(String);

impl FromStr for MsgId {
    type Err = ParseMsgIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parts: Result<Vec<u64>, _> = s.split('.').map(str::parse).collect();
        match parts {
            Ok(v) if !v.is_empty() => Ok(Self::from_slice(&v)),
            _ => Err(ParseMsgIdError(s.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_parse_roundtrip_and_hierarchy() {
        let root = MsgId::root(0);
        let c = root.child(3).child(1);
        assert_eq!(c.to_string(), "0.3.1");
        assert_eq!("0.3.1".parse::<MsgId>(), Ok(c.clone()));
        assert_eq!(c.parent().map(|p| p.to_string()), Some("0.3".to_owned()));
        assert_eq!(root.parent(), None);
        assert!("0..1".parse::<MsgId>().is_err());
        assert!("".parse::<MsgId>().is_err());
        assert!("a".parse::<MsgId>().is_err());
        // Past the inline size, ids spill to the heap and still compare by value.
        let deep = c.child(7).child(9);
        assert_eq!(deep.to_string(), "0.3.1.7.9");
        assert_eq!("0.3.1.7.9".parse::<MsgId>(), Ok(deep.clone()));
        assert_eq!(deep.parent().and_then(|p| p.parent()), Some(c.clone()));
        assert!(c < deep && root < c);
    }
}
