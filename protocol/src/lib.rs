//! Racetrack's wire protocol: the only crate that defines what travels between the agent
//! and the debugger. (The message types arrive with the agent issue; today it fixes the
//! protocol version.)

/// Version of the wire protocol, sent in the handshake.
pub const PROTOCOL_VERSION: u32 = 1;
