//! `roce decode` as a user runs it: the binary, its exit codes and its two output forms.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command};

use crate::common;
use crate::common::netns::Netns;

fn roce() -> Command {
    Command::new(env!("CARGO_BIN_EXE_roce"))
}

fn sample() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/sample.pcap")
}

#[test]
fn decodes_every_frame_of_the_sample_one_line_each() {
    let n = roce_decode::samples::sample_frames().len();
    let out = roce().arg("decode").arg(sample()).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), n);
    assert!(lines
        .iter()
        .any(|l| l.contains("SubnAdmDelete(MCMemberRecord)") && l.contains("mask=0x10003") && l.contains("ICRC ok")));
    assert!(lines.iter().any(|l| l.contains("ICRC bad")));
    assert!(lines.iter().any(|l| l.contains("IGMPv3") && l.contains("not RoCEv2")));
    assert!(lines.iter().any(|l| l.contains("malformed")));
}

#[test]
fn json_is_one_object_per_frame_in_order_with_numbers() {
    let out = roce().args(["decode", "--json"]).arg(sample()).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut roce_frames = 0;
    for (i, line) in text.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("line {i}: {e}: {line}"));
        assert_eq!(v["frame"], i + 1);
        if v["kind"] == "rocev2" && v.get("error").is_none() {
            roce_frames += 1;
            for k in ["opcode", "dest_qp", "psn", "p_key"] {
                assert!(v[k].is_u64(), "line {i}: {k}");
            }
            if let Some(tid) = v.get("mad").and_then(|m| m.get("tid")) {
                let t = tid.as_str().expect("TIDs are strings");
                assert!(t.starts_with("0x") && t.len() == 18, "line {i}: {t}");
            }
            assert!(v["icrc"] == "ok" || v["icrc"] == "bad");
        }
    }
    assert!(roce_frames > 30);
    assert_eq!(text.lines().count(), roce_decode::samples::sample_frames().len());
}

#[test]
fn reads_pcapng_as_written_by_tshark() {
    let tshark = common::tshark();
    let dir = common::artefact_dir("cli_decode_pcapng");
    let ng = dir.join("sample.pcapng");
    let st = Command::new(tshark).arg("-r").arg(sample()).args(["-F", "pcapng", "-w"]).arg(&ng).status().unwrap();
    assert!(st.success());
    let a = roce().args(["decode"]).arg(sample()).output().unwrap();
    let b = roce().args(["decode"]).arg(&ng).output().unwrap();
    assert!(b.status.success());
    assert_eq!(String::from_utf8_lossy(&a.stdout), String::from_utf8_lossy(&b.stdout));
}

#[test]
fn unreadable_files_fail_with_a_clear_message() {
    let out = roce().args(["decode", "/nonexistent/x.pcap"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/x.pcap") && err.contains("No such file"), "{err}");

    let dir = common::artefact_dir("cli_decode_bad");
    let junk = dir.join("junk.pcap");
    std::fs::write(&junk, b"this is not a capture file at all").unwrap();
    let out = roce().arg("decode").arg(&junk).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a pcap"), "{}", String::from_utf8_lossy(&out.stderr));

    // A capture with a header and no frames is read fine: nothing to print, exit 0.
    let empty = dir.join("empty.pcap");
    std::fs::write(&empty, roce_decode::capture::PcapFileWriter::new(Vec::new()).unwrap().into_inner()).unwrap();
    let out = roce().arg("decode").arg(&empty).output().unwrap();
    assert!(out.status.success());
    assert!(out.stdout.is_empty());
}

#[test]
fn help_lists_decode_with_an_example() {
    let out = roce().args(["decode", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Example: roce decode"), "{text}");
}

// --- Streaming, link types, the JSON schema (issue 12) ---

use std::io::{Read as _, Write as _};
use std::process::Stdio;

/// The sample's frames with their timestamps.
fn sample_records() -> Vec<roce_decode::capture::CapturedFrame> {
    roce_decode::capture::read_file(&sample()).unwrap()
}

/// A pcap in either byte order and resolution, with `linktype`.
fn pcap(big: bool, nanos: bool, linktype: u32, frames: &[(std::time::Duration, Vec<u8>)]) -> Vec<u8> {
    let w32 = |o: &mut Vec<u8>, v: u32| o.extend(if big { v.to_be_bytes() } else { v.to_le_bytes() });
    let mut o = Vec::new();
    w32(&mut o, if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 });
    o.extend(if big { [0, 2, 0, 4] } else { [2, 0, 4, 0] });
    w32(&mut o, 0);
    w32(&mut o, 0);
    w32(&mut o, 262_144);
    w32(&mut o, linktype);
    for (t, d) in frames {
        w32(&mut o, t.as_secs() as u32);
        w32(&mut o, if nanos { t.subsec_nanos() } else { t.subsec_micros() });
        w32(&mut o, d.len() as u32);
        w32(&mut o, d.len() as u32);
        o.extend_from_slice(d);
    }
    o
}

/// Linux cooked v1 header in front of the sample frame's network layer.
fn sll(eth: &[u8]) -> Vec<u8> {
    let mut o = vec![0, 4, 0, 1, 0, 6];
    o.extend_from_slice(&eth[6..12]);
    o.extend_from_slice(&[0, 0]);
    o.extend_from_slice(&eth[12..14]);
    o.extend_from_slice(&eth[14..]);
    o
}

/// Linux cooked v2 header.
fn sll2(eth: &[u8]) -> Vec<u8> {
    let mut o = eth[12..14].to_vec();
    o.extend_from_slice(&[0, 0, 0, 0, 0, 7, 0, 1, 0, 6]);
    o.extend_from_slice(&eth[6..12]);
    o.extend_from_slice(&[0, 0]);
    o.extend_from_slice(&eth[14..]);
    o
}

/// Sample frames without VLAN tags whose EtherType is IPv4 or IPv6.
fn ip_frames() -> Vec<(std::time::Duration, Vec<u8>)> {
    sample_records()
        .into_iter()
        .filter(|f| f.data.len() > 14 && matches!(&f.data[12..14], [0x08, 0x00] | [0x86, 0xdd]))
        .map(|f| (f.timestamp, f.data))
        .collect()
}

/// A pcapng with one section per byte order, each with an Ethernet and an SLL2 interface
/// (the SLL2 one with nanosecond if_tsresol), frames alternating between them.
fn pcapng_two_linktypes() -> (Vec<u8>, usize) {
    let frames = ip_frames();
    let mut o = Vec::new();
    for big in [false, true] {
        let w32 = |o: &mut Vec<u8>, v: u32| o.extend(if big { v.to_be_bytes() } else { v.to_le_bytes() });
        let w16 = |o: &mut Vec<u8>, v: u16| o.extend(if big { v.to_be_bytes() } else { v.to_le_bytes() });
        let block = |o: &mut Vec<u8>, t: u32, body: &[u8]| {
            let len = 12 + body.len().div_ceil(4) * 4;
            w32(o, t);
            w32(o, len as u32);
            o.extend_from_slice(body);
            o.extend(std::iter::repeat_n(0, len - 12 - body.len()));
            w32(o, len as u32);
        };
        let mut shb = Vec::new();
        w32(&mut shb, 0x1a2b_3c4d);
        w16(&mut shb, 1);
        w16(&mut shb, 0);
        shb.extend_from_slice(&u64::MAX.to_le_bytes());
        block(&mut o, 0x0a0d_0d0a, &shb);
        for (lt, ns) in [(1u16, false), (276, true)] {
            let mut idb = Vec::new();
            w16(&mut idb, lt);
            w16(&mut idb, 0);
            w32(&mut idb, 0);
            if ns {
                w16(&mut idb, 9);
                w16(&mut idb, 1);
                idb.extend_from_slice(&[9, 0, 0, 0]);
                w32(&mut idb, 0);
            }
            block(&mut o, 1, &idb);
        }
        for (i, (t, d)) in frames.iter().enumerate() {
            let (ifid, data, units) =
                if i % 2 == 0 { (0, d.clone(), t.as_micros() as u64) } else { (1, sll2(d), t.as_nanos() as u64) };
            let mut epb = Vec::new();
            w32(&mut epb, ifid);
            w32(&mut epb, (units >> 32) as u32);
            w32(&mut epb, units as u32);
            w32(&mut epb, data.len() as u32);
            w32(&mut epb, data.len() as u32);
            epb.extend_from_slice(&data);
            block(&mut o, 6, &epb);
        }
    }
    (o, frames.len() * 2)
}

fn decode_bytes(args: &[&str], input: &[u8]) -> std::process::Output {
    let mut c = roce()
        .arg("decode")
        .args(args)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = c.stdin.take().unwrap();
    let input = input.to_vec();
    let w = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = c.wait_with_output().unwrap();
    w.join().unwrap();
    out
}

/// The summary text after the number, time and length columns, error offsets blanked (they
/// count from the start of the captured frame, so they differ between link types).
fn texts(out: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| {
            let mut words: Vec<&str> = l.split_whitespace().skip(3).collect();
            for i in 1..words.len() {
                if words[i - 1] == "byte" {
                    words[i] = "_";
                }
            }
            words.join(" ")
        })
        .collect()
}

#[test]
fn standard_input_and_count_give_the_same_lines_as_the_file() {
    let file = roce().arg("decode").arg(sample()).output().unwrap();
    let bytes = std::fs::read(sample()).unwrap();
    let stdin = decode_bytes(&[], &bytes);
    assert!(stdin.status.success());
    assert_eq!(String::from_utf8_lossy(&file.stdout), String::from_utf8_lossy(&stdin.stdout));
    let five = decode_bytes(&["-c", "5"], &bytes);
    assert!(five.status.success());
    let lines: Vec<&str> = std::str::from_utf8(&file.stdout).unwrap().lines().take(5).collect();
    assert_eq!(String::from_utf8_lossy(&five.stdout), lines.join("\n") + "\n");
    // The summary carries the frame length on the wire (as tshark's Length column).
    let first = std::str::from_utf8(&file.stdout).unwrap().lines().next().unwrap().to_string();
    assert_eq!(first.split_whitespace().nth(2), Some(sample_records()[0].orig_len.to_string().as_str()), "{first}");
}

#[test]
fn a_capture_cut_short_prints_every_complete_frame_then_warns_with_the_offset() {
    let bytes = std::fs::read(sample()).unwrap();
    let full = roce().arg("decode").arg(sample()).output().unwrap();
    let full_lines: Vec<String> = String::from_utf8_lossy(&full.stdout).lines().map(String::from).collect();
    // Record offsets: 24-byte header, then 16 + len each.
    let mut offsets = vec![24usize];
    for f in sample_records() {
        let last = *offsets.last().unwrap();
        offsets.push(last + 16 + f.data.len());
    }
    for (complete, cut) in [(10usize, offsets[10] + 7), (10, offsets[10] + 20), (3, offsets[3] + 1)] {
        let out = decode_bytes(&[], &bytes[..cut]);
        assert_eq!(out.status.code(), Some(2));
        let lines: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(String::from).collect();
        assert_eq!(lines, full_lines[..complete], "cut at {cut}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&format!("byte offset {}", offsets[complete])) && err.contains("cut short"), "{err}");
        // -q silences the warning, not the frames or the status.
        let q = decode_bytes(&["-q"], &bytes[..cut]);
        assert_eq!(q.status.code(), Some(2));
        assert!(q.stderr.is_empty());
        assert_eq!(q.stdout, out.stdout);
    }
}

#[test]
fn pcap_byte_orders_resolutions_and_link_types_decode_alike() {
    let frames = ip_frames();
    let eth = decode_bytes(&[], &pcap(false, false, 1, &frames));
    assert!(eth.status.success());
    let want = texts(&eth.stdout);
    assert_eq!(want.len(), frames.len());
    for (big, nanos) in [(true, false), (false, true), (true, true)] {
        let out = decode_bytes(&[], &pcap(big, nanos, 1, &frames));
        assert!(out.status.success());
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&eth.stdout),
            "big {big} nanos {nanos}"
        );
    }
    let raw: Vec<_> = frames.iter().map(|(t, d)| (*t, d[14..].to_vec())).collect();
    let v4: Vec<_> = raw.iter().filter(|(_, d)| d[0] >> 4 == 4).cloned().collect();
    let v6: Vec<_> = raw.iter().filter(|(_, d)| d[0] >> 4 == 6).cloned().collect();
    let sllv: Vec<_> = frames.iter().map(|(t, d)| (*t, sll(d))).collect();
    let sll2v: Vec<_> = frames.iter().map(|(t, d)| (*t, sll2(d))).collect();
    for (lt, fr, name) in [(113u32, &sllv, "SLL"), (276, &sll2v, "SLL2"), (101, &raw, "raw")] {
        let out = decode_bytes(&[], &pcap(false, false, lt, fr));
        assert!(out.status.success(), "{name}");
        let got = texts(&out.stdout);
        assert_eq!(got.len(), want.len(), "{name}");
        for (g, w) in got.iter().zip(&want) {
            // The same dissection, minus what only Ethernet carries (ARP is not IP).
            assert_eq!(g, w, "{name}");
        }
        let json = decode_bytes(&["--json"], &pcap(false, false, lt, fr));
        let first: serde_json::Value =
            serde_json::from_slice(json.stdout.split(|&b| b == b'\n').next().unwrap()).unwrap();
        assert_eq!(first["link_type"], lt);
        match lt {
            113 => assert_eq!(first["sll"]["src"], "02:00:00:00:00:01", "{first}"),
            276 => assert_eq!(first["sll2"]["ifindex"], 7, "{first}"),
            _ => assert!(first.get("eth").is_none()),
        }
    }
    for (lt, fr, version) in [(228u32, &v4, 4u8), (229, &v6, 6)] {
        assert!(!fr.is_empty());
        let out = decode_bytes(&[], &pcap(false, false, lt, fr));
        assert!(out.status.success());
        let same: Vec<_> = frames.iter().filter(|(_, d)| d[14] >> 4 == version).cloned().collect();
        let eth = decode_bytes(&[], &pcap(false, false, 1, &same));
        assert_eq!(texts(&out.stdout), texts(&eth.stdout), "link type {lt}");
    }
    // Malformed RoCEv2 behind SLL: the error offset counts from the start of the captured frame.
    let bad = frames.iter().find(|(_, d)| d.len() > 100 && d[23] == 17).unwrap().1.clone();
    let mut cut = sll(&bad);
    cut.truncate(16 + 20 + 8 + 6); // inside the BTH
    let out = decode_bytes(&["--json"], &pcap(false, false, 113, &[(std::time::Duration::ZERO, cut)]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.get("ip").is_some() && v.get("udp").is_some(), "{v}");
    // The IPv4 total length (field at 2) claims more than the capture holds: 16 + 2.
    assert_eq!(v["error"]["offset"], 16 + 2, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("at byte 18"), "{v}");
}

#[test]
fn pcapng_with_two_link_types_in_two_byte_orders() {
    let (ng, n) = pcapng_two_linktypes();
    let out = decode_bytes(&["--json"], &ng);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), n);
    let frames = ip_frames();
    for (i, v) in lines.iter().enumerate() {
        // Each section alternates from its first frame (interface 0, Ethernet).
        let k = i % frames.len();
        let (t, _) = &frames[k];
        assert_eq!(v["link_type"], if k.is_multiple_of(2) { 1 } else { 276 });
        assert_eq!(v["interface"], (k % 2) as u64);
        let want = format!(
            "{}.{:09}",
            t.as_secs(),
            if k.is_multiple_of(2) { t.subsec_micros() * 1000 } else { t.subsec_nanos() }
        );
        assert_eq!(v["time_epoch"], want.as_str());
    }
}

#[test]
fn a_closed_standard_output_ends_quietly_with_141() {
    let dir = common::artefact_dir("cli_decode_pipe");
    let f = dir.join("mixed.pcap");
    std::fs::write(&f, roce_decode::samples_mixed::mixed_capture(50_000, 3)).unwrap();
    for json in [false, true] {
        let mut c = roce();
        c.arg("decode").args(if json { &["--json"][..] } else { &[][..] }).arg(&f);
        let mut child = c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let mut out = child.stdout.take().unwrap();
        let mut first = [0u8; 100];
        out.read_exact(&mut first).unwrap();
        drop(out);
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(141));
        assert!(o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
    }
}

/// Peak resident memory of a child, from wait4's rusage (KiB).
fn wait_rss(child: std::process::Child) -> (i32, i64) {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain data; pid is our child, not yet reaped.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(r, pid);
    std::mem::forget(child);
    (libc::WEXITSTATUS(status), ru.ru_maxrss)
}

/// The peak resident memory (VmHWM, KiB) of the live process `pid`, from /proc.
fn vm_hwm_kib(pid: u32) -> i64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM in /proc/PID/status");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("VmHWM in KiB")
}

#[test]
fn memory_stays_flat_on_a_gigabyte_from_standard_input() {
    // 1 GiB: the mixed frames interleaved with 1 MiB frames of an unknown EtherType (cheap to
    // decode, so the test is about memory, not speed).
    let mut child = roce()
        .args(["decode", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let pid = child.id();
    let writer = std::thread::spawn(move || {
        let mut big = vec![0u8; 1 << 20];
        big[12] = 0x88;
        big[13] = 0xb5;
        let mixed: Vec<Vec<u8>> = roce_decode::samples_mixed::mixed_frames(2_000, 9).collect();
        let mut w = std::io::BufWriter::new(&mut stdin);
        let header = pcap(false, true, 1, &[]);
        w.write_all(&header).unwrap();
        let mut total = header.len() as u64;
        let mut i = 0u32;
        let rec = |w: &mut std::io::BufWriter<_>, d: &[u8], i: u32| {
            let mut h = Vec::with_capacity(16);
            h.extend(1_764_460_800u32.to_le_bytes());
            h.extend(i.to_le_bytes());
            h.extend((d.len() as u32).to_le_bytes());
            h.extend((d.len() as u32).to_le_bytes());
            w.write_all(&h)?;
            w.write_all(d)
        };
        while total < (1 << 30) {
            rec(&mut w, &big, i).unwrap();
            total += 16 + big.len() as u64;
            for d in mixed.iter().skip((i as usize * 20) % 1980).take(20) {
                rec(&mut w, d, i).unwrap();
                total += 16 + d.len() as u64;
            }
            i += 1;
        }
        w.flush().unwrap();
        drop(w);
        // The child's own high-water mark, read while it still waits for more input. wait4's
        // ru_maxrss would not do: posix_spawn's vfork lends the child this test process's
        // memory until exec, and the kernel carries that mm's peak into ru_maxrss, so the
        // figure grows with whatever the other tests of this binary hold at that moment.
        (total, vm_hwm_kib(pid))
    });
    let (total, rss_kib) = writer.join().unwrap();
    let (code, _) = wait_rss(child);
    assert_eq!(code, 0);
    eprintln!("decoded {total} bytes from standard input with a peak RSS of {rss_kib} KiB");
    assert!(total >= 1 << 30);
    assert!(rss_kib < 48 * 1024, "peak RSS {rss_kib} KiB for a {total}-byte capture");
}

/// A ServiceRecord Set and OpenSM's GetResp to it, as `roce sa-query -S --register` and the SA
/// exchange them (the record written out by hand beside it).
fn service_record_frames() -> Vec<(std::time::Duration, Vec<u8>)> {
    use roce_decode::samples::{gsi_frame, IP_A, IP_SA, MAC_A, MAC_SA};
    use roce_wire::mad::{MadStatus, Method};
    use roce_wire::sa::{attr, SaData, SaMad};
    use roce_wire::service_record::ServiceRecord;
    let rec = ServiceRecord {
        service_id: 0x1000_0000_0001_0107,
        service_gid: roce_wire::Gid::from_ipv4(IP_A),
        service_p_key: 0xFFFF,
        service_lease: 600,
        service_name: ServiceRecord::name_field("roce-svc"),
        ..ServiceRecord::default()
    };
    let set = SaMad::request(Method::Set, 0x42, attr::SERVICE_RECORD, 0x57, SaData::service(rec));
    let resp = set.response_to(Method::Get, MadStatus::SUCCESS, SaData::service(rec));
    let (a, sa) = (IP_A.into(), IP_SA.into());
    vec![
        (std::time::Duration::ZERO, gsi_frame(MAC_A, MAC_SA, a, sa, 0, &set.to_bytes())),
        (std::time::Duration::from_millis(1), gsi_frame(MAC_SA, MAC_A, sa, a, 0, &resp.to_bytes())),
    ]
}

/// Golden: the ServiceRecord's fields in `roce decode --json` and its summary.
#[test]
fn service_record_in_json_and_summary() {
    let input = pcap(false, false, 1, &service_record_frames());
    let out = decode_bytes(&["--json"], &input);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    let sa = &lines[0]["sa"];
    assert_eq!(sa["component_mask"], "0x0000000000000057");
    assert_eq!(sa["component_mask_names"], "ServiceID|ServiceGID|ServiceP_Key|ServiceLease|ServiceName");
    let r = &lines[0]["service_record"];
    assert_eq!(r["service_id"], "0x1000000000010107");
    assert_eq!(r["service_gid"], "::ffff:198.18.0.1");
    assert_eq!((r["service_p_key"].as_u64(), r["service_lease"].as_u64()), (Some(0xFFFF), Some(600)));
    assert_eq!(r["service_key"], "00".repeat(16));
    assert_eq!(r["service_name"], format!("{}{}", "726f63652d737663", "00".repeat(56)));
    assert_eq!(r["service_name_text"], "roce-svc");
    assert_eq!(r["service_data16"], serde_json::json!([0, 0, 0, 0, 0, 0, 0, 0]));
    assert_eq!(lines[1]["sa"]["attribute_offset"], 22);
    assert_eq!(lines[1]["mad"]["method_name"], "SubnAdmGetResp");
    let out = decode_bytes(&[], &input);
    let summary = String::from_utf8(out.stdout).unwrap();
    assert!(
        summary.contains("SubnAdmSet(ServiceRecord)")
            && summary.contains(
                "ServiceID=0x1000000000010107 ServiceGID=::ffff:198.18.0.1 ServiceName=\"roce-svc\" Lease=600"
            ),
        "{summary}"
    );
}

/// Every JSON line the tests here produce, against spec/decode.schema.json (python's
/// jsonschema in the venv tests/setup.sh makes; a missing validator fails).
#[test]
fn every_json_line_matches_the_schema() {
    let dir = common::artefact_dir("cli_decode_schema");
    let frames = ip_frames();
    let mut inputs: Vec<(String, Vec<u8>)> = vec![
        ("sample".into(), std::fs::read(sample()).unwrap()),
        (
            "tcpdump_any".into(),
            std::fs::read(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/tcpdump-any.pcap")).unwrap(),
        ),
        ("mixed".into(), roce_decode::samples_mixed::mixed_capture(3_000, 5)),
        ("rmpp".into(), std::fs::read(rmpp_capture()).unwrap()),
        ("rmpp_gap".into(), pcap_frames(&rmpp_capture(), &[1, 2, 3, 4, 5, 6, 8, 9, 14, 15, 15, 16, 17])),
        ("service_record".into(), pcap(false, false, 1, &service_record_frames())),
        ("pcapng".into(), pcapng_two_linktypes().0),
        ("sll".into(), pcap(false, false, 113, &frames.iter().map(|(t, d)| (*t, sll(d))).collect::<Vec<_>>())),
        ("sll2".into(), pcap(true, true, 276, &frames.iter().map(|(t, d)| (*t, sll2(d))).collect::<Vec<_>>())),
        (
            "raw".into(),
            pcap(false, false, 101, &frames.iter().map(|(t, d)| (*t, d[14..].to_vec())).collect::<Vec<_>>()),
        ),
    ];
    // Every fuzz corpus input (malformed frames of every kind), as Ethernet, SLL and raw IP.
    let mut fuzz = Vec::new();
    for sub in ["seeds/decode", "seeds/l2", "corpus/decode", "corpus/frame", "corpus/l2", "corpus/roundtrip"] {
        let d = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz").join(sub);
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd.flatten() {
                fuzz.push((std::time::Duration::ZERO, std::fs::read(e.path()).unwrap()));
            }
        }
    }
    assert!(fuzz.len() > 100, "fuzz corpus");
    inputs.push(("fuzz_eth".into(), pcap(false, false, 1, &fuzz)));
    inputs.push(("fuzz_sll".into(), pcap(false, false, 113, &fuzz)));
    inputs.push(("fuzz_raw".into(), pcap(false, false, 101, &fuzz)));
    inputs.push(("fuzz_sll2".into(), pcap(false, false, 276, &fuzz)));
    inputs.push(("other_link".into(), pcap(false, false, 147, &fuzz[..10])));
    // Native InfiniBand: the shipped captures, and the fuzz inputs as IB packets and ERF records.
    for name in ["ib-native", "ib-erf"] {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/{name}.pcap"));
        inputs.push((name.replace('-', "_"), std::fs::read(path).unwrap()));
    }
    inputs.push(("fuzz_infiniband".into(), pcap(false, false, 247, &fuzz)));
    inputs.push(("fuzz_erf".into(), pcap(false, false, 197, &fuzz)));
    let mut files = Vec::new();
    let mut lines = 0;
    for (name, bytes) in &inputs {
        let out = decode_bytes(&["--json"], bytes);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        lines += out.stdout.iter().filter(|&&b| b == b'\n').count();
        let f = dir.join(format!("{name}.jsonl"));
        std::fs::write(&f, &out.stdout).unwrap();
        files.push(f);
    }
    common::validate_json("decode.schema.json", &files, lines);
}

/// `roce decode -i veth1 ARGS OUT` in `ns`, started: the socket is bound once "listening" is
/// printed. Returns the child, that first line of its stderr and the rest of its stderr.
fn decode_live(ns: &Netns, args: &[&str], out: &Path, stdout: Stdio) -> (Child, String, BufReader<ChildStderr>) {
    let mut child =
        ns.roce(["decode", "-i", "veth1"]).args(args).arg(out).stdout(stdout).stderr(Stdio::piped()).spawn().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    (child, first, err)
}

/// `roce decode -i` on one end of a veth pair while scapy sends the sample's frames from the
/// other: the same lines as decoding the file, and `-w` keeps the same bytes.
#[test]
fn live_capture_on_a_veth_gives_the_same_output_as_the_file() {
    let python = common::scapy_python();
    let ns = Netns::veth_pair("decode-live");
    let dir = common::artefact_dir("cli_decode_live");
    let seen = dir.join("seen.pcap");
    let records = sample_records();
    let n = records.len();
    let (mut child, first, _err) = decode_live(&ns, &["-c", &n.to_string(), "-w"], &seen, Stdio::piped());
    assert!(first.contains("listening on veth1"), "{first}");
    let script = format!(
        "from scapy.all import rdpcap, sendp\nimport time\nfor p in rdpcap({:?}):\n    sendp(p, iface='veth0', verbose=False)\n    time.sleep(0.002)\n",
        sample().display().to_string()
    );
    let st = ns.cmd(&python).args(["-c", &script]).status().unwrap();
    assert!(st.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "roce decode -i did not see {n} frames");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let file = roce().arg("decode").arg(sample()).output().unwrap();
    assert_eq!(texts(&out.stdout), texts(&file.stdout));
    // -w kept exactly the bytes seen.
    let kept = roce_decode::capture::read_file(&seen).unwrap();
    assert_eq!(kept.len(), n);
    for (k, r) in kept.iter().zip(&records) {
        assert_eq!(k.data, r.data);
    }
    // The same lines again from the saved file.
    let again = roce().arg("decode").arg(&seen).output().unwrap();
    assert_eq!(texts(&again.stdout), texts(&file.stdout));

    // Without -c it runs until a signal: SIGINT ends it with 130, the -w file complete.
    let partial = dir.join("until_sigint.pcap");
    let (mut child, first, err) = decode_live(&ns, &["-w"], &partial, Stdio::null());
    assert!(first.contains("listening"), "{first}");
    let st = ns.cmd(&python).args(["-c", &script]).status().unwrap();
    assert!(st.success());
    std::thread::sleep(std::time::Duration::from_millis(300));
    // `ip netns exec` execs the command: the child's pid is roce's.
    // SAFETY: kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) }, 0);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    drop(err);
    assert_eq!(roce_decode::capture::read_file(&partial).unwrap().len(), n);
}

#[test]
fn live_capture_needs_an_interface_that_exists() {
    let out = roce().args(["decode", "-i", "no-such-if0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-if0"));
}

/// A real `tcpdump -i any` capture (Linux cooked v2, tests/data/tcpdump-any.pcap): scapy sent
/// the sample's frames on one end of a veth pair, tcpdump saw each twice (out on veth0, in on
/// veth1). Every frame decodes as its Ethernet original does. (The capture was made of the
/// sample's first 44 frames; the XRC frames after them came later.)
/// How many of the sample's frames tests/data/tcpdump-any.pcap holds (each twice).
const TCPDUMP_ANY_FRAMES: usize = 44;

#[test]
fn a_tcpdump_any_capture_decodes_like_the_ethernet_sample() {
    let any = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/tcpdump-any.pcap");
    let out = roce().arg("decode").arg(&any).output().unwrap();
    assert!(out.status.success());
    let got = texts(&out.stdout);
    let mut want = texts(&roce().arg("decode").arg(sample()).output().unwrap().stdout);
    want.truncate(TCPDUMP_ANY_FRAMES);
    assert_eq!(got.len(), 2 * want.len());
    for (i, w) in want.iter().enumerate() {
        assert_eq!(&got[2 * i], w, "frame {}", 2 * i + 1);
        assert_eq!(&got[2 * i + 1], w, "frame {}", 2 * i + 2);
    }
    let json = roce().args(["decode", "--json", "-c", "2"]).arg(&any).output().unwrap();
    let kinds: Vec<serde_json::Value> =
        String::from_utf8_lossy(&json.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(kinds[0]["sll2"]["packet_type_name"], "outgoing");
    assert_eq!(kinds[1]["sll2"]["packet_type_name"], "broadcast"); // an ARP request
}

/// A report from a host in many groups (more than the old cap of 8 records) decodes whole.
#[test]
fn an_igmpv3_report_of_300_records_decodes_whole() {
    use roce_wire::igmp::{GroupRecordRepr, IgmpMessage, RecordType, V3ReportRepr};
    use roce_wire::l2::{EmitFrame, IgmpFrame, List};
    let mut records = List::new();
    for i in 0..300u32 {
        records
            .push(GroupRecordRepr::new(RecordType::ModeIsExclude, std::net::Ipv4Addr::from(0xef00_0100 + i)))
            .unwrap();
    }
    let msg = IgmpMessage::V3Report(V3ReportRepr { reserved1: 0, reserved2: 0, records });
    let f = IgmpFrame::new([2, 0, 0, 0, 0, 1], std::net::Ipv4Addr::new(198, 18, 0, 1), msg);
    let mut b = vec![0u8; f.buffer_len()];
    f.emit(&mut b);
    let out = decode_bytes(&["--json"], &pcap(false, false, 1, &[(std::time::Duration::ZERO, b)]));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.get("error").is_none(), "{v}");
    assert_eq!(v["igmp"]["records"].as_array().unwrap().len(), 300);
    assert_eq!(v["igmp"]["records"][299]["record_type_name"], "MODE_IS_EXCLUDE");
}

/// A real RMPP exchange, cut from the interop_rmpp artefact (kernel 6.12 guest as the SA's RMPP
/// sender, our sa-query as the receiver): frames 3–9 a GetTable of 12 MCMemberRecords over
/// IPv6 (4 DATA segments, ACKs of segments 1 and 4), frames 12–18 the same for 4
/// ServiceRecords.
fn rmpp_capture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/rmpp-table.pcap")
}

/// The classic pcap at `path` with only the frames numbered in `keep` (from 1), in that order.
fn pcap_frames(path: &std::path::Path, keep: &[usize]) -> Vec<u8> {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..4], &[0xd4, 0xc3, 0xb2, 0xa1], "a little-endian microsecond pcap");
    let mut recs = Vec::new();
    let mut at = 24;
    while at + 16 <= b.len() {
        let incl = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        recs.push(&b[at..at + 16 + incl]);
        at += 16 + incl;
    }
    let mut out = b[..24].to_vec();
    for &n in keep {
        out.extend_from_slice(recs[n - 1]);
    }
    out
}

fn json_lines(out: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(out).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn rmpp_segments_decode_no_record_past_the_first_and_the_table_is_whole_on_the_last() {
    let out = roce().arg("decode").arg(rmpp_capture()).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 18);
    assert!(
        lines[3].contains("MGID=::ffff:239.9.0.1 ")
            && lines[3].contains("RMPP DATA seg 1/4 (3 records here), table continues"),
        "{}",
        lines[3]
    );
    assert!(lines[4].contains("RMPP ACK seg 1 NewWindowLast 65"), "{}", lines[4]);
    for (i, seg) in [(5, 2), (6, 3)] {
        assert!(
            lines[i].contains(&format!("RMPP DATA seg {seg}/4 (200 bytes of the table), table continues")),
            "{}",
            lines[i]
        );
    }
    for l in [4, 5, 6, 7, 8, 13, 14, 15, 16, 17] {
        assert!(!lines[l].contains("MGID=") && !lines[l].contains("ServiceID="), "no record decoded: {}", lines[l]);
    }
    assert!(lines[7].contains("RMPP DATA seg 4/4 (72 bytes of the table) | table: 12 MCMemberRecords"), "{}", lines[7]);
    assert!(lines[8].contains("RMPP ACK seg 4 NewWindowLast 65"), "{}", lines[8]);
    assert!(
        lines[16].contains("RMPP DATA seg 4/4 (104 bytes of the table) | table: 4 ServiceRecords"),
        "{}",
        lines[16]
    );

    let out = roce().args(["decode", "--json"]).arg(rmpp_capture()).output().unwrap();
    assert!(out.status.success());
    let v = json_lines(&out.stdout);
    assert_eq!(v[3]["rmpp_segment"]["records_in_segment"], 3);
    assert_eq!(v[3]["rmpp_segment"]["total_segments"], 4);
    assert_eq!(v[5]["rmpp_segment"]["segment"], 2);
    assert_eq!(v[5]["rmpp_segment"]["data_len"], 200);
    assert_eq!(v[7]["rmpp_segment"]["data_len"], 72);
    assert_eq!(v[4]["rmpp_segment"]["type"], "ACK");
    assert_eq!(v[4]["rmpp_segment"]["new_window_last"], 65);
    for l in [4, 5, 6, 7, 8] {
        assert!(v[l].get("mcmember").is_none(), "frame {}", l + 1);
    }
    // The table holds the groups the interop test joined (tests/interop/rmpp.rs: 239.9.0.1..=12,
    // as the kernel's SA agent in the guest answered them).
    let t = &v[7]["sa_table"];
    assert_eq!(t["complete"], true);
    assert_eq!(t["count"], 12);
    assert_eq!(t["data_len"], 672);
    let recs = t["records"].as_array().unwrap();
    for (i, r) in recs.iter().enumerate() {
        assert_eq!(r["mgid"], format!("::ffff:239.9.0.{}", i + 1));
        assert_eq!(r["q_key"], recs[0]["q_key"]);
    }
    // The first segment's record is the table's first; its records are the table's first 3.
    assert_eq!(v[3]["mcmember"], recs[0]);
    assert_eq!(v[3]["rmpp_segment"]["records"].as_array().unwrap()[..], recs[..3]);
    assert_eq!(
        v[12]["rmpp_segment"]["records"].as_array().unwrap().len(),
        1,
        "one 176-byte ServiceRecord ends in 200 bytes"
    );
    // The ServiceRecords it registered: IDs 0x5000 + i named rmpp-i.
    let t = &v[16]["sa_table"];
    assert_eq!(t["count"], 4);
    for (i, r) in t["records"].as_array().unwrap().iter().enumerate() {
        assert_eq!(r["service_id"], format!("0x{:016x}", 0x5000 + i));
        assert_eq!(r["service_name_text"], format!("rmpp-{i}"));
    }
    for (l, x) in v.iter().enumerate() {
        assert_eq!(x.get("sa_table").is_some(), l == 7 || l == 16, "frame {}", l + 1);
    }
}

#[test]
fn an_rmpp_table_with_a_gap_is_incomplete_and_duplicates_and_orphans_are_counted() {
    let dir = common::artefact_dir("cli_decode_rmpp_gap");
    // Segment 3 of the MCMemberRecord table lost; the ServiceRecord table without its First,
    // segment 3 twice.
    let path = dir.join("gap.pcap");
    std::fs::write(&path, pcap_frames(&rmpp_capture(), &[1, 2, 3, 4, 5, 6, 8, 9, 14, 15, 15, 16, 17])).unwrap();
    let out = roce().arg("decode").arg(&path).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[6].contains("| table incomplete: 1 of 4 segments missing (3)"), "{}", lines[6]);
    assert!(!text.contains("table: "), "{text}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("RMPP: 0 tables whole, 1 incomplete, 0 duplicate segments, 4 segments without their table"),
        "{err}"
    );
    let out = roce().args(["decode", "--json"]).arg(&path).output().unwrap();
    let v = json_lines(&out.stdout);
    let t = &v[6]["sa_table"];
    assert_eq!(t["complete"], false);
    assert_eq!(t["missing"], serde_json::json!([3]));
    assert!(t.get("records").is_none());
    // -q silences the counters' warning.
    let out = roce().args(["decode", "-q"]).arg(&path).output().unwrap();
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_retransmitted_rmpp_segment_is_counted_once_and_the_table_stays_whole() {
    let dir = common::artefact_dir("cli_decode_rmpp_dup");
    let path = dir.join("dup.pcap");
    std::fs::write(&path, pcap_frames(&rmpp_capture(), &[3, 4, 4, 5, 6, 7, 6, 8, 9])).unwrap();
    let out = roce().args(["decode", "--json"]).arg(&path).output().unwrap();
    assert!(out.status.success());
    let v = json_lines(&out.stdout);
    let t = &v[7]["sa_table"];
    assert_eq!(t["complete"], true);
    assert_eq!(t["count"], 12);
    assert_eq!(t["duplicates"], 2);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("1 tables whole, 0 incomplete, 2 duplicate segments"), "{err}");
}

// --- The frame's length on every link type (issue 36 item 2) ---

/// A little-endian microsecond pcap of `linktype` whose records are (bytes held, length on
/// the wire): a length over the bytes is a record the snap length cut.
fn pcap_cut(linktype: u32, records: &[(Vec<u8>, u32)]) -> Vec<u8> {
    let mut o = pcap(false, false, linktype, &[]);
    for (i, (d, orig)) in records.iter().enumerate() {
        for v in [1_700_000_000 + i as u32, 0, d.len() as u32, *orig] {
            o.extend(v.to_le_bytes());
        }
        o.extend_from_slice(d);
    }
    o
}

/// The records of the classic little-endian pcap `b`: (bytes held, length on the wire).
fn pcap_records(b: &[u8]) -> Vec<(Vec<u8>, u32)> {
    let (mut recs, mut at) = (Vec::new(), 24);
    while at + 16 <= b.len() {
        let word = |k: usize| u32::from_le_bytes(b[at + k..at + k + 4].try_into().unwrap());
        let (incl, orig) = (word(8) as usize, word(12));
        recs.push((b[at + 16..at + 16 + incl].to_vec(), orig));
        at += 16 + incl;
    }
    recs
}

/// tests/data/ib-erf.pcap's records three ways: as ibdump wrote them (padded to 8 bytes), as
/// a DAG card's pcap holds them (the record stops at 16 + WLen while RLen counts the padding),
/// and cut by a 64-byte snap length.
fn erf_records() -> [Vec<(Vec<u8>, u32)>; 3] {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/ib-erf.pcap");
    let whole = pcap_records(&std::fs::read(path).unwrap());
    let to_wlen = |r: &[u8]| 16 + usize::from(u16::from_be_bytes([r[14], r[15]]));
    let dag = whole.iter().map(|(r, _)| (r[..to_wlen(r)].to_vec(), to_wlen(r) as u32)).collect();
    let cut = whole.iter().map(|(r, n)| (r[..r.len().min(64)].to_vec(), *n)).collect();
    [whole, dag, cut]
}

/// `len` and `cap_len` of every JSON line equal tshark's `frame.len` and `frame.cap_len`, on
/// every link type the reader takes, in pcap and pcapng, with frames whole and cut by the
/// snap length. ERF (197): the frame after the record's headers, not the record: ibdump's
/// records (padded to 8 bytes), a DAG card's (the pcap stops at 16 + WLen), one with an
/// extension header, one the snap length cut; the record's sizes are under `erf`.
#[test]
fn len_and_cap_len_are_the_frames_on_every_link_type_as_tshark_says() {
    let dir = common::artefact_dir("cli_decode_frame_len");
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let frames = ip_frames();
    let with = |f: fn(&[u8]) -> Vec<u8>| frames.iter().map(|(t, d)| (*t, f(d))).collect::<Vec<_>>();
    let version = |v: u8| -> Vec<_> {
        frames.iter().filter(|(_, d)| d[14] >> 4 == v).map(|(t, d)| (*t, d[14..].to_vec())).collect()
    };
    let eth_cut: Vec<(Vec<u8>, u32)> =
        frames.iter().map(|(_, d)| (d[..d.len().min(60)].to_vec(), d.len() as u32)).collect();
    let [erf, dag, erf_cut] = erf_records();
    // One extension header (type 0x01, no more after it): RLen grows by 8.
    let ext: Vec<(Vec<u8>, u32)> = erf
        .iter()
        .map(|(r, _)| {
            let mut x = r[..16].to_vec();
            x[8] |= 0x80;
            let rlen = u16::from_be_bytes([x[10], x[11]]) + 8;
            x[10..12].copy_from_slice(&rlen.to_be_bytes());
            x.extend_from_slice(&[0x01, 0, 0, 0, 0, 0, 0, 0]);
            x.extend_from_slice(&r[16..]);
            let n = x.len() as u32;
            (x, n)
        })
        .collect();
    let inputs: Vec<(&str, Vec<u8>)> = vec![
        ("ethernet", std::fs::read(sample()).unwrap()),
        ("ethernet_cut", pcap_cut(1, &eth_cut)),
        ("sll", pcap(false, false, 113, &with(sll))),
        ("sll2", pcap(true, true, 276, &with(sll2))),
        ("raw", pcap(false, false, 101, &with(|d| d[14..].to_vec()))),
        ("ipv4", pcap(false, false, 228, &version(4))),
        ("ipv6", pcap(false, false, 229, &version(6))),
        ("pcapng", pcapng_two_linktypes().0),
        ("tcpdump_any", std::fs::read(data.join("tcpdump-any.pcap")).unwrap()),
        ("erf", std::fs::read(data.join("ib-erf.pcap")).unwrap()),
        ("erf_dag", pcap_cut(197, &dag)),
        ("erf_extension", pcap_cut(197, &ext)),
        ("erf_cut", pcap_cut(197, &erf_cut)),
    ];
    for (name, bytes) in &inputs {
        let file = dir.join(format!("{name}.pcap"));
        std::fs::write(&file, bytes).unwrap();
        let out = Command::new(common::tshark())
            .arg("-r")
            .arg(&file)
            .args(["-T", "fields", "-E", "separator=,", "-e", "frame.len", "-e", "frame.cap_len"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{name}: tshark: {}", String::from_utf8_lossy(&out.stderr));
        let want: Vec<String> = String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect();
        let lines = json_lines(&roce().args(["decode", "--json"]).arg(&file).output().unwrap().stdout);
        let got: Vec<String> = lines.iter().map(|v| format!("{},{}", v["len"], v["cap_len"])).collect();
        assert!(!got.is_empty(), "{name}");
        assert_eq!(got, want, "{name}: len,cap_len per frame");
        // The summary line's length column is `len` too.
        let text = roce().arg("decode").arg(&file).output().unwrap().stdout;
        let column: Vec<String> =
            String::from_utf8_lossy(&text).lines().map(|l| l.split_whitespace().nth(2).unwrap().to_owned()).collect();
        assert_eq!(column, lines.iter().map(|v| v["len"].to_string()).collect::<Vec<_>>(), "{name}: summary");
    }
    // Link type 247, which tshark does not read from a pcap: the record is the packet (LRH
    // first), its lengths the record's, whole or cut.
    let ib = pcap_records(&std::fs::read(data.join("ib-native.pcap")).unwrap());
    let ib_cut: Vec<(Vec<u8>, u32)> = ib.iter().map(|(p, n)| (p[..p.len().min(40)].to_vec(), *n)).collect();
    for (name, records) in [("infiniband", &ib), ("infiniband_cut", &ib_cut)] {
        let file = dir.join(format!("{name}.pcap"));
        std::fs::write(&file, pcap_cut(247, records)).unwrap();
        let lines = json_lines(&roce().args(["decode", "--json"]).arg(&file).output().unwrap().stdout);
        let got: Vec<(u64, u64)> =
            lines.iter().map(|v| (v["len"].as_u64().unwrap(), v["cap_len"].as_u64().unwrap())).collect();
        let want: Vec<(u64, u64)> = records.iter().map(|(p, n)| (u64::from(*n), p.len() as u64)).collect();
        assert_eq!(got, want, "{name}");
    }
    // ERF: the capture record's own sizes are kept under `erf`.
    let file = dir.join("erf_cut.pcap");
    let cut = json_lines(&roce().args(["decode", "--json"]).arg(&file).output().unwrap().stdout);
    for (v, (held, orig)) in cut.iter().zip(&erf_cut) {
        assert_eq!(
            (&v["erf"]["record_len"], &v["erf"]["record_cap_len"]),
            (&(*orig).into(), &held.len().into()),
            "{v}"
        );
    }
    let whole = json_lines(&roce().args(["decode", "--json"]).arg(data.join("ib-erf.pcap")).output().unwrap().stdout);
    assert_eq!(
        (&whole[0]["len"], &whole[0]["erf"]["wlen"], &whole[0]["erf"]["record_len"]),
        (&290.into(), &290.into(), &312.into())
    );
}

/// `decode --json | encode` gives ERF captures back byte for byte, also those whose records
/// the snap length cut (the record's length on the wire is `erf.record_len`, not `len`) and
/// a DAG card's (the pcap record stops at 16 + WLen).
#[test]
fn erf_records_whole_and_cut_round_trip_through_encode() {
    let dir = common::artefact_dir("cli_decode_erf_round_trip");
    let [erf, dag, cut] = erf_records();
    for (name, bytes) in [("whole", pcap_cut(197, &erf)), ("cut", pcap_cut(197, &cut)), ("dag", pcap_cut(197, &dag))] {
        let file = dir.join(format!("{name}.pcap"));
        std::fs::write(&file, &bytes).unwrap();
        let json = roce().args(["decode", "--json"]).arg(&file).output().unwrap().stdout;
        let back = dir.join(format!("{name}-back.pcap"));
        let mut c = roce().args(["encode", "-", "-o"]).arg(&back).stdin(Stdio::piped()).spawn().unwrap();
        c.stdin.take().unwrap().write_all(&json).unwrap();
        assert!(c.wait().unwrap().success(), "{name}");
        assert_eq!(pcap_records(&std::fs::read(&back).unwrap()), pcap_records(&bytes), "{name}");
    }
}
