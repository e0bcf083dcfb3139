//! A capture of RC flows of any size for the analysis benchmark: 16 QP pairs, each sending
//! SEND_ONLY packets with consecutive PSNs, one in 50 a retransmission of an earlier PSN, an
//! ACK every 4 packets on the reverse flow and a PSN-sequence-error NAK every 1,000.
//! Deterministic; the frames come one at a time (a capture 16× larger costs no memory).

use std::net::IpAddr;
use std::time::Duration;

use roce_wire::aeth;
use roce_wire::bth::{self, Opcode};
use roce_wire::ext::ExtHeaders;
use roce_wire::frame::FrameRepr;

const PAIRS: u32 = 16;

fn frame(op: Opcode, src: u8, dst: u8, qp: u32, psn: u32, ext: ExtHeaders, payload: &[u8]) -> Vec<u8> {
    let (s, d): (IpAddr, IpAddr) = ([198, 18, 1, src].into(), [198, 18, 1, dst].into());
    let b = bth::Repr::new(op, qp, psn & 0xff_ffff);
    let f = FrameRepr::new([2, 0, 0, 0, 0, src], [2, 0, 0, 0, 0, dst], s, d, b, ext, payload).with_auto_pad();
    let mut out = vec![0u8; f.buffer_len()];
    let n = f.emit(&mut out).unwrap_or(0);
    out.truncate(n);
    out
}

/// The `i`-th frame of the capture (any `i`: the pattern is computed, not stored).
pub fn flow_frame(i: u64, payload: &[u8]) -> Vec<u8> {
    let pair = (i % u64::from(PAIRS)) as u32;
    let k = i / u64::from(PAIRS);
    let (a, b) = (1 + pair as u8, 101 + pair as u8);
    let (qa, qb) = (0x100 + pair, 0x200 + pair);
    // Per pair: 5 frames in a row are 4 sends and 1 ACK.
    let seq = k / 5 * 4 + k % 5;
    if k % 5 == 4 {
        let nak = k % 1000 == 999;
        let aeth = aeth::Repr { syndrome: if nak { 0x60 } else { 0x1f }, msn: (seq as u32) & 0xff_ffff };
        let ext = ExtHeaders { aeth: Some(aeth), ..ExtHeaders::default() };
        return frame(Opcode::RcAcknowledge, b, a, qa, (seq as u32).wrapping_sub(1), ext, &[]);
    }
    let psn = if k % 50 == 7 { seq.saturating_sub(9) } else { seq } as u32;
    frame(Opcode::RcSendOnly, a, b, qb, psn, ExtHeaders::default(), payload)
}

/// A pcap (Ethernet, nanosecond timestamps) of frames `0..frames`, 100 ns apart, written
/// to `w` one frame at a time.
pub fn write_flow_capture<W: std::io::Write>(w: W, frames: u64) -> std::io::Result<W> {
    let mut pcap = crate::capture::PcapFileWriter::new(w)?;
    let payload: Vec<u8> = (0..64u32).map(|i| i as u8).collect();
    for i in 0..frames {
        let t = Duration::from_secs(1_764_460_800) + Duration::from_nanos(i * 100);
        pcap.write(t, &flow_frame(i, &payload))?;
    }
    pcap.finish()
}
