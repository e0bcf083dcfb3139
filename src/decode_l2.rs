//! Rendering of frames that are not RoCEv2 (ARP, IGMP, MLD, neighbour discovery, anything
//! else) for `roce decode`: they are always listed, never skipped.

use roce_wire::igmp::IgmpMessage;
use roce_wire::l2::{self, L2Packet};
use roce_wire::mld::MldMessage;
use roce_wire::ndisc::NdiscMessage;
use serde_json::{json, Map, Value};

fn mac(m: &[u8; 6]) -> String {
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
}

/// Describe a frame that is not RoCEv2; fills `j` and returns the summary.
pub fn describe(bytes: &[u8], j: &mut Map<String, Value>) -> String {
    let f = match l2::parse_frame(bytes) {
        Ok(f) => f,
        Err(e) => {
            j.insert("kind".into(), "other".into());
            j.insert(
                "error".into(),
                json!({"layer": e.layer().name(), "offset": e.offset(), "reason": e.reason(), "message": e.to_string()}),
            );
            return format!("not RoCEv2, malformed: {e}");
        }
    };
    j.insert(
        "eth".into(),
        json!({"src": mac(&f.ethernet.source), "dst": mac(&f.ethernet.destination), "ethertype": f.ether_type()}),
    );
    let text = f.packet.to_string();
    let (kind, detail, addrs) = match &f.packet {
        L2Packet::Arp(r) => {
            let (op, sha, spa, tha, tpa) = roce_wire::arp::fields(r);
            (
                "arp",
                json!({"operation": format!("{op:?}"), "sender_mac": mac(&sha), "sender_ip": spa.to_string(),
                       "target_mac": mac(&tha), "target_ip": tpa.to_string()}),
                String::new(),
            )
        }
        L2Packet::Igmp { ip, msg } => {
            let src = core::net::Ipv4Addr::from(ip.source);
            let dst = core::net::Ipv4Addr::from(ip.destination);
            let d = match msg {
                IgmpMessage::V2(v) => {
                    json!({"version": 2, "type": format!("{:?}", v.msg_type), "group": v.group_addr.to_string()})
                }
                IgmpMessage::V3Query(q) => json!({"version": 3, "type": "Query", "group": q.group_addr.to_string(),
                    "sources": q.sources.iter().map(|s| s.to_string()).collect::<Vec<_>>()}),
                IgmpMessage::V3Report(r) => {
                    json!({"version": 3, "type": "Report", "records": r.records.iter().map(|g| json!({
                    "record_type": format!("{:?}", g.record_type), "group": g.group_addr.to_string(),
                    "sources": g.sources.iter().map(|s| s.to_string()).collect::<Vec<_>>()})).collect::<Vec<_>>()})
                }
            };
            ("igmp", d, format!("{src} → {dst} "))
        }
        L2Packet::Mld { ip, msg, .. } => {
            let src = core::net::Ipv6Addr::from(ip.source);
            let dst = core::net::Ipv6Addr::from(ip.destination);
            let d = match msg {
                MldMessage::V1(v) => {
                    json!({"version": 1, "type": format!("{:?}", v.msg_type), "group": v.mcast_addr.to_string()})
                }
                MldMessage::Query(q) => json!({"version": 2, "type": "Query", "group": q.mcast_addr.to_string()}),
                MldMessage::Report(r) => {
                    json!({"version": 2, "type": "Report", "records": r.records.iter().map(|g| json!({
                    "record_type": format!("{:?}", g.record_type), "group": g.mcast_addr.to_string(),
                    "sources": g.sources.iter().map(|s| s.to_string()).collect::<Vec<_>>()})).collect::<Vec<_>>()})
                }
            };
            ("mld", d, format!("{src} → {dst} "))
        }
        L2Packet::Ndisc { ip, msg, .. } => {
            let src = core::net::Ipv6Addr::from(ip.source);
            let dst = core::net::Ipv6Addr::from(ip.destination);
            let d = match msg {
                NdiscMessage::NeighborSolicit { target_addr, source_lladdr, .. } => json!({"type": "NeighborSolicit",
                    "target": target_addr.to_string(), "source_lladdr": source_lladdr.as_ref().map(mac)}),
                NdiscMessage::NeighborAdvert { target_addr, target_lladdr, flags, .. } => {
                    json!({"type": "NeighborAdvert",
                    "target": target_addr.to_string(), "target_lladdr": target_lladdr.as_ref().map(mac), "flags": flags.0})
                }
            };
            ("ndisc", d, format!("{src} → {dst} "))
        }
        L2Packet::Other { ether_type, payload } => {
            ("other", json!({"ether_type": ether_type, "payload_len": payload.len()}), String::new())
        }
    };
    j.insert("kind".into(), kind.into());
    j.insert(kind.into(), detail);
    format!("{addrs}{text} (not RoCEv2)")
}
