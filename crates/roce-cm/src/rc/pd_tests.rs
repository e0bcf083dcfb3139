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

/// On a pair whose B QP is in PD 5, a window of PD `window_pd` bound by B's QP over a region
/// of PD 5: the bind's completion (the only one at B), then, when it bound, how A's WRITE
/// through the window completes.
fn bind_then_write(seed: u64, window_pd: u32, mw_type: MwType) -> (WcStatus, Option<WcStatus>) {
    let mut p = pair_with_b_in(5, seed);
    let la = mr(&mut p.a, 4096);
    let rb = p.b.reg_mr_in(5, 4096, Access::ALL.union(Access::MW_BIND)).unwrap();
    let mw = p.b.alloc_mw_in(window_pd, mw_type).unwrap();
    assert_eq!(p.b.mw(mw).unwrap().pd, window_pd);
    let key = (mw & !0xff) | 7;
    let bind = MwBind { mr_lkey: rb.lkey, addr: rb.addr, length: 1024, access: Access::REMOTE_WRITE };
    p.b.post_send(p.now, QB, wr(90, SendOp::BindMw { mw_rkey: mw, new_rkey: key, bind }, vec![])).unwrap();
    p.run(Duration::from_millis(1));
    let w: Vec<_> = Pair::wcs(&mut p.b).iter().map(|w| (w.wr_id, w.status)).collect();
    let [(90, bound)] = w[..] else { panic!("the bind's completion alone: {w:?}") };
    if bound != WcStatus::Success {
        return (bound, None);
    }
    p.a.post_send(p.now, QA, wr(1, SendOp::Write { remote_addr: rb.addr, rkey: key }, vec![sge(&la, 0, 512)])).unwrap();
    p.run(Duration::from_secs(1));
    let w = statuses(&mut p);
    let [(1, wrote)] = w[..] else { panic!("the WRITE's completion alone: {w:?}") };
    (bound, Some(wrote))
}

/// A type 2 window of another PD than the binding QP's is not bound (MW_BIND_ERR, C10-72);
/// one of the QP's PD is, and A writes through it; a type 1 window of another PD (rxe binds
/// it whatever the QP's PD) is an rkey violation when A's WRITE reaches B's QP through it.
#[test]
fn windows_answer_to_their_pd() {
    assert_eq!(bind_then_write(50, 0, MwType::Type2), (WcStatus::MwBindErr, None));
    assert_eq!(bind_then_write(51, 5, MwType::Type2), (WcStatus::Success, Some(WcStatus::Success)));
    assert_eq!(bind_then_write(52, 0, MwType::Type1), (WcStatus::Success, Some(WcStatus::RemAccessErr)));
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
