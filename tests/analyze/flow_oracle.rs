//! The flows of a capture as `roce analyze` defines them (crates/roce-decode/src/analyze/
//! flows.rs), written again here over plain sets and maps from tshark's fields (`tshark -T
//! fields -e infiniband.bth.psn …`), and the check of `roce analyze --json` against them.
//! Shared by tests/analyze and tests/interop/analyze.rs (kernel rxe captures).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::common;

/// tshark's fields, one row per frame.
pub fn fields(path: &Path, names: &[&str]) -> Vec<Vec<String>> {
    let mut c = Command::new(common::tshark());
    c.arg("-r").arg(path).args(["-T", "fields", "-E", "separator=|", "-E", "occurrence=f"]);
    for n in names {
        c.args(["-e", n]);
    }
    let out = c.output().unwrap();
    assert!(out.status.success(), "tshark: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(|l| l.split('|').map(str::to_owned).collect()).collect()
}

pub fn analyze_json(path: &Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_roce")).args(["analyze", "--json"]).arg(path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

pub fn num(s: &str) -> u64 {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap(),
        None => s.parse().unwrap_or_else(|_| panic!("not a number: {s:?}")),
    }
}

/// Extension-header bytes per opcode [IBA table 38], written out here on purpose.
fn ext_len(op: u64) -> u64 {
    // XRC (0xA0 + RC's low bits): RC's headers, after a 4-byte XRCETH on every request (not on
    // the READ responses, ACK and ATOMIC ACK); 0xB5 and 0xB8–0xBF are no XRC opcode.
    if (0xa0..0xc0).contains(&op) {
        let rc = op - 0xa0;
        return match rc {
            0x0d..=0x12 => ext_len(rc),
            0x00..=0x14 | 0x16 | 0x17 => 4 + ext_len(rc),
            _ => 0,
        };
    }
    let base = if (0x20..0x40).contains(&op) { op - 0x20 } else { op };
    match op {
        0x64 => 8,
        0x65 => 12,
        0x81 => 0,
        _ => match base {
            0x03 | 0x05 | 0x09 => 4,
            0x06 | 0x0a | 0x0c => 16,
            0x0b => 20,
            0x0d | 0x0f | 0x10 | 0x11 => 4,
            0x12 => 12,
            0x13 | 0x14 => 28,
            0x16 | 0x17 => 4,
            0x1c => 20,
            0x1d => 16,
            _ => 0,
        },
    }
}

/// A flow: (source, destination, destination QP, CNP-only).
pub type FlowId = (String, String, u64, bool);

/// A data flow the test knows the source QP of: ((source, destination, destination QP), source QP).
pub type SourceQp = ((String, String, u64), u64);

#[derive(Default, Debug, PartialEq)]
pub struct Expect {
    packets: u64,
    bytes: u64,
    first_psn: u64,
    last_psn: u64,
    messages: u64,
    gaps: u64,
    missing: u64,
    out_of_order: u64,
    duplicates: u64,
    retransmissions: u64,
    acks: u64,
    naks: BTreeMap<&'static str, u64>,
    read_requests: u64,
    read_responses: u64,
    atomics: u64,
    atomic_acks: u64,
    ecn_ce: u64,
    cnps: u64,
}

#[derive(Default)]
struct PsnState {
    seen: HashSet<u64>,
    skipped: HashSet<u64>,
    next: Option<u64>,
    prev: Option<u64>,
    read_span: bool,
    in_message: bool,
}

fn ahead(a: u64, b: u64) -> i64 {
    let d = a.wrapping_sub(b) & 0xff_ffff;
    if d > 0x80_0000 {
        d as i64 - 0x100_0000
    } else {
        d as i64
    }
}

/// The flows as the definitions say, from tshark's fields; `skip`: frame numbers left out;
/// `src_qps`: the data flows whose source QP the test knows (from its own scenario): a CNP to
/// that QP from the flow's destination counts in its `cnps`, any other stays a CNP-only flow.
pub fn expected(path: &Path, skip: &[u64], src_qps: &[SourceQp]) -> BTreeMap<FlowId, Expect> {
    let rows = fields(
        path,
        &[
            "frame.number",
            "ip.src",
            "ipv6.src",
            "ip.dst",
            "ipv6.dst",
            "infiniband.bth.opcode",
            "infiniband.bth.destqp",
            "infiniband.bth.psn",
            "infiniband.bth.padcnt",
            "udp.length",
            "ip.dsfield.ecn",
            "ipv6.tclass.ecn",
            "infiniband.aeth.syndrome",
            "icmp.type",
            "icmpv6.type",
            // (tshark 4.0 dissects no XRC header: an XRC ACK's AETH is the first of these.)
            "infiniband.vendor",
        ],
    );
    let mut flows: BTreeMap<FlowId, Expect> = BTreeMap::new();
    let mut state: HashMap<FlowId, PsnState> = HashMap::new();
    for r in rows {
        // An ICMP error quoting a RoCEv2 packet (the kernel's port unreachable) is not one.
        let icmp = !r[13].is_empty() || !r[14].is_empty();
        if r[5].is_empty() || icmp || skip.contains(&num(&r[0])) {
            continue;
        }
        let src = if r[1].is_empty() { r[2].clone() } else { r[1].clone() };
        let dst = if r[3].is_empty() { r[4].clone() } else { r[3].clone() };
        let (op, qp, psn) = (num(&r[5]), num(&r[6]), num(&r[7]));
        // CNPs: opcode 0x81, the CNP transport's (bits 7:5 = 100) one defined opcode.
        let cnp = op >> 5 == 4;
        if cnp {
            let data = src_qps.iter().find(|((s, d, _), q)| *s == dst && *d == src && *q == qp);
            if let Some(((s, d, dq), _)) = data {
                flows.entry((s.clone(), d.clone(), *dq, false)).or_default().cnps += 1;
                continue;
            }
        }
        let key = (src, dst, qp, cnp);
        let f = flows.entry(key.clone()).or_default();
        let s = state.entry(key).or_default();
        if f.packets == 0 {
            f.first_psn = psn;
        }
        f.packets += 1;
        f.last_psn = psn;
        f.bytes += num(&r[9]) - 8 - 12 - ext_len(op) - num(&r[8]) - 4;
        let ecn = if r[10].is_empty() { &r[11] } else { &r[10] };
        if num(ecn) == 3 {
            f.ecn_ce += 1;
        }
        // XRC's responses and requests are RC's twins (0xA0 + RC's low five bits).
        let op = if (0xa0..0xc0).contains(&op) { op - 0xa0 } else { op };
        match op {
            0x11 | 0x12 => {
                let syn = if r[12].is_empty() {
                    let hex: String = r[15].chars().filter(|c| c.is_ascii_hexdigit()).take(2).collect();
                    u64::from_str_radix(&hex, 16).unwrap_or_else(|_| panic!("no AETH in frame {}: {r:?}", r[0]))
                } else {
                    num(&r[12])
                };
                match (syn >> 5) & 3 {
                    0 => f.acks += 1,
                    1 => *f.naks.entry("rnr").or_default() += 1,
                    3 => {
                        let k = [
                            "psn_sequence_error",
                            "invalid_request",
                            "remote_access_error",
                            "remote_operational_error",
                        ];
                        *f.naks.entry(k.get((syn & 0x1f) as usize).copied().unwrap_or("other")).or_default() += 1;
                    }
                    _ => *f.naks.entry("other").or_default() += 1,
                }
                if op == 0x12 {
                    f.atomic_acks += 1;
                }
            }
            0x0d..=0x10 => f.read_responses += 1,
            0x81 => {}
            _ => {
                if op == 0x0c {
                    f.read_requests += 1;
                }
                if op == 0x13 || op == 0x14 {
                    f.atomics += 1;
                }
                let prev = s.prev.replace(psn);
                let mut resent = false;
                match s.next {
                    None => {}
                    Some(next) if ahead(psn, next) >= 0 => {
                        let gap = ahead(psn, next) as u64;
                        if gap > 0 && !std::mem::take(&mut s.read_span) {
                            f.gaps += 1;
                            f.missing += gap;
                            for k in 0..gap {
                                s.skipped.insert((next + k) & 0xff_ffff);
                            }
                        } else if gap > 0 {
                            for k in 0..gap {
                                s.seen.insert((next + k) & 0xff_ffff);
                            }
                        }
                    }
                    Some(_) => {
                        if prev == Some(psn) {
                            f.duplicates += 1;
                            resent = true;
                        } else if s.skipped.remove(&psn) {
                            f.out_of_order += 1;
                        } else {
                            assert!(
                                s.seen.contains(&psn),
                                "frame {}: PSN {psn} behind {:?}, neither seen nor skipped, QP {qp:#x} from {}",
                                r[0],
                                s.next,
                                if r[1].is_empty() { &r[2] } else { &r[1] }
                            );
                            f.retransmissions += 1;
                            resent = true;
                        }
                    }
                }
                if s.next.is_none() || ahead(psn, s.next.unwrap()) >= 0 {
                    s.next = Some((psn + 1) & 0xff_ffff);
                }
                s.seen.insert(psn);
                if op == 0x0c {
                    s.read_span = true;
                }
                if !resent {
                    // Messages: ONLY packets, FIRST … LAST runs.
                    let b = if (0x20..0x40).contains(&op) { op - 0x20 } else { op };
                    match b {
                        0x00 | 0x06 => s.in_message = true,
                        0x01 | 0x07 => {}
                        0x02 | 0x03 | 0x08 | 0x09 | 0x16 => {
                            if std::mem::take(&mut s.in_message) {
                                f.messages += 1;
                            }
                        }
                        _ => f.messages += 1,
                    }
                }
            }
        }
    }
    flows
}

/// The counts of a flow of `roce analyze --json`, as [`expected`] has them.
pub fn got(f: &Value) -> Expect {
    let n = &f["ack"]["naks"];
    let mut naks = BTreeMap::new();
    for k in
        ["psn_sequence_error", "invalid_request", "remote_access_error", "remote_operational_error", "other", "rnr"]
    {
        let v = n[k].as_u64().unwrap();
        if v > 0 {
            naks.insert(k, v);
        }
    }
    let u = |v: &Value| v.as_u64().unwrap_or_else(|| panic!("{v}"));
    Expect {
        packets: u(&f["packets"]),
        bytes: u(&f["bytes"]),
        first_psn: u(&f["first_psn"]),
        last_psn: u(&f["last_psn"]),
        messages: u(&f["messages"]),
        gaps: u(&f["psn"]["gaps"]),
        missing: u(&f["psn"]["missing"]),
        out_of_order: u(&f["psn"]["out_of_order"]),
        duplicates: u(&f["psn"]["duplicates"]),
        retransmissions: u(&f["psn"]["retransmissions"]),
        acks: u(&f["ack"]["acks"]),
        naks,
        read_requests: u(&f["reads"]["requests"]),
        read_responses: u(&f["reads"]["responses"]),
        atomics: u(&f["atomics"]["requests"]),
        atomic_acks: u(&f["atomics"]["acks"]),
        ecn_ce: u(&f["ecn_ce"]),
        cnps: u(&f["cnps"]),
    }
}

/// `roce analyze --json` of `path`, every flow checked against [`expected`]; the document.
pub fn check_flows(path: &Path, skip: &[u64], src_qps: &[SourceQp]) -> Value {
    let doc = analyze_json(path);
    let want = expected(path, skip, src_qps);
    let flows = doc["flows"].as_array().unwrap();
    assert_eq!(flows.len(), want.len(), "flows: {:#?}", want.keys().collect::<Vec<_>>());
    for f in flows {
        let key = (
            f["src"].as_str().unwrap().to_owned(),
            f["dst"].as_str().unwrap().to_owned(),
            f["dest_qp"].as_u64().unwrap(),
            f["transport"] == "CNP",
        );
        let w = want.get(&key).unwrap_or_else(|| panic!("flow {key:?} not in tshark's"));
        assert_eq!(&got(f), w, "flow {key:?}");
    }
    doc
}
