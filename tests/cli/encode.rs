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

/// `roce encode [flags] - -o OUT` with `input` on standard input.
fn run_encode(flags: &[&str], input: &[u8], out: &Path) -> std::process::Output {
    let mut c = roce()
        .arg("encode")
        .args(flags)
        .args(["-", "-o"])
        .arg(out)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(input).unwrap();
    c.wait_with_output().unwrap()
}

fn encode(json: &str, out: &Path) {
    let o = run_encode(&["-q"], json.as_bytes(), out);
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

/// The captures in tests/data, sorted.
fn repo_captures() -> Vec<PathBuf> {
    let mut captures: Vec<PathBuf> = std::fs::read_dir(repo("tests/data"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .collect();
    captures.sort();
    captures
}

#[test]
fn every_capture_round_trips_frame_for_frame() {
    let dir = common::artefact_dir("cli_encode_roundtrip");
    let mut captures = repo_captures();
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
    let o = run_encode(&[], b"{\"kind\":\"arp\",\"raw\":\"0102\"}\nnot json\n", &dir.join("x.pcap"));
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

/// Every MAD line of `json` without `payload` and `raw` (the other lines as they are: an ARP
/// or a data frame has no structured members that give its bytes back).
fn strip_bytes(json: &str) -> String {
    json.lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            let o = v.as_object_mut().unwrap();
            if o.contains_key("mad") {
                o.remove("payload");
                o.remove("raw");
            }
            format!("{v}\n")
        })
        .collect()
}

/// The sample frames as a pcap.
fn samples_pcap(dir: &Path) -> PathBuf {
    let p = dir.join("samples.pcap");
    let mut w = roce_decode::capture::PcapFileWriter::create(&p).unwrap();
    for (i, s) in roce_decode::samples::sample_frames().iter().enumerate() {
        w.write(Duration::from_secs(1_764_460_800) + Duration::from_millis(i as u64), &s.bytes).unwrap();
    }
    w.into_inner().flush().unwrap();
    p
}

/// decode → drop `payload` and `raw` from every line → encode: every MAD and CM frame of the
/// captures in tests/data and of the samples comes back byte for byte from its structured
/// members alone, but the RMPP segments whose table bytes the JSON does not hold (continuation
/// segments, a First segment's records after the first) — those the encoder names in a note.
#[test]
fn every_mad_and_cm_frame_round_trips_from_its_structured_members() {
    let dir = common::artefact_dir("cli_encode_structured");
    let mut captures = repo_captures();
    captures.push(samples_pcap(&dir));
    let (mut same, mut noted) = (0, 0);
    for c in &captures {
        let json = decode_json(c);
        let stripped = strip_bytes(&json);
        let out = dir.join(format!("{}.structured.pcap", c.file_name().unwrap().to_string_lossy()));
        encode(&stripped, &out);
        let a = roce_decode::capture::read_file(c).unwrap();
        let b = roce_decode::capture::read_file(&out).unwrap();
        assert_eq!(a.len(), b.len());
        for ((line, x), y) in stripped.lines().zip(&a).zip(&b) {
            let v: Value = serde_json::from_str(line).unwrap();
            if v.get("mad").is_none() {
                continue;
            }
            if x.data == y.data {
                same += 1;
                continue;
            }
            // Not whole in the JSON: the encoder said so, and only RMPP table segments are so.
            let e = roce_decode::encode::encode_value(&v).unwrap();
            assert!(
                !e.notes.is_empty() && v.get("rmpp_segment").is_some(),
                "{} frame {}: differs without a note: {line}",
                c.display(),
                v["frame"]
            );
            noted += 1;
        }
    }
    eprintln!("{same} MAD/CM frames rebuilt byte for byte from their members, {noted} RMPP segments noted");
    assert!(same >= 70, "{same}");
}

/// The first line of `pcap` that has member `pick`, with `edit` (a JSON pointer) set to
/// `value`, encoded; tshark's value of `field` in the new frame.
fn edit_and_dissect(dir: &Path, pcap: &Path, pick: &str, edit: &str, value: &Value, field: &str) -> String {
    let json = decode_json(pcap);
    let mut v: Value =
        json.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).find(|v| v.pointer(pick).is_some()).unwrap();
    let before = v.clone();
    *v.pointer_mut(edit).unwrap_or_else(|| panic!("{edit}")) = value.clone();
    assert_ne!(before, v, "{edit}: the edit changes the line");
    let out = dir.join(format!("{}.pcap", edit.replace('/', "_")));
    let o = run_encode(&[], format!("{v}\n").as_bytes(), &out);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    // The edit contradicts the payload: said once, naming the member, and counted.
    let member = edit.trim_start_matches('/').replace('/', ".");
    assert!(stderr.contains(&format!("{member} from the structured fields, not the payload")), "{edit}: {stderr}");
    assert!(stderr.contains("(1 with structured fields overriding payload)"), "{edit}: {stderr}");
    let t = Command::new(common::tshark())
        .arg("-n")
        .arg("-r")
        .arg(&out)
        .args(["-T", "fields", "-e", field])
        .output()
        .unwrap();
    assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
    String::from_utf8(t.stdout).unwrap().trim().to_string()
}

/// A number as tshark prints it (decimal or 0x-hex), or the text itself.
fn tshark_value(s: &str) -> Value {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).map(Value::from).unwrap_or_else(|_| s.into()),
        None => s.parse::<u64>().map(Value::from).unwrap_or_else(|_| s.into()),
    }
}

/// The jq edits of the README (`.mcmember.port_gid`, `.mad.tid`, `.sa.component_mask`,
/// `.cm.fields.local_comm_id`, `.rmpp.status`) change the bytes, and tshark reads the new value.
#[test]
fn structured_edits_change_the_frame_and_tshark_reads_them() {
    let dir = common::artefact_dir("cli_encode_structured_edits");
    let pcap = samples_pcap(&dir);
    let edits: [(&str, &str, Value, &str, Value); 5] = [
        ("/mcmember", "/mcmember/port_gid", "fd00::7".into(), "infiniband.mcmemberrecord.portgid", "fd00::7".into()),
        (
            "/mcmember",
            "/mad/tid",
            "0x0123456789abcdef".into(),
            "infiniband.mad.transactionid",
            0x0123_4567_89ab_cdefu64.into(),
        ),
        ("/mcmember", "/sa/component_mask", "0x0000000000000003".into(), "infiniband.sa.componentmask", 3.into()),
        ("/mcmember", "/rmpp/status", 5.into(), "infiniband.rmpp.rmppstatus", 5.into()),
        // REQ: the only message with a primary path.
        (
            "/cm/fields/primary_path",
            "/cm/fields/local_comm_id",
            0x1234_5678.into(),
            "infiniband.cm.req",
            0x1234_5678.into(),
        ),
    ];
    for (pick, edit, value, field, want) in edits {
        let got = edit_and_dissect(&dir, &pcap, pick, edit, &value, field);
        assert_eq!(tshark_value(&got), want, "{edit}: tshark's {field} is {got:?}");
    }
}

/// Hostile structured members: exit 2 and a message naming the member, never a panic.
#[test]
fn hostile_structured_members_are_usage_errors_naming_the_field() {
    let dir = common::artefact_dir("cli_encode_structured_hostile");
    let json = decode_json(&samples_pcap(&dir));
    let join: Value =
        json.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()).find(|v| v.get("mcmember").is_some()).unwrap();
    let cases: [(&str, Value, &str); 6] = [
        ("/mad/tid", Value::Bool(true), "mad.tid"),
        ("/mcmember/mtu", 999.into(), "mcmember.mtu"),
        ("/mcmember/mtu", 200.into(), "mcmember.mtu"),
        ("/mcmember/mgid", "not-a-gid".into(), "mcmember.mgid"),
        ("/mcmember/q_key", (-5).into(), "mcmember.q_key"),
        ("/sa/component_mask", "0x1ffffffffffffffff".into(), "sa.component_mask"),
    ];
    for (ptr, val, want) in cases {
        let mut v = join.clone();
        *v.pointer_mut(ptr).unwrap() = val;
        let o = run_encode(&[], format!("{v}\n").as_bytes(), &dir.join("x.pcap"));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{ptr}: {stderr}");
        assert!(stderr.contains(&format!("line 1: {want}")), "{ptr}: {stderr}");
        assert!(!stderr.contains("panicked"), "{ptr}: {stderr}");
    }
}

/// Issue 36 item 3: a CM REQ from `roce decode --json`, `payload` and `raw` dropped, one field
/// set with jq — `.cm.fields.service_id`, or the view `.cm.port` — encodes: the edited side
/// reaches the wire (tshark reads the service ID), the other follows it, and one line on
/// stderr says which side went to the wire and how that was told.
#[test]
fn a_field_or_its_view_edited_alone_without_payload_reaches_the_wire() {
    let dir = common::artefact_dir("cli_encode_restated");
    let pcap = samples_pcap(&dir);
    let req: Value = decode_json(&pcap)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["cm"]["message"] == "REQ")
        .unwrap();
    let sid = u64::from_str_radix(req["cm"]["fields"]["service_id"].as_str().unwrap().trim_start_matches("0x"), 16);
    let sid = sid.unwrap();
    let cases: [(&str, Value, u64, &str); 2] = [
        (
            "/cm/fields/service_id",
            format!("0x{:016x}", (sid & !0xffff) | 5000).into(),
            5000,
            "cm.port_space/cm.port follows cm.fields.service_id",
        ),
        ("/cm/port", 5001.into(), 5001, "cm.fields.service_id from cm.port_space/cm.port"),
    ];
    for (edit, value, port, note) in cases {
        let mut v = req.clone();
        let m = v.as_object_mut().unwrap();
        m.remove("payload");
        m.remove("raw");
        *v.pointer_mut(edit).unwrap() = value;
        let out = dir.join(format!("{}.pcap", edit.replace('/', "_")));
        let o = run_encode(&[], format!("{v}\n").as_bytes(), &out);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{edit}: {stderr}");
        assert!(stderr.contains(&format!("{note} (the line's checksum tells which was edited)")), "{edit}: {stderr}");
        assert!(stderr.contains("(1 with restating members settled)"), "{edit}: {stderr}");
        let t = Command::new(common::tshark())
            .arg("-r")
            .arg(&out)
            .args(["-T", "fields", "-e", "infiniband.cm.req.serviceid"])
            .output()
            .unwrap();
        let got = String::from_utf8_lossy(&t.stdout).trim().to_string();
        assert_eq!(tshark_value(&got), Value::from((sid & !0xffff) | port), "{edit}: tshark reads {got}");
        let back: Value = serde_json::from_str(decode_json(&out).lines().next().unwrap()).unwrap();
        assert_eq!((&back["cm"]["port"], &back["icrc"]), (&Value::from(port), &Value::from("ok")), "{edit}");
    }
}
