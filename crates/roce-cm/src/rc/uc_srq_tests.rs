//! UC QPs and SRQs on two engines back to back (tests.rs's `Pair`): one test per rule of
//! spec/rc.md's UC and SRQ sections, and a proptest loss sweep for UC.

use std::time::Duration;

use roce_wire::bth::Opcode;

use super::tests::{fill, mr, sge, wr, Faults, Pair, A, B, QA, QB};
use super::*;

fn uc() -> QpInit {
    QpInit { service: TransportService::Uc, ..QpInit::default() }
}

/// A UC pair, each side with its own receive queue.
fn uc_pair(mtu: u32, seed: u64) -> Pair {
    Pair::build(mtu, seed, 0x100, 0x200, |_, _| uc())
}

fn recv(wr_id: u64, m: &MrInfo, off: u64, len: u32) -> RecvWr {
    RecvWr { wr_id, sg_list: vec![sge(m, off, len)] }
}

#[test]
fn uc_send_and_write_with_and_without_immediate_use_uc_opcodes_and_no_acks() {
    let mut p = uc_pair(256, 1);
    let la = mr(&mut p.a, 8192);
    fill(&mut p.a, &la, 5);
    let rb = mr(&mut p.b, 8192);
    for i in 0..3 {
        p.b.post_recv(QB, recv(i, &rb, 4096 + i * 1024, 1024)).unwrap();
    }
    p.a.post_send(p.now, QA, wr(1, SendOp::Send, vec![sge(&la, 0, 600)])).unwrap();
    p.a.post_send(p.now, QA, wr(2, SendOp::SendWithImm(0x77), vec![sge(&la, 600, 100)])).unwrap();
    let w = SendOp::Write { remote_addr: rb.addr, rkey: rb.rkey };
    p.a.post_send(p.now, QA, wr(3, w, vec![sge(&la, 1000, 700)])).unwrap();
    let wi = SendOp::WriteWithImm { remote_addr: rb.addr + 2000, rkey: rb.rkey, imm: 9 };
    p.a.post_send(p.now, QA, wr(4, wi, vec![sge(&la, 2000, 300)])).unwrap();
    p.run(Duration::from_secs(1));
    use Opcode::*;
    assert_eq!(
        p.sent_ab,
        [
            UcSendFirst,
            UcSendMiddle,
            UcSendLast,
            UcSendOnlyWithImmediate,
            UcRdmaWriteFirst,
            UcRdmaWriteMiddle,
            UcRdmaWriteLast,
            UcRdmaWriteFirst,
            UcRdmaWriteLastWithImmediate
        ]
    );
    assert!(p.sent_ba.is_empty(), "UC sends no ACK: {:?}", p.sent_ba);
    let wa = Pair::wcs(&mut p.a);
    let got: Vec<_> = wa.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect();
    assert_eq!(
        got,
        [
            (1, WcStatus::Success, WcOpcode::Send),
            (2, WcStatus::Success, WcOpcode::Send),
            (3, WcStatus::Success, WcOpcode::RdmaWrite),
            (4, WcStatus::Success, WcOpcode::RdmaWrite)
        ]
    );
    let wb = Pair::wcs(&mut p.b);
    let got: Vec<_> = wb.iter().map(|w| (w.wr_id, w.opcode, w.byte_len, w.imm_data)).collect();
    assert_eq!(
        got,
        [
            (0, WcOpcode::Recv, 600, None),
            (1, WcOpcode::Recv, 100, Some(0x77)),
            (2, WcOpcode::RecvRdmaWithImm, 300, Some(9))
        ]
    );
    let (a, b) = (p.a.mr(la.lkey).unwrap(), p.b.mr(rb.lkey).unwrap());
    assert_eq!(b[4096..4696], a[..600]);
    assert_eq!(b[5120..5220], a[600..700]);
    assert_eq!(b[..700], a[1000..1700]);
    assert_eq!(b[2000..2300], a[2000..2300]);
}

#[test]
fn uc_requester_completes_once_sent_even_on_a_dead_link_and_keeps_no_timer() {
    let mut p = uc_pair(1024, 2);
    p.faults.loss = 1.0;
    let la = mr(&mut p.a, 4096);
    for i in 0..5 {
        p.a.post_send(p.now, QA, wr(i, SendOp::Send, vec![sge(&la, 0, 3000)])).unwrap();
        assert_eq!(p.a.poll_timeout(), None);
    }
    p.run(Duration::from_secs(1));
    let wa = Pair::wcs(&mut p.a);
    assert_eq!(wa.len(), 5);
    assert!(wa.iter().all(|w| w.status == WcStatus::Success));
    assert_eq!(p.a.counters().retransmitted_pkts, 0);
    assert_eq!(p.sent_ab.len(), 15, "each packet sent once, no retry");
    assert_eq!(p.b.counters().rcvd_pkts, 0);
}

/// Three 3-packet SENDs; the second loses its MIDDLE. B delivers the first and the third
/// whole (the third in the receive the second had begun to fill), counts the abandoned
/// message and the LAST it dropped.
#[test]
fn uc_gap_drops_the_partial_message_and_the_next_first_is_accepted() {
    for lost in [Opcode::UcSendMiddle, Opcode::UcSendLast] {
        let mut p = uc_pair(256, 3);
        let la = mr(&mut p.a, 4096);
        fill(&mut p.a, &la, 7);
        let rb = mr(&mut p.b, 4096);
        for i in 0..3 {
            p.b.post_recv(QB, recv(i, &rb, i * 1024, 1024)).unwrap();
        }
        p.a.post_send(p.now, QA, wr(0, SendOp::Send, vec![sge(&la, 0, 700)])).unwrap();
        p.run(Duration::from_secs(1));
        // The second message loses its MIDDLE (or its LAST); the third is intact.
        p.drop_next.push((lost, 1));
        for i in 1..3 {
            p.a.post_send(p.now, QA, wr(i, SendOp::Send, vec![sge(&la, i * 700, 700)])).unwrap();
        }
        p.run(Duration::from_secs(1));
        assert_eq!(p.lost_ab.len(), 1, "{lost:?}");
        assert_eq!(Pair::wcs(&mut p.a).len(), 3);
        let wb = Pair::wcs(&mut p.b);
        let got: Vec<_> = wb.iter().map(|w| (w.wr_id, w.status, w.byte_len)).collect();
        assert_eq!(got, [(0, WcStatus::Success, 700), (1, WcStatus::Success, 700)], "{lost:?}");
        let (a, b) = (p.a.mr(la.lkey).unwrap(), p.b.mr(rb.lkey).unwrap());
        assert_eq!(b[..700], a[..700]);
        assert_eq!(b[1024..1724], a[1400..2100], "the third message, whole, in the second receive");
        let c = p.b.counters();
        assert_eq!(c.uc_partial_discarded, 1);
        if lost == Opcode::UcSendMiddle {
            // FIRST placed then abandoned; the LAST dropped for the gap
            assert_eq!((c.uc_partial_discarded_pkts, c.uc_drop_psn_gap), (1, 1));
        } else {
            // FIRST and MIDDLE placed; the next FIRST (a gap, but a start) is taken
            assert_eq!((c.uc_partial_discarded_pkts, c.uc_drop_psn_gap), (2, 0));
        }
    }
}

#[test]
fn uc_write_with_immediate_consumes_a_receive_and_without_one_is_dropped_and_counted() {
    let mut p = uc_pair(1024, 4);
    let la = mr(&mut p.a, 4096);
    fill(&mut p.a, &la, 1);
    let rb = mr(&mut p.b, 4096);
    let wi = |imm| SendOp::WriteWithImm { remote_addr: rb.addr + 100, rkey: rb.rkey, imm };
    p.a.post_send(p.now, QA, wr(1, wi(1), vec![sge(&la, 0, 50)])).unwrap(); // no receive yet
    p.run(Duration::from_secs(1));
    assert_eq!(p.b.counters().uc_drop_no_recv, 1);
    assert!(Pair::wcs(&mut p.b).is_empty());
    p.b.post_recv(QB, RecvWr { wr_id: 8, sg_list: vec![] }).unwrap();
    p.a.post_send(p.now, QA, wr(2, wi(2), vec![sge(&la, 0, 50)])).unwrap();
    p.run(Duration::from_secs(1));
    let wb = Pair::wcs(&mut p.b);
    assert_eq!(
        (wb[0].wr_id, wb[0].opcode, wb[0].byte_len, wb[0].imm_data),
        (8, WcOpcode::RecvRdmaWithImm, 50, Some(2))
    );
    assert_eq!(p.b.mr(rb.lkey).unwrap()[100..150], p.a.mr(la.lkey).unwrap()[..50]);
    assert_eq!(Pair::wcs(&mut p.a).iter().filter(|w| w.status == WcStatus::Success).count(), 2);
}

#[test]
fn uc_posting_read_or_atomic_is_einval_and_rc_opcodes_are_dropped() {
    let mut p = uc_pair(1024, 5);
    let la = mr(&mut p.a, 64);
    let read = SendOp::Read { remote_addr: 0, rkey: 0 };
    assert_eq!(p.a.post_send(p.now, QA, wr(1, read, vec![sge(&la, 0, 8)])), Err(Errno::EINVAL));
    let fa = SendOp::FetchAdd { remote_addr: 0, rkey: 0, add: 1 };
    assert_eq!(p.a.post_send(p.now, QA, wr(2, fa, vec![sge(&la, 0, 8)])), Err(Errno::EINVAL));
    let cs = SendOp::CompareSwap { remote_addr: 0, rkey: 0, compare: 0, swap: 1 };
    assert_eq!(p.a.post_send(p.now, QA, wr(3, cs, vec![sge(&la, 0, 8)])), Err(Errno::EINVAL));
    assert!(Pair::wcs(&mut p.a).is_empty());
    // An RC opcode (here an RDMA READ request) for a UC QP: rxe check_type_state drops it.
    let b = roce_wire::bth::Repr::new(Opcode::RcRdmaReadRequest, QB, 0x200);
    p.b.handle_packet(p.now, A, &b, &ExtHeaders::default(), &[]);
    assert_eq!(p.b.counters().drop_wrong_transport, 1);
    assert!(p.b.poll_transmit(p.now).is_none());
    // ...and a UC opcode for an RC QP.
    let mut q = Pair::new(1024, 6);
    let b = roce_wire::bth::Repr::new(Opcode::UcSendOnly, QB, 0x20);
    q.b.handle_packet(q.now, A, &b, &ExtHeaders::default(), &[]);
    assert_eq!(q.b.counters().drop_wrong_transport, 1);
    assert_eq!(q.b.qp_state(QB), Some(QpState::Rts));
}

#[test]
fn uc_send_longer_than_its_receive_is_loc_len_err_and_err_without_a_nak() {
    let mut p = uc_pair(256, 8);
    let la = mr(&mut p.a, 4096);
    let rb = mr(&mut p.b, 4096);
    p.b.post_recv(QB, recv(1, &rb, 0, 300)).unwrap();
    p.b.post_recv(QB, recv(2, &rb, 1024, 300)).unwrap();
    p.a.post_send(p.now, QA, wr(1, SendOp::Send, vec![sge(&la, 0, 600)])).unwrap();
    p.run(Duration::from_secs(1));
    assert!(p.sent_ba.is_empty());
    let wb = Pair::wcs(&mut p.b);
    let got: Vec<_> = wb.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(got, [(1, WcStatus::LocLenErr), (2, WcStatus::WrFlushErr)]);
    assert_eq!(p.b.qp_state(QB), Some(QpState::Err));
    let c = p.b.counters();
    assert_eq!((c.uc_drop_invalid, c.uc_partial_discarded, c.uc_partial_discarded_pkts), (1, 1, 1));
    assert_eq!(Pair::wcs(&mut p.a)[0].status, WcStatus::Success, "the sender never knows");
}

#[test]
fn uc_write_without_remote_write_access_is_dropped_not_naked() {
    let mut p = Pair::build(1024, 7, 1, 2, |_, _| uc());
    let mut at = p.b.query_qp(QB).unwrap();
    at.access = Access::LOCAL_WRITE;
    p.b.modify_qp(p.now, QB, QpState::Reset, &at).unwrap();
    for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
        p.b.modify_qp(p.now, QB, s, &at).unwrap();
    }
    let la = mr(&mut p.a, 64);
    let rb = mr(&mut p.b, 64);
    p.a.post_send(p.now, QA, wr(1, SendOp::Write { remote_addr: rb.addr, rkey: rb.rkey }, vec![sge(&la, 0, 8)]))
        .unwrap();
    p.run(Duration::from_secs(1));
    assert_eq!(p.b.counters().uc_drop_invalid, 1);
    assert!(p.sent_ba.is_empty());
    assert_eq!(p.b.qp_state(QB), Some(QpState::Rts), "UC errors drop, never move the QP to ERR");
}

/// spec/uc-qp-states.csv is the UC transition table with the attributes each transition
/// takes: every pair of states is tried on a real UC QP, and the RC-only attributes
/// (timeout, retry and RNR counts, RNR timer, RD/atomic depths) never stick.
#[test]
fn uc_transition_table_and_attributes_are_the_spec_csv() {
    let csv = include_str!("../../../../spec/uc-qp-states.csv");
    let all = [QpState::Reset, QpState::Init, QpState::Rtr, QpState::Rts, QpState::Sqd, QpState::Sqe, QpState::Err];
    let by_name = |n: &str| all.iter().copied().find(|s| s.name() == n);
    let mut want = std::collections::BTreeMap::new();
    for line in csv.lines().skip(1).filter(|l| !l.is_empty()) {
        let f: Vec<&str> = line.split(',').collect();
        let to = by_name(f[1]).unwrap_or_else(|| panic!("{line}"));
        for s in all {
            if f[0] == "*" || by_name(f[0]) == Some(s) {
                want.insert((s, to), f[3].split('|').filter(|x| !x.is_empty()).collect::<Vec<_>>());
            }
        }
    }
    let path = [QpState::Reset, QpState::Init, QpState::Rtr, QpState::Rts, QpState::Sqd];
    let now = Instant::ZERO;
    let base = tests::attr(B, QB, 1024, 0x10, 0x20);
    // Every field set to something else than before, RC-only ones non-zero.
    let other = QpAttr {
        path_mtu: 2048,
        dest_qpn: 0x99,
        rq_psn: 0x777,
        sq_psn: 0x555,
        timeout: 20,
        retry_cnt: 6,
        rnr_retry: 5,
        min_rnr_timer: 9,
        max_rd_atomic: 3,
        max_dest_rd_atomic: 3,
        access: Access::LOCAL_WRITE,
        pkey: 0x8001,
        dest: A,
        ..base
    };
    for from in all.iter().copied().filter(|s| *s != QpState::Sqe) {
        for to in all {
            let mut rc = Rc::new(1);
            rc.create_qp_with(5, uc()).unwrap();
            if from == QpState::Err {
                rc.modify_qp(now, 5, QpState::Err, &base).unwrap();
            } else {
                for s in path.iter().skip(1).take_while(|s| **s <= from) {
                    rc.modify_qp(now, 5, *s, &base).unwrap();
                }
            }
            assert_eq!(rc.qp_state(5), Some(from));
            let before = rc.query_qp(5).unwrap();
            let r = rc.modify_qp(now, 5, to, &other);
            let Some(applies) = want.get(&(from, to)) else {
                assert_eq!(r, Err(Errno::EINVAL), "{} -> {}", from.name(), to.name());
                continue;
            };
            assert_eq!(r, Ok(()), "{} -> {}", from.name(), to.name());
            let q = rc.query_qp(5).unwrap();
            let rc_only = (q.timeout, q.retry_cnt, q.rnr_retry, q.min_rnr_timer, q.max_rd_atomic, q.max_dest_rd_atomic);
            assert_eq!(rc_only, (0, 0, 0, 0, 0, 0), "{} -> {}", from.name(), to.name());
            if to == QpState::Reset {
                continue;
            }
            let fields: [(&str, bool, bool); 7] = [
                ("path_mtu", q.path_mtu == other.path_mtu, q.path_mtu == before.path_mtu),
                ("dest_qpn", q.dest_qpn == other.dest_qpn, q.dest_qpn == before.dest_qpn),
                ("rq_psn", q.rq_psn == other.rq_psn, q.rq_psn == before.rq_psn),
                ("sq_psn", q.sq_psn == other.sq_psn, q.sq_psn == before.sq_psn),
                ("access", q.access == other.access, q.access == before.access),
                ("pkey", q.pkey == other.pkey, q.pkey == before.pkey),
                ("dest", q.dest == other.dest, q.dest == before.dest),
            ];
            for (name, new, old) in fields {
                let applied = applies.contains(&name);
                assert!(if applied { new } else { old }, "{} -> {}: {name} applied={applied}", from.name(), to.name());
            }
        }
    }
}

// ---- SRQ

/// Engines `a` (RC or UC QPs without an SRQ) and `b` (the same number of QPs on one SRQ),
/// connected pairwise by hand, with a lossless shuttle between them.
struct Shared {
    a: Rc,
    b: Rc,
    srq: u32,
    qpns: Vec<(u32, u32)>,
    now: Instant,
}

impl Shared {
    fn new(service: TransportService, n: u32, max_wr: u32, limit: u32) -> Shared {
        let (mut a, mut b) = (Rc::new(11), Rc::new(12));
        let srq = b.create_srq(max_wr, 1, limit).unwrap();
        let now = Instant::ZERO;
        let mut qpns = Vec::new();
        for i in 0..n {
            let (qa, qb) = (0x100 + i, 0x200 + i);
            a.create_qp_with(qa, QpInit { service, ..QpInit::default() }).unwrap();
            b.create_qp_with(qb, QpInit { service, srq: Some(srq), ..QpInit::default() }).unwrap();
            let at = tests::attr(B, qb, 1024, 0x10, 0x20);
            let bt = tests::attr(A, qa, 1024, 0x20, 0x10);
            for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
                a.modify_qp(now, qa, s, &at).unwrap();
                b.modify_qp(now, qb, s, &bt).unwrap();
            }
            qpns.push((qa, qb));
        }
        Shared { a, b, srq, qpns, now }
    }

    /// Move packets both ways (and run timers) until nothing is left, within `limit`.
    fn run(&mut self, limit: Duration) {
        let end = self.now + limit;
        loop {
            let mut moved = false;
            while let Some(p) = self.a.poll_transmit(self.now) {
                self.b.handle_packet(self.now, A, &p.bth, &p.ext, &p.payload);
                moved = true;
            }
            while let Some(p) = self.b.poll_transmit(self.now) {
                self.a.handle_packet(self.now, B, &p.bth, &p.ext, &p.payload);
                moved = true;
            }
            if moved {
                continue;
            }
            let next = [self.a.poll_timeout(), self.b.poll_timeout()].into_iter().flatten().min();
            match next {
                Some(t) if t <= end => {
                    self.now = t;
                    self.a.handle_timeout(t);
                    self.b.handle_timeout(t);
                }
                _ => return,
            }
        }
    }

    fn send(&mut self, i: usize, wr_id: u64, lkey_sge: Sge) {
        let qa = self.qpns[i].0;
        self.a.post_send(self.now, qa, wr(wr_id, SendOp::SendWithImm(wr_id as u32), vec![lkey_sge])).unwrap();
    }
}

#[test]
fn one_srq_feeds_several_qps_rc_and_uc() {
    for service in [TransportService::Rc, TransportService::Uc] {
        let mut s = Shared::new(service, 3, 16, 0);
        let la = mr(&mut s.a, 4096);
        let rb = mr(&mut s.b, 16 * 256);
        for k in 0..6 {
            s.b.post_srq_recv(s.srq, recv(100 + k, &rb, k * 256, 256)).unwrap();
        }
        assert_eq!(s.b.post_recv(s.qpns[0].1, recv(0, &rb, 0, 8)), Err(Errno::EINVAL), "a QP on an SRQ");
        for k in 0..6u64 {
            s.send((k % 3) as usize, k, sge(&la, k * 10, 10));
            s.run(Duration::from_secs(1));
        }
        let wb = Pair::wcs(&mut s.b);
        let got: Vec<_> = wb.iter().map(|w| (w.wr_id, w.qp_num, w.imm_data)).collect();
        let want: Vec<_> = (0..6u64).map(|k| (100 + k, s.qpns[(k % 3) as usize].1, Some(k as u32))).collect();
        assert_eq!(got, want, "{service:?}: receives taken in posting order by whichever QP is sent to");
        assert_eq!(s.b.srq_count(s.srq), Some(0));
        assert_eq!(s.b.counters().srq_recv_taken, 6);
    }
}

#[test]
fn limit_event_fires_once_then_rearms() {
    let mut s = Shared::new(TransportService::Rc, 2, 16, 4);
    assert_eq!(s.b.query_srq(s.srq).unwrap().srq_limit, 4, "armed at creation as rxe_srq_from_init does");
    let la = mr(&mut s.a, 64);
    let rb = mr(&mut s.b, 64);
    for k in 0..8 {
        s.b.post_srq_recv(s.srq, recv(k, &rb, 0, 64)).unwrap();
    }
    let mut events_after = Vec::new();
    for k in 0..7u64 {
        s.send((k % 2) as usize, k, sge(&la, 0, 4));
        s.run(Duration::from_secs(1));
        events_after.push(std::iter::from_fn(|| s.b.poll_async_event()).collect::<Vec<_>>());
    }
    // 8 posted: after the 5th receive is taken 3 are left (< 4): one event, then disarmed.
    for (k, ev) in events_after.iter().enumerate() {
        let want = if k == 4 { vec![AsyncEvent::SrqLimitReached(s.srq)] } else { vec![] };
        assert_eq!(*ev, want, "after message {k}");
    }
    assert_eq!(s.b.query_srq(s.srq).unwrap().srq_limit, 0, "disarmed");
    // One left; re-armed at 3 with 1 + 4 posted = 5: fires when fewer than 3 remain.
    assert_eq!(s.b.modify_srq(s.srq, 17), Err(Errno::EINVAL));
    s.b.modify_srq(s.srq, 3).unwrap();
    for k in 0..4 {
        s.b.post_srq_recv(s.srq, recv(10 + k, &rb, 0, 64)).unwrap();
    }
    let mut fired = Vec::new();
    for k in 0..5u64 {
        s.send(0, 20 + k, sge(&la, 0, 4));
        s.run(Duration::from_secs(1));
        fired.push(std::iter::from_fn(|| s.b.poll_async_event()).count());
    }
    assert_eq!(fired, [0, 0, 1, 0, 0]);
    assert_eq!(Pair::wcs(&mut s.b).len(), 12);
}

#[test]
fn empty_srq_is_rnr_nak_for_rc_and_a_counted_drop_for_uc() {
    let mut s = Shared::new(TransportService::Rc, 1, 8, 0);
    let la = mr(&mut s.a, 64);
    let rb = mr(&mut s.b, 64);
    s.send(0, 1, sge(&la, 0, 16));
    s.run(Duration::from_millis(1));
    assert!(s.b.counters().send_rnr_err >= 1);
    assert_eq!(s.a.counters().rcvd_rnr_err, s.b.counters().send_rnr_err);
    assert!(Pair::wcs(&mut s.a).is_empty(), "waiting on RNR");
    s.b.post_srq_recv(s.srq, recv(5, &rb, 0, 64)).unwrap();
    s.run(Duration::from_secs(1));
    assert_eq!(Pair::wcs(&mut s.a)[0].status, WcStatus::Success);
    assert_eq!(Pair::wcs(&mut s.b)[0].wr_id, 5);

    let mut u = Shared::new(TransportService::Uc, 1, 8, 0);
    let la = mr(&mut u.a, 64);
    u.send(0, 1, sge(&la, 0, 16));
    u.run(Duration::from_secs(1));
    assert_eq!(u.b.counters().uc_drop_no_recv, 1);
    assert_eq!(u.b.counters().send_rnr_err, 0);
    assert_eq!(Pair::wcs(&mut u.a)[0].status, WcStatus::Success, "UC completes once sent");
}

#[test]
fn destroy_srq_is_ebusy_while_a_qp_uses_it() {
    let mut rc = Rc::new(1);
    assert_eq!(rc.create_srq(0, 1, 0), Err(Errno::EINVAL));
    assert_eq!(rc.create_srq(8, 28, 0), Err(Errno::EINVAL));
    assert_eq!(rc.create_srq(8, 1, 9), Err(Errno::EINVAL));
    let srq = rc.create_srq(2, 1, 0).unwrap();
    assert_eq!(rc.create_qp_with(5, QpInit { srq: Some(srq + 1), ..QpInit::default() }), Err(Errno::EINVAL));
    rc.create_qp_with(5, QpInit { srq: Some(srq), ..QpInit::default() }).unwrap();
    rc.create_qp_with(6, QpInit { service: TransportService::Uc, srq: Some(srq), ..QpInit::default() }).unwrap();
    let w = RecvWr { wr_id: 1, sg_list: vec![] };
    rc.post_srq_recv(srq, w.clone()).unwrap();
    rc.post_srq_recv(srq, w.clone()).unwrap();
    assert_eq!(rc.post_srq_recv(srq, w.clone()), Err(Errno::ENOMEM));
    let two = RecvWr { wr_id: 1, sg_list: vec![Sge { addr: 0, length: 0, lkey: 0 }; 2] };
    assert_eq!(rc.post_srq_recv(srq, two), Err(Errno::EINVAL), "more SGEs than max_sge");
    assert_eq!(rc.destroy_srq(srq), Err(Errno::EBUSY));
    rc.destroy_qp(5).unwrap();
    assert_eq!(rc.destroy_srq(srq), Err(Errno::EBUSY));
    rc.destroy_qp(6).unwrap();
    rc.destroy_srq(srq).unwrap();
    assert_eq!(rc.destroy_srq(srq), Err(Errno::EINVAL));
    assert_eq!(rc.query_srq(srq), None);
}

/// `ibv_modify_srq` with IBV_SRQ_MAX_WR resizes as rxe does: the receives posted stay; a
/// size below them, below the armed limit, 0 or past the maximum is EINVAL.
#[test]
fn resize_srq_keeps_the_posted_receives() {
    let mut rc = Rc::new(1);
    let srq = rc.create_srq(2, 1, 0).unwrap();
    let w = RecvWr { wr_id: 1, sg_list: vec![] };
    rc.post_srq_recv(srq, w.clone()).unwrap();
    rc.post_srq_recv(srq, w.clone()).unwrap();
    assert_eq!(rc.post_srq_recv(srq, w.clone()), Err(Errno::ENOMEM));
    rc.resize_srq(srq, 4).unwrap();
    rc.post_srq_recv(srq, w.clone()).unwrap();
    assert_eq!(rc.srq_count(srq), Some(3));
    assert_eq!(rc.query_srq(srq).map(|a| a.max_wr), Some(4));
    assert_eq!(rc.resize_srq(srq, 2), Err(Errno::EINVAL), "below the 3 posted");
    assert_eq!(rc.resize_srq(srq, 0), Err(Errno::EINVAL));
    assert_eq!(rc.resize_srq(srq, srq::MAX_SRQ_WR + 1), Err(Errno::EINVAL));
    rc.modify_srq(srq, 4).unwrap();
    assert_eq!(rc.resize_srq(srq, 3), Err(Errno::EINVAL), "below the armed limit");
    assert_eq!(rc.resize_srq(srq + 1, 8), Err(Errno::EINVAL), "no such SRQ");
    assert_eq!(rc.srq_count(srq), Some(3), "a refused resize keeps every receive");
}

/// UC on an SRQ: a message cut by a gap had taken an SRQ receive, which cannot go back:
/// it completes with REM_INV_REQ_ERR (rxe class E); the next message takes the next one.
#[test]
fn uc_gap_on_an_srq_completes_the_taken_receive_in_error() {
    let mut p = Pair::build(256, 9, 1, 2, |rc, is_b| {
        let srq = is_b.then(|| rc.create_srq(8, 1, 0).unwrap());
        QpInit { srq, ..uc() }
    });
    let rb = mr(&mut p.b, 4096);
    let srq = p.b.qp_init(QB).unwrap().srq.unwrap();
    for k in 0..3 {
        p.b.post_srq_recv(srq, recv(k, &rb, k * 1024, 1024)).unwrap();
    }
    let la = mr(&mut p.a, 4096);
    p.drop_next.push((Opcode::UcSendMiddle, 1));
    for k in 0..2 {
        p.a.post_send(p.now, QA, wr(k, SendOp::Send, vec![sge(&la, 0, 700)])).unwrap();
    }
    p.run(Duration::from_secs(1));
    let wb = Pair::wcs(&mut p.b);
    let got: Vec<_> = wb.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(got, [(0, WcStatus::RemInvReqErr), (1, WcStatus::Success)]);
    assert_eq!(p.b.srq_count(srq), Some(1));
}

// ---- the loss sweep

/// `n` SENDs with immediate (the message number) of `lens` bytes through a UC pair whose
/// wire loses packets; every receive posted up front. What B delivers is whole, in order,
/// byte-identical; a message is delivered exactly when none of its packets was lost; every
/// packet B received is in a delivered message or in one of the UC counters. A last, empty
/// message on a clean wire closes whatever message the losses left open at B.
fn uc_lossy_run(seed: u64, mtu: u32, faults: Faults, lens: &[u32]) -> Result<(), String> {
    let lens: Vec<u32> = lens.iter().copied().chain([0]).collect();
    let closing = lens.len() - 1;
    let mut p = Pair::build(mtu, seed, 0xff_fff0, 0x10, |_, _| uc()); // PSNs wrap
    p.faults = faults;
    let la = mr(&mut p.a, 1 << 16);
    fill(&mut p.a, &la, seed as u8);
    let rb = mr(&mut p.b, 1 << 16);
    let slot = 4096u64;
    for k in 0..lens.len() as u64 {
        p.b.post_recv(QB, recv(k, &rb, k * slot, slot as u32)).unwrap();
    }
    let mut first_psn = Vec::new();
    let mut psn_at = 0xff_fff0u32;
    for (k, &len) in lens.iter().enumerate() {
        let npkts = len.div_ceil(mtu).max(1);
        first_psn.push((psn_at, npkts));
        psn_at = psn::add(psn_at, npkts);
        let off = (k as u64 * 997) % 30000;
        let w = wr(k as u64, SendOp::SendWithImm(k as u32), vec![sge(&la, off, len)]);
        if k == closing {
            p.run(Duration::from_secs(1));
            p.faults = Faults::default();
        }
        p.a.post_send(p.now, QA, w).unwrap();
    }
    p.run(Duration::from_secs(1));
    let wa = Pair::wcs(&mut p.a);
    if wa.len() != lens.len() || wa.iter().any(|w| w.status != WcStatus::Success) {
        return Err(format!("seed {seed}: requester {wa:?}"));
    }
    let lost_in = |k: usize| {
        let (f, n) = first_psn[k];
        p.lost_ab.iter().any(|&l| psn::ge(l, f) && psn::lt(l, psn::add(f, n)))
    };
    let wb = Pair::wcs(&mut p.b);
    let mut last = None;
    let mut delivered_pkts = 0u64;
    for (i, w) in wb.iter().enumerate() {
        let k = w.imm_data.ok_or(format!("seed {seed}: {w:?}"))? as usize;
        if w.status != WcStatus::Success || w.wr_id != i as u64 {
            return Err(format!("seed {seed}: completion {i}: {w:?}"));
        }
        let in_order_wire = faults.duplicate == 0.0 && faults.reorder == 0.0;
        if in_order_wire && last.is_some_and(|l| l >= k) {
            return Err(format!("seed {seed}: message {k} after {last:?}"));
        }
        last = Some(k);
        let off = ((k as u64 * 997) % 30000) as usize;
        let len = lens[k] as usize;
        let at = i * slot as usize;
        if w.byte_len as usize != len
            || p.b.mr(rb.lkey).unwrap()[at..at + len] != p.a.mr(la.lkey).unwrap()[off..off + len]
        {
            return Err(format!("seed {seed}: message {k} not whole"));
        }
        delivered_pkts += u64::from(first_psn[k].1);
    }
    if faults.duplicate == 0.0 && faults.reorder == 0.0 {
        let delivered: Vec<usize> = wb.iter().map(|w| w.imm_data.unwrap() as usize).collect();
        let intact: Vec<usize> = (0..lens.len()).filter(|&k| !lost_in(k)).collect();
        if delivered != intact {
            return Err(format!("seed {seed}: delivered {delivered:?}, intact on the wire {intact:?}"));
        }
    }
    let c = p.b.counters();
    let accounted =
        delivered_pkts + c.uc_partial_discarded_pkts + c.uc_drop_psn_gap + c.uc_drop_no_recv + c.uc_drop_invalid;
    if accounted != c.rcvd_pkts {
        return Err(format!("seed {seed}: {} packets received, {accounted} accounted: {c:?}", c.rcvd_pkts));
    }
    let sent = p.sent_ab.len() as u64;
    if faults.duplicate == 0.0 && sent != c.rcvd_pkts + p.lost_ab.len() as u64 {
        return Err(format!("seed {seed}: {sent} sent, {} received, {} lost", c.rcvd_pkts, p.lost_ab.len()));
    }
    Ok(())
}

#[test]
fn uc_thousand_seeds_at_up_to_thirty_percent_loss() {
    let mut delivered_some = 0;
    for seed in 0..1000u64 {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let lens: Vec<u32> = (0..8)
            .map(|_| {
                s = crate::ctx::splitmix(s);
                (s >> 20) as u32 % 3000
            })
            .collect();
        let loss = (seed % 4) as f64 * 0.1;
        uc_lossy_run(seed, 256 << (seed % 3), Faults { loss, ..Faults::default() }, &lens).unwrap();
        delivered_some += 1;
    }
    assert_eq!(delivered_some, 1000);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 128, ..Default::default() })]
    /// Loss, duplication and reordering: whatever B delivers is whole (in order when the
    /// wire keeps order: under duplication or reordering UC, as rxe, may deliver a stale
    /// FIRST/ONLY), and every packet it received is accounted for.
    #[test]
    fn uc_messages_are_whole_or_absent(
        seed in 0u64..1_000_000,
        lens in proptest::collection::vec(0u32..3000, 1..12),
        loss in 0.0f64..0.3,
        dup in 0.0f64..0.1,
        reorder in 0.0f64..0.1,
    ) {
        let r = uc_lossy_run(seed, 256 << (seed % 3), Faults { loss, duplicate: dup, reorder }, &lens);
        proptest::prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]
    /// Hostile UC packets (any UC opcode, a PSN near the expected one, random extension
    /// headers and payload) into a UC QP on an SRQ never panic, never make it send, never
    /// move it out of RTS; each is placed or dropped and counted.
    #[test]
    fn hostile_uc_packets_never_panic(
        pkts in proptest::collection::vec(
            (0x20u8..0x2c, -3i32..3, proptest::collection::vec(proptest::prelude::any::<u8>(), 28..60), 0usize..1100),
            1..40,
        ),
    ) {
        let mut p = Pair::build(256, 3, 1, 2, |rc, is_b| {
            let srq = is_b.then(|| rc.create_srq(8, 1, 2).unwrap());
            QpInit { srq, ..uc() }
        });
        let rb = mr(&mut p.b, 4096);
        let srq = p.b.qp_init(QB).unwrap().srq.unwrap();
        for k in 0..4 {
            p.b.post_srq_recv(srq, recv(k, &rb, k * 1024, 1024)).unwrap();
        }
        for (op, dpsn, ext_bytes, plen) in pkts {
            let opcode = Opcode::from(op);
            let Ok((ext, _)) = ExtHeaders::parse(opcode.ext_headers(), &ext_bytes) else { continue };
            let base = p.b.query_qp(QB).unwrap().rq_psn;
            let b = roce_wire::bth::Repr::new(opcode, QB, psn::add(base, dpsn as u32));
            p.b.handle_packet(p.now, A, &b, &ext, &vec![0x5a; plen]);
            proptest::prop_assert!(p.b.poll_transmit(p.now).is_none());
        }
        // Only a SEND longer than its receive ends the QP (a local error, as rxe's class A).
        let wcs = Pair::wcs(&mut p.b);
        let too_long = wcs.iter().any(|w| w.status == WcStatus::LocLenErr);
        let want = if too_long { QpState::Err } else { QpState::Rts };
        proptest::prop_assert_eq!(p.b.qp_state(QB), Some(want));
    }
}
