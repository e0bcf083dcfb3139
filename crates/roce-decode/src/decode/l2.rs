//! Rendering of frames that are not RoCEv2 (ARP, IGMP, MLD, neighbour discovery, anything
//! else) for `roce decode`: they are always listed, never skipped, with every layer that
//! parsed and the frame's bytes (`raw`), so that the JSON carries the whole frame.

use std::net::{Ipv4Addr, Ipv6Addr};

use roce_wire::arp::ArpOperation;
use roce_wire::demux::{Payload, Sliced};
use roce_wire::igmp::IgmpMessage;
use roce_wire::l2::L2Packet;
use roce_wire::mld::MldMessage;
use roce_wire::ndisc::NdiscMessage;

use super::{error_json, eth_json, ipv4_json, ipv6_json, udp_json, vlan_json};
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

/// Describe a frame that the demux found not to be RoCEv2 (`sliced`, walked from `bytes`):
/// its layers, its message or why the message does not parse, and the captured bytes.
pub(crate) fn describe(d: &mut super::Decoder, bytes: &[u8], link: super::Link, sliced: &Sliced<'_>) {
    let (j, s) = (&mut d.json, &mut d.summary);
    let raw = &bytes[link.raw_from..];
    let Payload::NotRoce { packet, .. } = &sliced.payload else { return };
    let packet = match packet {
        Ok(p) => p,
        Err(e) => {
            j.str("kind", "other");
            link_json(j, sliced);
            let addrs = ip_layers(j, sliced);
            error_json(j, "error", e);
            j.hex("raw", raw);
            sum!(s, "{addrs}not RoCEv2, malformed: {e}");
            return;
        }
    };
    let kind = match packet {
        L2Packet::Arp(_) => "arp",
        L2Packet::Igmp { .. } => "igmp",
        L2Packet::Mld { .. } => "mld",
        L2Packet::Ndisc { .. } => "ndisc",
        L2Packet::Other { .. } => "other",
    };
    j.str("kind", kind);
    link_json(j, sliced);
    match packet {
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
            let addrs = ip_layers(j, sliced);
            j.num("ether_type", u32::from(*ether_type));
            j.count("payload_len", payload.len() as u64);
            sum!(s, "{addrs}EtherType 0x{ether_type:04x}, {} bytes", payload.len());
        }
    }
    j.hex("raw", raw);
    s.push_str(" (not RoCEv2)");
}

/// The Ethernet header (when the capture has one) and the 802.1Q tag.
fn link_json(j: &mut Json, sliced: &Sliced<'_>) {
    if let Some(eth) = sliced.link.ethernet() {
        eth_json(j, &eth);
    }
    if let Some(v) = &sliced.vlan() {
        vlan_json(j, v);
    }
}

/// The IPv4 or IPv6 header (and UDP) the demux found; returns the summary's address prefix.
fn ip_layers(j: &mut Json, sliced: &Sliced<'_>) -> String {
    let Some(ip) = &sliced.ip else { return String::new() };
    if let Some(h) = ip.ipv4_header() {
        ipv4_json(j, &h, h.calc_header_checksum() == h.header_checksum);
    } else if let Some(h) = ip.ipv6_header() {
        ipv6_json(j, &h);
    }
    if let Some(u) = &sliced.udp() {
        udp_json(j, u);
    }
    format!("{} → {} ", ip.source(), ip.destination())
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
