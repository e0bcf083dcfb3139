//! Turning frames into one summary line and one JSON object each, for `roce decode`.
//!
//! The summary follows tshark's one-line spirit (addresses, opcode, QPs, PSN, the MAD's class,
//! method and attribute, TID, SA component mask, MCMemberRecord MGID/PortGID/JoinState, ICRC
//! verdict). The JSON object holds every parsed field; BTH fields are also at the top level
//! (`opcode`, `dest_qp`, `psn`, `pkey` as numbers) so that scripts need not dig.

use std::fmt::Write as _;

use roce_wire::frame::{self, Frame, IpHeader};
use roce_wire::{ContentError, Error};
use serde_json::{json, Map, Value};

/// A decoded frame: its summary line and its JSON object.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// Human summary (no frame number or timestamp).
    pub summary: String,
    /// Every parsed field.
    pub json: Map<String, Value>,
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn mac(m: &[u8; 6]) -> String {
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
}

fn error_json(e: &Error) -> Value {
    json!({
        "layer": e.layer().name(),
        "offset": e.offset(),
        "reason": e.reason(),
        "message": e.to_string(),
    })
}

/// Decode one Ethernet frame. Never fails: what cannot be parsed is described, with the error.
pub fn decode_ethernet(bytes: &[u8]) -> Decoded {
    match frame::parse_lax(bytes) {
        Ok(f) => decode_roce(bytes, &f),
        Err(e) if is_not_roce(&e) => decode_other(bytes, Some(e)),
        Err(e) => {
            let mut json = Map::new();
            json.insert("kind".into(), "rocev2".into());
            json.insert("len".into(), bytes.len().into());
            json.insert("error".into(), error_json(&e));
            Decoded { summary: format!("RoCEv2 malformed: {e}"), json }
        }
    }
}

/// A frame whose Ethernet/IP/UDP layers say it is not RoCEv2 at all.
fn is_not_roce(e: &Error) -> bool {
    matches!(
        e,
        Error::Content {
            kind: ContentError::UnsupportedEtherType(_)
                | ContentError::NotUdp { .. }
                | ContentError::NotRoceV2Port { .. },
            ..
        }
    )
}

fn decode_other(bytes: &[u8], why: Option<Error>) -> Decoded {
    let mut json = Map::new();
    let summary = crate::decode_l2::describe(bytes, &mut json);
    json.insert("len".into(), bytes.len().into());
    if let Some(e) = why {
        json.insert("not_rocev2".into(), e.to_string().into());
    }
    Decoded { summary, json }
}

fn decode_roce(bytes: &[u8], f: &Frame<'_>) -> Decoded {
    let r = &f.repr;
    let mut j = Map::new();
    j.insert("kind".into(), "rocev2".into());
    j.insert("len".into(), f.offsets.end.into());
    j.insert(
        "eth".into(),
        json!({
            "src": mac(&r.ethernet.source),
            "dst": mac(&r.ethernet.destination),
            "ethertype": r.ethernet.ether_type.0,
        }),
    );
    if let Some(v) = &r.vlan {
        j.insert(
            "vlan".into(),
            json!({"pcp": v.pcp.value(), "dei": v.drop_eligible_indicator, "vid": v.vlan_id.value()}),
        );
    }
    let ip = match &r.ip {
        IpHeader::V4(h) => json!({
            "version": 4, "src": r.ip.source().to_string(), "dst": r.ip.destination().to_string(),
            "tos": r.ip.traffic_class(), "total_len": h.total_len, "id": h.identification,
            "df": h.dont_fragment, "ttl": h.time_to_live, "checksum": h.header_checksum,
            "checksum_ok": f.ip_checksum_ok,
        }),
        IpHeader::V6(h) => json!({
            "version": 6, "src": r.ip.source().to_string(), "dst": r.ip.destination().to_string(),
            "traffic_class": h.traffic_class, "flow_label": h.flow_label.value(),
            "payload_len": h.payload_length, "hop_limit": h.hop_limit,
        }),
    };
    j.insert("ip".into(), ip);
    j.insert(
        "udp".into(),
        json!({"src_port": r.udp.source_port, "dst_port": r.udp.destination_port,
               "length": r.udp.length, "checksum": r.udp.checksum}),
    );
    let b = &r.bth;
    let opcode = u8::from(b.opcode);
    j.insert("opcode".into(), opcode.into());
    j.insert("opcode_name".into(), b.opcode.name().into());
    j.insert("dest_qp".into(), b.dest_qp.into());
    j.insert("psn".into(), b.psn.into());
    j.insert("pkey".into(), b.pkey.into());
    j.insert(
        "bth".into(),
        json!({
            "opcode": opcode, "se": b.solicited, "migreq": b.mig_req, "pad_count": b.pad_count,
            "tver": b.tver, "pkey": b.pkey, "fecn": b.fecn, "becn": b.becn, "resv6a": b.resv6a,
            "dest_qp": b.dest_qp, "ack_req": b.ack_req, "resv7": b.resv7, "psn": b.psn,
        }),
    );
    let mut s = format!(
        "{} → {} RoCEv2 {} QP=0x{:06x} PSN={} P_Key=0x{:04x}",
        r.ip.source(),
        r.ip.destination(),
        b.opcode.name(),
        b.dest_qp,
        b.psn,
        b.pkey
    );
    if b.fecn || b.becn {
        let _ = write!(s, " {}{}", if b.fecn { "FECN " } else { "" }, if b.becn { "BECN" } else { "" });
    }
    let e = &r.ext;
    if let Some(d) = &e.deth {
        j.insert("deth".into(), json!({"qkey": d.qkey, "src_qp": d.src_qp, "reserved": d.reserved}));
        let _ = write!(s, " SrcQP=0x{:06x} Q_Key=0x{:08x}", d.src_qp, d.qkey);
    }
    if let Some(x) = &e.feth {
        j.insert(
            "feth".into(),
            json!({"bits": x.bits, "placement_type": x.placement_type(), "selectivity_level": x.selectivity_level()}),
        );
    }
    if let Some(x) = &e.reth {
        j.insert("reth".into(), json!({"va": x.va, "rkey": x.rkey, "dma_len": x.dma_len}));
        let _ = write!(s, " VA=0x{:x} R_Key=0x{:08x} DMALen={}", x.va, x.rkey, x.dma_len);
    }
    if let Some(x) = &e.atomic_eth {
        j.insert(
            "atomic_eth".into(),
            json!({"va": x.va, "rkey": x.rkey, "swap_add": x.swap_add, "compare": x.compare}),
        );
    }
    if let Some(x) = &e.aeth {
        j.insert("aeth".into(), json!({"syndrome": x.syndrome, "msn": x.msn}));
        let _ = write!(s, " Syndrome=0x{:02x} MSN={}", x.syndrome, x.msn);
    }
    if let Some(x) = &e.atomic_ack_eth {
        j.insert("atomic_ack_eth".into(), json!({"orig": x.orig}));
    }
    if let Some(x) = &e.immdt {
        j.insert("immdt".into(), json!({"imm_data": x.imm_data}));
        let _ = write!(s, " Imm=0x{:08x}", x.imm_data);
    }
    if let Some(x) = &e.ieth {
        j.insert("ieth".into(), json!({"rkey": x.rkey}));
    }
    j.insert("payload_len".into(), r.payload.len().into());
    j.insert("pad".into(), hex(&r.pad[..r.pad_len()]).into());
    // QP1 carries MADs (GSI); the decoder tries them whenever either end is QP1.
    let is_gsi = b.dest_qp == 1 || e.deth.is_some_and(|d| d.src_qp == 1);
    if is_gsi && e.deth.is_some() {
        let mad = crate::decode_mad::describe(r.payload, f.offsets.payload, &mut j);
        s.push_str(" | ");
        s.push_str(&mad);
    } else {
        j.insert("payload".into(), hex(r.payload).into());
        let _ = write!(s, " PayLen={}", r.payload.len());
    }
    let ok = f.icrc_ok();
    j.insert("icrc".into(), if ok { "ok" } else { "bad" }.into());
    j.insert("icrc_value".into(), f.icrc.into());
    j.insert("icrc_expected".into(), f.icrc_expected.into());
    if ok {
        s.push_str(" | ICRC ok");
    } else {
        let _ = write!(s, " | ICRC bad (0x{:08x}, expected 0x{:08x})", f.icrc, f.icrc_expected);
    }
    // What the strict (rxe-like) parser would refuse besides the ICRC: TVer, pad, IPv4 checksum.
    if let Err(e) = frame::parse(bytes) {
        if !matches!(e, Error::Content { kind: ContentError::IcrcMismatch { .. }, .. }) {
            let _ = write!(s, " | rejected by rxe: {e}");
            j.insert("error".into(), error_json(&e));
        }
    }
    if !f.trailer.is_empty() {
        j.insert("trailer_len".into(), f.trailer.len().into());
    }
    Decoded { summary: s, json: j }
}

/// Decode a captured frame: Ethernet frames are decoded, other link types are listed as such,
/// and a frame cut short by the capture's snap length says so.
pub fn decode_captured(f: &crate::capture::CapturedFrame) -> Decoded {
    let mut d = if f.linktype == 1 {
        decode_ethernet(&f.data)
    } else {
        let mut json = Map::new();
        json.insert("kind".into(), "not_ethernet".into());
        json.insert("linktype".into(), f.linktype.into());
        json.insert("len".into(), f.data.len().into());
        Decoded { summary: format!("not Ethernet (link type {})", f.linktype), json }
    };
    if (f.data.len() as u64) < u64::from(f.orig_len) {
        d.json.insert("captured_len".into(), f.data.len().into());
        d.json.insert("orig_len".into(), f.orig_len.into());
        d.summary.push_str(&format!(" [captured {} of {} bytes]", f.data.len(), f.orig_len));
    }
    d
}
