//! Congestion control through the engine: a CE-marked packet makes the responder's QP send a
//! CNP to the requester's QP, the CNP cuts the requester's rate, the requester then paces its
//! packets; with congestion control off nothing of that happens (only the counters move).
//! Through two stacks, as frames: crate::tests (`a_ce_frame_through_the_stacks_…`).

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use roce_wire::bth::Opcode;

use super::tests::{mr, sge, wr, Pair, A, B, QA, QB};
use super::*;

const G: u64 = 1_000_000_000;

fn dcqcn(line_rate: u64) -> Congestion {
    Congestion::Dcqcn(DcqcnParams::nic().with_line_rate(line_rate))
}

/// Every packet A has ready at `now`.
fn drain(rc: &mut Rc, now: Instant) -> Vec<RcPacket> {
    std::iter::from_fn(|| rc.poll_transmit(now)).collect()
}

/// A posts a WRITE of `len` bytes to B; its packets, all sent at once, each handed to B as
/// arrived CE-marked.
fn write_arriving_ce(p: &mut Pair, len: u32) -> Vec<RcPacket> {
    let src = mr(&mut p.a, 8192);
    let dst = mr(&mut p.b, 8192);
    let write = SendOp::Write { remote_addr: dst.addr, rkey: dst.rkey };
    p.a.post_send(p.now, QA, wr(1, write, vec![sge(&src, 0, len)])).unwrap();
    let pkts = drain(&mut p.a, p.now);
    for k in &pkts {
        p.b.handle_packet_ecn(p.now, A, Ecn::Ce, &k.bth, &k.ext, &k.payload);
    }
    pkts
}

#[test]
fn a_ce_marked_write_brings_one_cnp_to_the_senders_qp_and_it_cuts_the_rate() {
    let mut p = Pair::new(1024, 3);
    p.a.set_congestion(dcqcn(100 * G));
    p.b.set_congestion(dcqcn(100 * G));
    let now = p.now;
    let pkts = write_arriving_ce(&mut p, 4096);
    assert_eq!(pkts.len(), 4);
    assert!(pkts.iter().all(|k| Ecn::of(k.traffic_class) == Ecn::Ect0), "data goes out ECN-capable");
    let c = p.b.counters().cc;
    assert_eq!((c.ce_received, c.cnp_suppressed_by_interval), (4, 3), "one CNP per 4 µs");
    let out = drain(&mut p.b, now);
    assert_eq!(out.iter().map(|k| k.bth.opcode).collect::<Vec<_>>(), [Opcode::Cnp, Opcode::RcAcknowledge]);
    let cnp = &out[0];
    assert_eq!((cnp.bth.dest_qp, cnp.bth.psn, cnp.bth.pkey, cnp.bth.becn), (QA, 0, 0xffff, true));
    assert_eq!((cnp.src_qp, cnp.dst), (QB, A));
    assert_eq!(cnp.payload, [0u8; 16], "the 16 reserved bytes");
    assert_eq!(Ecn::of(cnp.traffic_class), Ecn::NotEct);
    assert_eq!(Ecn::of(out[1].traffic_class), Ecn::NotEct, "ACKs are not marked ECN-capable");
    assert_eq!(p.b.counters().cc.cnp_sent, 1);
    assert!(p.a.qp_rate(QA).is_none(), "no reaction point before a CNP");
    for k in &out {
        p.a.handle_packet_ecn(now, B, Ecn::of(k.traffic_class), &k.bth, &k.ext, &k.payload);
    }
    let c = p.a.counters().cc;
    assert_eq!((c.cnp_received, c.rate_cuts, c.cnp_ignored), (1, 1, 0));
    let rp = p.a.qp_rate(QA).unwrap();
    assert_eq!(rp.rate(), (100.0 * G as f64 * (1.0 - 1023.0 / 2048.0)).round() as u64);
    assert_eq!(rp.target_rate(), 100 * G);
    assert_eq!(Pair::wcs(&mut p.a).len(), 1, "the WRITE completed");
}

#[test]
fn with_congestion_control_off_marks_and_cnps_only_count() {
    let mut p = Pair::new(1024, 4);
    let now = p.now;
    let pkts = write_arriving_ce(&mut p, 2048);
    assert!(pkts.iter().all(|k| k.traffic_class == 0), "not ECN-capable: the QP's traffic class as set");
    let out = drain(&mut p.b, now);
    assert_eq!(out.iter().map(|k| k.bth.opcode).collect::<Vec<_>>(), [Opcode::RcAcknowledge], "no CNP");
    assert_eq!((p.b.counters().cc.ce_received, p.b.counters().cc.cnp_sent), (2, 0));
    // A CNP anyway (a peer with congestion control on): counted, nothing cut.
    let cnp = roce_wire::bth::Repr::new(Opcode::Cnp, QA, 0);
    p.a.handle_packet_ecn(now, B, Ecn::NotEct, &cnp, &ExtHeaders::default(), &[0; 16]);
    let c = p.a.counters().cc;
    assert_eq!((c.cnp_received, c.cnp_ignored, c.rate_cuts), (1, 1, 0));
    assert!(p.a.qp_rate(QA).is_none());
}

#[test]
fn a_cnp_for_another_qp_or_from_another_address_is_dropped_and_counted() {
    let mut p = Pair::new(1024, 5);
    p.a.set_congestion(dcqcn(10 * G));
    let now = p.now;
    let cnp = roce_wire::bth::Repr::new(Opcode::Cnp, QA, 0);
    let other = IpAddr::V4(Ipv4Addr::new(198, 18, 0, 9));
    p.a.handle_packet_ecn(now, other, Ecn::NotEct, &cnp, &ExtHeaders::default(), &[0; 16]);
    let unknown = roce_wire::bth::Repr::new(Opcode::Cnp, 0x77, 0);
    p.a.handle_packet_ecn(now, B, Ecn::NotEct, &unknown, &ExtHeaders::default(), &[0; 16]);
    let c = p.a.counters();
    assert_eq!((c.drop_wrong_source, c.drop_unknown_qp, c.cc.cnp_received), (1, 1, 0));
    assert!(p.a.qp_rate(QA).is_none());
}

/// After a cut the requester sends no faster than its rate: one packet, then a wake-up at
/// the time the next may go; a whole transfer under constant CE marking still completes,
/// paced, and the ACKs are never held back.
#[test]
fn a_cut_requester_paces_its_packets_and_still_completes() {
    let mut p = Pair::new(1024, 6);
    p.a.set_congestion(dcqcn(2 * G));
    p.b.set_congestion(dcqcn(2 * G));
    let cnp = roce_wire::bth::Repr::new(Opcode::Cnp, QA, 0);
    p.a.handle_packet_ecn(p.now, B, Ecn::NotEct, &cnp, &ExtHeaders::default(), &[0; 16]);
    let rate = p.a.qp_rate(QA).unwrap().rate();
    assert!(rate < 2 * G);
    let src = mr(&mut p.a, 1 << 16);
    let dst = mr(&mut p.b, 1 << 16);
    let write = SendOp::Write { remote_addr: dst.addr, rkey: dst.rkey };
    p.a.post_send(p.now, QA, wr(1, write, vec![sge(&src, 0, 1 << 16)])).unwrap();
    let now = p.now;
    let first = drain(&mut p.a, now);
    assert_eq!(first.len(), 1, "the gate closes after one packet");
    assert_eq!(p.a.counters().cc.paced, 1);
    // 1024 payload + RETH 16 + headers 14 + 20 + 8 + 12 + ICRC 4 = 1098 bytes at the rate.
    let gap = Duration::from_nanos((1098 * 8 * G).div_ceil(rate));
    assert_eq!(p.a.poll_timeout(), Some(now + gap));
    assert!(drain(&mut p.a, now + (gap - Duration::from_nanos(1))).is_empty());
    // The wake is delivered once: after the timer ran, no past time is asked for again.
    p.a.handle_timeout(now + gap);
    assert_ne!(p.a.poll_timeout(), Some(now + gap));
    assert_eq!(drain(&mut p.a, now + gap).len(), 1);
    // The rest of the message under constant marking.
    p.ce_ab = true;
    p.now = now + gap;
    p.run(Duration::from_millis(50));
    let wcs = Pair::wcs(&mut p.a);
    assert_eq!(wcs.len(), 1);
    assert_eq!(wcs[0].status, WcStatus::Success);
    let (ca, cb) = (p.a.counters().cc, p.b.counters().cc);
    assert!(cb.cnp_sent >= 2 && ca.cnp_received == cb.cnp_sent + 1, "{ca:?} {cb:?}");
    assert!(ca.rate_cuts >= 2, "{ca:?}");
    assert!(p.a.qp_rate(QA).unwrap().rate() < rate, "cut again");
    assert_eq!(p.b.mr(dst.lkey).unwrap(), p.a.mr(src.lkey).unwrap());
}
