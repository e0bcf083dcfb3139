//! Rendering of frames that are not RoCEv2 (ARP, IGMP, MLD, neighbour discovery, anything
//! else) for `roce decode`: they are always listed, never skipped, with every layer that
//! parsed and the frame's bytes (`raw`), so that the JSON carries the whole frame.

use std::net::{Ipv4Addr, Ipv6Addr};

use etherparse::{Ethernet2Header, Ipv4Header, Ipv6Header, SingleVlanHeader, UdpHeader};
use roce_wire::arp::ArpOperation;
use roce_wire::igmp::IgmpMessage;
use roce_wire::l2::{self, L2Packet};
use roce_wire::mld::MldMessage;
use roce_wire::ndisc::NdiscMessage;
use roce_wire::Error;

use super::{error_json, eth_json, ipv4_json, ipv6_json, vlan_json};
use crate::json_out::{push_fmt, Json, Summary};

macro_rules! sum {
    ($s:expr, $($arg:tt)*) => { push_fmt($s, format_args!($($arg)*)) };
}

/// The RFC 3376 §4.2.12 / RFC 3810 §5.2.12 name of a record type (both use the same six).
pub(crate) fn record_type_name(t: u8) -> &'static str {
    match t {
        1 => "MODE_IS_INCLUDE",
        2 => "MODE_IS_EXCLUDE",
        3 => "CHANGE_TO_INCLUDE_MODE",
        4 => "CHANGE_TO_EXCLUDE_MODE",
        5 => "ALLOW_NEW_SOURCES",
        6 => "BLOCK_OLD_SOURCES",
        _ => "UNKNOWN",
    }
}

fn mac_str(m: &[u8; 6]) -> impl std::fmt::Display {
    roce_wire::MacAddr(*m)
}

/// Describe a frame that is not RoCEv2 (Ethernet `bytes`, possibly with a blank Ethernet
/// header put in front by the decoder: then `with_eth` is false and `shift` maps error offsets
/// back to the captured bytes).
pub(crate) fn describe(d: &mut super::Decoder, bytes: &[u8], with_eth: bool, shift: &dyn Fn(Error) -> Error) {
    let (j, s) = (&mut d.json, &mut d.summary);
    let raw = if with_eth { bytes } else { &bytes[14..] };
    let f = match l2::parse_frame(bytes) {
        Ok(f) => f,
        Err(e) => {
            j.str("kind", "other");
            let addrs = partial(j, bytes, with_eth);
            let e = shift(e);
            error_json(j, "error", &e);
            j.hex("raw", raw);
            sum!(s, "{addrs}not RoCEv2, malformed: {e}");
            return;
        }
    };
    let kind = match &f.packet {
        L2Packet::Arp(_) => "arp",
        L2Packet::Igmp { .. } => "igmp",
        L2Packet::Mld { .. } => "mld",
        L2Packet::Ndisc { .. } => "ndisc",
        L2Packet::Other { .. } => "other",
    };
    j.str("kind", kind);
    if with_eth {
        eth_json(j, &f.ethernet);
    }
    if let Some(v) = &f.vlan {
        vlan_json(j, v);
    }
    match &f.packet {
        L2Packet::Arp(r) => {
            let (op, sha, spa, tha, tpa) = roce_wire::arp::fields(r);
            j.begin("arp");
            match op {
                ArpOperation::Request => j.str("operation", "request"),
                ArpOperation::Reply => j.str("operation", "reply"),
                ArpOperation::Unknown(o) => j.num("operation", u32::from(o)),
            }
            j.mac("sender_mac", &sha);
            j.display("sender_ip", spa);
            j.mac("target_mac", &tha);
            j.display("target_ip", tpa);
            j.end();
            match op {
                ArpOperation::Request => sum!(s, "ARP who has {tpa}? tell {spa}"),
                ArpOperation::Reply => sum!(s, "ARP {spa} is at {}", mac_str(&sha)),
                ArpOperation::Unknown(o) => sum!(s, "ARP operation {o}"),
            }
        }
        L2Packet::Igmp { ip, msg } => {
            let ok = ip.calc_header_checksum() == ip.header_checksum;
            ipv4_json(j, ip, ok);
            sum!(s, "{} → {} ", Ipv4Addr::from(ip.source), Ipv4Addr::from(ip.destination));
            igmp(j, s, msg);
        }
        L2Packet::Mld { ip, msg, hop_by_hop } => {
            ipv6_json(j, ip);
            if let Some(h) = hop_by_hop {
                j.hex("hop_by_hop", h);
            }
            sum!(s, "{} → {} ", Ipv6Addr::from(ip.source), Ipv6Addr::from(ip.destination));
            mld(j, s, msg);
        }
        L2Packet::Ndisc { ip, msg, hop_by_hop } => {
            ipv6_json(j, ip);
            if let Some(h) = hop_by_hop {
                j.hex("hop_by_hop", h);
            }
            sum!(s, "{} → {} ", Ipv6Addr::from(ip.source), Ipv6Addr::from(ip.destination));
            ndisc(j, s, msg);
        }
        L2Packet::Other { ether_type, payload } => {
            let addrs = ip_layers(j, *ether_type, payload);
            j.num("ether_type", u32::from(*ether_type));
            j.count("payload_len", payload.len() as u64);
            sum!(s, "{addrs}EtherType 0x{ether_type:04x}, {} bytes", payload.len());
        }
    }
    j.hex("raw", raw);
    s.push_str(" (not RoCEv2)");
}

/// The Ethernet, VLAN and IP layers of a malformed frame, as far as they parse; returns the
/// summary's address prefix.
fn partial(j: &mut Json, bytes: &[u8], with_eth: bool) -> String {
    let Ok((eth, _)) = Ethernet2Header::from_slice(bytes) else { return String::new() };
    if with_eth {
        eth_json(j, &eth);
    }
    let mut et = eth.ether_type.0;
    let mut at = 14;
    if et == 0x8100 {
        let Ok((v, _)) = SingleVlanHeader::from_slice(&bytes[at..]) else { return String::new() };
        vlan_json(j, &v);
        et = v.ether_type.0;
        at += 4;
    }
    ip_layers(j, et, &bytes[at..])
}

/// An IPv4 or IPv6 header (and UDP) in `payload`, if it parses.
fn ip_layers(j: &mut Json, ether_type: u16, payload: &[u8]) -> String {
    let (proto, rest, addrs) = match ether_type {
        0x0800 => {
            let Ok((ip, _)) = Ipv4Header::from_slice(payload) else { return String::new() };
            ipv4_json(j, &ip, ip.calc_header_checksum() == ip.header_checksum);
            let a = format!("{} → {} ", Ipv4Addr::from(ip.source), Ipv4Addr::from(ip.destination));
            (ip.protocol.0, &payload[ip.header_len()..], a)
        }
        0x86dd => {
            let Ok((ip, _)) = Ipv6Header::from_slice(payload) else { return String::new() };
            ipv6_json(j, &ip);
            let a = format!("{} → {} ", Ipv6Addr::from(ip.source), Ipv6Addr::from(ip.destination));
            (ip.next_header.0, &payload[Ipv6Header::LEN..], a)
        }
        _ => return String::new(),
    };
    if proto == 17 {
        if let Ok((u, _)) = UdpHeader::from_slice(rest) {
            j.begin("udp");
            j.num("src_port", u32::from(u.source_port));
            j.num("dst_port", u32::from(u.destination_port));
            j.num("length", u32::from(u.length));
            j.num("checksum", u32::from(u.checksum));
            j.end();
        }
    }
    addrs
}

fn igmp(j: &mut Json, s: &mut Summary, msg: &IgmpMessage) {
    j.begin("igmp");
    match msg {
        IgmpMessage::V2(v) => {
            j.num("version", 2);
            j.display("type", format_args!("{:?}", v.msg_type));
            j.num("max_resp_code", u32::from(v.max_resp_code));
            j.display("group", v.group_addr);
        }
        IgmpMessage::V3Query(q) => {
            j.num("version", 3);
            j.str("type", "Query");
            j.num("max_resp_code", u32::from(q.max_resp_code));
            j.display("group", q.group_addr);
            j.bool("s_flag", q.s_flag);
            j.num("qrv", u32::from(q.qrv));
            j.num("qqic", u32::from(q.qqic));
            j.display_array("sources", q.sources.iter());
        }
        IgmpMessage::V3Report(r) => {
            j.num("version", 3);
            j.str("type", "Report");
            j.begin_array("records");
            for g in r.records.iter() {
                j.begin("");
                j.num("record_type", u32::from(u8::from(g.record_type)));
                j.str("record_type_name", record_type_name(u8::from(g.record_type)));
                j.display("group", g.group_addr);
                j.display_array("sources", g.sources.iter());
                j.end();
            }
            j.end_array();
        }
    }
    j.end();
    sum!(s, "{msg}");
}

fn mld(j: &mut Json, s: &mut Summary, msg: &MldMessage) {
    j.begin("mld");
    match msg {
        MldMessage::V1(v) => {
            j.num("version", 1);
            j.display("type", format_args!("{:?}", v.msg_type));
            j.num("max_resp_delay", u32::from(v.max_resp_delay));
            j.display("group", v.mcast_addr);
            sum!(s, "MLD {} {}", v.msg_type, v.mcast_addr);
        }
        MldMessage::Query(q) => {
            j.num("version", 2);
            j.str("type", "Query");
            j.num("max_resp_code", u32::from(q.max_resp_code));
            j.display("group", q.mcast_addr);
            j.bool("s_flag", q.s_flag);
            j.num("qrv", u32::from(q.qrv));
            j.num("qqic", u32::from(q.qqic));
            j.display_array("sources", q.sources.iter());
            sum!(s, "MLDv2 Query {} sources {}", q.mcast_addr, q.sources.len());
        }
        MldMessage::Report(r) => {
            j.num("version", 2);
            j.str("type", "Report");
            j.begin_array("records");
            s.push_str("MLDv2 Report");
            for g in r.records.iter() {
                let t = u8::from(g.record_type);
                j.begin("");
                j.num("record_type", u32::from(t));
                j.str("record_type_name", record_type_name(t));
                j.display("group", g.mcast_addr);
                j.begin_array("sources");
                sum!(s, " [{} {}", record_type_name(t), g.mcast_addr);
                for a in g.sources.iter() {
                    j.display("", a);
                    sum!(s, " {a}");
                }
                s.push(']');
                j.end_array();
                j.end();
            }
            j.end_array();
        }
    }
    j.end();
}

fn ndisc(j: &mut Json, s: &mut Summary, msg: &NdiscMessage<'_>) {
    j.begin("ndisc");
    match msg {
        NdiscMessage::NeighborSolicit { target_addr, source_lladdr, .. } => {
            j.str("type", "NeighborSolicit");
            j.display("target", target_addr);
            match source_lladdr {
                Some(m) => j.mac("source_lladdr", m),
                None => j.null("source_lladdr"),
            }
            sum!(s, "Neighbor Solicitation for {target_addr}");
            if let Some(m) = source_lladdr {
                sum!(s, " from {}", mac_str(m));
            }
        }
        NdiscMessage::NeighborAdvert { target_addr, target_lladdr, flags, .. } => {
            j.str("type", "NeighborAdvert");
            j.display("target", target_addr);
            match target_lladdr {
                Some(m) => j.mac("target_lladdr", m),
                None => j.null("target_lladdr"),
            }
            j.num("flags", flags.0);
            sum!(s, "Neighbor Advertisement {target_addr} ({flags})");
            if let Some(m) = target_lladdr {
                sum!(s, " is at {}", mac_str(m));
            }
        }
    }
    j.end();
}
