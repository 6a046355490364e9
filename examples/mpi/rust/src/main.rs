//! `ring-rs`: the MPI ring example in Rust with the `mpi` crate (rsmpi), printing the same
//! JSON line as `ring.c`.
//!
//! A token travels around the ranks `--rounds N` times; every rank adds
//! `(rank + 1) * (round + 1)` to it, and one all-reduce adds up what each rank added. Rank
//! 0 compares both with the sequential reference. Exit codes: 0 match, 1 mismatch, 2 bad
//! arguments.

use mpi::collective::SystemOperation;
use mpi::traits::*;

const USAGE: &str = "usage: ring-rs [--rounds N]";

fn contribution(rank: i32, round: i64) -> i64 {
    i64::from(rank + 1) * (round + 1)
}

fn reference_token(ranks: i32, rounds: i64) -> i64 {
    (0..rounds)
        .flat_map(|round| (0..ranks).map(move |r| contribution(r, round)))
        .sum()
}

fn parse_rounds(args: &[String]) -> Result<i64, String> {
    match args {
        [] => Ok(3),
        [flag, n] if flag == "--rounds" => n
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| format!("bad value for --rounds: `{n}`")),
        _ => Err("bad argument (expected --rounds N)".into()),
    }
}

/// The rounds; returns the token as rank 0 holds it at the end (0 elsewhere) and what this
/// rank added. With one rank the ring is rank 0 alone (no send to itself).
fn pass_token<C: Communicator>(world: &C, rounds: i64) -> (i64, i64) {
    let (rank, size) = (world.rank(), world.size());
    let next = world.process_at_rank((rank + 1) % size);
    let prev = world.process_at_rank((rank + size - 1) % size);
    let (mut token, mut added) = (0i64, 0i64);
    for round in 0..rounds {
        if size > 1 && rank != 0 {
            token = prev.receive::<i64>().0;
        }
        token += contribution(rank, round);
        added += contribution(rank, round);
        if size > 1 {
            next.send(&token);
            if rank == 0 {
                token = prev.receive::<i64>().0;
            }
        }
    }
    (if rank == 0 { token } else { 0 }, added)
}

fn main() {
    let Some(universe) = mpi::initialize() else {
        eprintln!("error: MPI is already initialized");
        std::process::exit(2);
    };
    let world = universe.world();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rounds = match parse_rounds(&args) {
        Ok(r) => r,
        Err(e) => {
            if world.rank() == 0 {
                eprintln!("error: {e}\n{USAGE}");
            }
            drop(universe);
            std::process::exit(2);
        }
    };

    let t0 = mpi::time();
    let (token, added) = pass_token(&world, rounds);
    let mut total = 0i64;
    world.all_reduce_into(&added, &mut total, SystemOperation::sum());
    let elapsed = mpi::time() - t0;

    let mut code = 0i32;
    if world.rank() == 0 {
        let reference = reference_token(world.size(), rounds);
        let matches = token == reference && total == reference;
        println!(
            "{{\"program\":\"ring\",\"result\":{token},\"reference\":{reference},\
             \"matches_reference\":{matches},\"ranks\":{},\"elapsed_ms\":{:.3},\
             \"rounds\":{rounds},\"allreduce\":{total},\"language\":\"rust\"}}",
            world.size(),
            elapsed * 1000.0
        );
        code = if matches { 0 } else { 1 };
    }
    world.process_at_rank(0).broadcast_into(&mut code);
    drop(universe);
    std::process::exit(code);
}
