//! Native InfiniBand frames for `roce decode`: `LINKTYPE_INFINIBAND` (247) packets, LRH
//! first, and ERF records (`LINKTYPE_ERF`, 197) of InfiniBand type as ibdump writes them.
//!
//! The JSON's `kind` is `"infiniband"`: `erf` (for link type 197), `lrh`, `grh`, the BTH as
//! for RoCEv2 (top-level `opcode`/`dest_qp`/`psn`/`p_key` and `bth`), the extension headers,
//! the MAD (QP0 and QP1: SMPs under `smp`, SA and CM as for RoCEv2), `payload`, `pad`, the
//! ICRC and VCRC verdicts, `trailer`. A packet that stops parsing gives its error and `raw`.

use std::net::Ipv6Addr;

use roce_wire::erf::{self, RecordType};
use roce_wire::ib_frame::{self, IbBody, IbFrame};
use roce_wire::{grh, lrh, Error};

use super::{bth_json, bth_summary, bth_top_json, crc_json, error_json, ext_json, mad, Crc, Decoder};
use crate::json_out::{push_fmt, Json};

macro_rules! sum {
    ($s:expr, $($arg:tt)*) => { push_fmt($s, format_args!($($arg)*)) };
}

/// A `LINKTYPE_INFINIBAND` frame: the IB packet is the whole of `data`.
pub(super) fn describe(d: &mut Decoder, data: &[u8]) {
    packet(d, data);
}

/// A `LINKTYPE_ERF` frame: the record header, then its frame (an IB packet for type 21);
/// `record_len`: the capture record's length on the wire (`data` is what it holds).
pub(super) fn describe_erf(d: &mut Decoder, data: &[u8], record_len: u32) {
    let rec = match erf::parse_record(data) {
        Ok(r) => r,
        Err(e) => {
            d.json.str("kind", "other");
            error_json(&mut d.json, "error", &e);
            d.json.hex("raw", data);
            sum!(&mut d.summary, "ERF record malformed: {e}");
            return;
        }
    };
    erf_json(&mut d.json, &rec, record_len, data.len());
    let h = rec.header;
    if h.record_type == RecordType::Infiniband {
        if h.interface() != 0 {
            sum!(&mut d.summary, "[if {}] ", h.interface());
        }
        packet(d, rec.frame);
        return;
    }
    d.json.str("kind", "other");
    d.json.hex("raw", rec.frame);
    let t = u8::from(h.record_type);
    sum!(&mut d.summary, "ERF record type {t}, {} bytes (not dissected)", rec.frame.len());
}

/// The record header, and the capture record's own sizes (`record_len` on the wire,
/// `record_cap_len` captured): the top-level `len` and `cap_len` are the frame's.
fn erf_json(j: &mut Json, rec: &erf::Record<'_>, record_len: u32, record_cap_len: usize) {
    let h = &rec.header;
    let (secs, nanos) = h.seconds_nanos();
    j.begin("erf");
    j.id64("timestamp", h.timestamp);
    j.display("time", format_args!("{secs}.{nanos:09}"));
    j.num("type", u32::from(u8::from(h.record_type)));
    j.bool("extension", h.extension);
    j.num("flags", u32::from(h.flags));
    j.num("interface", u32::from(h.interface()));
    j.bool("truncated", h.truncated());
    j.bool("rx_error", h.rx_error());
    j.num("rlen", u32::from(h.rlen));
    j.num("lctr", u32::from(h.lctr));
    j.num("wlen", u32::from(h.wlen));
    if !rec.extensions.is_empty() {
        j.hex("extensions", rec.extensions);
    }
    if !rec.padding.is_empty() {
        j.hex("padding", rec.padding);
    }
    if !rec.after.is_empty() {
        j.hex("after_record", rec.after);
    }
    j.num("record_len", record_len);
    j.count("record_cap_len", record_cap_len as u64);
    j.end();
}

/// One IB packet from its LRH.
fn packet(d: &mut Decoder, data: &[u8]) {
    d.json.str("kind", "infiniband");
    match ib_frame::parse(data) {
        Ok(f) => whole(d, data, &f),
        Err(e) => partial(d, data, e),
    }
}

fn lrh_json(j: &mut Json, l: &lrh::Repr) {
    j.begin("lrh");
    j.num("vl", u32::from(l.vl));
    j.num("lver", u32::from(l.lver));
    j.num("sl", u32::from(l.sl));
    j.num("reserved2", u32::from(l.reserved2));
    j.num("lnh", u32::from(u8::from(l.lnh)));
    j.str("lnh_name", l.lnh.name());
    j.num("dlid", u32::from(l.dlid));
    j.num("reserved5", u32::from(l.reserved5));
    j.num("pkt_len", u32::from(l.pkt_len));
    j.num("slid", u32::from(l.slid));
    j.end();
}

fn grh_json(j: &mut Json, g: &grh::Repr) {
    j.begin("grh");
    j.num("ip_version", u32::from(g.ip_version));
    j.num("traffic_class", u32::from(g.traffic_class));
    j.num("flow_label", g.flow_label);
    j.num("pay_len", u32::from(g.pay_len));
    j.num("next_header", u32::from(g.next_header));
    j.num("hop_limit", u32::from(g.hop_limit));
    j.display("sgid", Ipv6Addr::from(g.sgid));
    j.display("dgid", Ipv6Addr::from(g.dgid));
    j.end();
}

/// The layers that parsed before `e`, the error, and the bytes.
fn partial(d: &mut Decoder, data: &[u8], e: Error) {
    let j = &mut d.json;
    if let Ok(l) = lrh::Repr::parse_bytes(data) {
        lrh_json(j, &l);
        sum!(&mut d.summary, "LID {} → LID {} ", l.slid, l.dlid);
        let mut at = lrh::LEN;
        if l.lnh == lrh::Lnh::IbaGlobal {
            if let Ok(g) = grh::Repr::parse_bytes(&data[at..]) {
                grh_json(j, &g);
            }
            at += grh::LEN;
        }
        if l.lnh.is_iba() {
            if let Ok(b) = roce_wire::bth::Repr::parse_bytes(data.get(at..).unwrap_or(&[])) {
                bth_json(j, &b);
            }
        }
    }
    error_json(j, "error", &e);
    j.hex("raw", data);
    sum!(&mut d.summary, "InfiniBand malformed: {e}");
}

fn whole(d: &mut Decoder, data: &[u8], f: &IbFrame<'_>) {
    let j = &mut d.json;
    let s = &mut d.summary;
    lrh_json(j, &f.lrh);
    if let Some(g) = &f.grh {
        grh_json(j, g);
        s.ipv6(g.sgid);
        s.push_str(" → ");
        s.ipv6(g.dgid);
        s.push(' ');
    }
    sum!(s, "LID {} → LID {} VL={} SL={}", f.lrh.slid, f.lrh.dlid, f.lrh.vl, f.lrh.sl);
    match &f.body {
        IbBody::Raw(bytes) => {
            j.hex("raw_payload", bytes);
            sum!(s, " IB {} packet, {} bytes", f.lrh.lnh.name(), bytes.len());
        }
        IbBody::Transport(t) => {
            let b = &t.bth;
            bth_top_json(j, b);
            s.push_str(" IB ");
            bth_summary(s, b);
            ext_json(j, s, &t.ext);
            j.count("payload_len", t.payload.len() as u64);
            // QP0 (SMI) and QP1 (GSI) carry MADs.
            let management = |qp: u32| qp <= 1;
            let is_mad = t.ext.deth.is_some_and(|x| management(x.src_qp)) || management(b.dest_qp);
            if is_mad && t.ext.deth.is_some() {
                mad::describe(j, s, t.payload, f.offsets.payload, &mut d.rmpp, endpoints(f));
            } else {
                sum!(s, " PayLen={}", t.payload.len());
            }
            j.hex("payload", t.payload);
            j.hex("pad", t.pad);
            crc_json(j, s, Crc::Icrc, t.icrc, t.icrc_expected);
        }
    }
    crc_json(j, s, Crc::Vcrc, u32::from(f.vcrc), u32::from(f.vcrc_expected));
    if !f.trailer.is_empty() {
        j.hex("trailer", f.trailer);
    }
    // What the receiving port drops the packet for (as `error` says for RoCEv2 what rxe refuses).
    if let Some(e) = f.crc_error() {
        error_json(j, "error", &e);
    }
    // A raw packet's fields are its bytes; a transport packet's fields give every byte back.
    if matches!(f.body, IbBody::Raw(_)) {
        j.hex("raw", data);
    }
}

/// The (source, destination) pair that keys RMPP tables: the GIDs when there is a GRH, else
/// the LIDs in the last two bytes of an otherwise zero key (a local packet has no GID).
fn endpoints(f: &IbFrame<'_>) -> ([u8; 16], [u8; 16]) {
    match &f.grh {
        Some(g) => (g.sgid, g.dgid),
        None => {
            let key = |lid: u16| {
                let mut k = [0u8; 16];
                k[14..].copy_from_slice(&lid.to_be_bytes());
                k
            };
            (key(f.lrh.slid), key(f.lrh.dlid))
        }
    }
}
