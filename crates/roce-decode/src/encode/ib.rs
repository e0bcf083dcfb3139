//! Native InfiniBand lines back into frames: link type 247 (the IB packet) and 197 (an ERF
//! record around it). A whole `"infiniband"` packet is built from its fields (LRH, GRH, BTH,
//! extension headers, MAD members or payload, pad, ICRC, VCRC, trailer) with PktLen, LNH and
//! PayLen computed, and the CRCs computed when the line says they were right (`"ok"`) and kept
//! as given when it says they were wrong; any other frame is its `raw` bytes. The ERF header
//! comes from `erf` (RLen and WLen computed when they agreed with the frame, kept otherwise).

use std::net::Ipv6Addr;

use roce_wire::ib_frame::IbFrameRepr;
use roce_wire::{erf, grh, lrh};
use serde_json::Value;

use super::restate::Views;
use super::{bounded, bth_of, err, ext_of, flag, get, hex, mad, num, payload_of, EncodeError, MadReport};

/// The IB packet of a line (LRH first) and how long the line says it was (for ERF's WLen);
/// `views` settles the members that restate others.
pub(super) fn frame(v: &Value, views: &mut Views) -> Result<(Vec<u8>, usize, MadReport), EncodeError> {
    let kind = get(v, &["kind"]).and_then(Value::as_str).unwrap_or("");
    let whole = kind == "infiniband" && get(v, &["bth"]).is_some() && get(v, &["raw"]).is_none();
    if !whole {
        let mut notes = Vec::new();
        if let Some(k) = mad::MAD_MEMBERS.iter().find(|k| get(v, &[k]).is_some_and(|m| !m.is_null())) {
            notes.push(format!("{k}: not applied: the frame is written from its `raw` bytes"));
        }
        return match hex(v, &["raw"])? {
            Some(r) => Ok((r.clone(), r.len(), (Vec::new(), notes))),
            None => err(format!("a frame of kind {kind:?} needs `raw` (or the InfiniBand fields)")),
        };
    }
    let lrh = lrh::Repr {
        vl: bounded(v, &["lrh", "vl"], 0)?,
        lver: bounded(v, &["lrh", "lver"], 0)?,
        sl: bounded(v, &["lrh", "sl"], 0)?,
        reserved2: bounded(v, &["lrh", "reserved2"], 0)?,
        dlid: bounded(v, &["lrh", "dlid"], 0)?,
        reserved5: bounded(v, &["lrh", "reserved5"], 0)?,
        slid: bounded(v, &["lrh", "slid"], 0)?,
        ..lrh::Repr::default()
    };
    let gid = |k: &str| -> Result<[u8; 16], EncodeError> {
        match get(v, &["grh", k]).and_then(Value::as_str) {
            None => Ok([0; 16]),
            Some(s) => s.parse::<Ipv6Addr>().map(|a| a.octets()).map_err(|e| EncodeError(format!("grh.{k}: {e}"))),
        }
    };
    let grh = match get(v, &["grh"]) {
        Some(g) if g.is_object() => Some(grh::Repr {
            ip_version: bounded(v, &["grh", "ip_version"], 6)?,
            traffic_class: bounded(v, &["grh", "traffic_class"], 0)?,
            flow_label: bounded(v, &["grh", "flow_label"], 0)?,
            pay_len: 0,
            next_header: bounded(v, &["grh", "next_header"], grh::NEXT_HEADER_IBA)?,
            hop_limit: bounded(v, &["grh", "hop_limit"], 64)?,
            sgid: gid("sgid")?,
            dgid: gid("dgid")?,
        }),
        _ => None,
    };
    let b = bth_of(v, views)?;
    let ext = ext_of(v, b.opcode)?;
    let (built, payload, mut notes) = payload_of(v, &b, &ext, 0, views)?;
    let pad = match hex(v, &["pad"])? {
        Some(p) if p.len() > 3 => return err("pad: more than 3 bytes"),
        Some(p) => p,
        None => vec![0; (4 - payload.len() % 4) % 4],
    };
    let mut r = IbFrameRepr { lrh, grh, bth: b, ext, payload: &payload, pad: &pad, icrc: None, vcrc: None };
    r.fill();
    // PayLen as given when the line said it disagreed with the packet's own lengths.
    if let (Some(g), Some(given), Some(pl)) = (&mut r.grh, num(v, &["grh", "pay_len"])?, num(v, &["payload_len"])?) {
        let stated = 12 + r.ext.buffer_len() as u64 + pl + pad.len() as u64 + 4;
        if given != stated {
            g.pay_len = given as u16;
        }
    }
    let bad = |k: &str| get(v, &[k]).and_then(Value::as_str) == Some("bad");
    if bad("icrc") {
        r.icrc = num(v, &["icrc_value"])?.map(|c| c as u32);
    }
    if bad("vcrc") {
        r.vcrc = num(v, &["vcrc_value"])?.map(|c| c as u16);
    }
    let mut out = vec![0u8; r.buffer_len()];
    let n = r.emit(&mut out).map_err(|e| EncodeError(format!("cannot build the packet: {e}")))?;
    out.truncate(n);
    let trailer = hex(v, &["trailer"])?.unwrap_or_default();
    out.extend_from_slice(&trailer);
    let stated = num(v, &["lrh", "pkt_len"])?.map_or(out.len(), |w| w as usize * 4 + 2 + trailer.len());
    if let (Some(b), Some(line)) = (&built, v.as_object()) {
        let decoded = crate::decode::decode_link(crate::capture::linktype::INFINIBAND, &out);
        mad::check_fits(line, &decoded.json, b)?;
    }
    match built {
        Some(b) => {
            notes.extend(b.notes);
            Ok((out, stated, (b.overrides, notes)))
        }
        None => Ok((out, stated, (Vec::new(), notes))),
    }
}

/// The ERF record around `frame` (`stated`: the frame length the line's fields state), and
/// the capture record's length on the wire; the frame as it is when the line has no `erf`
/// member (its `raw` is then the whole record, and `len` the record's).
pub(super) fn erf_record(v: &Value, frame: Vec<u8>, stated: usize) -> Result<(Vec<u8>, u32), EncodeError> {
    if !get(v, &["erf"]).is_some_and(Value::is_object) {
        let len = bounded(v, &["len"], frame.len() as u32)?;
        return Ok((frame, len));
    }
    let extensions = hex(v, &["erf", "extensions"])?.unwrap_or_default();
    if !extensions.len().is_multiple_of(erf::EXT_LEN) {
        return err("erf.extensions: not a multiple of 8 bytes");
    }
    let padding = hex(v, &["erf", "padding"])?.unwrap_or_default();
    let after = hex(v, &["erf", "after_record"])?.unwrap_or_default();
    let computed_wlen = frame.len();
    let computed_rlen = erf::LEN + extensions.len() + frame.len() + padding.len();
    let stated_rlen = erf::LEN + extensions.len() + stated + padding.len();
    // Lengths that agreed with the frame follow it; ones that did not stay as given.
    let length = |k: &str, computed: usize, stated: usize| -> Result<u16, EncodeError> {
        let n = match num(v, &["erf", k])? {
            Some(given) if given != stated as u64 => given,
            _ => computed as u64,
        };
        u16::try_from(n).map_err(|_| EncodeError(format!("erf.{k}: {n} does not fit 16 bits")))
    };
    let h = erf::Repr {
        timestamp: num(v, &["erf", "timestamp"])?.unwrap_or(0),
        extension: flag(v, &["erf", "extension"], !extensions.is_empty()),
        record_type: erf::RecordType::from(bounded::<u8>(v, &["erf", "type"], 21)? & 0x7f),
        flags: bounded(v, &["erf", "flags"], 0x04)?,
        rlen: length("rlen", computed_rlen, stated_rlen)?,
        lctr: bounded(v, &["erf", "lctr"], 0)?,
        wlen: length("wlen", computed_wlen, stated)?,
    };
    let mut out = vec![0u8; erf::LEN];
    h.emit_bytes(&mut out);
    out.extend_from_slice(&extensions);
    out.extend_from_slice(&frame);
    out.extend_from_slice(&padding);
    out.extend_from_slice(&after);
    // The capture record's length follows the record when the capture held all of it, and
    // stays as given when the snap length cut it.
    let record_len = match (num(v, &["erf", "record_len"])?, num(v, &["erf", "record_cap_len"])?) {
        (Some(len), Some(cap)) if len != cap => {
            u32::try_from(len).map_err(|_| EncodeError(format!("erf.record_len: {len} does not fit 32 bits")))?
        }
        _ => out.len() as u32,
    };
    Ok((out, record_len))
}
