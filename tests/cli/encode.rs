//! `roce encode`: `roce decode --json F | roce encode - -o G` gives G with F's frames and
//! timestamps, for every capture in the repo and for generated ones of every link type and
//! of malformed frames; editing one field changes that field and what depends on it; and a
//! property test over the wire crate's Reprs (every opcode, IPv4 and IPv6, random fields).

use crate::common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use proptest::prelude::*;
use roce_wire::bth::Opcode;
use serde_json::Value;

fn roce() -> Command {
    Command::new(env!("CARGO_BIN_EXE_roce"))
}

fn repo(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(p)
}

fn decode_json(f: &Path) -> String {
    let out = roce().args(["decode", "--json"]).arg(f).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn encode(json: &str, out: &Path) {
    let mut c =
        roce().args(["encode", "-q", "-", "-o"]).arg(out).stdin(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    c.stdin.take().unwrap().write_all(json.as_bytes()).unwrap();
    let o = c.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Frames, timestamps and lengths on the wire, compared record by record.
fn same_frames(a: &Path, b: &Path) -> usize {
    let x = roce_decode::capture::read_file(a).unwrap();
    let y = roce_decode::capture::read_file(b).unwrap();
    assert_eq!(x.len(), y.len(), "{} vs {}", a.display(), b.display());
    for (i, (p, q)) in x.iter().zip(&y).enumerate() {
        assert_eq!(p.data, q.data, "{}: frame {}", a.display(), i + 1);
        assert_eq!(p.timestamp, q.timestamp, "{}: frame {}", a.display(), i + 1);
        assert_eq!(p.orig_len, q.orig_len, "{}: frame {}", a.display(), i + 1);
        assert_eq!(p.linktype, q.linktype);
    }
    x.len()
}

fn pcap(linktype: u32, frames: &[Vec<u8>]) -> Vec<u8> {
    let mut o = Vec::new();
    for v in [0xa1b2_3c4du32, 0x0004_0002, 0, 0, 262_144, linktype] {
        o.extend(v.to_le_bytes());
    }
    for (i, d) in frames.iter().enumerate() {
        for v in [1_764_460_800u32, i as u32 * 1000 + 7, d.len() as u32, d.len() as u32] {
            o.extend(v.to_le_bytes());
        }
        o.extend_from_slice(d);
    }
    o
}

#[test]
fn every_capture_round_trips_frame_for_frame() {
    let dir = common::artefact_dir("cli_encode_roundtrip");
    let mut captures: Vec<PathBuf> = std::fs::read_dir(repo("tests/data"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .collect();
    captures.sort();
    assert!(captures.len() >= 2);
    // Generated: mixed frames, and every fuzz-corpus input (malformed ones too) as Ethernet,
    // Linux cooked v1/v2 and raw IP.
    let mixed = dir.join("mixed.pcap");
    std::fs::write(&mixed, roce_decode::samples_mixed::mixed_capture(3_000, 11)).unwrap();
    captures.push(mixed);
    let mut fuzz = Vec::new();
    for sub in ["seeds/decode", "seeds/l2", "corpus/decode", "corpus/frame", "corpus/l2", "corpus/roundtrip"] {
        for e in std::fs::read_dir(repo("fuzz").join(sub)).unwrap().flatten() {
            let b = std::fs::read(e.path()).unwrap();
            if b.len() >= 20 {
                fuzz.push(b);
            }
        }
    }
    for (lt, wrap) in [(1u32, 0usize), (113, 16), (276, 20), (101, 0)] {
        let frames: Vec<Vec<u8>> = fuzz
            .iter()
            .map(|b| match lt {
                1 | 101 => b.clone(),
                113 => [&[0u8, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0][..], &b[12..]].concat(),
                _ => [&b[12..14], &[0u8, 0, 0, 0, 0, 3, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0][..], &b[14..]].concat(),
            })
            .collect();
        let _ = wrap;
        let p = dir.join(format!("fuzz_{lt}.pcap"));
        std::fs::write(&p, pcap(lt, &frames)).unwrap();
        captures.push(p);
    }
    let mut total = 0;
    for c in &captures {
        let out = dir.join(format!("{}.rt.pcap", c.file_name().unwrap().to_string_lossy()));
        encode(&decode_json(c), &out);
        total += same_frames(c, &out);
    }
    eprintln!("{total} frames of {} captures round-tripped byte for byte", captures.len());
    assert!(total > 3_000);
}

#[test]
fn editing_one_field_changes_it_and_what_depends_on_it_only() {
    let dir = common::artefact_dir("cli_encode_edit");
    let json = decode_json(&repo("tests/data/sample.pcap"));
    let lines: Vec<Value> = json.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut changed = 0;
    for (i, v) in lines.iter().enumerate() {
        if v["kind"] != "rocev2" || v.get("raw").is_some() {
            continue; // from its bytes, not its fields
        }
        let mut e = v.clone();
        let psn = e["psn"].as_u64().unwrap();
        e["psn"] = Value::from((psn + 1) & 0xff_ffff);
        let out = dir.join(format!("f{i}.pcap"));
        encode(&format!("{e}\n"), &out);
        let back: Value = serde_json::from_str(decode_json(&out).lines().next().unwrap()).unwrap();
        let diff = differing(v, &back, "");
        let mut want = vec!["bth.psn".to_string(), "psn".to_string()];
        if v["icrc"] == "ok" {
            // A right ICRC is recomputed over the new PSN; it stays right.
            want.extend(["icrc_expected".to_string(), "icrc_value".to_string()]);
            assert_eq!(back["icrc"], "ok");
        } else {
            // A bad ICRC stays as given (and bad): only the expected value moves.
            want.extend(["icrc_expected".to_string(), "error.message".to_string()]);
            assert_eq!(back["icrc"], "bad");
            assert_eq!(back["icrc_value"], v["icrc_value"]);
        }
        want.retain(|k| !(k == "icrc_expected" && back["icrc_expected"] == v["icrc_expected"]));
        let mut diff: Vec<String> = diff.into_iter().filter(|k| k != "frame" && k != "time").collect();
        diff.sort();
        want.sort();
        assert_eq!(diff, want, "frame {}", i + 1);
        changed += 1;
    }
    assert!(changed > 20);
    // The TTL: the IPv4 header checksum follows it; the ICRC does not (it masks the TTL).
    for (i, v) in lines.iter().enumerate() {
        if v["kind"] != "rocev2" || v.get("raw").is_some() || v["ip"]["version"] != 4 || v["icrc"] != "ok" {
            continue;
        }
        let mut e = v.clone();
        e["ip"]["ttl"] = Value::from((e["ip"]["ttl"].as_u64().unwrap() + 1) & 0xff);
        let out = dir.join(format!("ttl{i}.pcap"));
        encode(&format!("{e}\n"), &out);
        let back: Value = serde_json::from_str(decode_json(&out).lines().next().unwrap()).unwrap();
        let mut diff: Vec<String> =
            differing(v, &back, "").into_iter().filter(|k| k != "frame" && k != "time").collect();
        diff.sort();
        assert_eq!(diff, ["ip.checksum", "ip.ttl"], "frame {}", i + 1);
        assert_eq!(back["ip"]["checksum_ok"], true);
    }
    // Absent fields are computed: without lengths, checksums and the ICRC a good frame comes
    // back byte for byte.
    let good: Vec<&Value> =
        lines.iter().filter(|v| v["kind"] == "rocev2" && v["icrc"] == "ok" && v.get("error").is_none()).collect();
    let mut stripped = String::new();
    for v in &good {
        let mut e = (*v).clone();
        let o = e.as_object_mut().unwrap();
        for k in ["icrc_value", "icrc_expected", "icrc", "payload_len"] {
            o.remove(k);
        }
        for (obj, k) in
            [("ip", "total_len"), ("ip", "payload_len"), ("ip", "checksum"), ("udp", "length"), ("bth", "pad_count")]
        {
            if let Some(x) = o.get_mut(obj).and_then(Value::as_object_mut) {
                x.remove(k);
            }
        }
        stripped.push_str(&format!("{e}\n"));
    }
    let out = dir.join("computed.pcap");
    encode(&stripped, &out);
    let full = dir.join("full.pcap");
    encode(&good.iter().map(|v| format!("{v}\n")).collect::<String>(), &full);
    same_frames(&full, &out);
}

/// The dotted paths where `a` and `b` differ.
fn differing(a: &Value, b: &Value, at: &str) -> Vec<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter()
                .flat_map(|k| {
                    let p = if at.is_empty() { k.clone() } else { format!("{at}.{k}") };
                    differing(x.get(k).unwrap_or(&Value::Null), y.get(k).unwrap_or(&Value::Null), &p)
                })
                .collect()
        }
        _ if a == b => vec![],
        _ => vec![at.to_string()],
    }
}

#[test]
fn bad_input_is_a_usage_error_naming_the_line() {
    let dir = common::artefact_dir("cli_encode_bad");
    let mut c = roce()
        .args(["encode", "-", "-o"])
        .arg(dir.join("x.pcap"))
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(b"{\"kind\":\"arp\",\"raw\":\"0102\"}\nnot json\n").unwrap();
    let o = c.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("line 2"), "{}", String::from_utf8_lossy(&o.stderr));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    /// Any frame the wire crate's Reprs build (every opcode, IPv4/IPv6, random fields, pad,
    /// payload) survives decode → JSON → encode byte for byte.
    #[test]
    fn reprs_survive_decode_and_encode(seed in any::<u64>(), op in 0usize..Opcode::ALL.len(), v6 in any::<bool>(), n in 0usize..300) {
        let mut rng = common::Rng(seed | 1);
        let payload = rng.bytes(n);
        let bytes = common::random_frame(&mut rng, Opcode::ALL[op], v6, &payload);
        let d = roce_decode::decode::decode_ethernet(&bytes);
        let e = roce_decode::encode::encode_value(&Value::Object(d.json)).unwrap();
        prop_assert_eq!(e.data, bytes);
        prop_assert_eq!(e.timestamp, Duration::ZERO);
    }
}
