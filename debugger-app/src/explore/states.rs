//! Equal states, merged (thesis §4.5): the state of a runtime program at a cut of its run
//! (a number of steps per thread, closed under happens-before) is what its future depends
//! on: each thread's state, the inputs each open merge or stream instance absorbed, the
//! messages sent and not yet taken (in each sender's order), the results back to the
//! schedule's caller and the inputs it sent. Two branches that start from equal states
//! with the same thread taking the same sender's message have the same futures: the
//! explorer runs one.
//!
//! Contents and thread states are known by their hashes, which the agent writes for the
//! explorer (`RACETRACK_DIGEST`, see the agent's `replay::digest`). A merge's accumulator
//! is known by its own hash when the merge was made with `ops::merge_serde`, else by the
//! hashes of what it absorbed, in order, which determine it. The model assumes what the
//! runtime promises: a step's effect depends only on its thread's state, its message and
//! its instance's inputs, all serialized in full. A step that reads a clock, shares state
//! behind the runtime's back, prints what the outcome compares, or a state whose
//! `Serialize` leaves fields out, breaks it: `--no-merge` turns the merging off. A run
//! whose states cannot all be placed (a step whose message was not seen sent, a schedule
//! call nested in a step, a merge's final step that waited for its split) merges nothing.

use super::steps::{Steps, Taken};
use super::Schedule;
use racetrack_protocol::SmolStr;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::path::Path;

/// A run's steps with the hashes the digests gave: what a state at any of its cuts is.
pub struct States {
    steps: Steps,
    /// Content hashes, by message, operation and destination thread (`None`: a result).
    contents: HashMap<(SmolStr, SmolStr, Option<usize>), u64>,
    /// Each thread's state after each of its steps on messages (and the final step that
    /// followed it, if any).
    after: Vec<Vec<u64>>,
    /// After each absorb into a merge made with `ops::merge_serde`: its accumulator.
    acc: Vec<Vec<Option<u64>>>,
}

/// The digests at `path` for the run `steps`; `None` when they are missing, cut short or
/// name a value that could not be hashed: then nothing of that run is merged.
pub fn read(path: &Path, steps: Steps) -> Option<States> {
    let text = std::fs::read_to_string(path).ok()?;
    let n = steps.names.len();
    let mut contents = HashMap::new();
    let mut after: Vec<Vec<u64>> = vec![Vec::new(); n];
    let mut acc: Vec<Vec<Option<u64>>> = vec![Vec::new(); n];
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        match f.as_slice() {
            ["m", msg, op, thread, hash] => {
                let to = if *thread == "-" {
                    None
                } else {
                    Some(thread.parse().ok()?)
                };
                let op = if *op == "-" { "" } else { op };
                contents.insert(((*msg).into(), op.into(), to), hex(hash)?);
            }
            ["s", thread, kind, hash, rest @ ..] => {
                let g = thread.parse::<usize>().ok()?;
                let list = after.get_mut(g)?;
                let h = hex(hash)?;
                match *kind {
                    "final" => *list.last_mut()? = h,
                    _ => {
                        list.push(h);
                        let shown = match rest {
                            [a] => Some(hex(a)?),
                            _ => None,
                        };
                        acc.get_mut(g)?.push(shown);
                    }
                }
            }
            _ => return None,
        }
    }
    // Every step's state is there (the program flushed them all).
    if after.iter().zip(&steps.threads).any(|(a, t)| a.len() != t.len()) {
        return None;
    }
    Some(States {
        steps,
        contents,
        after,
        acc,
    })
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s, 16).ok()
}

impl States {
    pub fn steps(&self) -> &Steps {
        &self.steps
    }

    pub fn into_steps(self) -> Steps {
        self.steps
    }

    fn content(&self, t: &Taken, to: usize) -> Option<u64> {
        self.contents
            .get(&(t.msg.clone(), t.op.clone(), Some(to)))
            .copied()
    }

    /// The state at the cut `cut` (a schedule's picks: each thread's first steps) with
    /// `thread` about to take `sender`'s next message, as a hash; `None` when a message
    /// it needs was not digested.
    pub fn key(&self, cut: &Schedule, thread: &str, sender: i32) -> Option<u64> {
        let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
        for (name, _) in cut.keys() {
            *counts.entry(name.as_str()).or_default() += 1;
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (thread, sender, self.at(&counts)?).hash(&mut h);
        Some(h.finish())
    }

    /// The state after each thread's first `counts` steps (by thread name; a cut), as a
    /// hash; `None` when a message it needs was not digested.
    pub fn at(&self, counts: &BTreeMap<&str, u32>) -> Option<u64> {
        let s = &self.steps;
        // By sender code: entry 0 the inputs the cut knows of, g + 1 thread g's steps.
        let mut n = vec![0u32; s.names.len() + 1];
        for (g, name) in s.names.iter().enumerate() {
            let k = counts.get(name.as_str()).copied().unwrap_or(0);
            n[g + 1] = k;
            if let Some(last) = k.checked_sub(1).and_then(|i| s.threads[g].get(i as usize)) {
                n[0] = n[0].max(last.inputs);
            }
        }
        let within = |t: &Taken| {
            let step = t.sent.get(t.sender as usize).copied().unwrap_or(u32::MAX);
            n.get(t.sender as usize).is_some_and(|&k| step <= k)
        };
        let mut h = std::collections::hash_map::DefaultHasher::new();
        n[0].hash(&mut h);
        for (g, steps) in s.threads.iter().enumerate() {
            let k = n[g + 1] as usize;
            g.hash(&mut h);
            k.checked_sub(1).map(|i| self.after[g][i]).hash(&mut h);
            self.open_instances(g, k)?.hash(&mut h);
            // In transit to it: sent within the cut, not taken in it, by sender in order.
            let mut transit: Vec<(u64, usize, &Taken)> = steps[k.min(steps.len())..]
                .iter()
                .chain(&s.left[g])
                .enumerate()
                .filter(|(_, t)| within(t))
                .map(|(i, t)| (t.sender, i, t))
                .collect();
            transit.sort_by_key(|&(sender, i, _)| (sender, i));
            for (sender, _, t) in transit {
                (sender, &t.msg, &t.op, self.content(t, g)?).hash(&mut h);
            }
        }
        for (code, step, msg) in &s.results {
            if n.get(*code as usize).is_some_and(|&k| *step <= k) {
                let content = self.contents.get(&(msg.clone(), SmolStr::default(), None))?;
                (code, step, content).hash(&mut h);
            }
        }
        Some(h.finish())
    }

    /// Thread `g`'s merge and stream instances open after its first `k` steps, each with
    /// the hashes of what it absorbed, in order, or, for a merge that shows it, of its
    /// accumulator (with how many inputs it took: the merge ends on a count).
    fn open_instances(&self, g: usize, k: usize) -> Option<BTreeMap<&SmolStr, Vec<u64>>> {
        let mut open: BTreeMap<&SmolStr, Vec<u64>> = BTreeMap::new();
        let mut taken: BTreeMap<&SmolStr, u64> = BTreeMap::new();
        for (i, t) in self.steps.threads[g][..k].iter().enumerate() {
            if let Some(inst) = &t.into {
                let n = taken.entry(inst).or_default();
                *n += 1;
                match self.acc[g].get(i).copied().flatten() {
                    Some(acc) => {
                        open.insert(inst, vec![*n, acc]);
                    }
                    None => open.entry(inst).or_default().push(self.content(t, g)?),
                }
            }
        }
        for (at, inst) in &self.steps.closed[g] {
            if (*at as usize) <= k {
                open.remove(inst);
            }
        }
        Some(open)
    }
}
