//! Issue 22 items 3 and 4 on the simulated link with full RoCEv2 framing: UC QPs through
//! the CM (the REQ's Transport Service Type 1, the SRQ bits), UC and SRQs carrying data
//! between two engines, the SRQ limit event through `Stack::poll_async_event`, and a seeded
//! loss sweep for UC where the link's own counters and the responder's account for every
//! packet.

use crate::common;
use crate::rc_cm::{events, resolve};
use crate::rc_loss::{setup_with, Run};

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use common::Rng;
use roce_cm::rc::{
    Access, AsyncEvent, QpInit, QpState, RecvWr, SendOp, SendWr, Sge, TransportService, WcOpcode, WcStatus,
};
use roce_cm::{ConnectParam, EventKind, Instant, PortSpace, QpType, Stack, StackConfig};
use roce_net::{LinkConfig, NodeId, SimNet};
use roce_wire::cm::{req::transport, CmMessage};

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];
const PORT: u16 = 7472;

/// The CM messages captured on the link, as parsed by roce-wire.
pub(crate) fn cm_messages(net: &SimNet) -> Vec<CmMessage> {
    let mut out = Vec::new();
    for c in net.captured() {
        let Ok(f) = roce_wire::frame::parse(&c.data) else { continue };
        if f.repr.bth.dest_qp != 1 {
            continue;
        }
        let Ok(m) = roce_wire::mad::MadHeader::parse_bytes(f.repr.payload) else { continue };
        if let Ok(msg) = CmMessage::parse(m.attribute_id, &f.repr.payload[24..]) {
            out.push(msg);
        }
    }
    out
}

struct Conn {
    net: SimNet,
    srv: NodeId,
    cli: NodeId,
    sq: u32,
    cq: u32,
    s_srq: u32,
    c_srq: Option<u32>,
}

/// A UC connection through the CM on RDMA_PS_IB: the server's QP on an SRQ, the client's
/// on an SRQ when `client_srq`. `listener` is the server's QP type.
fn connect_uc(seed: u64, listener: QpType, client_srq: bool) -> Result<Conn, Vec<roce_cm::CmEvent>> {
    let mut net = SimNet::new(seed);
    net.set_capture(true);
    let mut ca = StackConfig::new(MAC_A, A, 24);
    ca.seed = seed;
    let mut cb = StackConfig::new(MAC_B, B, 24);
    cb.seed = seed + 1;
    let link = LinkConfig::with_latency(Duration::from_micros(30));
    let srv = net.add(Stack::new(ca), link.clone());
    let cli = net.add(Stack::new(cb), link);
    let s = net.node_mut::<Stack>(srv);
    let s_srq = s.rc_mut().create_srq(64, 1, 0).unwrap();
    let l = s.create_id(PortSpace::Ib, listener).unwrap();
    s.bind_addr(l, SocketAddr::new(IpAddr::V4(A), PORT)).unwrap();
    s.listen(l, 1).unwrap();
    let c = net.node_mut::<Stack>(cli);
    assert!(c.create_id(PortSpace::Tcp, QpType::Uc).is_err(), "ucma: TCP port space is RC only");
    let cid = c.create_id(PortSpace::Ib, QpType::Uc).unwrap();
    resolve(&mut net, cli, cid, SocketAddr::new(IpAddr::V4(A), PORT));
    let c = net.node_mut::<Stack>(cli);
    let c_srq = client_srq.then(|| c.rc_mut().create_srq(64, 1, 0).unwrap());
    let cq = c.create_qp_for_id_with_srq(cid, c_srq).unwrap();
    assert_eq!(c.rc().qp_init(cq).unwrap().service, TransportService::Uc);
    let param = ConnectParam { retry_count: 7, rnr_retry_count: 7, ..Default::default() };
    let now = net.now();
    net.node_mut::<Stack>(cli).connect(now, cid, &param).unwrap();
    net.run_for(Duration::from_millis(50));
    let ev = events(&mut net, srv);
    let Some(req) = ev.iter().find(|e| e.kind == EventKind::ConnectRequest) else {
        net.run_for(Duration::from_millis(50));
        return Err(events(&mut net, cli));
    };
    let sid = req.id;
    let now = net.now();
    let s = net.node_mut::<Stack>(srv);
    let sq = s.create_qp_for_id_with_srq(sid, Some(s_srq)).unwrap();
    s.accept(now, sid, &param).unwrap();
    assert_eq!(s.rc().qp_state(sq), Some(QpState::Rts));
    net.run_for(Duration::from_millis(50));
    assert!(events(&mut net, cli).iter().any(|e| e.kind == EventKind::Established));
    assert!(events(&mut net, srv).iter().any(|e| e.kind == EventKind::Established));
    Ok(Conn { net, srv, cli, sq, cq, s_srq, c_srq })
}

#[test]
fn uc_through_the_cm_carries_transport_type_one_and_the_srq_bits() {
    let mut c = connect_uc(1, QpType::Uc, false).expect("established");
    let msgs = cm_messages(&c.net);
    let req = msgs.iter().find_map(|m| if let CmMessage::Req(r) = m { Some(*r) } else { None }).unwrap();
    let rep = msgs.iter().find_map(|m| if let CmMessage::Rep(r) = m { Some(*r) } else { None }).unwrap();
    assert_eq!(req.transport_service_type, transport::UC);
    assert_eq!((req.srq, rep.srq), (false, true), "the client's QP has its own RQ, the server's an SRQ");
    assert_eq!(req.local_qpn, c.cq);
    assert_eq!(rep.local_qpn, c.sq);
    let (srv, cli) = (c.net.node::<Stack>(c.srv).rc(), c.net.node::<Stack>(c.cli).rc());
    assert_eq!(
        srv.qp_init(c.sq).unwrap(),
        QpInit { service: TransportService::Uc, srq: Some(c.s_srq), ..QpInit::default() }
    );
    let (s, k) = (srv.query_qp(c.sq).unwrap(), cli.query_qp(c.cq).unwrap());
    assert_eq!((s.rq_psn, k.rq_psn), (k.sq_psn, s.sq_psn), "PSNs from the REQ and REP as for RC");
    assert_eq!((s.dest_qpn, k.dest_qpn), (c.cq, c.sq));
    assert_eq!((s.retry_cnt, s.rnr_retry, s.timeout, k.retry_cnt), (0, 0, 0, 0), "UC keeps no RC-only attributes");
    let _ = c.net.node_mut::<Stack>(c.cli);
}

#[test]
fn uc_request_to_an_rc_listener_is_rejected() {
    let ev = connect_uc(2, QpType::Rc, false).err().expect("rejected");
    assert!(ev.iter().any(|e| e.kind == EventKind::Rejected), "{ev:?}");
}

/// Data both ways over the CM-made UC pair, both ends on SRQs; the server's limit event
/// comes through the stack's async path once.
#[test]
fn uc_with_srqs_through_the_cm_moves_data_and_raises_the_limit_event() {
    let mut c = connect_uc(3, QpType::Uc, true).expect("established");
    let now = c.net.now();
    let (srv, cli, sq, cq, s_srq, c_srq) = (c.srv, c.cli, c.sq, c.cq, c.s_srq, c.c_srq.unwrap());
    let s = c.net.node_mut::<Stack>(srv);
    let sbuf = s.rc_mut().reg_mr(1 << 16, Access::ALL).unwrap();
    for k in 0..6u64 {
        let sge = Sge { addr: sbuf.addr + k * 4096, length: 4096, lkey: sbuf.lkey };
        s.rc_mut().post_srq_recv(s_srq, RecvWr { wr_id: k, sg_list: vec![sge] }).unwrap();
    }
    s.rc_mut().modify_srq(s_srq, 3).unwrap();
    let k = c.net.node_mut::<Stack>(cli);
    let cbuf = k.rc_mut().reg_mr(1 << 16, Access::ALL).unwrap();
    let msg: Vec<u8> = (0..5000u32).map(|i| (i * 13) as u8).collect();
    k.rc_mut().mr_mut(cbuf.lkey).unwrap()[..5000].copy_from_slice(&msg);
    k.rc_mut()
        .post_srq_recv(
            c_srq,
            RecvWr { wr_id: 90, sg_list: vec![Sge { addr: cbuf.addr + 8192, length: 64, lkey: cbuf.lkey }] },
        )
        .unwrap();
    for i in 0..4u64 {
        let len = 1000 + i as u32 * 1000;
        let w = SendWr {
            wr_id: i,
            op: SendOp::SendWithImm(i as u32),
            sg_list: vec![Sge { addr: cbuf.addr, length: len, lkey: cbuf.lkey }],
            signaled: true,
            solicited: false,
            inline: None,
        };
        k.rc_mut().post_send(now, cq, w).unwrap();
    }
    c.net.run_for(Duration::from_millis(50));
    let s = c.net.node_mut::<Stack>(srv);
    let got: Vec<_> = std::iter::from_fn(|| s.rc_mut().poll_cq()).collect();
    assert_eq!(got.len(), 4);
    for (i, w) in got.iter().enumerate() {
        assert_eq!((w.wr_id, w.status, w.opcode, w.qp_num), (i as u64, WcStatus::Success, WcOpcode::Recv, sq));
        assert_eq!((w.byte_len, w.imm_data), (1000 + i as u32 * 1000, Some(i as u32)));
        let at = i * 4096;
        assert_eq!(s.rc().mr(sbuf.lkey).unwrap()[at..at + w.byte_len as usize], msg[..w.byte_len as usize]);
    }
    // 6 posted, 4 taken: fewer than 3 left after the 4th: one event, then disarmed.
    let async_events: Vec<_> = std::iter::from_fn(|| s.poll_async_event()).collect();
    assert_eq!(async_events, [AsyncEvent::SrqLimitReached(s_srq)]);
    assert_eq!(s.rc().query_srq(s_srq).unwrap().srq_limit, 0);
    assert_eq!(s.rc().counters().sent_pkts, 0, "no ACKs");
    // The other way: an RDMA WRITE with immediate into the client's SRQ receive.
    let w = SendWr {
        wr_id: 50,
        op: SendOp::WriteWithImm { remote_addr: cbuf.addr + 20000, rkey: cbuf.rkey, imm: 7 },
        sg_list: vec![Sge { addr: sbuf.addr, length: 1000, lkey: sbuf.lkey }],
        signaled: true,
        solicited: false,
        inline: None,
    };
    let now = c.net.now();
    c.net.node_mut::<Stack>(srv).rc_mut().post_send(now, sq, w).unwrap();
    c.net.run_for(Duration::from_millis(50));
    let k = c.net.node_mut::<Stack>(cli);
    let sent: Vec<_> = std::iter::from_fn(|| k.rc_mut().poll_cq()).collect();
    let recv = sent.iter().find(|w| w.wr_id == 90).expect("the client's SRQ receive");
    assert_eq!((recv.opcode, recv.byte_len, recv.imm_data), (WcOpcode::RecvRdmaWithImm, 1000, Some(7)));
    assert_eq!(k.rc().mr(cbuf.lkey).unwrap()[20000..21000], msg[..1000]);
    assert_eq!(sent.iter().filter(|w| w.wr_id < 4 && w.status == WcStatus::Success).count(), 4);
    // A QP still uses each SRQ.
    assert_eq!(k.rc_mut().destroy_srq(c_srq), Err(roce_cm::Errno::EBUSY));
}

/// UC QPs set by hand (as ibv_uc_pingpong does) on a lossy link, 200 seeds: every message
/// the responder completes is whole and in order; A's link stats and B's counters account
/// for every packet (sent = lost + received; received = delivered + discarded + dropped).
#[test]
fn uc_seeded_loss_sweep_on_the_simulated_link() {
    let mut lost_total = 0;
    let mut delivered_total = 0;
    for seed in 0..200u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mtu = 256u32 << rng.below(4);
        let loss = [0.0, 0.05, 0.15, 0.3][(seed % 4) as usize];
        let link = LinkConfig { latency: Duration::from_micros(20), loss, ..LinkConfig::default() };
        let uc = QpInit { service: TransportService::Uc, ..QpInit::default() };
        let Run { mut net, a, b, qa, qb } = setup_with(seed, link, mtu, uc);
        let now = net.now();
        let sa = net.node_mut::<Stack>(a).rc_mut();
        let la = sa.reg_mr(1 << 15, Access::ALL).unwrap();
        let data = rng.bytes(1 << 15);
        sa.mr_mut(la.lkey).unwrap().copy_from_slice(&data);
        // Ten messages on the lossy link, then an empty one on a clean link, which closes
        // whatever message the losses left open at B.
        let lens: Vec<u32> = (0..10).map(|_| rng.below(4000) as u32).chain([0]).collect();
        let mut npkts = Vec::new();
        let mut closing = None;
        for (i, &len) in lens.iter().enumerate() {
            npkts.push(u64::from(len.div_ceil(mtu).max(1)));
            let w = SendWr {
                wr_id: i as u64,
                op: SendOp::SendWithImm(i as u32),
                sg_list: vec![Sge { addr: la.addr + i as u64 * 1000, length: len, lkey: la.lkey }],
                signaled: true,
                solicited: false,
                inline: None,
            };
            if i < 10 {
                sa.post_send(now, qa, w).unwrap();
            } else {
                closing = Some(w);
            }
        }
        let sb = net.node_mut::<Stack>(b).rc_mut();
        let rb = sb.reg_mr(11 * 4096, Access::ALL).unwrap();
        for i in 0..11u64 {
            let sge = Sge { addr: rb.addr + i * 4096, length: 4096, lkey: rb.lkey };
            sb.post_recv(qb, RecvWr { wr_id: i, sg_list: vec![sge] }).unwrap();
        }
        net.run_for(Duration::from_millis(200));
        let lost_before_closing = net.stats(a).lost;
        net.set_link(a, LinkConfig { latency: Duration::from_micros(20), ..LinkConfig::default() });
        let now = net.now();
        net.node_mut::<Stack>(a).rc_mut().post_send(now, qa, closing.take().unwrap()).unwrap();
        net.run_for(Duration::from_millis(10));
        assert_eq!(net.stats(a).lost, lost_before_closing);
        let sa = net.node_mut::<Stack>(a).rc_mut();
        let wa: Vec<_> = std::iter::from_fn(|| sa.poll_cq()).collect();
        assert_eq!(wa.len(), 11, "seed {seed}: the requester completes every send");
        assert!(wa.iter().all(|w| w.status == WcStatus::Success));
        let sent = sa.counters().sent_pkts;
        let sb = net.node_mut::<Stack>(b).rc_mut();
        let wb: Vec<_> = std::iter::from_fn(|| sb.poll_cq()).collect();
        let mut last = None;
        let mut delivered_pkts = 0;
        for (slot, w) in wb.iter().enumerate() {
            let k = w.imm_data.unwrap() as usize;
            assert_eq!((w.status, w.wr_id), (WcStatus::Success, slot as u64), "seed {seed}");
            assert!(last.is_none_or(|l| l < k), "seed {seed}: message {k} after {last:?}");
            last = Some(k);
            let len = lens[k] as usize;
            assert_eq!(w.byte_len as usize, len, "seed {seed}");
            let at = slot * 4096;
            assert_eq!(sb.mr(rb.lkey).unwrap()[at..at + len], data[k * 1000..k * 1000 + len], "seed {seed}: {k} whole");
            delivered_pkts += npkts[k];
        }
        let c = *sb.counters();
        let stats = net.stats(a);
        // Every frame A sent is an RC-engine packet here (the MACs are given: no ARP).
        assert_eq!(stats.sent, sent, "seed {seed}");
        assert_eq!(stats.sent, stats.lost + c.rcvd_pkts, "seed {seed}: {stats:?}");
        let accounted =
            delivered_pkts + c.uc_partial_discarded_pkts + c.uc_drop_psn_gap + c.uc_drop_no_recv + c.uc_drop_invalid;
        assert_eq!(accounted, c.rcvd_pkts, "seed {seed}: {c:?}");
        if stats.lost == 0 {
            assert_eq!(wb.len(), 11, "seed {seed}: a clean link delivers everything");
        }
        lost_total += stats.lost;
        assert_eq!(wb.last().and_then(|w| w.imm_data), Some(10), "seed {seed}: the closing message");
        delivered_total += wb.len() - 1;
    }
    eprintln!("200 seeds: {lost_total} frames lost, {delivered_total} of 2000 messages delivered");
    assert!(lost_total > 0 && delivered_total > 1000);
    let _ = Instant::ZERO;
}
