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

/// XRC through the CM (what `rdma_xclient -c x` / `rdma_xserver -c x` do): an XRC target
/// listens on RDMA_PS_IB; the initiator's REQ says transport type 3, extended type 1, and
/// carries no responder resources, retry counts or SRQ bit (cm.c `cm_format_req`); an RC
/// listener rejects it (reason 28); the target's REP names its QP in the EE context field with
/// the SRQ bit (`cm_format_rep`), the SRQ number in its private data as rdma_xserver sends it;
/// the initiator's QP goes to RTS towards that target, and a SEND naming the SRQ arrives.
#[test]
fn xrc_through_the_cm_connects_an_initiator_to_a_target() {
    use crate::rc_cm::{events, resolve};
    use roce_cm::{ConnectParam, EventKind, PortSpace, QpType};
    use roce_wire::cm::{req::transport, CmMessage};
    use std::net::SocketAddr;

    const PORT: u16 = 7471;
    let mut net = SimNet::new(38);
    net.set_capture(true);
    let link = LinkConfig::with_latency(Duration::from_micros(30));
    let srv = net.add(Stack::new(StackConfig::new([2, 0, 0, 0, 0, 1], A, 24)), link.clone());
    let cli = net.add(Stack::new(StackConfig::new([2, 0, 0, 0, 0, 2], B, 24)), link);
    let s = net.node_mut::<Stack>(srv);
    assert!(s.create_id(PortSpace::Tcp, QpType::XrcTgt).is_err(), "ucma: TCP is RC only");
    let l = s.create_id(PortSpace::Ib, QpType::XrcTgt).unwrap();
    s.bind_addr(l, SocketAddr::new(IpAddr::V4(A), PORT)).unwrap();
    s.listen(l, 1).unwrap();
    let rc_l = s.create_id(PortSpace::Ib, QpType::Rc).unwrap();
    s.bind_addr(rc_l, SocketAddr::new(IpAddr::V4(A), PORT + 1)).unwrap();
    s.listen(rc_l, 1).unwrap();

    // To the RC listener first: rejected, reason 28 (cma_ib_check_req_qp_type).
    let c = net.node_mut::<Stack>(cli);
    let wrong = c.create_id(PortSpace::Ib, QpType::XrcIni).unwrap();
    resolve(&mut net, cli, wrong, SocketAddr::new(IpAddr::V4(A), PORT + 1));
    let c = net.node_mut::<Stack>(cli);
    c.create_qp_for_id(wrong).unwrap();
    let now = net.now();
    net.node_mut::<Stack>(cli).connect(now, wrong, &ConnectParam::default()).unwrap();
    net.run_for(Duration::from_millis(50));
    assert!(events(&mut net, cli).iter().any(|e| e.kind == EventKind::Rejected && e.status == 28));

    let c = net.node_mut::<Stack>(cli);
    let cid = c.create_id(PortSpace::Ib, QpType::XrcIni).unwrap();
    resolve(&mut net, cli, cid, SocketAddr::new(IpAddr::V4(A), PORT));
    let c = net.node_mut::<Stack>(cli);
    let ini = c.create_qp_for_id(cid).unwrap();
    assert_eq!(c.rc().qp_init(ini).unwrap().service, TransportService::XrcIni);
    let param = ConnectParam {
        responder_resources: 4,
        initiator_depth: 4,
        retry_count: 7,
        rnr_retry_count: 7,
        ..Default::default()
    };
    let now = net.now();
    net.node_mut::<Stack>(cli).connect(now, cid, &param).unwrap();
    net.run_for(Duration::from_millis(50));
    let ev = events(&mut net, srv);
    let req = ev.iter().find(|e| e.kind == EventKind::ConnectRequest).expect("the target's CONNECT_REQUEST");
    let sid = req.id;
    let s = net.node_mut::<Stack>(srv);
    assert!(s.create_qp_for_id(sid).is_err(), "a target's QP needs its domain");
    let xrcd = s.rc_mut().alloc_xrcd();
    let srq = s.rc_mut().create_srq_xrc(4, 1, 0, xrcd).unwrap();
    let buf = s.rc_mut().reg_mr(64, Access::ALL).unwrap();
    s.rc_mut()
        .post_srq_recv(srq, RecvWr { wr_id: 3, sg_list: vec![Sge { addr: buf.addr, length: 64, lkey: buf.lkey }] })
        .unwrap();
    let bad = QpInit { service: TransportService::Rc, ..QpInit::default() };
    assert!(s.create_qp_for_id_init(sid, bad).is_err(), "the id's type decides the service");
    let tgt = s
        .create_qp_for_id_init(sid, QpInit { service: TransportService::XrcTgt { xrcd }, ..QpInit::default() })
        .unwrap();
    let now = net.now();
    let accept = ConnectParam { private_data: srq.to_be_bytes().to_vec(), ..param.clone() };
    net.node_mut::<Stack>(srv).accept(now, sid, &accept).unwrap();
    net.run_for(Duration::from_millis(50));
    let est = events(&mut net, cli);
    let e = est.iter().find(|e| e.kind == EventKind::Established).expect("ESTABLISHED");
    let roce_cm::event::EventParam::Conn(p) = &e.param else { panic!("{e:?}") };
    assert_eq!(p.remote_qpn, tgt, "the initiator's peer is the target from the EE context field");
    assert_eq!(&p.private_data[..4], &srq.to_be_bytes(), "rdma_xserver's SRQ number");

    let msgs = crate::uc_srq::cm_messages(&net);
    let reqs: Vec<_> = msgs.iter().filter_map(|m| if let CmMessage::Req(r) = m { Some(*r) } else { None }).collect();
    let req = reqs.last().unwrap();
    assert_eq!((req.transport_service_type, req.extended_transport_type), (transport::EXTENDED, transport::EXT_XRC));
    assert_eq!(
        (req.local_qpn, req.responder_resources, req.retry_count, req.rnr_retry_count, req.srq),
        (ini, 0, 0, 0, false)
    );
    assert_eq!(req.initiator_depth, 4, "cm_format_req keeps an initiator's depth");
    let rep = msgs.iter().find_map(|m| if let CmMessage::Rep(r) = m { Some(*r) } else { None }).unwrap();
    assert_eq!((rep.local_qpn, rep.local_eecn, rep.srq, rep.initiator_depth), (0, tgt, true, 0));

    let c = net.node_mut::<Stack>(cli);
    assert_eq!(c.rc().qp_state(ini), Some(QpState::Rts));
    assert_eq!(c.rc().query_qp(ini).unwrap().dest_qpn, tgt);
    let mine = c.rc_mut().reg_mr(64, Access::ALL).unwrap();
    let sg = vec![Sge { addr: mine.addr, length: 16, lkey: mine.lkey }];
    let wr = SendWr { wr_id: 1, op: SendOp::Send, sg_list: sg, signaled: true, solicited: false, inline: None };
    let now = net.now();
    net.node_mut::<Stack>(cli).rc_mut().post_send_xrc(now, ini, srq, wr).unwrap();
    net.run_for(Duration::from_millis(20));
    let w = net.node_mut::<Stack>(cli).rc_mut().poll_cq().expect("the SEND's completion");
    assert_eq!((w.wr_id, w.status), (1, WcStatus::Success));
    let w = net.node_mut::<Stack>(srv).rc_mut().poll_cq().expect("the receive");
    assert_eq!((w.wr_id, w.status, w.qp_num, w.srq), (3, WcStatus::Success, tgt, Some(srq)));
}
