//! The Racetrack debugger: the model (plain Rust), the connection to an agent, the
//! headless controller (`racetrack ctl`), program launching (`racetrack run`), trace export
//! (`racetrack export`) and the GUI.

pub mod conn;
pub mod ctl;
pub mod explore;
pub mod export;
pub mod gui;
pub mod job;
pub mod launch;
pub mod mpirun;
pub mod scenarios;
pub mod synthetic;

/// The session model, its own crate (`racetrack-model`: plain Rust on protocol types).
pub use racetrack_model as model;
