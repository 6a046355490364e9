use super::*;

fn call(comm: &str, peer: Option<Peer>, tag: i32) -> CallInfo {
    CallInfo {
        comm: Some(comm.into()),
        peer,
        tag: Some(Tag::Tag(tag)),
        site: Some("t.c:7 (main)".into()),
        ..CallInfo::default()
    }
}

/// A job of `n` ranks, its linker, and the next event number.
struct Job {
    waits: Waits,
    linker: Linker,
    next: u64,
}

impl Job {
    fn new(n: usize) -> Self {
        Job {
            waits: Waits::new(n),
            linker: Linker::new(),
            next: 1,
        }
    }

    fn id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Rank `r` starts `op` with `c` (a collective gets its instance, as in the merge).
    fn start(&mut self, r: usize, op: &str, mut c: CallInfo) {
        let thread = rank_name(r);
        self.linker.instance_parts(Kind::Start, &thread, op, Some(&mut c));
        let id = self.id();
        self.waits
            .observe(Kind::Start, &thread, op, id, Some(&Arc::new(c)));
    }

    fn stop(&mut self, r: usize, op: &str) {
        let thread = rank_name(r);
        self.linker.instance_parts(Kind::Stop, &thread, op, None);
        let id = self.id();
        self.waits.observe(Kind::Stop, &thread, op, id, None);
    }

    /// Rank `r` sends to `to` (its `send` event, before MPI has it).
    fn send(&mut self, r: usize, to: i32, tag: i32) {
        let c = call("MPI_COMM_WORLD", Some(Peer::Rank(to)), tag);
        let id = self.id();
        self.linker.observe_parts(Kind::Send, &rank_name(r), id, Some(&c));
    }

    fn find(&mut self) -> Option<Deadlock> {
        self.waits.find(&mut self.linker, |_| false)
    }
}

fn recv(from: i32) -> CallInfo {
    call("MPI_COMM_WORLD", Some(Peer::Rank(from)), 0)
}

fn any_source() -> CallInfo {
    call("MPI_COMM_WORLD", Some(Peer::Special(SpecialPeer::AnySource)), 0)
}

fn barrier() -> CallInfo {
    CallInfo {
        comm: Some("MPI_COMM_WORLD".into()),
        ..CallInfo::default()
    }
}

#[test]
fn two_ranks_receiving_from_each_other_are_a_cycle() {
    let mut j = Job::new(2);
    j.start(0, "MPI_Recv", recv(1));
    j.start(1, "MPI_Recv", recv(0));
    let d = j.find().expect("a deadlock");
    assert_eq!(d.cycle, ["rank[0]", "rank[1]"]);
    assert_eq!(d.waits.len(), 2);
    let w = &d.waits[0];
    assert_eq!((w.thread.as_str(), w.call.as_str()), ("rank[0]", "MPI_Recv"));
    assert_eq!(w.waits_for, ["rank[1]"]);
    assert_eq!(w.needs, Needs::All);
    assert_eq!(w.site.as_deref(), Some("t.c:7 (main)"));
}

#[test]
fn a_receive_whose_send_is_on_its_way_goes_on_and_frees_its_sender() {
    let mut j = Job::new(2);
    j.send(1, 0, 0);
    j.start(1, "MPI_Recv", recv(0));
    j.start(0, "MPI_Recv", recv(1));
    assert_eq!(j.find(), None, "rank 0 takes rank 1's message, then sends");
    // A message with another tag does not match.
    let mut j = Job::new(2);
    j.send(1, 0, 5);
    j.start(1, "MPI_Recv", recv(0));
    j.start(0, "MPI_Recv", recv(1));
    assert!(j.find().is_some());
}

#[test]
fn a_rank_that_never_enters_a_barrier_holds_everyone_in_it() {
    let mut j = Job::new(3);
    j.start(1, "MPI_Barrier", barrier());
    j.start(2, "MPI_Barrier", barrier());
    j.start(0, "MPI_Recv", recv(1));
    let d = j.find().expect("a deadlock");
    assert_eq!(d.waits.len(), 3);
    assert_eq!(d.cycle, ["rank[0]", "rank[1]"]);
    assert_eq!(
        d.waits[1].waits_for,
        ["rank[0]"],
        "rank 2 is in the barrier already"
    );
    // Once rank 0 enters the barrier too, it completes.
    j.stop(0, "MPI_Recv");
    assert_eq!(j.find(), None, "rank 0 is computing");
    j.start(0, "MPI_Barrier", barrier());
    assert_eq!(j.find(), None);
    // A second barrier that rank 2 does not enter.
    for r in 0..3 {
        j.stop(r, "MPI_Barrier");
    }
    j.start(0, "MPI_Barrier", barrier());
    j.start(1, "MPI_Barrier", barrier());
    assert_eq!(j.find(), None, "rank 2 is computing");
    j.start(2, "MPI_Recv", recv(0));
    let d = j.find().expect("the second barrier");
    assert_eq!(d.waits[0].waits_for, ["rank[2]"]);
}

#[test]
fn a_wildcard_receive_waits_for_any_sender_and_a_finished_one_never_sends() {
    let mut j = Job::new(3);
    j.start(0, "MPI_Recv", any_source());
    assert_eq!(j.find(), None, "ranks 1 and 2 are running");
    j.start(1, "MPI_Finalize", barrier());
    assert_eq!(j.find(), None, "rank 2 may still send");
    j.waits.finished(2);
    let d = j.find().expect("nobody is left to send");
    assert_eq!(d.waits.len(), 1);
    let w = &d.waits[0];
    assert_eq!(w.needs, Needs::Any);
    assert_eq!(w.waits_for, ["rank[1]", "rank[2]"]);
    assert_eq!(w.finished, ["rank[1]", "rank[2]"]);
    assert!(d.cycle.is_empty(), "no cycle: it waits for finished ranks");
}

#[test]
fn moving_ranks_and_sends_to_receivers_are_not_deadlocks() {
    let mut j = Job::new(2);
    j.start(0, "MPI_Recv", recv(1));
    j.start(1, "MPI_Recv", recv(0));
    assert_eq!(
        j.waits.find(&mut j.linker, |r| r == 1),
        None,
        "the debugger holds rank 1"
    );
    // A send to a rank that receives from it completes.
    let mut j = Job::new(2);
    j.send(0, 1, 0);
    j.start(0, "MPI_Send", call("MPI_COMM_WORLD", Some(Peer::Rank(1)), 0));
    j.start(1, "MPI_Recv", recv(0));
    assert_eq!(j.find(), None);
    // Two sends to each other that do not complete (rendezvous) are stuck.
    let mut j = Job::new(2);
    j.start(0, "MPI_Ssend", call("MPI_COMM_WORLD", Some(Peer::Rank(1)), 0));
    j.start(1, "MPI_Ssend", call("MPI_COMM_WORLD", Some(Peer::Rank(0)), 0));
    assert_eq!(j.find().map(|d| d.cycle.len()), Some(2));
}

#[test]
fn a_bcast_needs_only_its_root_and_a_wait_any_rank() {
    let root = |r| CallInfo {
        root: Some(r),
        ..barrier()
    };
    let mut j = Job::new(3);
    j.start(1, "MPI_Bcast", root(0));
    j.start(2, "MPI_Bcast", root(0));
    assert_eq!(j.find(), None, "the root is computing");
    j.start(0, "MPI_Wait", barrier());
    let d = j.find().expect("the root waits, the others wait for the root");
    let w0 = d.waits.iter().find(|w| w.thread == "rank[0]").expect("rank 0");
    assert_eq!((w0.needs, w0.waits_for.len()), (Needs::Any, 2));
}

#[test]
fn a_deadlock_reads_as_a_sentence() {
    let mut j = Job::new(2);
    j.start(0, "MPI_Recv", recv(1));
    j.start(1, "MPI_Recv", recv(0));
    let d = j.find().expect("a deadlock");
    assert_eq!(
        describe(&d.waits, &d.cycle),
        "rank[0] in MPI_Recv at t.c:7 (main) waits for rank[1]; rank[1] in MPI_Recv at t.c:7 (main) waits for rank[0]; cycle: rank[0] -> rank[1]"
    );
}

#[test]
fn a_rank_still_in_a_scan_waits_for_those_not_in_it() {
    // MBI's CollP2PCallMatching_Recv_Isend_Scan_nok: rank 0 scans, rank 1 first receives
    // what rank 0 sends after the scan. Rank 0 needs no one's data, but MPICH's scan
    // exchanges both ways: it never returns.
    let mut j = Job::new(2);
    j.start(0, "MPI_Scan", barrier());
    j.start(1, "MPI_Recv", recv(0));
    let d = j.find().expect("a deadlock");
    assert_eq!(d.cycle, ["rank[0]", "rank[1]"]);
    assert_eq!(d.waits[0].waits_for, ["rank[1]"]);
}

#[test]
fn collectives_called_in_different_orders_wait_for_each_other() {
    // MBI's CollCallOrder codes: rank 0 calls MPI_Allgather then MPI_Scan, rank 1 the
    // other way round. Each is in its first collective on the world, with another call.
    let mut j = Job::new(2);
    j.start(0, "MPI_Allgather", barrier());
    j.start(1, "MPI_Scan", barrier());
    let d = j.find().expect("a deadlock");
    assert_eq!(d.cycle, ["rank[0]", "rank[1]"]);
    assert_eq!(d.waits[1].waits_for, ["rank[0]"]);
    // The same call on both: one collective, which completes.
    let mut j = Job::new(2);
    j.start(0, "MPI_Allgather", barrier());
    j.start(1, "MPI_Allgather", barrier());
    assert_eq!(j.find(), None);
}

#[test]
fn a_wildcard_forced_onto_a_source_waits_for_that_source_only() {
    // Rank 2's message is on its way, but the receive was forced onto rank 1, which is in
    // a barrier waiting for rank 0.
    let mut j = Job::new(3);
    j.send(2, 0, 0);
    j.start(0, "MPI_Recv", any_source());
    j.start(1, "MPI_Barrier", barrier());
    j.start(2, "MPI_Barrier", barrier());
    assert_eq!(j.find(), None, "rank 2's message can match");
    let id = j.next;
    let recv = j.waits.ranks[0].open.as_ref().map(|o| o.event_id);
    assert!(recv.is_some_and(|r| r < id));
    j.waits.forced(recv.unwrap(), 1, None);
    let d = j.find().expect("forced onto a rank that never sends again");
    assert_eq!(d.waits[0].waits_for, ["rank[1]"]);
    assert_eq!(d.cycle, ["rank[0]", "rank[1]"]);
}

#[test]
fn a_pick_is_refused_when_its_source_cannot_send_before_the_receive_completes() {
    let mut j = Job::new(5);
    j.start(0, "MPI_Recv", any_source());
    // Rank 1 waits for rank 0's message; rank 2 waits for rank 1 (through it, for 0);
    // rank 3 runs; rank 4 has a message for rank 0 on its way, though it waits for 0 too.
    j.start(1, "MPI_Recv", recv(0));
    j.start(2, "MPI_Recv", recv(1));
    j.send(4, 0, 0);
    j.start(4, "MPI_Recv", recv(0));
    let pick = |j: &mut Job, source: i32| j.waits.pick(0, source, None, &mut j.linker);
    let why = pick(&mut j, 1).unwrap_err();
    assert_eq!(
        why,
        "rank[1] cannot send before this receive completes: it is in MPI_Recv at t.c:7 (main), waiting for rank[0]"
    );
    assert!(
        pick(&mut j, 2).unwrap_err().starts_with("rank[2] cannot send"),
        "through rank 1"
    );
    assert_eq!(pick(&mut j, 3), Ok(()), "a running rank may still send");
    assert_eq!(pick(&mut j, 4), Ok(()), "its message is pending");
    assert_eq!(
        pick(&mut j, 9).unwrap_err(),
        "MPI_COMM_WORLD has no rank 9 (its ranks are 0 … 4)"
    );
    assert!(pick(&mut j, 0).unwrap_err().contains("in this receive"));
    // A message with another tag is not the one this receive would take.
    assert!(j.waits.pick(0, 4, Some(3), &mut j.linker).is_err());
    j.start(3, "MPI_Barrier", barrier());
    let why = pick(&mut j, 3).unwrap_err();
    assert!(why.contains("MPI_Barrier"), "{why}");
    j.waits.finished(3);
    assert_eq!(
        pick(&mut j, 3).unwrap_err(),
        "rank[3] has finished: it sends nothing more"
    );
}

#[test]
fn only_a_wildcard_pick_is_judged() {
    // Rank 0 held at a send to rank 1, which waits for it: `match` there is the rank's to
    // refuse (not a wildcard), not a pick that cannot happen.
    let mut j = Job::new(2);
    j.start(0, "MPI_Send", call("MPI_COMM_WORLD", Some(Peer::Rank(1)), 0));
    j.start(1, "MPI_Recv", recv(0));
    assert_eq!(j.waits.pick(0, 1, None, &mut j.linker), Ok(()));
}

#[test]
fn a_matched_probe_waits_as_a_probe_does() {
    let mut j = Job::new(2);
    j.start(0, "MPI_Mprobe", recv(1));
    j.start(1, "MPI_Mprobe", recv(0));
    let d = j.find().expect("two matched probes of each other's messages");
    assert_eq!(d.cycle, ["rank[0]", "rank[1]"]);
    assert_eq!(d.waits[0].call, "MPI_Mprobe");
    // A message on its way: the probe matches it.
    let mut j = Job::new(2);
    j.send(1, 0, 0);
    j.start(1, "MPI_Mprobe", recv(0));
    j.start(0, "MPI_Mprobe", recv(1));
    assert_eq!(j.find(), None);
    // A wildcard one waits for any other rank.
    let mut j = Job::new(3);
    j.start(0, "MPI_Mprobe", any_source());
    j.start(1, "MPI_Recv", recv(0));
    j.start(2, "MPI_Recv", recv(0));
    let d = j.find().expect("nobody sends to rank 0");
    assert_eq!(d.waits[0].needs, Needs::Any);
    assert_eq!(d.waits[0].waits_for, ["rank[1]", "rank[2]"]);
}

#[test]
fn calls_that_only_begin_something_or_are_one_sided_can_go_on() {
    for op in [
        "MPI_Ibarrier",
        "MPI_Iallreduce",
        "MPI_Start",
        "MPI_Startall",
        "MPI_Request_free",
        "MPI_Mrecv",
        "MPI_Imrecv",
        "MPI_Improbe",
        "MPI_Win_fence",
        "MPI_Win_lock",
        "MPI_Win_wait",
        "MPI_Win_free",
        "MPI_Put",
    ] {
        let mut j = Job::new(2);
        j.start(0, op, recv(1));
        j.start(1, "MPI_Recv", recv(0));
        assert_eq!(j.find(), None, "rank 0 in {op} may still send");
    }
}

#[test]
fn a_wait_for_a_nonblocking_barrier_the_others_never_enter_is_a_deadlock() {
    let mut j = Job::new(3);
    j.start(0, "MPI_Ibarrier", barrier());
    j.stop(0, "MPI_Ibarrier");
    j.start(0, "MPI_Wait", CallInfo::default());
    j.start(1, "MPI_Recv", recv(0));
    j.start(2, "MPI_Recv", recv(0));
    let d = j.find().expect("a deadlock");
    let w = &d.waits[0];
    assert_eq!((w.call.as_str(), w.needs), ("MPI_Wait", Needs::Any));
    assert_eq!(w.waits_for, ["rank[1]", "rank[2]"]);
    assert_eq!(d.cycle, ["rank[0]", "rank[1]"]);
    // Not a collective instance: the barrier after it is every rank's first.
    j.stop(0, "MPI_Wait");
    for r in 0..3 {
        j.start(r, "MPI_Barrier", barrier());
    }
    assert_eq!(j.find(), None, "all three are in the same barrier");
}

fn waiting_on(peers: &[Option<i32>]) -> CallInfo {
    CallInfo {
        awaits: Some(
            peers
                .iter()
                .map(|p| racetrack_protocol::Awaited {
                    comm: "MPI_COMM_WORLD".into(),
                    peer: p.map_or(Peer::Special(SpecialPeer::AnySource), Peer::Rank),
                    tag: Tag::Tag(0),
                })
                .collect(),
        ),
        site: Some("t.c:9 (main)".into()),
        ..CallInfo::default()
    }
}

/// MBI's `p2p-any-src-waitall-deadlock2`: rank 0 waits for two wildcard receives, rank 1
/// sent one message and waits for rank 0. The one message completes one receive only.
#[test]
fn a_waitall_on_two_wildcards_with_one_message_waits_for_a_second() {
    let mut j = Job::new(2);
    j.send(1, 0, 0);
    j.start(1, "MPI_Recv", recv(0));
    j.start(0, "MPI_Waitall", waiting_on(&[None, None]));
    let d = j.find().expect("a deadlock");
    assert_eq!(d.cycle, ["rank[0]", "rank[1]"]);
    assert_eq!(
        (d.waits[0].call.as_str(), d.waits[0].waits_for.as_slice()),
        ("MPI_Waitall", &["rank[1]".to_owned()][..])
    );
    // Two messages: both receives complete, then rank 0 sends.
    let mut j = Job::new(2);
    j.send(1, 0, 0);
    j.send(1, 0, 0);
    j.start(1, "MPI_Recv", recv(0));
    j.start(0, "MPI_Waitall", waiting_on(&[None, None]));
    assert_eq!(j.find(), None);
    // Without `awaits` (a request the library did not see made) the old rule holds: a
    // message pending to the rank may be what it waits for.
    let mut j = Job::new(2);
    j.send(1, 0, 0);
    j.start(1, "MPI_Recv", recv(0));
    j.start(0, "MPI_Waitall", barrier());
    assert_eq!(j.find(), None);
}

/// A waitall needs every receive: one from a rank that can still send is not enough when
/// another waits on a rank that cannot; a waitany needs one.
#[test]
fn a_waitall_needs_each_receive_a_waitany_one() {
    // Rank 0 waits on receives from 1 and 2; rank 1 runs, rank 2 waits for rank 0.
    let mut j = Job::new(3);
    j.start(2, "MPI_Recv", recv(0));
    j.start(0, "MPI_Waitall", waiting_on(&[Some(1), Some(2)]));
    let d = j.find().expect("a deadlock");
    assert_eq!(d.cycle, ["rank[0]", "rank[2]"]);
    assert_eq!(d.waits[0].waits_for, ["rank[1]", "rank[2]"]);
    assert_eq!(d.waits.len(), 2, "rank 1 runs");
    // The same as a waitany: rank 1 may send, so rank 0 may go on, and then rank 2.
    let mut j = Job::new(3);
    j.start(2, "MPI_Recv", recv(0));
    j.start(0, "MPI_Waitany", waiting_on(&[Some(1), Some(2)]));
    assert_eq!(j.find(), None);
    // A waitany whose senders both wait for it.
    let mut j = Job::new(3);
    j.start(1, "MPI_Recv", recv(0));
    j.start(2, "MPI_Recv", recv(0));
    j.start(0, "MPI_Waitany", waiting_on(&[Some(1), Some(2)]));
    let d = j.find().expect("a deadlock");
    assert_eq!((d.waits[0].needs, d.waits[0].waits_for.len()), (Needs::Any, 2));
    // A message from rank 2 pending: its receive completes, and so does the waitany.
    j.send(2, 0, 0);
    assert_eq!(j.find(), None);
    // Nothing to wait for (only sends): nobody is needed.
    let mut j = Job::new(2);
    j.start(1, "MPI_Recv", recv(0));
    j.start(0, "MPI_Waitall", waiting_on(&[]));
    assert_eq!(j.find(), None);
}

fn posted_before(c: CallInfo, peers: &[Option<i32>]) -> CallInfo {
    CallInfo {
        posted: waiting_on(peers).awaits,
        ..c
    }
}

/// MBI's `p2p-any-src-wait-deadlock4`: each of two ranks posted a wildcard `MPI_Irecv`,
/// sent to the other, and receives from it: the posted receive took the one message, so
/// the blocking receive waits, and so does the other rank.
#[test]
fn a_posted_receive_takes_the_message_first() {
    let mut j = Job::new(2);
    j.send(0, 1, 0);
    j.send(1, 0, 0);
    j.start(0, "MPI_Recv", posted_before(recv(1), &[None]));
    j.start(1, "MPI_Recv", posted_before(recv(0), &[None]));
    let d = j.find().expect("a deadlock");
    assert_eq!(d.cycle, ["rank[0]", "rank[1]"]);
    // Without `posted` the message looks free for the receive.
    let mut j = Job::new(2);
    j.send(0, 1, 0);
    j.send(1, 0, 0);
    j.start(0, "MPI_Recv", recv(1));
    j.start(1, "MPI_Recv", recv(0));
    assert_eq!(j.find(), None);
    // Two messages for one posted receive: one is left.
    let mut j = Job::new(2);
    j.send(1, 0, 0);
    j.send(1, 0, 0);
    j.start(1, "MPI_Recv", recv(0));
    j.start(0, "MPI_Recv", posted_before(recv(1), &[None]));
    assert_eq!(j.find(), None);
}

/// A posted wildcard with a message from a third rank pending may have taken that one
/// instead: the blocking receive may go on (no alarm on what the events cannot tell).
#[test]
fn a_posted_wildcard_with_another_candidate_leaves_the_message() {
    let mut j = Job::new(3);
    j.send(1, 0, 0);
    j.send(2, 0, 0);
    j.start(1, "MPI_Recv", recv(0));
    j.start(0, "MPI_Recv", posted_before(recv(1), &[None]));
    assert_eq!(j.find(), None);
    // Posted for rank 1 only: it took rank 1's message, and rank 1 waits for rank 0.
    let mut j = Job::new(3);
    j.send(1, 0, 0);
    j.send(2, 0, 0);
    j.start(1, "MPI_Recv", recv(0));
    j.start(0, "MPI_Recv", posted_before(recv(1), &[Some(1)]));
    let d = j.find().expect("a deadlock");
    assert_eq!(d.cycle, ["rank[0]", "rank[1]"]);
}

/// Which receive of a waitall took which message is not told: a wildcard may have taken
/// rank 2's message while the receive from rank 1 took rank 1's, so rank 0 waits only for
/// rank 2, which runs. No alarm.
#[test]
fn a_waitall_is_matched_as_well_as_it_can_be() {
    let mut j = Job::new(3);
    j.send(1, 0, 0);
    j.send(2, 0, 0);
    j.start(1, "MPI_Recv", recv(0));
    j.start(0, "MPI_Waitall", waiting_on(&[None, Some(1), Some(2)]));
    assert_eq!(j.find(), None);
    // Rank 2 waits for rank 0 too: whichever way, one receive is short and its senders
    // all wait for rank 0.
    j.start(2, "MPI_Recv", recv(0));
    assert!(j.find().is_some());
}

/// Two receives posted for rank 1's tag 5 with one such message pending take at most that
/// one: rank 1's tag-6 message is left for a receive of any tag; a posted receive from
/// `MPI_PROC_NULL` takes nothing.
#[test]
fn posted_receives_take_distinct_messages() {
    let any_tag = CallInfo {
        tag: Some(Tag::Any(racetrack_protocol::AnyTag::AnyTag)),
        ..recv(1)
    };
    let posted_tag5 = |c: CallInfo| CallInfo {
        posted: Some(
            (0..2)
                .map(|_| racetrack_protocol::Awaited {
                    comm: "MPI_COMM_WORLD".into(),
                    peer: Peer::Rank(1),
                    tag: Tag::Tag(5),
                })
                .collect(),
        ),
        ..c
    };
    let mut j = Job::new(2);
    j.send(1, 0, 5);
    j.send(1, 0, 6);
    j.start(1, "MPI_Recv", recv(0));
    j.start(0, "MPI_Recv", posted_tag5(any_tag.clone()));
    assert_eq!(j.find(), None);
    // Only the tag-5 message: both posted receives want it, one takes it.
    let mut j = Job::new(2);
    j.send(1, 0, 5);
    j.start(1, "MPI_Recv", recv(0));
    j.start(0, "MPI_Recv", posted_tag5(any_tag));
    assert!(j.find().is_some());
    // A posted receive from MPI_PROC_NULL.
    let mut j = Job::new(2);
    j.send(1, 0, 0);
    j.start(1, "MPI_Recv", recv(0));
    let proc_null = CallInfo {
        posted: Some(vec![racetrack_protocol::Awaited {
            comm: "MPI_COMM_WORLD".into(),
            peer: Peer::Special(SpecialPeer::ProcNull),
            tag: Tag::Tag(0),
        }]),
        ..recv(1)
    };
    j.start(0, "MPI_Recv", proc_null);
    assert_eq!(j.find(), None);
}
