//! ATOMIC WRITE and FLUSH (the IBA 1.5 memory placement extensions, rxe since 6.2) between
//! two engines: the packets' shape, placement, the answers, errors, duplicates and loss
//! [rxe_req.c, rxe_resp.c atomic_write_reply / process_flush, rxe_comp.c check_ack].

use std::time::Duration;

use roce_wire::bth::Opcode;

use super::tests::{fill, mr, sge, wr, Pair, QA, QB};
use super::*;

/// A pair whose responder (B) QP also accepts FLUSH with global visibility, the access a
/// program asks for with `IBV_ACCESS_FLUSH_GLOBAL`.
fn flush_pair(seed: u64) -> Pair {
    Pair::build_with(
        1024,
        seed,
        0x10,
        0x20,
        |_, _| QpInit::default(),
        |at, is_b| {
            if is_b {
                at.access = at.access.union(Access::FLUSH_GLOBAL);
            }
        },
    )
}

/// A region of B's that FLUSH may name (remote write and read, flush-global).
fn flushable(p: &mut Pair, len: usize) -> MrInfo {
    let access = Access::ALL.union(Access::FLUSH_GLOBAL);
    p.b.reg_mr(len, access).unwrap()
}

fn atomic_write(addr: u64, rkey: u32, v: u64) -> SendOp {
    SendOp::AtomicWrite { remote_addr: addr, rkey, data: v.to_ne_bytes() }
}

fn flush(addr: u64, rkey: u32, len: u32, level: FlushLevel) -> SendOp {
    SendOp::Flush { remote_addr: addr, rkey, len, placement: FLUSH_GLOBAL, level }
}

fn statuses(wcs: &[WorkCompletion]) -> Vec<(u64, WcStatus)> {
    wcs.iter().map(|w| (w.wr_id, w.status)).collect()
}

#[test]
fn request_packets_have_rxes_headers() {
    let mut p = flush_pair(1);
    let rb = flushable(&mut p, 4096);
    p.a.post_send(p.now, QA, wr(1, atomic_write(rb.addr + 8, rb.rkey, 0x1122_3344_5566_7788), vec![])).unwrap();
    p.a.post_send(p.now, QA, wr(2, flush(rb.addr, rb.rkey, 4096, FlushLevel::Range), vec![])).unwrap();
    p.a.post_send(p.now, QA, wr(3, flush(0, rb.rkey, 0, FlushLevel::Mr), vec![])).unwrap();
    let aw = p.a.poll_transmit(p.now).unwrap();
    assert_eq!(aw.bth.opcode, Opcode::RcAtomicWrite);
    assert!(aw.bth.ack_req);
    assert_eq!(aw.bth.pad_count, 0);
    let r = aw.ext.reth.unwrap();
    assert_eq!((r.va, r.rkey, r.dma_len), (rb.addr + 8, rb.rkey, 8));
    assert_eq!(aw.payload, 0x1122_3344_5566_7788u64.to_ne_bytes(), "the bytes as they are");
    assert!(aw.ext.feth.is_none() && aw.ext.atomic_eth.is_none());
    let fl = p.a.poll_transmit(p.now).unwrap();
    assert_eq!(fl.bth.opcode, Opcode::RcFlush);
    assert_eq!(fl.bth.psn, roce_wire::bth::Repr::new(Opcode::RcFlush, QB, 0x11).psn);
    assert_eq!(fl.ext.feth.unwrap().bits, 0x01, "range (0) << 4 | global (1)");
    let r = fl.ext.reth.unwrap();
    assert_eq!((r.va, r.rkey, r.dma_len), (rb.addr, rb.rkey, 4096));
    assert!(fl.payload.is_empty(), "oA19-2: no payload");
    let whole = p.a.poll_transmit(p.now).unwrap();
    assert_eq!(whole.ext.feth.unwrap().bits, 0x11, "MR (1) << 4 | global (1)");
}

#[test]
fn atomic_write_places_eight_bytes_after_earlier_writes_and_flush_completes() {
    let mut p = flush_pair(2);
    let la = mr(&mut p.a, 4096);
    fill(&mut p.a, &la, 3);
    let rb = flushable(&mut p, 4096);
    let v = 0x0102_0304_0506_0708u64;
    p.a.post_send(p.now, QA, wr(1, SendOp::Write { remote_addr: rb.addr, rkey: rb.rkey }, vec![sge(&la, 0, 3000)]))
        .unwrap();
    p.a.post_send(p.now, QA, wr(2, atomic_write(rb.addr + 3000, rb.rkey, v), vec![])).unwrap();
    p.a.post_send(p.now, QA, wr(3, flush(rb.addr, rb.rkey, 3008, FlushLevel::Range), vec![])).unwrap();
    p.a.post_send(p.now, QA, wr(4, flush(0, rb.rkey, 0, FlushLevel::Mr), vec![])).unwrap();
    p.run(Duration::from_secs(1));
    let wa = Pair::wcs(&mut p.a);
    let got: Vec<_> = wa.iter().map(|w| (w.wr_id, w.status, w.opcode, w.byte_len)).collect();
    assert_eq!(
        got,
        [
            (1, WcStatus::Success, WcOpcode::RdmaWrite, 3000),
            (2, WcStatus::Success, WcOpcode::AtomicWrite, 8),
            (3, WcStatus::Success, WcOpcode::Flush, 3008),
            (4, WcStatus::Success, WcOpcode::Flush, 0),
        ]
    );
    let b = p.b.mr(rb.lkey).unwrap();
    assert_eq!(b[..3000], p.a.mr(la.lkey).unwrap()[..3000]);
    assert_eq!(b[3000..3008], v.to_ne_bytes());
    // Each answered by an empty READ response with an ACK syndrome; nothing completes at B.
    let resp: Vec<_> = p.sent_ba.iter().filter(|o| **o == Opcode::RcRdmaReadResponseOnly).collect();
    assert_eq!(resp.len(), 3, "{:?}", p.sent_ba);
    assert!(Pair::wcs(&mut p.b).is_empty());
    assert_eq!(p.b.counters().drop_qp_state + p.a.counters().duplicate_response, 0);
}

#[test]
fn responder_errors_are_rxes_naks() {
    // (what, the completion A gets)
    let cases: [(&str, WcStatus); 6] = [
        ("atomic write misaligned", WcStatus::RemInvReqErr),
        ("atomic write to a read-only region", WcStatus::RemAccessErr),
        ("flush on a QP without FLUSH_GLOBAL", WcStatus::RemInvReqErr),
        ("flush of a region without FLUSH_GLOBAL", WcStatus::RemAccessErr),
        ("flush of a range past the region", WcStatus::RemAccessErr),
        ("flush to persistence on a QP without it", WcStatus::RemInvReqErr),
    ];
    for (i, (what, want)) in cases.into_iter().enumerate() {
        let mut p = if i == 2 { Pair::new(1024, 20 + i as u64) } else { flush_pair(20 + i as u64) };
        let rb = flushable(&mut p, 256);
        let ro = p.b.reg_mr(256, Access::LOCAL_WRITE.union(Access::REMOTE_READ)).unwrap();
        let plain = p.b.reg_mr(256, Access::ALL).unwrap();
        if i == 5 {
            // No region can be registered for persistence (ordinary memory, as rxe says).
            assert_eq!(p.b.reg_mr(256, Access::ALL.union(Access::FLUSH_PERSISTENT)), Err(Errno::EINVAL));
        }
        let op = match i {
            0 => atomic_write(rb.addr + 4, rb.rkey, 1),
            1 => atomic_write(ro.addr, ro.rkey, 1),
            2 => flush(rb.addr, rb.rkey, 8, FlushLevel::Range),
            3 => flush(plain.addr, plain.rkey, 8, FlushLevel::Range),
            4 => flush(rb.addr + 200, rb.rkey, 100, FlushLevel::Range),
            _ => SendOp::Flush {
                remote_addr: rb.addr,
                rkey: rb.rkey,
                len: 8,
                placement: FLUSH_PERSISTENT,
                level: FlushLevel::Range,
            },
        };
        p.a.post_send(p.now, QA, wr(1, op, vec![])).unwrap();
        p.a.post_send(p.now, QA, wr(2, SendOp::Send, vec![])).unwrap();
        p.run(Duration::from_secs(1));
        assert_eq!(statuses(&Pair::wcs(&mut p.a)), [(1, want), (2, WcStatus::WrFlushErr)], "{what}");
        assert_eq!(p.b.qp_state(QB), Some(QpState::Err), "{what}");
    }
}

#[test]
fn a_persistent_flush_to_a_qp_that_allows_it_finds_no_persistent_region() {
    let mut p = Pair::build_with(
        1024,
        30,
        0x10,
        0x20,
        |_, _| QpInit::default(),
        |at, is_b| {
            if is_b {
                at.access = at.access.union(Access::FLUSH_GLOBAL).union(Access::FLUSH_PERSISTENT);
            }
        },
    );
    let rb = flushable(&mut p, 256);
    let op = SendOp::Flush {
        remote_addr: rb.addr,
        rkey: rb.rkey,
        len: 8,
        placement: FLUSH_PERSISTENT | FLUSH_GLOBAL,
        level: FlushLevel::Range,
    };
    p.a.post_send(p.now, QA, wr(1, op, vec![])).unwrap();
    p.run(Duration::from_secs(1));
    assert_eq!(statuses(&Pair::wcs(&mut p.a)), [(1, WcStatus::RemAccessErr)]);
}

#[test]
fn a_duplicate_is_answered_again_not_done_again() {
    for flush_it in [false, true] {
        let mut p = flush_pair(40);
        let rb = flushable(&mut p, 256);
        p.drop_next.push((Opcode::RcRdmaReadResponseOnly, 1));
        let op =
            if flush_it { flush(rb.addr, rb.rkey, 64, FlushLevel::Range) } else { atomic_write(rb.addr, rb.rkey, 7) };
        p.a.post_send(p.now, QA, wr(1, op, vec![])).unwrap();
        // Until B has done it (its answer lost), then B's own program writes there.
        p.run(Duration::from_micros(100));
        assert_eq!(p.b.counters().rcvd_pkts, 1);
        p.b.mr_mut(rb.lkey).unwrap()[..8].copy_from_slice(&99u64.to_ne_bytes());
        p.run(Duration::from_secs(1));
        assert_eq!(statuses(&Pair::wcs(&mut p.a)), [(1, WcStatus::Success)], "flush {flush_it}");
        assert_eq!(p.a.counters().local_ack_timeout_err, 1);
        assert_eq!(p.b.counters().duplicate_request, 1);
        assert_eq!(p.b.mr(rb.lkey).unwrap()[..8], 99u64.to_ne_bytes(), "not written again");
    }
}

#[test]
fn a_later_ack_completes_a_placement_whose_answer_was_lost() {
    let mut p = flush_pair(50);
    let rb = flushable(&mut p, 256);
    p.b.post_recv(QB, RecvWr { wr_id: 9, sg_list: vec![] }).unwrap();
    p.drop_next.push((Opcode::RcRdmaReadResponseOnly, 1));
    p.a.post_send(p.now, QA, wr(1, atomic_write(rb.addr, rb.rkey, 5), vec![])).unwrap();
    p.a.post_send(p.now, QA, wr(2, SendOp::Send, vec![])).unwrap();
    p.run(Duration::from_secs(1));
    assert_eq!(statuses(&Pair::wcs(&mut p.a)), [(1, WcStatus::Success), (2, WcStatus::Success)]);
    assert_eq!(p.a.counters().local_ack_timeout_err, 0, "the SEND's ACK covers it: no retry");
}

#[test]
fn atomic_write_takes_an_initiator_depth_slot_flush_does_not() {
    let mut p = Pair::build_with(
        1024,
        60,
        0x10,
        0x20,
        |_, _| QpInit::default(),
        |at, is_b| {
            if is_b {
                at.access = at.access.union(Access::FLUSH_GLOBAL);
            } else {
                at.max_rd_atomic = 1;
            }
        },
    );
    let la = mr(&mut p.a, 64);
    let rb = flushable(&mut p, 256);
    p.a.post_send(p.now, QA, wr(1, SendOp::Read { remote_addr: rb.addr, rkey: rb.rkey }, vec![sge(&la, 0, 8)]))
        .unwrap();
    p.a.post_send(p.now, QA, wr(2, flush(rb.addr, rb.rkey, 8, FlushLevel::Range), vec![])).unwrap();
    p.a.post_send(p.now, QA, wr(3, atomic_write(rb.addr + 8, rb.rkey, 1), vec![])).unwrap();
    let first: Vec<_> = std::iter::from_fn(|| p.a.poll_transmit(p.now)).map(|x| x.bth.opcode).collect();
    assert_eq!(first, [Opcode::RcRdmaReadRequest, Opcode::RcFlush], "the ATOMIC WRITE waits for the READ");
}

#[test]
fn posting_rules() {
    let mut p = flush_pair(70);
    let la = mr(&mut p.a, 64);
    let rb = flushable(&mut p, 64);
    let with_sge = wr(1, atomic_write(rb.addr, rb.rkey, 1), vec![sge(&la, 0, 8)]);
    assert_eq!(p.a.post_send(p.now, QA, with_sge), Err(Errno::EINVAL), "no SGE: the data is in the request");
    let mut inline = wr(2, flush(rb.addr, rb.rkey, 8, FlushLevel::Range), vec![]);
    inline.inline = Some(vec![0; 8]);
    assert_eq!(p.a.post_send(p.now, QA, inline), Err(Errno::EINVAL));
    let mut u = Pair::build(1024, 71, 0x10, 0x20, |_, _| QpInit { service: TransportService::Uc, ..QpInit::default() });
    for op in [atomic_write(rb.addr, rb.rkey, 1), flush(rb.addr, rb.rkey, 8, FlushLevel::Range)] {
        assert_eq!(u.a.post_send(u.now, QA, wr(3, op, vec![])), Err(Errno::EINVAL), "RC only");
    }
}

#[test]
fn thirty_percent_loss_keeps_placements_exactly_once() {
    let mut delivered = 0;
    for seed in 0..200u64 {
        let mut p = flush_pair(1000 + seed);
        p.faults = super::tests::Faults { loss: 0.3, duplicate: 0.1, reorder: 0.1 };
        let la = mr(&mut p.a, 1024);
        fill(&mut p.a, &la, seed as u8);
        let rb = flushable(&mut p, 2048);
        let mut n = 0;
        for k in 0..8u64 {
            let w = SendOp::Write { remote_addr: rb.addr + 1024, rkey: rb.rkey };
            p.a.post_send(p.now, QA, wr(n, w, vec![sge(&la, k * 100, 100)])).unwrap();
            p.a.post_send(p.now, QA, wr(n + 1, atomic_write(rb.addr + 8 * k, rb.rkey, k + 1), vec![])).unwrap();
            p.a.post_send(p.now, QA, wr(n + 2, flush(rb.addr, rb.rkey, 2048, FlushLevel::Range), vec![])).unwrap();
            n += 3;
        }
        p.run(Duration::from_secs(30));
        let wa = Pair::wcs(&mut p.a);
        if wa.iter().all(|w| w.status == WcStatus::Success) {
            assert_eq!(wa.len(), n as usize, "seed {seed}");
            delivered += 1;
            for k in 0..8u64 {
                let at = (8 * k) as usize;
                assert_eq!(p.b.mr(rb.lkey).unwrap()[at..at + 8], (k + 1).to_ne_bytes(), "seed {seed}");
            }
        } else {
            assert_eq!(wa.iter().find(|w| w.status != WcStatus::Success).unwrap().status, WcStatus::RetryExcErr);
        }
    }
    assert!(delivered >= 100, "most runs get through the retries: {delivered}/200");
}
