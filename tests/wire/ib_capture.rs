//! Native InfiniBand captures shipped in tests/data/: ib-native.pcap (`LINKTYPE_INFINIBAND`,
//! 247) and ib-erf.pcap (`LINKTYPE_ERF`, 197, the records ibdump writes), built from
//! `roce_decode::samples_ib` (regenerate with ROCE_BLESS=1). Every packet decodes with the
//! verdict it was built for, `roce encode` gives each capture back byte for byte, and tshark
//! agrees on the LRH, GRH, BTH, DETH, MAD and ERF fields and on the CRC values.
use crate::common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use roce_decode::capture::{linktype, read_file};
use roce_decode::decode::decode_captured;
use roce_decode::encode::{encode_value, Encoded, PcapOut};
use roce_decode::samples_ib::{erf_record, ib_sample_frames};
use serde_json::Value;

fn data_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// 2025-11-30T00:00:00Z, then 1 ms a packet.
fn time_of(i: usize) -> Duration {
    Duration::from_secs(1_764_460_800) + Duration::from_millis(i as u64)
}

/// The two captures' bytes: (file name, link type, pcap).
fn build() -> Vec<(&'static str, u32, Vec<u8>)> {
    let samples = ib_sample_frames();
    let mut out = Vec::new();
    for (name, lt) in [("ib-native.pcap", linktype::INFINIBAND), ("ib-erf.pcap", linktype::ERF)] {
        let mut w = PcapOut::new(Vec::new(), lt).unwrap();
        for (i, s) in samples.iter().enumerate() {
            let data =
                if lt == linktype::ERF { erf_record(time_of(i), (i % 2) as u8, &s.bytes) } else { s.bytes.clone() };
            let orig_len = data.len() as u32;
            let f = Encoded {
                timestamp: time_of(i),
                linktype: lt,
                orig_len,
                data,
                overrides: vec![],
                notes: vec![],
                settled: vec![],
                settled_by: None,
            };
            w.write(&f).unwrap();
        }
        out.push((name, lt, w.finish().unwrap()));
    }
    out
}

#[test]
fn shipped_ib_captures_match_the_builder() {
    for (name, _, built) in build() {
        if std::env::var_os("ROCE_BLESS").is_some() {
            std::fs::write(data_path(name), &built).unwrap();
        }
        let shipped =
            std::fs::read(data_path(name)).unwrap_or_else(|_| panic!("tests/data/{name} (ROCE_BLESS=1 writes it)"));
        assert!(shipped == built, "tests/data/{name} is stale: rerun with ROCE_BLESS=1 and commit it");
    }
}

/// Every packet decodes with the verdict it was built for: well-formed ones whole with both
/// CRCs right, `bad_*` with `error` naming the CRC, the truncated one with `error` and `raw`.
#[test]
fn every_ib_packet_decodes_as_built() {
    let samples = ib_sample_frames();
    for name in ["ib-native.pcap", "ib-erf.pcap"] {
        let frames = read_file(&data_path(name)).unwrap();
        assert_eq!(frames.len(), samples.len(), "{name}");
        for (f, s) in frames.iter().zip(&samples) {
            let d = decode_captured(f);
            let j = &d.json;
            let what = format!("{name} {}: {}", s.name, d.summary);
            assert_eq!(j["kind"], "infiniband", "{what}");
            if s.name.starts_with("truncated") {
                assert_eq!(j["error"]["layer"], "LRH", "{what}");
                assert!(j.contains_key("raw"), "{what}");
                continue;
            }
            let layer = match s.name {
                "bad_ib_icrc" => Some("ICRC"),
                "bad_ib_vcrc" => Some("VCRC"),
                _ => None,
            };
            assert_eq!(j.get("error").map(|e| e["layer"].clone()), layer.map(Value::from), "{what}");
            assert_eq!(j["vcrc"], if layer == Some("VCRC") { "bad" } else { "ok" }, "{what}");
            if j.contains_key("bth") {
                assert_eq!(j["icrc"], if layer == Some("ICRC") { "bad" } else { "ok" }, "{what}");
            }
            assert!(!j.contains_key("mad_error") && !j.contains_key("sa_error"), "{what}");
            if s.name.starts_with("ib_smp") {
                assert!(j["smp"]["attribute_name"].as_str().is_some_and(|a| a != "Unknown"), "{what}");
            }
            if name == "ib-erf.pcap" {
                assert_eq!(j["erf"]["type"], 21, "{what}");
                assert_eq!(j["erf"]["wlen"], s.bytes.len(), "{what}: WLen is the packet, not the record");
            }
        }
    }
}

/// `roce decode --json | roce encode` as a library: every line of both captures gives its
/// record back byte for byte, and an edited PSN gets right CRCs again.
#[test]
fn ib_captures_encode_back_byte_for_byte() {
    for name in ["ib-native.pcap", "ib-erf.pcap"] {
        for f in read_file(&data_path(name)).unwrap() {
            let d = decode_captured(&f);
            let mut line = Value::Object(d.json.clone());
            line["link_type"] = f.linktype.into();
            let e = encode_value(&line).unwrap_or_else(|e| panic!("{name}: {}: {e}", d.summary));
            assert_eq!(e.data, f.data, "{name}: {}", d.summary);
            assert!(e.overrides.is_empty(), "{name}: {:?}", e.overrides);
            if line.get("icrc") == Some(&Value::from("ok")) && line.get("vcrc") == Some(&Value::from("ok")) {
                line["psn"] = 4242.into();
                let edited = encode_value(&line).unwrap();
                let back = roce_decode::decode::decode_link(f.linktype, &edited.data);
                assert_eq!(
                    (back.json["psn"].as_u64(), &back.json["icrc"], &back.json["vcrc"]),
                    (Some(4242), &"ok".into(), &"ok".into())
                );
            }
        }
    }
}

/// The native capture's packets decode exactly as the same packets inside ERF records
/// (tshark 4.0 cannot read link type 247 from a pcap, so the ERF file is its witness for both).
#[test]
fn native_and_erf_captures_decode_alike() {
    let native = read_file(&data_path("ib-native.pcap")).unwrap();
    let erf = read_file(&data_path("ib-erf.pcap")).unwrap();
    for (a, b) in native.iter().zip(&erf) {
        let (mut x, mut y) = (decode_captured(a).json, decode_captured(b).json);
        for m in [&mut x, &mut y] {
            for k in ["erf", "len", "cap_len"] {
                m.shift_remove(k);
            }
        }
        assert_eq!(x, y);
    }
}

/// Hex or decimal tshark field text as a number.
fn tshark_num(s: &str) -> u64 {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap(),
        None => s.parse().unwrap(),
    }
}

/// tshark (4.0) reads the ERF capture: its ERF, LRH, GRH, BTH, DETH, AETH, MAD and SMP fields
/// NodeInfo fields and the CRC values it shows (it reads both CRCs big-endian and verifies
/// neither) equal ours.
#[test]
fn tshark_agrees_on_the_erf_capture() {
    const FIELDS: [&str; 38] = [
        "erf.types.type",
        "erf.flags.cap",
        "erf.rlen",
        "erf.wlen",
        "infiniband.lrh.vl",
        "infiniband.lrh.sl",
        "infiniband.lrh.lnh",
        "infiniband.lrh.dlid",
        "infiniband.lrh.pktlen",
        "infiniband.lrh.slid",
        "infiniband.grh.tclass",
        "infiniband.grh.flowlabel",
        "infiniband.grh.paylen",
        "infiniband.grh.hoplmt",
        "infiniband.grh.sgid",
        "infiniband.grh.dgid",
        "infiniband.bth.opcode",
        "infiniband.bth.padcnt",
        "infiniband.bth.destqp",
        "infiniband.bth.psn",
        "infiniband.deth.srcqp",
        "infiniband.aeth.msn",
        "infiniband.mad.mgmtclass",
        "infiniband.mad.attributeid",
        "infiniband.smplid.mkey",
        "infiniband.smpdirected.hoppointer",
        "infiniband.smpdirected.hopcount",
        "infiniband.smpdirected.drslid",
        "infiniband.smpdirected.smpstatus",
        "infiniband.nodeinfo.nodetype",
        "infiniband.nodeinfo.numports",
        "infiniband.nodeinfo.nodeguid",
        "infiniband.nodeinfo.portguid",
        "infiniband.nodeinfo.partitioncap",
        "infiniband.nodeinfo.localportnum",
        "infiniband.nodeinfo.vendorid",
        "infiniband.invariant.crc",
        "infiniband.variant.crc",
    ];
    let path = data_path("ib-erf.pcap");
    let mut cmd = Command::new(common::tshark());
    cmd.arg("-n").arg("-r").arg(&path).args(["-T", "fields", "-E", "separator=|", "-E", "occurrence=f"]);
    for p in ["rpcordma", "nvme-rdma", "iser", "smb_direct", "smc", "infiniband_sdp", "fcoib", "lnet"] {
        cmd.args(["--disable-protocol", p]);
    }
    for f in FIELDS {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark");
    assert!(out.status.success(), "tshark: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let frames = read_file(&path).unwrap();
    assert_eq!(text.lines().count(), frames.len());
    let mut compared = std::collections::BTreeMap::<&str, usize>::new();
    for (i, (row, f)) in text.lines().zip(&frames).enumerate() {
        let j = decode_captured(f).json;
        let ours = |field: &str| -> Option<Value> {
            let smp = &j.get("smp");
            let mad_status = j.get("mad").map(|m| m["status"].clone());
            let lid_routed = smp.is_some_and(|s| s["routing"] == "lid");
            let directed = smp.is_some_and(|s| s["routing"] == "directed");
            let at = |a: &str, b: &str| j.get(a).map(|o| o[b].clone());
            Some(match field {
                "erf.types.type" => at("erf", "type")?,
                "erf.flags.cap" => at("erf", "interface")?,
                "erf.rlen" => at("erf", "rlen")?,
                "erf.wlen" => at("erf", "wlen")?,
                "infiniband.lrh.pktlen" => at("lrh", "pkt_len")?,
                f if f.starts_with("infiniband.lrh.") => at("lrh", &f[15..])?,
                "infiniband.grh.tclass" => at("grh", "traffic_class")?,
                "infiniband.grh.flowlabel" => at("grh", "flow_label")?,
                "infiniband.grh.paylen" => at("grh", "pay_len")?,
                "infiniband.grh.hoplmt" => at("grh", "hop_limit")?,
                "infiniband.grh.sgid" => at("grh", "sgid")?,
                "infiniband.grh.dgid" => at("grh", "dgid")?,
                "infiniband.bth.opcode" => at("bth", "opcode")?,
                "infiniband.bth.padcnt" => at("bth", "pad_count")?,
                "infiniband.bth.destqp" => at("bth", "dest_qp")?,
                "infiniband.bth.psn" => at("bth", "psn")?,
                "infiniband.deth.srcqp" => at("deth", "src_qp")?,
                "infiniband.aeth.msn" => at("aeth", "msn")?,
                "infiniband.mad.mgmtclass" => at("mad", "mgmt_class")?,
                "infiniband.mad.attributeid" => at("mad", "attribute_id")?,
                "infiniband.smplid.mkey" if lid_routed => at("smp", "m_key")?,
                "infiniband.smpdirected.hoppointer" if directed => at("smp", "hop_pointer")?,
                "infiniband.smpdirected.hopcount" if directed => at("smp", "hop_count")?,
                "infiniband.smpdirected.drslid" if directed => at("smp", "dr_slid")?,
                "infiniband.smpdirected.smpstatus" if directed => mad_status?,
                f if f.starts_with("infiniband.nodeinfo.") => {
                    let n = j.get("smp")?.get("node_info")?;
                    n[match &f[20..] {
                        "nodetype" => "node_type",
                        "numports" => "num_ports",
                        "nodeguid" => "node_guid",
                        "portguid" => "port_guid",
                        "partitioncap" => "partition_cap",
                        "localportnum" => "local_port_num",
                        _ => "vendor_id",
                    }]
                    .clone()
                }
                // tshark reads the CRCs as big-endian numbers; ours are the CRC values.
                "infiniband.invariant.crc" => {
                    Value::from(u32::try_from(j.get("icrc_value")?.as_u64()?).ok()?.swap_bytes())
                }
                "infiniband.variant.crc" => {
                    Value::from(u16::try_from(j.get("vcrc_value")?.as_u64()?).ok()?.swap_bytes())
                }
                _ => return None,
            })
        };
        for (field, theirs) in FIELDS.iter().zip(row.split('|')) {
            if theirs.is_empty() {
                continue;
            }
            let Some(mine) = ours(field) else { continue };
            let agree = match &mine {
                Value::String(s) if s.starts_with("0x") => tshark_num(s) == tshark_num(theirs),
                Value::String(s) => s == theirs,
                v => v.as_u64() == Some(tshark_num(theirs)),
            };
            assert!(agree, "frame {}: {field}: tshark {theirs}, ours {mine}", i + 1);
            *compared.entry(field).or_default() += 1;
        }
    }
    // Every field was compared somewhere, the CRCs on every packet tshark shows them for.
    for f in FIELDS {
        assert!(compared.get(f).copied().unwrap_or(0) > 0, "{f} never compared: {compared:?}");
    }
    assert!(compared["infiniband.invariant.crc"] >= 7 && compared["infiniband.variant.crc"] >= 8, "{compared:?}");
}

/// Damaged native packets (1–4 bit flips in a sample, the CRCs made right again for half of
/// them so that the layers above are reached) through the `decode` fuzz target's body: no
/// panic, one line, and a packet that decodes whole encodes back to its bytes.
/// `ROCE_IB_MUTATIONS=N` runs N instead of 3,000.
#[test]
fn damaged_ib_packets_decode_and_reencode() {
    let rounds: u64 = std::env::var("ROCE_IB_MUTATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(3_000);
    let samples = ib_sample_frames();
    let mut rng = roce_wire::rng::SplitMix64::stream(25, 2);
    for round in 0..rounds {
        let s = &samples[(rng.next_u64() % samples.len() as u64) as usize];
        let mut b = s.bytes.clone();
        for _ in 0..1 + rng.next_u64() % 4 {
            let i = (rng.next_u64() % b.len() as u64) as usize;
            b[i] ^= 1 << (rng.next_u64() % 8);
        }
        if round % 2 == 0 {
            if let Ok(f) = roce_wire::ib_frame::parse(&b) {
                let end = f.offsets.vcrc;
                if f.transport().is_some() {
                    let c = roce_wire::icrc::compute_native(&b[..end - 4], f.grh.is_some()).unwrap();
                    b[end - 4..end].copy_from_slice(&roce_wire::icrc::to_wire(c));
                }
                let v = roce_wire::vcrc::compute(&b[..end]);
                b[end..end + 2].copy_from_slice(&roce_wire::vcrc::to_wire(v));
            }
        }
        let input = b.clone();
        let run = std::panic::catch_unwind(move || roce_decode::fuzz_targets::decode(&input));
        assert!(run.is_ok(), "{} round {round}: {}", s.name, roce_wire::HexBytes(&b));
    }
}

/// SMP members edit the packet: `smp.m_key` and `smp.node_info.*` (which restates the data's
/// first 40 bytes and applies when it is the one edited) come back from the decoder with right
/// CRCs; a NodeInfo and a data edit that disagree, or an unknown member, are errors.
#[test]
fn smp_members_edit_the_packet() {
    let f = read_file(&data_path("ib-erf.pcap")).unwrap().remove(1);
    let mut line = Value::Object(decode_captured(&f).json);
    line["link_type"] = f.linktype.into();
    assert_eq!(line["smp"]["attribute_name"], "NodeInfo");
    let encode = |l: &Value| encode_value(l).map(|e| roce_decode::decode::decode_link(f.linktype, &e.data).json);
    let mut edited = line.clone();
    edited["smp"]["m_key"] = "0x00000000000000ff".into();
    edited["smp"]["node_info"]["num_ports"] = 2.into();
    let back = encode(&edited).unwrap();
    assert_eq!(
        (&back["smp"]["m_key"], &back["smp"]["node_info"]["num_ports"]),
        (&"0x00000000000000ff".into(), &2.into())
    );
    assert_eq!((&back["icrc"], &back["vcrc"]), (&"ok".into(), &"ok".into()));
    let data = line["smp"]["data"].as_str().unwrap().to_string();
    let mut both = edited.clone();
    both["smp"]["data"] = format!("01010103{}", &data[8..]).into();
    assert!(encode(&both).unwrap_err().0.contains("disagrees"));
    let mut bogus = line.clone();
    bogus["smp"]["bogus"] = 1.into();
    assert!(encode(&bogus).unwrap_err().0.contains("smp.bogus: no such field"));
}
