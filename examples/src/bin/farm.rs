//! `farm`: see [`racetrack_examples::farm`].

use racetrack_examples::args::{or_exit, Args};
use racetrack_examples::farm::{run, Config, USAGE};

fn main() {
    let a = Args::from_env_or_exit(&[], USAGE);
    or_exit(
        a.check_known(&["threads", "tasks", "work-us", "iters", "jitter-us"]),
        USAGE,
    );
    let d = Config::default();
    let cfg = Config {
        threads: or_exit(a.num("threads", d.threads), USAGE).max(1),
        tasks: or_exit(a.num("tasks", d.tasks), USAGE),
        work_us: or_exit(a.num("work-us", d.work_us), USAGE),
        iters: or_exit(a.num("iters", d.iters), USAGE),
        jitter_us: or_exit(a.num("jitter-us", d.jitter_us), USAGE),
    };
    racetrack_examples::main_with(|rt| run(rt, &cfg));
}
