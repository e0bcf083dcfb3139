#[path = "ibsim/harness.rs"]
mod ibsim_harness;
use ibsim_harness::Fabric;
use roce_net::ibsim::IbsimClient;
use roce_wire::mad::Method;
use roce_wire::mcmember::{JoinState, McMemberRecord};
use roce_wire::sa::{attr, SaData, SaMad};
use roce_wire::{Gid, RDMA_UDP_QKEY};
use std::net::Ipv6Addr;
use std::time::{Duration, Instant};

fn rec(mgid: Ipv6Addr, port_gid: Gid, js: u8) -> McMemberRecord {
    McMemberRecord {
        mgid: Gid::from_ipv6(mgid),
        port_gid,
        q_key: RDMA_UDP_QKEY,
        p_key: 0xFFFF,
        join_state: JoinState(js),
        ..McMemberRecord::default()
    }
}

fn tx(c: &mut IbsimClient, m: Method, mask: u64, r: McMemberRecord, key: u64, show: bool) {
    let tid = c.new_tid();
    let mut req = SaMad::request(m, tid, attr::MC_MEMBER_RECORD, mask, SaData::mc_member(r));
    req.sa.sm_key = key;
    c.send_mad(c.sm_lid(), 1, &req.to_bytes()).unwrap();
    loop {
        let p = c.recv_packet(Some(Duration::from_secs(2))).unwrap().expect("answer");
        if p.tid() & 0xFFFF_FFFF_FFFF != tid & 0xFFFF_FFFF_FFFF {
            continue;
        }
        let s = SaMad::parse(&p.mad).unwrap();
        if show {
            println!(
                "{m:?} mask {mask:#x} key {key} -> {:?} {:#06x} len {} off {} rmpp {:?}",
                s.header.method, s.header.status.0, p.length, s.sa.attribute_offset, s.rmpp
            );
        }
        break;
    }
}

#[test]
fn probe() {
    let fabric = Fabric::start();
    let mut c = fabric.client("Hca2");
    let me = c.port_gid();
    println!("portinfo {:02x?}", c.port_info());
    let g = |i: u16| Ipv6Addr::new(0xff12, 0x4001, 0xffff, 0, 0, 0, 0xef01, i);
    tx(&mut c, Method::GetTable, 0, McMemberRecord::default(), 0, true);
    tx(&mut c, Method::GetTable, 0, McMemberRecord::default(), 1, true);
    tx(&mut c, Method::Set, 0x130C7, rec(g(0), me, 1), 0, true);
    tx(&mut c, Method::GetTable, 1, rec(g(0), me, 1), 1, true);
    tx(&mut c, Method::GetTable, 1, rec(g(0), me, 1), 0, true);
    tx(&mut c, Method::Get, 1, rec(g(0), me, 1), 0, true);
    tx(&mut c, Method::Get, 1, rec(g(0), me, 1), 1, true);
    let t0 = Instant::now();
    for i in 1..1000u16 {
        tx(&mut c, Method::Set, 0x130C7, rec(g(i), me, 1), 0, i > 990);
    }
    println!("999 joins {:?}", t0.elapsed());
    tx(&mut c, Method::GetTable, 0, McMemberRecord::default(), 0, true);
    tx(&mut c, Method::GetTable, 0, McMemberRecord::default(), 1, true);
    println!("{}", fabric.saquery(&["-g"]).matches("MGID").count());
    let t0 = Instant::now();
    for i in 0..1000u16 {
        tx(&mut c, Method::Delete, 0x10003, rec(g(i), me, 1), 0, i > 990);
    }
    println!("1000 leaves {:?}", t0.elapsed());
    tx(&mut c, Method::GetTable, 0, McMemberRecord::default(), 0, true);
    println!("{}", fabric.saquery(&["-g"]));
}
