//! `roce sa-agent`: the SA responder as a userspace agent of the kernel's umad ABI on a host
//! with an rxe (or any RoCE) device — the way the interop tests put an SA behind a kernel rxe
//! peer, which has no SA of its own [protocol.md §6; kernel-rxe facts].
//!
//! The ABI (include/uapi/rdma/ib_user_mad.h): open /dev/infiniband/umadN; the
//! `IB_USER_MAD_ENABLE_PKEY` ioctl (then every read and write carries the 64-byte
//! `struct ib_user_mad_hdr`); `IB_USER_MAD_REGISTER_AGENT` for class 0x03 version 2, methods
//! Get, Set, GetTable and Delete on QP 1, rmpp_version 1 (the kernel's RMPP: it segments our
//! tables, windows them by the requester's ACKs and retransmits [mad_rmpp.c]); then read
//! `hdr + 256-byte MAD` per request and write `hdr + response` back, reusing the request's
//! header (its agent id, the requester's QPN, GID, hop limit, traffic class, flow label, P_Key
//! index). An RMPP answer (roce-sa's GetTableResp segments) is written as ONE message: the
//! first segment's MAD, RMPP and SA headers and the data of every segment, cut at its length
//! [user_mad.c `ib_umad_write`, `copy_rmpp_mad`; mad.c `ib_create_send_mad`]; timeout_ms 0 (no
//! response expected: the kernel's 2 s ACK wait per window, `send_next_seg`) and
//! [`RMPP_RETRIES`] retries (resent from the last ACK, `ib_retry_rmpp`). A send the kernel
//! gives up on comes back as a read with a status (ETIMEDOUT: no ACK came), printed.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use roce_sa::{Requester, SaConfig, SaResponder};
use roce_wire::mad::MadHeader;
use roce_wire::sa::SaMad;
use roce_wire::{Gid, MAD_SIZE};

use crate::plumbing::exit;
use crate::plumbing::options::duration_secs;
use crate::plumbing::out::{errno_name, out, status};
use crate::plumbing::shutdown;

#[path = "sa_agent_query.rs"]
mod query;

/// Run the SA as a userspace agent of the kernel's umad on an RDMA (e.g. rxe) host.
///
/// Opens /dev/infiniband/umadN, enables P_Key headers, registers for SA class 0x03
/// version 2 (Get, Set, GetTable, Delete) on QP1, and answers with the same SA as
/// `sa-server`, one log line per MAD each way. Needs access to the umad device (root).
///
/// Example: roce sa-agent --device umad0
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// The umad device (name under /dev/infiniband, or a path).
    #[arg(long, default_value = "umad0")]
    pub device: String,
    /// Stop after this many seconds (0 to 31536000; default: until SIGINT/SIGTERM/SIGHUP).
    #[arg(long, value_parser = duration_secs, value_name = "SECS", allow_negative_numbers = true)]
    pub duration: Option<Duration>,
    /// Quiet: no status lines (the per-MAD lines and errors stay).
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Instead of serving: ask the SA at --sa for this table with one SubnAdmGetTable sent
    /// through the kernel's umad as a client agent (rmpp_version 1: the kernel reassembles the
    /// RMPP answer and ACKs each window), print every record and exit (0: status 0; 1: an
    /// error status or no answer, with umad's status named).
    #[arg(long, value_enum, value_name = "TABLE", requires = "sa")]
    pub query: Option<Table>,
    /// The SA's address (its GID): the destination of --query.
    #[arg(long, value_name = "ADDR", requires = "query")]
    pub sa: Option<std::net::IpAddr>,
    /// Our own address, to pick our GID's index in the device's table (default: the first
    /// GID of --sa's family that is not link-local).
    #[arg(short = 'b', long = "bind", value_name = "ADDR", requires = "query")]
    pub bind: Option<std::net::IpAddr>,
}

/// The tables `--query` asks for.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// MCMemberRecords (attribute 0x0038).
    Mcmember,
    /// ServiceRecords (attribute 0x0031).
    Service,
}

/// Run `roce sa-agent`: [`serve`] with roce-sa's default SA until a stop or `--duration`.
pub fn run(args: Args) -> ExitCode {
    crate::plumbing::out::set_quiet(args.quiet);
    shutdown::install();
    if let (Some(table), Some(sa)) = (args.query, args.sa) {
        return ExitCode::from(query::run(&args.device, table, sa, args.bind));
    }
    ExitCode::from(match serve(&args.device, args.duration, SaConfig::default()) {
        Ok(()) => shutdown::requested().unwrap_or(exit::OK),
        Err(e) => {
            eprintln!("roce sa-agent: {e}");
            exit::ENVIRONMENT
        }
    })
}

/// `struct ib_user_mad_hdr` with P_Key support: 64 bytes.
pub const UMAD_HDR_LEN: usize = 64;
/// `_IO(0x1b, 3)`.
pub const IB_USER_MAD_ENABLE_PKEY: libc::c_ulong = 0x0000_1b03;
/// `_IOWR(0x1b, 1, struct ib_user_mad_reg_req)` with the 28-byte x86-64 layout.
pub const IB_USER_MAD_REGISTER_AGENT: libc::c_ulong = 0xc01c_1b01;
/// Retries of an RMPP answer's send when an ACK does not come (each after the kernel's 2 s).
pub const RMPP_RETRIES: u32 = 3;

/// The fields of `struct ib_user_mad_hdr` this agent uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UmadHdr {
    /// Agent id.
    pub id: u32,
    /// Status of a send (or 0).
    pub status: u32,
    /// Response timeout for sends (0 for responses).
    pub timeout_ms: u32,
    /// Retries for sends.
    pub retries: u32,
    /// Length (header + MAD) on receive.
    pub length: u32,
    /// The remote QPN.
    pub qpn: u32,
    /// The remote Q_Key.
    pub qkey: u32,
    /// The remote LID (0 on RoCE).
    pub lid: u16,
    /// SL.
    pub sl: u8,
    /// Path bits.
    pub path_bits: u8,
    /// Whether `gid` is valid (always on RoCE).
    pub grh_present: u8,
    /// Local GID index.
    pub gid_index: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// The remote GID.
    pub gid: [u8; 16],
    /// Flow label.
    pub flow_label: u32,
    /// P_Key index.
    pub pkey_index: u16,
}

impl UmadHdr {
    /// Decode the 64 header bytes (host-order u32s, big-endian QPN/Q_Key/LID/flow label).
    pub fn parse(b: &[u8; UMAD_HDR_LEN]) -> UmadHdr {
        let ne32 = |i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let be32 = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[36..52]);
        UmadHdr {
            id: ne32(0),
            status: ne32(4),
            timeout_ms: ne32(8),
            retries: ne32(12),
            length: ne32(16),
            qpn: be32(20),
            qkey: be32(24),
            lid: u16::from_be_bytes([b[28], b[29]]),
            sl: b[30],
            path_bits: b[31],
            grh_present: b[32],
            gid_index: b[33],
            hop_limit: b[34],
            traffic_class: b[35],
            gid,
            flow_label: be32(52),
            pkey_index: u16::from_ne_bytes([b[56], b[57]]),
        }
    }

    /// Encode (reserved bytes zero).
    pub fn emit(&self) -> [u8; UMAD_HDR_LEN] {
        let mut b = [0u8; UMAD_HDR_LEN];
        b[0..4].copy_from_slice(&self.id.to_ne_bytes());
        b[4..8].copy_from_slice(&self.status.to_ne_bytes());
        b[8..12].copy_from_slice(&self.timeout_ms.to_ne_bytes());
        b[12..16].copy_from_slice(&self.retries.to_ne_bytes());
        b[16..20].copy_from_slice(&self.length.to_ne_bytes());
        b[20..24].copy_from_slice(&self.qpn.to_be_bytes());
        b[24..28].copy_from_slice(&self.qkey.to_be_bytes());
        b[28..30].copy_from_slice(&self.lid.to_be_bytes());
        b[30] = self.sl;
        b[31] = self.path_bits;
        b[32] = self.grh_present;
        b[33] = self.gid_index;
        b[34] = self.hop_limit;
        b[35] = self.traffic_class;
        b[36..52].copy_from_slice(&self.gid);
        b[52..56].copy_from_slice(&self.flow_label.to_be_bytes());
        b[56..58].copy_from_slice(&self.pkey_index.to_ne_bytes());
        b
    }
}

/// `struct ib_user_mad_reg_req` (28 bytes on x86-64: method_mask is 2 × u64 aligned to 4;
/// rmpp_version at byte 26, 1: the kernel does RMPP for this agent).
pub fn reg_req(mgmt_class: u8, class_version: u8, methods: &[u8]) -> [u8; 28] {
    let mut b = [0u8; 28];
    let mut mask = [0u64; 2];
    for &m in methods {
        mask[usize::from(m / 64)] |= 1 << (m % 64);
    }
    b[4..12].copy_from_slice(&mask[0].to_ne_bytes());
    b[12..20].copy_from_slice(&mask[1].to_ne_bytes());
    b[20] = 1; // QP1 (GSI)
    b[21] = mgmt_class;
    b[22] = class_version;
    b[26] = 1; // rmpp_version
    b
}

/// The MAD of one umad write for an answer: a single MAD as it is; an RMPP DATA answer (its
/// segments in order) as one message for the kernel's RMPP sender — the first segment's 56
/// header bytes, then each segment's data, `PayloadLength(first) − 20 × segments` bytes in all
/// (the kernel pads and writes each segment's RMPP header itself).
pub fn rmpp_message(segments: &[[u8; MAD_SIZE]]) -> Option<Vec<u8>> {
    use roce_wire::rmpp::RmppType;
    use roce_wire::sa::{SA_DATA_LEN, SA_DATA_OFFSET, SA_HEADER_LEN};
    let first = segments.first()?;
    let m = SaMad::parse(first).ok()?;
    if !m.rmpp.is_active() || m.rmpp.rmpp_type != RmppType::Data {
        return None;
    }
    let data_len = (m.rmpp.data2 as usize).checked_sub(SA_HEADER_LEN * segments.len())?;
    if data_len > SA_DATA_LEN * segments.len() {
        return None;
    }
    let mut out = Vec::with_capacity(SA_DATA_OFFSET + data_len);
    out.extend_from_slice(&first[..SA_DATA_OFFSET]);
    for s in segments {
        out.extend_from_slice(&s[SA_DATA_OFFSET..]);
    }
    out.truncate(SA_DATA_OFFSET + data_len);
    Some(out)
}

pub(crate) fn err(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn summary(mad: &[u8]) -> String {
    match SaMad::parse(mad) {
        Ok(m) => {
            let mut s = format!(
                "{}({}) TID=0x{:016x} status={} mask=0x{:x}",
                m.header.method_name(),
                m.header.attribute_name(),
                m.header.transaction_id,
                m.header.status,
                m.sa.component_mask
            );
            if let Some(r) = m.mc_member() {
                s.push_str(&format!(
                    " MGID={} PortGID={} JoinState={} MLID=0x{:04x}",
                    r.mgid, r.port_gid, r.join_state, r.mlid
                ));
            }
            s
        }
        Err(e) => format!("unparsable MAD: {e}"),
    }
}

/// Open `device` (a name under /dev/infiniband, or a path), enable P_Key headers and register
/// an agent for SA class `mgmt_class` version 2 on QP1 with kernel RMPP, receiving requests of
/// `methods` (none: a client, which receives only the responses to its own sends). Returns the
/// descriptor, the agent id and the path.
pub fn open_agent(device: &str, mgmt_class: u8, methods: &[u8]) -> io::Result<(OwnedFd, u32, String)> {
    let path = if device.starts_with('/') { device.to_string() } else { format!("/dev/infiniband/{device}") };
    let cpath = std::ffi::CString::new(path.clone()).map_err(io::Error::other)?;
    // SAFETY: a NUL-terminated path; the result is checked.
    let fd = unsafe { libc::open(cpath.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(err(&format!("open {path}")));
    }
    // SAFETY: a fresh descriptor we now own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: an argument-less ioctl on our descriptor.
    if unsafe { libc::ioctl(fd.as_raw_fd(), IB_USER_MAD_ENABLE_PKEY as _) } < 0 {
        return Err(err("IB_USER_MAD_ENABLE_PKEY"));
    }
    let mut req = reg_req(mgmt_class, 2, methods);
    // SAFETY: the ioctl reads and writes the 28-byte request, which lives across the call.
    if unsafe { libc::ioctl(fd.as_raw_fd(), IB_USER_MAD_REGISTER_AGENT as _, req.as_mut_ptr()) } < 0 {
        return Err(err(&format!(
            "IB_USER_MAD_REGISTER_AGENT (class 0x{mgmt_class:02x} v2, {} methods, QP1, rmpp_version 1)",
            methods.len()
        )));
    }
    Ok((fd, u32::from_ne_bytes([req[0], req[1], req[2], req[3]]), path))
}

/// Wait up to `ms` for one umad message on `fd` (a signal wakes the wait at once) and read it
/// into `buf`: its header and length, or `None` when nothing came, a signal woke the wait, or
/// the read was shorter than a header (said on stderr with `tool`'s name). A read error is
/// returned.
pub(crate) fn read_umad(fd: &OwnedFd, buf: &mut [u8], ms: i32, tool: &str) -> io::Result<Option<(UmadHdr, usize)>> {
    let mut pfds = [
        libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: shutdown::wake_fd(), events: libc::POLLIN, revents: 0 },
    ];
    // SAFETY: two valid pollfds.
    let r = unsafe { libc::poll(pfds.as_mut_ptr(), 2, ms) };
    if r <= 0 || pfds[0].revents == 0 {
        return Ok(None);
    }
    // SAFETY: reading into our buffer with its length.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(err("read"));
    }
    let n = n as usize;
    if n < UMAD_HDR_LEN {
        eprintln!("{tool}: short read of {n} bytes ignored");
        return Ok(None);
    }
    let mut hb = [0u8; UMAD_HDR_LEN];
    hb.copy_from_slice(&buf[..UMAD_HDR_LEN]);
    Ok(Some((UmadHdr::parse(&hb), n)))
}

/// Run the agent on `device` (`umad0`) for `duration` (until a stop — a signal, a closed
/// stdout — if `None`). Prints one line per MAD in each direction. An error opening or
/// registering is returned; a stop ends the loop (the status is [`shutdown::requested`]).
pub fn serve(device: &str, duration: Option<Duration>, sa_config: SaConfig) -> io::Result<()> {
    let (fd, agent, path) = open_agent(device, 0x03, &[0x01, 0x02, 0x12, 0x15])?;
    status!(
        "sa-agent: registered agent {agent} on {path} for class 0x03 version 2 (Get, Set, GetTable, Delete) on QP1, rmpp_version 1"
    );
    let mut sa = SaResponder::new(sa_config).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let epoch = std::time::Instant::now();
    let end = duration.map(|d| Instant::now() + d);
    let mut buf = [0u8; UMAD_HDR_LEN + MAD_SIZE * 2];
    loop {
        let left = end.map(|e| e.saturating_duration_since(Instant::now()));
        if left.is_some_and(|l| l.is_zero()) || shutdown::requested().is_some() {
            let st = sa.stats();
            out!(
                "sa-agent: stopping: {} requests, {} groups, {} members",
                st.received,
                sa.group_count(),
                sa.member_count()
            );
            return Ok(());
        }
        let ms = left.map_or(1000, |l| l.as_millis().min(1000) as i32);
        let Some((hdr, n)) = read_umad(&fd, &mut buf, ms, "sa-agent")? else { continue };
        if hdr.status != 0 {
            // A send of ours the kernel gave up on (its MAD header follows, 24 bytes).
            let tid = MadHeader::parse_bytes(&buf[UMAD_HDR_LEN..n]).map_or(0, |h| h.transaction_id);
            let name = errno_name(-(hdr.status as i32)).unwrap_or("?");
            eprintln!("sa-agent: send completion status {} ({name}) for TID 0x{tid:016x}", hdr.status);
            continue;
        }
        if n < UMAD_HDR_LEN + MAD_SIZE {
            eprintln!("sa-agent: short read of {n} bytes ignored");
            continue;
        }
        let mad = &buf[UMAD_HDR_LEN..UMAD_HDR_LEN + MAD_SIZE];
        let gid = Gid(hdr.gid);
        out!("sa-agent: <- {} from {} QP {}", summary(mad), gid, hdr.qpn);
        sa.handle_time(epoch.elapsed()); // service leases
        let reply = sa.handle_mad(Requester::new(gid, hdr.qpn), mad);
        let segs = reply.as_slice();
        let out_hdr = UmadHdr { id: agent, status: 0, timeout_ms: 0, retries: 0, length: 0, ..hdr };
        // An RMPP answer: one write, the kernel segments it and waits for the ACKs.
        let message = rmpp_message(segs);
        let writes: Vec<(UmadHdr, &[u8])> = match &message {
            Some(m) => vec![(UmadHdr { retries: RMPP_RETRIES, ..out_hdr }, &m[..])],
            None => segs.iter().map(|s| (out_hdr, &s[..])).collect(),
        };
        for (h, body) in writes {
            let mut out = Vec::with_capacity(UMAD_HDR_LEN + body.len());
            out.extend_from_slice(&h.emit());
            out.extend_from_slice(body);
            // SAFETY: writing our buffer with its length.
            let w = unsafe { libc::write(fd.as_raw_fd(), out.as_ptr() as *const libc::c_void, out.len()) };
            if w < 0 {
                eprintln!("sa-agent: write failed: {}", io::Error::last_os_error());
                continue;
            }
            let head = summary(&segs[0]);
            if message.is_some() {
                out!(
                    "sa-agent: -> {head} to {gid} QP {}: one RMPP message, {} segment(s), {} data bytes (timeout_ms 0, retries {})",
                    hdr.qpn,
                    segs.len(),
                    body.len() - roce_wire::sa::SA_DATA_OFFSET,
                    h.retries
                );
            } else {
                out!("sa-agent: -> {} to {} QP {}", summary(body), gid, hdr.qpn);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_fields_sit_where_the_abi_puts_them() {
        let h = UmadHdr {
            id: 7,
            status: 0,
            timeout_ms: 0,
            retries: 0,
            length: 320,
            qpn: 1,
            qkey: 0x8001_0000,
            lid: 0,
            sl: 0,
            path_bits: 0,
            grh_present: 1,
            gid_index: 1,
            hop_limit: 64,
            traffic_class: 0,
            gid: Gid::from_ipv4("198.18.0.1".parse().unwrap()).0,
            flow_label: 0,
            pkey_index: 0,
        };
        let b = h.emit();
        assert_eq!(UmadHdr::parse(&b), h);
        assert_eq!(&b[20..24], &[0, 0, 0, 1]);
        assert_eq!(&b[24..28], &[0x80, 0x01, 0, 0]);
        assert_eq!(b[32], 1);
        assert_eq!(&b[46..52], &[0xff, 0xff, 198, 18, 0, 1]);
    }

    #[test]
    fn an_rmpp_answer_is_one_message_cut_at_its_length() {
        use roce_wire::mad::{MadStatus, Method};
        use roce_wire::rmpp::{RmppFlags, RmppRepr, RmppType};
        use roce_wire::sa::{attr, SaData};
        // 250 data bytes in two segments, as roce-sa cuts them
        let seg = |n: u32, flags: RmppFlags, pl: u32, fill: u8| {
            let req = SaMad::request(Method::GetTable, 9, attr::MC_MEMBER_RECORD, 0, SaData::zeroed());
            let mut m = req.response_to(Method::GetTable, MadStatus::SUCCESS, SaData::Raw([fill; 200]));
            m.rmpp = RmppRepr {
                version: 1,
                rmpp_type: RmppType::Data,
                resp_time: 0x1F,
                flags,
                status: 0,
                data1: n,
                data2: pl,
            };
            m.to_bytes()
        };
        let a = RmppFlags::ACTIVE;
        let segs = [seg(1, a | RmppFlags::FIRST, 290, 1), seg(2, a | RmppFlags::LAST, 70, 2)];
        let m = rmpp_message(&segs).unwrap();
        assert_eq!(m.len(), 56 + 250);
        assert_eq!(&m[..56], &segs[0][..56]);
        assert!(m[56..256].iter().all(|&b| b == 1) && m[256..].iter().all(|&b| b == 2));
        // one segment: its data only; no RMPP: written as it is
        let one = [seg(1, a | RmppFlags::FIRST | RmppFlags::LAST, 20 + 56, 3)];
        assert_eq!(rmpp_message(&one).unwrap().len(), 56 + 56);
        let plain = SaMad::request(Method::Get, 1, attr::MC_MEMBER_RECORD, 0, SaData::zeroed()).to_bytes();
        assert_eq!(rmpp_message(&[plain]), None);
    }

    #[test]
    fn registration_mask_has_the_methods() {
        let r = reg_req(3, 2, &[0x01, 0x02, 0x12, 0x15]);
        let m0 = u64::from_ne_bytes(r[4..12].try_into().unwrap());
        assert_eq!(m0, (1 << 1) | (1 << 2) | (1 << 0x12) | (1 << 0x15));
        assert_eq!((r[20], r[21], r[22], r[26]), (1, 3, 2, 1));
        // _IOWR(0x1b, 1, 28 bytes)
        assert_eq!(IB_USER_MAD_REGISTER_AGENT, (3 << 30) | (28 << 16) | (0x1b << 8) | 1);
    }
}
