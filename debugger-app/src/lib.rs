//! The Racetrack debugger: the model (plain Rust), the connection to an agent, the
//! headless controller (`racetrack ctl`) and program launching (`racetrack run`).

pub mod conn;
pub mod ctl;
pub mod launch;
pub mod model;
