//! `roce`, the Python package: the native module `roce._roce` (pyo3). It wraps roce-decode
//! (decode one frame, read a capture, encode a record, the ICRC) and the sans-IO engine
//! (roce-cm's `Stack`, roce-net's `SimNet`); the pure-Python part (python/roce) adds the
//! scapy-style layers and `dataframe` on top of it.
//!
//! Every value crosses as the JSON the CLI prints ([`convert`], [`tape`]): no second schema to
//! drift.

use pyo3::create_exception;
use pyo3::exceptions::{PyUserWarning, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use roce_decode::decode::{Decoder, Meta};
use roce_decode::json_out::Tape;
use std::cell::RefCell;
use std::time::Duration;

mod capture;
mod convert;
mod engine;
mod frame;
mod l2;
mod tape;

create_exception!(
    _roce,
    DecodeError,
    PyValueError,
    "A frame that is not even Ethernet: `.layer`, `.offset` and `.reason` say where and why."
);
create_exception!(_roce, CaptureError, PyValueError, "A capture file that cannot be read (further).");
create_exception!(
    _roce,
    EncodeWarning,
    PyUserWarning,
    "encode: a structured member overrode the `payload` bytes, or a member was not applied."
);

thread_local! {
    /// The tape of the last decode, kept so that decoding allocates it once.
    static TAPE: RefCell<Tape> = RefCell::new(Tape::default());
}

/// The capture's own members, which `decode` leaves out (a lone frame has no capture).
const CAPTURE_MEMBERS: [&str; 4] = ["frame", "time", "time_epoch", "interface"];

/// What a lone frame's capture would say of it: frame 1 at time 0, captured whole.
fn lone_frame(link_type: u32, len: usize) -> Meta {
    Meta {
        number: 1,
        timestamp: Duration::ZERO,
        relative: Duration::ZERO,
        linktype: link_type,
        interface: 0,
        orig_len: u32::try_from(len).unwrap_or(u32::MAX),
    }
}

/// Decode into a fresh decoder (no RMPP state carried between unrelated frames) that records
/// its JSON calls on this thread's tape, and hand the tape to `f`.
fn with_decoded<R>(frame: &[u8], link_type: u32, f: impl FnOnce(&Tape) -> R) -> R {
    let mut d = Decoder::new();
    d.summary.off = true;
    d.json.tape = Some(TAPE.with(|t| t.try_borrow_mut().map(|mut t| std::mem::take(&mut *t)).unwrap_or_default()));
    d.decode(&lone_frame(link_type, frame.len()), frame);
    let tape = d.json.tape.take().unwrap_or_default();
    let r = f(&tape);
    TAPE.with(|t| {
        if let Ok(mut t) = t.try_borrow_mut() {
            *t = tape;
        }
    });
    r
}

/// The DecodeError of a frame that stopped at its first layer (`record`: its object), if it
/// did: a frame shorter than the link type's header, whose record has no such member and an
/// `error`.
fn not_even_link(py: Python<'_>, record: &Bound<'_, PyDict>, link_type: u32, frame_len: usize) -> Option<PyErr> {
    let (link_member, header_len) = match link_type {
        1 => ("eth", 14),
        113 => ("sll", 16),
        276 => ("sll2", 20),
        _ => return None,
    };
    if frame_len >= header_len || record.contains(link_member).ok()? {
        return None;
    }
    let e = record.get_item("error").ok()??;
    let text = |k: &str| e.get_item(k).ok().and_then(|v| v.extract::<String>().ok()).unwrap_or_default();
    let offset = e.get_item("offset").ok().and_then(|v| v.extract::<u64>().ok()).unwrap_or(0);
    let err = DecodeError::new_err(text("message"));
    let v = err.value(py);
    let set = || -> PyResult<()> {
        v.setattr("layer", text("layer"))?;
        v.setattr("offset", offset)?;
        v.setattr("reason", text("reason"))?;
        Ok(())
    };
    Some(set().err().unwrap_or(err))
}

/// [`not_even_link`] of a record given as the decoder's JSON text (a record whose frame is
/// shorter than its link header is made into a dict for it).
fn not_even_link_text(py: Python<'_>, text: &[u8], link_type: u32, frame_len: usize) -> Option<PyErr> {
    if frame_len >= 20 {
        return None;
    }
    let d = convert::json_text_to_py(py, text, &[]).ok()?.cast_into::<PyDict>().ok()?;
    not_even_link(py, &d, link_type, frame_len)
}

/// decode(frame: bytes, link_type: int = 1) -> dict
///
/// The object of one `roce decode --json` line for this frame, without the capture's own
/// members (frame, time, time_epoch, interface): same keys, same values. A frame that parses
/// only partly comes back with its `error` member, as the CLI prints it; a frame that is not
/// even Ethernet (or the link type's header) raises DecodeError. link_type is the pcap
/// LINKTYPE: 1 Ethernet, 101 raw IP, 113 Linux cooked, 276 Linux cooked v2.
#[pyfunction]
#[pyo3(signature = (frame, link_type = 1))]
fn decode<'py>(py: Python<'py>, frame: &Bound<'py, PyAny>, link_type: u32) -> PyResult<Bound<'py, PyDict>> {
    let bytes = convert::bytes_of(frame, "frame")?;
    let v = with_decoded(&bytes, link_type, |tape| tape::to_py(py, tape, &CAPTURE_MEMBERS))?;
    let d = v.cast_into::<PyDict>()?;
    match not_even_link(py, &d, link_type, bytes.len()) {
        Some(e) => Err(e),
        None => Ok(d),
    }
}

/// summary(frame: bytes, link_type: int = 1) -> str
///
/// The one-line summary `roce decode` prints for this frame (without number, time, length).
#[pyfunction]
#[pyo3(signature = (frame, link_type = 1))]
fn summary(frame: &Bound<'_, PyAny>, link_type: u32) -> PyResult<String> {
    let bytes = convert::bytes_of(frame, "frame")?;
    let mut d = Decoder::new();
    d.json.off = true;
    d.decode(&lone_frame(link_type, bytes.len()), &bytes);
    Ok(d.summary.text.clone())
}

/// encode(record: dict) -> bytes
///
/// The frame of one record, as `roce encode` writes it: byte-identical for any record that
/// decode or read gave; fields left out are computed (lengths, IPv4 checksum, PadCnt and pad,
/// the ICRC) or take `roce encode`'s defaults. Structured MAD members win over `payload`;
/// each override, each member that restates another and disagreed with it (spec/decode.md),
/// and each member that could not be applied, is reported as an EncodeWarning (never
/// silently). Raises ValueError when the record cannot be built.
#[pyfunction]
fn encode<'py>(py: Python<'py>, record: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    if !record.is_instance_of::<PyDict>() {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "record: expected a dict, found {}",
            convert::type_name(record)
        )));
    }
    let v = convert::from_py(record)?;
    let f = roce_decode::encode::encode_value(&v).map_err(|e| PyValueError::new_err(e.0))?;
    if !f.overrides.is_empty() {
        let msg = format!(
            "encode: {} override{} the payload bytes: {}",
            if f.overrides.len() == 1 { "this member" } else { "these members" },
            if f.overrides.len() == 1 { "s" } else { "" },
            f.overrides.join(", ")
        );
        PyErr::warn(py, &py.get_type::<EncodeWarning>(), &std::ffi::CString::new(msg)?, 1)?;
    }
    if !f.settled.is_empty() {
        // A member that restates another disagreed with it: say which side went to the wire.
        let pairs: Vec<String> = f.settled.iter().map(|s| s.text()).collect();
        let how = match f.settled_by {
            Some(roce_decode::encode::SettledBy::Rule) => {
                " (nothing in the record tells which was edited: the field wins)"
            }
            _ => "",
        };
        let msg = format!("encode: {}{how}", pairs.join(", "));
        PyErr::warn(py, &py.get_type::<EncodeWarning>(), &std::ffi::CString::new(msg)?, 1)?;
    }
    for n in &f.notes {
        PyErr::warn(py, &py.get_type::<EncodeWarning>(), &std::ffi::CString::new(format!("encode: {n}"))?, 1)?;
    }
    Ok(PyBytes::new(py, &f.data))
}

/// icrc(frame: bytes) -> int
///
/// The ICRC of a RoCEv2 Ethernet frame (with or without an 802.1Q tag), computed as rxe does
/// over the frame's IP packet up to its ICRC (the last 4 bytes the UDP length covers). Raises
/// DecodeError when the frame is not Ethernet / IPv4 or IPv6 / UDP with room for a BTH.
#[pyfunction]
fn icrc(py: Python<'_>, frame: &Bound<'_, PyAny>) -> PyResult<u32> {
    use roce_wire::icrc::{compute, IpVersion};
    let b = convert::bytes_of(frame, "frame")?;
    let fail = |layer: &str, offset: usize, reason: &str, message: String| -> PyErr {
        let err = DecodeError::new_err(message);
        let v = err.value(py);
        let _ = v.setattr("layer", layer);
        let _ = v.setattr("offset", offset);
        let _ = v.setattr("reason", reason);
        err
    };
    let short = |layer: &str, at: usize, need: usize| {
        fail(
            layer,
            at,
            "too_short",
            format!("{layer}: needs {need} bytes at byte offset {at}, the frame has {}", b.len()),
        )
    };
    if b.len() < 14 {
        return Err(short("ethernet", 0, 14));
    }
    let mut at = 12;
    let mut ethertype = u16::from_be_bytes([b[12], b[13]]);
    if ethertype == 0x8100 {
        if b.len() < 18 {
            return Err(short("vlan", 14, 4));
        }
        at += 4;
        ethertype = u16::from_be_bytes([b[16], b[17]]);
    }
    let ip_off = at + 2;
    let (version, ip_len) = match ethertype {
        0x0800 => {
            let ihl = usize::from(b.get(ip_off).copied().unwrap_or(0) & 15) * 4;
            (IpVersion::V4, ihl.max(20))
        }
        0x86dd => (IpVersion::V6, 40),
        other => {
            return Err(fail(
                "ethernet",
                at,
                "not_ip",
                format!("ethernet: EtherType 0x{other:04x} at byte offset {at} is neither IPv4 nor IPv6"),
            ))
        }
    };
    let udp_off = ip_off + ip_len;
    if b.len() < udp_off + 8 {
        return Err(short("udp", udp_off, 8));
    }
    let udp_len = usize::from(u16::from_be_bytes([b[udp_off + 4], b[udp_off + 5]]));
    // The ICRC ends where the UDP length says (an Ethernet trailer may follow).
    let end = if udp_len >= 8 + 12 + 4 && udp_off + udp_len <= b.len() { udp_off + udp_len } else { b.len() };
    if end < udp_off + 8 + 12 + 4 {
        return Err(short("bth", udp_off + 8, 16));
    }
    compute(&b[ip_off..end - 4], version, ip_len).map_err(|e| fail("icrc", ip_off, "invalid", format!("icrc: {e}")))
}

/// opcode_headers(opcode: int) -> list[str]
///
/// The extension headers a BTH opcode carries, by their JSON member names in wire order
/// (`["reth"]` for RDMA WRITE Only): what the layers check a packet against.
#[pyfunction]
fn opcode_headers(opcode: u8) -> Vec<&'static str> {
    use roce_wire::bth::Opcode;
    use roce_wire::ext::ExtMask;
    let mask = Opcode::from(opcode).ext_headers();
    [
        (ExtMask::XRCETH, "xrceth"),
        (ExtMask::FETH, "feth"),
        (ExtMask::RETH, "reth"),
        (ExtMask::DETH, "deth"),
        (ExtMask::AETH, "aeth"),
        (ExtMask::ATOMIC_ETH, "atomic_eth"),
        (ExtMask::ATOMIC_ACK_ETH, "atomic_ack_eth"),
        (ExtMask::IMMDT, "immdt"),
        (ExtMask::IETH, "ieth"),
    ]
    .into_iter()
    .filter(|(m, _)| mask.contains(*m))
    .map(|(_, n)| n)
    .collect()
}

/// The native half of the `roce` package (import `roce`, not this).
#[pymodule]
fn _roce(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("DecodeError", py.get_type::<DecodeError>())?;
    m.add("CaptureError", py.get_type::<CaptureError>())?;
    m.add("EncodeWarning", py.get_type::<EncodeWarning>())?;
    m.add_function(wrap_pyfunction!(decode, m)?)?;
    m.add_function(wrap_pyfunction!(summary, m)?)?;
    m.add_function(wrap_pyfunction!(encode, m)?)?;
    m.add_function(wrap_pyfunction!(icrc, m)?)?;
    m.add_function(wrap_pyfunction!(opcode_headers, m)?)?;
    capture::register(m)?;
    engine::register(m)?;
    frame::register(m)?;
    l2::register(m)?;
    Ok(())
}
