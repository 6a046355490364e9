//! What each subcommand does: [`runtime`] for programs on Racetrack's runtime, [`mpi`] for
//! MPI jobs; here what both use.

pub mod explore;
pub mod mpi;
pub mod runtime;

use crate::cli::{Front, GuiScript, Program};
use anyhow::{bail, Context};
use racetrack::conn::Connection;
use racetrack::gui::script::Script;
use std::path::Path;
use std::time::Duration;

/// Errors of the library's calls (strings or typed errors) as the command's error.
pub trait OrMsg<T> {
    fn or_msg(self) -> anyhow::Result<T>;
}

impl<T, E: std::fmt::Display> OrMsg<T> for Result<T, E> {
    fn or_msg(self) -> anyhow::Result<T> {
        self.map_err(|e| anyhow::anyhow!("{e}"))
    }
}

pub fn connect(url: &str) -> anyhow::Result<Connection> {
    Connection::connect(url, Duration::from_secs(10)).or_msg()
}

/// The GUI script named by `--script`, read and parsed.
pub fn gui_script(path: Option<&Path>) -> anyhow::Result<Option<Script>> {
    let Some(path) = path else { return Ok(None) };
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Script::parse(&text)
        .map(Some)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

impl GuiScript {
    pub fn load(&self) -> anyhow::Result<Option<Script>> {
        gui_script(self.script.as_deref())
    }
}

impl Front {
    /// The controller's input: the scenario of `--script` with its `--set` variables
    /// substituted, or stdin.
    pub fn ctl_input(&self) -> anyhow::Result<racetrack::ctl::Input> {
        let Some(path) = &self.script else {
            return Ok(racetrack::ctl::Input::Stdin);
        };
        let text =
            std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        let text = racetrack::ctl::substitute(&text, &self.set)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        Ok(racetrack::ctl::Input::Script(text))
    }

    /// The GUI's script (`--script` without `--ctl`).
    pub fn gui_script(&self) -> anyhow::Result<Option<Script>> {
        gui_script(self.script.as_deref())
    }
}

/// `racetrack replay LOG …`: a runtime program's log or an MPI job's.
pub fn replay(log: &Path, gui: bool, front: Front, program: &Program) -> anyhow::Result<i32> {
    // A damaged log is refused here, before the program starts.
    let read = racetrack_protocol::replay_log::ReplayLog::read(log).or_msg()?;
    if gui && front.ctl {
        bail!("replay takes --ctl or --gui, not both");
    }
    if !front.ctl && !gui && (front.script.is_some() || !front.set.is_empty()) {
        bail!("--script needs --ctl or --gui: a free replay runs unattended");
    }
    match &read.header.mpi {
        Some(_) => mpi::replay(log, &read.header, gui, front, program),
        None => runtime::replay(log, gui, front, program),
    }
}

/// `log` as an absolute path: the ranks may run in another directory.
pub fn absolute(log: &Path) -> String {
    std::path::absolute(log)
        .unwrap_or_else(|_| log.to_owned())
        .display()
        .to_string()
}
