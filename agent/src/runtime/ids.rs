//! Deterministic hierarchical message identifiers (`0`, `0.3`, `0.3.1`, ...).
//!
//! The root message of the k-th schedule call has id `k`; a split appends its output
//! counter, a leaf keeps the id, a merge drops the last component, a stream drops the last
//! component and appends its own output counter. Ids therefore depend only on the program
//! and its input, never on timing.

use std::fmt;
use std::str::FromStr;

/// A dotted message identifier such as `0.3.1`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct MsgId(Vec<u64>);

impl MsgId {
    /// The id of the root message of schedule call number `call`.
    pub fn root(call: u64) -> Self {
        Self(vec![call])
    }

    /// The id of output number `index` of a split (or stream) whose base id is `self`.
    pub fn child(&self, index: u64) -> Self {
        let mut v = Vec::with_capacity(self.0.len() + 1);
        v.extend_from_slice(&self.0);
        v.push(index);
        Self(v)
    }

    /// The id with the last component dropped (what a merge outputs), `None` for a root.
    pub fn parent(&self) -> Option<Self> {
        (self.0.len() > 1).then(|| Self(self.0[..self.0.len() - 1].to_vec()))
    }

    /// The components, outermost first.
    pub fn components(&self) -> &[u64] {
        &self.0
    }
}

impl fmt::Display for MsgId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, c) in self.0.iter().enumerate() {
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
            Ok(v) if !v.is_empty() => Ok(Self(v)),
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
    }
}
