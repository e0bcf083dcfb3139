//! A capture with one frame of every kind this project speaks, built from roce-wire Reprs:
//! the sample that `roce decode` runs on by default, the input of the tshark oracle test, and
//! seeds for the fuzzers. The story: host A (198.18.0.1) finds the SA host (198.18.0.2) by ARP,
//! joins 239.1.2.3 (SA Set ▶ GetResp, IGMP report), sends to the group, leaves (SA Delete ▶
//! DeleteResp, IGMP leave), probes a kernel rxe peer (Get ▶ GetResp 0x000C), talks CM (SIDR,
//! REQ/REP/RTU/DREQ/DREP, REJ 8), then frames of every other opcode, IPv6, bad frames, and XRC.

// Building messages field by field reads like the wire layout; clippy prefers struct literals.
#![allow(clippy::field_reassign_with_default)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use roce_wire::bth::{self, Opcode};
use roce_wire::cm::{self, cma_hdr, CmMessage};
use roce_wire::ext::{ExtHeaders, ExtMask};
use roce_wire::frame::{rxe_udp_sport, FrameRepr};
use roce_wire::mad::{MadStatus, Method};
use roce_wire::mcmember::{ComponentMask, JoinState, McMemberRecord, Selector};
use roce_wire::sa::{attr, SaData, SaMad};
use roce_wire::{
    aeth, atomic_ack_eth, atomic_eth, deth, ieth, immdt, reth, xrceth, Gid, GSI_QKEY, MULTICAST_QPN, RDMA_UDP_QKEY,
};

mod l2;

/// Host A's MAC.
pub const MAC_A: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];
/// The SA host's MAC (the qemu guest NIC's, as in the interop harness).
pub const MAC_SA: [u8; 6] = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
/// Host A's address.
pub const IP_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The SA host's address.
pub const IP_SA: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The multicast group of the story.
pub const GROUP: Ipv4Addr = Ipv4Addr::new(239, 1, 2, 3);

/// One named sample frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// What the frame is (for test messages and the fuzz corpus file name).
    pub name: &'static str,
    /// The frame bytes.
    pub bytes: Vec<u8>,
}

fn emit(r: &FrameRepr<'_>) -> Vec<u8> {
    let mut out = vec![0u8; r.buffer_len()];
    r.emit(&mut out).expect("sample frames fit their buffers");
    out
}

/// A GSI (QP1 ▶ QP1) frame carrying `mad`, framed as rxe sends MADs: UD SEND_ONLY, P_Key
/// 0xFFFF, AckReq set (QP1 is type GSI), Q_Key 0x80010000, UDP source port of QP1.
pub fn gsi_frame(src_mac: [u8; 6], dst_mac: [u8; 6], src: IpAddr, dst: IpAddr, psn: u32, mad: &[u8]) -> Vec<u8> {
    let mut b = bth::Repr::new(Opcode::UdSendOnly, 1, psn);
    b.ack_req = true;
    let mut r = FrameRepr::new(src_mac, dst_mac, src, dst, b, ExtHeaders::deth(GSI_QKEY, 1), mad);
    r.udp.source_port = rxe_udp_sport(1);
    emit(&r)
}

/// The MCMemberRecord RDMA-CM sends to join an IPv4 group on an SA port (mask 0x130C7).
pub fn join_record(group: Ipv4Addr, port: Ipv4Addr, join_state: JoinState) -> McMemberRecord {
    McMemberRecord {
        mgid: Gid::from_ipv4(group),
        port_gid: Gid::from_ipv4(port),
        q_key: RDMA_UDP_QKEY,
        p_key: 0xFFFF,
        join_state,
        ..McMemberRecord::default()
    }
}

/// The SA's answer to a join: the record with an MLID and the group's path parameters.
pub fn joined_record(req: &McMemberRecord, mlid: u16) -> McMemberRecord {
    McMemberRecord {
        mlid,
        mtu_selector: Selector::Exactly,
        mtu: 4, // 2048
        rate_selector: Selector::Exactly,
        rate: 3, // 10 Gb/s
        packet_life_time_selector: Selector::Exactly,
        packet_life_time: 18,
        hop_limit: 64,
        scope: 2,
        ..*req
    }
}

fn cm_frame(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    psn: u32,
    tid: u64,
    msg: &CmMessage,
) -> Vec<u8> {
    gsi_frame(src_mac, dst_mac, src.into(), dst.into(), psn, &msg.to_mad(tid).to_bytes())
}

fn data_frame(op: Opcode, ext: ExtHeaders, payload: &[u8], dest_qp: u32, v6: bool) -> Vec<u8> {
    let (s, d): (IpAddr, IpAddr) = if v6 {
        ("fd00::1".parse::<Ipv6Addr>().unwrap().into(), "fd00::2".parse::<Ipv6Addr>().unwrap().into())
    } else {
        (IP_A.into(), IP_SA.into())
    };
    let r = FrameRepr::new(MAC_A, MAC_SA, s, d, bth::Repr::new(op, dest_qp, 0x1234), ext, payload);
    emit(&r)
}

/// Every sample frame, in story order.
pub fn sample_frames() -> Vec<Sample> {
    let mut v = Vec::new();
    let mut push = |name: &'static str, bytes: Vec<u8>| v.push(Sample { name, bytes });
    let (a, sa) = (IpAddr::from(IP_A), IpAddr::from(IP_SA));
    let tid = 0x5a17_0000_0000_0001u64;

    for (name, frame) in l2::arp_exchange() {
        push(name, frame);
    }
    // Join: SubnAdmSet ▶ SubnAdmGetResp.
    let req = join_record(GROUP, IP_A, JoinState::FULL_MEMBER);
    let set =
        SaMad::request(Method::Set, tid, attr::MC_MEMBER_RECORD, ComponentMask::KERNEL_JOIN.0, SaData::mc_member(req));
    push("sa_set_join", gsi_frame(MAC_A, MAC_SA, a, sa, 0, &set.to_bytes()));
    let joined = joined_record(&req, 0xC001);
    let resp = set.response_to(Method::Get, MadStatus(0), SaData::mc_member(joined));
    push("sa_getresp_join", gsi_frame(MAC_SA, MAC_A, sa, a, 0, &resp.to_bytes()));
    for (name, frame) in l2::igmp_join(GROUP) {
        push(name, frame);
    }
    // Data to the group: UD SEND_ONLY to QP 0xFFFFFF with the RDMA-CM Q_Key.
    let mut b = bth::Repr::new(Opcode::UdSendOnly, MULTICAST_QPN, 7);
    b.solicited = false;
    let mut r = FrameRepr::new(
        MAC_A,
        l2::ipv4_multicast_mac(GROUP),
        a,
        GROUP.into(),
        b,
        ExtHeaders::deth(RDMA_UDP_QKEY, 0x11),
        b"hello, group 239.1.2.3",
    );
    r.udp.source_port = rxe_udp_sport(0x11);
    push("ud_multicast_data", emit(&r));
    // Leave: SubnAdmDelete of the record the SA returned, JoinState = bits left, mask 0x10003.
    let mut leave = joined;
    leave.join_state = JoinState::FULL_MEMBER;
    let del = SaMad::request(
        Method::Delete,
        tid + 1,
        attr::MC_MEMBER_RECORD,
        ComponentMask::KERNEL_LEAVE.0,
        SaData::mc_member(leave),
    );
    push("sa_delete_leave", gsi_frame(MAC_A, MAC_SA, a, sa, 1, &del.to_bytes()));
    let dresp = del.response_to(Method::Delete, MadStatus(0), SaData::mc_member(leave));
    push("sa_deleteresp_leave", gsi_frame(MAC_SA, MAC_A, sa, a, 1, &dresp.to_bytes()));
    for (name, frame) in l2::igmp_leave(GROUP) {
        push(name, frame);
    }
    // A kernel rxe peer has no SA agent: its MAD core answers Get/Set with status 0x000C.
    let get =
        SaMad::request(Method::Get, tid + 2, attr::MC_MEMBER_RECORD, ComponentMask::MGID.0, SaData::mc_member(req));
    push("sa_get_probe", gsi_frame(MAC_A, MAC_SA, a, sa, 2, &get.to_bytes()));
    let mut nak = get;
    nak.header.response = true;
    nak.header.status = MadStatus::UNSUPPORTED_METHOD_ATTR;
    push("sa_getresp_unsupported", gsi_frame(MAC_SA, MAC_A, sa, a, 2, &nak.to_bytes()));
    let cpi = SaMad::request(Method::Get, tid + 3, attr::CLASS_PORT_INFO, 0, SaData::Raw([0; 200]));
    push("sa_get_classportinfo", gsi_frame(MAC_A, MAC_SA, a, sa, 3, &cpi.to_bytes()));
    for (name, frame) in l2::ipv6_exchange() {
        push(name, frame);
    }
    // A send-only join over IPv6.
    let (a6, sa6): (Ipv6Addr, Ipv6Addr) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
    let mut req6 = req;
    req6.mgid = Gid::from_ipv6("ff0e::1:2:3".parse().unwrap());
    req6.port_gid = Gid::from_ipv6(a6);
    req6.join_state = JoinState::SEND_ONLY_FULL_MEMBER;
    let set6 = SaMad::request(
        Method::Set,
        tid + 4,
        attr::MC_MEMBER_RECORD,
        ComponentMask::KERNEL_JOIN.0,
        SaData::mc_member(req6),
    );
    push("sa_set_join_ipv6", gsi_frame(MAC_A, MAC_SA, a6.into(), sa6.into(), 4, &set6.to_bytes()));

    // CM: SIDR for UD port spaces, the connected handshake, a reject.
    let sid_udp = cma_hdr::service_id(cma_hdr::RDMA_PS_UDP, 7174);
    let mut sidr_req = cm::SidrReqRepr::default();
    sidr_req.request_id = 0x0102_0304;
    sidr_req.partition_key = 0xFFFF;
    sidr_req.service_id = sid_udp;
    cma_hdr::Repr::new_v4(IP_A, 40000, IP_SA).emit_bytes(&mut sidr_req.private_data);
    push("cm_sidr_req", cm_frame(MAC_A, MAC_SA, IP_A, IP_SA, 10, 0xc0de_0001, &CmMessage::SidrReq(sidr_req)));
    let mut sidr_rep = cm::SidrRepRepr::default();
    sidr_rep.request_id = 0x0102_0304;
    sidr_rep.qpn = 0x11;
    sidr_rep.service_id = sid_udp;
    sidr_rep.qkey = RDMA_UDP_QKEY;
    push("cm_sidr_rep", cm_frame(MAC_SA, MAC_A, IP_SA, IP_A, 10, 0xc0de_0001, &CmMessage::SidrRep(sidr_rep)));
    let mut req_msg = cm::ReqRepr::default();
    req_msg.local_comm_id = 0x1111_2222;
    req_msg.service_id = cma_hdr::service_id(cma_hdr::RDMA_PS_TCP, 7471);
    req_msg.local_ca_guid = 0x0200_00ff_fe00_0001;
    req_msg.local_qpn = 0x12;
    req_msg.responder_resources = 1;
    req_msg.initiator_depth = 1;
    req_msg.remote_cm_response_timeout = 20;
    req_msg.transport_service_type = 0;
    req_msg.starting_psn = 0x00ab_cdef;
    req_msg.local_cm_response_timeout = 20;
    req_msg.retry_count = 7;
    req_msg.partition_key = 0xFFFF;
    req_msg.path_mtu = 3;
    req_msg.rnr_retry_count = 7;
    req_msg.max_cm_retries = 15;
    req_msg.primary_path.local_lid = 0xFFFF;
    req_msg.primary_path.remote_lid = 0xFFFF;
    req_msg.primary_path.local_gid = Gid::from_ipv4(IP_A);
    req_msg.primary_path.remote_gid = Gid::from_ipv4(IP_SA);
    req_msg.primary_path.hop_limit = 64;
    req_msg.primary_path.local_ack_timeout = 18;
    cma_hdr::Repr::new_v4(IP_A, 40001, IP_SA).emit_bytes(&mut req_msg.private_data);
    push("cm_req", cm_frame(MAC_A, MAC_SA, IP_A, IP_SA, 11, 0xc0de_0002, &CmMessage::Req(req_msg)));
    let mut rep = cm::RepRepr::default();
    rep.local_comm_id = 0x3333_4444;
    rep.remote_comm_id = 0x1111_2222;
    rep.local_qpn = 0x13;
    rep.starting_psn = 0x0012_3456;
    rep.responder_resources = 1;
    rep.initiator_depth = 1;
    rep.rnr_retry_count = 7;
    push("cm_rep", cm_frame(MAC_SA, MAC_A, IP_SA, IP_A, 11, 0xc0de_0002, &CmMessage::Rep(rep)));
    let mut rtu = cm::RtuRepr::default();
    rtu.local_comm_id = 0x1111_2222;
    rtu.remote_comm_id = 0x3333_4444;
    push("cm_rtu", cm_frame(MAC_A, MAC_SA, IP_A, IP_SA, 12, 0xc0de_0002, &CmMessage::Rtu(rtu)));
    let mut dreq = cm::DreqRepr::default();
    dreq.local_comm_id = 0x1111_2222;
    dreq.remote_comm_id = 0x3333_4444;
    dreq.remote_qpn_eecn = 0x13;
    push("cm_dreq", cm_frame(MAC_A, MAC_SA, IP_A, IP_SA, 13, 0xc0de_0003, &CmMessage::Dreq(dreq)));
    let mut drep = cm::DrepRepr::default();
    drep.local_comm_id = 0x3333_4444;
    drep.remote_comm_id = 0x1111_2222;
    push("cm_drep", cm_frame(MAC_SA, MAC_A, IP_SA, IP_A, 13, 0xc0de_0003, &CmMessage::Drep(drep)));
    let mut mra = cm::MraRepr::default();
    mra.local_comm_id = 0x3333_4444;
    mra.remote_comm_id = 0x1111_2222;
    mra.service_timeout = 24;
    push("cm_mra", cm_frame(MAC_SA, MAC_A, IP_SA, IP_A, 14, 0xc0de_0004, &CmMessage::Mra(mra)));
    let mut rej = cm::RejRepr::default();
    rej.local_comm_id = 0x5555_6666;
    rej.remote_comm_id = 0x1111_2222;
    rej.reason = cm::RejReason::InvalidServiceId;
    push("cm_rej_invalid_service_id", cm_frame(MAC_SA, MAC_A, IP_SA, IP_A, 15, 0xc0de_0005, &CmMessage::Rej(rej)));

    // One frame of every other opcode family, IPv4 and IPv6.
    let payload: Vec<u8> = (0u8..37).collect();
    let ext = |m: ExtMask| {
        let mut h = ExtHeaders::default();
        if m.contains(ExtMask::DETH) {
            h.deth = Some(deth::Repr::new(RDMA_UDP_QKEY, 0x21));
        }
        if m.contains(ExtMask::XRCETH) {
            h.xrceth = Some(xrceth::Repr::new(0x2a));
        }
        if m.contains(ExtMask::RETH) {
            h.reth = Some(reth::Repr { va: 0x7f00_dead_0000, rkey: 0x1234, dma_len: 4096 });
        }
        if m.contains(ExtMask::ATOMIC_ETH) {
            h.atomic_eth = Some(atomic_eth::Repr { va: 0x7f00_0000_1000, rkey: 0x99, swap_add: 5, compare: 3 });
        }
        if m.contains(ExtMask::AETH) {
            h.aeth = Some(aeth::Repr { syndrome: 0x1f, msn: 42 });
        }
        if m.contains(ExtMask::ATOMIC_ACK_ETH) {
            h.atomic_ack_eth = Some(atomic_ack_eth::Repr { orig: 77 });
        }
        if m.contains(ExtMask::IMMDT) {
            h.immdt = Some(immdt::Repr { imm_data: 0xcafe_f00d });
        }
        if m.contains(ExtMask::IETH) {
            h.ieth = Some(ieth::Repr { rkey: 0x4321 });
        }
        h
    };
    for (name, op, len) in [
        ("rc_send_only", Opcode::RcSendOnly, 37),
        ("rc_rdma_write_only_imm", Opcode::RcRdmaWriteOnlyWithImmediate, 37),
        ("rc_rdma_read_request", Opcode::RcRdmaReadRequest, 0),
        ("rc_rdma_read_response_only", Opcode::RcRdmaReadResponseOnly, 37),
        ("rc_acknowledge", Opcode::RcAcknowledge, 0),
        ("rc_compare_swap", Opcode::RcCompareSwap, 0),
        ("rc_atomic_acknowledge", Opcode::RcAtomicAcknowledge, 0),
        ("rc_send_only_invalidate", Opcode::RcSendOnlyWithInvalidate, 37),
        ("uc_send_only", Opcode::UcSendOnly, 37),
        ("uc_rdma_write_first", Opcode::UcRdmaWriteFirst, 37),
        ("ud_send_only_imm", Opcode::UdSendOnlyWithImmediate, 37),
    ] {
        push(name, data_frame(op, ext(op.ext_headers()), &payload[..len], 0x12, false));
    }
    push("ud_send_only_ipv6", data_frame(Opcode::UdSendOnly, ext(ExtMask::DETH), &payload, 0x12, true));
    push("rc_send_only_ipv6", data_frame(Opcode::RcSendOnly, ExtHeaders::default(), &payload, 0x12, true));
    push("cnp_connectx4", roce_wire::golden::CX4_CNP.to_vec());
    push("scapy_uc_send_only", roce_wire::golden::SCAPY_UC_SEND_ONLY.to_vec());

    // Bad frames: every one is listed by the decoder, never skipped.
    let mut bad = roce_wire::golden::SA_DELETE_MCMEMBER.to_vec();
    let n = bad.len();
    bad[n - 1] ^= 0x01;
    push("bad_icrc", bad);
    push("truncated_in_mad", roce_wire::golden::SA_DELETE_MCMEMBER[..120].to_vec());

    // XRC: a request (XRCETH, then the RC opcode's headers) and a response (none), to the XRC
    // target QP 0x13, SRQ 0x2a. After the bad frames so that the frame numbers the docs and
    // tests cite stay put.
    for (name, op, len) in [
        ("xrc_send_only", Opcode::XrcSendOnly, 37),
        ("xrc_rdma_write_only_imm", Opcode::XrcRdmaWriteOnlyWithImmediate, 37),
        ("xrc_acknowledge", Opcode::XrcAcknowledge, 0),
    ] {
        push(name, data_frame(op, ext(op.ext_headers()), &payload[..len], 0x13, false));
    }
    v
}
