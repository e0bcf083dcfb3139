//! The JSON lines of `roce decode --json` back into frames (what `roce encode` writes to a pcap).
//!
//! A RoCEv2 frame that parsed whole is built from its fields (Ethernet, VLAN, IP, UDP, BTH,
//! extension headers, payload, pad, trailer): present fields are used as given; absent ones are
//! computed. Fields that depend on others (IP and UDP lengths, the IPv4 header checksum, the
//! ICRC) are computed from the frame being built when the JSON says they were right
//! (`checksum_ok`, `icrc: "ok"`, lengths that agree with `payload_len`), and kept as given when
//! it says they were wrong: an edited PSN gets a new, right ICRC; a bad ICRC stays bad. Every
//! other frame (not RoCEv2, or stopped parsing) is written from its `raw` bytes.
//!
//! The MAD of a QP1 frame is built from its structured members (`mad`, `rmpp`, `sa`,
//! `mcmember`, `class_port_info`, `service_record`, `cm`) over the `payload` bytes ([`mad`]):
//! structured members over `payload`, `payload` over `raw`; where a member and the payload
//! disagree the member wins and [`Encoded::overrides`] names it. A member that restates another
//! (`cm.port` of `cm.fields.service_id`, `bth.psn` of `psn`, …) is settled with it
//! ([`Encoded::settled`]): the side edited wins, as `payload` or the line's checksums tell, else
//! the field (`restate`).

use std::io::{self, Write};
use std::net::IpAddr;
use std::time::Duration;

use etherparse::{IpDscp, IpEcn, IpFragOffset, Ipv6FlowLabel, SingleVlanHeader, VlanId, VlanPcp};
use roce_wire::bth::{self, Opcode};
use roce_wire::ext::{ExtHeaders, ExtMask};
use roce_wire::frame::{FrameRepr, IpHeader};
use roce_wire::{aeth, atomic_ack_eth, atomic_eth, deth, feth, icrc, ieth, immdt, reth, xrceth};
use serde_json::Value;

use crate::capture::linktype;

mod fields;
mod ib;
pub mod mad;
mod restate;
#[cfg(test)]
mod restated_pairs;

pub use restate::{Prefer, Settled};
use restate::{Views, Was};

/// Why a line could not be encoded.
#[derive(Debug)]
pub struct EncodeError(pub String);

impl std::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(s: impl Into<String>) -> Result<T, EncodeError> {
    Err(EncodeError(s.into()))
}

/// One encoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    /// Capture timestamp.
    pub timestamp: Duration,
    /// Link type.
    pub linktype: u32,
    /// Length on the wire.
    pub orig_len: u32,
    /// The bytes.
    pub data: Vec<u8>,
    /// Structured members whose value differs from the `payload` bytes (they won).
    pub overrides: Vec<String>,
    /// What was not built field by field and where its bytes came from (e.g. an unknown CM
    /// message's body from `payload`).
    pub notes: Vec<String>,
    /// Members that restate another and disagreed with it, and which side went to the wire
    /// (`cm.port_space/cm.port follows cm.fields.service_id`).
    pub settled: Vec<Settled>,
    /// How the side was chosen for the pairs `payload` did not settle, when there were any.
    pub settled_by: Option<SettledBy>,
}

/// How `encode_value` chose the side of a restating pair that `payload` did not settle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettledBy {
    /// The line's `icrc_expected` (and `vcrc_expected`) matched the frame built with the
    /// other side: that side was what decode saw, this one the edit.
    Checksum,
    /// Nothing in the line told: the field won ([`Prefer::Field`]).
    Rule,
}

fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut v = v;
    for k in path {
        v = v.get(*k)?;
    }
    Some(v)
}

fn num(v: &Value, path: &[&str]) -> Result<Option<u64>, EncodeError> {
    match get(v, path) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            n.as_u64().map(Some).ok_or_else(|| EncodeError(format!("{}: not a count", path.join("."))))
        }
        Some(Value::String(s)) if s.starts_with("0x") => {
            u64::from_str_radix(&s[2..], 16).map(Some).map_err(|e| EncodeError(format!("{}: {e}", path.join("."))))
        }
        Some(other) => err(format!("{}: expected a number, found {other}", path.join("."))),
    }
}

fn num_or(v: &Value, path: &[&str], default: u64) -> Result<u64, EncodeError> {
    Ok(num(v, path)?.unwrap_or(default))
}

fn bounded<T: TryFrom<u64>>(v: &Value, path: &[&str], default: T) -> Result<T, EncodeError> {
    match num(v, path)? {
        None => Ok(default),
        Some(n) => T::try_from(n).map_err(|_| EncodeError(format!("{}: {n} is out of range", path.join(".")))),
    }
}

fn flag(v: &Value, path: &[&str], default: bool) -> bool {
    get(v, path).and_then(Value::as_bool).unwrap_or(default)
}

fn hex(v: &Value, path: &[&str]) -> Result<Option<Vec<u8>>, EncodeError> {
    let Some(s) = get(v, path).and_then(Value::as_str) else { return Ok(None) };
    fields::hex_bytes(s, &path.join(".")).map(Some)
}

fn mac(v: &Value, path: &[&str]) -> Result<Option<Vec<u8>>, EncodeError> {
    let Some(s) = get(v, path).and_then(Value::as_str) else { return Ok(None) };
    if s.is_empty() {
        return Ok(Some(Vec::new()));
    }
    s.split(':')
        .map(|p| u8::from_str_radix(p, 16))
        .collect::<Result<Vec<u8>, _>>()
        .map(Some)
        .map_err(|e| EncodeError(format!("{}: {e}", path.join("."))))
}

fn mac6(v: &Value, path: &[&str], default: [u8; 6]) -> Result<[u8; 6], EncodeError> {
    match mac(v, path)? {
        None => Ok(default),
        Some(m) => m.try_into().map_err(|_| EncodeError(format!("{}: not 6 bytes", path.join(".")))),
    }
}

fn ip(v: &Value, path: &[&str]) -> Result<Option<IpAddr>, EncodeError> {
    let Some(s) = get(v, path).and_then(Value::as_str) else { return Ok(None) };
    s.parse().map(Some).map_err(|e| EncodeError(format!("{}: {e}", path.join("."))))
}

fn timestamp(v: &Value) -> Result<Duration, EncodeError> {
    let Some(s) = get(v, &["time_epoch"]).and_then(Value::as_str) else {
        let t = get(v, &["time"]).and_then(Value::as_f64).unwrap_or(0.0);
        return Ok(Duration::try_from_secs_f64(t).unwrap_or_default());
    };
    let (secs, frac) = s.split_once('.').unwrap_or((s, "0"));
    let secs: u64 = secs.parse().map_err(|e| EncodeError(format!("time_epoch: {e}")))?;
    let mut digits = frac.to_string();
    digits.truncate(9);
    while digits.len() < 9 {
        digits.push('0');
    }
    let ns: u32 = digits.parse().map_err(|e| EncodeError(format!("time_epoch: {e}")))?;
    Ok(Duration::new(secs, ns))
}

/// Encode one JSON object (a line of `roce decode --json`).
///
/// A member that restates another (spec/decode.md, "Members that restate others") and
/// disagrees with it is an edit of one of the two: `payload` tells which when it holds the
/// field; else the frame is built both ways, and the one whose checksums are the line's
/// `icrc_expected`/`vcrc_expected` is the frame decode saw, so the other way is the edit;
/// when neither is, the field wins.
pub fn encode_value(v: &Value) -> Result<Encoded, EncodeError> {
    let (first, unpinned) = encode_preferring(v, Prefer::Field)?;
    if !unpinned {
        return Ok(first);
    }
    let witness = checksums(v, v.get("link_type").and_then(Value::as_u64), None);
    let as_decoded =
        |e: &Encoded| witness.is_some() && checksums(v, Some(u64::from(e.linktype)), Some(&e.data)) == witness;
    let second = encode_preferring(v, Prefer::View).ok().map(|(e, _)| e);
    let (mut chosen, by) = match second {
        // The views were what decode saw: the fields are the edit, and win.
        Some(views_won) if as_decoded(&views_won) => (first, SettledBy::Checksum),
        // The fields were what decode saw: the views are the edit.
        Some(views_won) if as_decoded(&first) => (views_won, SettledBy::Checksum),
        _ => (first, SettledBy::Rule),
    };
    chosen.settled_by = Some(by);
    Ok(chosen)
}

/// The ICRC and VCRC decode computes for a frame: of `data` when given, else the ones the
/// line `v` states; `None` when there are none.
fn checksums(v: &Value, lt: Option<u64>, data: Option<&[u8]>) -> Option<(Value, Value)> {
    let of = |m: &serde_json::Map<String, Value>| {
        let crc = |k: &str| m.get(k).cloned().unwrap_or(Value::Null);
        Some((crc("icrc_expected"), crc("vcrc_expected"))).filter(|c| c.0 != Value::Null)
    };
    match data {
        None => of(v.as_object()?),
        Some(d) => of(&crate::decode::decode_link(u32::try_from(lt?).ok()?, d).json),
    }
}

/// Encode one line, settling the restating pairs nothing pins as `prefer` says; also whether
/// there was such a pair.
fn encode_preferring(v: &Value, prefer: Prefer) -> Result<(Encoded, bool), EncodeError> {
    let mut views = Views::new(prefer);
    let mut e = encode_with(v, &mut views)?;
    let unpinned = views.unpinned();
    e.settled = views.settled;
    Ok((e, unpinned))
}

fn encode_with(v: &Value, views: &mut Views) -> Result<Encoded, EncodeError> {
    if !v.is_object() {
        return err("not a JSON object");
    }
    let lt = bounded(v, &["link_type"], linktype::ETHERNET)?;
    if lt == linktype::INFINIBAND || lt == linktype::ERF {
        let (frame, stated, (overrides, notes)) = ib::frame(v, views)?;
        let (data, orig_len) = if lt == linktype::ERF {
            ib::erf_record(v, frame, stated)?
        } else {
            let len = bounded(v, &["len"], frame.len() as u32)?;
            (frame, len)
        };
        let (settled, settled_by) = (Vec::new(), None);
        return Ok(Encoded {
            timestamp: timestamp(v)?,
            linktype: lt,
            orig_len,
            data,
            overrides,
            notes,
            settled,
            settled_by,
        });
    }
    let kind = get(v, &["kind"]).and_then(Value::as_str).unwrap_or("");
    let whole_roce = kind == "rocev2" && get(v, &["bth"]).is_some() && get(v, &["raw"]).is_none();
    let (mut overrides, mut notes) = (Vec::new(), Vec::new());
    // The bytes from the network layer on (non-Ethernet) or the whole frame (Ethernet).
    let body = if whole_roce {
        let (f, b) = roce(v, views)?;
        (overrides, notes) = b;
        if lt == linktype::ETHERNET {
            f
        } else {
            // Behind a cooked header (whose protocol says 0x8100) the tag stays in front of IP.
            f[14..].to_vec()
        }
    } else {
        if let Some(k) = mad::MAD_MEMBERS.iter().find(|k| get(v, &[k]).is_some_and(|m| !m.is_null())) {
            notes.push(format!("{k}: not applied: the frame is written from its `raw` bytes"));
        }
        match hex(v, &["raw"])? {
            Some(r) => r,
            None => return err(format!("a frame of kind {kind:?} needs `raw` (or the RoCEv2 fields)")),
        }
    };
    let data = match lt {
        linktype::LINUX_SLL => {
            let mut o = Vec::with_capacity(16 + body.len());
            o.extend(bounded::<u16>(v, &["sll", "packet_type"], 0)?.to_be_bytes());
            o.extend(bounded::<u16>(v, &["sll", "hatype"], 1)?.to_be_bytes());
            let addr = mac(v, &["sll", "src"])?.unwrap_or_default();
            o.extend(bounded::<u16>(v, &["sll", "halen"], addr.len() as u64 as u16)?.to_be_bytes());
            let mut a = [0u8; 8];
            let n = addr.len().min(8);
            a[..n].copy_from_slice(&addr[..n]);
            o.extend(a);
            o.extend(bounded::<u16>(v, &["sll", "protocol"], ethertype_of(&body))?.to_be_bytes());
            o.extend(body);
            o
        }
        linktype::LINUX_SLL2 => {
            let mut o = Vec::with_capacity(20 + body.len());
            o.extend(bounded::<u16>(v, &["sll2", "protocol"], ethertype_of(&body))?.to_be_bytes());
            o.extend(bounded::<u16>(v, &["sll2", "reserved"], 0)?.to_be_bytes());
            o.extend(bounded::<u32>(v, &["sll2", "ifindex"], 0)?.to_be_bytes());
            o.extend(bounded::<u16>(v, &["sll2", "hatype"], 1)?.to_be_bytes());
            o.push(bounded::<u8>(v, &["sll2", "packet_type"], 0)?);
            let addr = mac(v, &["sll2", "src"])?.unwrap_or_default();
            o.push(bounded::<u8>(v, &["sll2", "halen"], addr.len() as u64 as u8)?);
            let mut a = [0u8; 8];
            let n = addr.len().min(8);
            a[..n].copy_from_slice(&addr[..n]);
            o.extend(a);
            o.extend(body);
            o
        }
        _ => body,
    };
    let orig_len = bounded(v, &["len"], data.len() as u32)?;
    let (settled, settled_by) = (Vec::new(), None);
    Ok(Encoded { timestamp: timestamp(v)?, linktype: lt, orig_len, data, overrides, notes, settled, settled_by })
}

/// The EtherType of a network-layer packet, from its version nibble.
fn ethertype_of(b: &[u8]) -> u16 {
    match b.first().map(|x| x >> 4) {
        Some(6) => 0x86dd,
        _ => 0x0800,
    }
}

/// What building a frame's MAD reported: the members that overrode `payload`, and notes.
type MadReport = (Vec<String>, Vec<String>);

/// Build a RoCEv2 frame (Ethernet first) from the decoder's fields, and its MAD when the line
/// has MAD members.
fn roce(v: &Value, views: &mut Views) -> Result<(Vec<u8>, MadReport), EncodeError> {
    let src = ip(v, &["ip", "src"])?.ok_or_else(|| EncodeError("ip.src missing".into()))?;
    let dst = ip(v, &["ip", "dst"])?.ok_or_else(|| EncodeError("ip.dst missing".into()))?;
    let b = bth_of(v, views)?;
    let ext = ext_of(v, b.opcode)?;
    let (built, payload, mut notes) = payload_of(v, &b, &ext, 1, views)?;
    let smac = mac6(v, &["eth", "src"], [2, 0, 0, 0, 0, 1])?;
    let dmac = mac6(v, &["eth", "dst"], [2, 0, 0, 0, 0, 2])?;
    let mut r = FrameRepr::new(smac, dmac, src, dst, b, ext, &payload);
    // Pad: as given (count and bytes), else computed from the payload length.
    if let Some(pc) = num(v, &["bth", "pad_count"])? {
        r.bth.pad_count = (pc & 3) as u8;
    }
    if let Some(p) = hex(v, &["pad"])? {
        if p.len() > 3 {
            return err("pad: more than 3 bytes");
        }
        r.bth.pad_count = p.len() as u8;
        r.pad[..p.len()].copy_from_slice(&p);
    }
    if let Some(vl) = get(v, &["vlan"]) {
        if vl.is_object() {
            r.vlan = Some(SingleVlanHeader {
                pcp: VlanPcp::try_new(bounded(v, &["vlan", "pcp"], 0)?)
                    .map_err(|e| EncodeError(format!("vlan.pcp: {e}")))?,
                drop_eligible_indicator: flag(v, &["vlan", "dei"], false),
                vlan_id: VlanId::try_new(bounded(v, &["vlan", "vid"], 0)?)
                    .map_err(|e| EncodeError(format!("vlan.vid: {e}")))?,
                ether_type: etherparse::EtherType::IPV4,
            });
        }
    }
    match &mut r.ip {
        IpHeader::V4(h) => {
            h.dscp =
                IpDscp::try_new(bounded(v, &["ip", "dscp"], 0)?).map_err(|e| EncodeError(format!("ip.dscp: {e}")))?;
            h.ecn = IpEcn::try_new(bounded(v, &["ip", "ecn"], 0)?).map_err(|e| EncodeError(format!("ip.ecn: {e}")))?;
            h.identification = bounded(v, &["ip", "id"], 0)?;
            h.dont_fragment = flag(v, &["ip", "df"], true);
            h.more_fragments = flag(v, &["ip", "mf"], false);
            h.fragment_offset = IpFragOffset::try_new(bounded(v, &["ip", "frag_offset"], 0)?)
                .map_err(|e| EncodeError(format!("ip.frag_offset: {e}")))?;
            h.time_to_live = bounded(v, &["ip", "ttl"], 64)?;
            if let Some(o) = hex(v, &["ip", "options"])? {
                h.options = o[..]
                    .try_into()
                    .map_err(|_| EncodeError("ip.options: not a multiple of 4 up to 40 bytes".into()))?;
            }
        }
        IpHeader::V6(h) => {
            h.traffic_class = bounded(v, &["ip", "traffic_class"], 0)?;
            h.flow_label = Ipv6FlowLabel::try_new(bounded(v, &["ip", "flow_label"], 0)?)
                .map_err(|e| EncodeError(format!("ip.flow_label: {e}")))?;
            h.hop_limit = bounded(v, &["ip", "hop_limit"], 64)?;
        }
    }
    r.udp.source_port = bounded(v, &["udp", "src_port"], 0xc000)?;
    r.udp.destination_port = bounded(v, &["udp", "dst_port"], 4791)?;
    r.udp.checksum = bounded(v, &["udp", "checksum"], 0)?;
    let mut out = vec![0u8; r.buffer_len()];
    let n = r.emit(&mut out).map_err(|e| EncodeError(format!("cannot build the frame: {e}")))?;
    out.truncate(n);
    let ip_off = 14 + if r.vlan.is_some() { 4 } else { 0 };
    // Fields the JSON says were wrong stay as given; the rest stay computed.
    let udp_off = ip_off + r.ip.header_len();
    let stated_udp_len = |v: &Value| -> Result<Option<u64>, EncodeError> {
        let pl = num(v, &["payload_len"])?;
        Ok(pl.map(|pl| 8 + 12 + r.ext.buffer_len() as u64 + pl + u64::from(r.bth.pad_count & 3) + 4))
    };
    let stated = stated_udp_len(v)?;
    if let Some(ul) = num(v, &["udp", "length"])? {
        if stated.is_some_and(|s| s != ul) {
            out[udp_off + 4..udp_off + 6].copy_from_slice(&(ul as u16).to_be_bytes());
        }
    }
    match &r.ip {
        IpHeader::V4(h) => {
            if let Some(tl) = num(v, &["ip", "total_len"])? {
                if stated.is_some_and(|s| s + h.header_len() as u64 != tl) {
                    out[ip_off + 2..ip_off + 4].copy_from_slice(&(tl as u16).to_be_bytes());
                    // The checksum follows the header as sent, unless it was wrong on purpose.
                    let c = ipv4_checksum(&out[ip_off..udp_off]);
                    out[ip_off + 10..ip_off + 12].copy_from_slice(&c.to_be_bytes());
                }
            }
            if !flag(v, &["ip", "checksum_ok"], true) {
                if let Some(c) = num(v, &["ip", "checksum"])? {
                    out[ip_off + 10..ip_off + 12].copy_from_slice(&(c as u16).to_be_bytes());
                }
            }
        }
        IpHeader::V6(_) => {
            if let Some(pl) = num(v, &["ip", "payload_len"])? {
                if stated.is_some_and(|s| s != pl) {
                    out[ip_off + 4..ip_off + 6].copy_from_slice(&(pl as u16).to_be_bytes());
                }
            }
        }
    }
    // The ICRC covers the lengths: recompute it after patching them, then keep a bad one.
    let icrc_off = out.len() - 4;
    let version = match r.ip {
        IpHeader::V4(_) => icrc::IpVersion::V4,
        IpHeader::V6(_) => icrc::IpVersion::V6,
    };
    if let Ok(c) = icrc::compute(&out[ip_off..icrc_off], version, udp_off - ip_off) {
        out[icrc_off..].copy_from_slice(&icrc::to_wire(c));
    }
    let bad = get(v, &["icrc"]).and_then(Value::as_str) == Some("bad");
    if bad {
        if let Some(c) = num(v, &["icrc_value"])? {
            out[icrc_off..].copy_from_slice(&icrc::to_wire(c as u32));
        }
    }
    if let Some(t) = hex(v, &["trailer"])? {
        out.extend_from_slice(&t);
    }
    if let (Some(b), Some(line)) = (&built, v.as_object()) {
        let decoded = crate::decode::decode_ethernet(&out);
        mad::check_fits(line, &decoded.json, b)?;
    }
    if let Some(b) = built {
        notes.extend(b.notes);
        return Ok((out, (b.overrides, notes)));
    }
    Ok((out, (Vec::new(), notes)))
}

/// The BTH of a line (RoCEv2 or native IB): the top-level `opcode`/`dest_qp`/`psn`/`p_key`
/// (the fields, the ones scripts edit), which `bth.*` restate: settled by `views` when they
/// disagree (nothing in the payload pins them).
fn bth_of(v: &Value, views: &mut Views) -> Result<bth::Repr, EncodeError> {
    let mut top_or_bth = |k: &str, bk: &str, d: u64| -> Result<u64, EncodeError> {
        let (top, in_bth) = (num(v, &[k])?, num(v, &["bth", bk])?);
        let Some(top) = top else { return Ok(in_bth.unwrap_or(d)) };
        let view = format!("bth.{bk}");
        Ok(views.settle(in_bth, top, Was::Unknown, &view, k)?.unwrap_or(top))
    };
    let opcode = Opcode::from(
        u8::try_from(top_or_bth("opcode", "opcode", 0x64)?).map_err(|_| EncodeError("opcode out of range".into()))?,
    );
    let mut b = bth::Repr::new(
        opcode,
        top_or_bth("dest_qp", "dest_qp", 0)? as u32 & 0xff_ffff,
        top_or_bth("psn", "psn", 0)? as u32 & 0xff_ffff,
    );
    b.pkey = top_or_bth("p_key", "p_key", 0xffff)? as u16;
    b.solicited = flag(v, &["bth", "se"], false);
    b.mig_req = flag(v, &["bth", "mig_req"], false);
    b.tver = bounded(v, &["bth", "tver"], 0)?;
    b.fecn = flag(v, &["bth", "fecn"], false);
    b.becn = flag(v, &["bth", "becn"], false);
    b.resv6a = bounded(v, &["bth", "resv6a"], 0)?;
    b.ack_req = flag(v, &["bth", "ack_req"], false);
    b.resv7 = bounded(v, &["bth", "resv7"], 0)?;
    Ok(b)
}

/// The extension headers `opcode` carries, from the line's members.
fn ext_of(v: &Value, opcode: Opcode) -> Result<ExtHeaders, EncodeError> {
    let mask = opcode.ext_headers();
    let mut ext = ExtHeaders::default();
    if mask.contains(ExtMask::DETH) {
        ext.deth = Some(deth::Repr {
            qkey: bounded(v, &["deth", "q_key"], 0)?,
            reserved: bounded(v, &["deth", "reserved"], 0)?,
            src_qp: bounded::<u32>(v, &["deth", "src_qp"], 0)? & 0xff_ffff,
        });
    }
    if mask.contains(ExtMask::XRCETH) {
        ext.xrceth = Some(xrceth::Repr {
            reserved: bounded(v, &["xrceth", "reserved"], 0)?,
            xrc_srq: bounded::<u32>(v, &["xrceth", "xrc_srq"], 0)? & 0xff_ffff,
        });
    }
    if mask.contains(ExtMask::FETH) {
        ext.feth = Some(feth::Repr { bits: bounded(v, &["feth", "bits"], 0)? });
    }
    if mask.contains(ExtMask::RETH) {
        ext.reth = Some(reth::Repr {
            va: num_or(v, &["reth", "va"], 0)?,
            rkey: bounded(v, &["reth", "r_key"], 0)?,
            dma_len: bounded(v, &["reth", "dma_len"], 0)?,
        });
    }
    if mask.contains(ExtMask::ATOMIC_ETH) {
        ext.atomic_eth = Some(atomic_eth::Repr {
            va: num_or(v, &["atomic_eth", "va"], 0)?,
            rkey: bounded(v, &["atomic_eth", "r_key"], 0)?,
            swap_add: num_or(v, &["atomic_eth", "swap_add"], 0)?,
            compare: num_or(v, &["atomic_eth", "compare"], 0)?,
        });
    }
    if mask.contains(ExtMask::AETH) {
        ext.aeth = Some(aeth::Repr {
            syndrome: bounded(v, &["aeth", "syndrome"], 0)?,
            msn: bounded::<u32>(v, &["aeth", "msn"], 0)? & 0xff_ffff,
        });
    }
    if mask.contains(ExtMask::ATOMIC_ACK_ETH) {
        ext.atomic_ack_eth = Some(atomic_ack_eth::Repr { orig: num_or(v, &["atomic_ack_eth", "orig"], 0)? });
    }
    if mask.contains(ExtMask::IMMDT) {
        ext.immdt = Some(immdt::Repr { imm_data: bounded(v, &["immdt", "imm_data"], 0)? });
    }
    if mask.contains(ExtMask::IETH) {
        ext.ieth = Some(ieth::Repr { rkey: bounded(v, &["ieth", "r_key"], 0)? });
    }
    Ok(ext)
}

/// What [`payload_of`] gives: the MAD built from members (if any), the payload, and notes.
type Payload = (Option<mad::BuiltMad>, Vec<u8>, Vec<String>);

/// The payload of a line: its MAD built from the MAD members for a UD frame of a management
/// QP (`first_mad_qp`..=1: QP1 for RoCEv2, QP0 too for native IB, whose SMPs ride QP0),
/// else the `payload` bytes; notes on members not applied.
fn payload_of(
    v: &Value,
    b: &bth::Repr,
    ext: &ExtHeaders,
    first_mad_qp: u32,
    views: &mut Views,
) -> Result<Payload, EncodeError> {
    let given = hex(v, &["payload"])?;
    // A MAD where the decoder reads one: a UD frame to or from QP1.
    let management = |qp: u32| (first_mad_qp..=1).contains(&qp);
    let gsi = ext.deth.is_some_and(|d| management(d.src_qp)) || (management(b.dest_qp) && ext.deth.is_some());
    let mut notes = Vec::new();
    let built = match v.as_object() {
        Some(line) if gsi => mad::build(line, given.as_deref(), views)?,
        Some(line) => {
            if let Some(k) = mad::MAD_MEMBERS.iter().find(|k| line.get(**k).is_some_and(|m| !m.is_null())) {
                notes.push(format!("{k}: not applied: not a UD frame of QP1 (no MAD here)"));
            }
            None
        }
        None => None,
    };
    let payload = match &built {
        Some(b) => b.bytes.clone(),
        None => given.unwrap_or_default(),
    };
    Ok((built, payload, notes))
}

fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum = 0u32;
    for (i, c) in h.chunks(2).enumerate() {
        if i == 5 {
            continue;
        }
        sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// A pcap writer for any link type (nanosecond timestamps).
pub struct PcapOut<W: Write> {
    w: W,
}

impl<W: Write> PcapOut<W> {
    /// Write the file header.
    pub fn new(mut w: W, linktype: u32) -> io::Result<Self> {
        w.write_all(&0xa1b2_3c4du32.to_le_bytes())?;
        w.write_all(&2u16.to_le_bytes())?;
        w.write_all(&4u16.to_le_bytes())?;
        w.write_all(&[0; 8])?;
        w.write_all(&262_144u32.to_le_bytes())?;
        w.write_all(&linktype.to_le_bytes())?;
        Ok(PcapOut { w })
    }

    /// Append a record.
    pub fn write(&mut self, f: &Encoded) -> io::Result<()> {
        let secs = u32::try_from(f.timestamp.as_secs()).map_err(|_| io::Error::other("timestamp past 2106"))?;
        let len = u32::try_from(f.data.len()).map_err(io::Error::other)?;
        self.w.write_all(&secs.to_le_bytes())?;
        self.w.write_all(&f.timestamp.subsec_nanos().to_le_bytes())?;
        self.w.write_all(&len.to_le_bytes())?;
        self.w.write_all(&f.orig_len.max(len).to_le_bytes())?;
        self.w.write_all(&f.data)
    }

    /// Flush and return the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.w.flush()?;
        Ok(self.w)
    }
}
