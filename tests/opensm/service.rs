//! `rdma_resolve_ib_service` and SA ServiceRecords against two SAs:
//! - OpenSM through ibsim: `roce sa-query -S --register` registers a service; OpenSM's own
//!   `saquery -S` (the peer's view) lists it; `--resolve` by ID and by name gets
//!   ADDRINFO_RESOLVED with OpenSM's record; a miss gets the kernel's ADDRINFO_ERROR (ENODATA);
//!   `--delete` removes it and `saquery -S` no longer lists it. Fails (never skips) without
//!   ibsim/OpenSM.
//! - roce-sa on the simulated link (engine test): the same calls through `Stack`, plus the
//!   lease running out, a timeout and the state rules; tshark decodes the ServiceRecord MADs our
//!   stack sent (the capture filtered on its MAC).

use crate::common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Command, Output};
use std::time::Duration;

use crate::ibsim_harness::Fabric;
use roce_cm::{CmState, Errno, EventKind, IbService, PortSpace, QpType, Stack, StackConfig};
use roce_net::{LinkConfig, NodeId, SaHost, SimNet};
use roce_wire::mad::{MadStatus, Method};
use roce_wire::sa::{attr, SaData, SaMad};
use roce_wire::service_record::{ComponentMask, ServiceRecord};
use roce_wire::Gid;

const SID: u64 = 0x1000_0000_0001_0107;

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The blocks of `saquery -S` ("ServiceRecord dump:" … "ServiceName…").
fn saquery_services(f: &Fabric) -> String {
    f.saquery(&["-S"])
}

#[test]
fn opensm_registers_resolves_and_deletes_a_service() {
    let f = Fabric::start();
    let roce = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_roce"))
            .env("IBSIM_SOCKNAME", &f.sockname)
            .args(["sa-query", "--ibsim", "Hca2", "-S"])
            .args(args)
            .output()
            .unwrap();
        let t = text(&o);
        (o.status.code(), t)
    };
    let sid = format!("{SID:#x}");
    // Register with a lease long enough for the test.
    let (code, t) = roce(&["--register", "--service-id", &sid, "--service-name", "roce-svc", "--lease", "600"]);
    assert_eq!(code, Some(0), "{t}");
    assert!(t.contains("SubnAdmGetResp") && t.contains("roce-svc"), "{t}");
    // The peer's view: OpenSM's own saquery lists it.
    let listed = saquery_services(&f);
    assert!(listed.contains("roce-svc") && listed.contains(&format!("0x{SID:016x}")), "saquery -S:\n{listed}");

    // Resolve by ID, then by name: OpenSM's record comes back as the destination.
    for how in [vec!["--service-id", sid.as_str()], vec!["--service-name", "roce-svc"]] {
        let mut args = vec!["--resolve"];
        args.extend(&how);
        let (code, t) = roce(&args);
        assert_eq!(code, Some(0), "{how:?}: {t}");
        assert!(t.contains("event: ADDRINFO_RESOLVED") && t.contains("roce-svc") && t.contains("1 records"), "{t}");
    }
    // A miss: the kernel's ADDRINFO_ERROR with -ENODATA (an empty GetTableResp).
    let (code, t) = roce(&["--resolve", "--service-name", "nobody-here"]);
    assert_eq!(code, Some(1), "{t}");
    assert!(t.contains("event: ADDRINFO_ERROR, status -61 (ENODATA)"), "{t}");

    // Delete: gone from OpenSM.
    let (code, t) = roce(&["--delete", "--service-id", &sid]);
    assert_eq!(code, Some(0), "{t}");
    assert!(t.contains("SubnAdmDeleteResp"), "{t}");
    let listed = saquery_services(&f);
    assert!(!listed.contains("roce-svc"), "saquery -S after the delete:\n{listed}");
    // A second delete: OpenSM's NO_RECORDS.
    let (code, t) = roce(&["--delete", "--service-id", &sid]);
    assert_eq!(code, Some(1), "{t}");
    assert!(t.contains("0x0300"), "{t}");
}

// ------------------------------------------------------------------------------------------
// The engine against roce-sa on the simulated link

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 3);
const SA: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

struct Net {
    net: SimNet,
    a: NodeId,
    b: NodeId,
    sa: NodeId,
}

fn net() -> Net {
    let mut net = SimNet::new(7);
    let cfg = |mac: u8, ip: Ipv4Addr| {
        let mut c = StackConfig::new([2, 0, 0, 0, 0, mac], ip, 24);
        c.sa = Some(IpAddr::V4(SA));
        c.seed = u64::from(mac);
        c
    };
    let a = net.add(Stack::new(cfg(1, A)), LinkConfig::default());
    let b = net.add(Stack::new(cfg(3, B)), LinkConfig::default());
    let sa = net.add(SaHost::with_defaults(StackConfig::new([2, 0, 0, 0, 0, 2], SA, 24)), LinkConfig::default());
    Net { net, a, b, sa }
}

/// B registers (or deletes) a service with the SA through its generic SA query.
fn sa_call(n: &mut Net, method: Method, rec: ServiceRecord, mask: u64) -> SaMad {
    let now = n.net.now();
    let s = n.net.node_mut::<Stack>(n.b);
    let h = s.sa_query(now, SaMad::request(method, 0, attr::SERVICE_RECORD, mask, SaData::service(rec))).unwrap();
    n.net.run_for(Duration::from_millis(50));
    let r = n.net.node_mut::<Stack>(n.b).poll_sa_result().expect("an answer");
    assert_eq!(r.handle, h);
    r.result.unwrap()
}

fn bound_id(n: &mut Net) -> roce_cm::CmId {
    let s = n.net.node_mut::<Stack>(n.a);
    let id = s.create_id(PortSpace::Tcp, QpType::Rc).unwrap();
    s.bind_addr(id, SocketAddr::new(IpAddr::V4(A), 0)).unwrap();
    id
}

fn resolve(n: &mut Net, id: roce_cm::CmId, svc: IbService) -> roce_cm::CmEvent {
    let now = n.net.now();
    let s = n.net.node_mut::<Stack>(n.a);
    s.resolve_ib_service(now, id, &svc, roce_cm::service::KERNEL_TIMEOUT).unwrap();
    assert_eq!(s.state(id), Some(CmState::AddrInfoQuery));
    n.net.run_for(Duration::from_secs(3));
    let s = n.net.node_mut::<Stack>(n.a);
    let ev = s.poll_event().expect("an ADDRINFO event");
    assert_eq!(ev.id, id);
    ev
}

#[test]
fn roce_sa_answers_resolve_ib_service() {
    let mut n = net();
    n.net.set_capture(true);
    let rec = ServiceRecord {
        service_id: SID,
        service_gid: Gid::from_ipv4(B),
        service_p_key: 0xFFFF,
        service_lease: 30,
        service_name: ServiceRecord::name_field("roce-svc"),
        ..ServiceRecord::default()
    };
    let mask = (ComponentMask::SERVICE_ID
        | ComponentMask::SERVICE_GID
        | ComponentMask::SERVICE_P_KEY
        | ComponentMask::SERVICE_LEASE
        | ComponentMask::SERVICE_NAME)
        .0;
    let r = sa_call(&mut n, Method::Set, rec, mask);
    assert_eq!((r.header.method, r.header.status), (Method::Get, MadStatus::SUCCESS));
    assert_eq!(n.net.node::<SaHost>(n.sa).sa.services().len(), 1, "the SA holds the record");

    // State rules: EINVAL before a bind (no device), ENODATA before a resolution.
    let s = n.net.node_mut::<Stack>(n.a);
    let idle = s.create_id(PortSpace::Tcp, QpType::Rc).unwrap();
    let now = n.net.now();
    let s = n.net.node_mut::<Stack>(n.a);
    assert_eq!(s.resolve_ib_service(now, idle, &IbService::by_id(SID), Duration::from_secs(2)), Err(Errno::EINVAL));
    assert_eq!(s.query_ib_service(idle), Err(Errno::ENODATA));
    let wild = s.create_id(PortSpace::Tcp, QpType::Rc).unwrap();
    s.bind_addr(wild, SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)).unwrap();
    assert_eq!(s.resolve_ib_service(now, wild, &IbService::by_id(SID), Duration::from_secs(2)), Err(Errno::EINVAL));

    // By ID: ADDRINFO_RESOLVED, the destination is the record's GID, the records are there.
    let id = bound_id(&mut n);
    let ev = resolve(&mut n, id, IbService::by_id(SID));
    assert_eq!((ev.kind, ev.status), (EventKind::AddrInfoResolved, 0));
    let s = n.net.node_mut::<Stack>(n.a);
    assert_eq!(s.state(id), Some(CmState::AddrInfoResolved));
    assert_eq!(s.id(id).unwrap().dst.map(|d| d.ip()), Some(IpAddr::V4(B)));
    let recs = s.query_ib_service(id).unwrap();
    assert_eq!((recs.len(), recs[0].name()), (1, Some("roce-svc")));
    // A second resolution on the same id: EINVAL (not ADDR_BOUND any more).
    let now = n.net.now();
    let s = n.net.node_mut::<Stack>(n.a);
    assert_eq!(s.resolve_ib_service(now, id, &IbService::by_id(SID), Duration::from_secs(2)), Err(Errno::EINVAL));
    // rdma_resolve_route goes on from ADDRINFO_RESOLVED.
    s.resolve_route(now, id, Duration::from_secs(1)).unwrap();
    n.net.run_for(Duration::from_millis(10));
    let s = n.net.node_mut::<Stack>(n.a);
    assert_eq!(s.poll_event().map(|e| e.kind), Some(EventKind::RouteResolved));

    // By name.
    let id = bound_id(&mut n);
    let ev = resolve(&mut n, id, IbService::by_name("roce-svc"));
    assert_eq!(ev.kind, EventKind::AddrInfoResolved);

    // A miss: ADDRINFO_ERROR with -ENODATA, back to ADDR_BOUND.
    let id = bound_id(&mut n);
    let ev = resolve(&mut n, id, IbService::by_name("nobody"));
    assert_eq!((ev.kind, ev.status), (EventKind::AddrInfoError, -61));
    assert_eq!(n.net.node::<Stack>(n.a).state(id), Some(CmState::AddrBound));

    // The lease (30 s) runs out at the SA: then a miss.
    n.net.run_for(Duration::from_secs(31));
    let id = bound_id(&mut n);
    let ev = resolve(&mut n, id, IbService::by_id(SID));
    assert_eq!((ev.kind, ev.status), (EventKind::AddrInfoError, -61));
    assert_eq!(n.net.node::<SaHost>(n.sa).sa.services().stats().expired, 1);

    // Register again and delete: a miss again.
    sa_call(&mut n, Method::Set, rec, mask);
    let r = sa_call(&mut n, Method::Delete, rec, 0x7);
    assert_eq!((r.header.method, r.header.status), (Method::Delete, MadStatus::SUCCESS));
    let id = bound_id(&mut n);
    assert_eq!(resolve(&mut n, id, IbService::by_id(SID)).kind, EventKind::AddrInfoError);

    // tshark reads our stack's ServiceRecord queries: the GetTables by ID and by name from A.
    let pcap = common::artefact_dir("opensm_service").join("engine.pcap");
    n.net.write_pcap(&pcap).unwrap();
    let out = Command::new(common::tshark())
        .args(["-n", "-r"])
        .arg(&pcap)
        // (the RMPP ACKs of the answers are counted apart below)
        .args([
            "-Y",
            "eth.src == 02:00:00:00:00:01 && infiniband.mad.attributeid == 0x0031 && !(infiniband.rmpp.rmpptype == 2)",
            "-T",
            "fields",
        ])
        .args(["-e", "infiniband.mad.method", "-e", "infiniband.sa.componentmask"])
        .args(["-e", "infiniband.linkrecord.serviceid", "-e", "infiniband.linkrecord.servicename"])
        .output()
        .unwrap();
    let lines = String::from_utf8_lossy(&out.stdout).replace(':', "");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let queries: Vec<&str> = lines.lines().collect();
    assert_eq!(queries.len(), 5, "five resolutions so far, one GetTable each:\n{lines}");
    assert!(queries.iter().all(|l| l.starts_with("0x12")), "{lines}");
    assert!(queries[0].contains(&format!("{SID:#018x}")) && queries[0].contains("\t0x0000000000000001"), "{lines}");
    assert!(queries[1].contains("\t0x0000000000000040") && queries[1].contains("726f63652d737663"), "{lines}");
    // Every answer was one RMPP DATA segment (Active|First|Last): each got our ACK (segment 1,
    // NewWindowLast 1), as the kernel's receiver sends it; tshark reads them as ACKs.
    let out = Command::new(common::tshark())
        .args(["-n", "-r"])
        .arg(&pcap)
        .args(["-Y", "eth.src == 02:00:00:00:00:01 && infiniband.rmpp.rmpptype == 2", "-T", "fields"])
        .args([
            "-e",
            "infiniband.mad.method",
            "-e",
            "infiniband.rmpp.segmentnumber",
            "-e",
            "infiniband.rmpp.newwindowlast",
        ])
        .output()
        .unwrap();
    let acks = String::from_utf8_lossy(&out.stdout).to_string();
    let ours = n.net.node::<Stack>(n.a).rmpp_stats().acks;
    assert_eq!(acks.lines().count() as u64, ours, "{acks}");
    assert!(ours >= 5 && acks.lines().all(|l| l == "0x12\t0x00000001\t0x00000001"), "{acks}");

    // The SA goes silent: ADDRINFO_ERROR with -ETIMEDOUT after the 2 s budget.
    let mut link = n.net.link(n.sa).clone();
    link.loss = 1.0;
    n.net.set_link(n.sa, link);
    let id = bound_id(&mut n);
    let ev = resolve(&mut n, id, IbService::by_id(SID));
    assert_eq!((ev.kind, ev.status), (EventKind::AddrInfoError, -110));
    // Destroying the id forgets its records.
    let now = n.net.now();
    let s = n.net.node_mut::<Stack>(n.a);
    s.destroy_id(now, id).unwrap();
    assert_eq!(s.query_ib_service(id), Err(Errno::ENOENT));
}
