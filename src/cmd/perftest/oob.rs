//! perftest's out-of-band exchanges (perftest_communication.c of 4.5-0.17), byte for byte:
//! the 16-byte version string, the system data, the MTU, the 108-byte GID key message (TCP
//! mode), the 56-byte `struct pingpong_dest` (rdma_cm mode) and the bandwidth report.
//! spec/perftest.md has the layouts with their offsets.
//!
//! Every exchange is lockstep: the client writes then reads, the server reads then writes
//! ([`Channel::xchg`]). While a side waits, its driver keeps turning, so the QPs keep
//! answering the peer (a bandwidth server serves the client's WRITEs while it waits).

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, TcpStream};
use std::time::{Duration, Instant as WallInstant};

use roce_cm::rc::WorkCompletion;
use roce_net::driver::Driver;

use crate::plumbing::port::CliDevice;

/// The version string perftest 4.5-0.17 exchanges (its configure.ac's AC_INIT version).
pub const VERSION: &str = "6.06";
/// The oldest version perftest 4.5-0.17 accepts (check_version_compatibility), in hundredths.
pub const OLDEST_COMPATIBLE: u32 = 570;
/// From this version on (in hundredths), a raw `struct perftest_parameters_negotiate` follows
/// the MTU, a message this side does not speak: such a peer is refused.
pub const FIRST_NEGOTIATING: u32 = 628;
/// `MAX_VERSION`: the version message's size, NUL-padded.
pub const VERSION_LEN: usize = 16;
/// `KEY_MSG_SIZE_GID`: the key message with a GID, its NUL included.
pub const KEY_MSG_LEN: usize = 108;
/// `sizeof(struct pingpong_dest)` in 4.5-0.17 (x86-64): the rdma_cm mode's key message.
pub const DEST_LEN: usize = 56;
/// What `ctx_close_connection` writes after its last handshake (with the NUL).
pub const DONE: &[u8; 5] = b"done\0";

/// `struct pingpong_dest`: what each side tells the other about one QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Dest {
    /// LID (0 on RoCE).
    pub lid: u32,
    /// Outstanding READ/atomic requests this side answers (1 for SEND and WRITE tests).
    pub out_reads: u32,
    /// QP number.
    pub qpn: u32,
    /// The first PSN this side sends (24 bits).
    pub psn: u32,
    /// The rkey of the buffer the peer may write, read or update.
    pub rkey: u32,
    /// That buffer's address.
    pub vaddr: u64,
    /// The GID (an IPv4-mapped IPv6 address for IPv4).
    pub gid: [u8; 16],
    /// SRQ number (XRC/DC only; 0 here).
    pub srqn: u32,
    /// GID index (carried by the rdma_cm struct only).
    pub gid_index: i32,
}

/// A key message or pingpong_dest that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DestError {
    /// Which message.
    pub layer: &'static str,
    /// Byte offset of the bad field.
    pub offset: usize,
    /// What is wrong.
    pub what: String,
}

impl std::fmt::Display for DestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at byte {}: {}", self.layer, self.offset, self.what)
    }
}

/// The GID of an address: IPv4-mapped for IPv4, as the kernel's RoCE v2 GID table has it.
pub fn gid_of(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

/// perftest's `ipv6_addr_v4mapped` (an IPv4-mapped GID, or an IPv4 multicast one).
pub fn gid_is_v4(gid: &[u8; 16]) -> bool {
    let mapped = gid[..10].iter().all(|b| *b == 0) && gid[10] == 0xff && gid[11] == 0xff;
    let mcast = gid[..4] == [0xff, 0x0e, 0, 0] && gid[4..10].iter().all(|b| *b == 0) && gid[10..12] == [0xff, 0xff];
    mapped || mcast
}

/// The address behind a GID.
pub fn ip_of_gid(gid: &[u8; 16]) -> IpAddr {
    let a = Ipv6Addr::from(*gid);
    match a.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(a),
    }
}

impl Dest {
    /// The TCP mode's key message (`KEY_PRINT_FMT_GID`, 107 characters and a NUL).
    pub fn key_msg(&self) -> [u8; KEY_MSG_LEN] {
        let mut s = format!(
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:",
            self.lid, self.out_reads, self.qpn, self.psn, self.rkey, self.vaddr
        );
        for b in self.gid {
            s.push_str(&format!("{b:02x}:"));
        }
        s.push_str(&format!("{:08x}:", self.srqn));
        let mut out = [0u8; KEY_MSG_LEN];
        let n = s.len().min(KEY_MSG_LEN - 1);
        out[..n].copy_from_slice(&s.as_bytes()[..n]);
        out
    }

    /// Read a key message as perftest's `ethernet_read_keys` does: colon-separated hex
    /// fields read with strtol, nothing else validated (a field that is not hex is 0).
    pub fn parse_key_msg(msg: &[u8]) -> Result<Dest, DestError> {
        let err = |offset: usize, what: &str| DestError { layer: "perftest key message", offset, what: what.into() };
        if msg.len() < KEY_MSG_LEN {
            return Err(err(msg.len(), &format!("{} bytes, {KEY_MSG_LEN} needed", msg.len())));
        }
        let end = msg.iter().position(|b| *b == 0).unwrap_or(msg.len());
        let text = &msg[..end];
        let mut fields = Vec::with_capacity(24);
        let mut start = 0;
        for (i, b) in text.iter().enumerate() {
            if *b == b':' {
                fields.push((start, &text[start..i]));
                start = i + 1;
            }
        }
        if start < text.len() {
            fields.push((start, &text[start..]));
        }
        if fields.len() < 23 {
            return Err(err(end, &format!("{} colon-separated fields, 23 needed", fields.len())));
        }
        let hex = |i: usize| -> u64 { strtoull_hex(fields[i].1) };
        let mut gid = [0u8; 16];
        for (k, g) in gid.iter_mut().enumerate() {
            *g = hex(6 + k) as u8;
        }
        Ok(Dest {
            lid: hex(0) as u32,
            out_reads: hex(1) as u32,
            qpn: hex(2) as u32,
            psn: hex(3) as u32,
            rkey: hex(4) as u32,
            vaddr: hex(5),
            gid,
            srqn: hex(22) as u32,
            gid_index: 0,
        })
    }

    /// The rdma_cm mode's raw `struct pingpong_dest` (x86-64 layout, fields big-endian as
    /// rdma_write_keys writes them with HAVE_ENDIAN; 4 bytes of padding before vaddr).
    pub fn to_struct(&self) -> [u8; DEST_LEN] {
        let mut b = [0u8; DEST_LEN];
        b[0..4].copy_from_slice(&self.lid.to_be_bytes());
        b[4..8].copy_from_slice(&self.out_reads.to_be_bytes());
        b[8..12].copy_from_slice(&self.qpn.to_be_bytes());
        b[12..16].copy_from_slice(&self.psn.to_be_bytes());
        b[16..20].copy_from_slice(&self.rkey.to_be_bytes());
        b[24..32].copy_from_slice(&self.vaddr.to_be_bytes());
        b[32..48].copy_from_slice(&self.gid);
        b[48..52].copy_from_slice(&self.srqn.to_be_bytes());
        b[52..56].copy_from_slice(&self.gid_index.to_be_bytes());
        b
    }

    /// Read a raw `struct pingpong_dest` (rdma_read_keys).
    pub fn from_struct(b: &[u8]) -> Result<Dest, DestError> {
        if b.len() < DEST_LEN {
            return Err(DestError {
                layer: "perftest pingpong_dest",
                offset: b.len(),
                what: format!("{} bytes, {DEST_LEN} needed", b.len()),
            });
        }
        let u = |o: usize| u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[32..48]);
        let mut va = [0u8; 8];
        va.copy_from_slice(&b[24..32]);
        Ok(Dest {
            lid: u(0),
            out_reads: u(4),
            qpn: u(8),
            psn: u(12),
            rkey: u(16),
            vaddr: u64::from_be_bytes(va),
            gid,
            srqn: u(48),
            gid_index: u(52) as i32,
        })
    }
}

/// strtoull(s, NULL, 16) on a field: leading blanks, an optional 0x, hex digits; the rest
/// ignored; nothing readable is 0.
fn strtoull_hex(s: &[u8]) -> u64 {
    let mut s = s;
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    if let [b'0', b'x' | b'X', rest @ ..] = s {
        s = rest;
    }
    let mut v: u64 = 0;
    for b in s {
        let Some(d) = (*b as char).to_digit(16) else { break };
        v = v.wrapping_mul(16).wrapping_add(u64::from(d));
    }
    v
}

/// The version message: the string NUL-padded to 16 bytes.
pub fn version_msg(v: &str) -> [u8; VERSION_LEN] {
    let mut b = [0u8; VERSION_LEN];
    let n = v.len().min(VERSION_LEN - 1);
    b[..n].copy_from_slice(&v.as_bytes()[..n]);
    b
}

/// The version string of a version message (up to its NUL, lossy).
pub fn version_of(msg: &[u8]) -> String {
    let end = msg.iter().position(|b| *b == 0).unwrap_or(msg.len());
    String::from_utf8_lossy(&msg[..end]).into_owned()
}

/// C's atof on a version string: the leading decimal number, 0 if none.
pub fn atof(s: &str) -> f64 {
    let t = s.trim_start();
    let mut end = 0;
    let mut dot = false;
    for (i, c) in t.char_indices() {
        match c {
            '0'..='9' => end = i + 1,
            '.' if !dot => dot = true,
            _ => break,
        }
    }
    t[..end].parse().unwrap_or(0.0)
}

/// Whether this side can talk to a peer of version `remote`; the refusal names both.
pub fn check_version(remote: &str) -> Result<(), String> {
    let v = (atof(remote) * 100.0).round();
    let hundredths = |h: u32| format!("{}.{:02}", h / 100, h % 100);
    if v < f64::from(OLDEST_COMPATIBLE) {
        return Err(format!(
            " The peer's perftest version \"{remote}\" is older than {}; this side speaks \"{VERSION}\" (perftest 4.5-0.17)",
            hundredths(OLDEST_COMPATIBLE)
        ));
    }
    if v >= f64::from(FIRST_NEGOTIATING) {
        return Err(format!(
            " The peer's perftest version \"{remote}\" negotiates parameters (from {} on), which this side does not speak; this side speaks \"{VERSION}\" (perftest 4.5-0.17)",
            hundredths(FIRST_NEGOTIATING)
        ));
    }
    Ok(())
}

/// The bandwidth report the two sides exchange (`struct bw_report_data`, the part sent).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BwReport {
    /// Message size in bytes.
    pub size: u64,
    /// Messages.
    pub iters: u64,
    /// Peak bandwidth (MB/s or Gb/s).
    pub bw_peak: f64,
    /// Average bandwidth.
    pub bw_avg: f64,
    /// Messages per second, in millions.
    pub msg_rate: f64,
}

/// One side of the out-of-band channel: TCP (this file) or rdma_cm SENDs.
pub trait Channel {
    /// Whether this side writes first (the client).
    fn is_client(&self) -> bool;
    /// Write one message.
    fn send_msg(&mut self, d: &mut Driver<CliDevice>, bytes: &[u8]) -> Result<(), String>;
    /// Read one message of `n` bytes.
    fn recv_msg(&mut self, d: &mut Driver<CliDevice>, n: usize) -> Result<Vec<u8>, String>;
    /// Exchange `mine` for the peer's message of the same length, lockstep: the client
    /// writes then reads, the server reads then writes.
    fn xchg(&mut self, d: &mut Driver<CliDevice>, mine: &[u8]) -> Result<Vec<u8>, String> {
        if self.is_client() {
            self.send_msg(d, mine)?;
            self.recv_msg(d, mine.len())
        } else {
            let r = self.recv_msg(d, mine.len())?;
            self.send_msg(d, mine)?;
            Ok(r)
        }
    }
    /// Write bytes that nobody reads (the closing "done").
    fn write_only(&mut self, d: &mut Driver<CliDevice>, bytes: &[u8]) -> Result<(), String>;
    /// The key message exchange (`ctx_hand_shake`).
    fn hand_shake(&mut self, d: &mut Driver<CliDevice>, my: &Dest) -> Result<Dest, String>;
    /// A completion the test polled: the channel keeps its own QP's (rdma_cm mode) and
    /// gives back the rest.
    fn claim(&mut self, wc: WorkCompletion) -> Option<WorkCompletion> {
        Some(wc)
    }
    /// Completions of the test's QPs the channel met while it waited.
    fn take_others(&mut self) -> Vec<WorkCompletion> {
        Vec::new()
    }
}

/// Exchange the five report values in turn, each an 8-byte big-endian value.
pub fn xchg_reports(ch: &mut dyn Channel, d: &mut Driver<CliDevice>, my: &BwReport) -> Result<BwReport, String> {
    let mut vals = [0u64; 5];
    let mine = [my.size, my.iters, my.bw_peak.to_bits(), my.bw_avg.to_bits(), my.msg_rate.to_bits()];
    for (v, m) in vals.iter_mut().zip(mine) {
        let r = ch.xchg(d, &m.to_be_bytes())?;
        let mut b = [0u8; 8];
        b.copy_from_slice(&r[..8]);
        *v = u64::from_be_bytes(b);
    }
    Ok(BwReport {
        size: vals[0],
        iters: vals[1],
        bw_peak: f64::from_bits(vals[2]),
        bw_avg: f64::from_bits(vals[3]),
        msg_rate: f64::from_bits(vals[4]),
    })
}

/// The TCP side: one connected stream, non-blocking, read while the driver turns.
pub struct Tcp {
    stream: TcpStream,
    client: bool,
    timeout: Duration,
}

/// Turn the driver until `ready` holds: no longer than `timeout`, and not past a stop.
fn pump(
    d: &mut Driver<CliDevice>,
    timeout: Duration,
    what: &str,
    mut ready: impl FnMut() -> Result<bool, String>,
) -> Result<(), String> {
    let end = WallInstant::now() + timeout;
    loop {
        if ready()? {
            return Ok(());
        }
        if crate::plumbing::shutdown::requested().is_some() || d.stopped() {
            return Err(format!("stopped while waiting for {what}"));
        }
        if WallInstant::now() >= end {
            return Err(format!("no {what} within {:.1} s", timeout.as_secs_f64()));
        }
        d.turn(Duration::from_millis(1)).map_err(|e| format!("{e}"))?;
    }
}

impl Tcp {
    /// Listen on `port` (SO_REUSEADDR, backlog 1) and take one connection, the driver
    /// turning meanwhile.
    pub fn accept(
        d: &mut Driver<CliDevice>,
        bind: IpAddr,
        port: u16,
        timeout: Duration,
        accept_timeout: Duration,
    ) -> Result<Tcp, String> {
        let unspecified = if bind.is_ipv4() { IpAddr::V4(Ipv4Addr::UNSPECIFIED) } else { bind };
        let listener = std::net::TcpListener::bind((unspecified, port))
            .map_err(|e| format!("Couldn't listen to port {port}: {e}"))?;
        listener.set_nonblocking(true).map_err(|e| format!("{e}"))?;
        let mut got = None;
        pump(d, accept_timeout, "client connection", || match listener.accept() {
            Ok((s, _)) => {
                got = Some(s);
                Ok(true)
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(false),
            Err(e) => Err(format!("accept() failed: {e}")),
        })?;
        let stream = got.ok_or("accept() failed")?;
        Tcp::new(stream, false, timeout)
    }

    /// Connect to the server, once (perftest does not retry).
    pub fn connect(server: IpAddr, port: u16, timeout: Duration) -> Result<Tcp, String> {
        let addr = std::net::SocketAddr::new(server, port);
        let stream = TcpStream::connect_timeout(&addr, timeout.max(Duration::from_millis(1)))
            .map_err(|e| format!("Couldn't connect to {server}:{port}: {e}"))?;
        Tcp::new(stream, true, timeout)
    }

    fn new(stream: TcpStream, client: bool, timeout: Duration) -> Result<Tcp, String> {
        stream.set_nonblocking(true).map_err(|e| format!("{e}"))?;
        let _ = stream.set_nodelay(true);
        Ok(Tcp { stream, client, timeout })
    }

    fn write_all(&mut self, d: &mut Driver<CliDevice>, bytes: &[u8]) -> Result<(), String> {
        let mut off = 0;
        let stream = &mut self.stream;
        pump(d, self.timeout, "room to write to the peer", || {
            while off < bytes.len() {
                match stream.write(&bytes[off..]) {
                    Ok(0) => return Err("the peer closed the connection".into()),
                    Ok(n) => off += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(format!("client write: {e}")),
                }
            }
            Ok(true)
        })
    }

    fn read_exact(&mut self, d: &mut Driver<CliDevice>, n: usize) -> Result<Vec<u8>, String> {
        let mut buf = vec![0u8; n];
        let mut off = 0;
        let stream = &mut self.stream;
        pump(d, self.timeout, "message from the peer", || {
            while off < n {
                match stream.read(&mut buf[off..]) {
                    Ok(0) => return Err(format!("the peer closed the connection ({off} of {n} bytes read)")),
                    Ok(k) => off += k,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(format!("read: {e}")),
                }
            }
            Ok(true)
        })?;
        Ok(buf)
    }
}

impl Channel for Tcp {
    fn is_client(&self) -> bool {
        self.client
    }

    fn send_msg(&mut self, d: &mut Driver<CliDevice>, bytes: &[u8]) -> Result<(), String> {
        self.write_all(d, bytes)
    }

    fn recv_msg(&mut self, d: &mut Driver<CliDevice>, n: usize) -> Result<Vec<u8>, String> {
        self.read_exact(d, n)
    }

    fn write_only(&mut self, d: &mut Driver<CliDevice>, bytes: &[u8]) -> Result<(), String> {
        self.write_all(d, bytes)
    }

    fn hand_shake(&mut self, d: &mut Driver<CliDevice>, my: &Dest) -> Result<Dest, String> {
        let r = self.xchg(d, &my.key_msg())?;
        Dest::parse_key_msg(&r).map_err(|e| format!("Couldn't parse line: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_message_is_perftests_108_bytes_and_reads_back() {
        let d = Dest {
            lid: 0,
            out_reads: 1,
            qpn: 0x11,
            psn: 0xabcdef,
            rkey: 0x1234,
            vaddr: 0x5566_7788_99aa,
            gid: gid_of("198.18.0.1".parse().unwrap()),
            srqn: 0,
            gid_index: 0,
        };
        let m = d.key_msg();
        let text = std::str::from_utf8(&m[..107]).unwrap();
        assert_eq!(
            text,
            "0000:0001:000011:abcdef:00001234:00005566778899aa:00:00:00:00:00:00:00:00:00:00:ff:ff:c6:12:00:01:00000000:"
        );
        assert_eq!(m[107], 0);
        assert_eq!(Dest::parse_key_msg(&m).unwrap(), d);
        assert!(Dest::parse_key_msg(&m[..50]).is_err());
        assert!(Dest::parse_key_msg(&[0u8; KEY_MSG_LEN]).is_err());
    }

    #[test]
    fn pingpong_dest_is_56_bytes_big_endian() {
        let d = Dest {
            lid: 1,
            out_reads: 16,
            qpn: 0x12,
            psn: 0x345678,
            rkey: 9,
            vaddr: 0x1000,
            gid: [7; 16],
            srqn: 0,
            gid_index: 1,
        };
        let b = d.to_struct();
        assert_eq!(&b[8..12], &[0, 0, 0, 0x12]);
        assert_eq!(&b[20..24], &[0; 4]);
        assert_eq!(&b[24..32], &0x1000u64.to_be_bytes());
        assert_eq!(Dest::from_struct(&b).unwrap(), d);
        assert!(Dest::from_struct(&b[..55]).is_err());
    }

    #[test]
    fn versions_compatible_or_refused_naming_both() {
        assert_eq!(&version_msg(VERSION)[..5], b"6.06\0");
        assert_eq!(version_of(&version_msg("6.10")), "6.10");
        assert!(check_version("6.06").is_ok());
        assert!(check_version("6.10").is_ok());
        let e = check_version("6.29").unwrap_err();
        assert!(e.contains("6.29") && e.contains("6.06"), "{e}");
        assert!(check_version("5.60").is_err());
        assert!(check_version("").is_err());
        assert_eq!(atof("6.06xyz"), 6.06);
    }

    #[test]
    fn gid_kinds() {
        let g = gid_of("198.18.0.2".parse().unwrap());
        assert!(gid_is_v4(&g));
        assert_eq!(ip_of_gid(&g), "198.18.0.2".parse::<IpAddr>().unwrap());
        let g6 = gid_of("fd00::1".parse().unwrap());
        assert!(!gid_is_v4(&g6));
        assert_eq!(ip_of_gid(&g6), "fd00::1".parse::<IpAddr>().unwrap());
    }
}
