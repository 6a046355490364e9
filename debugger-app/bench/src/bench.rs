//! What the debugger costs, measured side by side in one invocation.
//!
//! Every workload runs (as `racetrack-bench example …`, a real process) under five
//! configurations, several repetitions each; the table gives medians and the ratio of run
//! time to configuration 0:
//!
//! 0. no agent (`RACETRACK_LISTEN` unset);
//! 1. agent listening, no debugger;
//! 2. the controller attached (`racetrack-bench ctl`, the code of `racetrack ctl`), free run (events streamed, printed by the controller);
//! 3. the controller attached in "ack every event" mode (every send/start/stop waits for
//!    the controller's acknowledgment: the thesis' design);
//! 4. the GUI's model attached (`racetrack-bench model-sink`: the GUI's connection and ingest path,
//!    without drawing).
//!
//! Configurations 2–4 run with `RACETRACK_WAIT=1`, so nothing streams before the debugger
//! is there: the program's first step waits until the debugger has started, attached and
//! said continue. That wait is inside the program's own timing; the agent measures it and
//! reports it at exit, and the table gives run times without it (and the wait apart).
//!
//! It also checks that streaming is lossless (the event numbers received are contiguous
//! and as many as the agent numbered, by its own count at exit), shows
//! the agent's memory with a debugger that lags behind, and compares the runtime with a
//! hand-written farm on std channels. Nothing here asserts: it prints what it measured.

use crate::run::{run_once, Run, Workload, CONFIGS, WORKLOADS};
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A farm on std channels doing the work of `farm --tasks n --work-us 0`: tasks per second.
fn baseline_farm(threads: usize, tasks: u64) -> f64 {
    use std::sync::mpsc;
    let t0 = Instant::now();
    let (res_tx, res_rx) = mpsc::channel::<u64>();
    let mut workers = Vec::new();
    let mut senders = Vec::new();
    for _ in 0..threads {
        let (tx, rx) = mpsc::channel::<u64>();
        let res_tx = res_tx.clone();
        senders.push(tx);
        workers.push(std::thread::spawn(move || {
            for v in rx {
                let _ = res_tx.send(racetrack_examples::farm::f(v));
            }
        }));
    }
    drop(res_tx);
    let mut rng = racetrack_examples::Lcg::new(42);
    for i in 0..tasks {
        let _ = senders[(i % threads as u64) as usize].send(rng.next_u64() % 1_000_000);
    }
    drop(senders);
    let sum = res_rx.iter().take(tasks as usize).fold(0u64, u64::wrapping_add);
    std::hint::black_box(sum);
    for w in workers {
        let _ = w.join();
    }
    tasks as f64 / t0.elapsed().as_secs_f64()
}

/// What `racetrack-bench` runs.
#[derive(Debug, PartialEq)]
struct Options {
    /// Repetitions of every measurement (medians are reported).
    reps: usize,
    /// `--only TEXT`: just the workloads whose name contains TEXT (and no other section);
    /// `--only lagging`, `--only baseline`, `--only record`: just that section.
    only: Option<String>,
}

const BENCH_USAGE: &str = "usage: racetrack-bench [--reps N] [--only TEXT|lagging|baseline|record]
  --reps N     repetitions of every measurement, medians reported (default 3)
  --only TEXT  just the workloads whose name contains TEXT (farm, 1 µs leaves; farm, 10 µs
               leaves; farm, 100 µs leaves; mergesort; heat); `lagging`: just the lagging
               debugger; `baseline`: just the runtime baseline; `record`: just what
               recording a replay log costs";

/// Parse `racetrack-bench`'s arguments: `Ok(None)` for `--help`; an error names what is
/// wrong (nothing runs then: a typo must not cost a half-hour run of the wrong thing).
fn parse_options(args: &[String]) -> Result<Option<Options>, String> {
    let mut opts = Options { reps: 3, only: None };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--help" | "-h" => return Ok(None),
            "--reps" => {
                let v = it.next().ok_or("--reps needs a number")?;
                opts.reps = match v.parse() {
                    Ok(n) if n >= 1 => n,
                    _ => return Err(format!("--reps needs a number of at least 1, not `{v}`")),
                };
            }
            "--only" => {
                let v = it
                    .next()
                    .filter(|v| !v.is_empty())
                    .ok_or("--only needs a workload name, `lagging` or `baseline`")?;
                if v != "baseline"
                    && v != "lagging"
                    && v != "record"
                    && !WORKLOADS.iter().any(|w| w.name.contains(v.as_str()))
                {
                    let names: Vec<&str> = WORKLOADS.iter().map(|w| w.name).collect();
                    return Err(format!(
                        "--only `{v}` names no workload (they are: {}; or `lagging`, or `baseline`)",
                        names.join("; ")
                    ));
                }
                opts.only = Some(v.clone());
            }
            other => return Err(format!("unknown option `{other}`")),
        }
    }
    Ok(Some(opts))
}

/// `racetrack-bench [--reps N] [--only TEXT|lagging|baseline]`.
pub(crate) fn main(args: &[String]) -> i32 {
    let opts = match parse_options(args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            println!("{BENCH_USAGE}");
            return 0;
        }
        Err(e) => {
            eprintln!("racetrack-bench: {e}\n{BENCH_USAGE}");
            return 2;
        }
    };
    let reps = opts.reps;
    let exe = match std::env::current_exe() {
        Ok(p) => p.display().to_string(),
        Err(e) => {
            eprintln!("racetrack-bench: {e}");
            return 2;
        }
    };
    if opts.only.as_deref() == Some("lagging") {
        println!("# racetrack-bench: the lagging debugger");
        lagging(&exe);
        return 0;
    }
    if opts.only.as_deref() == Some("record") {
        println!("# racetrack-bench: {reps} repetitions, medians; ratio = recording / no hook");
        crate::record::recording(&exe, reps);
        return 0;
    }
    println!("# racetrack-bench: {reps} repetitions, medians; ratio = run time / no agent");
    match opts.only.as_deref() {
        Some("baseline") => {}
        Some(text) => {
            workloads(&exe, reps, Some(text));
            return 0;
        }
        None => {
            workloads(&exe, reps, None);
            lagging(&exe);
            crate::record::recording(&exe, reps);
        }
    }
    runtime_baseline(&exe, reps);
    0
}

/// The table of every workload (whose name contains `only`) under every configuration.
fn workloads(exe: &str, reps: usize, only: Option<&str>) {
    println!("(run time: the program's own timing, less the start hold, reported apart)");
    println!(
        "| workload | configuration | median ms | ratio | start hold ms | events received/s | lossless | peak RSS MiB |"
    );
    println!("|---|---|---:|---:|---:|---:|---|---:|");
    for w in WORKLOADS
        .iter()
        .filter(|w| only.is_none_or(|o| w.name.contains(o)))
    {
        // Repetitions interleave the configurations (0, 1, 2, 3, 4, 0, 1, ...): this
        // machine's speed drifts over seconds, and a block of runs per configuration turned
        // that drift into ratio differences (1.50x and 1.76x for the same build).
        let mut all: Vec<Vec<Run>> = CONFIGS.iter().map(|_| Vec::new()).collect();
        for _ in 0..reps {
            for (c, cname) in CONFIGS.iter().enumerate() {
                match run_once(exe, w, c, 0) {
                    Ok(r) => all[c].push(r),
                    Err(e) => eprintln!("{} / {cname}: {e}", w.name),
                }
            }
        }
        let mut base = None;
        for ((c, cname), runs) in CONFIGS.iter().enumerate().zip(all) {
            if runs.is_empty() {
                continue;
            }
            let ms = median(runs.iter().map(|r| r.elapsed_ms).collect());
            let base_ms = *base.get_or_insert(ms);
            let rate = runs
                .iter()
                .filter_map(|r| r.events.map(|e| e as f64 / (r.elapsed_ms / 1e3)))
                .collect::<Vec<_>>();
            let rate = if rate.is_empty() {
                "-".to_owned()
            } else {
                format!("{:.0}", median(rate))
            };
            let lossless = match runs.iter().filter_map(|r| r.lossless).collect::<Vec<_>>() {
                v if v.is_empty() => "-".to_owned(),
                v => format!("{}/{}", v.iter().filter(|x| **x).count(), v.len()),
            };
            let rss = runs.iter().map(|r| r.peak_rss_kib).max().unwrap_or(0) as f64 / 1024.0;
            let held = if c >= 2 {
                format!("{:.1}", median(runs.iter().map(|r| r.held_ms).collect()))
            } else {
                "-".to_owned()
            };
            println!(
                "| {} | {c}. {cname} | {ms:.1} | {:.2} | {held} | {rate} | {lossless} | {rss:.1} |",
                w.name,
                ms / base_ms
            );
        }
    }
}

/// A debugger that lags behind: the agent's memory stays bounded, the program slows down.
fn lagging(exe: &str) {
    println!();
    println!(
        "## a lagging debugger (GUI model sink taking at most so many events a second; farm, 250,000 tasks: 2,000,004 events; one run each)"
    );
    println!("| debugger | run ms | peak RSS MiB | waits for room | events | lossless |");
    println!("|---|---:|---:|---:|---:|---|");
    // Far more events than the buffers on the way hold (the agent's 65,536, the socket's,
    // the sink's 256 frames: 800,004 events fit in them in a run here), so a slow sink
    // must slow the program.
    let w = &Workload {
        name: "farm, 1 µs leaves, 250,000 tasks",
        program: "farm",
        args: &["--threads", "4", "--tasks", "250000", "--work-us", "1"],
    };
    // First the program alone: its own memory (its queues hold every task at once).
    for (config, rate) in [(0, 0), (4, 0), (4, LAGGING_RATE)] {
        match run_once(exe, w, config, rate) {
            Ok(r) => println!(
                "| {} | {:.1} | {:.1} | {} | {} | {} |",
                match (config, rate) {
                    (0, _) => "none (no agent)".to_owned(),
                    (_, 0) => "sink, unlimited".to_owned(),
                    _ => format!("sink, at most {rate} events/s"),
                },
                r.elapsed_ms,
                r.peak_rss_kib as f64 / 1024.0,
                r.waits.map_or("-".to_owned(), |n| n.to_string()),
                r.events.map_or("-".to_owned(), |n| n.to_string()),
                r.lossless.map_or("-", |b| if b { "yes" } else { "NO" })
            ),
            Err(e) => eprintln!("lagging sink at {rate} events/s: {e}"),
        }
    }
}

/// The lagging sink's pace: a tenth of what the debugger takes here when nothing holds it
/// back (2–3 M events/s).
const LAGGING_RATE: u64 = 200_000;

/// The runtime against a hand-written farm on std channels.
fn runtime_baseline(exe: &str, reps: usize) {
    println!();
    println!("## runtime baseline: farm with trivial leaves (4 workers, 200,000 tasks)");
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    let base_w = Workload {
        name: "farm, trivial leaves",
        program: "farm",
        args: &["--threads", "4", "--tasks", "200000"],
    };
    for _ in 0..reps {
        if let Ok(r) = run_once(exe, &base_w, 0, 0) {
            ours.push(200_000.0 / (r.elapsed_ms / 1e3));
        }
        theirs.push(baseline_farm(4, 200_000));
    }
    if !ours.is_empty() {
        let (o, t) = (median(ours), median(theirs));
        println!("| runtime (config 0) | std channels | ratio |");
        println!("|---:|---:|---:|");
        println!("| {o:.0} tasks/s | {t:.0} tasks/s | {:.2} |", o / t);
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_options, Options};
    use crate::run::{number_after, number_before, numbered_event_id, snapshot_next, Tally};

    #[test]
    fn the_agents_summary_is_read_field_by_field() {
        let line = b"racetrack: finished=true with 0 events buffered, 995 frames and 800006 events sent, next id 800005, 46 waits for room, start hold 15471 us\n";
        assert_eq!(number_after(line, b", next id "), Some(800_005));
        assert_eq!(number_before(line, b" waits for room"), Some(46));
        assert_eq!(number_after(line, b", start hold "), Some(15_471));
        assert_eq!(number_before(b"0 waits for room", b" waits for room"), Some(0));
        assert_eq!(number_before(b"no count", b" waits for room"), None);
        assert_eq!(number_before(b"x waits for room", b" waits for room"), None);
    }

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn bench_options_are_checked_before_anything_runs() {
        assert_eq!(
            parse_options(&args(&[])),
            Ok(Some(Options { reps: 3, only: None }))
        );
        assert_eq!(
            parse_options(&args(&["--only", "1 µs", "--reps", "5"])),
            Ok(Some(Options {
                reps: 5,
                only: Some("1 µs".into())
            }))
        );
        assert_eq!(
            parse_options(&args(&["--only", "baseline"])).map(|o| o.and_then(|o| o.only)),
            Ok(Some("baseline".into()))
        );
        assert_eq!(parse_options(&args(&["--help"])), Ok(None));
        let err = |v: &[&str]| parse_options(&args(v)).expect_err("an error");
        assert_eq!(err(&["--rep", "5"]), "unknown option `--rep`");
        assert!(err(&["--reps", "0"]).contains("at least 1, not `0`"));
        assert!(err(&["--reps", "x"]).contains("not `x`"));
        assert!(err(&["--reps"]).contains("needs a number"));
        assert!(err(&["--only"]).contains("needs a workload"));
        assert!(err(&["--only", ""]).contains("needs a workload"));
        assert_eq!(
            parse_options(&args(&["--only", "lagging"])).map(|o| o.and_then(|o| o.only)),
            Ok(Some("lagging".into()))
        );
        let e = err(&["--only", "fram"]);
        assert!(e.contains("names no workload") && e.contains("mergesort"), "{e}");
    }

    #[test]
    fn lossless_means_every_number_from_the_snapshot_to_the_agents_last() {
        let mut t = Tally::default();
        assert!(!t.lossless(None), "nothing received");
        t.from = Some(3);
        for id in 3..=9 {
            t.add(id);
        }
        assert!(t.lossless(Some(10)));
        assert!(!t.lossless(Some(12)), "the last two never arrived");
        let mut head = t;
        head.from = Some(1);
        assert!(!head.lossless(Some(10)), "the first two never arrived");
        let mut gap = Tally::default();
        for id in [1, 2, 4] {
            gap.add(id);
        }
        assert!(!gap.lossless(None));
        let mut dup = Tally::default();
        for id in [5, 5, 7] {
            dup.add(id);
        }
        assert!(!dup.contiguous(), "a duplicate standing in for a gap");
        let mut two = Tally::default();
        for id in [1, 1, 4, 4] {
            two.add(id);
        }
        assert!(!two.contiguous(), "two duplicates standing in for two gaps");
        let mut from0 = Tally::default();
        for id in [2, 0, 1] {
            from0.add(id);
        }
        assert!(from0.contiguous());
        assert_eq!(
            snapshot_next(br#"{"event":"snapshot","next_event_id":17,"threads":[]}"#),
            Some(17)
        );
    }

    #[test]
    fn the_counter_reads_numbered_events_only() {
        let line = br#"{"event":"recv","event_id":1234,"thread":"proc[0]","op":"Work","msg":"0.1","position":0,"traced":false}"#;
        assert_eq!(numbered_event_id(line), Some(1234));
        assert_eq!(numbered_event_id(br#"{"event":"stop","event_id":7}"#), Some(7));
        assert_eq!(numbered_event_id(br#"{"event":"held","event_id":7}"#), None);
        assert_eq!(numbered_event_id(br#"{"event":"send","msg":"0"}"#), None);
        assert_eq!(numbered_event_id(br#"{"event":"send","event_id":x}"#), None);
        assert_eq!(
            numbered_event_id(br#"{"event":"start","thread":"t","event_id":42}"#),
            Some(42)
        );
    }
}
