//! RMPP receive against roce-sa on the simulated link: a GetTable of 0, 1, 3, 4, 50 and 500
//! MCMemberRecords and of 1, 2 and 50 ServiceRecords reaches the application whole — every
//! record exactly once, byte-identical to the table the responder sends (its segments joined
//! by PayloadLength) — through the engine's RMPP receiver (segments, window ACKs); and under a
//! loss/duplication/reordering sweep the table is whole or the query ends in a typed error,
//! never a partial table delivered as complete. `rdma_resolve_ib_service` keeps every record.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use roce_cm::{CmState, Errno, EventKind, IbService, PortSpace, QpType, Stack, StackConfig};
use roce_net::{LinkConfig, NodeId, SaHost, SimNet};
use roce_sa::{Requester, SaResponder};
use roce_wire::mad::{MadStatus, Method};
use roce_wire::mcmember::McMemberRecord;
use roce_wire::sa::{attr, SaData, SaMad, SA_DATA_OFFSET};
use roce_wire::service_record::{ServiceRecord, SERVICE_RECORD_LEN};
use roce_wire::Gid;

use crate::common::sa_fill::{fill_groups, fill_services};

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const SA: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

struct Net {
    net: SimNet,
    a: NodeId,
    sa: NodeId,
}

fn net(seed: u64, link: LinkConfig) -> Net {
    let mut net = SimNet::new(seed);
    let mut cfg = StackConfig::new([2, 0, 0, 0, 0, 1], A, 24);
    cfg.sa = Some(IpAddr::V4(SA));
    cfg.seed = seed;
    let a = net.add(Stack::new(cfg), link.clone());
    let mut scfg = StackConfig::new([2, 0, 0, 0, 0, 2], SA, 24);
    scfg.seed = seed ^ 0x55;
    let sa = net.add(SaHost::with_defaults(scfg), link);
    Net { net, a, sa }
}

fn table_request(attribute: u16) -> SaMad {
    let data = if attribute == attr::SERVICE_RECORD {
        SaData::service(ServiceRecord::default())
    } else {
        SaData::mc_member(McMemberRecord::default())
    };
    SaMad::request(Method::GetTable, 0, attribute, 0, data)
}

/// The records the responder sends for the table: its segments' data joined, cut at the
/// PayloadLength, read at the AttributeOffset stride.
fn responder_table(sa: &mut SaResponder, attribute: u16, record_len: usize) -> (usize, Vec<Vec<u8>>) {
    let mut req = table_request(attribute);
    req.header.transaction_id = 0xABCD_0000;
    let reply = sa.handle_mad(Requester::new(Gid::from_ipv4(A), 1), &req.to_bytes());
    let segs = reply.as_slice();
    let first = SaMad::parse(&segs[0]).unwrap();
    let mut data: Vec<u8> = segs.iter().flat_map(|s| s[SA_DATA_OFFSET..].to_vec()).collect();
    data.truncate(first.rmpp.data2 as usize - 20 * segs.len());
    let stride = usize::from(first.sa.attribute_offset) * 8;
    let recs = if stride == 0 { Vec::new() } else { data.chunks(stride).map(|c| c[..record_len].to_vec()).collect() };
    (segs.len(), recs)
}

/// Query the table from the engine; the records it delivered (or its errno) and its result.
type TableResult = Result<(u32, Vec<Vec<u8>>), (Errno, Option<roce_cm::RmppError>)>;

fn engine_table(n: &mut Net, attribute: u16, record_len: usize, wait: Duration) -> TableResult {
    let now = n.net.now();
    let h = n.net.node_mut::<Stack>(n.a).sa_query(now, table_request(attribute)).unwrap();
    n.net.run_for(wait);
    let s = n.net.node_mut::<Stack>(n.a);
    let r = s.poll_sa_result().expect("every query ends");
    assert_eq!(r.handle, h);
    assert_eq!(s.sa_transactions(), 0, "nothing left outstanding");
    match &r.result {
        Ok(m) => {
            assert_eq!(m.header.status, MadStatus::SUCCESS);
            // the result's headers are the first segment's
            if r.segments > 1 {
                assert_eq!((m.rmpp.data1, m.rmpp.flags.contains(roce_wire::rmpp::RmppFlags::FIRST)), (1, true));
            }
            Ok((r.segments, r.records(record_len).map(<[u8]>::to_vec).collect()))
        }
        Err(e) => Err((*e, r.rmpp_error)),
    }
}

#[test]
fn tables_of_every_size_arrive_whole() {
    for (attribute, len, counts) in [
        (attr::MC_MEMBER_RECORD, McMemberRecord::LEN, &[0u16, 1, 3, 4, 50, 500][..]),
        (attr::SERVICE_RECORD, SERVICE_RECORD_LEN, &[1, 2, 50][..]),
    ] {
        for &count in counts {
            let mut n = net(u64::from(count), LinkConfig::default());
            let sa = &mut n.net.node_mut::<SaHost>(n.sa).sa;
            if attribute == attr::SERVICE_RECORD {
                fill_services(sa, count);
            } else {
                fill_groups(sa, count);
            }
            let (segments, want) = responder_table(sa, attribute, len);
            assert_eq!(want.len(), usize::from(count));
            let (got_segments, got) = engine_table(&mut n, attribute, len, Duration::from_secs(1))
                .unwrap_or_else(|e| panic!("{count} records of 0x{attribute:04x}: {e:?}"));
            assert_eq!(got_segments as usize, segments, "{count} records");
            assert_eq!(got, want, "{count} records of 0x{attribute:04x}: every record once, byte for byte");
            let s = n.net.node::<Stack>(n.a);
            let st = s.rmpp_stats();
            assert_eq!(st.segments as usize, segments);
            // ACKs: the first segment (window opened), the Last; more only past 64 segments
            let acks = if segments == 1 { 1 } else { 2 + (segments - 2) / 64 };
            assert_eq!(st.acks as usize, acks, "{count} records: {st:?}");
            assert_eq!(s.counters().total_dropped(), 0, "{:?}", s.counters().dropped);
            // roce-sa's RMPP sender got every ACK: one per window of a table of several
            // segments, the last one completing it; a one-segment table's ACK matches no
            // transfer (it was one MAD)
            let host = n.net.node::<SaHost>(n.sa);
            let sent = host.rmpp.stats();
            assert_eq!(sent.acks + sent.unmatched, st.acks, "roce-sa got every ACK: {sent:?}");
            assert_eq!(sent.completed, u64::from(segments > 1), "{sent:?}");
            assert_eq!((sent.segments_resent, host.rmpp.active()), (0, 0), "{sent:?}");
        }
    }
}

#[test]
fn resolve_ib_service_keeps_every_record() {
    let mut n = net(5, LinkConfig::default());
    fill_services(&mut n.net.node_mut::<SaHost>(n.sa).sa, 3);
    let now = n.net.now();
    let s = n.net.node_mut::<Stack>(n.a);
    let id = s.create_id(PortSpace::Tcp, QpType::Rc).unwrap();
    s.bind_addr(id, SocketAddr::new(IpAddr::V4(A), 0)).unwrap();
    // neither flag: every registered record matches (3 records: 3 segments)
    let svc = IbService { service_id: 0, service_name: [0; 64], flags: 0 };
    s.resolve_ib_service(now, id, &svc, roce_cm::service::KERNEL_TIMEOUT).unwrap();
    n.net.run_for(Duration::from_secs(1));
    let s = n.net.node_mut::<Stack>(n.a);
    let ev = s.poll_event().unwrap();
    assert_eq!(ev.kind, EventKind::AddrInfoResolved);
    assert_eq!(s.state(id), Some(CmState::AddrInfoResolved));
    let recs = s.query_ib_service(id).unwrap();
    assert_eq!(recs.iter().map(|r| r.service_id).collect::<Vec<_>>(), [0x1000, 0x1001, 0x1002]);
    assert_eq!(s.rmpp_stats().segments, 3);
}

#[test]
fn loss_sweep_whole_or_typed_error() {
    let (mut whole, mut failed) = (0, 0);
    for seed in 0..200u64 {
        let loss = (seed % 5) as f64 * 0.05; // 0 … 20 %
        let link = LinkConfig {
            latency: Duration::from_micros(100),
            jitter: Duration::from_micros(300),
            loss,
            duplicate: 0.05,
            reorder: 0.1,
            ..LinkConfig::default()
        };
        let mut n = net(seed, link);
        let sa = &mut n.net.node_mut::<SaHost>(n.sa).sa;
        fill_groups(sa, 50);
        let (_, want) = responder_table(sa, attr::MC_MEMBER_RECORD, McMemberRecord::LEN);
        match engine_table(&mut n, attr::MC_MEMBER_RECORD, McMemberRecord::LEN, Duration::from_secs(5)) {
            Ok((_, got)) => {
                assert_eq!(got, want, "seed {seed}: a table delivered as complete is whole");
                whole += 1;
            }
            Err((e, why)) => {
                assert!(e == Errno::ETIMEDOUT, "seed {seed}: {e:?} {why:?}");
                failed += 1;
            }
        }
        // every segment that did not go into the table is counted with its reason
        let s = n.net.node::<Stack>(n.a);
        for why in s.counters().dropped.keys() {
            let n = why.name();
            assert!(
                n.starts_with("rmpp_") || n.starts_with("neighbor_") || n == "unsolicited_response",
                "seed {seed}: {why}"
            );
        }
    }
    eprintln!("loss sweep: {whole} whole tables, {failed} typed timeouts of 200");
    assert!(whole > 100, "most tables get through ({whole} of 200)");
}
