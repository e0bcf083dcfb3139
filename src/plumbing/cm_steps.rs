//! The RDMA-CM steps the CM commands share, written once: `udaddy` and `cmatose` resolve a
//! server ([`resolved_id`]), listen and take the first request ([`listen`],
//! [`wait_connect_request`]), wait for an event or a failure ([`wait_for`]) and end alike
//! ([`run_steps`]: "test complete", "return status N", as rdma-core's examples print them);
//! `rping` takes its first request with [`first_connect_request`] too. Uses [`super::port`],
//! [`super::out`] and [`super::exit`].

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use roce_cm::{CmEvent, CmId, EventKind, PortSpace, QpType};
use roce_net::driver::Driver;

use crate::plumbing::exit;
use crate::plumbing::out::{out, print_event, status};
use crate::plumbing::port::{check_families, destroy_ids, finish, open_port_or_exit, CliDevice, PortOptions};

/// Refuse, before any traffic, a server (`-s`) of another address family than the stack's
/// own (`-b`).
pub fn check_addresses(tool: &str, port: &PortOptions, server: Option<IpAddr>) -> Result<(), String> {
    check_families(tool, &[("-b", Some(port.local)), ("-s", server)])
}

/// Run a CM command's `steps` (its client or its server) on a port opened for `tool` (`roce
/// udaddy`), unless the checks before any traffic (`checked`) failed: a usage error, said on
/// stderr. A failed step is said as `name: why` (`udaddy: ...`). Whatever ids are still
/// alive after (a stop, a failure) are destroyed as the kernel would (DREQ for a connected id,
/// REJ for a pending one); then "test complete", "return status N", the counters, and the
/// exit status (the stop's, 128+N / 141, if one was asked).
pub fn run_steps(
    tool: &str,
    name: &str,
    port: &PortOptions,
    checked: Result<(), String>,
    steps: impl FnOnce(&mut Driver<CliDevice>) -> Result<(), String>,
) -> u8 {
    if let Err(e) = checked {
        eprintln!("{e}");
        return exit::USAGE;
    }
    let mut d = match open_port_or_exit(tool, port) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let code = match steps(&mut d) {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("{name}: {e}");
            exit::FAILED
        }
    };
    let ids: Vec<CmId> = d.stack.ids().collect();
    destroy_ids(tool, &mut d, &ids);
    out!("test complete");
    out!("return status {code}");
    finish(tool, &mut d, &[], port.verbose, code)
}

/// The QP type of a port space's ids: UD for UDP, RC for TCP.
fn qp_type(ps: PortSpace) -> QpType {
    if ps == PortSpace::Udp {
        QpType::Ud
    } else {
        QpType::Rc
    }
}

/// Wait for one of `kinds` on `id` (any failure event ends the wait too); prints the event.
pub fn wait_for(
    d: &mut Driver<CliDevice>,
    id: CmId,
    kinds: &[EventKind],
    timeout: Duration,
    what: &str,
) -> Result<CmEvent, String> {
    wait_for_event(d, id, kinds, timeout, what, true)
}

/// [`wait_for`], the event printed or not (`roce perftest` prints none, as perftest).
pub fn wait_for_event(
    d: &mut Driver<CliDevice>,
    id: CmId,
    kinds: &[EventKind],
    timeout: Duration,
    what: &str,
    print: bool,
) -> Result<CmEvent, String> {
    const FAIL: [EventKind; 7] = [
        EventKind::AddrError,
        EventKind::RouteError,
        EventKind::ConnectError,
        EventKind::Unreachable,
        EventKind::Rejected,
        EventKind::DeviceRemoval,
        EventKind::Disconnected,
    ];
    let mut all: Vec<EventKind> = kinds.to_vec();
    all.extend(FAIL.iter().filter(|k| !kinds.contains(k)));
    match d.wait_event(id, &all, timeout) {
        Ok(Some(e)) => {
            if print {
                print_event(&e, "");
            }
            if kinds.contains(&e.kind) {
                Ok(e)
            } else {
                Err(format!("{what}: {} status {}", e.kind.name(), e.status))
            }
        }
        Ok(None) if d.stopped() => Err(format!("{what}: stopped")),
        Ok(None) => Err(format!("{what}: ETIMEDOUT: no event within {:.1} s", timeout.as_secs_f64())),
        Err(e) => Err(format!("{what}: {e}")),
    }
}

/// The client's first steps (as udaddy.c and cmatose.c): create an id of the port space (UD
/// for UDP, RC for TCP), resolve_addr from our address to the server, then resolve_route,
/// each waited for.
pub fn resolved_id(
    d: &mut Driver<CliDevice>,
    tool: &str,
    ps: PortSpace,
    local: IpAddr,
    dst: SocketAddr,
    timeout: Duration,
) -> Result<(CmId, SocketAddr), String> {
    status!("{tool}: connecting");
    resolve_id(d, ps, local, dst, timeout, true)
}

/// [`resolved_id`]'s steps, the events printed or not (`roce perftest` prints none).
pub fn resolve_id(
    d: &mut Driver<CliDevice>,
    ps: PortSpace,
    local: IpAddr,
    dst: SocketAddr,
    timeout: Duration,
    print: bool,
) -> Result<(CmId, SocketAddr), String> {
    let id = d.stack.create_id(ps, qp_type(ps)).map_err(|e| format!("create_id: {e}"))?;
    let now = d.now();
    d.stack
        .resolve_addr(now, id, Some(SocketAddr::new(local, 0)), dst, Duration::from_millis(2000))
        .map_err(|e| format!("resolve_addr: {e}"))?;
    wait_for_event(d, id, &[EventKind::AddrResolved], timeout, "resolve_addr", print)?;
    let now = d.now();
    d.stack.resolve_route(now, id, Duration::from_millis(2000)).map_err(|e| format!("resolve_route: {e}"))?;
    wait_for_event(d, id, &[EventKind::RouteResolved], timeout, "resolve_route", print)?;
    Ok((id, dst))
}

/// The server's first steps: an id of the port space bound to `addr` and listening.
pub fn listen(d: &mut Driver<CliDevice>, ps: PortSpace, addr: SocketAddr) -> Result<CmId, String> {
    let listen = d.stack.create_id(ps, qp_type(ps)).map_err(|e| format!("create_id: {e}"))?;
    d.stack.bind_addr(listen, addr).map_err(|e| format!("bind {addr}: {e}"))?;
    d.stack.listen(listen, 0).map_err(|e| format!("listen: {e}"))?;
    Ok(listen)
}

/// The first CONNECT_REQUEST within `timeout`, taken from the queued events. It arrives on
/// the child id, with listen_id = the listener.
pub fn first_connect_request(d: &mut Driver<CliDevice>, timeout: Duration) -> Option<CmEvent> {
    let mut req = None;
    let _ = d.run_until(timeout, |d| {
        if let Some(i) = d.events.iter().position(|e| e.kind == EventKind::ConnectRequest) {
            req = d.events.remove(i);
        }
        req.is_some()
    });
    req
}

/// [`first_connect_request`], printed; a stop or the timeout is the error.
pub fn wait_connect_request(d: &mut Driver<CliDevice>, timeout: Duration) -> Result<CmEvent, String> {
    let Some(req) = first_connect_request(d, timeout) else {
        if d.stopped() {
            return Err("stopped while listening".into());
        }
        return Err(format!("ETIMEDOUT: no connection request within {:.1} s", timeout.as_secs_f64()));
    };
    print_event(&req, "");
    Ok(req)
}
