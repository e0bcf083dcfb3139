//! MAD rendering for `roce decode`: the common header, then the SA (MCMemberRecord,
//! ClassPortInfo) or CM message, with every field in JSON and the essentials in the summary.

use std::fmt::Write as _;

use roce_wire::cm::{self, CmMessage};
use roce_wire::mad::{MadHeader, MgmtClass, MAD_HEADER_LEN};
use roce_wire::mcmember::{ComponentMask, McMemberRecord};
use roce_wire::sa::{SaData, SaMad};
use roce_wire::{Error, MAD_SIZE};
use serde_json::{json, Map, Value};

fn err(e: Error, at: usize) -> Value {
    let e = e.add_offset(at);
    json!({"layer": e.layer().name(), "offset": e.offset(), "reason": e.reason(), "message": e.to_string()})
}

/// Describe the MAD in `payload`, which starts at frame offset `at`.
pub fn describe(payload: &[u8], at: usize, j: &mut Map<String, Value>) -> String {
    let header = match MadHeader::parse_bytes(payload) {
        Ok(h) => h,
        Err(e) => {
            j.insert("mad_error".into(), err(e, at));
            return format!("MAD malformed: {}", e.add_offset(at));
        }
    };
    let method = header.method_name();
    let attr = header.attribute_name();
    j.insert(
        "mad".into(),
        json!({
            "base_version": header.base_version,
            "mgmt_class": u8::from(header.mgmt_class),
            "class_name": header.mgmt_class.name(),
            "class_version": header.class_version,
            "response": header.response,
            "method": u8::from(header.method) | if header.response { 0x80 } else { 0 },
            "method_name": method,
            "status": header.status.0,
            "status_text": header.status.description(),
            "class_specific": header.class_specific,
            "tid": header.transaction_id,
            "attribute_id": header.attribute_id,
            "attribute_name": attr,
            "reserved": header.reserved,
            "attribute_modifier": header.attribute_modifier,
        }),
    );
    let mut s = format!("{method}({attr}) TID=0x{:016x}", header.transaction_id);
    if header.status.0 != 0 || header.response {
        let _ = write!(s, " status={}", header.status);
    }
    if payload.len() != MAD_SIZE {
        // rxe's GSI QP posts 256-byte buffers: a longer MAD is dropped, a shorter one is not a MAD.
        j.insert("mad_len".into(), payload.len().into());
        let _ = write!(s, " [MAD is {} bytes, not {MAD_SIZE}]", payload.len());
        if payload.len() < MAD_SIZE {
            j.insert("mad_error".into(), err(Error::len(roce_wire::Layer::Mad, 0, MAD_SIZE, payload.len()), at));
            return s;
        }
    }
    match header.mgmt_class {
        MgmtClass::SubnAdm => describe_sa(payload, at, j, &mut s),
        MgmtClass::ComMgmt => describe_cm(&header, payload, at, j, &mut s),
        _ => {}
    }
    s
}

fn describe_sa(payload: &[u8], at: usize, j: &mut Map<String, Value>, s: &mut String) {
    let sa = match SaMad::parse(payload) {
        Ok(sa) => sa,
        Err(e) => {
            j.insert("sa_error".into(), err(e, at));
            let _ = write!(s, " SA malformed: {}", e.add_offset(at));
            return;
        }
    };
    j.insert("rmpp".into(), serde_json::to_value(sa.rmpp).unwrap_or(Value::Null));
    let mask = ComponentMask(sa.sa.component_mask);
    j.insert(
        "sa".into(),
        json!({
            "sm_key": sa.sa.sm_key,
            "attribute_offset": sa.sa.attribute_offset,
            "reserved": sa.sa.reserved,
            "component_mask": sa.sa.component_mask,
            "component_mask_names": mask.to_string(),
        }),
    );
    let _ = write!(s, " SA mask=0x{:x}({mask})", sa.sa.component_mask);
    match &sa.data {
        SaData::McMember { record, .. } => {
            j.insert("mcmember".into(), mcmember_json(record));
            let _ = write!(s, " MGID={} PortGID={} JoinState={}", record.mgid, record.port_gid, record.join_state);
            if record.mlid != 0 {
                let _ = write!(s, " MLID=0x{:04x}", record.mlid);
            }
            if record.q_key != 0 {
                let _ = write!(s, " Q_Key=0x{:08x}", record.q_key);
            }
        }
        SaData::ClassPortInfo { info, .. } => {
            j.insert("class_port_info".into(), serde_json::to_value(info).unwrap_or(Value::Null));
            let _ = write!(s, " CapMask=0x{:04x} CapMask2=0x{:07x}", info.capability_mask, info.capability_mask2());
        }
        SaData::Raw(_) => {}
    }
}

fn mcmember_json(r: &McMemberRecord) -> Value {
    let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        m.insert("join_state_names".into(), r.join_state.to_string().into());
    }
    v
}

fn describe_cm(header: &MadHeader, payload: &[u8], at: usize, j: &mut Map<String, Value>, s: &mut String) {
    let msg = match CmMessage::parse(header.attribute_id, &payload[MAD_HEADER_LEN..MAD_SIZE]) {
        Ok(m) => m,
        Err(e) => {
            j.insert("cm_error".into(), err(e, at));
            let _ = write!(s, " CM malformed: {}", e.add_offset(at));
            return;
        }
    };
    let mut body = serde_json::to_value(msg).unwrap_or(Value::Null);
    // serde names the enum variant; flatten to the message's own fields plus its name.
    if let Value::Object(m) = &mut body {
        if let Some((_, inner)) = m.iter().next() {
            body = inner.clone();
        }
    }
    let mut cmj = Map::new();
    cmj.insert("message".into(), msg.name().into());
    cmj.insert("fields".into(), body);
    let _ = write!(s, " CM {}", msg.name());
    if let Some(id) = msg.local_comm_id() {
        let _ = write!(s, " LocalCommID=0x{id:08x}");
    }
    if let Some(id) = msg.remote_comm_id() {
        let _ = write!(s, " RemoteCommID=0x{id:08x}");
    }
    match &msg {
        CmMessage::Req(r) => {
            let _ = write!(s, " ServiceID=0x{:016x} QPN=0x{:06x}", r.service_id, r.local_qpn);
            if let Ok(h) = r.cma_header() {
                cmj.insert(
                    "cma_header".into(),
                    json!({"src": h.src_ip().to_string(), "dst": h.dst_ip().to_string(), "src_port": h.src_port}),
                );
                let _ = write!(s, " {}:{} → {}", h.src_ip(), h.src_port, h.dst_ip());
            }
        }
        CmMessage::Rep(r) => {
            let _ = write!(s, " QPN=0x{:06x}", r.local_qpn);
        }
        CmMessage::Rej(r) => {
            let _ = write!(s, " Reason={} ({:?})", u16::from(r.reason), r.reason);
        }
        CmMessage::SidrReq(r) => {
            let _ = write!(s, " RequestID=0x{:08x} ServiceID=0x{:016x}", r.request_id, r.service_id);
            if let Ok(h) = r.cma_header() {
                cmj.insert(
                    "cma_header".into(),
                    json!({"src": h.src_ip().to_string(), "dst": h.dst_ip().to_string(), "src_port": h.src_port}),
                );
            }
        }
        CmMessage::SidrRep(r) => {
            let _ = write!(
                s,
                " RequestID=0x{:08x} Status={} QPN=0x{:06x} Q_Key=0x{:08x}",
                r.request_id,
                u8::from(r.status),
                r.qpn,
                r.qkey
            );
        }
        _ => {}
    }
    if let Some(ps) = service_port_space(&msg) {
        cmj.insert("port_space".into(), ps.0.into());
        cmj.insert("port".into(), ps.1.into());
    }
    j.insert("cm".into(), Value::Object(cmj));
}

fn service_port_space(msg: &CmMessage) -> Option<(u16, u16)> {
    let sid = match msg {
        CmMessage::Req(r) => r.service_id,
        CmMessage::SidrReq(r) => r.service_id,
        CmMessage::SidrRep(r) => r.service_id,
        _ => return None,
    };
    cm::cma_hdr::is_ip_service_id(sid).then(|| cm::cma_hdr::split_service_id(sid))
}
