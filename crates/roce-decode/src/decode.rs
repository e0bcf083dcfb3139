//! Turning frames into one summary line and one JSON object each, for `roce decode`.
//!
//! [`Decoder`] writes both straight from the parsed views into reusable buffers (no tree per
//! frame); the JSON follows spec/decode.schema.json (spec/decode.md explains it): snake_case
//! names, every layer that parsed present also when a later one failed, `error` whenever rxe
//! would refuse the frame (a bad ICRC included), 64-bit identifiers as `"0x…"` strings. The
//! summary follows tshark's one-line spirit (addresses, opcode, QPs, PSN, the MAD's class,
//! method and attribute, TID, SA component mask, MCMemberRecord MGID/PortGID/JoinState, ICRC
//! verdict). [`decode_ethernet`] and [`decode_captured`] give the same as owned values.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use etherparse::{Ethernet2Header, Ipv4Header, Ipv6Header, SingleVlanHeader, UdpHeader};
use roce_wire::demux::{Checks, LinkHeader, LinkType, Payload, Sliced, SLL2_LEN, SLL_LEN};
use roce_wire::frame::{Frame, IpHeader};
use roce_wire::l2::{ETHERNET_LEN, ETHERTYPE_VLAN, VLAN_LEN};
use roce_wire::{ContentError, Error};
use serde_json::{Map, Value};

mod ib;
mod l2;
mod mad;

use crate::capture::linktype;
use crate::json_out::{push_fmt, Json, Summary};
pub use mad::rmpp::{RmppCounters, MAX_BYTES as RMPP_MAX_BYTES, MAX_OPEN_TABLES as RMPP_MAX_OPEN_TABLES};

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

/// Where a frame's layers sit for the renderers: whether the capture has an Ethernet header
/// (its JSON is printed then), and where the captured bytes the JSON's `raw` carries start
/// (the whole frame for Ethernet, the network layer after a cooked header).
#[derive(Clone, Copy)]
struct Link {
    ethernet: bool,
    raw_from: usize,
}

/// The reusable state of the decoder: the two output buffers and the RMPP tables.
#[derive(Default)]
pub struct Decoder {
    /// The JSON object of the last frame (one line, no newline).
    pub json: Json,
    /// The summary of the last frame (no newline).
    pub summary: Summary,
    /// RMPP tables being put back together across frames.
    pub(crate) rmpp: mad::rmpp::Reassembly,
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
        j.epoch("time_epoch", meta.timestamp);
        j.num("link_type", meta.linktype);
        j.num("interface", meta.interface);
        let (len, cap_len) = frame_lengths(meta.linktype, meta.orig_len, data);
        j.num("len", len);
        j.count("cap_len", cap_len as u64);
        self.body(meta, data);
        if (cap_len as u64) < u64::from(len) {
            sum!(&mut self.summary, " [captured {cap_len} of {len} bytes]");
        }
        self.json.end();
    }

    /// Everything below the capture's own fields.
    fn body(&mut self, meta: &Meta, data: &[u8]) {
        let lt = meta.linktype;
        match lt {
            linktype::INFINIBAND => return ib::describe(self, data),
            linktype::ERF => return ib::describe_erf(self, data, meta.orig_len),
            _ => {}
        }
        let link = LinkType::from(lt);
        let header = match LinkHeader::parse(link, data) {
            Ok(h) => h,
            Err(e) => {
                return match link {
                    LinkType::LinuxSll => self.link_short("sll", SLL_LEN, data),
                    LinkType::LinuxSll2 => self.link_short("sll2", SLL2_LEN, data),
                    LinkType::Unknown(_) => {
                        let j = &mut self.json;
                        j.str("kind", "unsupported_link");
                        j.hex("raw", data);
                        sum!(&mut self.summary, "link type {lt}, {} bytes (not dissected)", data.len());
                    }
                    // An Ethernet frame shorter than its header.
                    _ => self.roce_partial(data, e, Link { ethernet: true, raw_from: 0 }, 0),
                };
            }
        };
        let j = &mut self.json;
        match &header {
            LinkHeader::LinuxSll(h) => {
                j.begin("sll");
                j.num("packet_type", u32::from(h.packet_type));
                j.str("packet_type_name", packet_type_name(h.packet_type));
                j.num("hatype", u32::from(h.hatype));
                j.num("halen", u32::from(h.halen));
                j.mac("src", &h.addr[..usize::from(h.halen.min(8))]);
                j.num("protocol", u32::from(h.protocol));
                j.end();
            }
            LinkHeader::LinuxSll2(h) => {
                j.begin("sll2");
                j.num("protocol", u32::from(h.protocol));
                j.num("reserved", u32::from(h.reserved));
                j.num("ifindex", h.ifindex);
                j.num("hatype", u32::from(h.hatype));
                j.num("packet_type", u32::from(h.packet_type));
                j.str("packet_type_name", packet_type_name(u16::from(h.packet_type)));
                j.num("halen", u32::from(h.halen));
                j.mac("src", &h.addr[..usize::from(h.halen.min(8))]);
                j.end();
            }
            LinkHeader::Ethernet(_) | LinkHeader::RawIp { .. } => {}
        }
        let ethernet = matches!(header, LinkHeader::Ethernet(_));
        let link = Link { ethernet, raw_from: if ethernet { 0 } else { header.len() } };
        let ether_type = header.ether_type();
        // One walk (roce_wire's demux), lax: what rxe would refuse comes back beside the frame.
        match Sliced::after_link(header, data, Checks::Lax) {
            Ok(Sliced { payload: Payload::RoceV2 { packet, refused }, .. }) => match packet.to_frame() {
                Ok(f) => self.roce(data, &f, refused, link),
                Err(e) => self.roce_partial(data, e, link, ether_type),
            },
            Ok(sliced) => l2::describe(self, data, link, &sliced),
            Err(e) => self.roce_partial(data, e, link, ether_type),
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

    /// A RoCEv2 frame that failed before its end: the layers that parsed, then the error
    /// (`ether_type`: the link header's, for a capture without Ethernet header).
    fn roce_partial(&mut self, bytes: &[u8], e: Error, link: Link, ether_type: u16) {
        self.json.str("kind", "rocev2");
        let mut addrs = None;
        'layers: {
            let Some((et, at)) = link_layers(&mut self.json, bytes, link, ether_type) else { break 'layers };
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
            let Ok(bth) = roce_wire::bth::Repr::parse_bytes(&bytes[udp_at + 8..]) else { break 'layers };
            bth_json(&mut self.json, &bth);
        }
        error_json(&mut self.json, "error", &e);
        self.json.hex("raw", &bytes[link.raw_from..]);
        if let Some((s, d)) = addrs {
            sum!(&mut self.summary, "{s} → {d} ");
        }
        sum!(&mut self.summary, "RoCEv2 malformed: {e}");
    }

    fn roce(&mut self, bytes: &[u8], f: &Frame<'_>, strict: Option<Error>, link: Link) {
        let r = &f.repr;
        let j = &mut self.json;
        let s = &mut self.summary;
        j.str("kind", "rocev2");
        if link.ethernet {
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
        bth_top_json(j, b);
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
        bth_summary(s, b);
        let e = &r.ext;
        ext_json(j, s, e);
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
            mad::describe(j, s, r.payload, f.offsets.payload, &mut self.rmpp, ends);
        } else {
            s.push_str(" PayLen=");
            s.dec(r.payload.len() as u64);
        }
        j.hex("payload", r.payload);
        j.hex("pad", &r.pad[..r.pad_len()]);
        crc_json(j, s, Crc::Icrc, f.icrc, f.icrc_expected);
        if !f.trailer.is_empty() {
            j.hex("trailer", f.trailer);
        }
        // What the strict (rxe-like) parser refuses: the ICRC, TVer, pad, IPv4 checksum.
        // A refused ICRC is the walk's last check (nothing before it refused): the fields were
        // read as strictly as a clean frame's, whose emit is not checked either (the ICRC
        // itself is kept by `icrc_value`).
        let lenient = strict
            .as_ref()
            .is_some_and(|e| !matches!(e, Error::Content { kind: ContentError::IcrcMismatch { .. }, .. }));
        if let Some(e) = strict {
            error_json(j, "error", &e);
            if !matches!(e, Error::Content { kind: ContentError::IcrcMismatch { .. }, .. }) {
                sum!(s, " | rejected by rxe: {e}");
            }
        }
        // When the fields do not give back every byte (read leniently: an impossible pad taken
        // as none; bytes between the UDP datagram's end and the IP packet's), the frame's
        // bytes come along too: `roce encode` uses them.
        let covered = f.offsets.end + f.trailer.len() == bytes.len();
        if !covered || (lenient && !reemits(r, bytes, link, f.offsets.ip, f.offsets.icrc)) {
            j.hex("raw", &bytes[link.raw_from..]);
        }
    }
}

/// Whether the Repr emits `bytes[..icrc]` again (the IPv4 checksum aside: it may be wrong).
/// Without an Ethernet header in the capture, from the network layer on (the Repr's blank
/// Ethernet header is not compared); `ip` is where the IP header starts in `bytes`.
fn reemits(r: &roce_wire::frame::FrameRepr<'_>, bytes: &[u8], link: Link, ip: usize, icrc: usize) -> bool {
    let mut tmp = vec![0u8; r.buffer_len()];
    // Where the emitted frame's IP header starts, and a byte of `bytes` in it.
    let tmp_ip = ETHERNET_LEN + if r.vlan.is_some() { VLAN_LEN } else { 0 };
    let at = |i: usize| i + tmp_ip - ip;
    if r.emit(&mut tmp).is_err() || tmp.len() < at(icrc) || bytes.len() < icrc {
        return false;
    }
    let v4 = matches!(r.ip, IpHeader::V4(_));
    let skip = |i: usize| v4 && (ip + 10..ip + 12).contains(&i);
    (link.raw_from..icrc).all(|i| skip(i) || tmp[at(i)] == bytes[i])
}

/// The Ethernet header (when the capture has one) and an 802.1Q tag as far as they parse,
/// rendered; returns the EtherType after them and where its payload starts (`ether_type`:
/// the link header's, for a capture without Ethernet header).
fn link_layers(j: &mut Json, bytes: &[u8], link: Link, ether_type: u16) -> Option<(u16, usize)> {
    let (mut et, mut at) = (ether_type, link.raw_from);
    if link.ethernet {
        let (eth, _) = Ethernet2Header::from_slice(bytes).ok()?;
        eth_json(j, &eth);
        (et, at) = (eth.ether_type.0, ETHERNET_LEN);
    }
    if et == ETHERTYPE_VLAN {
        let (v, _) = SingleVlanHeader::from_slice(&bytes[at..]).ok()?;
        vlan_json(j, &v);
        (et, at) = (v.ether_type.0, at + VLAN_LEN);
    }
    Some((et, at))
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
    j.ipv4("src", h.source);
    j.ipv4("dst", h.destination);
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
    j.ipv6("src", h.source);
    j.ipv6("dst", h.destination);
    j.num("traffic_class", u32::from(h.traffic_class));
    j.num("flow_label", h.flow_label.value());
    j.num("payload_len", u32::from(h.payload_length));
    j.num("next_header", u32::from(h.next_header.0));
    j.num("hop_limit", u32::from(h.hop_limit));
    j.end();
}

pub(crate) fn udp_json(j: &mut Json, u: &UdpHeader) {
    j.begin("udp");
    j.num("src_port", u32::from(u.source_port));
    j.num("dst_port", u32::from(u.destination_port));
    j.num("length", u32::from(u.length));
    j.num("checksum", u32::from(u.checksum));
    j.end();
}

/// The BTH's members at the top (`opcode`, `opcode_name`, `dest_qp`, `psn`, `p_key`: the ones
/// scripts edit) and as `bth`.
pub(crate) fn bth_top_json(j: &mut Json, b: &roce_wire::bth::Repr) {
    j.num("opcode", u32::from(u8::from(b.opcode)));
    j.str("opcode_name", b.opcode.name());
    j.num("dest_qp", b.dest_qp);
    j.num("psn", b.psn);
    j.num("p_key", u32::from(b.pkey));
    bth_json(j, b);
}

/// The transport members of a RoCEv2 frame's object as [`Decoder::decode`] writes them (`opcode`,
/// `opcode_name`, `dest_qp`, `psn`, `p_key`, `bth`, then each extension header present), into
/// an open object of `j`: for a caller that parsed the frame itself and renders only these
/// (the Python package's lazy `Frame`), so that it gives the same values without a second
/// schema.
pub fn transport_json(j: &mut Json, bth: &roce_wire::bth::Repr, ext: &roce_wire::ext::ExtHeaders) {
    bth_top_json(j, bth);
    let mut off = Summary { off: true, ..Summary::default() };
    ext_json(j, &mut off, ext);
}

/// The BTH in the summary: opcode, QP, PSN, P_Key, FECN/BECN when set.
pub(crate) fn bth_summary(s: &mut Summary, b: &roce_wire::bth::Repr) {
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
}

pub(crate) fn bth_json(j: &mut Json, b: &roce_wire::bth::Repr) {
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

/// Which CRC [`crc_json`] renders.
#[derive(Clone, Copy)]
pub(crate) enum Crc {
    /// The 32-bit ICRC (`icrc`, `icrc_value`, `icrc_expected`).
    Icrc,
    /// Native IB's 16-bit VCRC (`vcrc`, …).
    Vcrc,
}

/// A CRC's verdict, value and expected value in JSON, and its verdict in the summary.
pub(crate) fn crc_json(j: &mut Json, s: &mut Summary, crc: Crc, found: u32, expected: u32) {
    let (key, value, want, name, digits) = match crc {
        Crc::Icrc => ("icrc", "icrc_value", "icrc_expected", "ICRC", 8),
        Crc::Vcrc => ("vcrc", "vcrc_value", "vcrc_expected", "VCRC", 4),
    };
    let ok = found == expected;
    j.str(key, if ok { "ok" } else { "bad" });
    j.num(value, found);
    j.num(want, expected);
    if ok {
        sum!(s, " | {name} ok");
    } else {
        sum!(s, " | {name} bad (0x{found:0digits$x}, expected 0x{expected:0digits$x})");
    }
}

/// The extension headers after the BTH, in JSON and the summary (RoCEv2 and native IB alike).
pub(crate) fn ext_json(j: &mut Json, s: &mut Summary, e: &roce_wire::ext::ExtHeaders) {
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
    if let Some(x) = &e.xrceth {
        j.begin("xrceth");
        j.num("reserved", u32::from(x.reserved));
        j.num("xrc_srq", x.xrc_srq);
        j.end();
        s.push_str(" XRCSRQ=0x");
        s.hex(u64::from(x.xrc_srq), 6);
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
}

/// `{"layer", "offset", "reason", "message"}` under `key`.
pub(crate) fn error_json(j: &mut Json, key: &'static str, e: &Error) {
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

/// The frame's length on the wire and the bytes of it captured, as tshark's `frame.len` and
/// `frame.cap_len` (the JSON's `len` and `cap_len`, the summary line's length) for a capture
/// record of `orig_len` bytes on the wire holding `data`: the record's, except for an ERF
/// record (197), whose headers are not part of the frame: its WLen, and the frame's bytes
/// the record holds (the record's own sizes are under `erf`). An ERF record whose header does
/// not parse has no frame but itself: the record's.
pub fn frame_lengths(linktype: u32, orig_len: u32, data: &[u8]) -> (u32, usize) {
    match linktype {
        linktype::ERF => match roce_wire::erf::parse_record(data) {
            Ok(r) => (u32::from(r.header.wlen), r.frame.len()),
            Err(_) => (orig_len, data.len()),
        },
        _ => (orig_len, data.len()),
    }
}

/// Decode one Ethernet frame. Never fails: what cannot be parsed is described, with the error.
pub fn decode_ethernet(bytes: &[u8]) -> Decoded {
    decode_link(linktype::ETHERNET, bytes)
}

/// Decode one frame of link type `linktype` (see [`crate::capture::linktype`]). Never fails.
pub fn decode_link(linktype: u32, bytes: &[u8]) -> Decoded {
    let mut d = Decoder::new();
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    let meta =
        Meta { number: 1, timestamp: Duration::ZERO, relative: Duration::ZERO, linktype, interface: 0, orig_len: len };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json_out::{Event, Tape};

    /// The value a tape describes (the reference reading of a tape: what a consumer builds).
    fn tape_value(t: &Tape) -> Value {
        // Open containers: (key in the parent, the container).
        let mut stack: Vec<(&str, Value)> = vec![("", Value::Array(Vec::new()))];
        fn add(stack: &mut [(&str, Value)], k: &str, v: Value) {
            match &mut stack.last_mut().unwrap().1 {
                Value::Object(m) => {
                    m.insert(k.to_string(), v);
                }
                Value::Array(a) => a.push(v),
                _ => unreachable!(),
            }
        }
        let json = |a: usize, b: usize| serde_json::from_slice::<Value>(&t.text[a..b]).unwrap();
        for e in &t.events {
            match *e {
                Event::Begin(k) => stack.push((k, Value::Object(Map::new()))),
                Event::BeginArray(k) => stack.push((k, Value::Array(Vec::new()))),
                Event::JsonOpen(k, a, b) => stack.push((k, json(a, b))),
                Event::End => {
                    let (k, v) = stack.pop().unwrap();
                    add(&mut stack, k, v);
                }
                Event::Uint(k, v) => add(&mut stack, k, v.into()),
                Event::Bool(k, v) => add(&mut stack, k, v.into()),
                // Through the text, as the reference reads it (serde_json's float parse
                // rounds differently from Rust's own, which readers use).
                Event::Float(k, v) => add(&mut stack, k, serde_json::from_str(&format!("{v}")).unwrap()),
                Event::Null(k) => add(&mut stack, k, Value::Null),
                Event::Str(k, a, b) => add(&mut stack, k, t.str(a, b).into()),
                Event::Json(k, a, b) => add(&mut stack, k, json(a, b)),
            }
        }
        assert_eq!(stack.len(), 1, "unbalanced tape");
        let Value::Array(mut top) = stack.pop().unwrap().1 else { unreachable!() };
        assert_eq!(top.len(), 1);
        top.pop().unwrap()
    }

    /// Every member name, depth first, in order (Map's `==` does not look at the order).
    fn keys_in_order(v: &Value) -> Vec<String> {
        let mut out = Vec::new();
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    out.push(k.clone());
                    out.extend(keys_in_order(x));
                }
            }
            Value::Array(a) => a.iter().for_each(|x| out.extend(keys_in_order(x))),
            _ => {}
        }
        out
    }

    /// The tape gives exactly the text's value, for every sample frame of every link type,
    /// every prefix of them (the error paths) and a few thousand mixed frames.
    #[test]
    fn tape_is_the_text() {
        let mut frames: Vec<(u32, Vec<u8>)> = Vec::new();
        for s in crate::samples::sample_frames() {
            for n in 0..=s.bytes.len() {
                frames.push((linktype::ETHERNET, s.bytes[..n].to_vec()));
            }
            frames.push((linktype::LINUX_SLL, [&[0u8; 14][..], &[0x08, 0x00], &s.bytes[14..]].concat()));
            frames.push((linktype::RAW, s.bytes[14..].to_vec()));
            let sll2 = [&[0x08, 0x00, 0, 0, 0, 0, 0, 3, 0, 1, 0, 6][..], &s.bytes[6..12], &[0, 0], &s.bytes[14..]];
            frames.push((linktype::LINUX_SLL2, sll2.concat()));
        }
        for s in crate::samples_ib::ib_sample_frames() {
            for n in 0..=s.bytes.len() {
                frames.push((linktype::INFINIBAND, s.bytes[..n].to_vec()));
            }
            let erf = crate::samples_ib::erf_record(Duration::from_millis(5), 1, &s.bytes);
            for n in 0..=erf.len() {
                frames.push((linktype::ERF, erf[..n].to_vec()));
            }
        }
        frames.extend(crate::samples_mixed::mixed_frames(3000, 7).map(|f| (linktype::ETHERNET, f)));
        let (mut text, mut tape) = (Decoder::new(), Decoder::new());
        tape.json.tape = Some(Tape::default());
        tape.summary.off = true;
        for (i, (lt, f)) in frames.iter().enumerate() {
            let meta = Meta {
                number: i as u64 + 1,
                timestamp: Duration::from_micros(i as u64 * 1500 + 1),
                relative: Duration::from_micros(i as u64 * 1500),
                linktype: *lt,
                interface: 0,
                orig_len: f.len() as u32 + 3,
            };
            text.decode(&meta, f);
            tape.decode(&meta, f);
            assert!(tape.json.buf.is_empty());
            let want: Value = serde_json::from_slice(&text.json.buf).unwrap();
            let got = tape_value(tape.json.tape.as_ref().unwrap());
            assert_eq!(got, want, "frame {i}");
            assert_eq!(keys_in_order(&got), keys_in_order(&want), "frame {i}");
        }
    }

    /// `transport_json` writes exactly the decoder's transport members, for every sample frame
    /// that the decoder reads as a whole RoCEv2 frame.
    #[test]
    fn transport_json_is_the_decoders() {
        let mut checked = 0;
        for sample in crate::samples::sample_frames() {
            let Ok(f) = roce_wire::frame::parse_lax(&sample.bytes) else { continue };
            let whole = decode_ethernet(&sample.bytes).json;
            let mut j = Json::default();
            j.begin("");
            transport_json(&mut j, &f.repr.bth, &f.repr.ext);
            j.end();
            let Ok(Value::Object(part)) = serde_json::from_slice::<Value>(&j.buf) else { panic!("bad JSON") };
            assert!(part.len() >= 6);
            for (k, v) in &part {
                assert_eq!(whole.get(k), Some(v), "{}: member {k}", sample.name);
            }
            checked += 1;
        }
        assert!(checked > 3, "only {checked} samples checked");
    }

    /// An XRC request shows its XRCETH (JSON and summary) before the RC opcode's headers; an
    /// XRC response shows none; `roce encode` builds both back, and an edited SRQ number goes
    /// to the wire with a right ICRC.
    #[test]
    fn xrc_frames_show_their_xrceth_and_encode_back() {
        let sample = |name: &str| crate::samples::sample_frames().into_iter().find(|s| s.name == name).unwrap().bytes;
        let w = sample("xrc_rdma_write_only_imm");
        let d = decode_ethernet(&w);
        let j = &d.json;
        assert_eq!(
            (j["opcode"].as_u64(), j["opcode_name"].as_str()),
            (Some(0xab), Some("XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"))
        );
        assert_eq!(j["xrceth"], serde_json::json!({"reserved": 0, "xrc_srq": 0x2a}));
        assert!(j.contains_key("reth") && j.contains_key("immdt") && !j.contains_key("deth"));
        assert_eq!(j["icrc"], "ok");
        assert_eq!(j["payload_len"], 37);
        let keys: Vec<&str> = j.keys().map(String::as_str).collect();
        let at = |k: &str| keys.iter().position(|x| *x == k).unwrap();
        assert!(at("bth") < at("xrceth") && at("xrceth") < at("reth") && at("reth") < at("immdt"), "{keys:?}");
        assert!(
            d.summary
                .contains("XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE QP=0x000013 PSN=4660 P_Key=0xffff XRCSRQ=0x00002a VA="),
            "{}",
            d.summary
        );
        let ack = decode_ethernet(&sample("xrc_acknowledge"));
        assert!(!ack.json.contains_key("xrceth") && ack.json.contains_key("aeth"), "{}", ack.summary);

        let back = crate::encode::encode_value(&Value::Object(j.clone())).unwrap();
        assert_eq!(back.data, w);
        let mut edited = j.clone();
        edited["xrceth"]["xrc_srq"] = 0x00_beef.into();
        edited["xrceth"]["reserved"] = 7.into();
        let e = crate::encode::encode_value(&Value::Object(edited)).unwrap();
        let f = roce_wire::frame::parse(&e.data).expect("an edited XRCETH gets a right ICRC");
        assert_eq!(f.repr.ext.xrceth, Some(roce_wire::xrceth::Repr { reserved: 7, xrc_srq: 0xbeef }));
        // The XRCETH sits right after the BTH (Ethernet 14 + IPv4 20 + UDP 8 + BTH 12).
        assert_eq!(&e.data[54..58], &[7, 0x00, 0xbe, 0xef]);
        // A reserved value wider than its byte is refused, as every other field's.
        let mut wide = j.clone();
        wide["xrceth"]["reserved"] = 256.into();
        assert!(crate::encode::encode_value(&Value::Object(wide)).is_err());
    }
}
