//! `roce decode`: read a capture (file, standard input or a live interface) one frame at a
//! time and print one summary line or one JSON object per frame through a buffered writer.

use std::io::{self, BufReader, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::plumbing::exit;
use crate::plumbing::out::warn_line;
use roce_decode::capture::{linktype, PcapFileWriter, ReadError, Reader};
use roce_decode::decode::{Decoder, Meta};

/// Decode a capture (pcap or pcapng, a file or `-` for standard input) or a live interface:
/// one line per frame, or one JSON object per line.
///
/// Every frame is listed, RoCEv2 or not; RoCEv2 frames show addresses, opcode, QPs, PSN,
/// P_Key, the MAD class/method/attribute, TID, SA component mask, MCMemberRecord fields
/// and whether the ICRC is right. Link types: Ethernet, Linux cooked (SLL, SLL2), raw IP,
/// and native InfiniBand: LINKTYPE_INFINIBAND (247) and ibdump's ERF records (197), with the
/// LRH, GRH, SMPs and both the ICRC and VCRC checked. The JSON follows spec/decode.schema.json.
///
/// Example: roce decode tests/data/sample.pcap
///
/// Example: roce decode tests/data/ib-erf.pcap
///
/// Example: tcpdump -i any -w - | roce decode -
///
/// Example: roce decode --json capture.pcapng | jq 'select(.kind == "rocev2") | .icrc'
///
/// Example: roce decode -i eth0 -c 100 -w seen.pcap
#[derive(clap::Args, Debug)]
#[command(after_help = exit::TABLE)]
pub struct Args {
    /// The capture file, `-` for standard input (not with -i).
    #[arg(required_unless_present = "iface", conflicts_with = "iface")]
    pub file: Option<PathBuf>,
    /// One JSON object per line per frame instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// Stop after N frames.
    #[arg(short = 'c', long = "count", value_name = "N")]
    pub count: Option<u64>,
    /// Decode live from this interface (AF_PACKET: root or CAP_NET_RAW) until -c N frames or
    /// a signal (SIGINT, SIGTERM, SIGHUP).
    #[arg(short = 'i', long = "iface", value_name = "IFACE")]
    pub iface: Option<String>,
    /// With -i: also write every frame seen to this pcap file.
    #[arg(short = 'w', long = "write", value_name = "FILE", requires = "iface")]
    pub write: Option<PathBuf>,
    /// Quiet: no warnings or progress on stderr (results and errors stay).
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// What ended the output loop early.
enum Stop {
    /// Standard output is closed (`| head`).
    ClosedPipe,
}

/// Prints frames and counts them.
struct Printer<W: Write> {
    out: W,
    dec: Decoder,
    json: bool,
    n: u64,
    t0: Option<Duration>,
    line: Vec<u8>,
}

/// Append `v` right-aligned in `width` columns.
fn pad_dec(out: &mut Vec<u8>, v: u64, width: usize, fill: u8) {
    let mut d = [0u8; 20];
    let mut i = d.len();
    let mut v = v;
    loop {
        i -= 1;
        d[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend(std::iter::repeat_n(fill, width.saturating_sub(d.len() - i)));
    out.extend_from_slice(&d[i..]);
}

impl<W: Write> Printer<W> {
    fn frame(&mut self, timestamp: Duration, lt: u32, interface: u32, orig_len: u32, data: &[u8]) -> Result<(), Stop> {
        self.n += 1;
        let t0 = *self.t0.get_or_insert(timestamp);
        let meta = Meta {
            number: self.n,
            timestamp,
            relative: timestamp.saturating_sub(t0),
            linktype: lt,
            interface,
            orig_len,
        };
        self.dec.decode(&meta, data);
        let r = if self.json {
            self.out.write_all(&self.dec.json.buf).and_then(|()| self.out.write_all(b"\n"))
        } else {
            // `{n:>5} {secs:>4}.{micros:06} {len:>5} summary`, without the float formatter.
            let mut line = std::mem::take(&mut self.line);
            line.clear();
            let rel = meta.relative;
            pad_dec(&mut line, self.n, 5, b' ');
            line.push(b' ');
            pad_dec(&mut line, rel.as_secs(), 4, b' ');
            line.push(b'.');
            let us = u64::from(rel.subsec_micros());
            pad_dec(&mut line, us, 6, b'0');
            line.push(b' ');
            pad_dec(&mut line, u64::from(roce_decode::decode::frame_lengths(lt, orig_len, data).0), 5, b' ');
            line.push(b' ');
            line.extend_from_slice(self.dec.summary.text.as_bytes());
            line.push(b'\n');
            let r = self.out.write_all(&line);
            self.line = line;
            r
        };
        r.map_err(|_| Stop::ClosedPipe)
    }

    fn flush(&mut self) -> Result<(), Stop> {
        self.out.flush().map_err(|_| Stop::ClosedPipe)
    }
}

/// Run `roce decode`.
pub fn run(args: Args) -> ExitCode {
    if args.count == Some(0) {
        return ExitCode::SUCCESS;
    }
    // A closed stdout must show up as EPIPE on write, not kill us before the pcap is flushed.
    // SAFETY: setting a signal disposition to SIG_IGN has no preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let stdout = io::stdout();
    let mut dec = Decoder::new();
    // The summary needs no JSON: skip its cost.
    dec.json.off = !args.json;
    dec.summary.off = args.json;
    let mut p = Printer {
        out: io::BufWriter::with_capacity(1 << 16, stdout.lock()),
        dec,
        json: args.json,
        n: 0,
        t0: None,
        line: Vec::new(),
    };
    let status = match &args.iface {
        Some(iface) => live(&args, iface, &mut p),
        None => from_file(&args, &mut p),
    };
    let flushed = p.flush();
    let rmpp = p.dec.rmpp_counters();
    if !args.quiet && rmpp.any_loss() {
        // What the tables' reassembly could not place: a capture that missed segments.
        warn_line!("roce decode: RMPP: {rmpp}");
    }
    match flushed {
        Err(Stop::ClosedPipe) => ExitCode::from(exit::CLOSED_PIPE),
        Ok(()) => ExitCode::from(status),
    }
}

fn from_file<W: Write>(args: &Args, p: &mut Printer<W>) -> u8 {
    let path = args.file.clone().unwrap_or_else(|| PathBuf::from("-"));
    let (input, name) = match crate::plumbing::input::open("roce decode", &path) {
        Ok(opened) => opened,
        Err(code) => return code,
    };
    let mut reader = match Reader::new(BufReader::with_capacity(1 << 16, input)) {
        Ok(r) => r,
        Err(e) => {
            warn_line!("roce decode: cannot read {name}: {e}");
            return exit::USAGE;
        }
    };
    loop {
        if args.count.is_some_and(|c| p.n >= c) {
            return exit::OK;
        }
        match reader.next_frame() {
            Ok(Some((rec, data))) => {
                if p.frame(rec.timestamp, rec.linktype, rec.interface, rec.orig_len, data).is_err() {
                    return exit::CLOSED_PIPE;
                }
            }
            Ok(None) => return exit::OK,
            Err(e) => {
                // Every complete frame is out: say where the input ends, as tshark does.
                if p.flush().is_err() {
                    return exit::CLOSED_PIPE;
                }
                let what = match e {
                    ReadError::Truncated { .. } => "warning",
                    _ => "error",
                };
                if !(args.quiet && what == "warning") {
                    warn_line!("roce decode: {what}: {name}: {e} (after {} frames)", p.n);
                }
                return exit::USAGE;
            }
        }
    }
}

static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signo: libc::c_int) {
    SIGNAL.store(signo, Ordering::Relaxed);
}

/// A blocking AF_PACKET socket on one interface, every protocol, with a receive timeout so
/// that a signal is noticed.
struct LiveSocket {
    fd: std::os::fd::OwnedFd,
}

impl LiveSocket {
    fn open(iface: &str) -> io::Result<LiveSocket> {
        use std::os::fd::{AsRawFd, FromRawFd};
        let info = roce_net::raw::interface(iface)?;
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain socket(2); the result is checked.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, i32::from(proto)) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("socket(AF_PACKET): {e}: live capture needs root or CAP_NET_RAW"),
            ));
        }
        // SAFETY: a fresh descriptor that we own from here on.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_ll is plain data.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = i32::try_from(info.index).map_err(io::Error::other)?;
        // SAFETY: pointer and length describe `sll`.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::other(format!("bind to {iface}: {}", io::Error::last_os_error())));
        }
        let tv = libc::timeval { tv_sec: 0, tv_usec: 200_000 };
        // SAFETY: the option value points at a live timeval.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const libc::timeval as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as u32,
            );
        }
        Ok(LiveSocket { fd })
    }

    /// One frame (its length on the wire), `None` on timeout or signal.
    fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        use std::os::fd::AsRawFd;
        // SAFETY: buf is live and its length given.
        let r = unsafe {
            libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr() as *mut libc::c_void, buf.len(), libc::MSG_TRUNC)
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
                _ => Err(e),
            };
        }
        Ok(Some(r as usize))
    }
}

fn live<W: Write>(args: &Args, iface: &str, p: &mut Printer<W>) -> u8 {
    let sock = match LiveSocket::open(iface) {
        Ok(s) => s,
        Err(e) => {
            warn_line!("roce decode: -i {iface}: {e}");
            return exit::ENVIRONMENT;
        }
    };
    let mut writer = match &args.write {
        Some(path) => match PcapFileWriter::create(path) {
            Ok(w) => Some(w),
            Err(e) => {
                warn_line!("roce decode: cannot write {}: {e}", path.display());
                return exit::USAGE;
            }
        },
        None => None,
    };
    for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic.
        unsafe {
            libc::signal(s, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
        }
    }
    if !args.quiet {
        warn_line!("roce decode: listening on {iface} (link type Ethernet)");
    }
    let mut buf = vec![0u8; 65536 + 4];
    let mut status = exit::OK;
    loop {
        if args.count.is_some_and(|c| p.n >= c) {
            break;
        }
        let sig = SIGNAL.load(Ordering::Relaxed);
        if sig != 0 {
            status = exit::signal_status(sig);
            break;
        }
        let n = match sock.recv(&mut buf) {
            Ok(Some(n)) => n,
            Ok(None) => {
                if p.flush().is_err() {
                    status = exit::CLOSED_PIPE;
                    break;
                }
                continue;
            }
            Err(e) => {
                warn_line!("roce decode: -i {iface}: recv: {e}");
                status = exit::FAILED;
                break;
            }
        };
        let ts = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let cap = n.min(buf.len());
        let orig = u32::try_from(n).unwrap_or(u32::MAX);
        if let Some(w) = &mut writer {
            if let Err(e) = w.write(ts, &buf[..cap]) {
                warn_line!("roce decode: -w: {e}");
                status = exit::FAILED;
                break;
            }
        }
        if p.frame(ts, linktype::ETHERNET, 0, orig, &buf[..cap]).is_err() {
            status = exit::CLOSED_PIPE;
            break;
        }
        // Live output goes out frame by frame.
        if p.flush().is_err() {
            status = exit::CLOSED_PIPE;
            break;
        }
    }
    if let Some(w) = writer {
        if let Err(e) = w.finish() {
            warn_line!("roce decode: -w: {e}");
            if status == exit::OK {
                status = exit::FAILED;
            }
        }
    }
    if !args.quiet {
        warn_line!("roce decode: {} frames from {iface}", p.n);
    }
    status
}
