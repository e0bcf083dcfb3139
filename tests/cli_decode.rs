//! `roce decode` as a user runs it: the binary, its exit codes and its two output forms.

use std::path::PathBuf;
use std::process::Command;

mod common;

fn roce() -> Command {
    Command::new(env!("CARGO_BIN_EXE_roce"))
}

fn sample() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/sample.pcap")
}

#[test]
fn decodes_every_frame_of_the_sample_one_line_each() {
    let n = roce::samples::sample_frames().len();
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
            for k in ["opcode", "dest_qp", "psn", "pkey"] {
                assert!(v[k].is_u64(), "line {i}: {k}");
            }
            assert!(v["icrc"] == "ok" || v["icrc"] == "bad");
        }
    }
    assert!(roce_frames > 30);
    assert_eq!(text.lines().count(), roce::samples::sample_frames().len());
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
    assert!(!out.status.success());
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
    std::fs::write(&empty, roce::capture::PcapFileWriter::new(Vec::new()).unwrap().into_inner()).unwrap();
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
