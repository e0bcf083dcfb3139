//! A mixed RoCEv2 capture of any size for benchmarks and the streaming tests: RC, UC and UD
//! data frames of many opcodes over IPv4 and IPv6, every sample frame (SA and CM MADs, ARP,
//! IGMP, MLD, ND), and one frame in 16 with a bad ICRC. Deterministic for a seed.

use std::net::IpAddr;
use std::time::Duration;

use roce_wire::bth::{self, Opcode};
use roce_wire::ext::ExtHeaders;
use roce_wire::frame::FrameRepr;
use roce_wire::rng::XorShift64Star;
use roce_wire::{aeth, deth, immdt, reth};

use crate::capture::PcapFileWriter;

const OPCODES: [Opcode; 10] = [
    Opcode::RcSendOnly,
    Opcode::RcSendFirst,
    Opcode::RcRdmaWriteOnly,
    Opcode::RcRdmaReadRequest,
    Opcode::RcAcknowledge,
    Opcode::RcSendOnlyWithImmediate,
    Opcode::UcSendOnly,
    Opcode::UcRdmaWriteOnly,
    Opcode::UdSendOnly,
    Opcode::UdSendOnlyWithImmediate,
];

fn data_frame(rng: &mut XorShift64Star, payload: &[u8]) -> Vec<u8> {
    let r = rng.next_u64();
    let op = OPCODES[(r % OPCODES.len() as u64) as usize];
    let v6 = r & 0x100 != 0;
    let (src, dst): (IpAddr, IpAddr) = if v6 {
        let mut s = [0u8; 16];
        s[0] = 0xfd;
        s[15] = 1;
        let mut d = s;
        d[15] = 2 + (r >> 9) as u8 % 8;
        (s.into(), d.into())
    } else {
        ([198, 18, 0, 1].into(), [198, 18, 0, 2 + (r >> 9) as u8 % 8].into())
    };
    let mut ext = ExtHeaders::default();
    let mask = op.ext_headers();
    use roce_wire::ext::ExtMask;
    if mask.contains(ExtMask::DETH) {
        ext.deth = Some(deth::Repr::new(0x1234_5678, (r >> 16) as u32 & 0xff_ffff));
    }
    if mask.contains(ExtMask::RETH) {
        ext.reth = Some(reth::Repr { va: rng.next_u64(), rkey: r as u32, dma_len: 4096 });
    }
    if mask.contains(ExtMask::AETH) {
        ext.aeth = Some(aeth::Repr { syndrome: 0, msn: (r >> 20) as u32 & 0xff_ffff });
    }
    if mask.contains(ExtMask::IMMDT) {
        ext.immdt = Some(immdt::Repr { imm_data: (r >> 32) as u32 });
    }
    let carries = !matches!(op, Opcode::RcRdmaReadRequest | Opcode::RcAcknowledge);
    let len = if carries { 1 + (r >> 40) as usize % payload.len() } else { 0 };
    let b = bth::Repr::new(op, (r >> 8) as u32 & 0xff_ffff, (r >> 24) as u32 & 0xff_ffff);
    let f = FrameRepr::new([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], src, dst, b, ext, &payload[..len]).with_auto_pad();
    let mut out = vec![0u8; f.buffer_len()];
    let n = f.emit(&mut out).unwrap_or(0);
    out.truncate(n);
    out
}

/// A pcap (Ethernet, nanosecond timestamps) of `frames` mixed frames, 1 µs apart.
pub fn mixed_capture(frames: usize, seed: u64) -> Vec<u8> {
    let mut w = PcapFileWriter::new(Vec::new()).expect("in-memory pcap");
    for (i, f) in mixed_frames(frames, seed).enumerate() {
        let t = Duration::from_secs(1_764_460_800) + Duration::from_micros(i as u64);
        w.write(t, &f).expect("in-memory pcap");
    }
    w.into_inner()
}

/// The frames of [`mixed_capture`], one at a time.
pub fn mixed_frames(frames: usize, seed: u64) -> impl Iterator<Item = Vec<u8>> {
    let samples = crate::samples::sample_frames();
    let payload: Vec<u8> = (0..1024u32).map(|i| (i * 7) as u8).collect();
    let mut rng = XorShift64Star::new(seed | 1);
    (0..frames).map(move |i| {
        // Two data frames in three; the sample frames (MADs, CM, L2) in turn otherwise.
        let mut f =
            if i % 3 != 2 { data_frame(&mut rng, &payload) } else { samples[(i / 3) % samples.len()].bytes.clone() };
        if i % 16 == 5 && f.len() > 60 {
            // A bad ICRC: the last byte of a RoCEv2 frame (harmless on others).
            let n = f.len();
            f[n - 1] ^= 0x5a;
        }
        f
    })
}
