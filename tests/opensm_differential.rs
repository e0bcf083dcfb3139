#[path = "ibsim/harness.rs"]
mod ibsim_harness;
use std::net::Ipv6Addr;
use std::time::{Duration, Instant};
use ibsim_harness::Fabric;
use roce_wire::mad::Method;
use roce_wire::mcmember::{ComponentMask, JoinState, McMemberRecord};
use roce_wire::sa::{attr, SaData, SaMad};
use roce_wire::{Gid, RDMA_UDP_QKEY};

fn rec(mgid: Ipv6Addr, port_gid: Gid, js: u8) -> McMemberRecord {
    McMemberRecord { mgid: Gid::from_ipv6(mgid), port_gid, q_key: RDMA_UDP_QKEY, p_key: 0xFFFF, join_state: JoinState(js), ..McMemberRecord::default() }
}

#[test]
fn probe() {
    let fabric = Fabric::start();
    let mut c = fabric.client("Hca2");
    let me = c.port_gid();
    println!("portinfo {:02x?}", c.port_info());
    let mut tx = |c: &mut roce_net::ibsim::IbsimClient, m: Method, mask: u64, r: McMemberRecord, key: u64| {
        let tid = c.new_tid();
        let mut req = SaMad::request(m, tid, attr::MC_MEMBER_RECORD, mask, SaData::mc_member(r));
        req.sa.sm_key = key;
        let resp = c.request(c.sm_lid(), 1, &req.to_bytes(), Duration::from_secs(2)).unwrap();
        let p = SaMad::parse(&resp).unwrap();
        println!("{m:?} mask {mask:#x} -> {:?} {:#06x} rmpp {:?} off {} data {:02x?}", p.header.method, p.header.status.0, p.rmpp, p.sa.attribute_offset, &resp[56..56+60]);
        println!("   req data equal: {}", resp[56..] == req.to_bytes()[56..]);
        let mut more = 0;
        while let Ok(Some(_)) = c.recv_mad(Some(Duration::from_millis(200))) { more += 1; }
        if more > 0 { println!("  +{more} more MADs"); }
        p
    };
    let t0 = Instant::now();
    for i in 0..5u16 {
        tx(&mut c, Method::Set, 0x130C7, rec(Ipv6Addr::new(0xff12, 0x4001, 0xffff, 0, 0, 0, 0xef01, i), me, 1), 0);
    }
    println!("5 joins {:?}", t0.elapsed());
    tx(&mut c, Method::GetTable, 0, McMemberRecord::default(), 0);
    tx(&mut c, Method::GetTable, 0, McMemberRecord::default(), 1);
    tx(&mut c, Method::Get, 0x1, rec(Ipv6Addr::new(0xff12, 0x4001, 0xffff, 0, 0, 0, 0xef01, 9), me, 1), 0);
    tx(&mut c, Method::Set, 0x10003, rec(Ipv6Addr::new(0xff12, 0x4001, 0xffff, 0, 0, 0, 0xef01, 9), me, 1), 0);
    tx(&mut c, Method::Delete, 0x10003, rec(Ipv6Addr::new(0xff12, 0x4001, 0xffff, 0, 0, 0, 0xef01, 9), me, 1), 0);
    // leak: join 1, join 8, leave 1
    let g = Ipv6Addr::new(0xff12, 0x4001, 0xffff, 0, 0, 0, 0xef01, 0x100);
    tx(&mut c, Method::Set, 0x130C7, rec(g, me, 1), 0);
    tx(&mut c, Method::Set, 0x130C7, rec(g, me, 8), 0);
    tx(&mut c, Method::Delete, 0x10003, rec(g, me, 1), 0);
    tx(&mut c, Method::Get, 0x1, rec(g, me, 1), 0);
    tx(&mut c, Method::GetTable, 0x1, rec(g, me, 1), 1);
    tx(&mut c, Method::Set, 0x130C7, rec(g, me, 1), 0);
    tx(&mut c, Method::GetTable, 0x1, rec(g, me, 1), 1);
    tx(&mut c, Method::Delete, 0x10003, rec(g, me, 1), 0);
    tx(&mut c, Method::Get, 0x1, rec(g, me, 1), 0);
    std::thread::sleep(Duration::from_secs(2));
    tx(&mut c, Method::Get, 0x1, rec(g, me, 1), 0);
    println!("{}", fabric.saquery(&["-g"]));
}
