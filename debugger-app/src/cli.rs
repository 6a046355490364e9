//! The command line: what `racetrack` accepts, with the help text each subcommand prints.
//! Parsing is clap's (derive), so `--help` works everywhere, a misspelt flag is named with
//! the closest valid one, and shell completions come from the same definitions.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "racetrack",
    about = "An interactive debugger for parallel message-passing programs",
    long_about = "An interactive debugger for parallel message-passing programs: programs on \
Racetrack's flow-graph runtime and unmodified MPI jobs (MPICH, Open MPI). It shows the program's \
graph as it runs, holds any send, receive or step (breakpoints, global stepping, tracing), edits \
messages in flight and reorders pending ones to provoke message races on purpose; it records \
runs and replays them exactly.",
    after_help = "Start with `racetrack demo heat`. The scripting contract (`ctl`, scenario \
files) is in docs/PROTOCOL.md; the user guide in docs/GUIDE.md.",
    subcommand_required = true,
    arg_required_else_help = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// The GUI on a built-in example, held at its first operation
    #[command(after_help = "Example: racetrack demo heat --threads 4 --fixed")]
    Demo {
        /// The example program
        #[arg(value_enum)]
        name: Example,
        #[command(flatten)]
        opts: ExampleOpts,
        #[command(flatten)]
        script: GuiScript,
    },
    /// Start PROGRAM with the agent (held at its first operation) and open the GUI, or the
    /// JSON-lines controller with --ctl
    #[command(
        long_about = "Start PROGRAM (built on Racetrack's runtime) with the agent, held at its first \
operation, and open the GUI. With --ctl, the JSON-lines controller instead: commands from stdin \
(or a scenario file with --script, run unattended and ending with the program's outcome), events \
as JSON lines on stdout.",
        after_help = "Examples:\n  racetrack run -- ./target/release/heat --threads 4\n  racetrack run --ctl \
--script examples/scenarios/heat_race.jsonl --set 'THREAD=proc[1]' -- ./target/release/heat"
    )]
    Run {
        #[command(flatten)]
        front: Front,
        #[command(flatten)]
        program: Program,
    },
    /// An MPI program's N ranks under the debugger, or recorded free with --record
    #[command(
        long_about = "Run an MPI program's N ranks with the installed launcher (mpiexec.mpich or \
mpiexec.openmpi) and the interposition library preloaded into every rank, under the GUI, or the \
controller with --ctl. Every rank is held before its first call after MPI_Init until Continue. \
With --record LOG the job runs free instead, recording what a replay needs (the matches of \
wildcard receives and probes, the outcomes of polls, any/some completions, clock readings) in \
LOG; `racetrack replay LOG -- PROGRAM ARGS` replays it.",
        after_help = "Examples:\n  racetrack mpirun -n 4 -- ./mergesort\n  racetrack mpirun --ctl \
--impl openmpi -n 4 -- ./ring\n  racetrack mpirun --record mw.rtrec -n 4 -- ./master_worker"
    )]
    Mpirun {
        /// The number of ranks (`-np` is accepted too)
        #[arg(short = 'n', value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        ranks: u32,
        /// The MPI implementation (default: the one PROGRAM is linked against)
        #[arg(long = "impl", value_enum, value_name = "IMPL")]
        imp: Option<MpiImpl>,
        /// Run the job free, recording a replay log to LOG
        #[arg(long, value_name = "LOG", conflicts_with_all = ["ctl", "script", "set"])]
        record: Option<PathBuf>,
        #[command(flatten)]
        front: Front,
        #[command(flatten)]
        program: Program,
    },
    /// Run an MPI job again and again with its wildcard receives' matches forced, to find
    /// every outcome its message races lead to
    #[command(
        long_about = "Explore a program's message races. A program on Racetrack's runtime: run it free, read off its trace which sender's message each step took and which other senders' it could have taken (sent concurrently), then run it again with each other choice forced by a replay log (the steps before it kept), breadth first (or --order depth, random), until every branch ran or a budget is spent. An MPI job (--mpi -n N): the same over its wildcard receives, held under the debugger. Prints each run on stderr and a summary JSON line on stdout: runs, messages delivered, the distinct outcomes (exit code and what the program printed, panic, deadlock, hang), each with a replay file that `racetrack replay FILE -- PROGRAM ARGS` plays again. Exit code 0 when every run exited 0 with one result, 1 when outcomes differ or a run failed.",
        after_help = "Examples:
  racetrack explore -- ./heat --threads 2 --iters 2
  racetrack explore --mpi -n 4 -- ./mergesort --size 4000"
    )]
    Explore {
        /// The program is an MPI job
        #[arg(long, requires = "ranks")]
        mpi: bool,
        /// The number of ranks (MPI)
        #[arg(short = 'n', value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        ranks: Option<u32>,
        /// The MPI implementation (default: the one PROGRAM is linked against)
        #[arg(long = "impl", value_enum, value_name = "IMPL")]
        imp: Option<MpiImpl>,
        /// Stop after this many runs
        #[arg(long, value_name = "N", default_value_t = 100)]
        max_runs: usize,
        /// Stop after this many seconds
        #[arg(long, value_name = "S", default_value_t = 600)]
        budget_s: u64,
        /// A run still going after this many seconds counts as hung
        #[arg(long, value_name = "S", default_value_t = 60)]
        run_limit_s: u64,
        /// Runs made side by side (each job takes its ranks' cores)
        #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
        jobs: u32,
        /// Where the replay files of the outcomes go
        #[arg(long, value_name = "DIR", default_value = "racetrack-explore")]
        out: PathBuf,
        /// Runtime programs: do not merge equal states (each branch runs, even one that
        /// starts where another did)
        #[arg(long)]
        no_merge: bool,
        /// The order waiting schedules run in: the oldest first, generation by
        /// generation (breadth: races that need few departures first), the latest
        /// first (depth: the least memory), or drawn at random (random)
        #[arg(long, value_enum, value_name = "ORDER", default_value_t = SearchOrder::Breadth)]
        order: SearchOrder,
        /// The seed of --order random's draws (default: from the clock; the summary
        /// gives it)
        #[arg(long, value_name = "N")]
        seed: Option<u64>,
        #[command(flatten)]
        program: Program,
    },
    /// Wait for the N ranks of a job started by hand, and debug it
    #[command(long_about = "Wait for the N ranks of an MPI job started by hand (with \
RACETRACK_CONNECT and LD_PRELOAD in its environment, as printed) and debug it in the GUI or, with \
--ctl, the controller. Beyond loopback the ranks need RACETRACK_TOKEN too: as set here, or a \
random one, printed.")]
    Listen {
        /// The number of ranks to wait for
        #[arg(short = 'n', value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        ranks: u32,
        /// Where to listen
        #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:0")]
        addr: String,
        #[command(flatten)]
        front: Front,
    },
    /// The GUI on a running program's agent (started with RACETRACK_LISTEN)
    Attach {
        /// The agent's address, as it printed it: ws://HOST:PORT
        url: String,
        #[command(flatten)]
        script: GuiScript,
    },
    /// The headless controller on a running program's agent: JSON lines in and out
    #[command(
        long_about = "The headless controller on a running program's agent (started with \
RACETRACK_LISTEN): one JSON command per line on stdin, one JSON event per line on stdout. \
The commands and events are in docs/PROTOCOL.md."
    )]
    Ctl {
        /// The agent's address, as it printed it: ws://HOST:PORT
        url: String,
    },
    /// Run PROGRAM free, recording a replay log (or every event, with --full)
    #[command(
        long_about = "Run PROGRAM (built on Racetrack's runtime) free, recording what a \
replay needs (which sender's message each thread took) in a replay log, default PROGRAM.rtrec. \
With --full, every event goes to a trace file instead (default PROGRAM.rtrace), for \
`racetrack open` and `racetrack export`. The exit code is the program's. An MPI job records \
with `racetrack mpirun --record`."
    )]
    Record {
        /// Write every event to a trace file instead of a replay log
        #[arg(long)]
        full: bool,
        /// The file to write
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
        #[command(flatten)]
        program: Program,
    },
    /// Run PROGRAM again taking the logged choices: free, or under the controller or GUI
    #[command(
        long_about = "Run PROGRAM again taking the choices logged in LOG: free (exit code \
3, saying where, if it cannot follow the log), or under the controller (--ctl) or the GUI \
(--gui), where it can be stepped, held, and taken over. An MPI job's log runs its ranks again, \
as `mpirun` does, on the recorded number of ranks."
    )]
    Replay {
        /// The replay log (from `racetrack record`, `mpirun --record` or a saved scenario)
        log: PathBuf,
        /// Replay under the GUI
        #[arg(long, conflicts_with = "ctl")]
        gui: bool,
        #[command(flatten)]
        front: Front,
        #[command(flatten)]
        program: Program,
    },
    /// A trace file in the GUI, without the program, with a time slider
    Open {
        /// The trace file (written with RACETRACK_TRACE=TRACE or `record --full`)
        trace: PathBuf,
        #[command(flatten)]
        script: GuiScript,
    },
    /// A trace file as Chrome/Perfetto trace JSON
    Export {
        /// The format (the only one so far)
        #[arg(long, required = true)]
        perfetto: bool,
        /// The trace file (written with RACETRACK_TRACE=TRACE or `record --full`)
        trace: PathBuf,
        /// Where to write (default: TRACE with the extension .json)
        #[arg(short = 'o', long = "output", value_name = "OUT")]
        output: Option<PathBuf>,
    },
    /// Run a built-in example program directly, without the debugger
    Example {
        /// The example program
        #[arg(value_enum)]
        name: Example,
        #[command(flatten)]
        opts: ExampleOpts,
    },
    /// Print a completion script for bash, zsh or fish
    #[command(
        after_help = "Example: racetrack completions bash > ~/.local/share/bash-completion/completions/racetrack"
    )]
    Completions {
        /// The shell
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// `-- PROGRAM [ARGS]...`
#[derive(Args, Debug)]
pub struct Program {
    /// The program and its arguments, after `--`
    #[arg(last = true, required = true, value_name = "PROGRAM [ARGS]")]
    pub command: Vec<String>,
}

impl Program {
    pub fn name(&self) -> &str {
        self.command.first().map_or("", String::as_str)
    }
    pub fn args(&self) -> &[String] {
        self.command.get(1..).unwrap_or(&[])
    }
}

/// The GUI's `--script FILE`.
#[derive(Args, Debug)]
pub struct GuiScript {
    /// Drive the window from a script of GUI actions (JSON lines)
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
}

/// The GUI, or the controller with `--ctl`; `--script` is a GUI script for the one and a
/// scenario for the other.
#[derive(Args, Debug)]
pub struct Front {
    /// The JSON-lines controller instead of the GUI
    #[arg(long)]
    pub ctl: bool,
    /// A script: a scenario of ctl commands with --ctl (run unattended), else GUI actions
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// Set a scenario variable: ${NAME} in the file becomes VALUE
    #[arg(long, value_name = "NAME=VALUE", requires_all = ["ctl", "script"], value_parser = parse_var)]
    pub set: Vec<(String, String)>,
}

fn parse_var(kv: &str) -> Result<(String, String), String> {
    kv.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("expected NAME=VALUE, not `{kv}`"))
}

/// `racetrack explore --order`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchOrder {
    Depth,
    Breadth,
    Random,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum MpiImpl {
    Mpich,
    #[value(alias = "open-mpi", alias = "ompi")]
    Openmpi,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Example {
    /// Heat diffusion: the reference race (--fixed: double-buffered)
    Heat,
    /// A parallel merge sort
    Mergesort,
    /// A task farm
    Farm,
    /// A parallel search (--fixed: the race-free variant)
    Search,
    /// Steps that schedule a graph of their own (--on-workers: a deadlock)
    Nested,
    /// One merge with N inputs (--first: the first answer wins, a race)
    Gather,
}

impl Example {
    pub fn name(self) -> &'static str {
        match self {
            Example::Heat => "heat",
            Example::Mergesort => "mergesort",
            Example::Farm => "farm",
            Example::Search => "search",
            Example::Nested => "nested",
            Example::Gather => "gather",
        }
    }
}

/// The examples' own options, each passed on as given (the example says which it takes).
#[derive(Args, Debug, Default)]
#[command(next_help_heading = "Example options (which example takes which: below)")]
pub struct ExampleOpts {
    /// Worker threads
    #[arg(long, value_name = "N")]
    pub threads: Option<u64>,
    /// Iterations (heat, farm)
    #[arg(long, value_name = "K")]
    pub iters: Option<u64>,
    /// The race-free variant (heat: double buffering; search)
    #[arg(long)]
    pub fixed: bool,
    /// Cells of the domain (heat)
    #[arg(long, value_name = "C")]
    pub cells: Option<u64>,
    /// Microseconds of local work per step (heat)
    #[arg(long, value_name = "US")]
    pub local_us: Option<u64>,
    /// Tasks per schedule call (farm, nested)
    #[arg(long, value_name = "T")]
    pub tasks: Option<u64>,
    /// Microseconds of work per task (farm)
    #[arg(long, value_name = "US")]
    pub work_us: Option<u64>,
    /// Panic in this task (farm)
    #[arg(long, value_name = "TASK")]
    pub panic_at: Option<u64>,
    /// Abort the process in this task (farm)
    #[arg(long, value_name = "TASK")]
    pub abort_at: Option<u64>,
    /// Exit the process in this task (farm)
    #[arg(long, value_name = "TASK")]
    pub exit_at: Option<u64>,
    /// Array length (mergesort, search)
    #[arg(long, value_name = "S")]
    pub size: Option<u64>,
    /// Chunks (mergesort, search)
    #[arg(long, value_name = "C")]
    pub chunks: Option<u64>,
    /// Microseconds between the searchers' starts (search)
    #[arg(long, value_name = "US")]
    pub stagger_us: Option<u64>,
    /// Random delay of up to US microseconds in every step
    #[arg(long, value_name = "US")]
    pub jitter_us: Option<u64>,
    /// Run the refinement on the busy workers: a deadlock (nested)
    #[arg(long)]
    pub on_workers: bool,
    /// Inputs of the merge (gather)
    #[arg(long, value_name = "N")]
    pub inputs: Option<u64>,
    /// Keep the first answer to arrive (gather)
    #[arg(long)]
    pub first: bool,
}

impl ExampleOpts {
    /// The options as the example's own command line takes them.
    pub fn to_args(&self) -> Vec<String> {
        let values = [
            ("threads", self.threads),
            ("iters", self.iters),
            ("cells", self.cells),
            ("local-us", self.local_us),
            ("tasks", self.tasks),
            ("work-us", self.work_us),
            ("panic-at", self.panic_at),
            ("abort-at", self.abort_at),
            ("exit-at", self.exit_at),
            ("size", self.size),
            ("chunks", self.chunks),
            ("stagger-us", self.stagger_us),
            ("jitter-us", self.jitter_us),
            ("inputs", self.inputs),
        ];
        let mut out: Vec<String> = values
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| [format!("--{k}"), v.to_string()]))
            .flatten()
            .collect();
        if self.fixed {
            out.push("--fixed".into());
        }
        if self.on_workers {
            out.push("--on-workers".into());
        }
        if self.first {
            out.push("--first".into());
        }
        out
    }
}

/// The arguments as clap should see them: MPI users type `-np N`, which clap would read as
/// `-n p`; it means `-n N`. Only before `--` (after it, they are the program's).
pub fn normalise(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut seen_dashdash = false;
    args.into_iter()
        .map(|a| {
            seen_dashdash |= a == "--";
            if !seen_dashdash && a == "-np" {
                "-n".to_owned()
            } else {
                a
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_definitions_are_consistent() {
        Cli::command().debug_assert();
    }

    /// Every option an example's usage line names is one `demo` and `example` accept, and
    /// is passed on under the same name.
    #[test]
    fn demo_takes_every_option_of_every_example() {
        use racetrack_examples::{farm, gather, heat, mergesort, search};
        for usage in [
            farm::USAGE,
            heat::USAGE,
            mergesort::USAGE,
            search::USAGE,
            gather::USAGE,
        ] {
            for word in usage.split(['[', ']', ' ']).filter(|w| w.starts_with("--")) {
                let mut argv = vec!["racetrack", "demo", "heat", word];
                let flag = word == "--fixed" || word == "--first";
                if !flag {
                    argv.push("7");
                }
                let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{word}: {e}"));
                let Cmd::Demo { opts, .. } = cli.command else {
                    panic!("not demo")
                };
                let passed = opts.to_args();
                let expect: Vec<String> = if flag {
                    vec![word.into()]
                } else {
                    vec![word.into(), "7".into()]
                };
                assert_eq!(passed, expect, "{usage}");
            }
        }
    }

    #[test]
    fn np_is_n_before_the_program_only() {
        let a = normalise(["mpirun", "-np", "4", "--", "prog", "-np", "2"].map(String::from));
        assert_eq!(a, ["mpirun", "-n", "4", "--", "prog", "-np", "2"]);
    }

    #[test]
    fn a_misspelt_flag_gets_the_closest_one() {
        let e = Cli::try_parse_from(["racetrack", "run", "--scirpt", "x", "--", "p"]).expect_err("misspelt");
        let text = e.to_string();
        assert!(text.contains("--scirpt") && text.contains("--script"), "{text}");
    }
}
