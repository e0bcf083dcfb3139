//! The MAD of a QP1 frame built from its structured members (`mad`, `rmpp`, `sa`, `mcmember`,
//! `class_port_info`, `service_record`, `cm`) as `roce decode --json` writes them, over the
//! `payload` bytes when the line has them (spec/decode.md, "Encoding").
//!
//! The base is the payload's MAD (or, without `payload`, a zeroed 256-byte MAD whose header
//! says what the members present need: base version 1, class version 2, SubnAdm with method
//! Get or CM with method Send, the attribute of the record or message). Each member present
//! overwrites its field; a member that differs from the payload's value is an *override*,
//! which `roce encode` reports. Members that restate others (`mad.response` the R bit of
//! `mad.method`, `cm.message` the attribute ID, `cm.port_space`/`cm.port` the service ID,
//! `cm.cma_header` the private data, `service_record.service_name_text` the name's bytes,
//! `smp.node_info` the data's first bytes) are settled with the field they restate
//! (`encode::restate`, spec/decode.md): the one edited wins; the names beside numbers
//! (`method_name`, `component_mask_names`, …) are not read. Any other member is an error
//! naming it.

use std::net::{IpAddr, Ipv4Addr};

use roce_wire::class_port_info::ClassPortInfo;
use roce_wire::cm::{self, cma_hdr, CmMessage, PathRepr};
use roce_wire::mad::{MadHeader, Method, MgmtClass, MAD_HEADER_LEN};
use roce_wire::mcmember::McMemberRecord;
use roce_wire::rmpp::RmppRepr;
use roce_wire::sa::{self, SaData, SaHeader, SA_DATA_OFFSET, SA_HEADER_OFFSET};
use roce_wire::service_record::ServiceRecord;
use roce_wire::smp;
use roce_wire::MAD_SIZE;
use serde_json::{Map, Value};

use super::fields::{overlay, unsigned, JsonField, Overlay};
use super::restate::{Views, Was};
use super::EncodeError;

/// The members that describe a MAD.
pub const MAD_MEMBERS: [&str; 8] = ["mad", "rmpp", "sa", "mcmember", "class_port_info", "service_record", "cm", "smp"];

/// The largest MAD `mad_len` may ask for (a UD payload within a 4096-byte path MTU).
const MAX_MAD_LEN: usize = 4096;

/// A MAD built from structured members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltMad {
    /// The MAD bytes (the frame's payload).
    pub bytes: Vec<u8>,
    /// Members whose value differs from what `payload` held (dotted paths).
    pub overrides: Vec<String>,
    /// What was not built field by field, and where its bytes came from.
    pub notes: Vec<String>,
    /// Members restated by another member that was applied (left stale in the line).
    pub superseded: Vec<String>,
}

/// Build the MAD of the line `obj` over `payload`; `None` when the line has no MAD member.
pub(crate) fn build(
    obj: &Map<String, Value>,
    payload: Option<&[u8]>,
    views: &mut Views,
) -> Result<Option<BuiltMad>, EncodeError> {
    if !MAD_MEMBERS.iter().any(|k| obj.get(*k).is_some_and(|v| !v.is_null())) {
        return Ok(None);
    }
    build_mad(obj, payload, views).map(Some)
}

/// Members that restate others or name numbers: not compared by [`check_fits`].
const VIEWS: [&str; 19] = [
    "smp.attribute_name",
    "smp.routing",
    "smp.direction",
    "smp.status",
    "smp.hop_pointer",
    "smp.hop_count",
    "smp.node_description",
    "mad.class_name",
    "mad.method_name",
    "mad.status_text",
    "mad.attribute_name",
    "mad.response",
    "sa.component_mask_names",
    "mcmember.join_state_names",
    "service_record.service_name_text",
    "cm.message",
    "cm.cma_header",
    "cm.port_space",
    "cm.port",
];

/// Every MAD member of the line must be what the built frame decodes to (`decoded`, the
/// decoder's JSON of it): a value wider than its field (a 6-bit MTU of 200) is an error
/// naming the member, never masked silently.
pub fn check_fits(
    line: &Map<String, Value>,
    decoded: &Map<String, Value>,
    built: &BuiltMad,
) -> Result<(), EncodeError> {
    fn walk(given: &Value, got: Option<&Value>, path: &str, skip: &dyn Fn(&str) -> bool) -> Result<(), EncodeError> {
        if skip(path) {
            return Ok(());
        }
        let Some(got) = got else { return Ok(()) };
        match given {
            Value::Object(m) => {
                for (k, v) in m {
                    walk(v, got.get(k), &format!("{path}.{k}"), skip)?;
                }
                Ok(())
            }
            _ if normal(given) == normal(got) => Ok(()),
            _ => Err(EncodeError(format!("{path}: {given} does not fit the field (the frame holds {got})"))),
        }
    }
    let skip = |p: &str| VIEWS.contains(&p) || built.superseded.iter().any(|s| s == p);
    for k in MAD_MEMBERS {
        if let Some(v) = line.get(k).filter(|v| v.is_object()) {
            walk(v, decoded.get(k), k, &skip)?;
        }
    }
    Ok(())
}

/// A leaf in a comparable form: numbers and `"0x…"` strings as numbers, addresses in their
/// canonical text, hex in lowercase.
fn normal(v: &Value) -> Value {
    match v {
        Value::String(s) => {
            if let Ok(n) = unsigned(v, "") {
                if s.starts_with("0x") || s.starts_with("0X") {
                    return Value::from(n);
                }
            }
            if let Ok(a) = s.parse::<IpAddr>() {
                return Value::from(roce_wire::Gid::from_ip(a).to_string());
            }
            Value::from(s.to_ascii_lowercase())
        }
        Value::Array(a) => Value::Array(a.iter().map(normal).collect()),
        other => other.clone(),
    }
}

/// The member `key` as an object, if present.
fn member<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<Option<&'a Map<String, Value>>, EncodeError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(o)) => Ok(Some(o)),
        Some(other) => Err(EncodeError(format!("{key}: expected an object, found {other}"))),
    }
}

/// Where a body builder reports: the members that overrode `payload`, and the members
/// superseded by a restating member that won.
type Reports<'a> = (&'a mut Vec<String>, &'a mut Vec<String>);

/// The CM attribute ID a `cm.message` names; `None` for "Unknown".
fn cm_attribute(message: &str) -> Result<Option<u16>, EncodeError> {
    use cm::attr::*;
    let ids = [CLASS_PORT_INFO, REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDR_REQ, SIDR_REP, LAP, APR];
    if message == "Unknown" {
        return Ok(None);
    }
    ids.into_iter().find(|&id| cm::attr::name(id) == message).map(Some).ok_or_else(|| {
        let known: Vec<&str> = ids.iter().map(|&id| cm::attr::name(id)).collect();
        EncodeError(format!("cm.message: unknown message {message:?} (one of {})", known.join(", ")))
    })
}

/// The SA attribute a record member needs.
fn record_attribute(body: &str) -> u16 {
    match body {
        "mcmember" => sa::attr::MC_MEMBER_RECORD,
        "class_port_info" => sa::attr::CLASS_PORT_INFO,
        _ => sa::attr::SERVICE_RECORD,
    }
}

/// Whether the line gives `key` of the object `obj`.
fn gives(obj: Option<&Map<String, Value>>, key: &str) -> bool {
    obj.and_then(|o| o.get(key)).is_some_and(|v| !v.is_null())
}

/// What the line tells of a field's value before an edit: `payload`'s value, or that the line
/// does not give the field (`given` false), or nothing.
fn was<T>(payload_value: Option<T>, given: bool) -> Was<T> {
    match payload_value {
        Some(v) => Was::Payload(v),
        None if !given => Was::Absent,
        None => Was::Unknown,
    }
}

fn build_mad(obj: &Map<String, Value>, payload: Option<&[u8]>, views: &mut Views) -> Result<BuiltMad, EncodeError> {
    let from_payload = payload.is_some();
    let mut overrides = Vec::new();
    let mut superseded = Vec::new();
    let mut notes = Vec::new();
    let bodies: Vec<&str> = ["mcmember", "class_port_info", "service_record", "cm"]
        .into_iter()
        .filter(|k| obj.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    // Without a payload the body member says what the MAD is; with one, the MAD's header
    // (payload and `mad`) says which body member applies.
    if !from_payload && bodies.len() > 1 {
        return Err(EncodeError(format!("{}: a MAD holds one body, not {}", bodies[1], bodies.join(" and "))));
    }
    let default_body = if from_payload { None } else { bodies.first().copied() };
    let (mad, rmpp, sa_obj, cm_obj) =
        (member(obj, "mad")?, member(obj, "rmpp")?, member(obj, "sa")?, member(obj, "cm")?);
    let smp_obj = member(obj, "smp")?;
    let cm_id = match cm_obj.and_then(|c| c.get("message")) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => cm_attribute(s)?,
        Some(other) => return Err(EncodeError(format!("cm.message: expected a message name, found {other}"))),
    };

    let len = match payload {
        Some(p) => p.len(),
        None => match obj.get("mad_len").filter(|v| !v.is_null()) {
            None => MAD_SIZE,
            Some(v) => match usize::try_from(unsigned(v, "mad_len")?) {
                Ok(n) if n <= MAX_MAD_LEN => n,
                _ => return Err(EncodeError(format!("mad_len: {v} is out of range (at most {MAX_MAD_LEN})"))),
            },
        },
    };
    let mut buf = vec![0u8; len.max(MAD_SIZE)];
    if let Some(p) = payload {
        buf[..p.len()].copy_from_slice(p);
    }

    // The common header.
    let parsed = MadHeader::parse_bytes(&buf).map_err(|e| EncodeError(format!("mad: {e}")))?;
    let base = if from_payload {
        parsed
    } else {
        let mut h = parsed;
        h.base_version = 1;
        h.class_version = 2;
        match default_body {
            Some("cm") => {
                h.mgmt_class = MgmtClass::ComMgmt;
                h.method = Method::from(cm::METHOD_SEND);
                h.attribute_id = cm_id.unwrap_or(0);
            }
            Some(record) => {
                h.mgmt_class = MgmtClass::SubnAdm;
                h.method = Method::from(0x01);
                h.attribute_id = record_attribute(record);
            }
            None if rmpp.is_some() || sa_obj.is_some() => {
                h.mgmt_class = MgmtClass::SubnAdm;
                h.method = Method::from(0x01);
            }
            None => {}
        }
        h
    };
    let mut h = base;
    if let Some(m) = mad {
        let mut o = Overlay::new(m, "mad", from_payload);
        overlay!(o, h; base_version, mgmt_class, class_version, status, class_specific,
            transaction_id as "tid", attribute_id, reserved, attribute_modifier);
        let method = o.get("method").map(|v| u8::from_json(v, "mad.method")).transpose()?;
        let response = o.get("response").map(|v| bool::from_json(v, "mad.response")).transpose()?;
        o.derived(&["class_name", "method_name", "status_text", "attribute_name"]);
        overrides.extend(o.finish()?);
        let mut byte = method.unwrap_or(base.method_byte());
        let was_r = was(from_payload.then_some(base.response), method.is_some());
        if let Some(r) = views.settle(response, byte & 0x80 != 0, was_r, "mad.response", "mad.method")? {
            byte = (byte & 0x7f) | if r { 0x80 } else { 0 };
            superseded.push("mad.method".to_string());
        }
        if from_payload && byte != base.method_byte() {
            overrides.push(
                if method.is_some_and(|m| m != base.method_byte()) { "mad.method" } else { "mad.response" }.into(),
            );
        }
        h.response = byte & 0x80 != 0;
        h.method = Method::from(byte & 0x7f);
    }
    if let (Some(id), MgmtClass::ComMgmt) = (cm_id, h.mgmt_class) {
        let was_id = was(from_payload.then_some(base.attribute_id), gives(mad, "attribute_id"));
        if let Some(id) = views.settle(Some(id), h.attribute_id, was_id, "cm.message", "mad.attribute_id")? {
            if from_payload {
                overrides.push("cm.message".into());
            }
            superseded.push("mad.attribute_id".to_string());
            h.attribute_id = id;
        }
    }
    let class = h.mgmt_class;
    // The body member the header names; any other is not applied, and said so.
    let wanted = match class {
        MgmtClass::SubnAdm => ["mcmember", "class_port_info", "service_record"]
            .into_iter()
            .find(|r| record_attribute(r) == h.attribute_id),
        MgmtClass::ComMgmt => Some("cm"),
        _ => None,
    };
    let what = format!(
        "the MAD is class {} ({}), attribute 0x{:04x} ({}), {len} bytes",
        u8::from(class),
        class.name(),
        h.attribute_id,
        h.attribute_name()
    );
    let mut applies = |key: &str, fits: bool| {
        if !fits {
            notes.push(format!("{key}: not applied: {what}"));
        }
        fits
    };
    let sa_class = class == MgmtClass::SubnAdm && len >= MAD_SIZE;
    let rmpp = rmpp.filter(|_| applies("rmpp", sa_class));
    let sa_obj = sa_obj.filter(|_| applies("sa", sa_class));
    let smp_obj = smp_obj.filter(|_| applies("smp", smp::is_smp_class(class) && len >= MAD_SIZE));
    let mut body = None;
    for b in bodies {
        if applies(b, Some(b) == wanted && len >= MAD_SIZE) {
            body = Some(b);
        }
    }
    let cm_obj = cm_obj.filter(|_| body == Some("cm"));
    if mad.is_some() && len < MAD_HEADER_LEN {
        notes.push(format!("mad: not applied: the MAD is {len} bytes, shorter than its header"));
        return Ok(BuiltMad { bytes: buf[..len].to_vec(), overrides: Vec::new(), notes, superseded });
    }
    h.emit_bytes(&mut buf[..MAD_HEADER_LEN]);

    match class {
        MgmtClass::SubnAdm if len >= MAD_SIZE => {
            let area = &mut buf[MAD_HEADER_LEN..MAD_SIZE];
            let data = build_sa(
                area,
                h,
                [rmpp, sa_obj],
                body.map(|b| (b, obj)),
                from_payload,
                (&mut overrides, &mut superseded),
                views,
            )?;
            if let Some(n) = data {
                notes.push(n);
            }
        }
        MgmtClass::ComMgmt if len >= MAD_SIZE => {
            let area = &mut buf[MAD_HEADER_LEN..MAD_SIZE];
            let reports = (&mut overrides, &mut superseded);
            if let Some(n) = build_cm(area, h.attribute_id, cm_obj, from_payload, reports, views)? {
                notes.push(n);
            }
        }
        MgmtClass::SubnLid | MgmtClass::SubnDirected if len >= MAD_SIZE && smp_obj.is_some() => {
            if let Some(m) = smp_obj {
                build_smp(&mut buf[..MAD_SIZE], class, m, from_payload, (&mut overrides, &mut superseded), views)?;
            }
        }
        _ if len > MAD_HEADER_LEN => notes.push(format!(
            "mad: a class {} ({}) body is not built field by field: its {} bytes {}",
            u8::from(class),
            class.name(),
            len - MAD_HEADER_LEN,
            if from_payload { "come from payload" } else { "are zeros (no payload)" }
        )),
        _ => {}
    }
    buf.truncate(len);
    Ok(BuiltMad { bytes: buf, overrides, notes, superseded })
}

/// The SMP fields after the MAD header (`buf` is the whole 256-byte MAD): M_Key and the
/// attribute's data, and for a directed-route SMP the DR LIDs and both paths. The D bit, hop
/// pointer and hop count live in the MAD header (`mad.status`, `mad.class_specific`): the
/// `smp` members that restate them are views, not applied. `node_info` restates the data's
/// first 40 bytes and applies when it is the one edited (as [`Views::settle`] decides).
fn build_smp(
    buf: &mut [u8],
    class: MgmtClass,
    m: &Map<String, Value>,
    from_payload: bool,
    (overrides, superseded): Reports<'_>,
    views: &mut Views,
) -> Result<(), EncodeError> {
    let err = |e: roce_wire::Error| EncodeError(format!("smp: {e}"));
    let node_at = smp::DATA_OFFSET..smp::DATA_OFFSET + smp::node_info::LEN;
    let node_info_of = |b: &[u8]| smp::node_info::Repr::parse_bytes(&b[node_at.clone()]).map_err(err);
    let base = if from_payload { Some(node_info_of(buf)?) } else { None };
    let mut o = Overlay::new(m, "smp", from_payload);
    o.derived(&["attribute_name", "routing", "direction", "status", "hop_pointer", "hop_count", "node_description"]);
    if class == MgmtClass::SubnDirected {
        let mut r = smp::directed::Repr::parse_bytes(buf).map_err(err)?;
        overlay!(o, r; m_key, dr_slid, dr_dlid, data, initial_path, return_path);
        r.emit_bytes(buf);
    } else {
        let mut r = smp::lid_routed::Repr::parse_bytes(buf).map_err(err)?;
        overlay!(o, r; m_key, data);
        r.emit_bytes(buf);
    }
    // NodeInfo restates the data's first 40 bytes: applied when it is the one edited.
    let node_info = o.object("node_info")?;
    overrides.extend(o.finish()?);
    if let Some(ni) = node_info {
        let current = node_info_of(buf)?;
        let mut given = current;
        let mut no = Overlay::new(ni, "smp.node_info", false);
        overlay!(no, given; base_version, class_version, node_type, num_ports, system_image_guid, node_guid,
            port_guid, partition_cap, device_id, revision, local_port_num, vendor_id);
        no.finish()?;
        match views.settle(Some(given), current, was(base, gives(Some(m), "data")), "smp.node_info", "smp.data")? {
            Some(n) => {
                n.emit_bytes(&mut buf[node_at]);
                superseded.push("smp.data".to_string());
                if from_payload {
                    overrides.push("smp.node_info".into());
                }
            }
            None if given != current => superseded.push("smp.node_info".to_string()),
            None => {}
        }
    }
    Ok(())
}

/// The RMPP header, SA header and SA data area (`area` is MAD bytes 24..256). Returns a note
/// when the data area was not built from a record member.
fn build_sa(
    area: &mut [u8],
    h: MadHeader,
    [rmpp, sa_obj]: [Option<&Map<String, Value>>; 2],
    body: Option<(&str, &Map<String, Value>)>,
    from_payload: bool,
    (overrides, superseded): Reports<'_>,
    views: &mut Views,
) -> Result<Option<String>, EncodeError> {
    const RMPP_AT: usize = 0;
    const SA_AT: usize = SA_HEADER_OFFSET - MAD_HEADER_LEN;
    const DATA_AT: usize = SA_DATA_OFFSET - MAD_HEADER_LEN;
    let err = |what: &str, e: roce_wire::Error| EncodeError(format!("{what}: {e}"));
    let mut r = RmppRepr::parse_bytes(&area[RMPP_AT..SA_AT]).map_err(|e| err("rmpp", e))?;
    if let Some(m) = rmpp {
        let mut o = Overlay::new(m, "rmpp", from_payload);
        overlay!(o, r; version, rmpp_type, resp_time, flags, status, data1, data2);
        overrides.extend(o.finish()?);
    }
    r.emit_bytes(&mut area[RMPP_AT..SA_AT]);
    let table_segment = r.flags.contains(roce_wire::rmpp::RmppFlags::ACTIVE);
    let mut s = SaHeader::parse_bytes(&area[SA_AT..DATA_AT]).map_err(|e| err("sa", e))?;
    let mut data_area = [0u8; sa::SA_DATA_LEN];
    data_area.copy_from_slice(&area[DATA_AT..]);
    let mut data = SaData::decode(h.attribute_id, &data_area);
    if !from_payload && h.response {
        // What an SA puts in a response: the record's size in 8-byte words.
        s.attribute_offset = data.attribute_offset_words();
    }
    if let Some(m) = sa_obj {
        let mut o = Overlay::new(m, "sa", from_payload);
        overlay!(o, s; sm_key, attribute_offset, reserved, component_mask);
        o.derived(&["component_mask_names"]);
        overrides.extend(o.finish()?);
    }
    s.emit_bytes(&mut area[SA_AT..DATA_AT]);
    let mut note = None;
    if table_segment && body.is_some() && !from_payload {
        // The decoder shows a segment's first record only; the table's bytes after it are
        // in `payload` alone.
        note = Some(format!(
            "{}: only the segment's first record is a member: the table's bytes after it are zeros (no payload)",
            body.map_or("sa", |b| b.0)
        ));
    }
    match (&mut data, body) {
        (SaData::McMember { record, .. }, Some((key, obj))) => {
            let m = member(obj, key)?.unwrap_or_default_ref();
            let mut o = Overlay::new(m, key, from_payload);
            mcmember(&mut o, record)?;
            o.derived(&["join_state_names"]);
            overrides.extend(o.finish()?);
        }
        (SaData::ClassPortInfo { info, .. }, Some((key, obj))) => {
            let m = member(obj, key)?.unwrap_or_default_ref();
            let mut o = Overlay::new(m, key, from_payload);
            class_port_info(&mut o, info)?;
            overrides.extend(o.finish()?);
        }
        (SaData::Service { record, .. }, Some((key, obj))) => {
            let m = member(obj, key)?.unwrap_or_default_ref();
            let name_given = m.get("service_name").is_some_and(|v| !v.is_null());
            let base = *record;
            let mut o = Overlay::new(m, key, from_payload);
            service_record(&mut o, record)?;
            let text = o.get("service_name_text").map(|v| String::from_json(v, "service_record.service_name_text"));
            overrides.extend(o.finish()?);
            let current = String::from_utf8_lossy(record.name_bytes()).into_owned();
            let old_name = String::from_utf8_lossy(base.name_bytes()).into_owned();
            let text = text.transpose()?;
            let was_name = was(from_payload.then_some(old_name), name_given);
            let view = "service_record.service_name_text";
            let apply = views.settle(text, current, was_name, view, "service_record.service_name")?;
            if let Some(t) = apply {
                if t.len() > record.service_name.len() {
                    return Err(EncodeError(format!(
                        "service_record.service_name_text: {} bytes, the name holds {}",
                        t.len(),
                        record.service_name.len()
                    )));
                }
                superseded.push("service_record.service_name".to_string());
                record.service_name = [0; 64];
                record.service_name[..t.len()].copy_from_slice(t.as_bytes());
                if from_payload {
                    overrides.push("service_record.service_name_text".into());
                }
            }
        }
        (_, Some((key, _))) => {
            return Err(EncodeError(format!("{key}: the SA data area does not hold this record")));
        }
        (_, None) => {
            note = Some(format!(
                "sa: no record member for attribute 0x{:04x} ({}): the data area {}",
                h.attribute_id,
                h.attribute_name(),
                if from_payload { "comes from payload" } else { "is zeros (no payload)" }
            ));
        }
    }
    data.emit_bytes(&mut area[DATA_AT..]);
    Ok(note)
}

/// An empty object for a member that is absent.
trait OrEmpty<'a> {
    fn unwrap_or_default_ref(self) -> &'a Map<String, Value>;
}

impl<'a> OrEmpty<'a> for Option<&'a Map<String, Value>> {
    fn unwrap_or_default_ref(self) -> &'a Map<String, Value> {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        self.unwrap_or_else(|| EMPTY.get_or_init(Map::new))
    }
}

impl JsonField for String {
    fn from_json(v: &Value, path: &str) -> Result<Self, EncodeError> {
        v.as_str().map(str::to_string).ok_or_else(|| EncodeError(format!("{path}: expected a string, found {v}")))
    }
}

fn mcmember(o: &mut Overlay<'_>, r: &mut McMemberRecord) -> Result<(), EncodeError> {
    overlay!(o, r; mgid, port_gid, q_key, mlid, mtu_selector, mtu, traffic_class, p_key, rate_selector, rate,
        packet_life_time_selector, packet_life_time, sl, flow_label, hop_limit, scope, join_state, proxy_join,
        reserved);
    Ok(())
}

fn class_port_info(o: &mut Overlay<'_>, r: &mut ClassPortInfo) -> Result<(), EncodeError> {
    overlay!(o, r; base_version, class_version, capability_mask, cap_mask2_resp_time, redirect_gid,
        redirect_tc_sl_fl, redirect_lid, redirect_pkey, redirect_qp, redirect_qkey, trap_gid, trap_tc_sl_fl,
        trap_lid, trap_pkey, trap_hl_qp, trap_qkey);
    Ok(())
}

fn service_record(o: &mut Overlay<'_>, r: &mut ServiceRecord) -> Result<(), EncodeError> {
    overlay!(o, r; service_id, service_gid, service_p_key, reserved, service_lease, service_key, service_name,
        service_data8, service_data16, service_data32, service_data64);
    Ok(())
}

fn path(
    o: &mut Overlay<'_>,
    key: &'static str,
    p: &mut PathRepr,
    from_payload: bool,
) -> Result<Vec<String>, EncodeError> {
    let Some(m) = o.object(key)? else { return Ok(Vec::new()) };
    let mut po = Overlay::new(m, &o.path_of(key), from_payload);
    overlay!(po, p; local_lid, remote_lid, local_gid, remote_gid, flow_label, reserved_rate, packet_rate,
        traffic_class, hop_limit, sl, subnet_local, reserved_sl, local_ack_timeout, reserved_ack);
    po.finish()
}

/// The CM message body (`area` is MAD bytes 24..256). Returns a note when the body was not
/// built field by field.
fn build_cm(
    area: &mut [u8],
    attribute_id: u16,
    cm_obj: Option<&Map<String, Value>>,
    from_payload: bool,
    (overrides, superseded): Reports<'_>,
    views: &mut Views,
) -> Result<Option<String>, EncodeError> {
    let mut msg = CmMessage::parse(attribute_id, area).map_err(|e| EncodeError(format!("cm: {e}")))?;
    let base = msg;
    let mut note = None;
    let Some(c) = cm_obj else {
        if let CmMessage::Other { .. } = msg {
            note = Some(other_note(&msg, from_payload));
        }
        return Ok(note);
    };
    let mut o = Overlay::new(c, "cm", from_payload);
    o.get("message");
    let fields = o.object("fields")?;
    if let Some(f) = fields {
        let mut fo = Overlay::new(f, "cm.fields", from_payload);
        match &mut msg {
            CmMessage::Req(r) => {
                overlay!(fo, r; local_comm_id, reserved_4, service_id, local_ca_guid, reserved_24, local_qkey,
                    local_qpn, responder_resources, local_eecn, initiator_depth, remote_eecn,
                    remote_cm_response_timeout, transport_service_type, end_to_end_flow_control, starting_psn,
                    local_cm_response_timeout, retry_count, partition_key, path_mtu, rdc_exists, rnr_retry_count,
                    max_cm_retries, srq, extended_transport_type, sap_supported, private_data);
                overrides.extend(path(&mut fo, "primary_path", &mut r.primary_path, from_payload)?);
                overrides.extend(path(&mut fo, "alternate_path", &mut r.alternate_path, from_payload)?);
            }
            CmMessage::Rep(r) => {
                overlay!(fo, r; local_comm_id, remote_comm_id, local_qkey, local_qpn, reserved_15, local_eecn,
                    reserved_19, starting_psn, reserved_23, responder_resources, initiator_depth, target_ack_delay,
                    failover_accepted, end_to_end_flow_control, rnr_retry_count, srq, reserved_27, local_ca_guid,
                    private_data);
            }
            CmMessage::Rtu(r) | CmMessage::Drep(r) => {
                overlay!(fo, r; local_comm_id, remote_comm_id, private_data);
            }
            CmMessage::Rej(r) => {
                overlay!(fo, r; local_comm_id, remote_comm_id, message_rejected, reserved_8, reject_info_length,
                    reserved_9, reason, ari, private_data);
            }
            CmMessage::Mra(r) => {
                overlay!(fo, r; local_comm_id, remote_comm_id, message_mraed, reserved_8, service_timeout,
                    reserved_9, private_data);
            }
            CmMessage::Dreq(r) => {
                overlay!(fo, r; local_comm_id, remote_comm_id, remote_qpn_eecn, reserved_11, private_data);
            }
            CmMessage::SidrReq(r) => {
                overlay!(fo, r; request_id, partition_key, reserved_6, service_id, private_data);
            }
            CmMessage::SidrRep(r) => {
                overlay!(fo, r; request_id, status, additional_info_length, reserved_6, qpn, reserved_11,
                    service_id, qkey as "q_key", additional_info, private_data);
            }
            CmMessage::Other { attribute_id, data } => {
                let mut id = *attribute_id;
                fo.set("attribute_id", &mut id)?;
                if id != *attribute_id {
                    return Err(EncodeError(format!(
                        "cm.fields.attribute_id: 0x{id:04x}, but mad.attribute_id is 0x{attribute_id:04x} (edit that)"
                    )));
                }
                fo.set("data", data)?;
            }
        }
        overrides.extend(fo.finish()?);
    }
    let base = from_payload.then_some(base);
    // The RDMA-CM header restates the first 36 bytes of REQ / SIDR_REQ private data.
    let cma = o.object("cma_header")?;
    if let Some(ch) = cma {
        let pd = match &mut msg {
            CmMessage::Req(r) => Some((&mut r.private_data[..], base.map(|b| cma_of(&b)))),
            CmMessage::SidrReq(r) => Some((&mut r.private_data[..], base.map(|b| cma_of(&b)))),
            _ => None,
        };
        let Some((pd, cma_was)) = pd else {
            return Err(EncodeError("cm.cma_header: only REQ and SIDR_REQ carry one".into()));
        };
        let current = cma_hdr::Repr::parse(&cma_hdr::Packet::new_unchecked(&pd[..])).ok();
        let now = current.map(|h| (h.src_ip(), h.dst_ip(), h.src_port));
        let mut want = now.unwrap_or((IpAddr::V4(Ipv4Addr::UNSPECIFIED), IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0));
        let mut co = Overlay::new(ch, "cm.cma_header", false);
        co.set("src", &mut want.0)?;
        co.set("dst", &mut want.1)?;
        co.set("src_port", &mut want.2)?;
        co.finish()?;
        let apply = match now {
            Some(now) => {
                // A payload without an RDMA-CM header says nothing of the view: the view's edit.
                let was_pd = cma_was.map(|w| w.map_or(now, |h| (h.src_ip(), h.dst_ip(), h.src_port)));
                let was_pd = was(was_pd, gives(fields, "private_data"));
                views.settle(Some(want), now, was_pd, "cm.cma_header", "cm.fields.private_data")?
            }
            None => Some(want),
        };
        if let Some((src, dst, port)) = apply {
            let mut h = match (src, dst) {
                (IpAddr::V4(s), IpAddr::V4(d)) => cma_hdr::Repr::new_v4(s, port, d),
                (IpAddr::V6(s), IpAddr::V6(d)) => cma_hdr::Repr::new_v6(s, port, d),
                _ => return Err(EncodeError("cm.cma_header.dst: not the IP version of cm.cma_header.src".into())),
            };
            if let Some(c) = current {
                h.ip_version_reserved = c.ip_version_reserved;
            }
            h.emit(&mut cma_hdr::Packet::new_unchecked(&mut pd[..cma_hdr::Repr::LEN]));
            superseded.push("cm.fields.private_data".to_string());
            if from_payload {
                overrides.push("cm.cma_header".into());
            }
        }
    }
    // `port_space` and `port` restate an IP service ID (RDMA-CM's `(ps << 16) + port`): the
    // view is the service ID they make, the part not given taken from the field.
    let space = o.get("port_space").map(|v| u16::from_json(v, "cm.port_space")).transpose()?;
    let port = o.get("port").map(|v| u16::from_json(v, "cm.port")).transpose()?;
    let was_sid = base.as_ref().and_then(service_id);
    if let Some(sid) = service_id_mut(&mut msg) {
        let now = cma_hdr::split_service_id(*sid);
        let view = match (space, port) {
            (None, None) => None,
            (s, p) => Some(cma_hdr::service_id(s.unwrap_or(now.0), p.unwrap_or(now.1))),
        };
        let was_sid = was(was_sid, gives(fields, "service_id"));
        if let Some(v) = views.settle(view, *sid, was_sid, "cm.port_space/cm.port", "cm.fields.service_id")? {
            *sid = v;
            superseded.push("cm.fields.service_id".to_string());
            if from_payload {
                overrides.push("cm.port".into());
            }
        }
    } else if space.is_some() || port.is_some() {
        return Err(EncodeError(format!("cm.port_space/cm.port: {} carries no service ID", msg.name())));
    }
    overrides.extend(o.finish()?);
    if let CmMessage::Other { .. } = msg {
        note = Some(other_note(&msg, from_payload));
    }
    msg.emit(area);
    Ok(note)
}

fn other_note(msg: &CmMessage, from_payload: bool) -> String {
    format!(
        "cm: {} (0x{:04x}) is not built field by field: its body {}",
        msg.name(),
        msg.attribute_id(),
        if from_payload { "comes from payload (or cm.fields.data)" } else { "is cm.fields.data, or zeros" }
    )
}

fn cma_of(m: &CmMessage) -> Option<cma_hdr::Repr> {
    match m {
        CmMessage::Req(r) => r.cma_header().ok(),
        CmMessage::SidrReq(r) => r.cma_header().ok(),
        _ => None,
    }
}

/// The service ID of a message that carries one (REQ, SIDR_REQ, SIDR_REP).
fn service_id(m: &CmMessage) -> Option<u64> {
    match m {
        CmMessage::Req(r) => Some(r.service_id),
        CmMessage::SidrReq(r) => Some(r.service_id),
        CmMessage::SidrRep(r) => Some(r.service_id),
        _ => None,
    }
}

fn service_id_mut(m: &mut CmMessage) -> Option<&mut u64> {
    match m {
        CmMessage::Req(r) => Some(&mut r.service_id),
        CmMessage::SidrReq(r) => Some(&mut r.service_id),
        CmMessage::SidrRep(r) => Some(&mut r.service_id),
        _ => None,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::decode::decode_ethernet;
    use crate::encode::{encode_value, Encoded};
    use crate::samples::{gsi_frame, sample_frames};
    use proptest::prelude::*;
    use roce_wire::mad::MadHeader;
    use roce_wire::rmpp::{RmppFlags, RmppType};
    use roce_wire::sa::SaMad;

    /// The decoder's line for a frame.
    fn line(bytes: &[u8]) -> Map<String, Value> {
        decode_ethernet(bytes).json
    }

    /// A ServiceRecord Set named by its text alone: the text is the 64-byte NUL-padded name;
    /// given with bytes that disagree (and no payload or checksum to tell which was edited),
    /// the bytes win and the encoder says so.
    #[test]
    fn service_name_text_alone_names_the_service() {
        let record = |sr: Value| {
            serde_json::json!({
                "kind": "rocev2", "ip": {"src": "198.18.0.1", "dst": "198.18.0.2"},
                "bth": {"opcode": 0x64, "dest_qp": 1}, "deth": {"q_key": 0x8001_0000u32, "src_qp": 1},
                "mad": {"mgmt_class": 3, "method": 2, "attribute_id": 0x31}, "sa": {},
                "service_record": sr,
            })
        };
        let f = encode_value(&record(serde_json::json!({"service_name_text": "roce-svc"}))).expect("encodes");
        let l = line(&f.data);
        assert_eq!(l["service_record"]["service_name_text"], "roce-svc");
        assert!(f.notes.is_empty(), "{:?}", f.notes);
        let both = serde_json::json!({"service_name_text": "other", "service_name": hex_name("roce-svc")});
        let f = encode_value(&record(both)).expect("encodes");
        assert_eq!(line(&f.data)["service_record"]["service_name_text"], "roce-svc");
        assert_eq!(f.settled_by, Some(crate::encode::SettledBy::Rule));
        assert_eq!(f.settled[0].text(), "service_record.service_name_text follows service_record.service_name");
    }

    fn hex_name(t: &str) -> String {
        let mut b = [0u8; 64];
        b[..t.len()].copy_from_slice(t.as_bytes());
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// The line without the bytes the structured members describe.
    fn stripped(mut m: Map<String, Value>) -> Map<String, Value> {
        m.remove("payload");
        m.remove("raw");
        m
    }

    fn encode(m: &Map<String, Value>) -> Result<Encoded, EncodeError> {
        encode_value(&Value::Object(m.clone()))
    }

    /// Set a dotted path.
    pub(in crate::encode) fn set(m: &mut Map<String, Value>, path: &str, v: Value) {
        let mut parts: Vec<&str> = path.split('.').collect();
        let last = parts.pop().unwrap();
        let mut o = m;
        for p in parts {
            o = o.entry(p).or_insert_with(|| Value::Object(Map::new())).as_object_mut().unwrap();
        }
        o.insert(last.to_string(), v);
    }

    fn at<'a>(m: &'a Map<String, Value>, path: &str) -> &'a Value {
        lookup(m, path).unwrap_or(&Value::Null)
    }

    fn lookup<'a>(m: &'a Map<String, Value>, path: &str) -> Option<&'a Value> {
        let mut parts = path.split('.');
        let mut v = m.get(parts.next()?)?;
        for p in parts {
            v = v.get(p)?;
        }
        Some(v)
    }

    fn sample(name: &str) -> Vec<u8> {
        sample_frames().into_iter().find(|s| s.name == name).unwrap().bytes
    }

    /// The frame built from the line without `payload` is the frame.
    fn rebuilds_without_payload(bytes: &[u8]) -> Result<(), TestCaseError> {
        let l = line(bytes);
        prop_assert!(l.contains_key("mad"), "{}", Value::Object(l.clone()));
        let e = encode(&stripped(l.clone())).map_err(|e| TestCaseError::fail(e.0))?;
        prop_assert_eq!(&e.data, &bytes.to_vec(), "{}", Value::Object(l));
        prop_assert!(e.overrides.is_empty());
        Ok(())
    }

    #[test]
    fn every_sample_mad_and_cm_frame_builds_from_its_fields_alone() {
        let mut names = Vec::new();
        for s in sample_frames() {
            let l = line(&s.bytes);
            if !l.contains_key("mad") || l.contains_key("raw") {
                continue;
            }
            let e = encode(&stripped(l)).unwrap_or_else(|e| panic!("{}: {e}", s.name));
            assert_eq!(e.data, s.bytes, "{}", s.name);
            names.push(s.name);
        }
        for want in ["sa_set_join", "sa_get_classportinfo", "cm_req", "cm_rep", "cm_rtu", "cm_rej_invalid_service_id"] {
            assert!(names.contains(&want), "{want} not among {names:?}");
        }
        for want in ["cm_mra", "cm_dreq", "cm_drep", "cm_sidr_req", "cm_sidr_rep"] {
            assert!(names.contains(&want), "{want} not among {names:?}");
        }
    }

    #[test]
    fn a_record_without_payload_or_mad_header_gets_a_valid_mad() {
        // Only the record: the header says SubnAdm, class version 2, Get, MCMemberRecord.
        let mut l = stripped(line(&sample("sa_set_join")));
        l.remove("mad");
        l.remove("rmpp");
        l.remove("sa");
        l.remove("payload_len");
        let e = encode(&l).unwrap();
        let back = line(&e.data);
        assert_eq!(at(&back, "mad.mgmt_class"), 3);
        assert_eq!(at(&back, "mad.class_version"), 2);
        assert_eq!(at(&back, "mad.method"), 1);
        assert_eq!(at(&back, "mad.attribute_id"), 0x38);
        assert_eq!(at(&back, "mcmember"), at(&l, "mcmember"));
        assert_eq!(at(&back, "icrc"), "ok");
        // Only a CM message: CM, method Send, the message's attribute.
        let mut l = stripped(line(&sample("cm_rtu")));
        l.remove("mad");
        l.remove("payload_len");
        let back = line(&encode(&l).unwrap().data);
        assert_eq!(at(&back, "mad.mgmt_class"), 7);
        assert_eq!(at(&back, "mad.method"), 3);
        assert_eq!(at(&back, "cm.message"), "RTU");
        assert_eq!(at(&back, "cm.fields"), at(&l, "cm.fields"));
    }

    /// Edit `path` to `v` in the line (payload kept): the new frame decodes to `v` there, the
    /// edit is reported as an override, and the line without payload gives the same frame.
    fn edit(sample_name: &str, path: &str, v: Value, reported: &str) -> Map<String, Value> {
        let mut l = line(&sample(sample_name));
        set(&mut l, path, v.clone());
        let e = encode(&l).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(e.overrides, [reported], "{path}");
        let back = line(&e.data);
        assert_eq!(at(&back, path), &v, "{path}");
        assert_eq!(at(&back, "icrc"), "ok", "{path}");
        // Without payload the edit gives the same frame (a restating member edited alone: the
        // line's ICRC tells it was the one edited).
        let mut again = stripped(line(&sample(sample_name)));
        set(&mut again, path, v);
        let e2 = encode(&again).unwrap_or_else(|e| panic!("{path} without payload: {e}"));
        assert_eq!(e2.data, e.data, "{path} without payload");
        back
    }

    #[test]
    fn an_edit_of_any_layer_changes_the_frame_and_is_reported_over_the_payload() {
        edit("sa_set_join", "mcmember.port_gid", "fd00::7".into(), "mcmember.port_gid");
        edit("sa_set_join", "mad.tid", "0x0000000000abcdef".into(), "mad.tid");
        edit("sa_set_join", "sa.component_mask", "0x0000000000000003".into(), "sa.component_mask");
        edit("sa_set_join", "rmpp.resp_time", 9.into(), "rmpp.resp_time");
        edit("sa_get_classportinfo", "class_port_info.trap_lid", 77.into(), "class_port_info.trap_lid");
        edit("cm_req", "cm.fields.local_comm_id", 0x1234_5678.into(), "cm.fields.local_comm_id");
        edit("cm_req", "cm.fields.primary_path.hop_limit", 9.into(), "cm.fields.primary_path.hop_limit");
        edit("cm_sidr_rep", "cm.fields.q_key", 5.into(), "cm.fields.q_key");
        edit("cm_rej_invalid_service_id", "cm.fields.reason", 28.into(), "cm.fields.reason");
        // Members that restate others: the edited one wins, the stale one follows.
        let back = edit("cm_req", "cm.cma_header.src_port", 4242.into(), "cm.cma_header");
        assert_eq!(at(&back, "cm.cma_header.src_port"), 4242);
        let back = edit("cm_req", "cm.port", 9999.into(), "cm.port");
        assert_eq!(at(&back, "cm.port"), 9999);
        let back = edit("sa_set_join", "mad.response", true.into(), "mad.response");
        assert_eq!(at(&back, "mad.method"), 0x82);
        let back = edit("cm_rtu", "cm.message", "DREP".into(), "cm.message");
        assert_eq!(at(&back, "mad.attribute_id"), 0x16);
    }

    #[test]
    fn a_payload_member_edit_keeps_the_bytes_it_does_not_describe() {
        // The payload's bytes past the record (a table's next records) stay.
        let mut mad = SaMad::parse(&line_payload(&sample("sa_getresp_join"))).unwrap();
        if let SaData::McMember { trailing, .. } = &mut mad.data {
            trailing[..4].copy_from_slice(&[1, 2, 3, 4]);
        }
        let f = gsi_frame(
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            0,
            &mad.to_bytes(),
        );
        let mut l = line(&f);
        set(&mut l, "mcmember.mlid", 0xc001.into());
        let e = encode(&l).unwrap();
        let m = SaMad::parse(&line_payload(&e.data)).unwrap();
        assert_eq!(m.data.as_mc_member().unwrap().mlid, 0xc001);
        assert!(matches!(m.data, SaData::McMember { trailing, .. } if trailing[..4] == [1, 2, 3, 4]));
    }

    fn line_payload(frame: &[u8]) -> Vec<u8> {
        let l = line(frame);
        let s = at(&l, "payload").as_str().unwrap();
        super::super::fields::hex_bytes(s, "payload").unwrap()
    }

    #[test]
    fn hostile_members_are_errors_naming_the_field() {
        let cases: [(&str, &str, Value, &str); 14] = [
            ("sa_set_join", "mad.tid", true.into(), "mad.tid: expected a number"),
            ("sa_set_join", "mad.tid", "0xzz".into(), "mad.tid"),
            ("sa_set_join", "mad.tid", (-1).into(), "mad.tid"),
            ("sa_set_join", "mad.status", 1.5.into(), "mad.status"),
            ("sa_set_join", "mcmember.mtu", 300.into(), "mcmember.mtu: 300 is out of range"),
            ("sa_set_join", "mcmember.mtu", 200.into(), "mcmember.mtu: 200 does not fit"),
            ("sa_set_join", "mcmember.mgid", "ff12::zz".into(), "mcmember.mgid"),
            ("sa_set_join", "mcmember.portgid", "fd00::1".into(), "mcmember.portgid: no such field"),
            ("sa_set_join", "mcmember", 7.into(), "mcmember: expected an object"),
            ("cm_req", "cm.fields", "x".into(), "cm.fields: expected an object"),
            ("cm_req", "cm.message", "HELLO".into(), "cm.message: unknown message"),
            ("cm_req", "cm.fields.private_data", "abc".into(), "cm.fields.private_data"),
            ("cm_req", "cm.fields.local_qpn", 0x100_0000.into(), "cm.fields.local_qpn"),
            ("sa_set_join", "mcmember.join_state", "full".into(), "mcmember.join_state: expected a number"),
        ];
        for (name, path, v, want) in cases {
            let mut l = line(&sample(name));
            set(&mut l, path, v);
            let e = encode(&l).map(|_| ()).unwrap_err();
            assert!(e.0.contains(want), "{path}: {e} (want {want:?})");
        }
        // A member and the one it restates, both moved off the payload's value, apart.
        let mut l = line(&sample("cm_req"));
        set(&mut l, "cm.port", 7000.into());
        set(&mut l, "cm.fields.service_id", "0x0000000001067001".into());
        let e = encode(&l).map(|_| ()).unwrap_err();
        assert!(e.0.starts_with("cm.port_space/cm.port") && e.0.contains("both differ from the payload"), "{e}");
        let mut l = stripped(line(&sample("sa_set_join")));
        set(&mut l, "mad_len", 1_000_000_000u64.into());
        assert!(encode(&l).map(|_| ()).unwrap_err().0.starts_with("mad_len"));
    }

    /// Every leaf of every MAD member of every sample MAD/CM line, with and without payload,
    /// replaced by each hostile value: an error naming that member, or a frame; never a panic.
    #[test]
    fn every_member_replaced_by_hostile_values_never_panics() {
        fn leaves(v: &Value, at: &str, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => m.iter().for_each(|(k, x)| leaves(x, &format!("{at}.{k}"), out)),
                _ => out.push(at.trim_start_matches('.').to_string()),
            }
        }
        let hostile: Vec<Value> = vec![
            Value::Bool(true),
            (-1).into(),
            1.5.into(),
            u64::MAX.into(),
            "0x".into(),
            "0xffffffffffffffffff".into(),
            "zz".into(),
            "::".into(),
            "1.2.3.4".into(),
            "a".repeat(600).into(),
            Value::Array(vec![1.into(); 9]),
            Value::Object(Map::new()),
        ];
        let (mut errors, mut frames) = (0, 0);
        for s in sample_frames() {
            let l = line(&s.bytes);
            if !l.contains_key("mad") || l.contains_key("raw") {
                continue;
            }
            let mut paths = Vec::new();
            for k in MAD_MEMBERS {
                if let Some(v) = l.get(k) {
                    leaves(v, k, &mut paths);
                }
            }
            for base in [l.clone(), stripped(l.clone())] {
                for p in &paths {
                    for h in &hostile {
                        let mut x = base.clone();
                        set(&mut x, p, h.clone());
                        match encode(&x) {
                            Ok(_) => frames += 1,
                            Err(e) => {
                                errors += 1;
                                let head = p.split('.').next().unwrap();
                                assert!(e.0.contains(head), "{}: {p} = {h}: {e}", s.name);
                            }
                        }
                    }
                }
            }
        }
        assert!(errors > 1000 && frames > 100, "{errors} errors, {frames} frames");
    }

    #[test]
    fn a_member_the_mad_does_not_hold_is_not_applied_and_said_so() {
        // `jq '.mcmember.port_gid = …'` over every line: the frames that are not SA MADs of
        // MCMemberRecords keep their bytes, each with a note.
        for (name, note) in [
            ("cm_req", "mcmember: not applied: the MAD is class 7"),
            ("sa_get_classportinfo", "mcmember: not applied: the MAD is class 3"),
            ("ud_multicast_data", "mcmember: not applied: not a UD frame of QP1"),
            ("arp_request", "mcmember: not applied: the frame is written from its `raw` bytes"),
        ] {
            let bytes = sample(name);
            let mut l = line(&bytes);
            set(&mut l, "mcmember.port_gid", "fd00::7".into());
            let e = encode(&l).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(e.data, bytes, "{name}");
            assert!(e.overrides.is_empty(), "{name}");
            assert!(e.notes.iter().any(|n| n.starts_with(note)), "{name}: {:?}", e.notes);
        }
        // Without a payload two bodies are ambiguous.
        let mut l = stripped(line(&sample("cm_req")));
        set(&mut l, "mcmember.port_gid", "fd00::7".into());
        assert!(encode(&l).map(|_| ()).unwrap_err().0.contains("a MAD holds one body"));
    }

    fn mad_header(class: MgmtClass, method: u8, tid: u64, attribute_id: u16) -> MadHeader {
        let mut h = MadHeader::parse_bytes(&[0; 24]).unwrap();
        h.base_version = 1;
        h.mgmt_class = class;
        h.class_version = 2;
        h.response = method & 0x80 != 0;
        h.method = Method::from(method & 0x7f);
        h.transaction_id = tid;
        h.attribute_id = attribute_id;
        h
    }

    fn frame(mad: &[u8]) -> Vec<u8> {
        gsi_frame(
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            7,
            mad,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

        /// Any MCMemberRecord, ClassPortInfo or ServiceRecord with any header, RMPP and SA
        /// header: repr → frame → JSON → without payload → the same frame.
        #[test]
        fn sa_reprs_build_from_their_json(
            which in 0usize..3,
            bytes in proptest::collection::vec(any::<u8>(), 256),
            method in any::<u8>(),
            tid in any::<u64>(),
            rmpp_type in 0u8..6,
            flags in 0u8..8,
        ) {
            let attribute = [sa::attr::MC_MEMBER_RECORD, sa::attr::CLASS_PORT_INFO, sa::attr::SERVICE_RECORD][which];
            let mut m = SaMad::parse(&bytes).unwrap();
            m.header = mad_header(MgmtClass::SubnAdm, method, tid, attribute);
            m.rmpp.rmpp_type = RmppType::from(rmpp_type);
            m.rmpp.flags = RmppFlags(flags);
            m.rmpp.resp_time &= 0x1f;
            let area: [u8; sa::SA_DATA_LEN] = bytes[SA_DATA_OFFSET..].try_into().unwrap();
            // What the decoder shows: one record at data byte 0, unless the segment holds
            // none (a later DATA segment, ACK, STOP, ABORT); the rest of the area is zeros.
            let continuation = (rmpp_type == 1 && flags & 1 != 0 && m.rmpp.data1 > 1) || (2..=4).contains(&rmpp_type);
            m.data = match SaData::decode(attribute, &area) {
                _ if continuation => SaData::zeroed(),
                SaData::McMember { record, .. } => SaData::mc_member(record),
                SaData::ClassPortInfo { info, .. } => SaData::class_port_info(info),
                SaData::Service { record, .. } => SaData::service(record),
                raw => raw,
            };
            rebuilds_without_payload(&frame(&m.to_bytes()))?;
        }

        /// Any body of every CM message (REQ, REP, RTU, REJ, MRA, DREQ, DREP, SIDR_REQ,
        /// SIDR_REP), with and without an RDMA-CM header in REQ / SIDR_REQ private data.
        #[test]
        fn cm_reprs_build_from_their_json(
            which in 0usize..9,
            bytes in proptest::collection::vec(any::<u8>(), cm::DATA_LEN),
            tid in any::<u64>(),
            cma in any::<bool>(),
            v6 in any::<bool>(),
        ) {
            use cm::attr::*;
            let attribute = [REQ, REP, RTU, REJ, MRA, DREQ, DREP, SIDR_REQ, SIDR_REP][which];
            let mut msg = CmMessage::parse(attribute, &bytes).unwrap();
            if cma {
                let h = if v6 {
                    cma_hdr::Repr::new_v6("fd00::1".parse().unwrap(), tid as u16, "fd00::2".parse().unwrap())
                } else {
                    cma_hdr::Repr::new_v4(Ipv4Addr::new(10, 0, 0, 1), tid as u16, Ipv4Addr::new(10, 0, 0, 2))
                };
                let pd = match &mut msg {
                    CmMessage::Req(r) => Some(&mut r.private_data[..]),
                    CmMessage::SidrReq(r) => Some(&mut r.private_data[..]),
                    _ => None,
                };
                if let Some(pd) = pd {
                    h.emit(&mut cma_hdr::Packet::new_unchecked(&mut pd[..cma_hdr::Repr::LEN]));
                }
            }
            let mut mad = [0u8; MAD_SIZE];
            mad_header(MgmtClass::ComMgmt, cm::METHOD_SEND, tid, attribute).emit_bytes(&mut mad);
            msg.emit(&mut mad[MAD_HEADER_LEN..]);
            rebuilds_without_payload(&frame(&mad))?;
        }
    }
}
