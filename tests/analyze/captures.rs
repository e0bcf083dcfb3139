//! Captures for the analysis tests, made on the simulated link (transmissions are captured
//! before the link loses, duplicates or reorders them, as a capture at the sender sees them).

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use roce_cm::rc::{Access, MrInfo, QpAttr, QpInit, QpState, RecvWr, SendOp, SendWr, Sge};
use roce_cm::{Stack, StackConfig};
use roce_net::{LinkConfig, SimNet};

pub const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
pub const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];

pub fn roce() -> Command {
    Command::new(env!("CARGO_BIN_EXE_roce"))
}

/// Stacks A (`link_a`) and B (`link_b`) on a simulated link that captures every frame sent.
fn two_stacks(seed: u64, link_a: LinkConfig, link_b: LinkConfig) -> (SimNet, roce_net::NodeId, roce_net::NodeId) {
    let mut net = SimNet::new(seed);
    net.set_capture(true);
    let mut ca = StackConfig::new(MAC_A, A, 24);
    ca.seed = seed;
    let mut cb = StackConfig::new(MAC_B, B, 24);
    cb.seed = seed ^ 0xbeef;
    let a = net.add(Stack::new(ca), link_a);
    let b = net.add(Stack::new(cb), link_b);
    (net, a, b)
}

fn sge(m: &MrInfo, off: u64, len: u32) -> Sge {
    Sge { addr: m.addr + off, length: len, lkey: m.lkey }
}

fn wr(wr_id: u64, op: SendOp, sg_list: Vec<Sge>) -> SendWr {
    SendWr { wr_id, op, sg_list, signaled: true, solicited: false, inline: None }
}

/// RC between two stacks: A's cable loses 3 %, duplicates and reorders 10 % each. A sends
/// 40 multi-packet SENDs (B posts receives for half of them late, so RNR NAKs appear),
/// WRITEs, READs and FETCH_ADDs. Returns the pcap path and A's and B's QP numbers.
pub fn lossy_rc(dir: &Path, seed: u64) -> (PathBuf, u32, u32) {
    let link = LinkConfig {
        latency: Duration::from_micros(20),
        jitter: Duration::from_micros(10),
        loss: 0.03,
        duplicate: 0.1,
        reorder: 0.1,
        reorder_delay: Duration::from_micros(100),
        ..LinkConfig::default()
    };
    let (mut net, a, b) = two_stacks(seed, link, LinkConfig::with_latency(Duration::from_micros(20)));
    let qa = net.node_mut::<Stack>(a).create_qp_with(QpInit::default()).unwrap();
    let qb = net.node_mut::<Stack>(b).create_qp_with(QpInit::default()).unwrap();
    let now = net.now();
    for (id, q, peer, pq, mac, sq, rq) in [(a, qa, B, qb, MAC_B, 100, 5000), (b, qb, A, qa, MAC_A, 5000, 100)] {
        let mut at = QpAttr::new(IpAddr::V4(peer), pq);
        at.path_mtu = 1024;
        at.sq_psn = sq;
        at.rq_psn = rq;
        at.dmac = Some(mac);
        at.timeout = 8;
        at.retry_cnt = 7;
        at.rnr_retry = 7;
        at.min_rnr_timer = 3;
        let rc = net.node_mut::<Stack>(id).rc_mut();
        for st in [QpState::Init, QpState::Rtr, QpState::Rts] {
            rc.modify_qp(now, q, st, &at).unwrap();
        }
    }
    let sa = net.node_mut::<Stack>(a).rc_mut();
    let la = sa.reg_mr(1 << 16, Access::ALL).unwrap();
    let sb = net.node_mut::<Stack>(b).rc_mut();
    let rb = sb.reg_mr(1 << 18, Access::ALL).unwrap();
    for i in 0..20u64 {
        sb.post_recv(qb, RecvWr { wr_id: i, sg_list: vec![sge(&rb, i * 4096, 4096)] }).unwrap();
    }
    let sa = net.node_mut::<Stack>(a).rc_mut();
    for i in 0..40u64 {
        let len = 500 + (i as u32 * 97) % 3000;
        sa.post_send(now, qa, wr(i, SendOp::Send, vec![sge(&la, 0, len)])).unwrap();
    }
    for i in 0..4u64 {
        let write = SendOp::Write { remote_addr: rb.addr + 200_000, rkey: rb.rkey };
        sa.post_send(now, qa, wr(100 + i, write, vec![sge(&la, 0, 2500)])).unwrap();
        let read = SendOp::Read { remote_addr: rb.addr + 200_000, rkey: rb.rkey };
        sa.post_send(now, qa, wr(200 + i, read, vec![sge(&la, 8192, 2500)])).unwrap();
        let fa = SendOp::FetchAdd { remote_addr: rb.addr + 250_000, rkey: rb.rkey, add: 1 };
        sa.post_send(now, qa, wr(300 + i, fa, vec![sge(&la, 60_000, 8)])).unwrap();
    }
    net.run_for(Duration::from_millis(3));
    let sb = net.node_mut::<Stack>(b).rc_mut();
    for i in 20..40u64 {
        sb.post_recv(qb, RecvWr { wr_id: i, sg_list: vec![sge(&rb, i * 4096, 4096)] }).unwrap();
    }
    net.run_for(Duration::from_secs(2));
    let path = dir.join("lossy-rc.pcap");
    std::fs::write(&path, net.pcap_bytes()).unwrap();
    (path, qa, qb)
}

/// The QP the crafted CNPs of [`with_ecn_and_cnps`] go to when they answer nothing.
pub const UNKNOWN_QP: u32 = 0xabcdef;

/// The lossy capture with ECN CE set on every 7th frame from A, a CNP from B to A's QP
/// after every 11th, and one from B to [`UNKNOWN_QP`] after every 13th, crafted with
/// `roce decode --json | … | roce encode`.
pub fn with_ecn_and_cnps(dir: &Path, lossy: &Path, qa: u32) -> PathBuf {
    let out = roce().args(["decode", "--json"]).arg(lossy).output().unwrap();
    assert!(out.status.success());
    let cnp_json = roce().args(["decode", "--json"]).arg(super::oracle::sample()).output().unwrap();
    let cnp: serde_json::Value = String::from_utf8(cnp_json.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["opcode"] == 129)
        .expect("sample.pcap has a CNP");
    let mut lines = Vec::new();
    for (i, l) in String::from_utf8(out.stdout).unwrap().lines().enumerate() {
        let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
        if v["ip"]["src"] == A.to_string() && i % 7 == 0 {
            v["ip"]["ecn"] = 3.into();
            // Let encode compute the checksum and ICRC again (the ICRC masks the ECN bits).
            for k in ["checksum", "checksum_ok"] {
                v["ip"].as_object_mut().unwrap().remove(k);
            }
        }
        let time = v["time_epoch"].clone();
        lines.push(v.to_string());
        for qp in [(i % 11 == 0).then_some(qa), (i % 13 == 0).then_some(UNKNOWN_QP)].into_iter().flatten() {
            let mut c = cnp.clone();
            c["ip"]["src"] = B.to_string().into();
            c["ip"]["dst"] = A.to_string().into();
            c["ip"]["ecn"] = 0.into();
            c["dest_qp"] = qp.into();
            c["bth"]["dest_qp"] = qp.into();
            c["time_epoch"] = time.clone();
            for k in ["checksum", "checksum_ok"] {
                c["ip"].as_object_mut().unwrap().remove(k);
            }
            for k in ["icrc", "icrc_value", "icrc_expected"] {
                c.as_object_mut().unwrap().remove(k);
            }
            lines.push(c.to_string());
        }
    }
    let path = dir.join("ecn-cnp.pcap");
    let mut child = roce().args(["encode", "-q", "-", "-o"]).arg(&path).stdin(Stdio::piped()).spawn().unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all((lines.join("\n") + "\n").as_bytes()).unwrap();
    assert!(child.wait().unwrap().success());
    path
}

/// What a tap at B's port would have recorded of `sender` (A's transmissions, as the
/// simulated link captures them) behind a link that drops, duplicates and swaps A's frames
/// (4 % each, seeded): gaps, late packets and back-to-back duplicates for the analysis.
pub fn receiver_tap(dir: &Path, sender: &Path, seed: u64) -> PathBuf {
    let frames = roce_decode::capture::read_file(sender).unwrap();
    let mut rng = super::common::Rng(seed | 1);
    let mut out: Vec<(Duration, Vec<u8>)> = Vec::new();
    let mut held: Option<(Duration, Vec<u8>)> = None;
    for f in frames {
        // A's frames carry A's MAC as source (bytes 6..12).
        let from_a = f.data.get(6..12) == Some(&MAC_A[..]);
        if from_a && rng.chance(4) {
            continue;
        }
        if from_a && held.is_none() && rng.chance(4) {
            held = Some((f.timestamp, f.data));
            continue;
        }
        let dup = from_a && rng.chance(4);
        out.push((f.timestamp, f.data.clone()));
        if dup {
            out.push((f.timestamp, f.data));
        }
        if let Some((_, d)) = held.take() {
            out.push((f.timestamp, d));
        }
    }
    let path = dir.join("receiver-tap.pcap");
    let mut w = roce_decode::capture::PcapFileWriter::create(&path).unwrap();
    for (t, d) in out {
        w.write(t, &d).unwrap();
    }
    w.finish().unwrap();
    path
}

/// A connection through the CM on the simulated link (2 % loss both ways, so some CM
/// messages are re-sent): rdma_resolve_addr/route (ARP), REQ, REP, RTU, then SENDs and
/// RDMA READs from the client, then a disconnect (DREQ, DREP). Returns the pcap.
pub fn cm_rc(dir: &Path, seed: u64) -> PathBuf {
    use roce_cm::{EventKind, PortSpace, QpType};
    use std::net::SocketAddr;
    let link = LinkConfig {
        latency: Duration::from_micros(30),
        jitter: Duration::from_micros(10),
        loss: 0.02,
        reorder: 0.05,
        reorder_delay: Duration::from_micros(80),
        ..LinkConfig::default()
    };
    let (mut net, srv, cli) = two_stacks(seed, link.clone(), link);
    let s = net.node_mut::<Stack>(srv);
    let l = s.create_id(PortSpace::Tcp, QpType::Rc).unwrap();
    let addr = SocketAddr::new(IpAddr::V4(A), 7471);
    s.bind_addr(l, addr).unwrap();
    s.listen(l, 1).unwrap();
    let cid = net.node_mut::<Stack>(cli).create_id(PortSpace::Tcp, QpType::Rc).unwrap();
    super::common::sim::resolve(&mut net, cli, cid, addr);
    let cq = net.node_mut::<Stack>(cli).create_qp_for_id(cid).unwrap();
    let param = super::common::sim::rc_connect_param();
    let now = net.now();
    net.node_mut::<Stack>(cli).connect(now, cid, &param).unwrap();
    let mut sid = None;
    for _ in 0..100 {
        net.run_for(Duration::from_millis(20));
        let ev = super::common::sim::events(&mut net, srv);
        if let Some(e) = ev.iter().find(|e| e.kind == EventKind::ConnectRequest) {
            sid = Some(e.id);
            break;
        }
    }
    let sid = sid.expect("CONNECT_REQUEST");
    let now = net.now();
    let s = net.node_mut::<Stack>(srv);
    let sq = s.create_qp_for_id(sid).unwrap();
    s.accept(now, sid, &param).unwrap();
    net.run_for(Duration::from_secs(1));
    let s = net.node_mut::<Stack>(srv).rc_mut();
    let sbuf = s.reg_mr(1 << 16, Access::ALL).unwrap();
    for i in 0..12u64 {
        s.post_recv(sq, RecvWr { wr_id: i, sg_list: vec![sge(&sbuf, 0, 4096)] }).unwrap();
    }
    let now = net.now();
    let c = net.node_mut::<Stack>(cli).rc_mut();
    let cbuf = c.reg_mr(1 << 16, Access::ALL).unwrap();
    for i in 0..12u64 {
        c.post_send(now, cq, wr(i, SendOp::Send, vec![sge(&cbuf, 0, 3000)])).unwrap();
        let read = SendOp::Read { remote_addr: sbuf.addr + 4096 * (i % 8), rkey: sbuf.rkey };
        c.post_send(now, cq, wr(100 + i, read, vec![sge(&cbuf, 8192, 2048)])).unwrap();
    }
    net.run_for(Duration::from_millis(500));
    let now = net.now();
    net.node_mut::<Stack>(cli).disconnect(now, cid).unwrap();
    net.run_for(Duration::from_secs(2));
    let path = dir.join("cm-rc.pcap");
    std::fs::write(&path, net.pcap_bytes()).unwrap();
    path
}

/// Multicast through the in-process SA on the simulated link (A's cable loses 10 %, so SA
/// requests are re-sent): A joins three groups (one twice, as two ids), leaves two, destroys
/// the id holding the third; SA Set/Delete on QP 1 and IGMPv3 reports (both paths). Returns
/// the pcap.
pub fn multicast(dir: &Path, seed: u64) -> PathBuf {
    use roce_cm::{MulticastPaths, PortSpace, QpType};
    use roce_wire::mcmember::JoinState;
    use std::net::SocketAddr;
    let sa_ip = B;
    let mut net = SimNet::new(seed);
    net.set_capture(true);
    let mut cfg = StackConfig::new(MAC_A, A, 24);
    cfg.sa = Some(IpAddr::V4(sa_ip));
    cfg.seed = seed;
    cfg.multicast_paths = MulticastPaths::BOTH;
    let lossy = LinkConfig { latency: Duration::from_micros(100), loss: 0.1, ..LinkConfig::default() };
    let a = net.add(Stack::new(cfg), lossy);
    let mut scfg = StackConfig::new(MAC_B, sa_ip, 24);
    scfg.seed = seed ^ 0xffff;
    net.add(roce_net::SaHost::with_defaults(scfg), LinkConfig::default());
    let g: [IpAddr; 3] = [1, 2, 3].map(|x| IpAddr::V4(Ipv4Addr::new(239, x, 2, 3)));
    let now = net.now();
    let s = net.node_mut::<Stack>(a);
    let ids: Vec<_> = (0..3)
        .map(|_| {
            let id = s.create_id(PortSpace::Udp, QpType::Ud).unwrap();
            s.bind_addr(id, SocketAddr::new(IpAddr::V4(A), 0)).unwrap();
            id
        })
        .collect();
    // (id, group, join state): group 0 twice from one port, as two ids.
    let joins =
        [(0, 0, JoinState::FULL_MEMBER), (1, 0, JoinState::SEND_ONLY_FULL_MEMBER), (1, 1, JoinState::FULL_MEMBER)];
    for &(id, group, state) in joins.iter().chain([(2, 2, JoinState::FULL_MEMBER)].iter()) {
        s.join_multicast(now, ids[id], g[group], state).unwrap();
    }
    net.run_for(Duration::from_secs(8));
    let now = net.now();
    let s = net.node_mut::<Stack>(a);
    while s.poll_event().is_some() {}
    for &(id, group, _) in &joins {
        // A join the SA never answered under loss has nothing to leave: that is fine here.
        let _ = s.leave_multicast(now, ids[id], g[group]);
    }
    s.destroy_id(now, ids[2]).unwrap();
    net.run_for(Duration::from_secs(15));
    let path = dir.join("multicast.pcap");
    std::fs::write(&path, net.pcap_bytes()).unwrap();
    path
}
