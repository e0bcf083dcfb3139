//! MAD rendering for `roce decode`: the common header, then the SA (MCMemberRecord,
//! ClassPortInfo, ServiceRecord) or CM message, with every field in JSON and the essentials in the summary.

use roce_wire::cm::{self, CmMessage};
use roce_wire::mad::{MadHeader, MgmtClass, MAD_HEADER_LEN};
use roce_wire::mcmember::{ComponentMask, McMemberRecord};
use roce_wire::sa::{SaData, SaMad, SA_DATA_OFFSET};
use roce_wire::service_record::{self, ServiceRecord};
use roce_wire::smp;
use roce_wire::{Error, MAD_SIZE};

use super::error_json;
pub(crate) mod rmpp;
use crate::json_out::{push_fmt, Json, Summary};
use rmpp::{rmpp_role, Endpoints, Reassembly, Role};

macro_rules! sum {
    ($s:expr, $($arg:tt)*) => { push_fmt($s, format_args!($($arg)*)) };
}

fn err(j: &mut Json, key: &'static str, e: Error, at: usize) {
    error_json(j, key, &e.add_offset(at));
}

/// Describe the MAD in `payload`, which starts at frame offset `at`.
///
/// `rmpp` keeps the segments of RMPP tables across frames; `key` is the frame's (source,
/// destination) address pair, the first half of a table's key.
pub(crate) fn describe(
    j: &mut Json,
    s: &mut Summary,
    payload: &[u8],
    at: usize,
    rmpp: &mut Reassembly,
    key: Endpoints,
) {
    s.push_str(" | ");
    let header = match MadHeader::parse_bytes(payload) {
        Ok(h) => h,
        Err(e) => {
            err(j, "mad_error", e, at);
            sum!(s, "MAD malformed: {}", e.add_offset(at));
            return;
        }
    };
    let method = header.method_name();
    let attr = header.attribute_name();
    j.begin("mad");
    j.num("base_version", u32::from(header.base_version));
    j.num("mgmt_class", u32::from(u8::from(header.mgmt_class)));
    j.str("class_name", header.mgmt_class.name());
    j.num("class_version", u32::from(header.class_version));
    j.bool("response", header.response);
    j.num("method", u32::from(u8::from(header.method) | if header.response { 0x80 } else { 0 }));
    j.str("method_name", method);
    j.num("status", u32::from(header.status.0));
    j.str("status_text", header.status.description());
    j.num("class_specific", u32::from(header.class_specific));
    j.id64("tid", header.transaction_id);
    j.num("attribute_id", u32::from(header.attribute_id));
    j.str("attribute_name", attr);
    j.num("reserved", u32::from(header.reserved));
    j.num("attribute_modifier", header.attribute_modifier);
    j.end();
    s.push_str(method);
    s.push('(');
    s.push_str(attr);
    s.push_str(") TID=0x");
    s.hex(header.transaction_id, 16);
    if header.status.0 != 0 || header.response {
        sum!(s, " status={}", header.status);
    }
    if payload.len() != MAD_SIZE {
        // rxe's GSI QP posts 256-byte buffers: a longer MAD is dropped, a shorter one is not a MAD.
        j.count("mad_len", payload.len() as u64);
        sum!(s, " [MAD is {} bytes, not {MAD_SIZE}]", payload.len());
        if payload.len() < MAD_SIZE {
            err(j, "mad_error", Error::len(roce_wire::Layer::Mad, 0, MAD_SIZE, payload.len()), at);
            return;
        }
    }
    match header.mgmt_class {
        MgmtClass::SubnAdm => describe_sa(j, s, payload, at, rmpp, key),
        MgmtClass::ComMgmt => describe_cm(j, s, &header, payload, at),
        MgmtClass::SubnLid | MgmtClass::SubnDirected => describe_smp(j, s, &header, payload),
        _ => {}
    }
}

/// A subnet management packet: M_Key, the attribute's 64 bytes, and for a directed-route
/// SMP the D bit, hop pointer and count, DR LIDs and the two paths [roce_wire::smp].
fn describe_smp(j: &mut Json, s: &mut Summary, header: &MadHeader, payload: &[u8]) {
    // The caller checked the length: a short MAD returned with its error before here.
    let attribute = smp::Attribute::from(header.attribute_id);
    j.begin("smp");
    j.str("attribute_name", attribute.name());
    let data = match header.mgmt_class {
        MgmtClass::SubnDirected => {
            let Ok(r) = smp::directed::Repr::parse_bytes(payload) else { return j.end() };
            let dr = smp::DirectedHeader::from_header(header.status.0, header.class_specific);
            j.str("routing", "directed");
            j.bool("direction", dr.direction);
            j.num("status", u32::from(dr.status));
            j.num("hop_pointer", u32::from(dr.hop_pointer));
            j.num("hop_count", u32::from(dr.hop_count));
            j.id64("m_key", r.m_key);
            j.num("dr_slid", u32::from(r.dr_slid));
            j.num("dr_dlid", u32::from(r.dr_dlid));
            j.hex("data", &r.data);
            j.hex("initial_path", &r.initial_path);
            j.hex("return_path", &r.return_path);
            sum!(
                s,
                " DR hop {}/{} path {:?}{}",
                dr.hop_pointer,
                dr.hop_count,
                r.initial_hops(dr.hop_count),
                if dr.direction { " (returning)" } else { "" }
            );
            r.data
        }
        _ => {
            let Ok(r) = smp::lid_routed::Repr::parse_bytes(payload) else { return j.end() };
            j.str("routing", "lid");
            j.id64("m_key", r.m_key);
            j.hex("data", &r.data);
            r.data
        }
    };
    if attribute == smp::Attribute::NodeInfo && header.response {
        if let Ok(n) = smp::node_info::Repr::parse_bytes(&data) {
            j.serde("node_info", &n);
            let kind = smp::node_info::node_type_name(n.node_type);
            sum!(s, " {kind} ports={} NodeGUID=0x{:016x}", n.num_ports, n.node_guid);
        }
    }
    if attribute == smp::Attribute::NodeDescription && header.response {
        let text = smp::node_description_text(&data);
        j.str("node_description", &text);
        // The summary is one line: control characters of the free text become dots.
        let shown: String = text.chars().map(|c| if c.is_control() { '.' } else { c }).collect();
        sum!(s, " \"{shown}\"");
    }
    j.end();
}

fn describe_sa(j: &mut Json, s: &mut Summary, payload: &[u8], at: usize, rmpp: &mut Reassembly, key: Endpoints) {
    let sa = match SaMad::parse(payload) {
        Ok(sa) => sa,
        Err(e) => {
            err(j, "sa_error", e, at);
            sum!(s, " SA malformed: {}", e.add_offset(at));
            return;
        }
    };
    j.serde("rmpp", &sa.rmpp);
    // The mask's bits name fields of the record the attribute names.
    let mask_names = match sa.data {
        SaData::Service { .. } => format!("{}", service_record::ComponentMask(sa.sa.component_mask)),
        _ => format!("{}", ComponentMask(sa.sa.component_mask)),
    };
    j.begin("sa");
    j.id64("sm_key", sa.sa.sm_key);
    j.num("attribute_offset", u32::from(sa.sa.attribute_offset));
    j.num("reserved", u32::from(sa.sa.reserved));
    j.id64("component_mask", sa.sa.component_mask);
    j.str("component_mask_names", &mask_names);
    j.end();
    sum!(s, " SA mask=0x{:x}({mask_names})", sa.sa.component_mask);
    let seg = rmpp_role(&sa);
    match seg {
        Role::Continuation | Role::Control => {
            // Segments 2..n carry the table's continuation, ACK/STOP/ABORT no data: no record
            // starts at byte 56 of these (tshark 4.0 decodes one anyway).
            rmpp.describe_segment(j, s, key, &sa, &payload[SA_DATA_OFFSET..], seg);
            return;
        }
        Role::First | Role::None => {}
    }
    match &sa.data {
        SaData::McMember { record, .. } => {
            mcmember_json(j, "mcmember", record);
            mcmember_summary(s, record);
        }
        SaData::ClassPortInfo { info, .. } => {
            j.serde("class_port_info", info);
            sum!(s, " CapMask=0x{:04x} CapMask2=0x{:07x}", info.capability_mask, info.capability_mask2());
        }
        SaData::Service { record, .. } => {
            service_json(j, "service_record", record);
            service_summary(s, record);
        }
        SaData::Raw(_) => {}
    }
    if seg == Role::First {
        rmpp.describe_segment(j, s, key, &sa, &payload[SA_DATA_OFFSET..], seg);
    }
}

fn mcmember_json(j: &mut Json, k: &'static str, record: &McMemberRecord) {
    j.serde_open(k, record);
    // The names of the JoinState bits, beside the number.
    j.display("join_state_names", record.join_state);
    j.end();
}

fn mcmember_summary(s: &mut Summary, record: &McMemberRecord) {
    s.push_str(" MGID=");
    s.ipv6(record.mgid.0);
    s.push_str(" PortGID=");
    s.ipv6(record.port_gid.0);
    sum!(s, " JoinState={}", record.join_state);
    if record.mlid != 0 {
        sum!(s, " MLID=0x{:04x}", record.mlid);
    }
    if record.q_key != 0 {
        sum!(s, " Q_Key=0x{:08x}", record.q_key);
    }
}

fn service_json(j: &mut Json, k: &'static str, record: &ServiceRecord) {
    j.serde_open(k, record);
    // The name as text beside its 64 bytes.
    j.str("service_name_text", &String::from_utf8_lossy(record.name_bytes()));
    j.end();
}

fn service_summary(s: &mut Summary, record: &ServiceRecord) {
    let name = String::from_utf8_lossy(record.name_bytes());
    sum!(s, " ServiceID=0x{:016x} ServiceGID=", record.service_id);
    s.ipv6(record.service_gid.0);
    sum!(s, " ServiceName={name:?}");
    if record.service_lease != 0 {
        sum!(s, " Lease={}", record.service_lease);
    }
}

fn describe_cm(j: &mut Json, s: &mut Summary, header: &MadHeader, payload: &[u8], at: usize) {
    let msg = match CmMessage::parse(header.attribute_id, &payload[MAD_HEADER_LEN..MAD_SIZE]) {
        Ok(m) => m,
        Err(e) => {
            err(j, "cm_error", e, at);
            sum!(s, " CM malformed: {}", e.add_offset(at));
            return;
        }
    };
    j.begin("cm");
    j.str("message", msg.name());
    // serde writes the enum as {"Req":{…}}: keep the message's own fields only.
    j.serde_variant("fields", &msg);
    sum!(s, " CM {}", msg.name());
    if let Some(id) = msg.local_comm_id() {
        sum!(s, " LocalCommID=0x{id:08x}");
    }
    if let Some(id) = msg.remote_comm_id() {
        sum!(s, " RemoteCommID=0x{id:08x}");
    }
    let cma = |j: &mut Json, h: &cm::cma_hdr::Repr| {
        j.begin("cma_header");
        j.display("src", h.src_ip());
        j.display("dst", h.dst_ip());
        j.num("src_port", u32::from(h.src_port));
        j.end();
    };
    match &msg {
        CmMessage::Req(r) => {
            sum!(s, " ServiceID=0x{:016x} QPN=0x{:06x}", r.service_id, r.local_qpn);
            if r.transport_service_type == cm::req::transport::EXTENDED
                && r.extended_transport_type == cm::req::transport::EXT_XRC
            {
                sum!(s, " XRC");
            }
            if let Ok(h) = r.cma_header() {
                cma(j, &h);
                sum!(s, " {}:{} → {}", h.src_ip(), h.src_port, h.dst_ip());
            }
        }
        CmMessage::Rep(r) => {
            sum!(s, " QPN=0x{:06x}", r.local_qpn);
            // An XRC target's REP names its QP in the EE context field (cm.c cm_format_rep).
            if r.local_eecn != 0 {
                sum!(s, " EECN=0x{:06x}", r.local_eecn);
            }
        }
        CmMessage::Rej(r) => sum!(s, " Reason={} ({:?})", u16::from(r.reason), r.reason),
        CmMessage::SidrReq(r) => {
            sum!(s, " RequestID=0x{:08x} ServiceID=0x{:016x}", r.request_id, r.service_id);
            if let Ok(h) = r.cma_header() {
                cma(j, &h);
            }
        }
        CmMessage::SidrRep(r) => sum!(
            s,
            " RequestID=0x{:08x} Status={} QPN=0x{:06x} Q_Key=0x{:08x}",
            r.request_id,
            u8::from(r.status),
            r.qpn,
            r.qkey
        ),
        _ => {}
    }
    if let Some((space, port)) = service_port_space(&msg) {
        j.num("port_space", u32::from(space));
        j.num("port", u32::from(port));
    }
    j.end();
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
