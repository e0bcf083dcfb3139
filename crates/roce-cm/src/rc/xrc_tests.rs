//! XRC between two engines: an initiator on A whose requests name one of B's XRC SRQs in an
//! XRCETH, a target on B that hands each message to that SRQ and answers as RC's responder,
//! with XRC's opcodes both ways; the refusals of what an XRC QP lacks.

use std::time::Duration;

use roce_wire::bth::Opcode;

use super::tests::{fill, mr, sge, wr, Pair, QA, QB};
use super::*;

/// An initiator (A) and a target (B) of a fresh domain; the domain's number.
fn xrc_pair(seed: u64) -> (Pair, u32) {
    let mut xrcd = 0;
    let p = Pair::build_with(
        1024,
        seed,
        0x10,
        0x20,
        |rc, is_b| {
            if is_b {
                xrcd = rc.alloc_xrcd();
                QpInit { service: TransportService::XrcTgt { xrcd }, ..QpInit::default() }
            } else {
                QpInit { service: TransportService::XrcIni, ..QpInit::default() }
            }
        },
        |_, _| {},
    );
    (p, xrcd)
}

fn recv(wr_id: u64, m: &MrInfo, off: u64, len: u32) -> RecvWr {
    RecvWr { wr_id, sg_list: vec![sge(m, off, len)] }
}

/// Two SENDs to two SRQs of the target's domain, a WRITE and a READ: every request leaves
/// with XRC's opcode and an XRCETH, every answer with XRC's ACK or READ response; each
/// message completes on the SRQ its request named (the completion says which), byte for byte.
#[test]
fn each_message_goes_to_the_srq_its_request_names() {
    let (mut p, xrcd) = xrc_pair(1);
    let s1 = p.b.create_srq_xrc(8, 1, 0, xrcd).unwrap();
    let s2 = p.b.create_srq_xrc(8, 1, 0, xrcd).unwrap();
    assert_eq!((p.b.srq_xrcd(s1), p.b.srq_xrcd(s2)), (Some(xrcd), Some(xrcd)));
    let rb = mr(&mut p.b, 16384);
    p.b.post_srq_recv(s1, recv(101, &rb, 0, 4096)).unwrap();
    p.b.post_srq_recv(s2, recv(201, &rb, 4096, 4096)).unwrap();
    let la = mr(&mut p.a, 16384);
    fill(&mut p.a, &la, 7);
    fill(&mut p.b, &rb, 9);
    let now = p.now;
    p.a.post_send_xrc(now, QA, s2, wr(1, SendOp::Send, vec![sge(&la, 0, 1500)])).unwrap();
    p.a.post_send_xrc(now, QA, s1, wr(2, SendOp::SendWithImm(0xfeed), vec![sge(&la, 2000, 100)])).unwrap();
    let write = SendOp::Write { remote_addr: rb.addr + 8192, rkey: rb.rkey };
    p.a.post_send_xrc(now, QA, s1, wr(3, write, vec![sge(&la, 0, 3000)])).unwrap();
    let read = SendOp::Read { remote_addr: rb.addr + 12288, rkey: rb.rkey };
    p.a.post_send_xrc(now, QA, s1, wr(4, read, vec![sge(&la, 12288, 2048)])).unwrap();
    p.run(Duration::from_secs(1));

    let a: Vec<_> = Pair::wcs(&mut p.a).iter().map(|w| (w.wr_id, w.status, w.srq)).collect();
    assert_eq!(a, [1, 2, 3, 4].map(|i| (i, WcStatus::Success, None)), "the initiator's requests, in order");
    let b: Vec<_> = Pair::wcs(&mut p.b).iter().map(|w| (w.wr_id, w.status, w.qp_num, w.srq, w.byte_len)).collect();
    assert_eq!(
        b,
        [(201, WcStatus::Success, QB, Some(s2), 1500), (101, WcStatus::Success, QB, Some(s1), 100)],
        "each receive on its SRQ, qp_num the target's"
    );
    let (la_bytes, rb_bytes) = (p.a.mr(la.lkey).unwrap().to_vec(), p.b.mr(rb.lkey).unwrap().to_vec());
    assert_eq!(rb_bytes[4096..4096 + 1500], la_bytes[..1500]);
    assert_eq!(rb_bytes[..100], la_bytes[2000..2100]);
    assert_eq!(rb_bytes[8192..8192 + 3000], la_bytes[..3000]);
    assert_eq!(la_bytes[12288..12288 + 2048], rb_bytes[12288..12288 + 2048]);
    // On the wire: XRC's opcodes only (transport bits 101), both ways.
    assert!(p.sent_ab.iter().all(|o| u8::from(*o) & 0xe0 == 0xa0), "{:?}", p.sent_ab);
    assert!(p.sent_ab.contains(&Opcode::from(0xa0)) && p.sent_ab.contains(&Opcode::from(0xac)), "{:?}", p.sent_ab);
    assert!(p.sent_ba.iter().all(|o| u8::from(*o) & 0xe0 == 0xa0), "{:?}", p.sent_ba);
    // (The READ's responses acknowledge the requests before it: no ACK was needed.)
    assert_eq!(p.sent_ba, [Opcode::from(0xad), Opcode::from(0xaf)], "XRC's READ Response First and Last");
}

/// A request naming an SRQ of another domain, a plain SRQ or none at all is answered
/// "invalid request" (the initiator's completion REM_INV_REQ_ERR) and counted.
#[test]
fn a_request_naming_no_srq_of_the_domain_is_refused() {
    for case in ["other domain", "plain srq", "no such srq"] {
        let (mut p, _) = xrc_pair(2);
        let other = p.b.alloc_xrcd();
        let srq = match case {
            "other domain" => p.b.create_srq_xrc(8, 1, 0, other).unwrap(),
            "plain srq" => p.b.create_srq(8, 1, 0).unwrap(),
            _ => 0x77,
        };
        if case != "no such srq" {
            let rb = mr(&mut p.b, 4096);
            p.b.post_srq_recv(srq, recv(1, &rb, 0, 4096)).unwrap();
        }
        let la = mr(&mut p.a, 4096);
        let now = p.now;
        p.a.post_send_xrc(now, QA, srq, wr(9, SendOp::Send, vec![sge(&la, 0, 64)])).unwrap();
        p.run(Duration::from_secs(1));
        let a: Vec<_> = Pair::wcs(&mut p.a).iter().map(|w| (w.wr_id, w.status)).collect();
        assert_eq!(a, [(9, WcStatus::RemInvReqErr)], "{case}");
        assert_eq!(p.b.counters().xrc_srq_invalid, 1, "{case}");
        assert!(Pair::wcs(&mut p.b).is_empty(), "{case}: nothing received");
    }
}

/// What each XRC QP lacks is refused as the kernel refuses it: no receive queue on either,
/// no send queue on a target, every initiator request names an SRQ, no ATOMIC WRITE or FLUSH
/// (XRC's opcodes for them are unknown), no SRQ of its own; a domain in use stays.
#[test]
fn xrc_queues_refuse_what_they_lack() {
    let (mut p, xrcd) = xrc_pair(3);
    let now = p.now;
    let la = mr(&mut p.a, 4096);
    let send = || wr(1, SendOp::Send, vec![]);
    assert_eq!(p.a.post_recv(QA, RecvWr { wr_id: 1, sg_list: vec![] }), Err(Errno::EINVAL));
    assert_eq!(p.b.post_recv(QB, RecvWr { wr_id: 1, sg_list: vec![] }), Err(Errno::EINVAL));
    assert_eq!(p.b.post_send_xrc(now, QB, 1, send()), Err(Errno::EINVAL));
    assert_eq!(p.a.post_send(now, QA, send()), Err(Errno::EINVAL));
    assert_eq!(p.a.post_send_xrc(now, QA, 1 << 24, send()), Err(Errno::EINVAL));
    let aw = SendOp::AtomicWrite { remote_addr: 0, rkey: 1, data: [0; 8] };
    assert_eq!(p.a.post_send_xrc(now, QA, 1, wr(2, aw, vec![])), Err(Errno::EINVAL));
    let _ = la;
    // An RC QP takes no XRC request.
    p.a.create_qp(0x33, QpCap::default()).unwrap();
    assert_eq!(p.a.post_send_xrc(now, 0x33, 1, send()), Err(Errno::EINVAL));
    // No SRQ of its own, no unknown domain.
    let srq = p.b.create_srq(4, 1, 0).unwrap();
    let tgt = QpInit { service: TransportService::XrcTgt { xrcd }, srq: Some(srq), ..QpInit::default() };
    assert_eq!(p.b.create_qp_with(0x44, tgt), Err(Errno::EINVAL));
    let tgt = QpInit { service: TransportService::XrcTgt { xrcd: 0x99 }, ..QpInit::default() };
    assert_eq!(p.b.create_qp_with(0x44, tgt), Err(Errno::EINVAL));
    assert_eq!(p.b.create_srq_xrc(4, 1, 0, 0x99), Err(Errno::EINVAL));
    // The domain stays while its target and SRQ do.
    let s = p.b.create_srq_xrc(4, 1, 0, xrcd).unwrap();
    assert_eq!(p.b.dealloc_xrcd(xrcd), Err(Errno::EBUSY));
    p.b.destroy_qp(QB).unwrap();
    assert_eq!(p.b.dealloc_xrcd(xrcd), Err(Errno::EBUSY));
    p.b.destroy_srq(s).unwrap();
    assert_eq!(p.b.dealloc_xrcd(xrcd), Ok(()));
    assert_eq!(p.b.dealloc_xrcd(xrcd), Err(Errno::EINVAL));
    assert_eq!(p.b.qp_init(QB), None);
}

/// Over a lossy, duplicating, reordering wire, 100 seeds: every SEND reaches its SRQ once,
/// in the order it was posted to that SRQ.
#[test]
fn lossy_xrc_delivers_every_message_once_to_its_srq() {
    for seed in 0..100 {
        let (mut p, xrcd) = xrc_pair(1000 + seed);
        p.faults = super::tests::Faults { loss: 0.2, duplicate: 0.05, reorder: 0.05 };
        let srqs = [p.b.create_srq_xrc(64, 1, 0, xrcd).unwrap(), p.b.create_srq_xrc(64, 1, 0, xrcd).unwrap()];
        let rb = mr(&mut p.b, 64 * 2048);
        for i in 0..20u64 {
            let s = srqs[(i % 2) as usize];
            p.b.post_srq_recv(s, recv(i, &rb, i * 2048, 2048)).unwrap();
        }
        let la = mr(&mut p.a, 4096);
        let now = p.now;
        for i in 0..20u64 {
            let s = srqs[(i % 2) as usize];
            p.a.post_send_xrc(now, QA, s, wr(i, SendOp::Send, vec![sge(&la, 0, 1100 + i as u32)])).unwrap();
        }
        p.run(Duration::from_secs(30));
        let a: Vec<_> = Pair::wcs(&mut p.a).iter().map(|w| (w.wr_id, w.status)).collect();
        assert_eq!(a, (0..20).map(|i| (i, WcStatus::Success)).collect::<Vec<_>>(), "seed {seed}");
        let b: Vec<_> = Pair::wcs(&mut p.b).iter().map(|w| (w.wr_id, w.srq, w.byte_len)).collect();
        let want: Vec<_> = (0..20).map(|i| (i, Some(srqs[(i % 2) as usize]), 1100 + i as u32)).collect();
        assert_eq!(b, want, "seed {seed}");
        assert!(p.sent_ba.contains(&Opcode::from(0xb1)), "XRC ACKs: {:?}", p.sent_ba);
        assert!(p.sent_ba.iter().all(|o| *o == Opcode::from(0xb1)), "only ACKs and NAKs: {:?}", p.sent_ba);
    }
}
