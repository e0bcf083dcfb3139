//! Memory windows (type 1 and type 2), LOCAL_INV and SEND with invalidate between two
//! engines: binds as local operations completed in order, remote access through a window's
//! rkey, the window's own bounds, invalidation, and each refusal as rxe_mw.c gives it.

use std::time::Duration;

use super::tests::{fill, mr, sge, wr, Pair, QA, QB};
use super::*;

/// A region of B's that windows may be bound to (local write, remote everything, MW_BIND).
fn bindable(p: &mut Pair, len: usize) -> MrInfo {
    p.b.reg_mr(len, Access::ALL.union(Access::MW_BIND)).unwrap()
}

fn bind(mw_rkey: u32, new_byte: u32, m: &MrInfo, off: u64, len: u64, access: Access) -> SendOp {
    SendOp::BindMw {
        mw_rkey,
        new_rkey: (mw_rkey & !0xff) | (new_byte & 0xff),
        bind: MwBind { mr_lkey: m.lkey, addr: m.addr + off, length: len, access },
    }
}

fn remote() -> Access {
    Access::REMOTE_READ.union(Access::REMOTE_WRITE).union(Access::REMOTE_ATOMIC)
}

fn statuses(wcs: &[WorkCompletion]) -> Vec<(u64, WcStatus, WcOpcode)> {
    wcs.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect()
}

/// B binds a window with a local work request on its QP; the completion, then its new key.
fn bind_on_b(p: &mut Pair, op: SendOp) -> (WorkCompletion, u32) {
    let SendOp::BindMw { new_rkey, .. } = op else { unreachable!() };
    p.b.post_send(p.now, QB, wr(90, op, vec![])).unwrap();
    p.run(Duration::from_millis(1));
    let w = Pair::wcs(&mut p.b).into_iter().find(|w| w.wr_id == 90).expect("the bind's completion");
    (w, new_rkey)
}

#[test]
fn a_type_2_window_grants_its_range_to_its_qp_until_invalidated() {
    let mut p = Pair::new(1024, 1);
    let la = mr(&mut p.a, 4096);
    fill(&mut p.a, &la, 3);
    let rb = bindable(&mut p, 8192);
    let mw = p.b.alloc_mw(MwType::Type2).unwrap();
    assert_eq!(p.b.mw(mw).unwrap().state, MwState::Free);
    let (w, key) = bind_on_b(&mut p, bind(mw, 0x5a, &rb, 1024, 2048, remote()));
    assert_eq!((w.status, w.opcode), (WcStatus::Success, WcOpcode::BindMw));
    let info = p.b.mw(key).unwrap();
    assert_eq!((info.state, info.qpn, info.length, key & 0xff), (MwState::Valid, Some(QB), 2048, 0x5a));
    assert_eq!(p.b.mw(mw), None, "the old key is gone");
    // A WRITE and a READ through the window land in, and come from, the region under it.
    let write = SendOp::Write { remote_addr: rb.addr + 1024, rkey: key };
    p.a.post_send(p.now, QA, wr(1, write, vec![sge(&la, 0, 2048)])).unwrap();
    let read = SendOp::Read { remote_addr: rb.addr + 2048, rkey: key };
    p.a.post_send(p.now, QA, wr(2, read, vec![sge(&la, 2048, 1024)])).unwrap();
    p.run(Duration::from_secs(1));
    assert_eq!(
        statuses(&Pair::wcs(&mut p.a)),
        [(1, WcStatus::Success, WcOpcode::RdmaWrite), (2, WcStatus::Success, WcOpcode::RdmaRead)]
    );
    assert_eq!(p.b.mr(rb.lkey).unwrap()[1024..3072], p.a.mr(la.lkey).unwrap()[..2048]);
    // B invalidates it locally: the next access through it is refused.
    p.b.post_send(p.now, QB, wr(91, SendOp::LocalInv { rkey: key }, vec![])).unwrap();
    p.run(Duration::from_millis(1));
    assert_eq!(statuses(&Pair::wcs(&mut p.b)), [(91, WcStatus::Success, WcOpcode::LocalInv)]);
    assert_eq!(p.b.mw(key).unwrap().state, MwState::Free);
    p.a.post_send(p.now, QA, wr(3, SendOp::Read { remote_addr: rb.addr + 1024, rkey: key }, vec![sge(&la, 0, 8)]))
        .unwrap();
    p.run(Duration::from_secs(1));
    assert_eq!(statuses(&Pair::wcs(&mut p.a)), [(3, WcStatus::RemAccessErr, WcOpcode::RdmaRead)]);
}

#[test]
fn an_access_past_the_window_is_refused_though_the_region_holds_it() {
    // rxe checks only the region under a window (check_rkey → mr_check_range); IBA bounds an
    // access by the window, and so does this engine.
    let mut p = Pair::new(1024, 2);
    let la = mr(&mut p.a, 4096);
    let rb = bindable(&mut p, 8192);
    let mw = p.b.alloc_mw(MwType::Type2).unwrap();
    let (_, key) = bind_on_b(&mut p, bind(mw, 1, &rb, 1024, 1024, remote()));
    let read = SendOp::Read { remote_addr: rb.addr + 1536, rkey: key };
    p.a.post_send(p.now, QA, wr(1, read, vec![sge(&la, 0, 1024)])).unwrap();
    p.run(Duration::from_secs(1));
    assert_eq!(statuses(&Pair::wcs(&mut p.a)), [(1, WcStatus::RemAccessErr, WcOpcode::RdmaRead)]);
}

#[test]
fn a_window_grants_only_its_access_and_a_zero_based_one_counts_from_its_start() {
    let mut p = Pair::new(1024, 3);
    let la = mr(&mut p.a, 4096);
    fill(&mut p.a, &la, 9);
    let rb = bindable(&mut p, 8192);
    let ro = p.b.alloc_mw(MwType::Type2).unwrap();
    let (_, ro) = bind_on_b(&mut p, bind(ro, 2, &rb, 0, 1024, Access::REMOTE_READ));
    let zb = p.b.alloc_mw(MwType::Type2).unwrap();
    let (w, zb) = bind_on_b(&mut p, bind(zb, 3, &rb, 4096, 512, remote().union(Access::ZERO_BASED)));
    assert_eq!(w.status, WcStatus::Success);
    // Zero based: address 100 of the window is the region's 4096 + 100.
    let write = SendOp::Write { remote_addr: 100, rkey: zb };
    p.a.post_send(p.now, QA, wr(1, write, vec![sge(&la, 0, 64)])).unwrap();
    p.run(Duration::from_secs(1));
    assert_eq!(statuses(&Pair::wcs(&mut p.a)), [(1, WcStatus::Success, WcOpcode::RdmaWrite)]);
    assert_eq!(p.b.mr(rb.lkey).unwrap()[4196..4260], p.a.mr(la.lkey).unwrap()[..64]);
    // A WRITE through the read-only window: remote access error.
    let write = SendOp::Write { remote_addr: rb.addr, rkey: ro };
    p.a.post_send(p.now, QA, wr(2, write, vec![sge(&la, 0, 8)])).unwrap();
    p.run(Duration::from_secs(1));
    assert_eq!(statuses(&Pair::wcs(&mut p.a)), [(2, WcStatus::RemAccessErr, WcOpcode::RdmaWrite)]);
}

#[test]
fn binds_the_rules_refuse_complete_with_mw_bind_err() {
    // (what, the bind) on a fresh pair each, for B's QP.
    for case in 0..5 {
        let mut p = Pair::new(1024, 10 + case);
        let rb = bindable(&mut p, 4096);
        let no_bind = p.b.reg_mr(4096, Access::ALL).unwrap();
        let read_only = p.b.reg_mr(4096, Access::REMOTE_READ.union(Access::MW_BIND)).unwrap();
        let t2 = p.b.alloc_mw(MwType::Type2).unwrap();
        let t1 = p.b.alloc_mw(MwType::Type1).unwrap();
        let (what, op) = match case {
            0 => ("a region without MW_BIND", bind(t2, 1, &no_bind, 0, 64, remote())),
            1 => ("past the region", bind(t2, 1, &rb, 4000, 200, remote())),
            2 => ("writable over a region without local write", bind(t2, 1, &read_only, 0, 64, remote())),
            3 => ("a type 1 window zero based", bind(t1, 1, &rb, 0, 64, remote().union(Access::ZERO_BASED))),
            _ => ("a type 2 window with length 0", bind(t2, 1, &rb, 0, 0, remote())),
        };
        p.b.post_send(p.now, QB, wr(90, op, vec![])).unwrap();
        p.b.post_send(p.now, QB, wr(91, SendOp::Send, vec![])).unwrap();
        p.run(Duration::from_millis(1));
        let got = statuses(&Pair::wcs(&mut p.b));
        assert_eq!(
            got,
            [(90, WcStatus::MwBindErr, WcOpcode::BindMw), (91, WcStatus::WrFlushErr, WcOpcode::Send)],
            "{what}"
        );
        assert_eq!(p.b.qp_state(QB), Some(QpState::Err), "{what}");
    }
}

#[test]
fn type_1_windows_bind_unbind_and_are_not_invalidated() {
    let mut p = Pair::new(1024, 20);
    let la = mr(&mut p.a, 64);
    let rb = bindable(&mut p, 4096);
    fill(&mut p.b, &rb, 5);
    let t1 = p.b.alloc_mw(MwType::Type1).unwrap();
    assert_eq!((p.b.mw(t1).unwrap().state, p.b.mw(t1).unwrap().length), (MwState::Valid, 0));
    let (w, key) = bind_on_b(&mut p, bind(t1, 7, &rb, 64, 64, Access::REMOTE_READ));
    assert_eq!(w.status, WcStatus::Success);
    assert_eq!(p.b.mw(key).unwrap().qpn, None, "any QP may use a type 1 window");
    p.a.post_send(p.now, QA, wr(1, SendOp::Read { remote_addr: rb.addr + 64, rkey: key }, vec![sge(&la, 0, 64)]))
        .unwrap();
    p.run(Duration::from_secs(1));
    assert_eq!(statuses(&Pair::wcs(&mut p.a)), [(1, WcStatus::Success, WcOpcode::RdmaRead)]);
    assert_eq!(p.a.mr(la.lkey).unwrap()[..64], p.b.mr(rb.lkey).unwrap()[64..128]);
    // The region cannot go while the window is bound to it.
    assert_eq!(p.b.dereg_mr(rb.lkey), Err(Errno::EINVAL));
    // Unbound by binding length 0; then the region may go.
    let (w, key) = bind_on_b(&mut p, bind(key, 8, &rb, 0, 0, Access::REMOTE_READ));
    assert_eq!(w.status, WcStatus::Success);
    assert_eq!(p.b.mw(key).unwrap().length, 0);
    // LOCAL_INV of a type 1 window: IBV_WC_LOC_QP_OP_ERR (o10-37.2.26).
    p.b.post_send(p.now, QB, wr(92, SendOp::LocalInv { rkey: key }, vec![])).unwrap();
    p.run(Duration::from_millis(1));
    assert_eq!(statuses(&Pair::wcs(&mut p.b)), [(92, WcStatus::LocQpOpErr, WcOpcode::LocalInv)]);
    assert_eq!(p.b.dereg_mr(rb.lkey), Ok(()));
    assert_eq!(p.b.dealloc_mw(key), Ok(()));
    assert_eq!(p.b.dealloc_mw(key), Err(Errno::EINVAL));
}

#[test]
fn send_with_invalidate_frees_the_window_and_says_so_in_the_receive() {
    let mut p = Pair::new(256, 30);
    let la = mr(&mut p.a, 4096);
    fill(&mut p.a, &la, 1);
    let rb = bindable(&mut p, 4096);
    let mw = p.b.alloc_mw(MwType::Type2).unwrap();
    let (_, key) = bind_on_b(&mut p, bind(mw, 4, &rb, 0, 1024, remote()));
    p.b.post_recv(QB, RecvWr { wr_id: 5, sg_list: vec![sge(&rb, 2048, 2048)] }).unwrap();
    // 600 bytes at MTU 256: FIRST, MIDDLE, LAST WITH INVALIDATE (the IETH on the last).
    p.a.post_send(p.now, QA, wr(1, SendOp::SendWithInv { rkey: key }, vec![sge(&la, 0, 600)])).unwrap();
    p.run(Duration::from_secs(1));
    use roce_wire::bth::Opcode;
    assert_eq!(p.sent_ab, [Opcode::RcSendFirst, Opcode::RcSendMiddle, Opcode::RcSendLastWithInvalidate]);
    assert_eq!(statuses(&Pair::wcs(&mut p.a)), [(1, WcStatus::Success, WcOpcode::Send)]);
    let wb = Pair::wcs(&mut p.b);
    assert_eq!((wb[0].status, wb[0].byte_len, wb[0].invalidated_rkey), (WcStatus::Success, 600, Some(key)));
    assert_eq!(p.b.mw(key).unwrap().state, MwState::Free);
    // A key the rules do not let go (a region's): the receive and the SEND fail.
    p.b.post_recv(QB, RecvWr { wr_id: 6, sg_list: vec![sge(&rb, 2048, 2048)] }).unwrap();
    p.a.post_send(p.now, QA, wr(2, SendOp::SendWithInv { rkey: rb.rkey }, vec![sge(&la, 0, 16)])).unwrap();
    p.run(Duration::from_secs(1));
    assert_eq!(statuses(&Pair::wcs(&mut p.a)), [(2, WcStatus::RemInvReqErr, WcOpcode::Send)]);
    assert_eq!(Pair::wcs(&mut p.b)[0].status, WcStatus::RemInvReqErr);
    assert_eq!(p.b.qp_state(QB), Some(QpState::Err));
}

#[test]
fn local_operations_complete_in_order_with_the_requests_around_them() {
    let mut p = Pair::new(1024, 40);
    let la = p.a.reg_mr(4096, Access::ALL.union(Access::MW_BIND)).unwrap();
    let rb = mr(&mut p.b, 4096);
    let mw = p.a.alloc_mw(MwType::Type2).unwrap();
    let w = |id| wr(id, SendOp::Write { remote_addr: rb.addr, rkey: rb.rkey }, vec![sge(&la, 0, 3000)]);
    p.a.post_send(p.now, QA, w(1)).unwrap();
    p.a.post_send(p.now, QA, wr(2, bind(mw, 9, &la, 0, 64, remote()), vec![])).unwrap();
    p.a.post_send(p.now, QA, w(3)).unwrap();
    // A bind the rules refuse (the window is bound now): it fails after 3, the rest flushed.
    p.a.post_send(p.now, QA, wr(4, bind((mw & !0xff) | 9, 10, &la, 0, 64, remote()), vec![])).unwrap();
    p.a.post_send(p.now, QA, w(5)).unwrap();
    p.run(Duration::from_secs(1));
    assert_eq!(
        statuses(&Pair::wcs(&mut p.a)),
        [
            (1, WcStatus::Success, WcOpcode::RdmaWrite),
            (2, WcStatus::Success, WcOpcode::BindMw),
            (3, WcStatus::Success, WcOpcode::RdmaWrite),
            (4, WcStatus::MwBindErr, WcOpcode::BindMw),
            (5, WcStatus::WrFlushErr, WcOpcode::RdmaWrite),
        ]
    );
    assert_eq!(p.sent_ab.len(), 6, "two 3,000-byte WRITEs at MTU 1,024: nothing for the binds");
}

#[test]
fn lossy_links_do_not_redo_a_bind() {
    let mut delivered = 0;
    for seed in 0..100u64 {
        let mut p = Pair::new(1024, 1000 + seed);
        p.faults = super::tests::Faults { loss: 0.3, duplicate: 0.1, reorder: 0.1 };
        let la = p.a.reg_mr(8192, Access::ALL.union(Access::MW_BIND)).unwrap();
        let rb = mr(&mut p.b, 8192);
        let mw = p.a.alloc_mw(MwType::Type2).unwrap();
        let mut key = mw;
        for k in 0..4u64 {
            let w = SendOp::Write { remote_addr: rb.addr, rkey: rb.rkey };
            p.a.post_send(p.now, QA, wr(2 * k, w, vec![sge(&la, 0, 2500)])).unwrap();
            let op = bind(key, k as u32 + 1, &la, 0, 64, remote());
            key = (key & !0xff) | (k as u32 + 1);
            p.a.post_send(p.now, QA, wr(2 * k + 1, op, vec![])).unwrap();
            p.a.post_send(p.now, QA, wr(100 + k, SendOp::LocalInv { rkey: key }, vec![])).unwrap();
        }
        p.run(Duration::from_secs(30));
        let wa = Pair::wcs(&mut p.a);
        if wa.iter().all(|w| w.status == WcStatus::Success) {
            assert_eq!(wa.len(), 12, "seed {seed}");
            let ids: Vec<u64> = wa.iter().map(|w| w.wr_id).collect();
            assert_eq!(ids, [0, 1, 100, 2, 3, 101, 4, 5, 102, 6, 7, 103], "in order, seed {seed}");
            assert_eq!(p.a.mw(key).unwrap().state, MwState::Free, "seed {seed}");
            delivered += 1;
        } else {
            let bad = wa.iter().find(|w| w.status != WcStatus::Success).unwrap();
            assert_eq!(bad.status, WcStatus::RetryExcErr, "seed {seed}: {wa:?}");
        }
    }
    assert!(delivered >= 50, "most runs get through the retries: {delivered}/100");
}
