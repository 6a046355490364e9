//! What an MPI call carries, in the events the MPI interposition library reports (DESIGN
//! §7): the `call` field of `start`, `stop`, `send` and `recv`. The flow-graph runtime's
//! events have none. Every field is optional: a call carries those that apply to it.

use serde::{Deserialize, Serialize};

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

/// The parameters of an MPI call, readable (`MPI_COMM_WORLD`, `MPI_INT`,
/// `MPI_ANY_SOURCE`), and where the program made it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallInfo {
    /// The communicator (`MPI_COMM_WORLD`, `comm 3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
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
    pub datatype: Option<String>,
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
    pub site: Option<String>,
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
    pub label: Option<String>,
    /// The call's return code when it is not `MPI_SUCCESS` (its `stop`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rc: Option<i32>,
}
