//! Issue 14 item 2: connected mode through the CM on the simulated link. The REQ and REP
//! carry the starting PSNs, MTU, retry and RNR counts, responder resources and initiator
//! depth; rdma_accept and the REP move the QPs through INIT/RTR/RTS as cma.c does; data
//! moves both ways (SEND, RDMA WRITE, RDMA READ, atomics); a disconnect flushes.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use roce_cm::rc::{Access, QpState, RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus};
use roce_cm::{CmId, ConnectParam, EventKind, EventParam, Instant, PortSpace, QpType, Stack, StackConfig};
use roce_net::{LinkConfig, NodeId, SimNet};

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const PORT: u16 = 7471;

struct Pair {
    net: SimNet,
    srv: NodeId,
    cli: NodeId,
    sid: CmId,
    cid: CmId,
    sq: u32,
    cq: u32,
}

pub(crate) use crate::common::sim::{events, resolve};

fn connect(seed: u64, link: LinkConfig) -> Pair {
    connect_with(seed, link, |_| {})
}

/// [`connect`] with each side's configuration changed by `tune` first.
fn connect_with(seed: u64, link: LinkConfig, tune: impl Fn(&mut StackConfig)) -> Pair {
    let mut net = SimNet::new(seed);
    let mut ca = StackConfig::new([2, 0, 0, 0, 0, 1], A, 24);
    ca.seed = seed;
    let mut cb = StackConfig::new([2, 0, 0, 0, 0, 2], B, 24);
    cb.seed = seed + 1;
    tune(&mut ca);
    tune(&mut cb);
    let srv = net.add(Stack::new(ca), link.clone());
    let cli = net.add(Stack::new(cb), link);
    let s = net.node_mut::<Stack>(srv);
    let l = s.create_id(PortSpace::Tcp, QpType::Rc).unwrap();
    s.bind_addr(l, SocketAddr::new(IpAddr::V4(A), PORT)).unwrap();
    s.listen(l, 1).unwrap();
    let cid = net.node_mut::<Stack>(cli).create_id(PortSpace::Tcp, QpType::Rc).unwrap();
    resolve(&mut net, cli, cid, SocketAddr::new(IpAddr::V4(A), PORT));
    let c = net.node_mut::<Stack>(cli);
    let cq = c.create_qp_for_id(cid).unwrap();
    assert_eq!(c.rc().qp_state(cq), Some(QpState::Init));
    let param = super::common::sim::rc_connect_param();
    let now = net.now();
    net.node_mut::<Stack>(cli).connect(now, cid, &param).unwrap();
    net.run_for(Duration::from_millis(50));
    let ev = events(&mut net, srv);
    let req = ev.iter().find(|e| e.kind == EventKind::ConnectRequest).expect("CONNECT_REQUEST");
    let EventParam::Conn(p) = &req.param else { panic!() };
    assert_eq!((p.responder_resources, p.initiator_depth, p.retry_count, p.rnr_retry_count), (4, 4, 7, 7));
    assert_eq!(p.remote_qpn, cq);
    let sid = req.id;
    let now = net.now();
    let s = net.node_mut::<Stack>(srv);
    let sq = s.create_qp_for_id(sid).unwrap();
    s.accept(now, sid, &param).unwrap();
    assert_eq!(s.rc().qp_state(sq), Some(QpState::Rts), "rdma_accept: RTR and RTS before the REP");
    net.run_for(Duration::from_millis(50));
    assert!(events(&mut net, cli).iter().any(|e| e.kind == EventKind::Established));
    assert!(events(&mut net, srv).iter().any(|e| e.kind == EventKind::Established));
    Pair { net, srv, cli, sid, cid, sq, cq }
}

#[test]
fn connect_negotiates_psns_and_moves_both_qps_to_rts() {
    let mut p = connect(1, LinkConfig::with_latency(Duration::from_micros(50)));
    let s = p.net.node::<Stack>(p.srv).rc().query_qp(p.sq).unwrap();
    let c = p.net.node::<Stack>(p.cli).rc().query_qp(p.cq).unwrap();
    assert_eq!(p.net.node::<Stack>(p.cli).rc().qp_state(p.cq), Some(QpState::Rts));
    // Each side's receive PSN is the other's send PSN; each names the other's QP.
    assert_eq!((s.rq_psn, c.rq_psn), (c.sq_psn, s.sq_psn));
    assert_eq!((s.dest_qpn, c.dest_qpn), (p.cq, p.sq));
    assert_eq!((s.path_mtu, c.path_mtu), (2048, 2048)); // StackConfig's MTU code 4
    assert_eq!((s.retry_cnt, c.retry_cnt, s.rnr_retry, c.rnr_retry), (7, 7, 7, 7));
    assert_eq!((s.max_rd_atomic, s.max_dest_rd_atomic), (4, 4));
    let _ = (p.sid, p.cid, p.net.node_mut::<Stack>(p.cli));
}

fn data_both_ways(p: &mut Pair) {
    let now = p.net.now();
    let (srv, cli, sq, cq) = (p.srv, p.cli, p.sq, p.cq);
    // Server: a receive buffer and a region the client may read, write and add to.
    let s = p.net.node_mut::<Stack>(srv).rc_mut();
    let sbuf = s.reg_mr(16384, Access::ALL).unwrap();
    s.mr_mut(sbuf.lkey).unwrap()[8192..12288].fill(0x5a);
    s.post_recv(sq, RecvWr { wr_id: 1, sg_list: vec![Sge { addr: sbuf.addr, length: 8192, lkey: sbuf.lkey }] })
        .unwrap();
    let c = p.net.node_mut::<Stack>(cli).rc_mut();
    let cbuf = c.reg_mr(16384, Access::ALL).unwrap();
    let msg: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
    c.mr_mut(cbuf.lkey).unwrap()[..5000].copy_from_slice(&msg);
    let sg = |off: u64, len: u32| vec![Sge { addr: cbuf.addr + off, length: len, lkey: cbuf.lkey }];
    let wrs = [
        SendWr {
            wr_id: 10,
            op: SendOp::SendWithImm(0x1234),
            sg_list: sg(0, 5000),
            signaled: true,
            solicited: true,
            inline: None,
        },
        SendWr {
            wr_id: 11,
            op: SendOp::Write { remote_addr: sbuf.addr + 12288, rkey: sbuf.rkey },
            sg_list: sg(0, 3000),
            signaled: true,
            solicited: false,
            inline: None,
        },
        SendWr {
            wr_id: 12,
            op: SendOp::Read { remote_addr: sbuf.addr + 8192, rkey: sbuf.rkey },
            sg_list: sg(8192, 4096),
            signaled: true,
            solicited: false,
            inline: None,
        },
        SendWr {
            wr_id: 13,
            op: SendOp::CompareSwap { remote_addr: sbuf.addr + 16376, rkey: sbuf.rkey, compare: 0, swap: 99 },
            sg_list: sg(16376, 8),
            signaled: true,
            solicited: false,
            inline: None,
        },
    ];
    for w in wrs {
        c.post_send(now, cq, w).unwrap();
    }
    p.net.run_for(Duration::from_millis(100));
    let c = p.net.node_mut::<Stack>(cli).rc_mut();
    let wc: Vec<_> = std::iter::from_fn(|| c.poll_cq()).map(|w| (w.wr_id, w.status, w.opcode)).collect();
    assert_eq!(
        wc,
        [
            (10, WcStatus::Success, WcOpcode::Send),
            (11, WcStatus::Success, WcOpcode::RdmaWrite),
            (12, WcStatus::Success, WcOpcode::RdmaRead),
            (13, WcStatus::Success, WcOpcode::CompSwap)
        ]
    );
    assert!(c.mr(cbuf.lkey).unwrap()[8192..12288].iter().all(|b| *b == 0x5a));
    let s = p.net.node_mut::<Stack>(srv).rc_mut();
    let w = s.poll_cq().unwrap();
    assert_eq!((w.wr_id, w.opcode, w.byte_len, w.imm_data), (1, WcOpcode::Recv, 5000, Some(0x1234)));
    let m = s.mr(sbuf.lkey).unwrap();
    assert_eq!(m[..5000], msg[..]);
    assert_eq!(m[12288..15288], msg[..3000]);
    assert_eq!(u64::from_ne_bytes(m[16376..].try_into().unwrap()), 99);
}

#[test]
fn data_moves_over_the_connection_and_disconnect_flushes() {
    let mut p = connect(2, LinkConfig::with_latency(Duration::from_micros(50)));
    data_both_ways(&mut p);
    // One receive outstanding on each side, then the client disconnects.
    let (srv, cli, sq, cq) = (p.srv, p.cli, p.sq, p.cq);
    for (n, q) in [(srv, sq), (cli, cq)] {
        p.net.node_mut::<Stack>(n).rc_mut().post_recv(q, RecvWr { wr_id: 77, sg_list: vec![] }).unwrap();
    }
    let now = p.net.now();
    p.net.node_mut::<Stack>(cli).disconnect(now, p.cid).unwrap();
    p.net.run_for(Duration::from_millis(50));
    assert!(events(&mut p.net, srv).iter().any(|e| e.kind == EventKind::Disconnected));
    // The DREQ left the server's QP alone (cma_ib_handler, librdmacm's DISCONNECTED): its
    // consumer's rdma_disconnect flushes it.
    assert_eq!(p.net.node::<Stack>(srv).rc().qp_state(sq), Some(QpState::Rts));
    assert!(p.net.node_mut::<Stack>(srv).rc_mut().poll_cq().is_none());
    let now = p.net.now();
    p.net.node_mut::<Stack>(srv).disconnect(now, p.sid).unwrap();
    for (n, q) in [(srv, sq), (cli, cq)] {
        let s = p.net.node_mut::<Stack>(n).rc_mut();
        assert_eq!(s.qp_state(q), Some(QpState::Err));
        let w = s.poll_cq().unwrap();
        assert_eq!((w.wr_id, w.status, w.opcode), (77, WcStatus::WrFlushErr, WcOpcode::Recv));
    }
}

/// The peer's DREQ overtakes its ACK of our last SEND (rxe posts the receive's completion
/// before it sends the ACK, so its consumer's rdma_disconnect can put the DREQ on the wire
/// first; seen against 7.2's rxe): the DREQ reports DISCONNECTED and leaves our QP in RTS, so
/// the ACK behind it still completes the SEND successfully; our own disconnect then moves the
/// QP to ERR.
#[test]
fn a_send_acked_after_the_peers_dreq_completes_successfully() {
    let mut p = connect(4, LinkConfig::with_latency(Duration::from_micros(50)));
    let (srv, cli, sq, cq) = (p.srv, p.cli, p.sq, p.cq);
    p.net.node_mut::<Stack>(srv).rc_mut().post_recv(sq, RecvWr { wr_id: 1, sg_list: vec![] }).unwrap();
    let now = p.net.now();
    let send = SendWr { wr_id: 9, op: SendOp::Send, sg_list: vec![], signaled: true, solicited: false, inline: None };
    p.net.node_mut::<Stack>(cli).rc_mut().post_send(now, cq, send).unwrap();
    // The SEND is on its way; from now on everything for the client is captured and lost
    // until it is replayed below (a cable's faults apply to the frames crossing it later).
    p.net.run_for(Duration::from_micros(10));
    let clean = LinkConfig::with_latency(Duration::from_micros(50));
    p.net.set_link(cli, LinkConfig { loss: 1.0, ..clean.clone() });
    let lost_from = p.net.now();
    p.net.run_for(Duration::from_millis(1));
    let w = p.net.node_mut::<Stack>(srv).rc_mut().poll_cq().expect("the server's receive");
    assert_eq!((w.wr_id, w.status), (1, WcStatus::Success));
    let now = p.net.now();
    p.net.node_mut::<Stack>(srv).disconnect(now, p.sid).unwrap();
    p.net.run_for(Duration::from_micros(10));
    // After Ethernet, IPv4 and UDP: the BTH opcode at 42 (0x11 RC ACKNOWLEDGE), and behind
    // BTH and DETH the MAD's attribute ID at 78 (0x0015 DREQ).
    let from_srv: Vec<_> =
        p.net.captured().iter().filter(|c| c.from == srv && c.time >= lost_from).map(|c| c.data.clone()).collect();
    let ack = from_srv.iter().find(|f| f.len() > 42 && f[42] == 0x11).expect("the server's ACK").clone();
    let dreq = from_srv.iter().find(|f| f.len() > 80 && f[78..80] == [0, 0x15]).expect("the server's DREQ").clone();
    p.net.set_link(cli, clean);
    p.net.inject(srv, &dreq);
    p.net.run_for(Duration::from_micros(60));
    p.net.inject(srv, &ack);
    p.net.run_for(Duration::from_millis(1));
    let ev = events(&mut p.net, cli);
    assert!(ev.iter().any(|e| e.kind == EventKind::Disconnected));
    let c = p.net.node_mut::<Stack>(cli);
    let w = c.rc_mut().poll_cq().expect("the SEND's completion");
    assert_eq!((w.wr_id, w.status, w.opcode), (9, WcStatus::Success, WcOpcode::Send));
    assert_eq!(c.rc().qp_state(cq), Some(QpState::Rts));
    let now = p.net.now();
    p.net.node_mut::<Stack>(cli).disconnect(now, p.cid).unwrap();
    assert_eq!(p.net.node::<Stack>(cli).rc().qp_state(cq), Some(QpState::Err));
}

/// `rxe_flush_icrc` (spec/kernel-findings.md §6): a FLUSH leaves with rxe's ICRC (the
/// headers covered twice), which a stack with the setting accepts and answers and one without
/// drops as `bad_icrc`, as rxe drops the IBA's.
#[test]
fn rxe_flush_icrc_is_what_both_ends_must_agree_on() {
    use roce_cm::rc::{FlushLevel, FLUSH_GLOBAL};
    use roce_cm::DropReason;
    for server_has_it in [true, false] {
        let mut p = connect_with(5, LinkConfig::with_latency(Duration::from_micros(50)), |c| c.rxe_flush_icrc = true);
        let (srv, cli, sq, cq) = (p.srv, p.cli, p.sq, p.cq);
        p.net.set_capture(true);
        let now = p.net.now();
        let s = p.net.node_mut::<Stack>(srv);
        let mut at = s.rc().query_qp(sq).unwrap();
        at.access = at.access.union(Access::FLUSH_GLOBAL);
        s.rc_mut().modify_qp(now, sq, QpState::Rts, &at).unwrap();
        let mr = s.rc_mut().reg_mr(4096, Access::ALL.union(Access::FLUSH_GLOBAL)).unwrap();
        if !server_has_it {
            // The same server, now as a stack without the setting would check it.
            s.set_rxe_flush_icrc(false);
        }
        let before = p.net.node::<Stack>(srv).counters().dropped(DropReason::BadIcrc);
        let op = SendOp::Flush {
            remote_addr: mr.addr,
            rkey: mr.rkey,
            len: 4096,
            placement: FLUSH_GLOBAL,
            level: FlushLevel::Range,
        };
        let wr = SendWr { wr_id: 3, op, sg_list: vec![], signaled: true, solicited: false, inline: None };
        p.net.node_mut::<Stack>(cli).rc_mut().post_send(now, cq, wr).unwrap();
        p.net.run_for(Duration::from_millis(5));
        let flush = p.net.captured().iter().find(|c| c.from == cli && c.data.get(42) == Some(&0x1c)).expect("a FLUSH");
        let f = &flush.data;
        let n = f.len();
        let rxe = roce_wire::icrc::compute_rxe_flush(&f[14..n - 4], roce_wire::icrc::IpVersion::V4, 20).unwrap();
        assert_eq!(roce_wire::icrc::from_wire(f[n - 4..].try_into().unwrap()), rxe, "rxe's ICRC on the wire");
        let dropped = p.net.node::<Stack>(srv).counters().dropped(DropReason::BadIcrc) - before;
        let wc = p.net.node_mut::<Stack>(cli).rc_mut().poll_cq();
        if server_has_it {
            assert_eq!(dropped, 0);
            let w = wc.expect("the FLUSH's completion");
            assert_eq!((w.wr_id, w.status, w.opcode), (3, WcStatus::Success, WcOpcode::Flush));
        } else {
            assert!(dropped >= 1, "the standard check refuses rxe's ICRC");
            assert!(wc.is_none(), "unanswered: {wc:?}");
        }
    }
}

#[test]
fn connected_data_survives_a_lossy_link() {
    let link = LinkConfig {
        latency: Duration::from_micros(50),
        loss: 0.2,
        duplicate: 0.05,
        reorder: 0.05,
        ..LinkConfig::default()
    };
    // The CM retries REQ/REP/RTU on its own timers; give it a clean start, then lose.
    let mut p = connect(3, LinkConfig::with_latency(Duration::from_micros(50)));
    p.net.set_link(p.srv, link);
    let now = p.net.now();
    let s = p.net.node_mut::<Stack>(p.srv).rc_mut();
    let sbuf = s.reg_mr(4096, Access::ALL).unwrap();
    for i in 0..20 {
        let sg = vec![Sge { addr: sbuf.addr, length: 4096, lkey: sbuf.lkey }];
        s.post_recv(p.sq, RecvWr { wr_id: i, sg_list: sg }).unwrap();
    }
    let c = p.net.node_mut::<Stack>(p.cli).rc_mut();
    let cbuf = c.reg_mr(4096, Access::ALL).unwrap();
    for i in 0..20 {
        let sg = vec![Sge { addr: cbuf.addr, length: 100 + i as u32, lkey: cbuf.lkey }];
        c.post_send(
            now,
            p.cq,
            SendWr { wr_id: i, op: SendOp::Send, sg_list: sg, signaled: true, solicited: false, inline: None },
        )
        .unwrap();
    }
    p.net.run_for(Duration::from_secs(60));
    let s = p.net.node_mut::<Stack>(p.srv).rc_mut();
    let got: Vec<_> = std::iter::from_fn(|| s.poll_cq()).map(|w| (w.wr_id, w.byte_len)).collect();
    assert_eq!(got, (0..20).map(|i| (i, 100 + i as u32)).collect::<Vec<_>>());
}

/// The rest of the family (spec/api.md): rdma_init_qp_attr, rdma_notify,
/// rdma_set_service_type, rdma_read_gids, rdma_restrict_node_type, rdma_reject_msg and
/// rdma_consumer_reject_data, with the kernel's errnos.
#[test]
fn init_qp_attr_notify_service_type_gids_restrict_reject() {
    use roce_cm::{consumer_reject_data, reject_msg, Errno, InitQpState, QpEvent};
    let mut net = SimNet::new(9);
    let mut ca = StackConfig::new([2, 0, 0, 0, 0, 1], A, 24);
    ca.seed = 9;
    let mut cb = StackConfig::new([2, 0, 0, 0, 0, 2], B, 24);
    cb.seed = 10;
    let link = LinkConfig::with_latency(Duration::from_micros(50));
    let srv = net.add(Stack::new(ca), link.clone());
    let cli = net.add(Stack::new(cb), link);
    let s = net.node_mut::<Stack>(srv);
    let l = s.create_id(PortSpace::Tcp, QpType::Rc).unwrap();
    s.bind_addr(l, SocketAddr::new(IpAddr::V4(A), PORT)).unwrap();
    s.listen(l, 1).unwrap();

    // rdma_restrict_node_type: bad type EINVAL; RNIC finds no device (ENODEV on a specific
    // bind); once bound, EALREADY.
    let c = net.node_mut::<Stack>(cli);
    let x = c.create_id(PortSpace::Tcp, QpType::Rc).unwrap();
    assert_eq!(c.restrict_node_type(x, 9), Err(Errno::EINVAL));
    c.restrict_node_type(x, 4).unwrap();
    assert_eq!(c.bind_addr(x, SocketAddr::new(IpAddr::V4(B), 0)), Err(Errno::ENODEV));
    c.restrict_node_type(x, 1).unwrap();
    c.bind_addr(x, SocketAddr::new(IpAddr::V4(B), 0)).unwrap();
    assert_eq!(c.restrict_node_type(x, 0), Err(Errno::EALREADY));

    // rdma_set_service_type before connect; rdma_init_qp_attr without a CM id: INIT only.
    let cid = c.create_id(PortSpace::Tcp, QpType::Rc).unwrap();
    assert_eq!(c.read_gids(cid).unwrap(), (roce_wire::Gid::default(), roce_wire::Gid::default()));
    let now = Instant::ZERO;
    c.resolve_addr(now, cid, None, SocketAddr::new(IpAddr::V4(A), PORT), Duration::from_secs(2)).unwrap();
    net.run_for(Duration::from_millis(50));
    let now = net.now();
    let c = net.node_mut::<Stack>(cli);
    c.resolve_route(now, cid, Duration::from_secs(2)).unwrap();
    net.run_for(Duration::from_millis(10));
    let c = net.node_mut::<Stack>(cli);
    let (sg, dg) = c.read_gids(cid).unwrap();
    assert_eq!((sg.to_ip(), dg.to_ip()), (IpAddr::V4(B), IpAddr::V4(A)));
    c.set_service_type(cid, 0x68).unwrap();
    let cq = c.create_qp_for_id(cid).unwrap();
    assert!(c.init_qp_attr(cid, InitQpState::Init).is_ok());
    assert_eq!(c.init_qp_attr(cid, InitQpState::Rtr), Err(Errno::EINVAL));
    assert_eq!(c.notify(cid, QpEvent::CommEst), Err(Errno::EINVAL), "no IB CM id yet");
    let param = ConnectParam {
        responder_resources: 2,
        initiator_depth: 2,
        retry_count: 7,
        rnr_retry_count: 7,
        ..Default::default()
    };
    let now = net.now();
    net.node_mut::<Stack>(cli).connect(now, cid, &param).unwrap();
    // Our REQ is outstanding: INIT yes, RTR not yet (the peer's QP is unknown).
    let c = net.node_mut::<Stack>(cli);
    assert!(c.init_qp_attr(cid, InitQpState::Init).is_ok());
    assert_eq!(c.init_qp_attr(cid, InitQpState::Rtr), Err(Errno::EINVAL));
    net.run_for(Duration::from_millis(20));
    let req = events(&mut net, srv).into_iter().find(|e| e.kind == EventKind::ConnectRequest).unwrap();
    let sid = req.id;
    let s = net.node_mut::<Stack>(srv);
    // A received REQ: RTR and RTS are known before accept.
    let rtr = s.init_qp_attr(sid, InitQpState::Rtr).unwrap();
    assert_eq!((rtr.dest_qpn, rtr.traffic_class), (cq, 0x68), "the REQ's path carries the ToS");
    let sq = s.create_qp_for_id(sid).unwrap();
    let now = net.now();
    let s = net.node_mut::<Stack>(srv);
    s.accept(now, sid, &param).unwrap();
    // rdma_notify(COMM_EST) before the RTU arrives: ESTABLISHED at once, EISCONN after.
    s.notify(sid, QpEvent::CommEst).unwrap();
    assert_eq!(s.notify(sid, QpEvent::CommEst), Err(Errno::EISCONN));
    assert_eq!(s.notify(sid, QpEvent::Other), Err(Errno::EINVAL));
    s.notify(sid, QpEvent::PathMig).unwrap();
    net.run_for(Duration::from_millis(20));
    let est: Vec<_> = events(&mut net, srv).into_iter().filter(|e| e.kind == EventKind::Established).collect();
    assert_eq!(est.len(), 1, "one ESTABLISHED: the RTU that followed changed nothing");
    // RTR/RTS attributes equal what the QPs were given.
    for (n, id, q) in [(srv, sid, sq), (cli, cid, cq)] {
        let st = net.node::<Stack>(n);
        let rtr = st.init_qp_attr(id, InitQpState::Rtr).unwrap();
        let rts = st.init_qp_attr(id, InitQpState::Rts).unwrap();
        let qa = st.rc().query_qp(q).unwrap();
        assert_eq!(
            (rtr.rq_psn, rtr.dest_qpn, rtr.path_mtu, rtr.max_dest_rd_atomic),
            (qa.rq_psn, qa.dest_qpn, qa.path_mtu, 2)
        );
        assert_eq!((rts.sq_psn, rts.retry_cnt, rts.rnr_retry, rts.max_rd_atomic), (qa.sq_psn, 7, 7, 2));
        assert_eq!(qa.traffic_class, 0x68);
    }
    let now = net.now();
    net.node_mut::<Stack>(cli).disconnect(now, cid).unwrap();
    assert_eq!(net.node::<Stack>(cli).init_qp_attr(cid, InitQpState::Rts), Err(Errno::EINVAL));

    // rdma_reject_msg and rdma_consumer_reject_data on a consumer-defined REJ.
    assert_eq!(reject_msg(28), "consumer defined");
    assert_eq!(reject_msg(8), "invalid service ID");
    assert_eq!(reject_msg(34), "unrecognized reason");
    assert_eq!(reject_msg(-1), "unrecognized reason");
    let now = net.now();
    let c = net.node_mut::<Stack>(cli);
    let rid = c.create_id(PortSpace::Tcp, QpType::Rc).unwrap();
    c.resolve_addr(now, rid, None, SocketAddr::new(IpAddr::V4(A), PORT), Duration::from_secs(2)).unwrap();
    net.run_for(Duration::from_millis(20));
    let now = net.now();
    net.node_mut::<Stack>(cli).resolve_route(now, rid, Duration::from_secs(2)).unwrap();
    net.run_for(Duration::from_millis(10));
    let now = net.now();
    net.node_mut::<Stack>(cli).connect(now, rid, &ConnectParam::default()).unwrap();
    net.run_for(Duration::from_millis(20));
    let req = events(&mut net, srv).into_iter().find(|e| e.kind == EventKind::ConnectRequest).unwrap();
    net.node_mut::<Stack>(srv).reject(req.id, b"go away").unwrap();
    net.run_for(Duration::from_millis(20));
    let rej = events(&mut net, cli).into_iter().find(|e| e.kind == EventKind::Rejected).unwrap();
    assert_eq!(rej.status, 28);
    assert_eq!(&consumer_reject_data(&rej).unwrap()[..7], b"go away");
    assert_eq!(reject_msg(rej.status), "consumer defined");
}
