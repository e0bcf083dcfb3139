//! Shared helpers for the cross-crate and oracle tests: a deterministic PRNG, random RoCEv2
//! frames of every opcode, locating the external oracles (tshark, the scapy venv), and network
//! namespaces for the tests on veth pairs ([`netns`]).
#![allow(dead_code)]

pub mod netns;
pub mod sa_fill;
pub mod sim;

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::Command;

use roce_wire::bth::{self, Opcode};
use roce_wire::ext::{ExtHeaders, ExtMask};
use roce_wire::frame::{FrameRepr, IpHeader};
use roce_wire::rng::XorShift64Star;
use roce_wire::{aeth, atomic_ack_eth, atomic_eth, deth, feth, ieth, immdt, reth, xrceth};

/// roce-wire's xorshift64* over a bare state: deterministic randomness for reproducible
/// oracle runs (the seeds the tests give are kept, so are their sequences).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        XorShift64Star::advance(&mut self.0)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// Random extension headers for `mask`.
pub fn random_ext(rng: &mut Rng, mask: ExtMask) -> ExtHeaders {
    let mut h = ExtHeaders::default();
    if mask.contains(ExtMask::DETH) {
        h.deth = Some(deth::Repr { qkey: rng.next() as u32, reserved: 0, src_qp: rng.next() as u32 & 0xff_ffff });
    }
    if mask.contains(ExtMask::XRCETH) {
        h.xrceth = Some(xrceth::Repr { reserved: rng.next() as u8, xrc_srq: rng.next() as u32 & 0xff_ffff });
    }
    if mask.contains(ExtMask::FETH) {
        h.feth = Some(feth::Repr { bits: rng.next() as u32 });
    }
    if mask.contains(ExtMask::RETH) {
        h.reth = Some(reth::Repr { va: rng.next(), rkey: rng.next() as u32, dma_len: rng.next() as u32 });
    }
    if mask.contains(ExtMask::ATOMIC_ETH) {
        h.atomic_eth = Some(atomic_eth::Repr {
            va: rng.next(),
            rkey: rng.next() as u32,
            swap_add: rng.next(),
            compare: rng.next(),
        });
    }
    if mask.contains(ExtMask::AETH) {
        h.aeth = Some(aeth::Repr { syndrome: rng.next() as u8, msn: rng.next() as u32 & 0xff_ffff });
    }
    if mask.contains(ExtMask::ATOMIC_ACK_ETH) {
        h.atomic_ack_eth = Some(atomic_ack_eth::Repr { orig: rng.next() });
    }
    if mask.contains(ExtMask::IMMDT) {
        h.immdt = Some(immdt::Repr { imm_data: rng.next() as u32 });
    }
    if mask.contains(ExtMask::IETH) {
        h.ieth = Some(ieth::Repr { rkey: rng.next() as u32 });
    }
    h
}

/// A random, well-formed RoCEv2 frame: IPv4 or IPv6, opcode `op`, random masked fields
/// (TOS/TC, TTL/hop limit, flow label, UDP checksum, FECN/BECN), random pad bytes and payload.
pub fn random_frame(rng: &mut Rng, op: Opcode, v6: bool, payload: &[u8]) -> Vec<u8> {
    let (src, dst) = if v6 {
        let mut s = [0u8; 16];
        let mut d = [0u8; 16];
        s[0] = 0xfd;
        d[0] = 0xfd;
        s[8..].copy_from_slice(&rng.next().to_be_bytes());
        d[8..].copy_from_slice(&rng.next().to_be_bytes());
        (IpAddr::from(s), IpAddr::from(d))
    } else {
        let a = rng.next() as u32;
        (IpAddr::from([198, 18, (a >> 8) as u8, a as u8]), IpAddr::from([198, 19, (a >> 24) as u8, (a >> 16) as u8]))
    };
    let mut b = bth::Repr::new(op, rng.next() as u32 & 0xff_ffff, rng.next() as u32 & 0xff_ffff);
    b.pkey = rng.next() as u16;
    b.solicited = rng.chance(50);
    b.mig_req = rng.chance(50);
    b.fecn = rng.chance(30);
    b.becn = rng.chance(30);
    b.ack_req = rng.chance(50);
    let ext = random_ext(rng, op.ext_headers());
    let mut r = FrameRepr::new([0x02, 0, 0, 0, 0, 1], [0x02, 0, 0, 0, 0, 2], src, dst, b, ext, payload);
    // Random pad count and bytes (a sender may pad with anything; the ICRC covers it).
    r.bth.pad_count = rng.below(4) as u8;
    for i in 0..usize::from(r.bth.pad_count) {
        r.pad[i] = rng.next() as u8;
    }
    r.udp.source_port = rng.next() as u16;
    r.udp.checksum = if rng.chance(50) { 0 } else { rng.next() as u16 };
    match &mut r.ip {
        IpHeader::V4(h) => {
            h.time_to_live = rng.next() as u8;
            h.identification = rng.next() as u16;
            let tos = rng.next() as u8;
            h.dscp = etherparse::IpDscp::try_new(tos >> 2).unwrap();
            h.ecn = etherparse::IpEcn::try_new(tos & 3).unwrap();
        }
        IpHeader::V6(h) => {
            h.hop_limit = rng.next() as u8;
            h.traffic_class = rng.next() as u8;
            h.flow_label = etherparse::Ipv6FlowLabel::try_new(rng.next() as u32 & 0xf_ffff).unwrap();
        }
    }
    let mut out = vec![0u8; r.buffer_len()];
    r.emit(&mut out).unwrap();
    out
}

/// The tshark binary; a missing one fails the test (tests/setup.sh installs it).
pub fn tshark() -> PathBuf {
    let ok = Command::new("tshark").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    assert!(ok, "tshark is required (the oracle for every byte we emit): run tests/setup.sh or tests/run-all.sh");
    PathBuf::from("tshark")
}

/// dumpcap, tshark's capture engine (same package): a capture a test stops with SIGINT is
/// written and closed by the process the test waits for, where tshark's own exit can come
/// before its dumpcap child has flushed the file. A missing one fails the test.
pub fn dumpcap() -> PathBuf {
    let ok = Command::new("dumpcap").arg("--version").output().map(|o| o.status.success()).unwrap_or(false);
    assert!(ok, "dumpcap is required (tshark's capture engine): run tests/setup.sh or tests/run-all.sh");
    PathBuf::from("dumpcap")
}

/// The Python with scapy; a missing one fails the test (tests/setup.sh creates .venv).
pub fn scapy_python() -> PathBuf {
    let p = std::env::var_os("ROCE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"));
    let ok = Command::new(&p)
        .args(["-c", "import scapy.contrib.roce"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(ok, "python with scapy is required at {} (ROCE_PYTHON): run tests/setup.sh", p.display());
    p
}

/// A fresh directory under target/ for a test's artefacts (kept after the run for inspection).
pub fn artefact_dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Check JSON files (one JSON value per line) against a schema in spec/ with
/// tests/validate_json.py and the venv's jsonschema (ROCE_PYTHON, else .venv); `lines`: how
/// many lines the files hold in all.
#[allow(dead_code)] // (not every test binary validates JSON)
pub fn validate_json(schema: &str, files: &[PathBuf], lines: usize) {
    let python = std::env::var_os("ROCE_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"));
    let schema = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("spec").join(schema);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/validate_json.py");
    let out = Command::new(&python).arg(&script).arg(&schema).args(files).output().unwrap_or_else(|e| {
        panic!("{}: {e}: the schema check needs the venv with jsonschema (run tests/setup.sh)", python.display())
    });
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains(&format!("{lines} lines, 0 invalid")), "{text}");
}
