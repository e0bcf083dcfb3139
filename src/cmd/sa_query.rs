//! `roce sa-query`: ask the SA, like `saquery`: MCMemberRecords (Get with `--mgid`, else
//! GetTable), or ServiceRecords (`-S`: list with GetTable, `--register` with Set, `--delete`
//! with Delete, and `--resolve` through the engine's `rdma_resolve_ib_service`), to an SA on a
//! raw socket or to OpenSM's SA through ibsim. Every record of an RMPP table is printed.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use roce_cm::{CmId, EventKind, IbService, PortSpace, QpType};
use roce_net::driver::Driver;
use roce_wire::mad::Method;
use roce_wire::mcmember::{ComponentMask as MemberMask, McMemberRecord};
use roce_wire::sa::{attr, SaData, SaMad};
use roce_wire::service_record::{ComponentMask as ServiceMask, ServiceRecord, INFINITE_LEASE};
use roce_wire::Gid;

use crate::plumbing::exit;
use crate::plumbing::options::SaPortArgs;
use crate::plumbing::out::{errno_name, out, status};
use crate::plumbing::port::{check_families, finish, open_port_or_exit, sa_timeout_text, CliDevice, PortOptions};

const TOOL: &str = "roce sa-query";

/// Query the SA for MCMemberRecords (Get with --mgid, else GetTable), like `saquery -m`.
///
/// A response with a non-zero status is printed with the status and its meaning, and the
/// exit code is 1. Needs CAP_NET_RAW.
///
/// Example: roce sa-query --iface tap0 -b 198.18.0.1 --sa 198.18.0.2 --mgid ::ffff:239.1.2.3
///
/// Example: roce sa-query --ibsim   (OpenSM through ibsim)
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// The stack's own address on the interface; required with --iface.
    #[arg(
        short = 'b',
        long = "bind",
        value_name = "ADDR",
        required_unless_present = "ibsim",
        conflicts_with = "ibsim"
    )]
    pub bind: Option<IpAddr>,
    /// Get this group's record (else GetTable of all).
    #[arg(long)]
    pub mgid: Option<Ipv6Addr>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub service: ServiceArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub port: SaPortArgs,
}

/// Run `roce sa-query`.
pub fn run(args: Args) -> ExitCode {
    crate::plumbing::shutdown::install();
    let port = args.port.options(args.bind, false);
    if let Err(code) = check_sa(&port) {
        return ExitCode::from(code);
    }
    ExitCode::from(if args.service.wanted() {
        service_records(&port, &args.service)
    } else {
        member_records(&port, args.mgid.map(Gid::from_ipv6))
    })
}

/// On a raw socket the SA's address is needed, and of `-b`'s family.
fn check_sa(port: &PortOptions) -> Result<(), u8> {
    if port.ibsim.is_some() {
        return Ok(());
    }
    if port.sa.is_none() {
        eprintln!("{TOOL}: --sa ADDR is required with --iface");
        return Err(exit::USAGE);
    }
    check_families(TOOL, &[("-b", Some(port.local)), ("--sa", port.sa)]).map_err(|e| {
        eprintln!("{e}");
        exit::USAGE
    })
}

pub(crate) fn print_member(r: &McMemberRecord) {
    out!("MCMemberRecord member dump:");
    out!("\t\tMGID....................{}", r.mgid);
    out!("\t\tPortGid.................{}", r.port_gid);
    out!("\t\tqkey....................0x{:X}", r.q_key);
    out!("\t\tmlid....................0x{:X}", r.mlid);
    out!("\t\tmtu.....................0x{:X}", (u8::from(r.mtu_selector) << 6) | r.mtu);
    out!("\t\tTClass..................0x{:X}", r.traffic_class);
    out!("\t\tpkey....................0x{:X}", r.p_key);
    out!("\t\trate....................0x{:X}", (u8::from(r.rate_selector) << 6) | r.rate);
    out!("\t\tpkt_life................0x{:X}", (u8::from(r.packet_life_time_selector) << 6) | r.packet_life_time);
    out!("\t\tSL......................0x{:X}", r.sl);
    out!("\t\tFlowLabel...............0x{:X}", r.flow_label);
    out!("\t\tHopLimit................0x{:X}", r.hop_limit);
    out!("\t\tScope...................0x{:X}", r.scope);
    out!("\t\tJoinState...............0x{:X} {}", r.join_state.0, r.join_state);
    out!("\t\tProxyJoin...............0x{:X}", u8::from(r.proxy_join));
}

/// SA Get (with an MGID) or GetTable of MCMemberRecords, to `port.sa` on a raw socket or to
/// OpenSM through ibsim. Returns the exit status: 0 on a success status, 1 on an error status
/// or no answer.
fn member_records(port: &PortOptions, mgid: Option<Gid>) -> u8 {
    let mut d = match open_port_or_exit(TOOL, port) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let rec = McMemberRecord { mgid: mgid.unwrap_or_default(), ..McMemberRecord::default() };
    let (method, mask) = match mgid {
        Some(_) => (Method::Get, MemberMask::MGID.0),
        None => (Method::GetTable, 0),
    };
    let req = SaMad::request(method, 0, attr::MC_MEMBER_RECORD, mask, SaData::mc_member(rec));
    let handle = match send_request(&mut d, req) {
        Ok(h) => h,
        Err(code) => return code,
    };
    let name = if mgid.is_some() { "SubnAdmGet" } else { "SubnAdmGetTable" };
    match (&port.ibsim, port.sa) {
        (Some(_), _) => status!("sa-query: {name} MCMemberRecord to the SM's SA through ibsim"),
        (None, Some(sa)) => {
            status!("sa-query: {name} MCMemberRecord to {sa} QP1 from {} on {}", port.local, port.iface)
        }
        (None, None) => {}
    }
    let code = match wait_sa_answer(TOOL, &mut d, handle, port.verbose) {
        Ok((resp, whole)) => {
            if let Some(code) = sa_status_failed(TOOL, &resp) {
                code
            } else {
                print_records(&resp, &whole);
                exit::OK
            }
        }
        Err(code) => code,
    };
    finish(TOOL, &mut d, &[], port.verbose, code)
}

/// Send the SA request `req`, returning its handle; a request the engine refuses is said and
/// is a usage error.
fn send_request(d: &mut Driver<CliDevice>, req: SaMad) -> Result<u64, u8> {
    let now = d.now();
    d.stack.sa_query(now, req).map_err(|e| {
        eprintln!("{TOOL}: {e}");
        exit::USAGE
    })
}

/// Wait up to 10 s for the answer to the SA query `handle` and print its first line (with
/// `verbose`, the RMPP segments received and ACKs sent). An error, a timeout (naming the step
/// that got no answer), a failed RMPP transfer or a stop is printed and turned into the exit
/// status. The answer comes with the whole result (its reassembled SA data).
fn wait_sa_answer(
    tool: &str,
    d: &mut Driver<CliDevice>,
    handle: u64,
    verbose: bool,
) -> Result<(SaMad, roce_cm::mcast::SaQueryResult), u8> {
    let mut result = None;
    let _ = d.run_until(Duration::from_secs(10), |d| {
        result = d.stack.poll_sa_result().filter(|r| r.handle == handle);
        result.is_some()
    });
    let Some(r) = result else {
        if !d.stopped() {
            eprintln!("{tool}: ETIMEDOUT: no answer within 10 s");
        }
        return Err(exit::FAILED);
    };
    match (&r.result, r.rmpp_error) {
        (Ok(resp), _) => {
            let st = resp.header.status;
            out!("answer: {} status {} TID 0x{:016x}", resp.header.method_name(), st, resp.header.transaction_id);
            if resp.rmpp.is_active() && r.segments == 0 {
                eprintln!(
                    "{tool}: warning: the answer is one MAD with the RMPP Active flag but no RMPP segment header (RMPPType {}, version {}: OpenSM through ibsim's umad shim): records past its {} data bytes, if the table had any, cannot be known",
                    u8::from(resp.rmpp.rmpp_type),
                    resp.rmpp.version,
                    roce_wire::sa::SA_DATA_LEN
                );
            }
            if verbose {
                let rs = d.stack.rmpp_stats();
                out!(
                    "RMPP: {} segments received, {} ACKs sent ({} bytes of SA data; receiver totals: {} segments, {} ACKs, {} ABORTs, {} unsegmented)",
                    r.segments,
                    r.acks,
                    r.data.len(),
                    rs.segments,
                    rs.acks,
                    rs.aborts,
                    rs.unsegmented
                );
            }
            Ok((*resp, r))
        }
        (Err(e), Some(why)) => {
            eprintln!("{tool}: {} ({why})", e.name());
            Err(exit::FAILED)
        }
        (Err(roce_cm::Errno::ETIMEDOUT), None) => {
            eprintln!("{tool}: {}", sa_timeout_text(d));
            Err(exit::FAILED)
        }
        (Err(e), None) => {
            eprintln!("{tool}: {} ({e})", e.name());
            Err(exit::FAILED)
        }
    }
}

/// An SA answer with an error status: printed, and the exit status it gives.
fn sa_status_failed(tool: &str, resp: &SaMad) -> Option<u8> {
    let st = resp.header.status;
    (st.0 != 0).then(|| {
        eprintln!("{tool}: the SA answered status {st}");
        exit::FAILED
    })
}
/// A GetResp's record, or every record of a GetTableResp (all its RMPP segments) and their
/// count.
fn print_records(resp: &SaMad, whole: &roce_cm::mcast::SaQueryResult) {
    match &resp.data {
        SaData::McMember { record, .. } if resp.header.method == Method::Get => print_member(record),
        _ => {
            let mut n = 0;
            for b in whole.records(McMemberRecord::LEN) {
                let Ok(r) = McMemberRecord::parse_bytes(b) else { continue };
                // One MAD without an RMPP DATA header has no length: its unused slots (zero, or
                // not even zeroed by OpenSM through ibsim) are not records.
                if whole.segments == 0 && r.mgid == Gid::ZERO {
                    continue;
                }
                print_member(&r);
                n += 1;
            }
            out!("{n} records");
        }
    }
}

/// The ServiceRecord options of `roce sa-query`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ServiceArgs {
    /// ServiceRecords instead of MCMemberRecords: GetTable of every record, or of those with
    /// --service-id/--service-name (saquery -S).
    #[arg(short = 'S', long = "service", conflicts_with = "mgid")]
    pub service: bool,
    /// Register a service (SubnAdmSet ServiceRecord: --service-id, the port's GID, P_Key
    /// 0xFFFF, --service-name, --lease).
    #[arg(long, requires = "service_id", conflicts_with_all = ["delete", "resolve", "mgid"])]
    pub register: bool,
    /// Remove a service (SubnAdmDelete of the record --service-id, the port's GID, P_Key 0xFFFF).
    #[arg(long, requires = "service_id", conflicts_with_all = ["resolve", "mgid"])]
    pub delete: bool,
    /// Resolve a service as rdma_resolve_ib_service does (by --service-id and/or
    /// --service-name): prints the ADDRINFO_RESOLVED or ADDRINFO_ERROR event and the records.
    #[arg(long, conflicts_with = "mgid")]
    pub resolve: bool,
    /// ServiceID (decimal or 0x-hex).
    #[arg(long, value_name = "ID", value_parser = parse_u64, conflicts_with = "mgid")]
    pub service_id: Option<u64>,
    /// ServiceName (at most 63 bytes).
    #[arg(long, value_name = "NAME", value_parser = parse_name, conflicts_with = "mgid")]
    pub service_name: Option<String>,
    /// ServiceLease in seconds for --register (0 to 4294967294; default: infinite, 0xFFFFFFFF).
    #[arg(long, value_name = "SECS", requires = "register", value_parser = clap::value_parser!(u32).range(0..4_294_967_295))]
    pub lease: Option<u32>,
}

impl ServiceArgs {
    /// Whether any ServiceRecord option was given (then the records are ServiceRecords).
    pub fn wanted(&self) -> bool {
        self.service
            || self.register
            || self.delete
            || self.resolve
            || self.service_id.is_some()
            || self.service_name.is_some()
    }
}

fn parse_u64(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("{s:?} is not a 64-bit number (decimal or 0x-hex): {e}"))
}

fn parse_name(s: &str) -> Result<String, String> {
    if s.len() > 63 {
        return Err(format!("{} bytes: a ServiceName holds at most 63 (64 with its NUL)", s.len()));
    }
    if s.contains('\0') {
        return Err("a ServiceName cannot hold a NUL byte".into());
    }
    Ok(s.to_string())
}

/// The ServiceRecord form of `roce sa-query`; returns the exit status.
fn service_records(port: &PortOptions, a: &ServiceArgs) -> u8 {
    let mut d = match open_port_or_exit(TOOL, port) {
        Ok(d) => d,
        Err(code) => return code,
    };
    let local = d.stack.config().ipv4.map(|(a, _)| IpAddr::V4(a)).unwrap_or(port.local);
    let my_gid = d.stack.config().port_gid.unwrap_or_else(|| Gid::from_ip(local));
    if a.resolve {
        return resolve(&mut d, local, a);
    }
    let mut rec = ServiceRecord::default();
    let mut mask = ServiceMask::NONE;
    if let Some(id) = a.service_id {
        rec.service_id = id;
        mask |= ServiceMask::SERVICE_ID;
    }
    if let Some(n) = &a.service_name {
        rec.service_name = ServiceRecord::name_field(n);
        mask |= ServiceMask::SERVICE_NAME;
    }
    let method = if a.register {
        rec.service_gid = my_gid;
        rec.service_p_key = 0xFFFF;
        rec.service_lease = a.lease.unwrap_or(INFINITE_LEASE);
        mask |= ServiceMask::SERVICE_GID | ServiceMask::SERVICE_P_KEY | ServiceMask::SERVICE_LEASE;
        Method::Set
    } else if a.delete {
        rec.service_gid = my_gid;
        rec.service_p_key = 0xFFFF;
        mask |= ServiceMask::SERVICE_GID | ServiceMask::SERVICE_P_KEY;
        Method::Delete
    } else {
        Method::GetTable
    };
    let req = SaMad::request(method, 0, attr::SERVICE_RECORD, mask.0, SaData::service(rec));
    let handle = match send_request(&mut d, req) {
        Ok(h) => h,
        Err(code) => return code,
    };
    status!("sa-query: {} ServiceRecord (mask {mask}) to the SA", req.header.method_name());
    let code = match wait_sa_answer(TOOL, &mut d, handle, port.verbose) {
        Ok((resp, whole)) => {
            if port.verbose {
                out!("RMPP {:?}, AttributeOffset {}", resp.rmpp, resp.sa.attribute_offset);
            }
            if let Some(code) = sa_status_failed(TOOL, &resp) {
                code
            } else {
                let recs = records(&resp, &whole);
                for r in &recs {
                    print_service(r);
                }
                if method == Method::GetTable {
                    out!("{} records", recs.len());
                }
                exit::OK
            }
        }
        Err(code) => code,
    };
    finish(TOOL, &mut d, &[], port.verbose, code)
}

/// `rdma_resolve_ib_service` on a UDP id bound to our address.
fn resolve(d: &mut Driver<CliDevice>, local: IpAddr, a: &ServiceArgs) -> u8 {
    let mut svc = IbService { service_id: 0, service_name: [0; 64], flags: 0 };
    if let Some(id) = a.service_id {
        svc.service_id = id;
        svc.flags |= IbService::FLAG_ID;
    }
    if let Some(n) = &a.service_name {
        svc.service_name = ServiceRecord::name_field(n);
        svc.flags |= IbService::FLAG_NAME;
    }
    let id: CmId = match d.stack.create_id(PortSpace::Udp, QpType::Ud) {
        Ok(id) => id,
        Err(e) => {
            eprintln!("{TOOL}: rdma_create_id: {e}");
            return exit::FAILED;
        }
    };
    if let Err(e) = d.stack.bind_addr(id, SocketAddr::new(local, 0)) {
        eprintln!("{TOOL}: rdma_bind_addr {local}: {e}");
        return finish(TOOL, d, &[id], false, exit::FAILED);
    }
    let now = d.now();
    if let Err(e) = d.stack.resolve_ib_service(now, id, &svc, roce_cm::service::KERNEL_TIMEOUT) {
        eprintln!("{TOOL}: rdma_resolve_ib_service: {e}");
        return finish(TOOL, d, &[id], false, exit::FAILED);
    }
    status!("sa-query: rdma_resolve_ib_service (flags 0x{:x}) on {local}", svc.flags);
    let ev = d.wait_event(id, &[EventKind::AddrInfoResolved, EventKind::AddrInfoError], Duration::from_secs(10));
    let code = match ev {
        Ok(Some(e)) if e.kind == EventKind::AddrInfoResolved => {
            let dst = d.stack.id(id).and_then(|r| r.dst);
            out!(
                "event: ADDRINFO_RESOLVED, status 0{}",
                dst.map(|a| format!(", destination {}", a.ip())).unwrap_or_default()
            );
            let recs = d.stack.query_ib_service(id).map(<[_]>::to_vec).unwrap_or_default();
            for r in &recs {
                print_service(r);
            }
            out!("{} records", recs.len());
            exit::OK
        }
        Ok(Some(e)) => {
            let name = errno_name(e.status).unwrap_or("?");
            out!("event: ADDRINFO_ERROR, status {} ({name})", e.status);
            exit::FAILED
        }
        _ => {
            eprintln!("{TOOL}: no ADDRINFO event within 10 s");
            exit::FAILED
        }
    };
    finish(TOOL, d, &[id], false, code)
}

/// The records of a response: a GetResp/DeleteResp's one, or every record of a GetTableResp
/// (all its RMPP segments, reassembled by the engine; read as `rdma_resolve_ib_service` reads
/// them).
fn records(resp: &SaMad, whole: &roce_cm::mcast::SaQueryResult) -> Vec<ServiceRecord> {
    if resp.header.method != Method::GetTable {
        return resp.data.as_service().copied().into_iter().collect();
    }
    roce_cm::service::records_in(&whole.data, resp.sa.attribute_offset)
}

/// One record, in saquery's layout ("ServiceRecord dump:").
pub(crate) fn print_service(r: &ServiceRecord) {
    out!("ServiceRecord dump:");
    out!("\t\tServiceID...............0x{:016x}", r.service_id);
    out!("\t\tServiceGID..............{}", std::net::Ipv6Addr::from(r.service_gid.0));
    out!("\t\tServiceP_Key............0x{:X}", r.service_p_key);
    out!("\t\tServiceLease............0x{:X}", r.service_lease);
    out!("\t\tServiceName.............{}", String::from_utf8_lossy(r.name_bytes()));
}
