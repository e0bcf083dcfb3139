//! Every pair of a field and a member that restates it (spec/decode.md, "Members that restate
//! others"), on a line `roce decode --json` wrote: an edit of either side alone reaches the wire
//! and reads back, with payload and without it (the line's ICRC tells which side was edited);
//! with another edit in the line and no payload, the field wins and the encoder says so; a line
//! without the field takes it from the view.

use serde_json::{json, Map, Value};

use super::mad::tests::set;
use super::restate::Settled;
use super::{encode_value, SettledBy};
use crate::capture::linktype;
use crate::decode::decode_link;
use crate::samples::sample_frames;
use crate::samples_ib::ib_sample_frames;

/// One pair on one sample line.
struct Pair {
    /// The decoder's line, and its link type.
    line: Map<String, Value>,
    link: u32,
    /// The field, a new value for it, and what its view then reads.
    field: &'static str,
    field_edit: Value,
    view_of_field_edit: Value,
    /// The view (a member of it), a new value, and what the field then reads.
    view: &'static str,
    view_edit: Value,
    field_of_view_edit: Value,
    /// The view's name in the encoder's notes (`cm.port_space/cm.port`).
    named: &'static str,
    /// Whether `payload` holds the field (the MAD's members), so that it tells the edit.
    in_payload: bool,
}

/// The decoder's line for a frame of `link`, with its link type (a lone frame's has none).
fn line(link: u32, bytes: &[u8]) -> Map<String, Value> {
    let mut m = decode_link(link, bytes).json;
    m.insert("link_type".into(), link.into());
    m
}

fn sample(name: &str) -> Vec<u8> {
    sample_frames().into_iter().chain(ib_sample_frames()).find(|s| s.name == name).unwrap().bytes
}

fn unset(m: &mut Map<String, Value>, path: &str) {
    let mut parts: Vec<&str> = path.split('.').collect();
    let last = parts.pop().unwrap();
    let mut o = m;
    for p in parts {
        o = o.get_mut(p).unwrap().as_object_mut().unwrap();
    }
    o.remove(last);
}

fn at<'a>(m: &'a Map<String, Value>, path: &str) -> &'a Value {
    let mut v = m.get(path.split('.').next().unwrap()).unwrap_or(&Value::Null);
    for p in path.split('.').skip(1) {
        v = v.get(p).unwrap_or(&Value::Null);
    }
    v
}

/// A number or `"0x…"` string as a number, anything else as it is.
fn normal(v: &Value) -> Value {
    match v.as_str().and_then(|s| s.strip_prefix("0x")) {
        Some(h) => u64::from_str_radix(h, 16).map_or(v.clone(), Value::from),
        None => v.clone(),
    }
}

fn stripped(mut m: Map<String, Value>) -> Map<String, Value> {
    m.remove("payload");
    m.remove("raw");
    m
}

fn check(p: &Pair) {
    let encode = |l: &Map<String, Value>, what: &str| {
        let e = encode_value(&Value::Object(l.clone())).unwrap_or_else(|e| panic!("{what}: {e}"));
        (line(p.link, &e.data), e)
    };
    // Without payload a MAD frame is its members; another frame needs its payload's bytes.
    let variants: &[bool] = if p.in_payload { &[true, false] } else { &[true] };
    for &keep in variants {
        let base = if keep { p.line.clone() } else { stripped(p.line.clone()) };
        let by_payload = keep && p.in_payload;
        let edits = [
            (p.field, &p.field_edit, p.view, &p.view_of_field_edit, false),
            (p.view, &p.view_edit, p.field, &p.field_of_view_edit, true),
        ];
        for (edited, value, other, other_reads, view_won) in edits {
            let what = format!("{edited} edited, payload {}", if keep { "kept" } else { "dropped" });
            let mut l = base.clone();
            set(&mut l, edited, value.clone());
            let (back, e) = encode(&l, &what);
            assert_eq!(normal(at(&back, edited)), normal(value), "{what}");
            assert_eq!(normal(at(&back, other)), normal(other_reads), "{what}: {other}");
            let settled = Settled { view: p.named.into(), field: p.field.into(), view_won, by_payload };
            assert_eq!(e.settled, [settled], "{what}");
            assert_eq!(e.settled_by, (!by_payload).then_some(SettledBy::Checksum), "{what}");
            assert_eq!(at(&back, "icrc"), "ok", "{what}");
        }
    }
    // Another edit in the line, and no payload to tell: the field wins, the view follows.
    let base = if p.in_payload { stripped(p.line.clone()) } else { p.line.clone() };
    let mut l = base.clone();
    set(&mut l, "deth.q_key", 0x1234.into());
    set(&mut l, p.view, p.view_edit.clone());
    let (back, e) = encode(&l, "view and q_key edited");
    assert_eq!(normal(at(&back, p.field)), normal(at(&p.line, p.field)), "{}: the field stays", p.view);
    assert_eq!(e.settled_by, Some(SettledBy::Rule), "{}", p.view);
    assert!(!e.settled[0].view_won);
    // A line without the field: the view is the only statement of it.
    let mut l = base;
    unset(&mut l, p.field);
    set(&mut l, p.view, p.view_edit.clone());
    let (back, e) = encode(&l, "the field dropped");
    assert_eq!(normal(at(&back, p.view)), normal(&p.view_edit), "{} without {}", p.view, p.field);
    assert!(e.settled.is_empty(), "{:?}", e.settled);
}

/// `hex` with the bytes at `at` replaced by `bytes`.
fn patch_hex(hex: &Value, at: usize, bytes: &[u8]) -> Value {
    let mut s = hex.as_str().unwrap().to_string();
    let new: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    s.replace_range(2 * at..2 * at + new.len(), &new);
    Value::from(s)
}

fn eth(name: &str) -> Map<String, Value> {
    line(linktype::ETHERNET, &sample(name))
}

#[test]
fn mad_method_and_its_response_bit() {
    check(&Pair {
        line: eth("sa_set_join"),
        link: linktype::ETHERNET,
        field: "mad.method",
        field_edit: 0x82.into(),
        view_of_field_edit: true.into(),
        view: "mad.response",
        view_edit: true.into(),
        field_of_view_edit: 0x82.into(),
        named: "mad.response",
        in_payload: true,
    });
}

#[test]
fn mad_attribute_id_and_the_cm_message() {
    check(&Pair {
        line: eth("cm_rtu"),
        link: linktype::ETHERNET,
        field: "mad.attribute_id",
        field_edit: 0x16.into(),
        view_of_field_edit: "DREP".into(),
        view: "cm.message",
        view_edit: "DREP".into(),
        field_of_view_edit: 0x16.into(),
        named: "cm.message",
        in_payload: true,
    });
}

/// The case: `.cm.fields.service_id` set with jq, payload dropped.
#[test]
fn cm_service_id_and_its_port_space_and_port() {
    let l = eth("cm_req");
    let sid = normal(at(&l, "cm.fields.service_id")).as_u64().unwrap();
    let with_port = |p: u64| format!("0x{:016x}", (sid & !0xffff) | p);
    check(&Pair {
        field: "cm.fields.service_id",
        field_edit: with_port(5000).into(),
        view_of_field_edit: 5000.into(),
        view: "cm.port",
        view_edit: 5001.into(),
        field_of_view_edit: with_port(5001).into(),
        named: "cm.port_space/cm.port",
        line: l,
        link: linktype::ETHERNET,
        in_payload: true,
    });
    let l = eth("cm_req");
    let space = |ps: u64| format!("0x{:016x}", (sid & !0xffff_0000) | ps << 16);
    check(&Pair {
        field: "cm.fields.service_id",
        field_edit: space(0x0111).into(),
        view_of_field_edit: 0x0111.into(),
        view: "cm.port_space",
        view_edit: 0x013f.into(),
        field_of_view_edit: space(0x013f).into(),
        named: "cm.port_space/cm.port",
        line: l,
        link: linktype::ETHERNET,
        in_payload: true,
    });
}

#[test]
fn cm_private_data_and_its_rdma_cm_header() {
    let l = eth("cm_req");
    let pd = at(&l, "cm.fields.private_data").clone();
    // The RDMA-CM header's source port: private data bytes 2..4.
    check(&Pair {
        field: "cm.fields.private_data",
        field_edit: patch_hex(&pd, 2, &4242u16.to_be_bytes()),
        view_of_field_edit: 4242.into(),
        view: "cm.cma_header.src_port",
        view_edit: 4243.into(),
        field_of_view_edit: patch_hex(&pd, 2, &4243u16.to_be_bytes()),
        named: "cm.cma_header",
        line: l,
        link: linktype::ETHERNET,
        in_payload: true,
    });
}

#[test]
fn service_record_name_and_its_text() {
    let mut name = [0u8; 64];
    name[..8].copy_from_slice(b"roce-svc");
    let hex = |b: &[u8]| Value::from(b.iter().map(|x| format!("{x:02x}")).collect::<String>());
    let draft = json!({
        "kind": "rocev2", "ip": {"src": "198.18.0.1", "dst": "198.18.0.2"},
        "bth": {"opcode": 0x64, "dest_qp": 1}, "deth": {"q_key": 0x8001_0000u32, "src_qp": 1},
        "mad": {"mgmt_class": 3, "method": 2, "attribute_id": 0x31}, "sa": {},
        "service_record": {"service_name": hex(&name)},
    });
    let l = line(linktype::ETHERNET, &encode_value(&draft).unwrap().data);
    let mut edited = name;
    edited[..8].copy_from_slice(b"rdma-svc");
    let mut viewed = name;
    viewed[..8].copy_from_slice(b"rping-sv");
    check(&Pair {
        line: l,
        link: linktype::ETHERNET,
        field: "service_record.service_name",
        field_edit: hex(&edited),
        view_of_field_edit: "rdma-svc".into(),
        view: "service_record.service_name_text",
        view_edit: "rping-sv".into(),
        field_of_view_edit: hex(&viewed),
        named: "service_record.service_name_text",
        in_payload: true,
    });
}

#[test]
fn smp_data_and_its_node_info() {
    let l = line(linktype::INFINIBAND, &sample("ib_smp_dr_getresp_nodeinfo"));
    let data = at(&l, "smp.data").clone();
    // NodeInfo's NodeGUID: data bytes 12..20.
    let guid = |g: u64| patch_hex(&data, 12, &g.to_be_bytes());
    check(&Pair {
        line: l,
        link: linktype::INFINIBAND,
        field: "smp.data",
        field_edit: guid(0x0002_c903_0000_00aa),
        view_of_field_edit: "0x0002c903000000aa".into(),
        view: "smp.node_info.node_guid",
        view_edit: "0x0002c903000000bb".into(),
        field_of_view_edit: guid(0x0002_c903_0000_00bb),
        named: "smp.node_info",
        in_payload: true,
    });
}

/// The BTH's members at the top (the fields scripts edit) and `bth.*` restating them; the
/// payload does not hold them, so the ICRC tells the edit.
#[test]
fn the_top_level_bth_members_and_the_bth() {
    for (frame, link) in [("ud_send_only_imm", linktype::ETHERNET), ("ib_sa_set_join", linktype::INFINIBAND)] {
        for (field, to, view_to) in [("psn", 77, 78), ("dest_qp", 0x42, 0x43), ("p_key", 0x8001, 0x8002)] {
            let view: &'static str = match field {
                "psn" => "bth.psn",
                "dest_qp" => "bth.dest_qp",
                _ => "bth.p_key",
            };
            // A MAD frame keeps its QP: the MAD members apply to QP 1 alone.
            if field == "dest_qp" && frame == "ib_sa_set_join" {
                continue;
            }
            check(&Pair {
                line: line(link, &sample(frame)),
                link,
                field,
                field_edit: to.into(),
                view_of_field_edit: to.into(),
                view,
                view_edit: view_to.into(),
                field_of_view_edit: view_to.into(),
                named: view,
                in_payload: false,
            });
        }
    }
}
