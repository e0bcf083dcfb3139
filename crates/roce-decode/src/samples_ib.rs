//! Native InfiniBand sample packets, built from roce-wire Reprs by the IBA layouts: what a
//! subnet manager and two hosts on one fabric send (directed-route and LID-routed SMPs on
//! QP0/VL15, an SA join on QP1, RC data with a GRH, an ACK), then packets with a bad ICRC, a
//! bad VCRC, a raw IPv6 packet and one cut short. They make tests/data/ib-native.pcap
//! (`LINKTYPE_INFINIBAND`) and, wrapped in ERF records as ibdump writes them,
//! tests/data/ib-erf.pcap (`LINKTYPE_ERF`).

use std::time::Duration;

use roce_wire::bth::{self, Opcode};
use roce_wire::erf::{self, RecordType};
use roce_wire::ext::ExtHeaders;
use roce_wire::ib_frame::IbFrameRepr;
use roce_wire::mad::{MadHeader, MadStatus, Method, MgmtClass};
use roce_wire::mcmember::{ComponentMask, JoinState, McMemberRecord};
use roce_wire::sa::{attr, SaData, SaMad};
use roce_wire::smp::{self, Attribute};
use roce_wire::{aeth, grh, lrh, vcrc, GSI_QKEY, MAD_SIZE};

use crate::samples::Sample;

/// The subnet manager's LID.
pub const SM_LID: u16 = 1;
/// Host A's LID.
pub const LID_A: u16 = 3;
/// Host B's LID.
pub const LID_B: u16 = 4;
/// The subnet prefix the GIDs use.
const PREFIX: [u8; 8] = [0xfe, 0x80, 0, 0, 0, 0, 0, 0];

fn gid(guid: u64) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&PREFIX);
    g[8..].copy_from_slice(&guid.to_be_bytes());
    g
}

fn emit(r: &IbFrameRepr<'_>) -> Vec<u8> {
    let mut out = vec![0u8; r.buffer_len()];
    r.emit(&mut out).expect("sample packets fit their buffers");
    out
}

/// A UD SEND_ONLY packet to `dest_qp` carrying `mad` from QP `src_qp`; QP0 traffic rides VL15.
fn ud_mad(slid: u16, dlid: u16, qp: u32, psn: u32, mad: &[u8]) -> Vec<u8> {
    let qkey = if qp == 0 { 0 } else { GSI_QKEY };
    let mut r = IbFrameRepr {
        lrh: lrh::Repr { vl: if qp == 0 { 15 } else { 0 }, slid, dlid, ..lrh::Repr::default() },
        grh: None,
        bth: bth::Repr::new(Opcode::UdSendOnly, qp, psn),
        ext: ExtHeaders::deth(qkey, qp),
        payload: mad,
        pad: &[],
        icrc: None,
        vcrc: None,
    };
    r.fill();
    emit(&r)
}

/// A MAD header for the subnet management classes.
fn smp_header(class: MgmtClass, method: u8, tid: u64, attribute: Attribute, modifier: u32) -> MadHeader {
    MadHeader {
        base_version: 1,
        mgmt_class: class,
        class_version: 1,
        response: method & 0x80 != 0,
        method: Method::from(method & 0x7f),
        status: MadStatus(0),
        class_specific: 0,
        transaction_id: tid,
        attribute_id: attribute.into(),
        reserved: 0,
        attribute_modifier: modifier,
    }
}

/// A directed-route SMP: `hops` the initial path's egress ports, at `hop_pointer`.
fn dr_smp(method: u8, tid: u64, attribute: Attribute, hops: &[u8], hop_pointer: u8, returning: bool) -> [u8; MAD_SIZE] {
    let mut m = [0u8; MAD_SIZE];
    let mut h = smp_header(MgmtClass::SubnDirected, method, tid, attribute, 0);
    h.status = MadStatus(if returning { smp::DIRECTION_BIT } else { 0 });
    h.class_specific = (u16::from(hop_pointer) << 8) | hops.len() as u16;
    h.emit_bytes(&mut m[..24]);
    let mut r = smp::directed::Repr { m_key: 0, dr_slid: 0xffff, dr_dlid: 0xffff, ..Default::default() };
    r.initial_path[1..=hops.len()].copy_from_slice(hops);
    if returning {
        r.return_path[1..=hops.len()].copy_from_slice(&[1; 63][..hops.len()]);
        // NodeInfo: BaseVersion 1, ClassVersion 1, NodeType 1 (CA), NumPorts 1, then GUIDs.
        r.data[..4].copy_from_slice(&[1, 1, 1, 1]);
        r.data[4..12].copy_from_slice(&0x0002_c903_0000_0003u64.to_be_bytes());
        r.data[12..20].copy_from_slice(&0x0002_c903_0000_0003u64.to_be_bytes());
        r.data[20..28].copy_from_slice(&0x0002_c903_0000_0004u64.to_be_bytes());
    }
    r.emit_bytes(&mut m);
    m
}

/// A LID-routed SMP with `data` as its attribute.
fn lid_smp(method: u8, tid: u64, attribute: Attribute, m_key: u64, data: &[u8]) -> [u8; MAD_SIZE] {
    let mut m = [0u8; MAD_SIZE];
    smp_header(MgmtClass::SubnLid, method, tid, attribute, 0).emit_bytes(&mut m[..24]);
    let mut r = smp::lid_routed::Repr { m_key, ..Default::default() };
    r.data[..data.len()].copy_from_slice(data);
    r.emit_bytes(&mut m);
    m
}

/// An RC packet between hosts A and B with a GRH.
fn rc(op: Opcode, ext: ExtHeaders, psn: u32, payload: &[u8], forward: bool) -> IbFrameRepr<'_> {
    let (slid, dlid, sg, dg, qp) = if forward {
        (LID_A, LID_B, gid(0x0002_c903_0000_0004), gid(0x0002_c903_0000_0005), 0x12)
    } else {
        (LID_B, LID_A, gid(0x0002_c903_0000_0005), gid(0x0002_c903_0000_0004), 0x11)
    };
    let grh = grh::Repr {
        ip_version: 6,
        traffic_class: 0,
        flow_label: 0x12345,
        next_header: grh::NEXT_HEADER_IBA,
        hop_limit: 64,
        sgid: sg,
        dgid: dg,
        ..grh::Repr::default()
    };
    let pad = (4 - payload.len() % 4) % 4;
    let mut r = IbFrameRepr {
        lrh: lrh::Repr { vl: 0, sl: 2, slid, dlid, ..lrh::Repr::default() },
        grh: Some(grh),
        bth: bth::Repr::new(op, qp, psn),
        ext,
        payload,
        pad: &[0, 0, 0][..pad],
        icrc: None,
        vcrc: None,
    };
    r.fill();
    r
}

/// The native IB sample packets, each as on the wire (LRH through VCRC).
pub fn ib_sample_frames() -> Vec<Sample> {
    let mut out = Vec::new();
    let mut push = |name: &'static str, bytes: Vec<u8>| out.push(Sample { name, bytes });
    let tid = 0x5a17_0000_0000_1000u64;
    // The SM's first sweep: SubnGet(NodeInfo) one hop out through port 1, and the answer.
    let get = dr_smp(0x01, tid, Attribute::NodeInfo, &[1], 0, false);
    push("ib_smp_dr_get_nodeinfo", ud_mad(0xffff, 0xffff, 0, 0, &get));
    let resp = dr_smp(0x81, tid, Attribute::NodeInfo, &[1], 1, true);
    push("ib_smp_dr_getresp_nodeinfo", ud_mad(0xffff, 0xffff, 0, 0, &resp));
    // With LIDs assigned: LID-routed SubnGet(NodeDescription) and its text.
    let get = lid_smp(0x01, tid + 1, Attribute::NodeDescription, 0, &[]);
    push("ib_smp_lid_get_nodedescription", ud_mad(SM_LID, LID_A, 0, 1, &get));
    let resp = lid_smp(0x81, tid + 1, Attribute::NodeDescription, 0, b"host-a mlx5_0");
    push("ib_smp_lid_getresp_nodedescription", ud_mad(LID_A, SM_LID, 0, 1, &resp));
    let resp = lid_smp(0x81, tid + 2, Attribute::PortInfo, 0x1122_3344_5566_7788, &[0; 64]);
    push("ib_smp_lid_getresp_portinfo", ud_mad(LID_A, SM_LID, 0, 2, &resp));
    // Host A joins a group at the SA (QP1).
    let rec = McMemberRecord {
        mgid: roce_wire::Gid([0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xe0, 1, 2, 3]),
        port_gid: roce_wire::Gid(gid(0x0002_c903_0000_0004)),
        join_state: JoinState::FULL_MEMBER,
        ..McMemberRecord::default()
    };
    let set = SaMad::request(
        Method::Set,
        tid + 3,
        attr::MC_MEMBER_RECORD,
        ComponentMask::KERNEL_JOIN.0,
        SaData::mc_member(rec),
    );
    push("ib_sa_set_join", ud_mad(LID_A, SM_LID, 1, 3, &set.to_bytes()));
    // RC data with a GRH: SEND_ONLY of 13 bytes (3 pad bytes), the ACK.
    push("ib_rc_send_only_grh", emit(&rc(Opcode::RcSendOnly, ExtHeaders::default(), 100, b"hello, fabric", true)));
    let ack = ExtHeaders { aeth: Some(aeth::Repr { syndrome: 0x1f, msn: 1 }), ..ExtHeaders::default() };
    push("ib_rc_ack_grh", emit(&rc(Opcode::RcAcknowledge, ack, 100, &[], false)));
    // Damaged packets: a payload byte flipped with both CRCs kept, a VCRC alone wrong.
    let mut bad = emit(&rc(Opcode::RcSendOnly, ExtHeaders::default(), 101, b"abcdefgh", true));
    let n = bad.len();
    bad[n - 10] ^= 0x40;
    let crc = vcrc::compute(&bad[..n - 2]);
    bad[n - 2..].copy_from_slice(&vcrc::to_wire(crc));
    push("bad_ib_icrc", bad);
    let mut bad = emit(&rc(Opcode::RcSendOnly, ExtHeaders::default(), 102, b"abcdefgh", true));
    let n = bad.len();
    bad[n - 1] ^= 0xff;
    push("bad_ib_vcrc", bad);
    // A raw IPv6 packet (LNH 1): no BTH, no ICRC.
    let mut raw = vec![0u8; 8 + 40 + 2];
    lrh::Repr { lnh: lrh::Lnh::IpNonIba, slid: LID_A, dlid: LID_B, pkt_len: 12, ..lrh::Repr::default() }
        .emit_bytes(&mut raw[..8]);
    raw[8] = 0x60;
    raw[14] = 59; // no next header
    raw[15] = 64;
    let crc = vcrc::compute(&raw[..48]);
    raw[48..].copy_from_slice(&vcrc::to_wire(crc));
    push("ib_raw_ipv6", raw);
    // PktLen says more than there is.
    let mut cut = emit(&rc(Opcode::RcSendOnly, ExtHeaders::default(), 103, b"abcdefgh", true));
    cut.truncate(cut.len() - 6);
    push("truncated_ib_pktlen", cut);
    out
}

/// One ERF record of InfiniBand type around `frame`, as ibdump writes it: capture interface
/// `interface`, varying length, padded to 8 bytes.
pub fn erf_record(timestamp: Duration, interface: u8, frame: &[u8]) -> Vec<u8> {
    let rlen = erf::padded_rlen(0, frame.len());
    let h = erf::Repr {
        timestamp: erf::Repr::timestamp_of(timestamp.as_secs() as u32, timestamp.subsec_nanos()),
        extension: false,
        record_type: RecordType::Infiniband,
        flags: (interface & 3) | 0x04,
        rlen: rlen as u16,
        lctr: 0,
        wlen: frame.len() as u16,
    };
    let mut out = vec![0u8; rlen];
    h.emit_bytes(&mut out[..erf::LEN]);
    out[erf::LEN..erf::LEN + frame.len()].copy_from_slice(frame);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_parse_as_built() {
        for s in ib_sample_frames() {
            let r = roce_wire::ib_frame::parse(&s.bytes);
            if s.name.starts_with("truncated") {
                assert!(r.is_err(), "{}", s.name);
                continue;
            }
            let f = r.unwrap_or_else(|e| panic!("{}: {e}", s.name));
            let icrc_ok = f.transport().is_none_or(|t| t.icrc_ok());
            assert_eq!(icrc_ok && f.vcrc_ok(), !s.name.starts_with("bad_"), "{}", s.name);
        }
        let rec = erf_record(Duration::new(1, 5), 1, &[1, 2, 3]);
        let p = erf::parse_record(&rec).unwrap();
        assert_eq!((p.frame, p.header.interface(), rec.len()), (&[1u8, 2, 3][..], 1, 24));
    }
}
