//! What an MPI call carries, in the events the MPI interposition library reports
//! (`docs/PROTOCOL.md`, "MPI jobs"): the `call` field of `start`, `stop`, `send` and
//! `recv`. The flow-graph runtime's events have none. Every field is optional: a call
//! carries those that apply to it.

use serde::{Deserialize, Serialize};
use smol_str::SmolStr;

/// A rank as a call names it: a number (in the call's communicator), or one of MPI's
/// special values by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Peer {
    /// A rank of the communicator.
    Rank(i32),
    /// `MPI_ANY_SOURCE`, `MPI_PROC_NULL` or `MPI_ROOT`.
    Special(SpecialPeer),
}

/// MPI's special ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SpecialPeer {
    /// A wildcard receive or probe: any source.
    #[serde(rename = "MPI_ANY_SOURCE")]
    AnySource,
    /// No peer: the call completes at once.
    #[serde(rename = "MPI_PROC_NULL")]
    ProcNull,
    /// The root of an intercommunicator collective.
    #[serde(rename = "MPI_ROOT")]
    Root,
}

/// A tag as a call names it: a number, or `MPI_ANY_TAG`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Tag {
    /// A tag.
    Tag(i32),
    /// Any tag (`"MPI_ANY_TAG"`).
    Any(AnyTag),
}

/// The wildcard tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AnyTag {
    /// `MPI_ANY_TAG`.
    #[serde(rename = "MPI_ANY_TAG")]
    AnyTag,
}

/// What a receive or probe matched: known when it completes (for a wildcard receive,
/// this is the thesis' "matched" notification).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Matched {
    /// The sender's rank in the call's communicator.
    pub source: i32,
    /// The message's tag.
    pub tag: i32,
    /// Its size in bytes.
    pub bytes: i64,
}

/// The match the debugger forced on a wildcard receive or probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forced {
    /// The source it was made with, in the call's communicator.
    pub source: i32,
    /// The tag it was made with, when that was forced too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<i32>,
}

/// A communicator a call created (`MPI_Comm_split`, `MPI_Comm_dup`, `MPI_Comm_create`):
/// the thesis' "comm_created" information.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Created {
    /// The new communicator's name (`comm 3`).
    pub comm: String,
    /// This rank's rank in it.
    pub rank: i32,
    /// The world rank of its rank 0.
    pub leader: i32,
}

/// Which collective call a rank's call is: the Nth collective on its communicator, which
/// is every member's Nth (MPI has them called in the same order on a communicator). The
/// job's debugger adds it to the `start` and `stop` of every collective call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collective {
    /// The communicator, as the call names it.
    pub comm: String,
    /// The world rank of the communicator's rank 0 (two colours of one `MPI_Comm_split`
    /// have one name and two leaders).
    pub leader: i32,
    /// How many collectives on this communicator the rank made before (from 0).
    pub n: u64,
}

/// The parameters of an MPI call, readable (`MPI_COMM_WORLD`, `MPI_INT`,
/// `MPI_ANY_SOURCE`), and where the program made it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallInfo {
    /// The communicator (`MPI_COMM_WORLD`, `comm 3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm: Option<SmolStr>,
    /// Destination (sends) or source (receives, probes), in `comm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<Peer>,
    /// The tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<Tag>,
    /// Elements (a collective's send count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i32>,
    /// The datatype (`MPI_DOUBLE`, `datatype 12` for a derived one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datatype: Option<SmolStr>,
    /// `count` times the datatype's size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<i64>,
    /// A rooted collective's root, in `comm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<i32>,
    /// The call site: `file:line (function)` from debug information, else
    /// `function+0xOFF (module)`, else `module+0xOFF`, else the address (see
    /// docs/PROTOCOL.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<SmolStr>,
    /// What a receive or probe matched (its `stop`, and the `recv`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched: Option<Matched>,
    /// The wildcard the debugger forced to a source (and tag), ISP-style: the receive or
    /// probe was made with these instead (its `stop`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forced: Option<Forced>,
    /// The communicator the call created (its `stop`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<Created>,
    /// `MPI_Pcontrol`'s level and label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<SmolStr>,
    /// The call's return code when it is not `MPI_SUCCESS` (its `stop`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rc: Option<i32>,
    /// A collective call's instance (its `start` and `stop`; added by the job's debugger).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collective: Option<Collective>,
    /// The `send` a probe saw (its `stop`, when it found one; added by the job's
    /// debugger): the one the next matching receive takes, not consumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saw: Option<crate::Link>,
    /// A polling loop's step (its `stop`): the step stood for this many consecutive calls
    /// of its operation with the same parameters and site (`MPI_Test`, `MPI_Testany`,
    /// `MPI_Testall`, `MPI_Testsome`, `MPI_Iprobe`), none held, each of which found
    /// nothing but possibly the last. Absent: one call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polls: Option<u64>,
    /// `MPI_Sendrecv`'s and `MPI_Sendrecv_replace`'s source (their receive side; `peer`
    /// is their destination), `MPI_ANY_SOURCE` for a wildcard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Peer>,
    /// The receives a `MPI_Wait`, `MPI_Waitall`, `MPI_Waitany` or `MPI_Waitsome` waits
    /// for (its `start`): each of its requests that is an incomplete `MPI_Irecv`, in the
    /// order given. Present only when the library knows what every request given is (an
    /// `MPI_Irecv` or an `MPI_Isend`, whose completion needs nobody here); absent, the
    /// call may wait for anyone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub awaits: Option<Vec<Awaited>>,
    /// A blocking receive or probe's `start` (`MPI_Recv`, `MPI_Probe`, `MPI_Mprobe`): the
    /// rank's `MPI_Irecv`s posted before it and not complete, in posting order, which MPI
    /// gives a message before this call. Present when there are some and the library
    /// saw every incomplete receive request made by `MPI_Irecv`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub posted: Option<Vec<Awaited>>,
}

/// A receive a completion call waits for: its communicator, source and tag as its
/// `MPI_Irecv` gave them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Awaited {
    pub comm: SmolStr,
    pub peer: Peer,
    pub tag: Tag,
}

/// The condition of a conditional breakpoint (`break` with `when`): each field given must
/// equal the call's (`min_bytes` / `max_bytes`: bound its size), so a condition holds only
/// calls that carry every field it names. A call's fields are those of its `start`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct When {
    /// The destination (sends) or source (receives, probes), as the call names it
    /// (`MPI_ANY_SOURCE` for a wildcard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<Peer>,
    /// The tag, as the call names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<Tag>,
    /// The datatype's name (`MPI_INT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datatype: Option<String>,
    /// The communicator's name (`MPI_COMM_WORLD`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
    /// Exactly this many bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<i64>,
    /// At least this many bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_bytes: Option<i64>,
    /// At most this many bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<i64>,
}

/// A datatype's name with MPI's synonyms merged: `MPI_LONG_LONG` is `MPI_LONG_LONG_INT`
/// (one handle, which the library reports by the older name).
fn datatype_name(name: &str) -> &str {
    match name {
        "MPI_LONG_LONG" => "MPI_LONG_LONG_INT",
        other => other,
    }
}

impl When {
    /// Whether the call with these parameters meets the condition (`None`: the event
    /// carries no call, which meets only the empty condition).
    pub fn matches(&self, call: Option<&CallInfo>) -> bool {
        let Some(c) = call else {
            return self.is_empty();
        };
        let eq = |want: Option<&str>, have: Option<&str>| want.is_none_or(|w| have.is_some_and(|h| h == w));
        let bytes_ok = |bound: Option<i64>, ok: fn(i64, i64) -> bool| {
            bound.is_none_or(|b| c.bytes.is_some_and(|have| ok(have, b)))
        };
        // A sendrecv is a receive from its source as much as a send to its peer.
        self.peer.is_none_or(|p| c.peer == Some(p) || c.source == Some(p))
            && self.tag.is_none_or(|t| c.tag == Some(t))
            && self.datatype.as_deref().is_none_or(|w| {
                c.datatype
                    .as_deref()
                    .is_some_and(|h| datatype_name(h) == datatype_name(w))
            })
            && eq(self.comm.as_deref(), c.comm.as_deref())
            && bytes_ok(self.bytes, |have, b| have == b)
            && bytes_ok(self.min_bytes, |have, b| have >= b)
            && bytes_ok(self.max_bytes, |have, b| have <= b)
    }

    /// Whether it names no field (it then holds every call).
    pub fn is_empty(&self) -> bool {
        self.fields().is_empty()
    }

    /// The names of the fields it sets, as the wire spells them.
    pub fn fields(&self) -> Vec<&'static str> {
        [
            ("peer", self.peer.is_some()),
            ("tag", self.tag.is_some()),
            ("datatype", self.datatype.is_some()),
            ("comm", self.comm.is_some()),
            ("bytes", self.bytes.is_some()),
            ("min_bytes", self.min_bytes.is_some()),
            ("max_bytes", self.max_bytes.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect()
    }

    /// Why the condition can never hold, if it cannot.
    pub fn check(&self) -> Result<(), ConditionError> {
        match (self.min_bytes, self.max_bytes) {
            (Some(min_bytes), Some(max_bytes)) if min_bytes > max_bytes => {
                Err(ConditionError::EmptyRange { min_bytes, max_bytes })
            }
            _ => Ok(()),
        }
    }
}

/// Why a [`When`] can never hold ([`When::check`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConditionError {
    /// A size range with nothing in it.
    #[error("min_bytes {min_bytes} is above max_bytes {max_bytes}")]
    EmptyRange {
        /// The lower bound.
        min_bytes: i64,
        /// The upper bound.
        max_bytes: i64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(peer: i32, tag: i32, bytes: i64) -> CallInfo {
        CallInfo {
            comm: Some("MPI_COMM_WORLD".into()),
            peer: Some(Peer::Rank(peer)),
            tag: Some(Tag::Tag(tag)),
            datatype: Some("MPI_INT".into()),
            bytes: Some(bytes),
            ..CallInfo::default()
        }
    }

    #[test]
    fn a_condition_holds_calls_that_carry_every_field_it_names() {
        let when: When =
            serde_json::from_str(r#"{"peer":2,"tag":7,"datatype":"MPI_INT","min_bytes":8,"max_bytes":64}"#)
                .expect("parses");
        assert!(when.matches(Some(&send(2, 7, 8))));
        assert!(when.matches(Some(&send(2, 7, 64))));
        assert!(!when.matches(Some(&send(3, 7, 8))), "another peer");
        assert!(!when.matches(Some(&send(2, 8, 8))), "another tag");
        assert!(!when.matches(Some(&send(2, 7, 4))), "too small");
        assert!(!when.matches(Some(&send(2, 7, 65))), "too big");
        let barrier = CallInfo {
            comm: Some("MPI_COMM_WORLD".into()),
            ..CallInfo::default()
        };
        assert!(!when.matches(Some(&barrier)), "a call without those fields");
        assert!(!when.matches(None), "an event without a call");
        assert!(
            When::default().matches(None),
            "the empty condition holds everything"
        );
        let long: When = serde_json::from_str(r#"{"datatype":"MPI_LONG_LONG"}"#).expect("parses");
        let mut ll = send(0, 0, 8);
        ll.datatype = Some("MPI_LONG_LONG_INT".into());
        assert!(long.matches(Some(&ll)), "a synonym");
        assert!(!long.matches(Some(&send(0, 0, 8))), "MPI_INT");
        let comm: When = serde_json::from_str(r#"{"comm":"MPI_COMM_WORLD","bytes":8}"#).expect("parses");
        assert!(comm.matches(Some(&send(0, 0, 8))));
        assert!(!comm.matches(Some(&send(0, 0, 9))));
        assert!(!comm.matches(Some(&barrier)), "no size");
    }

    #[test]
    fn a_wildcard_condition_names_the_wildcard() {
        let when: When = serde_json::from_str(r#"{"peer":"MPI_ANY_SOURCE"}"#).expect("parses");
        let mut recv = send(0, 1, 4);
        assert!(!when.matches(Some(&recv)));
        recv.peer = Some(Peer::Special(SpecialPeer::AnySource));
        assert!(when.matches(Some(&recv)));
    }

    #[test]
    fn bad_conditions_are_refused() {
        let e = serde_json::from_str::<When>(r#"{"source":2}"#).expect_err("unknown field");
        assert!(e.to_string().contains("unknown field `source`"), "{e}");
        let e = When {
            min_bytes: Some(10),
            max_bytes: Some(5),
            ..When::default()
        }
        .check()
        .expect_err("empty range");
        assert_eq!(
            e,
            ConditionError::EmptyRange {
                min_bytes: 10,
                max_bytes: 5
            }
        );
        assert_eq!(e.to_string(), "min_bytes 10 is above max_bytes 5");
        assert_eq!(
            When {
                tag: Some(Tag::Tag(1)),
                max_bytes: Some(1),
                ..When::default()
            }
            .fields(),
            ["tag", "max_bytes"]
        );
    }
}
