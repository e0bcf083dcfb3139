//! `roce send`: put the frames of a capture (or of `roce encode`'s output) on an interface.

use std::io::{self, BufReader};
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use roce_net::device::Device;
use roce_wire::frame::FramePacket;
use roce_wire::icrc;

use crate::plumbing::exit;
use crate::plumbing::out::warn_line;
use roce_decode::capture::{linktype, Reader};

/// Send the frames of a capture (pcap or pcapng, Ethernet link type; a file or `-` for standard
/// input) on an interface (AF_PACKET: root or CAP_NET_RAW), as they are or with new source
/// addresses.
///
/// With --src-mac or --src-ip the IPv4 header checksum, a non-zero UDP checksum and the RoCEv2
/// ICRC are recomputed (unless --keep-icrc). The count printed at the end is of the frames the
/// device accepted.
///
/// Example: roce send --iface veth0 tests/data/sample.pcap
///
/// Example: roce decode --json in.pcap | jq -c '.psn = 7' | roce encode - -o - | roce send --iface eth0 -
///
/// Example: roce send --iface eth0 --src-ip 198.18.0.9 --rate 1000 --loop --count 100000 sample.pcap
#[derive(clap::Args, Debug)]
#[command(after_help = exit::TABLE)]
pub struct Args {
    /// The interface.
    #[arg(long)]
    pub iface: String,
    /// The capture, `-` for standard input.
    #[arg(default_value = "-")]
    pub file: PathBuf,
    /// Stop after N frames (1 to 10^12).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000_000))]
    pub count: Option<u64>,
    /// Frames per second (1 to 10,000,000; default: as fast as the device takes them).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub rate: Option<u64>,
    /// Send the capture again and again (until --count or a signal).
    #[arg(long = "loop")]
    pub repeat: bool,
    /// Rewrite the Ethernet source address.
    #[arg(long, value_parser = crate::plumbing::options::mac)]
    pub src_mac: Option<[u8; 6]>,
    /// Rewrite the IP source address (IPv4 frames take an IPv4 address, IPv6 ones an IPv6 one).
    #[arg(long)]
    pub src_ip: Option<IpAddr>,
    /// Keep the ICRC on the wire after a rewrite (it then no longer matches).
    #[arg(long)]
    pub keep_icrc: bool,
    /// Quiet: no summary on stderr.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signo: libc::c_int) {
    SIGNAL.store(signo, Ordering::Relaxed);
}

/// Rewrite the source addresses of an Ethernet frame and fix what covers them. Returns a
/// reason when `--src-ip` does not apply to this frame (not IP, or the other family).
pub fn rewrite(f: &mut [u8], src_mac: Option<[u8; 6]>, src_ip: Option<IpAddr>, keep_icrc: bool) -> Result<(), String> {
    if let Some(m) = src_mac {
        if f.len() < 14 {
            return Err("shorter than an Ethernet header".into());
        }
        f[6..12].copy_from_slice(&m);
    }
    let Some(ip) = src_ip else { return Ok(()) };
    // The ICRC is recomputed only where it was right before the rewrite.
    let roce_ok = FramePacket::new_lax(f).map(|p| p.icrc_ok()).unwrap_or(false);
    let mut at = 14;
    let mut et = f.get(12..14).map(|b| u16::from_be_bytes([b[0], b[1]])).ok_or("no EtherType")?;
    if et == 0x8100 {
        et = f.get(16..18).map(|b| u16::from_be_bytes([b[0], b[1]])).ok_or("cut short in the VLAN tag")?;
        at = 18;
    }
    let (hlen, proto, version) = match (et, ip) {
        (0x0800, IpAddr::V4(a)) => {
            let h = f.get(at..at + 20).ok_or("IPv4 header cut short")?;
            let hlen = usize::from(h[0] & 0x0f) * 4;
            let proto = h[9];
            if hlen < 20 || f.len() < at + hlen {
                return Err("bad IPv4 header length".into());
            }
            f[at + 12..at + 16].copy_from_slice(&a.octets());
            f[at + 10..at + 12].copy_from_slice(&[0, 0]);
            let c = internet_checksum(&f[at..at + hlen]);
            f[at + 10..at + 12].copy_from_slice(&c.to_be_bytes());
            (hlen, proto, icrc::IpVersion::V4)
        }
        (0x86dd, IpAddr::V6(a)) => {
            let h = f.get(at..at + 40).ok_or("IPv6 header cut short")?;
            let proto = h[6];
            f[at + 8..at + 24].copy_from_slice(&a.octets());
            (40, proto, icrc::IpVersion::V6)
        }
        (0x0800 | 0x86dd, _) => return Err("--src-ip is of the other IP version".into()),
        _ => return Err("not IP".into()),
    };
    let udp = at + hlen;
    if proto == 17 && f.len() >= udp + 8 {
        let ulen = usize::from(u16::from_be_bytes([f[udp + 4], f[udp + 5]]));
        let has_sum = f[udp + 6..udp + 8] != [0, 0];
        if has_sum && ulen >= 8 && f.len() >= udp + ulen {
            f[udp + 6..udp + 8].copy_from_slice(&[0, 0]);
            let c = udp_checksum(f, at, udp, ulen, version);
            f[udp + 6..udp + 8].copy_from_slice(&c.to_be_bytes());
        }
        if roce_ok && !keep_icrc {
            if let Ok(p) = FramePacket::new_lax(f) {
                let (ip_off, end) = (p.offsets.ip, p.offsets.icrc);
                if let Ok(c) = icrc::compute(&f[ip_off..end], version, hlen) {
                    f[end..end + 4].copy_from_slice(&icrc::to_wire(c));
                }
            }
        }
    }
    Ok(())
}

fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

fn add(sum: &mut u32, b: &[u8]) {
    for c in b.chunks(2) {
        *sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
}

fn internet_checksum(b: &[u8]) -> u16 {
    let mut s = 0;
    add(&mut s, b);
    !fold(s)
}

/// The UDP checksum under the pseudo-header (RFC 768, RFC 8200 §8.1); 0 is sent as 0xFFFF.
fn udp_checksum(f: &[u8], ip: usize, udp: usize, ulen: usize, v: icrc::IpVersion) -> u16 {
    let mut s = 0u32;
    match v {
        icrc::IpVersion::V4 => add(&mut s, &f[ip + 12..ip + 20]),
        icrc::IpVersion::V6 => add(&mut s, &f[ip + 8..ip + 40]),
    }
    s += 17 + ulen as u32;
    add(&mut s, &f[udp..udp + ulen]);
    match !fold(s) {
        0 => 0xffff,
        c => c,
    }
}

/// Run `roce send`.
pub fn run(a: Args) -> ExitCode {
    let (input, name) = match crate::plumbing::input::open("roce send", &a.file) {
        Ok(opened) => opened,
        Err(code) => return ExitCode::from(code),
    };
    let mut reader = match Reader::new(BufReader::new(input)) {
        Ok(r) => r,
        Err(e) => {
            warn_line!("roce send: cannot read {name}: {e}");
            return ExitCode::from(exit::USAGE);
        }
    };
    let mut dev = match roce_net::raw::RawSocket::open(&a.iface) {
        Ok(d) => d,
        Err(e) => {
            warn_line!("roce send: --iface {}: {e}", a.iface);
            return ExitCode::from(exit::ENVIRONMENT);
        }
    };
    for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic.
        unsafe {
            libc::signal(s, on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t);
        }
    }
    let gap = a.rate.map(|r| Duration::from_nanos(1_000_000_000 / r));
    let start = Instant::now();
    let (mut sent, mut refused, mut skipped, mut unchanged) = (0u64, 0u64, 0u64, 0u64);
    let mut last_why = String::new();
    let mut kept: Vec<Vec<u8>> = Vec::new();
    let mut status = exit::OK;
    let mut from_file = true;
    let mut idx = 0usize;
    let mut frame = Vec::new();
    'send: loop {
        if a.count.is_some_and(|c| sent >= c) {
            break;
        }
        let sig = SIGNAL.load(Ordering::Relaxed);
        if sig != 0 {
            status = exit::signal_status(sig);
            break;
        }
        // Next frame: from the input, then (with --loop) again from memory.
        frame.clear();
        if from_file {
            match reader.next_frame() {
                Ok(Some((rec, data))) => {
                    if rec.linktype != linktype::ETHERNET {
                        skipped += 1;
                        if !a.quiet && skipped == 1 {
                            warn_line!(
                                "roce send: skipping frames of link type {} (only Ethernet is sent)",
                                rec.linktype
                            );
                        }
                        continue;
                    }
                    frame.extend_from_slice(data);
                    if a.repeat {
                        kept.push(data.to_vec());
                    }
                }
                Ok(None) => {
                    if !a.repeat || kept.is_empty() {
                        break;
                    }
                    from_file = false;
                    continue;
                }
                Err(e) => {
                    warn_line!("roce send: {name}: {e}");
                    status = exit::USAGE;
                    break;
                }
            }
        } else {
            frame.extend_from_slice(&kept[idx % kept.len()]);
            idx += 1;
        }
        if a.src_mac.is_some() || a.src_ip.is_some() {
            if let Err(why) = rewrite(&mut frame, a.src_mac, a.src_ip, a.keep_icrc) {
                // Sent as it is (ARP, the other IP version): counted, said once at the end.
                unchanged += 1;
                last_why = why;
            }
        }
        if let Some(g) = gap {
            let due = start + g * u32::try_from(sent + refused).unwrap_or(u32::MAX);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
        }
        // A full socket queue is back-pressure, not a refusal: wait and try again.
        let mut r = dev.send(&frame);
        for _ in 0..10_000 {
            match &r {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_micros(50));
                    r = dev.send(&frame);
                }
                _ => break,
            }
        }
        match r {
            Ok(()) => sent += 1,
            Err(e) => {
                refused += 1;
                if !a.quiet && refused <= 3 {
                    warn_line!("roce send: the device refused a frame of {} bytes: {e}", frame.len());
                }
                if refused > 1000 && sent == 0 {
                    status = exit::FAILED;
                    break 'send;
                }
            }
        }
    }
    if !a.quiet {
        let secs = start.elapsed().as_secs_f64();
        warn_line!(
            "roce send: sent {sent} frames on {} in {secs:.3} s ({} refused by the device, {skipped} not Ethernet)",
            a.iface,
            refused
        );
    }
    if unchanged > 0 && !a.quiet {
        warn_line!("roce send: {unchanged} frames sent without the address rewrite (e.g. {last_why})");
    }
    if status == exit::OK && refused > 0 {
        status = exit::FAILED;
    }
    {
        use std::io::Write as _;
        let _ = writeln!(io::stdout(), "sent {sent}");
    }
    ExitCode::from(status)
}
