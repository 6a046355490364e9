//! The schedules waiting to run, and the order the walk takes them in (`--order`).
//!
//! - **breadth** first (the default): branches in the order they were made, generation
//!   by generation:
//!   the first run's branches (one departure from the natural order each) all run before
//!   the branches they make, as the thesis' breadth-first branch ordering does. Races
//!   that need few departures are found first, at the cost of a frontier that grows with
//!   each generation (`BENCHMARKS.md`: 129 MB after 30 s on `heat` at 4 threads, against
//!   56 MB depth first).
//! - **depth** first: the latest branch first. Each run's branches are followed to the
//!   end before the ones of the run before it: the least memory, but on a space too
//!   large to finish it can spend the budget in one corner (`search` at 4 threads: no
//!   race found in 30 s, where breadth first finds it at run 2).
//! - **random**: a schedule drawn uniformly from those waiting (`--seed`, else one from
//!   the clock, printed, fixes the draws; the runs' free parts still follow timing, so
//!   two walks with one seed can differ): when the space is too large to finish, the
//!   runs spread over it instead of exhausting one corner.
//!
//! The order changes which schedules run first. A walk that finishes is complete in any
//! order; the branches it ran can differ a little, where the walk remembers what came
//! first: which of two equal states was branched from, and which run first offered a
//! reversed step its senders (runtime programs without states).

use super::Schedule;
use std::collections::VecDeque;

/// The order the walk takes waiting schedules in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Depth,
    Breadth,
    /// Uniformly at random, from this seed.
    Random(u64),
}

impl Order {
    /// Its name, as `--order` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Order::Depth => "depth",
            Order::Breadth => "breadth",
            Order::Random(_) => "random",
        }
    }
}

/// The schedules waiting to run.
pub(super) struct Frontier {
    waiting: VecDeque<Schedule>,
    order: Order,
    /// splitmix64's state (random order).
    state: u64,
}

impl Frontier {
    pub(super) fn new(order: Order, first: Schedule) -> Self {
        let state = match order {
            Order::Random(seed) => seed,
            _ => 0,
        };
        Self {
            waiting: VecDeque::from([first]),
            order,
            state,
        }
    }

    pub(super) fn push(&mut self, s: Schedule) {
        self.waiting.push_back(s);
    }

    /// The next schedule to run, as the order says.
    pub(super) fn pop(&mut self) -> Option<Schedule> {
        match self.order {
            Order::Depth => self.waiting.pop_back(),
            Order::Breadth => self.waiting.pop_front(),
            Order::Random(_) => {
                let n = u64::try_from(self.waiting.len()).ok().filter(|&n| n > 0)?;
                let i = usize::try_from(self.next_random() % n).unwrap_or(0);
                self.waiting.swap_remove_back(i)
            }
        }
    }

    /// Put back a schedule taken but not run (a budget was spent): the next one, depth
    /// or breadth first; drawn again at random.
    pub(super) fn put_back(&mut self, s: Schedule) {
        match self.order {
            Order::Breadth => self.waiting.push_front(s),
            _ => self.waiting.push_back(s),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.waiting.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// splitmix64 (Steele, Lea and Flood): enough to spread picks, and no dependency.
    fn next_random(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(n: i32) -> Schedule {
        Schedule::from([(("t".to_owned(), 0), n)])
    }

    fn drain(order: Order) -> Vec<i32> {
        let mut f = Frontier::new(order, schedule(0));
        (1..6).for_each(|n| f.push(schedule(n)));
        std::iter::from_fn(|| f.pop())
            .map(|s| s[&("t".to_owned(), 0)])
            .collect()
    }

    #[test]
    fn each_order_takes_every_schedule_once_in_its_own_order() {
        assert_eq!(drain(Order::Depth), [5, 4, 3, 2, 1, 0]);
        assert_eq!(drain(Order::Breadth), [0, 1, 2, 3, 4, 5]);
        let a = drain(Order::Random(7));
        assert_eq!(a, drain(Order::Random(7)), "a seed repeats its walk");
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [0, 1, 2, 3, 4, 5]);
        let orders: std::collections::HashSet<Vec<i32>> = (0..20).map(|s| drain(Order::Random(s))).collect();
        assert!(orders.len() > 10, "seeds give different orders: {orders:?}");
    }

    #[test]
    fn a_schedule_put_back_is_the_next_one() {
        for order in [Order::Depth, Order::Breadth] {
            let mut f = Frontier::new(order, schedule(0));
            f.push(schedule(1));
            let s = f.pop().unwrap_or_default();
            f.put_back(s.clone());
            assert_eq!(f.pop(), Some(s), "{order:?}");
        }
    }
}
