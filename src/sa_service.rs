//! `roce sa-query -S`: SA ServiceRecords — list (GetTable, saquery's `-S`), register (Set),
//! remove (Delete), and resolve through the engine's `rdma_resolve_ib_service`.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use roce_cm::{CmId, EventKind, IbService, PortSpace, QpType};
use roce_wire::mad::Method;
use roce_wire::sa::{attr, SaData, SaMad};
use roce_wire::service_record::{ComponentMask, ServiceRecord, INFINITE_LEASE};
use roce_wire::Gid;

use crate::plumbing::exit;
use crate::plumbing::tools::{finish, open_port, sa_status_failed, wait_sa_answer, PortOptions};
use crate::{out, status};

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

const TOOL: &str = "roce sa-query";

/// Run the ServiceRecord form of `roce sa-query`; returns the exit status.
pub fn run(port: &PortOptions, a: &ServiceArgs) -> u8 {
    if port.ibsim.is_none() {
        if port.sa.is_none() {
            eprintln!("{TOOL}: --sa ADDR is required with --iface");
            return exit::USAGE;
        }
        if port.sa.is_some_and(|s| s.is_ipv4() != port.local.is_ipv4()) {
            eprintln!("{TOOL}: -b and --sa must be of one address family");
            return exit::USAGE;
        }
    }
    let mut d = match open_port(port) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{TOOL}: {}", e.message);
            return e.status;
        }
    };
    let local = d.stack.config().ipv4.map(|(a, _)| IpAddr::V4(a)).unwrap_or(port.local);
    let my_gid = d.stack.config().port_gid.unwrap_or_else(|| Gid::from_ip(local));
    if a.resolve {
        return resolve(&mut d, local, a);
    }
    let mut rec = ServiceRecord::default();
    let mut mask = ComponentMask::NONE;
    if let Some(id) = a.service_id {
        rec.service_id = id;
        mask |= ComponentMask::SERVICE_ID;
    }
    if let Some(n) = &a.service_name {
        rec.service_name = ServiceRecord::name_field(n);
        mask |= ComponentMask::SERVICE_NAME;
    }
    let method = if a.register {
        rec.service_gid = my_gid;
        rec.service_p_key = 0xFFFF;
        rec.service_lease = a.lease.unwrap_or(INFINITE_LEASE);
        mask |= ComponentMask::SERVICE_GID | ComponentMask::SERVICE_P_KEY | ComponentMask::SERVICE_LEASE;
        Method::Set
    } else if a.delete {
        rec.service_gid = my_gid;
        rec.service_p_key = 0xFFFF;
        mask |= ComponentMask::SERVICE_GID | ComponentMask::SERVICE_P_KEY;
        Method::Delete
    } else {
        Method::GetTable
    };
    let req = SaMad::request(method, 0, attr::SERVICE_RECORD, mask.0, SaData::service(rec));
    let now = d.now();
    let handle = match d.stack.sa_query(now, req) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("{TOOL}: {e}");
            return exit::USAGE;
        }
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
fn resolve(d: &mut roce_net::driver::Driver<crate::plumbing::tools::CliDevice>, local: IpAddr, a: &ServiceArgs) -> u8 {
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
            let name = crate::plumbing::out::errno_name(e.status).unwrap_or("?");
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
fn print_service(r: &ServiceRecord) {
    out!("ServiceRecord dump:");
    out!("\t\tServiceID...............0x{:016x}", r.service_id);
    out!("\t\tServiceGID..............{}", std::net::Ipv6Addr::from(r.service_gid.0));
    out!("\t\tServiceP_Key............0x{:X}", r.service_p_key);
    out!("\t\tServiceLease............0x{:X}", r.service_lease);
    out!("\t\tServiceName.............{}", String::from_utf8_lossy(r.name_bytes()));
}
