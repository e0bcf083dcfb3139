//! Interop with a real Linux kernel rxe peer (qemu guest, kernel 6.1, 6.12 or sid, TCG): the frames that
//! roce-wire builds are accepted by rxe, and its MAD core answers them.
//!
//! A SubnAdmGet(MCMemberRecord) to QP1 of the guest (RoCEv2 UD SEND_ONLY, built with
//! `FrameRepr::new` + `SaMad::request` as the stack sends it) must come back as a
//! SubnAdmGetResp with status 0x000C (no SA agent on a RoCE port: the MAD core answers Get
//! itself), same TID, captured on tap0 and parsed with `roce_wire::frame::parse`; rxe's
//! `rcvd_pkts` must grow by exactly the good frames sent, and a frame with one ICRC byte
//! flipped must neither move it nor be answered. Over IPv4 and IPv6.
//!
//! Needs root, qemu and `bash tests/interop/setup.sh` (tests/run-all.sh runs it); a missing
//! prerequisite fails the test. Artefacts: target/interop/artefacts/<kernel>/interop_guest_sa_probe/
//! (ROCE_KERNEL picks 6.1, 6.12 or sid).

use crate::harness;

use std::fmt::Write as _;
use std::net::IpAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::harness::{GuestBuilder, RawSocket, GUEST_IP4, GUEST_IP6, GUEST_MAC, HOST_IP4, HOST_IP6};
use roce_wire::bth::{self, Opcode};
use roce_wire::ext::ExtHeaders;
use roce_wire::frame::{self, rxe_udp_sport, FrameRepr};
use roce_wire::mad::{MadStatus, Method};
use roce_wire::mcmember::{ComponentMask, JoinState, McMemberRecord};
use roce_wire::sa::{attr, SaData, SaMad};
use roce_wire::{Gid, GSI_QKEY, RDMA_UDP_QKEY};

/// The guest: counters before and after each step; the host says when a step is done.
const SCENARIO: &str = r#"
counters before_v4
host_wait v4_probe_done 120 || exit 1
counters after_probe_v4
host_wait v4_bad_done 60 || exit 1
counters after_bad_v4
host_wait v6_probe_done 60 || exit 1
counters after_probe_v6
host_wait v6_bad_done 60 || exit 1
counters after_bad_v6
serve
"#;

const STEP: Duration = Duration::from_secs(15);

/// A SubnAdmGet(MCMemberRecord) from `src` to the guest's QP1, framed as rxe frames MADs
/// (roce_decode::samples::gsi_frame): UD SEND_ONLY to QP 1, AckReq, P_Key 0xFFFF, DETH Q_Key
/// 0x80010000 / SrcQP 1, the UDP source port of QP1, ICRC computed.
fn probe(src_mac: [u8; 6], src: IpAddr, dst: IpAddr, tid: u64, psn: u32) -> (SaMad, Vec<u8>) {
    let record = McMemberRecord {
        mgid: Gid::from_ipv4("239.1.2.3".parse().unwrap()),
        port_gid: Gid::from(src),
        q_key: RDMA_UDP_QKEY,
        p_key: 0xFFFF,
        join_state: JoinState::FULL_MEMBER,
        ..McMemberRecord::default()
    };
    let mad = SaMad::request(
        Method::Get,
        tid,
        attr::MC_MEMBER_RECORD,
        ComponentMask::KERNEL_JOIN.0,
        SaData::mc_member(record),
    );
    let mad_bytes = mad.to_bytes();
    let mut b = bth::Repr::new(Opcode::UdSendOnly, 1, psn);
    b.ack_req = true;
    let mut r = FrameRepr::new(src_mac, GUEST_MAC, src, dst, b, ExtHeaders::deth(GSI_QKEY, 1), &mad_bytes);
    r.udp.source_port = rxe_udp_sport(1);
    let mut out = vec![0u8; r.buffer_len()];
    r.emit(&mut out).expect("probe frame fits");
    (mad, out)
}

/// The same frame with one ICRC byte flipped (the ICRC is the last 4 bytes).
fn flip_icrc(frame: &[u8]) -> Vec<u8> {
    let mut f = frame.to_vec();
    *f.last_mut().unwrap() ^= 0x5a;
    assert!(frame::parse(&f).is_err(), "the flipped frame must fail our own ICRC check");
    f
}

/// If `data` is a SubnAdmGetResp (SA MAD, method 0x81) in a valid RoCEv2 frame, its TID.
fn getresp_tid(data: &[u8]) -> Option<u64> {
    let f = frame::parse(data).ok()?;
    let m = SaMad::parse(f.repr.payload).ok()?;
    (m.header.response && m.header.method == Method::Get).then_some(m.header.transaction_id)
}

/// Check a GetResp frame against the request, field by field; returns a one-line summary.
fn check_getresp(data: &[u8], req: &SaMad, guest: IpAddr, host: IpAddr) -> String {
    let f = frame::parse(data).unwrap_or_else(|e| panic!("GetResp does not parse strictly: {e}"));
    assert!(f.icrc_ok());
    assert_eq!(f.repr.ip.source(), guest, "GetResp source IP");
    assert_eq!(f.repr.ip.destination(), host, "GetResp destination IP");
    assert_eq!(f.repr.bth.opcode, Opcode::UdSendOnly);
    assert_eq!(f.repr.bth.dest_qp, 1, "GetResp to QP1");
    assert_eq!(f.repr.bth.pkey, 0xFFFF);
    let deth = f.repr.ext.deth.expect("DETH");
    assert_eq!(deth.qkey, GSI_QKEY, "GetResp Q_Key");
    assert_eq!(deth.src_qp, 1, "GetResp from QP1");
    let m = SaMad::parse(f.repr.payload).expect("SA MAD");
    assert!(m.header.response, "R bit");
    assert_eq!(m.header.method, Method::Get, "method GetResp = 0x81");
    assert_eq!(m.header.status, MadStatus(0x000C), "status: unsupported method/attribute");
    assert_eq!(m.header.transaction_id, req.header.transaction_id, "TID");
    assert_eq!(m.header.attribute_id, attr::MC_MEMBER_RECORD);
    // generate_unmatched_resp: a byte copy of the request but for the method and the status
    let (a, b) = (req.to_bytes(), m.to_bytes());
    let differ: Vec<usize> = (0..a.len()).filter(|&i| a[i] != b[i]).collect();
    assert!(
        differ.iter().all(|i| [3, 4, 5].contains(i)),
        "GetResp differs from the request beyond method/status at {differ:?}"
    );
    format!(
        concat!(
            "GetResp {} -> {} {:?} dest_qp={} src_qp={} qkey={:#010x} method={:#04x} status={:#06x} ",
            "TID={:#018x} attr={:#06x} icrc=ok udp_sport={:#06x}"
        ),
        f.repr.ip.source(),
        f.repr.ip.destination(),
        f.repr.bth.opcode,
        f.repr.bth.dest_qp,
        deth.src_qp,
        deth.qkey,
        u8::from(m.header.method) | 0x80,
        m.header.status.0,
        m.header.transaction_id,
        m.header.attribute_id,
        f.repr.udp.source_port,
    )
}

fn delta(
    before: &std::collections::BTreeMap<String, u64>,
    after: &std::collections::BTreeMap<String, u64>,
    k: &str,
) -> i64 {
    after[k] as i64 - before[k] as i64
}

struct Probe<'a> {
    sock: &'a RawSocket,
    mac: [u8; 6],
    tid: u64,
    psn: u32,
    report: String,
}

impl Probe<'_> {
    fn next_tid(&mut self) -> u64 {
        self.tid += 1;
        self.psn += 1;
        self.tid
    }

    /// Send a good probe; wait for its GetResp; return every frame that came in meanwhile.
    fn round_trip(&mut self, host: IpAddr, guest: IpAddr, label: &str) -> Vec<Vec<u8>> {
        let tid = self.next_tid();
        let (req, f) = probe(self.mac, host, guest, tid, self.psn);
        self.sock.send(&f).expect("send the probe on tap0");
        let (hit, seen) = self.sock.recv_until(STEP, |d| getresp_tid(d) == Some(tid));
        assert!(
            hit,
            "{label}: no SubnAdmGetResp with TID {tid:#x} from {guest} within {STEP:?} ({} frames came in)",
            seen.len()
        );
        let line = check_getresp(seen.last().unwrap(), &req, guest, host);
        eprintln!("interop: {label}: {line}");
        let _ = writeln!(self.report, "{label}: sent SubnAdmGet TID={tid:#018x} {host} -> {guest}; {line}");
        seen
    }

    /// Send the probe with a flipped ICRC byte, then a good probe; the bad one must not be
    /// answered (its TID never comes back) by the time the good one is.
    fn bad_then_good(&mut self, host: IpAddr, guest: IpAddr, label: &str) {
        let bad_tid = self.next_tid();
        let (_, f) = probe(self.mac, host, guest, bad_tid, self.psn);
        self.sock.send(&flip_icrc(&f)).expect("send the bad probe on tap0");
        let _ = writeln!(self.report, "{label}: sent SubnAdmGet TID={bad_tid:#018x} with a flipped ICRC byte");
        let seen = self.round_trip(host, guest, label);
        assert!(
            seen.iter().all(|d| getresp_tid(d) != Some(bad_tid)),
            "{label}: the frame with a bad ICRC was answered"
        );
    }
}

#[test]
fn kernel_rxe_answers_sa_get_probe_and_drops_bad_icrc() {
    let mut g = GuestBuilder::new("interop_guest_sa_probe").scenario(SCENARIO).boot();
    let console = g.console_log();
    let gids = harness::guest_gids(&console);
    assert!(gids.contains(&IpAddr::V4(GUEST_IP4)), "the guest's rxe0 has no GID ::ffff:{GUEST_IP4}: {gids:?}");
    assert!(
        gids.contains(&IpAddr::V6(GUEST_IP6)),
        "the guest's rxe0 has no GID {GUEST_IP6}: {gids:?} (IPv6 probe impossible)"
    );

    let sock = g.raw_socket();
    let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let mut p = Probe {
        sock: &sock,
        mac: harness::fresh_mac(),
        tid: (0x1e7a_u64 << 48) | (t & 0xffff_ffff) << 8,
        psn: 0,
        report: String::new(),
    };
    let _ = writeln!(
        p.report,
        "boot_time_s {:.2}\nour_mac {}\ntap0_mac {}",
        g.boot_time.as_secs_f64(),
        harness::mac_string(&p.mac),
        harness::mac_string(&g.tap_mac)
    );

    let mut all = Vec::new();
    for (v, host, guest) in
        [("v4", IpAddr::V4(HOST_IP4), IpAddr::V4(GUEST_IP4)), ("v6", IpAddr::V6(HOST_IP6), IpAddr::V6(GUEST_IP6))]
    {
        let before_tag = if v == "v4" { "before_v4".to_string() } else { "after_bad_v4".to_string() };
        let before = g.counters(&before_tag, STEP * 2);
        p.round_trip(host, guest, &format!("{v} probe"));
        g.signal(&format!("{v}_probe_done"));
        let after_probe = g.counters(&format!("after_probe_{v}"), STEP);
        p.bad_then_good(host, guest, &format!("{v} bad ICRC + probe"));
        g.signal(&format!("{v}_bad_done"));
        let after_bad = g.counters(&format!("after_bad_{v}"), STEP);
        let _ = writeln!(
            p.report,
            "{v} rcvd_pkts {} -> {} -> {}; sent_pkts {} -> {} -> {}",
            before["rcvd_pkts"],
            after_probe["rcvd_pkts"],
            after_bad["rcvd_pkts"],
            before["sent_pkts"],
            after_probe["sent_pkts"],
            after_bad["sent_pkts"]
        );
        all.push((v, before, after_probe, after_bad));
    }

    // rdma-core tools in the guest work (the scenario is in `serve` now)
    let (rc, out) = g.guest_exec("ibv_devinfo -d rxe0", Duration::from_secs(30));
    let _ = writeln!(p.report, "ibv_devinfo rc={rc}");
    assert_eq!(rc, 0, "ibv_devinfo in the guest: {out}");
    assert!(out.contains("PORT_ACTIVE"), "ibv_devinfo: {out}");
    // the namespace's kernel answered the guest's ARP and ND for us: its neighbour table
    let neigh = g.exec_in_netns("ip neigh show dev tap0");
    let neigh = String::from_utf8_lossy(&neigh.stdout).into_owned();
    let _ = write!(p.report, "netns neighbours on tap0:\n{neigh}");
    assert!(neigh.contains("198.18.0.2") && neigh.contains("52:54:00:12:34:56"), "ip neigh in the namespace: {neigh}");
    g.signal("end");
    let pcap = g.pcap_path();
    let artefacts = g.artefacts.clone();
    g.finish();

    for (v, before, after_probe, after_bad) in &all {
        // one good probe: exactly one frame passed rxe's checks, one GetResp sent
        assert_eq!(delta(before, after_probe, "rcvd_pkts"), 1, "{v}: rcvd_pkts after one probe");
        assert_eq!(delta(before, after_probe, "sent_pkts"), 1, "{v}: sent_pkts after one probe");
        // bad ICRC + good probe: only the good one counts
        assert_eq!(delta(after_probe, after_bad, "rcvd_pkts"), 1, "{v}: rcvd_pkts after a bad-ICRC frame and a probe");
        assert_eq!(delta(after_probe, after_bad, "sent_pkts"), 1, "{v}: sent_pkts after a bad-ICRC frame and a probe");
    }

    // the capture on tap0 holds every GetResp exactly once, none for a bad frame
    let frames = roce_decode::capture::read_file(&pcap).expect("tap0.pcap");
    let mut decoded = String::new();
    let mut resp_tids = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        let _ = writeln!(decoded, "{:5} {}", i + 1, roce_decode::decode::decode_ethernet(&f.data).summary);
        if let Some(tid) = getresp_tid(&f.data) {
            resp_tids.push(tid);
        }
    }
    std::fs::write(artefacts.join("tap0.decoded.txt"), &decoded).unwrap();
    let first = (0x1e7a_u64 << 48) | (t & 0xffff_ffff) << 8;
    // TIDs: v4 good first+1, bad +2, good +3; v6 good +4, bad +5, good +6
    let want: Vec<u64> = [1, 3, 4, 6].iter().map(|d| first + d).collect();
    assert_eq!(resp_tids, want, "GetResps in tap0.pcap (decoded: {})", artefacts.join("tap0.decoded.txt").display());
    // The corrupted frames really left: on tap0, from our MAC, decoded with a bad ICRC (and
    // rcvd_pkts did not count them, above). Nothing else from our MAC has a bad ICRC.
    let ours = harness::mac_string(&p.mac);
    let mut bad_tids = Vec::new();
    for f in &frames {
        let d = roce_decode::decode::decode_ethernet(&f.data);
        let j = &d.json;
        if j.get("eth").and_then(|e| e.get("src")).and_then(|v| v.as_str()) == Some(ours.as_str())
            && j.get("icrc").and_then(|v| v.as_str()) == Some("bad")
        {
            let lax = frame::parse_lax(&f.data).expect("a bad-ICRC frame still decodes");
            bad_tids.push(SaMad::parse(lax.repr.payload).expect("its SA MAD").header.transaction_id);
        }
    }
    let want_bad: Vec<u64> = [2, 5].iter().map(|d| first + d).collect();
    assert_eq!(bad_tids, want_bad, "bad-ICRC frames from {ours} on tap0");
    let _ = writeln!(p.report, "tap0.pcap: bad-ICRC frames from {ours}: TIDs {bad_tids:x?}");
    let _ = writeln!(p.report, "tap0.pcap: {} frames, GetResp TIDs {:x?}", frames.len(), resp_tids);
    std::fs::write(artefacts.join("result.txt"), &p.report).unwrap();
    eprintln!("{}", p.report);
}

/// The harness refuses to boot without its prerequisites, loudly: this checks the message
/// lists nothing when everything is in place (so a machine without qemu or the kernel image
/// fails here too, not only in the boot).
#[test]
fn interop_prerequisites_are_present() {
    let missing = harness::missing_prerequisites();
    assert!(
        missing.is_empty(),
        "missing for the interop tests: {}; run `bash tests/interop/setup.sh` as root",
        missing.join("; ")
    );
}
