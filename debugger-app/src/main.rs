//! The `racetrack` command: the command line ([`cli`]) and what each subcommand does
//! ([`commands`]). Every error ends here, printed as `racetrack: …`, exit code 2.

mod cli;
mod commands;

use clap::error::ErrorKind;
use clap::{CommandFactory, FromArgMatches};
use cli::{Cli, Cmd};

fn main() {
    let code = match parse().and_then(dispatch) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("racetrack: {e:#}");
            2
        }
    };
    std::process::exit(code);
}

/// The command line, or clap's exit: help and version print and exit 0, a bad command
/// line is named (with the closest valid flag or subcommand) and exits 2.
fn parse() -> anyhow::Result<Cli> {
    let version = format!(
        "{} (protocol {})",
        env!("CARGO_PKG_VERSION"),
        racetrack_protocol::PROTOCOL_VERSION
    );
    let usages = {
        use racetrack_examples::{farm, heat, mergesort, search};
        let lines = [heat::USAGE, mergesort::USAGE, farm::USAGE, search::USAGE];
        format!("Each example's options:\n  {}", lines.join("\n  "))
    };
    let args = cli::normalise(std::env::args());
    let matches = Cli::command()
        .version(version)
        .mut_subcommand("demo", |c| c.after_help(usages.clone()))
        .mut_subcommand("example", |c| c.after_help(usages.clone()))
        .try_get_matches_from(&args)
        .unwrap_or_else(|e| {
            // The program named without `--` in front: clap sees an argument it does not
            // know, the user a program it should have run.
            let sub = args.get(1).map_or("", String::as_str);
            let takes_program = ["run", "mpirun", "record", "replay"].contains(&sub);
            if e.kind() == ErrorKind::UnknownArgument && takes_program && !args.iter().any(|a| a == "--") {
                let _ = e.print();
                eprintln!("tip: the program and its arguments go after `--`: racetrack {sub} [OPTIONS] -- PROGRAM [ARGS]");
                std::process::exit(2);
            }
            e.exit()
        });
    Ok(Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit()))
}

fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    use commands::{mpi, runtime};
    match cli.command {
        Cmd::Demo { name, opts, script } => runtime::demo(name, &opts, script),
        Cmd::Run { front, program } => runtime::run(front, &program),
        Cmd::Mpirun {
            ranks,
            imp,
            record,
            front,
            program,
        } => match record {
            Some(log) => mpi::record(imp, ranks, &program, &log),
            None => mpi::mpirun(imp, ranks, front, &program),
        },
        Cmd::Listen { ranks, addr, front } => mpi::listen(ranks, &addr, front),
        Cmd::Explore {
            mpi: is_mpi,
            ranks,
            imp,
            max_runs,
            budget_s,
            run_limit_s,
            jobs,
            out,
            no_merge,
            order,
            seed,
            program,
        } => {
            let order = match (order, seed) {
                (cli::SearchOrder::Depth, None) => racetrack::explore::Order::Depth,
                (cli::SearchOrder::Breadth, None) => racetrack::explore::Order::Breadth,
                (cli::SearchOrder::Random, seed) => {
                    racetrack::explore::Order::Random(seed.unwrap_or_else(clock_seed))
                }
                (_, Some(_)) => anyhow::bail!("--seed is for --order random"),
            };
            let opts = racetrack::explore::Options {
                max_runs,
                budget: std::time::Duration::from_secs(budget_s),
                run_limit: std::time::Duration::from_secs(run_limit_s),
                out,
                jobs: jobs as usize,
                merge: !no_merge,
                order,
            };
            match (is_mpi, ranks) {
                (true, Some(ranks)) => mpi::explore(imp, ranks, &program, &opts),
                (true, None) => anyhow::bail!("--mpi needs the number of ranks: -n N"),
                (false, _) if ranks.is_some() || imp.is_some() => {
                    anyhow::bail!("-n and --impl are for MPI jobs: add --mpi")
                }
                (false, _) => commands::explore::program(&program, &opts),
            }
        }
        Cmd::Attach { url, script } => runtime::attach(&url, script),
        Cmd::Ctl { url } => Ok(racetrack::ctl::run(commands::connect(&url)?, None)),
        Cmd::Record {
            full,
            output,
            program,
        } => runtime::record(full, output, &program),
        Cmd::Replay {
            log,
            gui,
            front,
            program,
        } => commands::replay(&log, gui, front, &program),
        Cmd::Open { trace, script } => runtime::open(&trace, script),
        Cmd::Export {
            perfetto: _,
            trace,
            output,
        } => runtime::export(&trace, output),
        Cmd::Example { name, opts } => Ok(racetrack_examples::run_cli(name.name(), opts.to_args())),
        Cmd::Completions { shell } => {
            // Into a buffer first: a closed pipe (`| head`) is then an error, not a panic.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "racetrack", &mut script);
            match std::io::Write::write_all(&mut std::io::stdout(), &script) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
                _ => Ok(0),
            }
        }
    }
}

/// A seed for `--order random` when none is given: the clock's nanoseconds.
fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}
