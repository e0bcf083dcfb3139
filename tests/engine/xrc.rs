//! Issue 37 item 2: XRC through two whole stacks on the simulated link. An initiator QP on
//! one stack sends into an XRC SRQ of the other's domain through its target QP; the frames
//! on the wire carry XRC's opcodes and the XRCETH, parse as such, and the receive completes
//! on the SRQ the request named.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use roce_cm::rc::{Access, QpAttr, QpInit, QpState, RecvWr, SendOp, SendWr, Sge, TransportService, WcStatus};
use roce_cm::{Stack, StackConfig};
use roce_net::{LinkConfig, SimNet};
use roce_wire::demux::{Checks, Payload, Sliced};

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const INI: u32 = 0x1001;
const TGT: u32 = 0x2002;

#[test]
fn an_initiator_sends_through_a_target_into_the_named_xrc_srq() {
    let mut net = SimNet::new(37);
    net.set_capture(true);
    let a = net.add(
        Stack::new(StackConfig::new([2, 0, 0, 0, 0, 1], A, 24)),
        LinkConfig::with_latency(Duration::from_micros(20)),
    );
    let b = net.add(
        Stack::new(StackConfig::new([2, 0, 0, 0, 0, 2], B, 24)),
        LinkConfig::with_latency(Duration::from_micros(20)),
    );
    let now = net.now();
    let rb = net.node_mut::<Stack>(b).rc_mut();
    let xrcd = rb.alloc_xrcd();
    let srq = rb.create_srq_xrc(16, 1, 0, xrcd).unwrap();
    let buf = rb.reg_mr(4096, Access::ALL).unwrap();
    rb.post_srq_recv(srq, RecvWr { wr_id: 5, sg_list: vec![Sge { addr: buf.addr, length: 4096, lkey: buf.lkey }] })
        .unwrap();
    rb.create_qp_with(TGT, QpInit { service: TransportService::XrcTgt { xrcd }, ..QpInit::default() }).unwrap();
    let mut at = QpAttr::new(IpAddr::V4(A), INI);
    at.access = Access::ALL;
    for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
        rb.modify_qp(now, TGT, s, &at).unwrap();
    }
    let ra = net.node_mut::<Stack>(a).rc_mut();
    ra.create_qp_with(INI, QpInit { service: TransportService::XrcIni, ..QpInit::default() }).unwrap();
    let mine = ra.reg_mr(4096, Access::ALL).unwrap();
    ra.mr_mut(mine.lkey).unwrap()[..300].fill(0x5c);
    let at = QpAttr::new(IpAddr::V4(B), TGT);
    for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
        ra.modify_qp(now, INI, s, &at).unwrap();
    }
    let sg = vec![Sge { addr: mine.addr, length: 300, lkey: mine.lkey }];
    let wr =
        SendWr { wr_id: 9, op: SendOp::SendWithImm(7), sg_list: sg, signaled: true, solicited: false, inline: None };
    ra.post_send_xrc(now, INI, srq, wr).unwrap();
    net.run_for(Duration::from_millis(20));

    let w = net.node_mut::<Stack>(a).rc_mut().poll_cq().expect("the SEND's completion");
    assert_eq!((w.wr_id, w.status), (9, WcStatus::Success));
    let rb = net.node_mut::<Stack>(b).rc_mut();
    let w = rb.poll_cq().expect("the receive");
    assert_eq!(
        (w.wr_id, w.status, w.qp_num, w.srq, w.byte_len, w.imm_data),
        (5, WcStatus::Success, TGT, Some(srq), 300, Some(7))
    );
    assert!(rb.mr(buf.lkey).unwrap()[..300].iter().all(|b| *b == 0x5c));
    // The request as the wire crate reads it back: XRC SEND Only with Immediate, the XRCETH
    // naming the SRQ; the answer an XRC ACK.
    let mut seen = Vec::new();
    for c in net.captured() {
        if let Ok(Sliced { payload: Payload::RoceV2 { packet, .. }, .. }) =
            Sliced::from_ethernet(&c.data, Checks::Strict)
        {
            seen.push((u8::from(packet.opcode()), packet.xrceth().map(|x| x.xrc_srq())));
        }
    }
    assert_eq!(seen, [(0xa5, Some(srq)), (0xb1, None)], "XRC SEND Only with Immediate, then XRC ACK");
}
