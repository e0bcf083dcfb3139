//! Turning frames into one summary line and one JSON object each, for `roce decode`.
//!
//! [`Decoder`] writes both straight from the parsed views into reusable buffers (no tree per
//! frame); the JSON follows spec/decode.schema.json (spec/decode.md explains it): snake_case
//! names, every layer that parsed present also when a later one failed, `error` whenever rxe
//! would refuse the frame (a bad ICRC included), 64-bit identifiers as `"0x…"` strings. The
//! summary follows tshark's one-line spirit (addresses, opcode, QPs, PSN, the MAD's class,
//! method and attribute, TID, SA component mask, MCMemberRecord MGID/PortGID/JoinState, ICRC
//! verdict). [`decode_ethernet`] and [`decode_captured`] give the same as owned values.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use etherparse::{Ethernet2Header, Ipv4Header, Ipv6Header, SingleVlanHeader, UdpHeader};
use roce_wire::frame::{self, Frame, IpHeader};
use roce_wire::{ContentError, Error};
use serde_json::{Map, Value};

mod l2;
mod mad;

use crate::capture::linktype;
pub use mad::rmpp::{RmppCounters, MAX_BYTES as RMPP_MAX_BYTES, MAX_OPEN_TABLES as RMPP_MAX_OPEN_TABLES};
use crate::json_out::{push_fmt, Json, Summary};

macro_rules! sum {
    ($s:expr, $($arg:tt)*) => { push_fmt($s, format_args!($($arg)*)) };
}

/// A decoded frame: its summary line and its JSON object.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// Human summary (no frame number, timestamp or length).
    pub summary: String,
    /// Every parsed field (the object `roce decode --json` prints, without the capture's
    /// `frame`/`time`/`link_type` members).
    pub json: Map<String, Value>,
}

/// What the capture says about a frame besides its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// Frame number, from 1.
    pub number: u64,
    /// Capture timestamp since the epoch.
    pub timestamp: Duration,
    /// Time since the first frame.
    pub relative: Duration,
    /// Link type (see [`crate::capture::linktype`]).
    pub linktype: u32,
    /// Interface index (pcapng), 0 otherwise.
    pub interface: u32,
    /// Length on the wire (≥ the captured bytes).
    pub orig_len: u32,
}

/// Where the network layer of a non-Ethernet frame starts, for shifting error offsets back
/// to the captured bytes (the decoder puts a blank Ethernet header in front of it).
#[derive(Clone, Copy)]
struct Link {
    /// Offset of the network layer in the captured frame, when the frame is not Ethernet.
    net_at: Option<usize>,
}

impl Link {
    fn offset(&self, off: usize) -> usize {
        match self.net_at {
            Some(at) => (off + at).saturating_sub(ETH_LEN),
            None => off,
        }
    }

    fn shift(&self, e: Error) -> Error {
        let o = self.offset(e.offset());
        match e {
            Error::Len { layer, required_len, len, .. } => Error::Len { layer, offset: o, required_len, len },
            Error::Content { layer, kind, .. } => Error::Content { layer, offset: o, kind },
        }
    }
}

const ETH_LEN: usize = 14;

/// The reusable state of the decoder: the two output buffers and scratch space.
#[derive(Default)]
pub struct Decoder {
    /// The JSON object of the last frame (one line, no newline).
    pub json: Json,
    /// The summary of the last frame (no newline).
    pub summary: Summary,
    scratch: Vec<u8>,
    /// RMPP tables being put back together across frames.
    pub(crate) rmpp: mad::rmpp::Reassembly,
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

/// Epoch seconds with nanoseconds, as tshark's `frame.time_epoch`.
fn epoch(d: Duration) -> impl std::fmt::Display {
    struct E(Duration);
    impl std::fmt::Display for E {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}.{:09}", self.0.as_secs(), self.0.subsec_nanos())
        }
    }
    E(d)
}

impl Decoder {
    /// A decoder with empty buffers.
    pub fn new() -> Self {
        Self::default()
    }

    /// What the decoder counted about RMPP tables so far (segments it could not place, tables
    /// it reported incomplete, the memory bounds).
    pub fn rmpp_counters(&self) -> RmppCounters {
        self.rmpp.counters()
    }

    /// Decode one captured frame into [`Decoder::json`] and [`Decoder::summary`].
    pub fn decode(&mut self, meta: &Meta, data: &[u8]) {
        self.json.clear();
        self.summary.clear();
        let j = &mut self.json;
        j.begin("");
        j.count("frame", meta.number);
        j.float("time", meta.relative.as_secs_f64());
        j.display("time_epoch", epoch(meta.timestamp));
        j.num("link_type", meta.linktype);
        j.num("interface", meta.interface);
        j.num("len", meta.orig_len);
        j.count("cap_len", data.len() as u64);
        self.body(meta.linktype, data);
        if (data.len() as u64) < u64::from(meta.orig_len) {
            sum!(&mut self.summary, " [captured {} of {} bytes]", data.len(), meta.orig_len);
        }
        self.json.end();
    }

    /// Everything below the capture's own fields.
    fn body(&mut self, lt: u32, data: &[u8]) {
        match lt {
            linktype::ETHERNET => self.ethernet(data, Link { net_at: None }),
            linktype::LINUX_SLL => {
                if data.len() < 16 {
                    return self.link_short("sll", 16, data);
                }
                let j = &mut self.json;
                let ptype = u16::from_be_bytes([data[0], data[1]]);
                let hatype = u16::from_be_bytes([data[2], data[3]]);
                let halen = u16::from_be_bytes([data[4], data[5]]);
                let proto = u16::from_be_bytes([data[14], data[15]]);
                j.begin("sll");
                j.num("packet_type", u32::from(ptype));
                j.str("packet_type_name", packet_type_name(ptype));
                j.num("hatype", u32::from(hatype));
                j.num("halen", u32::from(halen));
                j.mac("src", &data[6..6 + usize::from(halen.min(8))]);
                j.num("protocol", u32::from(proto));
                j.end();
                self.network(proto, data, 16);
            }
            linktype::LINUX_SLL2 => {
                if data.len() < 20 {
                    return self.link_short("sll2", 20, data);
                }
                let j = &mut self.json;
                let proto = u16::from_be_bytes([data[0], data[1]]);
                let ifindex = u32::from_be_bytes([data[4], data[5], data[6], data[7]]);
                let hatype = u16::from_be_bytes([data[8], data[9]]);
                let ptype = data[10];
                let halen = data[11];
                j.begin("sll2");
                j.num("protocol", u32::from(proto));
                j.num("reserved", u32::from(u16::from_be_bytes([data[2], data[3]])));
                j.num("ifindex", ifindex);
                j.num("hatype", u32::from(hatype));
                j.num("packet_type", u32::from(ptype));
                j.str("packet_type_name", packet_type_name(u16::from(ptype)));
                j.num("halen", u32::from(halen));
                j.mac("src", &data[12..12 + usize::from(halen.min(8))]);
                j.end();
                self.network(proto, data, 20);
            }
            linktype::RAW | linktype::IPV4 | linktype::IPV6 => {
                let proto = match (lt, data.first().map(|b| b >> 4)) {
                    (linktype::IPV4, _) | (_, Some(4)) => 0x0800,
                    (linktype::IPV6, _) | (_, Some(6)) => 0x86dd,
                    _ => 0,
                };
                self.network(proto, data, 0);
            }
            _ => {
                let j = &mut self.json;
                j.str("kind", "unsupported_link");
                j.hex("raw", data);
                sum!(&mut self.summary, "link type {lt}, {} bytes (not dissected)", data.len());
            }
        }
    }

    fn link_short(&mut self, name: &str, need: usize, data: &[u8]) {
        let j = &mut self.json;
        j.str("kind", "other");
        j.begin("error");
        j.str("layer", name);
        j.num("offset", 0);
        j.str("reason", "truncated");
        j.display(
            "message",
            format_args!("{name} at byte 0: truncated, needs {need} bytes but only {} remain", data.len()),
        );
        j.end();
        j.hex("raw", data);
        sum!(&mut self.summary, "{name} header cut short ({} of {need} bytes)", data.len());
    }

    /// A network layer (EtherType `proto`) starting at `at` in a frame without Ethernet header:
    /// decoded behind a blank Ethernet header, offsets shifted back.
    fn network(&mut self, proto: u16, data: &[u8], at: usize) {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        scratch.extend_from_slice(&[0; 12]);
        scratch.extend_from_slice(&proto.to_be_bytes());
        scratch.extend_from_slice(&data[at..]);
        self.ethernet(&scratch, Link { net_at: Some(at) });
        self.scratch = scratch;
    }

    fn ethernet(&mut self, bytes: &[u8], link: Link) {
        match frame::parse(bytes) {
            Ok(f) => self.roce(bytes, &f, None, link),
            Err(strict) => match frame::parse_lax(bytes) {
                Ok(f) => self.roce(bytes, &f, Some(strict), link),
                Err(e) if is_not_roce(&e) => {
                    l2::describe(self, bytes, link.net_at.is_none(), &|e| link.shift(e))
                }
                Err(e) => self.roce_partial(bytes, link.shift(e), link),
            },
        }
    }

    /// A RoCEv2 frame that failed before its end: the layers that parsed, then the error.
    fn roce_partial(&mut self, bytes: &[u8], e: Error, link: Link) {
        self.json.str("kind", "rocev2");
        let mut addrs = None;
        let mut at = 0;
        'layers: {
            let Ok((eth, _)) = Ethernet2Header::from_slice(bytes) else { break 'layers };
            if link.net_at.is_none() {
                eth_json(&mut self.json, &eth);
            }
            at = ETH_LEN;
            let mut et = eth.ether_type.0;
            if et == 0x8100 {
                let Ok((v, _)) = SingleVlanHeader::from_slice(&bytes[at..]) else { break 'layers };
                vlan_json(&mut self.json, &v);
                et = v.ether_type.0;
                at += 4;
            }
            let udp_at = if et == 0x0800 {
                let Ok((ip, _)) = Ipv4Header::from_slice(&bytes[at..]) else { break 'layers };
                let ok = ip.calc_header_checksum() == ip.header_checksum;
                ipv4_json(&mut self.json, &ip, ok);
                addrs = Some((IpAddr::from(ip.source), IpAddr::from(ip.destination)));
                at + ip.header_len()
            } else {
                let Ok((ip, _)) = Ipv6Header::from_slice(&bytes[at..]) else { break 'layers };
                ipv6_json(&mut self.json, &ip);
                addrs = Some((IpAddr::from(ip.source), IpAddr::from(ip.destination)));
                at + Ipv6Header::LEN
            };
            let Ok((udp, _)) = UdpHeader::from_slice(&bytes[udp_at..]) else { break 'layers };
            udp_json(&mut self.json, &udp);
            at = udp_at + 8;
            let Ok(bth) = roce_wire::bth::Repr::parse_bytes(&bytes[at..]) else { break 'layers };
            bth_json(&mut self.json, &bth);
        }
        error_json(&mut self.json, "error", &e);
        let _ = at;
        self.raw(bytes, link);
        if let Some((s, d)) = addrs {
            sum!(&mut self.summary, "{s} → {d} ");
        }
        sum!(&mut self.summary, "RoCEv2 malformed: {e}");
    }

    /// The captured bytes from the network layer on (or the whole frame for Ethernet), for
    /// frames whose structure the JSON cannot carry completely.
    fn raw(&mut self, bytes: &[u8], link: Link) {
        let from = if link.net_at.is_some() { ETH_LEN } else { 0 };
        self.json.hex("raw", &bytes[from..]);
    }

    fn roce(&mut self, bytes: &[u8], f: &Frame<'_>, strict: Option<Error>, link: Link) {
        let r = &f.repr;
        let j = &mut self.json;
        let s = &mut self.summary;
        j.str("kind", "rocev2");
        if link.net_at.is_none() {
            eth_json(j, &r.ethernet);
        }
        if let Some(v) = &r.vlan {
            vlan_json(j, v);
        }
        match &r.ip {
            IpHeader::V4(h) => ipv4_json(j, h, f.ip_checksum_ok),
            IpHeader::V6(h) => ipv6_json(j, h),
        }
        udp_json(j, &r.udp);
        let b = &r.bth;
        j.num("opcode", u32::from(u8::from(b.opcode)));
        j.str("opcode_name", b.opcode.name());
        j.num("dest_qp", b.dest_qp);
        j.num("psn", b.psn);
        j.num("p_key", u32::from(b.pkey));
        bth_json(j, b);
        match &r.ip {
            IpHeader::V4(h) => {
                s.ipv4(h.source);
                s.push_str(" → ");
                s.ipv4(h.destination);
            }
            IpHeader::V6(h) => {
                s.ipv6(h.source);
                s.push_str(" → ");
                s.ipv6(h.destination);
            }
        }
        s.push_str(" RoCEv2 ");
        s.push_str(b.opcode.name());
        s.push_str(" QP=0x");
        s.hex(u64::from(b.dest_qp), 6);
        s.push_str(" PSN=");
        s.dec(u64::from(b.psn));
        s.push_str(" P_Key=0x");
        s.hex(u64::from(b.pkey), 4);
        if b.fecn || b.becn {
            sum!(s, " {}{}", if b.fecn { "FECN " } else { "" }, if b.becn { "BECN" } else { "" });
        }
        let e = &r.ext;
        if let Some(d) = &e.deth {
            j.begin("deth");
            j.num("q_key", d.qkey);
            j.num("reserved", u32::from(d.reserved));
            j.num("src_qp", d.src_qp);
            j.end();
            s.push_str(" SrcQP=0x");
            s.hex(u64::from(d.src_qp), 6);
            s.push_str(" Q_Key=0x");
            s.hex(u64::from(d.qkey), 8);
        }
        if let Some(x) = &e.feth {
            j.begin("feth");
            j.num("bits", x.bits);
            j.num("placement_type", u32::from(x.placement_type()));
            j.num("selectivity_level", u32::from(x.selectivity_level()));
            j.end();
        }
        if let Some(x) = &e.reth {
            j.begin("reth");
            j.id64("va", x.va);
            j.num("r_key", x.rkey);
            j.num("dma_len", x.dma_len);
            j.end();
            sum!(s, " VA=0x{:x} R_Key=0x{:08x} DMALen={}", x.va, x.rkey, x.dma_len);
        }
        if let Some(x) = &e.atomic_eth {
            j.begin("atomic_eth");
            j.id64("va", x.va);
            j.num("r_key", x.rkey);
            j.id64("swap_add", x.swap_add);
            j.id64("compare", x.compare);
            j.end();
        }
        if let Some(x) = &e.aeth {
            j.begin("aeth");
            j.num("syndrome", u32::from(x.syndrome));
            j.num("msn", x.msn);
            j.end();
            sum!(s, " Syndrome=0x{:02x} MSN={}", x.syndrome, x.msn);
        }
        if let Some(x) = &e.atomic_ack_eth {
            j.begin("atomic_ack_eth");
            j.id64("orig", x.orig);
            j.end();
        }
        if let Some(x) = &e.immdt {
            j.begin("immdt");
            j.num("imm_data", x.imm_data);
            j.end();
            sum!(s, " Imm=0x{:08x}", x.imm_data);
        }
        if let Some(x) = &e.ieth {
            j.begin("ieth");
            j.num("r_key", x.rkey);
            j.end();
        }
        j.count("payload_len", r.payload.len() as u64);
        // QP1 carries MADs (GSI); the decoder tries them whenever either end is QP1.
        let is_gsi = b.dest_qp == 1 || e.deth.is_some_and(|d| d.src_qp == 1);
        if is_gsi && e.deth.is_some() {
            let ends = match &r.ip {
                IpHeader::V4(h) => (
                    Ipv4Addr::from(h.source).to_ipv6_mapped().octets(),
                    Ipv4Addr::from(h.destination).to_ipv6_mapped().octets(),
                ),
                IpHeader::V6(h) => (h.source, h.destination),
            };
            let at = link.offset(f.offsets.payload);
            mad::describe(j, s, r.payload, at, &mut self.rmpp, ends);
        } else {
            s.push_str(" PayLen=");
            s.dec(r.payload.len() as u64);
        }
        j.hex("payload", r.payload);
        j.hex("pad", &r.pad[..r.pad_len()]);
        let ok = f.icrc_ok();
        j.str("icrc", if ok { "ok" } else { "bad" });
        j.num("icrc_value", f.icrc);
        j.num("icrc_expected", f.icrc_expected);
        if ok {
            s.push_str(" | ICRC ok");
        } else {
            sum!(s, " | ICRC bad (0x{:08x}, expected 0x{:08x})", f.icrc, f.icrc_expected);
        }
        if !f.trailer.is_empty() {
            j.hex("trailer", f.trailer);
        }
        // What the strict (rxe-like) parser refuses: the ICRC, TVer, pad, IPv4 checksum.
        let lenient = strict.is_some();
        if let Some(e) = strict {
            let e = link.shift(e);
            error_json(j, "error", &e);
            if !matches!(e, Error::Content { kind: ContentError::IcrcMismatch { .. }, .. }) {
                sum!(s, " | rejected by rxe: {e}");
            }
        }
        // When the fields do not give back every byte (read leniently: an impossible pad taken
        // as none; bytes between the UDP datagram's end and the IP packet's), the frame's
        // bytes come along too: `roce encode` uses them.
        let covered = f.offsets.end + f.trailer.len() == bytes.len();
        if !covered || (lenient && !reemits(r, bytes, f.offsets.icrc, f.offsets.ip)) {
            j.hex("raw", &bytes[if link.net_at.is_some() { ETH_LEN } else { 0 }..]);
        }
    }
}

/// Whether the Repr emits `bytes[..icrc]` again (the IPv4 checksum aside: it may be wrong).
fn reemits(r: &roce_wire::frame::FrameRepr<'_>, bytes: &[u8], icrc: usize, ip: usize) -> bool {
    let mut tmp = vec![0u8; r.buffer_len()];
    if r.emit(&mut tmp).is_err() || tmp.len() < icrc || bytes.len() < icrc {
        return false;
    }
    let v4 = matches!(r.ip, IpHeader::V4(_));
    let skip = |i: usize| v4 && (ip + 10..ip + 12).contains(&i);
    (0..icrc).all(|i| skip(i) || tmp[i] == bytes[i])
}

fn packet_type_name(t: u16) -> &'static str {
    // linux/if_packet.h PACKET_* values.
    match t {
        0 => "host",
        1 => "broadcast",
        2 => "multicast",
        3 => "otherhost",
        4 => "outgoing",
        _ => "unknown",
    }
}

pub(crate) fn eth_json(j: &mut Json, e: &Ethernet2Header) {
    j.begin("eth");
    j.mac("dst", &e.destination);
    j.mac("src", &e.source);
    j.num("ethertype", u32::from(e.ether_type.0));
    j.end();
}

pub(crate) fn vlan_json(j: &mut Json, v: &SingleVlanHeader) {
    j.begin("vlan");
    j.num("pcp", u32::from(v.pcp.value()));
    j.bool("dei", v.drop_eligible_indicator);
    j.num("vid", u32::from(v.vlan_id.value()));
    j.num("ethertype", u32::from(v.ether_type.0));
    j.end();
}

pub(crate) fn ipv4_json(j: &mut Json, h: &Ipv4Header, checksum_ok: bool) {
    j.begin("ip");
    j.num("version", 4);
    j.display("src", Ipv4Addr::from(h.source));
    j.display("dst", Ipv4Addr::from(h.destination));
    j.num("ihl", (h.header_len() / 4) as u32);
    j.num("dscp", u32::from(h.dscp.value()));
    j.num("ecn", u32::from(h.ecn.value()));
    j.num("total_len", u32::from(h.total_len));
    j.num("id", u32::from(h.identification));
    j.bool("df", h.dont_fragment);
    j.bool("mf", h.more_fragments);
    j.num("frag_offset", u32::from(h.fragment_offset.value()));
    j.num("ttl", u32::from(h.time_to_live));
    j.num("protocol", u32::from(h.protocol.0));
    j.num("checksum", u32::from(h.header_checksum));
    j.bool("checksum_ok", checksum_ok);
    if !h.options.is_empty() {
        j.hex("options", h.options.as_slice());
    }
    j.end();
}

pub(crate) fn ipv6_json(j: &mut Json, h: &Ipv6Header) {
    j.begin("ip");
    j.num("version", 6);
    j.display("src", Ipv6Addr::from(h.source));
    j.display("dst", Ipv6Addr::from(h.destination));
    j.num("traffic_class", u32::from(h.traffic_class));
    j.num("flow_label", h.flow_label.value());
    j.num("payload_len", u32::from(h.payload_length));
    j.num("next_header", u32::from(h.next_header.0));
    j.num("hop_limit", u32::from(h.hop_limit));
    j.end();
}

fn udp_json(j: &mut Json, u: &UdpHeader) {
    j.begin("udp");
    j.num("src_port", u32::from(u.source_port));
    j.num("dst_port", u32::from(u.destination_port));
    j.num("length", u32::from(u.length));
    j.num("checksum", u32::from(u.checksum));
    j.end();
}

fn bth_json(j: &mut Json, b: &roce_wire::bth::Repr) {
    j.begin("bth");
    j.num("opcode", u32::from(u8::from(b.opcode)));
    j.bool("se", b.solicited);
    j.bool("mig_req", b.mig_req);
    j.num("pad_count", u32::from(b.pad_count));
    j.num("tver", u32::from(b.tver));
    j.num("p_key", u32::from(b.pkey));
    j.bool("fecn", b.fecn);
    j.bool("becn", b.becn);
    j.num("resv6a", u32::from(b.resv6a));
    j.num("dest_qp", b.dest_qp);
    j.bool("ack_req", b.ack_req);
    j.num("resv7", u32::from(b.resv7));
    j.num("psn", b.psn);
    j.end();
}

/// `{"layer", "offset", "reason", "message"}` under `key`.
pub(crate) fn error_json(j: &mut Json, key: &str, e: &Error) {
    j.begin(key);
    j.str("layer", e.layer().name());
    j.count("offset", e.offset() as u64);
    j.str("reason", e.reason());
    j.display("message", e);
    j.end();
}

fn to_decoded(d: &Decoder) -> Decoded {
    let json = match serde_json::from_slice::<Value>(&d.json.buf) {
        Ok(Value::Object(mut m)) => {
            for k in ["frame", "time", "time_epoch", "link_type", "interface"] {
                m.shift_remove(k);
            }
            m
        }
        _ => Map::new(),
    };
    Decoded { summary: d.summary.text.clone(), json }
}

/// Decode one Ethernet frame. Never fails: what cannot be parsed is described, with the error.
pub fn decode_ethernet(bytes: &[u8]) -> Decoded {
    let mut d = Decoder::new();
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    let meta = Meta {
        number: 1,
        timestamp: Duration::ZERO,
        relative: Duration::ZERO,
        linktype: linktype::ETHERNET,
        interface: 0,
        orig_len: len,
    };
    d.decode(&meta, bytes);
    to_decoded(&d)
}

/// Decode a captured frame of any link type; a frame cut short by the capture's snap length
/// says so.
pub fn decode_captured(f: &crate::capture::CapturedFrame) -> Decoded {
    let mut d = Decoder::new();
    let meta = Meta {
        number: 1,
        timestamp: f.timestamp,
        relative: Duration::ZERO,
        linktype: f.linktype,
        interface: 0,
        orig_len: f.orig_len,
    };
    d.decode(&meta, &f.data);
    to_decoded(&d)
}
