//! scapy as an independent ICRC oracle: `scapy.contrib.roce` and roce-wire must agree on the
//! ICRC of at least 1,000 random frames (IPv4 and IPv6, every opcode, random pads, payloads and
//! masked fields). Any disagreement fails.

use crate::common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::{random_frame, scapy_python, Rng};
use roce_wire::bth::Opcode;
use roce_wire::{frame, golden};

#[test]
fn scapy_and_roce_wire_agree_on_the_icrc_of_random_frames() {
    let python = scapy_python();
    let mut rng = Rng(0x5eed_1c2c_0000_0001);
    let mut frames: Vec<Vec<u8>> =
        vec![golden::SA_DELETE_MCMEMBER.to_vec(), golden::CX4_CNP.to_vec(), golden::SCAPY_UC_SEND_ONLY.to_vec()];
    let ops = &Opcode::ALL[..];
    for i in 0..1200usize {
        let op = ops[i % ops.len()];
        let v6 = (i / ops.len()) % 2 == 1;
        let len = rng.below(if i % 10 == 0 { 1500 } else { 300 }) as usize;
        let payload = rng.bytes(len);
        frames.push(random_frame(&mut rng, op, v6, &payload));
    }
    let mut input = String::new();
    for f in &frames {
        for b in f {
            input.push_str(&format!("{b:02x}"));
        }
        input.push('\n');
    }
    let mut child = Command::new(&python)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle_scapy_icrc.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run scapy");
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "scapy oracle failed");
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), frames.len(), "scapy answered for every frame");
    let (mut v4, mut v6) = (0, 0);
    for (i, (f, line)) in frames.iter().zip(&lines).enumerate() {
        let (scapy, wire) = line.split_once(' ').unwrap();
        let ours = frame::parse(f).unwrap_or_else(|e| panic!("frame {i}: our parser refused our own frame: {e}"));
        let ours_hex: String =
            roce_wire::icrc::to_wire(ours.icrc_expected).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(scapy, ours_hex, "frame {i} ({:?}): scapy's ICRC differs from ours", ours.repr.bth.opcode);
        assert_eq!(wire, ours_hex, "frame {i}: the emitted ICRC differs from the computed one");
        match ours.repr.ip {
            frame::IpHeader::V4(_) => v4 += 1,
            frame::IpHeader::V6(_) => v6 += 1,
        }
    }
    assert!(v4 >= 500 && v6 >= 500, "both IP versions covered: {v4} IPv4, {v6} IPv6");
    println!("scapy agreed on {} frames ({v4} IPv4, {v6} IPv6)", frames.len());
}
