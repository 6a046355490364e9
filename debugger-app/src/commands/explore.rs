//! `racetrack explore`, for MPI jobs and runtime programs alike: the runs on stderr, a
//! progress bar on a terminal, the summary.

use crate::cli::Program;
use racetrack::explore::{Note, Options, Summary};

/// `racetrack explore [options] -- PROGRAM ARGS`: a program on the runtime.
pub fn program(program: &Program, opts: &Options) -> anyhow::Result<i32> {
    let p = racetrack::explore::Program {
        program: program.name().into(),
        args: program.args().to_vec(),
    };
    eprintln!("racetrack: exploring {}", program.command.join(" "));
    report(opts, &program.command, |say| {
        racetrack::explore::explore_program(&p, opts, say)
    })
}

/// Run a search (`search`, given what to say as it goes) with a progress bar; each run
/// on stderr, the summary as a JSON line on stdout. Exit code 0 when every run exited 0
/// with one result.
/// `command`: the program and its arguments, for the replay commands shown.
pub fn report(
    opts: &Options,
    command: &[String],
    search: impl FnOnce(&mut dyn FnMut(Note)) -> anyhow::Result<Summary>,
) -> anyhow::Result<i32> {
    if let racetrack::explore::Order::Random(seed) = opts.order {
        eprintln!("racetrack: schedules drawn at random, seed {seed} (--seed {seed} draws them again)");
    }
    let mut bar = ProgressBar::new(opts);
    let s = search(&mut |note| bar.tell(note))?;
    bar.clear();
    let how = match &s.stopped {
        None => "complete".to_owned(),
        Some(why) => format!("not complete: {why}"),
    };
    eprintln!(
        "racetrack: {} runs, {} outcomes, {} picks with a choice, {} messages delivered, {:.1} s; {how}",
        s.runs,
        s.outcomes.len(),
        s.branch_points,
        s.delivered,
        s.time.as_secs_f64()
    );
    for f in s.outcomes.iter().skip(1) {
        let Some(first) = f.minimal.first() else { continue };
        let file = f
            .minimal_replay
            .as_ref()
            .map_or(String::new(), |f| format!("; replay: {}", f.display()));
        let k = f.minimal.len();
        let plural = if k == 1 { "" } else { "s" };
        eprintln!(
            "racetrack: {} runs: {} ({k} departure{plural} from the first run){file}",
            f.count,
            first.words()
        );
        for d in &f.minimal[1..] {
            eprintln!("racetrack:   and {}", d.words());
        }
        eprintln!("racetrack:   -> {}", f.outcome.words());
        if let (Some((stop, _)), Some(file), Some(natural)) = (&f.stop, &f.replay, first_replay(&s)) {
            let line = command.join(" ");
            eprintln!(
                "racetrack:   stopped where the runs diverge: racetrack replay {} --gui --script {} -- {line}",
                file.display(),
                stop.display()
            );
            eprintln!(
                "racetrack:   (the first run: racetrack replay {} --gui --script {} -- {line})",
                natural.display(),
                stop.display()
            );
        }
    }
    println!("{}", s.to_json());
    Ok(if s.clean() { 0 } else { 1 })
}

fn first_replay(s: &Summary) -> Option<&std::path::PathBuf> {
    s.outcomes.first()?.replay.as_ref()
}

/// The explorer's progress on a terminal: one line, redrawn under the runs' lines, that
/// says how far the search went against its budgets. Not drawn when stderr is not a
/// terminal (scripts read the runs' lines).
struct ProgressBar {
    on: bool,
    drawn: bool,
    max_runs: usize,
    budget: std::time::Duration,
}

impl ProgressBar {
    fn new(opts: &Options) -> Self {
        use std::io::IsTerminal;
        Self {
            on: std::io::stderr().is_terminal(),
            drawn: false,
            max_runs: opts.max_runs,
            budget: opts.budget,
        }
    }

    fn tell(&mut self, note: Note) {
        match note {
            Note::Run(line) => {
                self.clear();
                eprintln!("racetrack: {line}");
            }
            Note::Progress(p) if self.on => {
                // The larger share of a budget spent.
                let runs = p.runs as f64 / self.max_runs.max(1) as f64;
                let time = p.elapsed.as_secs_f64() / self.budget.as_secs_f64().max(1e-3);
                let filled = (runs.max(time).min(1.0) * 30.0).round() as usize;
                eprint!(
                    "\r[{}{}] {} of at most {} runs, {} outcomes, {} schedules waiting, {:.0} s of {} s",
                    "#".repeat(filled),
                    " ".repeat(30 - filled),
                    p.runs,
                    self.max_runs,
                    p.outcomes,
                    p.pending,
                    p.elapsed.as_secs_f64(),
                    self.budget.as_secs()
                );
                self.drawn = true;
            }
            Note::Progress(_) => {}
        }
    }

    /// Erase the bar (before a line, and at the end).
    fn clear(&mut self) {
        if self.drawn {
            eprint!("\r\x1b[2K");
            self.drawn = false;
        }
    }
}
