//! `roce sa-agent --query TABLE --sa ADDR`: one SubnAdmGetTable sent through the kernel's umad
//! as a client agent, so that the kernel's own RMPP receiver (mad_rmpp.c `start_rmpp`,
//! `continue_rmpp`: windows of `window_size()` = 64 segments, an ACK at each window's end and
//! at the last) takes the SA's segmented answer and hands umad one reassembled message. It is
//! how the interop tests put the kernel's receiver in front of roce-sa's windowed sender.
//!
//! The agent registers with no class (`mgmt_class` 0: the kernel passes no registration
//! request and routes to it only the responses to its own sends, by the TID's high 32 bits,
//! which umad writes [user_mad.c `ib_umad_write`]) and rmpp_version 1. The request goes to the
//! SA's GID, QP1, Q_Key 0x80010000, from our GID's index; umad resends it `RETRIES` times,
//! `TIMEOUT_MS` apart, until a response matches [mad.c `ib_find_send_mad`].

use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use roce_wire::mad::{MadStatus, Method};
use roce_wire::mcmember::McMemberRecord;
use roce_wire::sa::{attr, SaData, SaMad, SA_DATA_OFFSET};
use roce_wire::service_record::{ServiceRecord, SERVICE_RECORD_LEN};
use roce_wire::{Gid, MAD_SIZE};

use super::{err, open_agent, read_umad, Table, UmadHdr, UMAD_HDR_LEN};
use crate::plumbing::exit;
use crate::plumbing::out::{errno_name, out, status};
use crate::plumbing::shutdown;

const TOOL: &str = "roce sa-agent";
/// The wait for a response per send.
const TIMEOUT_MS: u32 = 2000;
/// Resends of the request.
const RETRIES: u32 = 3;
/// The largest answer read: 16,384 segments' data.
const MAX_MESSAGE: usize = SA_DATA_OFFSET + 16_384 * 200;

/// Send the GetTable of `table` to `sa` through `device` and print what comes back. Returns the
/// exit status.
pub fn run(device: &str, table: Table, sa: IpAddr, bind: Option<IpAddr>) -> u8 {
    match query(device, table, sa, bind) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{TOOL}: {e}");
            exit::ENVIRONMENT
        }
    }
}

/// The RDMA device and port behind a umad device (`/sys/class/infiniband_mad/umadN/{ibdev,port}`).
fn ibdev_port(device: &str) -> io::Result<(String, String)> {
    let name = device.rsplit('/').next().unwrap_or(device);
    let dir = format!("/sys/class/infiniband_mad/{name}");
    let read = |f: &str| {
        std::fs::read_to_string(format!("{dir}/{f}"))
            .map(|s| s.trim().to_string())
            .map_err(|e| io::Error::new(e.kind(), format!("{dir}/{f}: {e}")))
    };
    Ok((read("ibdev")?, read("port")?))
}

/// Our GID's index: `bind`'s GID, else the first GID of `sa`'s family that is neither zero
/// nor link-local.
fn gid_index(ibdev: &str, port: &str, sa: IpAddr, bind: Option<IpAddr>) -> io::Result<(u8, Gid)> {
    let dir = format!("/sys/class/infiniband/{ibdev}/ports/{port}/gids");
    for i in 0..=u8::MAX {
        let Ok(text) = std::fs::read_to_string(format!("{dir}/{i}")) else { break };
        let Ok(addr) = text.trim().parse::<std::net::Ipv6Addr>() else { continue };
        let gid = Gid::from_ipv6(addr);
        let ip = gid.to_ip();
        let fits = match bind {
            Some(b) => ip == b,
            None => {
                gid != Gid::ZERO
                    && ip.is_ipv4() == sa.is_ipv4()
                    && !matches!(ip, IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80)
            }
        };
        if fits {
            return Ok((i, gid));
        }
    }
    let what = bind.map_or_else(|| format!("of {sa}'s family"), |b| format!("for {b}"));
    Err(io::Error::new(io::ErrorKind::NotFound, format!("no GID {what} in {dir}")))
}

fn query(device: &str, table: Table, sa: IpAddr, bind: Option<IpAddr>) -> io::Result<u8> {
    let (ibdev, port) = ibdev_port(device)?;
    let (index, my_gid) = gid_index(&ibdev, &port, sa, bind)?;
    let (fd, agent, path) = open_agent(device, 0, &[])?;
    let (attribute, data, len, name) = match table {
        Table::Mcmember => (
            attr::MC_MEMBER_RECORD,
            SaData::mc_member(McMemberRecord::default()),
            McMemberRecord::LEN,
            "MCMemberRecord",
        ),
        Table::Service => {
            (attr::SERVICE_RECORD, SaData::service(ServiceRecord::default()), SERVICE_RECORD_LEN, "ServiceRecord")
        }
    };
    // umad puts the agent's id in the TID's high half; the low half is ours.
    let tid = u64::from(std::process::id());
    let req = SaMad::request(Method::GetTable, tid, attribute, 0, data).to_bytes();
    let hdr = UmadHdr {
        id: agent,
        status: 0,
        timeout_ms: TIMEOUT_MS,
        retries: RETRIES,
        length: 0,
        qpn: 1,
        qkey: 0x8001_0000,
        lid: 0,
        sl: 0,
        path_bits: 0,
        grh_present: 1,
        gid_index: index,
        hop_limit: 64,
        traffic_class: 0,
        gid: Gid::from_ip(sa).0,
        flow_label: 0,
        pkey_index: 0,
    };
    let mut msg = hdr.emit().to_vec();
    msg.extend_from_slice(&req);
    // SAFETY: writing our buffer with its length.
    if unsafe { libc::write(fd.as_raw_fd(), msg.as_ptr().cast(), msg.len()) } < 0 {
        return Err(err("write (the GetTable)"));
    }
    status!(
        "sa-agent: SubnAdmGetTable {name} to {sa} QP1 from {my_gid} (GID index {index} of {ibdev} port {port}) through agent {agent} on {path}: timeout_ms {TIMEOUT_MS}, retries {RETRIES}"
    );
    let end = Instant::now() + Duration::from_millis(u64::from(TIMEOUT_MS) * u64::from(RETRIES + 1) + 2000);
    let mut buf = vec![0u8; UMAD_HDR_LEN + MAX_MESSAGE];
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            eprintln!(
                "{TOOL}: no answer from umad within {:?}",
                Duration::from_millis(u64::from(TIMEOUT_MS) * u64::from(RETRIES + 1) + 2000)
            );
            return Ok(exit::FAILED);
        }
        if shutdown::requested().is_some() {
            return Ok(shutdown::requested().unwrap_or(exit::FAILED));
        }
        let ms = left.as_millis().min(1000) as i32;
        let Some((h, n)) = read_umad(&fd, &mut buf, ms, TOOL)? else { continue };
        if h.status != 0 {
            // Our send, given up on: no response matched it within the retries.
            let errno = h.status as i32;
            eprintln!(
                "{TOOL}: the GetTable's send completed with status {} ({}): no answer matched it",
                h.status,
                errno_name(-errno).unwrap_or("?")
            );
            return Ok(exit::FAILED);
        }
        let message = &buf[UMAD_HDR_LEN..n];
        if message.len() < SA_DATA_OFFSET {
            eprintln!("{TOOL}: an answer of {} bytes ignored", message.len());
            continue;
        }
        let mut first = [0u8; MAD_SIZE];
        let k = message.len().min(MAD_SIZE);
        first[..k].copy_from_slice(&message[..k]);
        let Ok(resp) = SaMad::parse(&first) else {
            eprintln!("{TOOL}: an unparsable answer ignored");
            continue;
        };
        if resp.header.status != MadStatus::SUCCESS {
            eprintln!("{TOOL}: the SA answered status {}", resp.header.status);
            return Ok(exit::FAILED);
        }
        let stride = usize::from(resp.sa.attribute_offset) * 8;
        let records = &message[SA_DATA_OFFSET..];
        let mut count = 0;
        if stride >= len {
            for rec in records.chunks(stride).filter(|c| c.len() >= len) {
                match table {
                    Table::Mcmember => {
                        if let Ok(r) = McMemberRecord::parse_bytes(&rec[..len]) {
                            super::super::sa_query::print_member(&r);
                            count += 1;
                        }
                    }
                    Table::Service => {
                        if let Ok(r) = ServiceRecord::parse_bytes(&rec[..len]) {
                            super::super::sa_query::print_service(&r);
                            count += 1;
                        }
                    }
                }
            }
        }
        out!("{count} records");
        status!(
            "sa-agent: GetTableResp {name}: one message of {} bytes from umad (the kernel reassembled the RMPP segments), AttributeOffset {}",
            message.len(),
            resp.sa.attribute_offset
        );
        return Ok(exit::OK);
    }
}
