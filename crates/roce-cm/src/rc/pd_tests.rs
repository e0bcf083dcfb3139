//! Protection domains between two engines: the peer reaches a region or a window only through
//! a QP of its PD [rxe_resp.c check_rkey → `lookup_mr(qp->pd, …)`, rxe_mw.c `rxe_lookup_mw`],
//! a type 2 window is bound only by a QP of its PD [C10-72], and an XRC target's requests are
//! checked against the PD of the XRC SRQ they name.

use std::time::Duration;

use super::tests::{fill, mr, sge, wr, Pair, QA, QB};
use super::*;

/// A pair whose B QP is in PD `qp_pd` (A's in 0).
fn pair_with_b_in(pd: u32, seed: u64) -> Pair {
    Pair::build(1024, seed, 0x10, 0x20, |_, is_b| QpInit { pd: if is_b { pd } else { 0 }, ..QpInit::default() })
}

fn statuses(p: &mut Pair) -> Vec<(u64, WcStatus)> {
    Pair::wcs(&mut p.a).iter().map(|w| (w.wr_id, w.status)).collect()
}

/// WRITE, READ and FETCH_ADD from A to a region of B's: they succeed when B's QP and the
/// region share a PD, and are rkey violations (REM_ACCESS_ERR at A, a NAK on the wire, both
/// QPs in ERR as for any remote access error) when they do not, whichever side is PD 0.
#[test]
fn the_peer_reaches_a_region_only_through_a_qp_of_its_pd() {
    for (qp_pd, mr_pd) in [(5, 5), (5, 0), (0, 5), (5, 6)] {
        for op in 0..3 {
            let mut p = pair_with_b_in(qp_pd, 40 + op);
            let la = mr(&mut p.a, 4096);
            fill(&mut p.a, &la, 5);
            let rb = p.b.reg_mr_in(mr_pd, 4096, Access::ALL).unwrap();
            assert_eq!(rb.pd, mr_pd);
            let w = match op {
                0 => wr(1, SendOp::Write { remote_addr: rb.addr, rkey: rb.rkey }, vec![sge(&la, 0, 2048)]),
                1 => wr(1, SendOp::Read { remote_addr: rb.addr, rkey: rb.rkey }, vec![sge(&la, 0, 2048)]),
                _ => wr(1, SendOp::FetchAdd { remote_addr: rb.addr, rkey: rb.rkey, add: 3 }, vec![sge(&la, 0, 8)]),
            };
            p.a.post_send(p.now, QA, w).unwrap();
            p.run(Duration::from_secs(1));
            let want = if qp_pd == mr_pd { WcStatus::Success } else { WcStatus::RemAccessErr };
            assert_eq!(statuses(&mut p), [(1, want)], "QP in PD {qp_pd}, region in PD {mr_pd}, op {op}");
            if want != WcStatus::Success {
                assert_eq!(p.b.qp_state(QB), Some(QpState::Err));
                assert!(p.b.mr(rb.lkey).unwrap().iter().all(|b| *b == 0), "nothing landed");
            }
        }
    }
}

/// A type 2 window of another PD than the binding QP's is not bound (MW_BIND_ERR, C10-72);
/// a type 1 window (bound whatever the QP) is reached only through a QP of its own PD.
#[test]
fn windows_answer_to_their_pd() {
    // Type 2, window in PD 0, B's QP and region in PD 5: the bind fails.
    let mut p = pair_with_b_in(5, 50);
    let rb = p.b.reg_mr_in(5, 4096, Access::ALL.union(Access::MW_BIND)).unwrap();
    let mw = p.b.alloc_mw_in(0, MwType::Type2).unwrap();
    assert_eq!(p.b.mw(mw).unwrap().pd, 0);
    let bind = |mw_rkey: u32| SendOp::BindMw {
        mw_rkey,
        new_rkey: (mw_rkey & !0xff) | 7,
        bind: MwBind { mr_lkey: rb.lkey, addr: rb.addr, length: 1024, access: Access::REMOTE_WRITE },
    };
    p.b.post_send(p.now, QB, wr(90, bind(mw), vec![])).unwrap();
    p.run(Duration::from_millis(1));
    let w = Pair::wcs(&mut p.b);
    assert_eq!(w.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(), [(90, WcStatus::MwBindErr)]);
    // The same bind of a window of the QP's PD succeeds, and A writes through it.
    let mut p = pair_with_b_in(5, 51);
    let la = mr(&mut p.a, 4096);
    let rb = p.b.reg_mr_in(5, 4096, Access::ALL.union(Access::MW_BIND)).unwrap();
    let mw = p.b.alloc_mw_in(5, MwType::Type2).unwrap();
    let op = SendOp::BindMw {
        mw_rkey: mw,
        new_rkey: (mw & !0xff) | 7,
        bind: MwBind { mr_lkey: rb.lkey, addr: rb.addr, length: 1024, access: Access::REMOTE_WRITE },
    };
    p.b.post_send(p.now, QB, wr(90, op, vec![])).unwrap();
    p.run(Duration::from_millis(1));
    assert_eq!(Pair::wcs(&mut p.b)[0].status, WcStatus::Success);
    let key = (mw & !0xff) | 7;
    p.a.post_send(p.now, QA, wr(1, SendOp::Write { remote_addr: rb.addr, rkey: key }, vec![sge(&la, 0, 512)])).unwrap();
    p.run(Duration::from_secs(1));
    assert_eq!(statuses(&mut p), [(1, WcStatus::Success)]);
    // Type 1: a window of PD 0 bound over a region of B's (rxe binds it whatever the QP's
    // PD); A's WRITE through it reaches B's QP of PD 5: an rkey violation.
    let mut p = pair_with_b_in(5, 52);
    let la = mr(&mut p.a, 4096);
    let rb = p.b.reg_mr_in(5, 4096, Access::ALL.union(Access::MW_BIND)).unwrap();
    let mw = p.b.alloc_mw_in(0, MwType::Type1).unwrap();
    let op = SendOp::BindMw {
        mw_rkey: mw,
        new_rkey: (mw & !0xff) | 7,
        bind: MwBind { mr_lkey: rb.lkey, addr: rb.addr, length: 1024, access: Access::REMOTE_WRITE },
    };
    p.b.post_send(p.now, QB, wr(90, op, vec![])).unwrap();
    p.run(Duration::from_millis(1));
    assert_eq!(Pair::wcs(&mut p.b)[0].status, WcStatus::Success);
    let key = (mw & !0xff) | 7;
    p.a.post_send(p.now, QA, wr(1, SendOp::Write { remote_addr: rb.addr, rkey: key }, vec![sge(&la, 0, 512)])).unwrap();
    p.run(Duration::from_secs(1));
    assert_eq!(statuses(&mut p), [(1, WcStatus::RemAccessErr)]);
}

/// An XRC target has no PD of its own: a WRITE that names an XRC SRQ of PD 3 reaches a region
/// of PD 3 and not one of PD 0, whatever PD the target was made with.
#[test]
fn an_xrc_targets_requests_are_checked_against_their_srqs_pd() {
    for (region_pd, want) in [(3, WcStatus::Success), (0, WcStatus::RemAccessErr)] {
        let mut xrcd = 0;
        let mut p = Pair::build(1024, 60 + u64::from(region_pd), 0x10, 0x20, |rc, is_b| {
            if is_b {
                xrcd = rc.alloc_xrcd();
                QpInit { service: TransportService::XrcTgt { xrcd }, ..QpInit::default() }
            } else {
                QpInit { service: TransportService::XrcIni, ..QpInit::default() }
            }
        });
        let srq = p.b.create_srq_in(3, 8, 1, 0, Some(xrcd)).unwrap();
        assert_eq!(p.b.srq_xrcd(srq), Some(xrcd));
        let la = mr(&mut p.a, 4096);
        fill(&mut p.a, &la, 1);
        let rb = p.b.reg_mr_in(region_pd, 4096, Access::ALL).unwrap();
        let write = SendOp::Write { remote_addr: rb.addr, rkey: rb.rkey };
        p.a.post_send_xrc(p.now, QA, srq, wr(1, write, vec![sge(&la, 0, 1500)])).unwrap();
        p.run(Duration::from_secs(1));
        assert_eq!(statuses(&mut p), [(1, want)], "region in PD {region_pd}");
        let landed = p.b.mr(rb.lkey).unwrap()[..1500] == p.a.mr(la.lkey).unwrap()[..1500];
        assert_eq!(landed, want == WcStatus::Success);
    }
}
