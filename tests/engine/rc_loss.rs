//! Issue 14 item 4: RC QPs between two engines on the simulated link, framed as RoCEv2
//! (ICRC and all), at up to 30 % loss with duplication and reordering over 1,000 seeds:
//! every message is delivered exactly once, in order, byte-identical, or the requester's QP
//! ends in RETRY_EXC_ERR with the rest flushed. Also: RNR with a receiver that posts late,
//! and retry exhaustion on a dead link.

use crate::common;

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use common::Rng;
use roce_cm::rc::{Access, MrInfo, QpAttr, QpInit, QpState, RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus};
use roce_cm::{Stack, StackConfig};
use roce_net::{LinkConfig, NodeId, SimNet};

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];

fn lossy(loss: f64) -> LinkConfig {
    LinkConfig {
        latency: Duration::from_micros(20),
        jitter: Duration::from_micros(40),
        loss,
        duplicate: 0.1,
        reorder: 0.1,
        reorder_delay: Duration::from_micros(300),
        ..LinkConfig::default()
    }
}

pub(crate) struct Run {
    pub net: SimNet,
    pub a: NodeId,
    pub b: NodeId,
    pub qa: u32,
    pub qb: u32,
}

/// Two stacks with one connected RC QP pair (attributes set by hand, as ibv_rc_pingpong
/// does; connected mode through the CM is tests/engine/rc_cm.rs).
fn setup(seed: u64, link: LinkConfig, mtu: u32) -> Run {
    setup_with(seed, link, mtu, QpInit::default())
}

/// Two stacks with one connected QP pair of `init`'s kind (RC or UC), attributes set by
/// hand; A's cable is `link`.
pub(crate) fn setup_with(seed: u64, link: LinkConfig, mtu: u32, init: QpInit) -> Run {
    let mut net = SimNet::new(seed);
    let mut ca = StackConfig::new(MAC_A, A, 24);
    ca.seed = seed;
    let mut cb = StackConfig::new(MAC_B, B, 24);
    cb.seed = seed ^ 0xbeef;
    let a = net.add(Stack::new(ca), link);
    let b = net.add(Stack::new(cb), LinkConfig::default());
    let qa = net.node_mut::<Stack>(a).create_qp_with(init).unwrap();
    let qb = net.node_mut::<Stack>(b).create_qp_with(init).unwrap();
    let mut rng = Rng(seed | 1);
    let (pa, pb) = (rng.next() as u32 & 0xff_ffff, rng.next() as u32 & 0xff_ffff);
    let now = net.now();
    for (id, q, peer, pq, mac, sq, rq) in [(a, qa, B, qb, MAC_B, pa, pb), (b, qb, A, qa, MAC_A, pb, pa)] {
        let mut at = QpAttr::new(IpAddr::V4(peer), pq);
        at.path_mtu = mtu;
        at.sq_psn = sq;
        at.rq_psn = rq;
        at.dmac = Some(mac);
        at.timeout = 8; // 1 ms
        at.min_rnr_timer = 1;
        let rc = net.node_mut::<Stack>(id).rc_mut();
        for st in [QpState::Init, QpState::Rtr, QpState::Rts] {
            rc.modify_qp(now, q, st, &at).unwrap();
        }
    }
    Run { net, a, b, qa, qb }
}

fn sge(m: &MrInfo, off: u64, len: u32) -> Sge {
    Sge { addr: m.addr + off, length: len, lkey: m.lkey }
}

fn wr(wr_id: u64, op: SendOp, sg_list: Vec<Sge>) -> SendWr {
    SendWr { wr_id, op, sg_list, signaled: true, solicited: false, inline: None }
}

/// One seed: 8 SENDs of random sizes (each with its own receive), a WRITE, a READ of it
/// back and two FETCH_ADDs. Returns Ok(true) when everything was delivered, Ok(false) when
/// the requester ended in RETRY_EXC_ERR.
fn scenario(seed: u64, loss: f64) -> Result<bool, String> {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mtu = 256 << rng.below(5);
    let mut r = setup(seed, lossy(loss), mtu as u32);
    let now = r.net.now();
    let sa = r.net.node_mut::<Stack>(r.a).rc_mut();
    let la = sa.reg_mr(1 << 16, Access::ALL).unwrap();
    let data = rng.bytes(1 << 15);
    sa.mr_mut(la.lkey).unwrap()[..1 << 15].copy_from_slice(&data);
    let sb = r.net.node_mut::<Stack>(r.b).rc_mut();
    let rb = sb.reg_mr(1 << 16, Access::ALL).unwrap();
    let sizes: Vec<u32> = (0..8).map(|_| rng.below(1500) as u32).collect();
    for (i, _) in sizes.iter().enumerate() {
        sb.post_recv(r.qb, RecvWr { wr_id: i as u64, sg_list: vec![sge(&rb, i as u64 * 4096, 4096)] }).unwrap();
    }
    let sa = r.net.node_mut::<Stack>(r.a).rc_mut();
    let mut expect = Vec::new();
    for (i, &len) in sizes.iter().enumerate() {
        sa.post_send(now, r.qa, wr(i as u64, SendOp::Send, vec![sge(&la, i as u64 * 4096, len)])).unwrap();
        expect.push(WcOpcode::Send);
    }
    let wlen = 2500;
    let write = SendOp::Write { remote_addr: rb.addr + 32768, rkey: rb.rkey };
    sa.post_send(now, r.qa, wr(8, write, vec![sge(&la, 0, wlen)])).unwrap();
    let read = SendOp::Read { remote_addr: rb.addr + 32768, rkey: rb.rkey };
    sa.post_send(now, r.qa, wr(9, read, vec![sge(&la, 40000, wlen)])).unwrap();
    for i in 10..12 {
        let fa = SendOp::FetchAdd { remote_addr: rb.addr + 65528, rkey: rb.rkey, add: 3 };
        sa.post_send(now, r.qa, wr(i, fa, vec![sge(&la, 65528 - 8 * (i - 9), 8)])).unwrap();
    }
    expect.extend([WcOpcode::RdmaWrite, WcOpcode::RdmaRead, WcOpcode::FetchAdd, WcOpcode::FetchAdd]);
    r.net.run_for(Duration::from_secs(5));
    let sa = r.net.node_mut::<Stack>(r.a).rc_mut();
    let wa: Vec<_> = std::iter::from_fn(|| sa.poll_cq()).collect();
    if wa.len() != expect.len() {
        return Err(format!("seed {seed}: {} completions of {}: {wa:?}", wa.len(), expect.len()));
    }
    let mut failed = false;
    for (i, (w, op)) in wa.iter().zip(&expect).enumerate() {
        let ok = w.wr_id == i as u64
            && match (failed, w.status) {
                (false, WcStatus::Success) => w.opcode == *op,
                (false, WcStatus::RetryExcErr) => {
                    failed = true;
                    true
                }
                (true, WcStatus::WrFlushErr) => true,
                _ => false,
            };
        if !ok {
            return Err(format!("seed {seed}: completion {i}: {w:?}"));
        }
    }
    let a = sa.mr(la.lkey).unwrap().to_vec();
    let sb = r.net.node_mut::<Stack>(r.b).rc_mut();
    let wb: Vec<_> = std::iter::from_fn(|| sb.poll_cq()).collect();
    let b = sb.mr(rb.lkey).unwrap();
    // Receives: in order, each once, byte-identical (those that completed).
    for (i, w) in wb.iter().filter(|w| w.status == WcStatus::Success).enumerate() {
        let len = sizes[i] as usize;
        let at = i * 4096;
        if w.wr_id != i as u64 || w.byte_len as usize != len || b[at..at + len] != data[at..at + len] {
            return Err(format!("seed {seed}: receive {i}: {w:?}"));
        }
    }
    if failed {
        return Ok(false);
    }
    if wb.len() != sizes.len() {
        return Err(format!("seed {seed}: {} receives", wb.len()));
    }
    let w = wlen as usize;
    if b[32768..32768 + w] != data[..w] || a[40000..40000 + w] != data[..w] {
        return Err(format!("seed {seed}: WRITE/READ data differ"));
    }
    let v = u64::from_ne_bytes(b[65528..].try_into().unwrap());
    let r1 = u64::from_ne_bytes(a[65520..65528].try_into().unwrap());
    let r2 = u64::from_ne_bytes(a[65512..65520].try_into().unwrap());
    if (v, r1, r2) != (6, 0, 3) {
        return Err(format!("seed {seed}: fetch-adds {v} {r1} {r2}"));
    }
    Ok(true)
}

#[test]
fn thousand_seeds_up_to_thirty_percent_loss_with_duplication_and_reordering() {
    let (mut ok, mut exhausted) = (0, 0);
    for seed in 0..1000u64 {
        let loss = (seed % 4) as f64 * 0.1; // 0, 10, 20 and 30 %
        match scenario(seed, loss) {
            Ok(true) => ok += 1,
            Ok(false) => exhausted += 1,
            Err(e) => panic!("{e}"),
        }
    }
    eprintln!("rc_loss: 1000 seeds, {ok} delivered everything, {exhausted} ended in RETRY_EXC_ERR");
    assert!(exhausted < 20, "{exhausted} seeds exhausted retry_cnt 7");
}

#[test]
fn rnr_with_a_receiver_that_posts_late() {
    let mut r = setup(7, LinkConfig::with_latency(Duration::from_micros(20)), 1024);
    let now = r.net.now();
    let sa = r.net.node_mut::<Stack>(r.a).rc_mut();
    let la = sa.reg_mr(64, Access::ALL).unwrap();
    sa.mr_mut(la.lkey).unwrap().copy_from_slice(&[7; 64]);
    sa.post_send(now, r.qa, wr(1, SendOp::SendWithImm(99), vec![sge(&la, 0, 64)])).unwrap();
    r.net.run_for(Duration::from_millis(20));
    let rnr = r.net.node::<Stack>(r.a).rc().counters().rcvd_rnr_err;
    assert!(rnr > 10, "{rnr} RNR NAKs");
    assert_eq!(r.net.node::<Stack>(r.b).rc().counters().send_rnr_err, rnr);
    let sb = r.net.node_mut::<Stack>(r.b).rc_mut();
    let rb = sb.reg_mr(64, Access::LOCAL_WRITE).unwrap();
    sb.post_recv(r.qb, RecvWr { wr_id: 5, sg_list: vec![sge(&rb, 0, 64)] }).unwrap();
    r.net.run_for(Duration::from_millis(20));
    let sb = r.net.node_mut::<Stack>(r.b).rc_mut();
    let w = sb.poll_cq().unwrap();
    assert_eq!((w.wr_id, w.status, w.byte_len, w.imm_data), (5, WcStatus::Success, 64, Some(99)));
    assert_eq!(sb.mr(rb.lkey).unwrap(), &[7; 64]);
    assert_eq!(r.net.node_mut::<Stack>(r.a).rc_mut().poll_cq().unwrap().status, WcStatus::Success);
}

#[test]
fn retry_exhaustion_on_a_dead_link_is_retry_exc_err() {
    let mut r = setup(9, lossy(1.0), 1024);
    let now = r.net.now();
    let sa = r.net.node_mut::<Stack>(r.a).rc_mut();
    sa.post_send(now, r.qa, wr(1, SendOp::Send, vec![])).unwrap();
    sa.post_send(now, r.qa, wr(2, SendOp::Send, vec![])).unwrap();
    r.net.run_for(Duration::from_secs(1));
    let sa = r.net.node_mut::<Stack>(r.a).rc_mut();
    let st: Vec<_> = std::iter::from_fn(|| sa.poll_cq()).map(|w| w.status).collect();
    assert_eq!(st, [WcStatus::RetryExcErr, WcStatus::WrFlushErr]);
    assert_eq!(sa.counters().local_ack_timeout_err, 8); // the try and retry_cnt 7 retries
    assert_eq!(sa.qp_state(r.qa), Some(QpState::Err));
    assert_eq!(r.net.node::<Stack>(r.a).poll_timeout(), None, "no timer left behind");
}
