//! Connection set-up on the simulated link, shared by the engine and analysis tests.
#![allow(dead_code)] // (each test binary uses a part)

use std::net::SocketAddr;
use std::time::Duration;

use roce_cm::{CmId, ConnectParam, EventKind, Stack};
use roce_net::{NodeId, SimNet};

/// The events node `n`'s stack has queued.
pub fn events(net: &mut SimNet, n: NodeId) -> Vec<roce_cm::CmEvent> {
    let s = net.node_mut::<Stack>(n);
    std::iter::from_fn(|| s.poll_event()).collect()
}

/// rdma_resolve_addr and rdma_resolve_route of `cid` on node `cli` towards `dst`.
pub fn resolve(net: &mut SimNet, cli: NodeId, cid: CmId, dst: SocketAddr) {
    let now = net.now();
    net.node_mut::<Stack>(cli).resolve_addr(now, cid, None, dst, Duration::from_secs(2)).unwrap();
    net.run_for(Duration::from_millis(100));
    assert_eq!(events(net, cli)[0].kind, EventKind::AddrResolved);
    let now = net.now();
    net.node_mut::<Stack>(cli).resolve_route(now, cid, Duration::from_secs(2)).unwrap();
    net.run_for(Duration::from_millis(10));
    assert_eq!(events(net, cli)[0].kind, EventKind::RouteResolved);
}

/// The connection parameters of the RC tests: 4 responder resources and initiator depth, 7
/// retries and RNR retries.
pub fn rc_connect_param() -> ConnectParam {
    ConnectParam {
        responder_resources: 4,
        initiator_depth: 4,
        retry_count: 7,
        rnr_retry_count: 7,
        ..Default::default()
    }
}
