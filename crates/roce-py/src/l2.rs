//! `encode_l2`: the non-RoCE frames the decoder reads (ARP, IGMP, MLD, NS/NA), built from the
//! members of their `roce decode --json` object, so that the layers (`roce.ARP`, `roce.IGMP`,
//! `roce.MLD`, `roce.NDisc`) rebuild any such record with `/`. The messages are emitted by the
//! wire crate (checksums included); the Ethernet, 802.1Q and IP headers take every field the
//! record gives and Linux's values for the rest (IGMP: TTL 1, Router Alert; MLD: hop limit 1,
//! a Hop-by-Hop Router Alert; NS/NA: hop limit 255). Lengths and the IPv4 checksum are computed
//! unless given.

use std::net::{Ipv4Addr, Ipv6Addr};

use etherparse::{IpDscp, IpEcn, IpFragOffset, IpNumber, Ipv4Header, Ipv6FlowLabel, Ipv6Header};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use roce_wire::arp::{self, ArpOperation};
use roce_wire::igmp::{self, IgmpMessage};
use roce_wire::l2::{BROADCAST_MAC, IPV4_ROUTER_ALERT, MLD_HOP_BY_HOP};
use roce_wire::mld::{self, MldMessage};
use roce_wire::multicast::{ipv4_multicast_mac, ipv6_multicast_mac, List};
use roce_wire::ndisc::{NdiscMessage, NeighborFlags};
use serde_json::Value;

use crate::convert::{from_py, type_name};

type R<T> = Result<T, String>;

/// A member of the record (`path` names it in messages).
struct Obj<'a> {
    v: Option<&'a serde_json::Map<String, Value>>,
    path: &'a str,
}

impl<'a> Obj<'a> {
    fn of(v: &'a Value, key: &'a str) -> R<Obj<'a>> {
        match v.get(key) {
            None | Some(Value::Null) => Ok(Obj { v: None, path: key }),
            Some(Value::Object(m)) => Ok(Obj { v: Some(m), path: key }),
            Some(_) => Err(format!("{key}: expected an object")),
        }
    }

    fn get(&self, k: &str) -> Option<&'a Value> {
        self.v.and_then(|m| m.get(k)).filter(|v| !v.is_null())
    }

    fn num<T: TryFrom<u64>>(&self, k: &str, default: T) -> R<T> {
        match self.get(k) {
            None => Ok(default),
            Some(v) => {
                let n = match v {
                    Value::Number(n) => n.as_u64(),
                    Value::String(s) => s.strip_prefix("0x").and_then(|h| u64::from_str_radix(h, 16).ok()),
                    Value::Bool(b) => Some(u64::from(*b)),
                    _ => None,
                };
                n.and_then(|n| T::try_from(n).ok())
                    .ok_or_else(|| format!("{}.{k}: {v} is not a number in range", self.path))
            }
        }
    }

    fn given<T: TryFrom<u64>>(&self, k: &str) -> R<Option<T>> {
        self.get(k)
            .map(|_| {
                self.num(k, 0u64).and_then(|n| T::try_from(n).map_err(|_| format!("{}.{k}: out of range", self.path)))
            })
            .transpose()
    }

    fn flag(&self, k: &str, default: bool) -> R<bool> {
        match self.get(k) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(format!("{}.{k}: {v} is not a bool", self.path)),
        }
    }

    fn text(&self, k: &str) -> Option<&'a str> {
        self.get(k).and_then(Value::as_str)
    }

    fn parsed<T: std::str::FromStr>(&self, k: &str) -> R<Option<T>> {
        match self.get(k) {
            None => Ok(None),
            Some(Value::String(s)) => {
                s.parse().map(Some).map_err(|_| format!("{}.{k}: {s:?} is not an address", self.path))
            }
            Some(v) => Err(format!("{}.{k}: {v} is not an address", self.path)),
        }
    }

    fn mac(&self, k: &str) -> R<Option<[u8; 6]>> {
        let Some(s) = self.text(k) else { return Ok(None) };
        let parts: Vec<_> = s.split(':').map(|p| u8::from_str_radix(p, 16)).collect();
        match parts.as_slice() {
            [Ok(a), Ok(b), Ok(c), Ok(d), Ok(e), Ok(f)] => Ok(Some([*a, *b, *c, *d, *e, *f])),
            _ => Err(format!("{}.{k}: {s:?} is not a MAC address", self.path)),
        }
    }

    fn hex(&self, k: &str) -> R<Option<Vec<u8>>> {
        let Some(s) = self.text(k) else { return Ok(None) };
        hex(s).ok_or_else(|| format!("{}.{k}: not hex bytes", self.path)).map(Some)
    }

    fn list<T: std::str::FromStr>(&self, k: &str) -> R<Vec<T>> {
        match self.get(k) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .iter()
                .map(|x| {
                    x.as_str()
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(|| format!("{}.{k}: {x} is not an address", self.path))
                })
                .collect(),
            Some(v) => Err(format!("{}.{k}: {v} is not a list", self.path)),
        }
    }
}

fn hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// A type name as the decoder writes it (the wire crate's `Debug`), or a number.
fn named<T: From<u8> + std::fmt::Debug>(v: Option<&Value>, all: &[u8], what: &str) -> R<Option<T>> {
    match v {
        None => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|n| u8::try_from(n).ok())
            .map(|n| Some(T::from(n)))
            .ok_or_else(|| format!("{what}: {n}")),
        Some(Value::String(s)) => all
            .iter()
            .map(|&n| T::from(n))
            .find(|t| format!("{t:?}") == *s)
            .map(Some)
            .ok_or_else(|| format!("{what}: unknown type {s:?}")),
        Some(v) => Err(format!("{what}: {v} is neither a name nor a number")),
    }
}

/// The `records` of an IGMPv3 / MLDv2 report, each made by `make` from its type, group and
/// object.
fn records<T, A: std::str::FromStr>(msg: &Obj<'_>, mut make: impl FnMut(u8, A, &Obj<'_>) -> R<T>) -> R<Vec<T>> {
    let Some(v) = msg.get("records") else { return Ok(Vec::new()) };
    let Value::Array(a) = v else { return Err(format!("{}.records: not a list", msg.path)) };
    a.iter()
        .map(|r| {
            let Value::Object(m) = r else { return Err(format!("{}.records: an item is not an object", msg.path)) };
            let o = Obj { v: Some(m), path: "record" };
            let t = o.num("record_type", 0u8)?;
            let g = o.parsed("group")?.ok_or_else(|| format!("{}.records: a record without group", msg.path))?;
            make(t, g, &o)
        })
        .collect()
}

/// Put `items` into a bounded list of the wire crate.
fn fill<T: Clone, const N: usize>(list: &mut List<T, N>, items: Vec<T>, what: &str) -> R<()> {
    for x in items {
        list.push(x).map_err(|_| format!("{what}: more than {N}"))?;
    }
    Ok(())
}

/// The Ethernet header (and 802.1Q tag) in front of `ether_type`'s payload.
fn ethernet(v: &Value, dst: [u8; 6], src: [u8; 6], ether_type: u16) -> R<Vec<u8>> {
    let eth = Obj::of(v, "eth")?;
    let mut out = Vec::with_capacity(18);
    out.extend(eth.mac("dst")?.unwrap_or(dst));
    out.extend(eth.mac("src")?.unwrap_or(src));
    let vlan = Obj::of(v, "vlan")?;
    if vlan.v.is_some() {
        let tci = (vlan.num::<u16>("pcp", 0)? & 7) << 13
            | u16::from(vlan.flag("dei", false)?) << 12
            | (vlan.num::<u16>("vid", 0)? & 0xfff);
        out.extend(0x8100u16.to_be_bytes());
        out.extend(tci.to_be_bytes());
    }
    out.extend(ether_type.to_be_bytes());
    Ok(out)
}

/// An IPv4 header for `payload_len` bytes of `protocol`, from the record's `ip`.
fn ipv4(ip: &Obj<'_>, protocol: u8, ttl: u8, options: &[u8], dst: Ipv4Addr, payload_len: usize) -> R<Vec<u8>> {
    let src: Ipv4Addr = ip.parsed("src")?.unwrap_or(Ipv4Addr::UNSPECIFIED);
    let dst: Ipv4Addr = ip.parsed("dst")?.unwrap_or(dst);
    let options = ip.hex("options")?.unwrap_or_else(|| options.to_vec());
    let mut h = Ipv4Header {
        dscp: IpDscp::try_new(ip.num("dscp", if protocol == 2 { 48 } else { 0 })?)
            .map_err(|e| format!("ip.dscp: {e}"))?,
        ecn: IpEcn::try_new(ip.num("ecn", 0)?).map_err(|e| format!("ip.ecn: {e}"))?,
        total_len: 0,
        identification: ip.num("id", 0)?,
        dont_fragment: ip.flag("df", true)?,
        more_fragments: ip.flag("mf", false)?,
        fragment_offset: IpFragOffset::try_new(ip.num("frag_offset", 0)?)
            .map_err(|e| format!("ip.frag_offset: {e}"))?,
        time_to_live: ip.num("ttl", ttl)?,
        protocol: IpNumber(ip.num("protocol", protocol)?),
        header_checksum: 0,
        source: src.octets(),
        destination: dst.octets(),
        options: options
            .as_slice()
            .try_into()
            .map_err(|_| "ip.options: up to 40 bytes, a multiple of 4".to_string())?,
    };
    h.total_len = match ip.given("total_len")? {
        Some(n) => n,
        None => u16::try_from(h.header_len() + payload_len).map_err(|_| "ip: the packet is too long".to_string())?,
    };
    h.header_checksum = match ip.given("checksum")? {
        Some(c) => c,
        None => h.calc_header_checksum(),
    };
    Ok(h.to_bytes().to_vec())
}

/// An IPv6 header for `payload_len` bytes after it, from the record's `ip`.
fn ipv6(ip: &Obj<'_>, next_header: u8, hop_limit: u8, src: Ipv6Addr, dst: Ipv6Addr, payload_len: usize) -> R<Vec<u8>> {
    let h = Ipv6Header {
        traffic_class: ip.num("traffic_class", 0)?,
        flow_label: Ipv6FlowLabel::try_new(ip.num("flow_label", 0)?).map_err(|e| format!("ip.flow_label: {e}"))?,
        payload_length: match ip.given("payload_len")? {
            Some(n) => n,
            None => u16::try_from(payload_len).map_err(|_| "ip: the packet is too long".to_string())?,
        },
        next_header: IpNumber(ip.num("next_header", next_header)?),
        hop_limit: ip.num("hop_limit", hop_limit)?,
        source: src.octets(),
        destination: dst.octets(),
    };
    Ok(h.to_bytes().to_vec())
}

const DEFAULT_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];

fn arp_frame(v: &Value) -> R<Vec<u8>> {
    let a = Obj::of(v, "arp")?;
    let op = match a.get("operation") {
        None => ArpOperation::Request,
        Some(Value::String(s)) if s == "request" => ArpOperation::Request,
        Some(Value::String(s)) if s == "reply" => ArpOperation::Reply,
        Some(_) => ArpOperation::from(a.num::<u16>("operation", 1)?),
    };
    let sha = a.mac("sender_mac")?.unwrap_or(DEFAULT_MAC);
    let tha = a.mac("target_mac")?.unwrap_or([0; 6]);
    let mut body = [0u8; arp::LEN];
    let mut p = arp::Packet::new_unchecked(&mut body[..]);
    p.set_htype(1);
    p.set_ptype(0x0800);
    p.set_lens(6, 4);
    p.set_operation(op);
    p.set_sender_mac(sha);
    p.set_sender_ip(a.parsed("sender_ip")?.unwrap_or(Ipv4Addr::UNSPECIFIED));
    p.set_target_mac(tha);
    p.set_target_ip(a.parsed("target_ip")?.unwrap_or(Ipv4Addr::UNSPECIFIED));
    let dst = if op == ArpOperation::Reply { tha } else { BROADCAST_MAC };
    let mut out = ethernet(v, dst, sha, arp::ETHERTYPE)?;
    out.extend(body);
    Ok(out)
}

fn igmp_frame(v: &Value) -> R<Vec<u8>> {
    let m = Obj::of(v, "igmp")?;
    let group: Ipv4Addr = m.parsed("group")?.unwrap_or(Ipv4Addr::UNSPECIFIED);
    let version = m.num::<u8>("version", 2)?;
    let kind = m.text("type");
    let msg = match (version, kind) {
        (3, Some("Query")) => {
            let mut q = igmp::V3QueryRepr {
                max_resp_code: m.num("max_resp_code", 0)?,
                group_addr: group,
                resv: 0,
                s_flag: m.flag("s_flag", false)?,
                qrv: m.num("qrv", 0)?,
                qqic: m.num("qqic", 0)?,
                sources: Default::default(),
            };
            fill(&mut q.sources, m.list("sources")?, "igmp.sources")?;
            IgmpMessage::V3Query(q)
        }
        (3, _) => {
            let mut r = igmp::V3ReportRepr { reserved1: 0, reserved2: 0, records: Default::default() };
            let recs = records(&m, |t, g: Ipv4Addr, o| {
                let mut rec = igmp::GroupRecordRepr::new(igmp::RecordType::from(t), g);
                fill(&mut rec.sources, o.list("sources")?, "igmp.records.sources")?;
                Ok(rec)
            })?;
            fill(&mut r.records, recs, "igmp.records")?;
            IgmpMessage::V3Report(r)
        }
        _ => {
            let all = [0x11, 0x12, 0x16, 0x17, 0x22];
            let msg_type = named(m.get("type"), &all, "igmp.type")?.unwrap_or(igmp::MessageType::V2MembershipReport);
            IgmpMessage::V2(igmp::V2Repr { msg_type, max_resp_code: m.num("max_resp_code", 0)?, group_addr: group })
        }
    };
    let mut body = vec![0u8; msg.buffer_len()];
    msg.emit_bytes(&mut body);
    let ip = Obj::of(v, "ip")?;
    let dst: Ipv4Addr = ip.parsed("dst")?.unwrap_or(msg.destination());
    let mut out = ethernet(v, ipv4_multicast_mac(dst), DEFAULT_MAC, 0x0800)?;
    out.extend(ipv4(&ip, 2, 1, &IPV4_ROUTER_ALERT, dst, body.len())?);
    out.extend(body);
    Ok(out)
}

fn mld_frame(v: &Value) -> R<Vec<u8>> {
    let m = Obj::of(v, "mld")?;
    let group: Ipv6Addr = m.parsed("group")?.unwrap_or(Ipv6Addr::UNSPECIFIED);
    let msg = match (m.num::<u8>("version", 2)?, m.text("type")) {
        (2, Some("Query")) => {
            let mut q = mld::QueryRepr {
                code: 0,
                max_resp_code: m.num("max_resp_code", 0)?,
                reserved: 0,
                mcast_addr: group,
                resv: 0,
                s_flag: m.flag("s_flag", false)?,
                qrv: m.num("qrv", 0)?,
                qqic: m.num("qqic", 0)?,
                sources: Default::default(),
            };
            fill(&mut q.sources, m.list("sources")?, "mld.sources")?;
            MldMessage::Query(q)
        }
        (2, _) => {
            let mut r = mld::ReportRepr { code: 0, reserved: 0, records: Default::default() };
            let recs = records(&m, |t, g: Ipv6Addr, o| {
                let mut rec = mld::AddressRecordRepr::new(mld::RecordType::from(t), g);
                fill(&mut rec.sources, o.list("sources")?, "mld.records.sources")?;
                Ok(rec)
            })?;
            fill(&mut r.records, recs, "mld.records")?;
            MldMessage::Report(r)
        }
        _ => {
            let all = [130, 131, 132, 143];
            let msg_type = named(m.get("type"), &all, "mld.type")?.unwrap_or(mld::MessageType::V1Report);
            MldMessage::V1(mld::V1Repr {
                msg_type,
                code: 0,
                max_resp_delay: m.num("max_resp_delay", 0)?,
                reserved: 0,
                mcast_addr: group,
            })
        }
    };
    let ip = Obj::of(v, "ip")?;
    let src: Ipv6Addr = ip.parsed("src")?.unwrap_or(Ipv6Addr::UNSPECIFIED);
    let dst: Ipv6Addr = ip.parsed("dst")?.unwrap_or(msg.destination());
    let hop_by_hop = hop_by_hop(v)?.unwrap_or(MLD_HOP_BY_HOP.to_vec());
    let mut body = vec![0u8; msg.buffer_len()];
    msg.emit_bytes(&mut body, &src, &dst);
    let (next, len) = if hop_by_hop.is_empty() { (58, body.len()) } else { (0, hop_by_hop.len() + body.len()) };
    let mut out = ethernet(v, ipv6_multicast_mac(dst), DEFAULT_MAC, 0x86dd)?;
    out.extend(ipv6(&ip, next, 1, src, dst, len)?);
    out.extend(hop_by_hop);
    out.extend(body);
    Ok(out)
}

fn hop_by_hop(v: &Value) -> R<Option<Vec<u8>>> {
    match v.get("hop_by_hop") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => hex(s).map(Some).ok_or_else(|| "hop_by_hop: not hex bytes".to_string()),
        Some(_) => Err("hop_by_hop: expected hex bytes".into()),
    }
}

fn ndisc_frame(v: &Value) -> R<Vec<u8>> {
    let m = Obj::of(v, "ndisc")?;
    let target: Ipv6Addr = m.parsed("target")?.unwrap_or(Ipv6Addr::UNSPECIFIED);
    let ip = Obj::of(v, "ip")?;
    let src: Ipv6Addr = ip.parsed("src")?.unwrap_or(Ipv6Addr::UNSPECIFIED);
    let (msg, dst_default, mac) = match m.text("type") {
        Some("NeighborAdvert") => {
            let ll = m.mac("target_lladdr")?;
            let flags = NeighborFlags(m.num("flags", 0)?);
            let msg =
                NdiscMessage::NeighborAdvert { code: 0, flags, target_addr: target, target_lladdr: ll, options: &[] };
            (msg, mld::ALL_NODES, ll.unwrap_or(DEFAULT_MAC))
        }
        Some("NeighborSolicit") | None => {
            let ll = m.mac("source_lladdr")?;
            (NdiscMessage::solicit(target, ll), roce_wire::ndisc::solicited_node(target), ll.unwrap_or(DEFAULT_MAC))
        }
        Some(t) => return Err(format!("ndisc.type: {t:?} (NeighborSolicit or NeighborAdvert)")),
    };
    let dst: Ipv6Addr = ip.parsed("dst")?.unwrap_or(dst_default);
    let hop_by_hop = hop_by_hop(v)?.unwrap_or_default();
    let mut body = vec![0u8; msg.buffer_len()];
    msg.emit_bytes(&mut body, &src, &dst);
    let (next, len) = if hop_by_hop.is_empty() { (58, body.len()) } else { (0, hop_by_hop.len() + body.len()) };
    let mut out = ethernet(v, ipv6_multicast_mac(dst), mac, 0x86dd)?;
    out.extend(ipv6(&ip, next, 255, src, dst, len)?);
    out.extend(hop_by_hop);
    out.extend(body);
    Ok(out)
}

/// encode_l2(record: dict) -> bytes
///
/// The Ethernet frame of an `arp`, `igmp`, `mld` or `ndisc` record (the members `roce decode
/// --json` writes for one), built from its fields: what the layers ARP, IGMP, MLD and NDisc
/// build. Raises ValueError naming the field that cannot be used.
#[pyfunction]
fn encode_l2<'py>(py: Python<'py>, record: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    if !record.is_instance_of::<PyDict>() {
        return Err(PyTypeError::new_err(format!("record: expected a dict, found {}", type_name(record))));
    }
    let v = from_py(record)?;
    let built = match v.get("kind").and_then(Value::as_str) {
        Some("arp") => arp_frame(&v),
        Some("igmp") => igmp_frame(&v),
        Some("mld") => mld_frame(&v),
        Some("ndisc") => ndisc_frame(&v),
        k => Err(format!("kind: {k:?} is not arp, igmp, mld or ndisc")),
    };
    built.map(|b| PyBytes::new(py, &b)).map_err(PyValueError::new_err)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(encode_l2, m)?)
}
