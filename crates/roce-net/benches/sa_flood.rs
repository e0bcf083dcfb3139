//! A flood of spoofed proxy joins into `roce sa-server` on a veth pair between two network
//! namespaces this bench creates (198.18.26.0/24 only; needs root), issue 26 item 1:
//! - the release `roce` binary runs `sa-server --iface v2 --ip 198.18.26.2` in one namespace;
//! - in the other, a raw socket sends N SubnAdmSet(MCMemberRecord) proxy joins at full rate,
//!   all from one requesting address (198.18.26.1), each with a new PortGID (fd00::/8) and
//!   ProxyJoin set, spread over 64 groups, as RoCEv2 UD frames to QP1 with a correct ICRC;
//!   a second raw socket reads the GetResp answers back and counts them by status;
//! - another host (198.18.26.3) joins one of the flooded groups and leaves it again, before
//!   the flood and right after it: the round-trip times side by side, and their ratio;
//! - the sa-server's VmRSS before and after, its VmHWM, against the caps' budget: the RSS
//!   before, plus what roce-sa's `memory_usage` gives for a responder holding the per-port
//!   cap's members (computed here from the same joins), plus its transmit ring.
//!
//! It asserts only what is not a time: joins past the cap were answered NO_RESOURCES, the
//! other host's join and leave were answered SUCCESS, the RSS stayed within the budget (with
//! a stated margin). `cargo bench -p roce-net --bench sa_flood`: 1,000,000 joins against the
//! default caps. Under `cargo test --benches` (no `--bench` argument) it runs once with 20,000
//! joins and `--max-members-per-port 2000`, so that the cap is hit there too (the sa-server
//! answers 23–55 % of a flood at full rate: 4,684 of 20,000 in one run on a loaded machine,
//! under a cap of 5,000).
//!
//! The `roce` binary: `veth::roce_bin` (`ROCE_BIN`, or the newest release build).

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use roce_net::device::Device;
use roce_net::raw::RawSocket;
use roce_net::ring::RingConfig;
use roce_sa::{MemoryUsage, Requester, SaConfig, SaResponder};
use roce_wire::bth::{self, Opcode};
use roce_wire::ext::ExtHeaders;
use roce_wire::frame::{self, rxe_udp_sport, FrameRepr};
use roce_wire::mad::{MadStatus, Method};
use roce_wire::mcmember::{ComponentMask, JoinState, McMemberRecord};
use roce_wire::sa::{attr, SaData, SaMad};
use roce_wire::{Gid, GSI_QKEY};

mod veth;
use veth::{enter, rss_kib, start_sa_server, thread_cpu, Nets};

const MAC_FLOOD: [u8; 6] = [2, 0, 0, 0, 0x1a, 1];
const MAC_SA: [u8; 6] = [2, 0, 0, 0, 0x1a, 2];
/// The flooding host (v1's kernel address, so that the kernel answers the SA's ARP).
const FLOOD_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 26, 1);
/// The other host: a second kernel address on v1.
const OTHER_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 26, 3);
/// The sa-server's address (answered by its own ARP; v2's kernel address is .12).
const SA_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 26, 2);
/// The flood's groups: 239.26.0.0 .. 239.26.0.63.
const GROUPS: u32 = 64;
/// TIDs of the other host's join and leave carry this tag (the flood's are 1..=N).
const PROBE_TAG: u64 = 1 << 62;
/// Join/leave pairs measured before and after the flood (each figure is their median).
const PROBES: usize = 20;

fn group(n: u32) -> Gid {
    Gid::from_ipv4(Ipv4Addr::new(239, 26, 0, (n % GROUPS) as u8))
}

/// The n-th spoofed PortGID, fd00::n.
fn spoofed(n: u32) -> Gid {
    let mut b = [0u8; 16];
    b[0] = 0xfd;
    b[12..].copy_from_slice(&n.to_be_bytes());
    Gid(b)
}

/// The record RDMA-CM sends to join (mask KERNEL_JOIN).
fn join_record(port: Gid, mgid: Gid) -> McMemberRecord {
    McMemberRecord {
        mgid,
        port_gid: port,
        q_key: 0x0123_4567,
        p_key: 0xffff,
        join_state: JoinState::FULL_MEMBER,
        ..McMemberRecord::default()
    }
}

/// The n-th flood MAD: a proxy join of spoofed(n) to one of the groups, TID n.
fn flood_mad(n: u32) -> SaMad {
    let rec = McMemberRecord { proxy_join: true, ..join_record(spoofed(n), group(n)) };
    SaMad::request(
        Method::Set,
        u64::from(n),
        attr::MC_MEMBER_RECORD,
        ComponentMask::KERNEL_JOIN.0,
        SaData::mc_member(rec),
    )
}

/// A MAD as a RoCEv2 UD SEND from `src` to the SA's QP1, as rxe sends it (ICRC computed).
fn frame_of(src: Ipv4Addr, mad: &SaMad, psn: u32, out: &mut Vec<u8>) {
    let bytes = mad.to_bytes();
    let mut b = bth::Repr::new(Opcode::UdSendOnly, 1, psn & 0xff_ffff);
    b.ack_req = true;
    let ext = ExtHeaders::deth(GSI_QKEY, 1);
    let mut r = FrameRepr::new(MAC_FLOOD, MAC_SA, IpAddr::V4(src), IpAddr::V4(SA_IP), b, ext, &bytes);
    r.udp.source_port = rxe_udp_sport(1);
    out.resize(r.buffer_len(), 0);
    let n = r.emit(out).expect("frame emit");
    out.truncate(n);
}

/// What the answer reader saw.
#[derive(Debug, Default)]
struct Answers {
    success: u64,
    no_resources: u64,
    other: u64,
}

/// Reads the SA's answers (GetResp, DeleteResp) on v1 until `stop`: flood answers counted by status, the
/// other host's answers sent to `probes` as (TID, status, arrival).
fn reader(
    ns: String,
    stop: Arc<AtomicBool>,
    ready: mpsc::Sender<()>,
    probes: mpsc::Sender<(u64, MadStatus, Instant, u64)>,
    answers: Arc<Mutex<Answers>>,
) {
    enter(&ns);
    let mut sock = RawSocket::open("v1").expect("raw socket (root)");
    sock.set_buffer_sizes(64 << 20, 1 << 20).expect("socket buffers");
    let fd = sock.raw_fd().expect("fd");
    ready.send(()).unwrap();
    let mut buf = vec![0u8; 4096];
    while !stop.load(Ordering::Relaxed) {
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut pfd, 1, 50) };
        // An error ends the reader (the namespaces go when the bench fails).
        while let Ok(Some(len)) = sock.recv(&mut buf) {
            let (at, at_ns) = (Instant::now(), realtime_ns());
            let Ok(f) = frame::parse(&buf[..len]) else { continue };
            if f.repr.ip.source() != IpAddr::V4(SA_IP) {
                continue;
            }
            let Ok(m) = SaMad::parse(f.repr.payload) else { continue };
            if !m.header.response {
                continue;
            }
            let tid = m.header.transaction_id;
            if tid & PROBE_TAG != 0 {
                let _ = probes.send((tid, m.header.status, at, at_ns));
                continue;
            }
            let mut a = answers.lock().unwrap();
            match m.header.status {
                MadStatus::SUCCESS => a.success += 1,
                MadStatus::NO_RESOURCES => a.no_resources += 1,
                _ => a.other += 1,
            }
        }
    }
}

/// CLOCK_REALTIME in ns: the clock of the kernel's SO_TIMESTAMPNS stamps, so that the
/// bench's own times and the kernel's can be put on one line.
fn realtime_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime fills `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What a tap saw of one frame.
#[derive(Debug, Clone, Copy)]
enum Seen {
    /// An SA MAD: its TID and whether it is a response.
    Mad {
        tid: u64,
        response: bool,
    },
    /// An ARP frame: its operation (1 request, 2 reply) and target address.
    Arp {
        op: u16,
        target: Ipv4Addr,
    },
    Other,
}

/// One frame a tap saw: whether it left this end (PACKET_OUTGOING), the kernel's timestamp
/// (SO_TIMESTAMPNS: for a received frame the time veth queued it on the receiving side's
/// backlog, for a sent one the time it passed the taps), and when the tap read it.
#[derive(Debug, Clone, Copy)]
struct Tapped {
    outgoing: bool,
    kernel_ns: u64,
    read_ns: u64,
    seen: Seen,
}

/// A tap on one end of the veth that sees only the other host's frames and ARP (a classic
/// BPF filter in the kernel, so the flood neither fills its queue nor costs it a wake-up),
/// with the kernel's receive timestamps: where the other host's join spends its time.
fn tap(ns: String, iface: &'static str, stop: Arc<AtomicBool>, ready: mpsc::Sender<()>) -> Vec<Tapped> {
    use std::os::fd::AsRawFd;
    enter(&ns);
    let info = roce_net::raw::interface(iface).expect("interface");
    let fd = roce_net::raw::packet_socket(&info, false).expect("packet socket (root)");
    let fd = fd.as_raw_fd();
    let other = u32::from(OTHER_IP);
    // ARP (0x0806) ▶ keep; IPv4 (0x0800) from or to OTHER_IP ▶ keep; anything else ▶ drop.
    let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let mut prog = [
        op(0x28, 0, 0, 12),     // ldh [12]
        op(0x15, 5, 0, 0x0806), // jeq ARP ▶ keep
        op(0x15, 0, 5, 0x0800), // jeq IPv4, else drop
        op(0x20, 0, 0, 26),     // ld [26] (source address)
        op(0x15, 2, 0, other),  // jeq ▶ keep
        op(0x20, 0, 0, 30),     // ld [30] (destination address)
        op(0x15, 0, 1, other),  // jeq ▶ keep, else drop
        op(0x06, 0, 0, 0xffff), // keep
        op(0x06, 0, 0, 0),      // drop
    ];
    let fprog = libc::sock_fprog { len: prog.len() as u16, filter: prog.as_mut_ptr() };
    let tv = libc::timeval { tv_sec: 0, tv_usec: 50_000 };
    let on: libc::c_int = 1;
    for (name, value, len) in [
        (libc::SO_ATTACH_FILTER, (&fprog as *const libc::sock_fprog).cast(), std::mem::size_of_val(&fprog)),
        (libc::SO_TIMESTAMPNS, (&on as *const libc::c_int).cast(), std::mem::size_of_val(&on)),
        (libc::SO_RCVTIMEO, (&tv as *const libc::timeval).cast(), std::mem::size_of_val(&tv)),
    ] {
        // SAFETY: `value` points at a live value of `len` bytes.
        let r = unsafe { libc::setsockopt(fd, libc::SOL_SOCKET, name, value, len as libc::socklen_t) };
        assert_eq!(r, 0, "tap socket option {name}: {}", std::io::Error::last_os_error());
    }
    // Frames queued before the filter was attached are not ours to judge: drop them.
    let mut buf = vec![0u8; 4096];
    // SAFETY: non-blocking reads into our buffer.
    while unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) } > 0 {}
    ready.send(()).unwrap();
    let mut seen = Vec::new();
    let mut control = [0u64; 16];
    while !stop.load(Ordering::Relaxed) {
        // SAFETY: sockaddr_ll and msghdr are plain data.
        let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = (&mut from as *mut libc::sockaddr_ll).cast();
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control);
        // SAFETY: msg points at live buffers of the lengths given.
        let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
        let read_ns = realtime_ns();
        if n <= 0 {
            continue; // the 50 ms timeout: look at `stop` again
        }
        let mut kernel_ns = 0;
        // SAFETY: walking the control messages the kernel wrote into `control`.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                    kernel_ns = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        let f = &buf[..n as usize];
        let seen_now = if f.len() >= 42 && f[12..14] == [0x08, 0x06] {
            Seen::Arp { op: u16::from_be_bytes([f[20], f[21]]), target: Ipv4Addr::new(f[38], f[39], f[40], f[41]) }
        } else {
            match frame::parse(f).ok().and_then(|p| SaMad::parse(p.repr.payload).ok()) {
                Some(m) => Seen::Mad { tid: m.header.transaction_id, response: m.header.response },
                None => Seen::Other,
            }
        };
        seen.push(Tapped { outgoing: from.sll_pkttype == libc::PACKET_OUTGOING, kernel_ns, read_ns, seen: seen_now });
    }
    seen
}

/// How long the other host waits for an answer before it sends its request again (same TID,
/// as a MAD layer retries; the SA answers a repeat from its duplicate cache), and how often.
const RETRY_AFTER: Duration = Duration::from_millis(250);
const TRIES: u32 = 20;

/// One answered request of the other host: its status, the round trip from the first send, and
/// how many sends it took.
#[derive(Debug, Clone, Copy)]
struct Answered {
    status: MadStatus,
    rtt: Duration,
    tries: u32,
    /// Its TID, and the realtime clock at the first send and at the answer's reading.
    tid: u64,
    sent_ns: u64,
    answered_ns: u64,
}

/// The other host, which joins group 0 and leaves it.
struct OtherHost {
    sock: RawSocket,
    answers: mpsc::Receiver<(u64, MadStatus, Instant, u64)>,
    tid: u64,
    frame: Vec<u8>,
}

impl OtherHost {
    /// One request and its answer (None: none after `TRIES` sends).
    fn transact(&mut self, method: Method, mask: ComponentMask, rec: McMemberRecord) -> Option<Answered> {
        self.tid += 1;
        let tid = PROBE_TAG | self.tid;
        let mad = SaMad::request(method, tid, attr::MC_MEMBER_RECORD, mask.0, SaData::mc_member(rec));
        let (t0, sent_ns) = (Instant::now(), realtime_ns());
        for tries in 1..=TRIES {
            frame_of(OTHER_IP, &mad, (self.tid as u32) << 5 | tries, &mut self.frame);
            self.sock.send(&self.frame).expect("send");
            let end = Instant::now() + RETRY_AFTER;
            while let Some(left) = end.checked_duration_since(Instant::now()) {
                let Ok((got, status, at, answered_ns)) = self.answers.recv_timeout(left) else { break };
                if got == tid {
                    return Some(Answered { status, rtt: at - t0, tries, tid, sent_ns, answered_ns });
                }
            }
        }
        None
    }

    /// A join and a leave of group 0.
    fn join_leave(&mut self) -> [Answered; 2] {
        let port = Gid::from_ipv4(OTHER_IP);
        let join = self.transact(Method::Set, ComponentMask::KERNEL_JOIN, join_record(port, group(0)));
        let join = join.expect("the other host's join answered");
        let leave = McMemberRecord::leave(group(0), port, JoinState::FULL_MEMBER);
        let leave = self.transact(Method::Delete, ComponentMask::KERNEL_LEAVE, leave);
        let leave = leave.expect("the other host's leave answered");
        assert_eq!(
            (join.status, leave.status),
            (MadStatus::SUCCESS, MadStatus::SUCCESS),
            "the other host's join and leave"
        );
        [join, leave]
    }

    /// `PROBES` join/leave pairs.
    fn probes(&mut self) -> Vec<[Answered; 2]> {
        (0..PROBES).map(|_| self.join_leave()).collect()
    }
}

/// The median of some round trips (zero if none).
fn median(mut rtts: Vec<Duration>) -> Duration {
    rtts.sort();
    rtts.get(rtts.len() / 2).copied().unwrap_or_default()
}

/// The round trip of `a` on the wire, by v1's tap: from the kernel's stamp of the request
/// leaving v1 to its stamp of the answer arriving there (what the bench's reader thread adds,
/// scheduling on a loaded machine included, left out).
fn wire_rtt(a: &Answered, v1: &[Tapped]) -> Option<Duration> {
    let stamp = |outgoing: bool| {
        v1.iter()
            .find(|t| {
                t.outgoing == outgoing
                    && matches!(t.seen, Seen::Mad { tid, response } if tid == a.tid && response != outgoing)
            })
            .map(|t| t.kernel_ns)
    };
    Some(Duration::from_nanos(stamp(false)?.checked_sub(stamp(true)?)?))
}

/// What roce-sa's `memory_usage` gives for a responder with the caps of `cfg` after the first
/// `n` flood joins, and its member count.
fn sa_state(cfg: SaConfig, n: u32) -> (MemoryUsage, usize) {
    let mut sa = SaResponder::new(cfg).expect("config");
    let from = Requester::new(Gid::from_ipv4(FLOOD_IP), 1);
    for i in 1..=n {
        sa.handle_mad(from, &flood_mad(i).to_bytes());
    }
    (sa.memory_usage(), sa.member_count())
}

/// Where the request `a` spent its time, from the taps on both ends: µs after the client's
/// send at which the request left v1 (kernel stamp), was queued on v2's side (kernel stamp),
/// was read by v2's tap; the answer left v2 (the sa-server's send), was queued on v1's side,
/// was read by v1's tap and by the bench's reader; and any ARP frame in between.
fn steps(a: &Answered, v1: &[Tapped], v2: &[Tapped]) -> String {
    let find = |taps: &[Tapped], outgoing: bool, response: bool| {
        taps.iter()
            .find(|t| {
                t.outgoing == outgoing
                    && matches!(t.seen, Seen::Mad { tid, response: r } if tid == a.tid && r == response)
            })
            .copied()
    };
    let us = |ns: u64| (ns as f64 - a.sent_ns as f64) / 1e3;
    let at = |t: Option<Tapped>, kernel: bool| {
        t.map_or("-".to_string(), |t| format!("{:.0}", us(if kernel { t.kernel_ns } else { t.read_ns })))
    };
    let (req_out, req_in) = (find(v1, true, false), find(v2, false, false));
    let (resp_out, resp_in) = (find(v2, true, true), find(v1, false, true));
    let arp: Vec<String> = v1
        .iter()
        .map(|t| ("v1", t))
        .chain(v2.iter().map(|t| ("v2", t)))
        .filter(|(_, t)| t.kernel_ns + 1_000_000 >= a.sent_ns && t.kernel_ns <= a.answered_ns)
        .filter_map(|(end, t)| match t.seen {
            Seen::Arp { op, target } => Some(format!("{end} ARP op {op} for {target} at {:.0}", us(t.kernel_ns))),
            _ => None,
        })
        .collect();
    format!(
        "request on v1 {} / at v2 {} (its tap read it {}), answer sent by sa-server {} / at v1 {} (its tap read it {}), the bench read it {:.0} µs after the send; ARP: {}",
        at(req_out, true),
        at(req_in, true),
        at(req_in, false),
        at(resp_out, true),
        at(resp_in, true),
        at(resp_in, false),
        us(a.answered_ns),
        if arp.is_empty() { "none".to_string() } else { arp.join(", ") }
    )
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn main() {
    // `cargo bench` passes --bench: the full figures. `cargo test --benches` does not: one
    // short run of the same code (as root), so that the bench cannot rot.
    let full = std::env::args().any(|a| a == "--bench");
    let (n, per_port): (u32, usize) =
        if full { (1_000_000, roce_sa::DEFAULT_MAX_MEMBERS_PER_PORT) } else { (20_000, 2000) };
    if !full {
        println!("sa_flood in test mode ({n} joins, --max-members-per-port {per_port}; figures not meaningful: `cargo bench` measures)");
    }
    let nets =
        Nets::pair("saf", Some(("02:00:00:00:1a:01", "02:00:00:00:1a:02")), FLOOD_IP, Ipv4Addr::new(198, 18, 26, 12));
    veth::sh(&format!("ip -n {} addr add {OTHER_IP}/24 dev v1", nets.0));

    let (mut sa, sa_lines, up) = start_sa_server(&nets.1, SA_IP, &["--max-members-per-port", &per_port.to_string()]);
    up.recv_timeout(Duration::from_secs(10)).expect("sa-server up");
    let pid = sa.pid();
    {
        // A failure shows what the sa-server printed.
        let lines = sa_lines.clone();
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Ok(l) = lines.try_lock() {
                eprintln!("sa-server's lines so far: {:#?}", *l);
            }
            hook(info);
        }));
    }

    let stop = Arc::new(AtomicBool::new(false));
    let answers = Arc::new(Mutex::new(Answers::default()));
    let (probe_tx, probe_rx) = mpsc::channel();
    let (ready_tx, ready_rx) = mpsc::channel();
    let reader = {
        let (ns, stop, answers) = (nets.0.clone(), stop.clone(), answers.clone());
        std::thread::spawn(move || reader(ns, stop, ready_tx, probe_tx, answers))
    };
    ready_rx.recv().unwrap();
    let taps = [(nets.0.clone(), "v1"), (nets.1.clone(), "v2")].map(|(ns, iface)| {
        let (stop, (ready_tx, ready_rx)) = (stop.clone(), mpsc::channel());
        let t = std::thread::spawn(move || tap(ns, iface, stop, ready_tx));
        ready_rx.recv().unwrap();
        t
    });
    enter(&nets.0);
    let other = RawSocket::open("v1").expect("raw socket");
    let mut other = OtherHost { sock: other, answers: probe_rx, tid: 0, frame: Vec::new() };

    // Before: the other host alone (its first join also resolves the SA's ARP for v1).
    other.join_leave();
    let probes_before = other.probes();
    let (rss_before, _) = rss_kib(pid);

    // The flood: one requesting address, a new PortGID each, as fast as the socket takes them.
    let mut tx =
        RawSocket::open_with("v1", RingConfig { qdisc_bypass: true, ..RingConfig::tx_only() }).expect("tx ring");
    const BATCH: usize = 64;
    let mut frames = vec![Vec::new(); BATCH];
    let (t0, cpu0) = (Instant::now(), thread_cpu());
    let mut i = 1u32;
    while i <= n {
        let k = (n - i + 1).min(BATCH as u32) as usize;
        for (j, f) in frames.iter_mut().take(k).enumerate() {
            let tid = i + j as u32;
            frame_of(FLOOD_IP, &flood_mad(tid), tid, f);
        }
        let refs: Vec<&[u8]> = frames[..k].iter().map(|f| f.as_slice()).collect();
        let mut sent = 0;
        while sent < k {
            sent += tx.send_batch(&refs[sent..]).expect("send_batch");
        }
        i += k as u32;
    }
    let flood_secs = t0.elapsed().as_secs_f64();
    let flood_cpu = (thread_cpu() - cpu0).as_secs_f64();

    // Right after: the other host's join and leave, then the usual median.
    let [join_first, leave_first] = other.join_leave();
    let probes_after = other.probes();

    // Wait until the flood's answers stop coming.
    let mut last = u64::MAX;
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let a = answers.lock().unwrap();
        let now = a.success + a.no_resources + a.other;
        if now == last {
            break;
        }
        last = now;
    }
    let (rss_end, hwm) = rss_kib(pid);
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    let [v1, v2] = taps.map(|t| t.join().unwrap());
    let status = sa.stop().expect("sa-server exit");
    std::thread::sleep(Duration::from_millis(100)); // the pipes' last lines

    let a = answers.lock().unwrap();
    let answered = a.success + a.no_resources + a.other;
    // The caps' budget: the per-port cap's members and the duplicate cache as the same n joins
    // leave it (it keeps an answer for every request up to its 65,536 entries, refusals
    // included, so only the whole flood fills it as the server saw it); and, for comparison,
    // the same flood without caps.
    let capped = SaConfig { max_members_per_port: per_port, ..SaConfig::roce() };
    let (usage, members) = sa_state(capped, n);
    let sa_state_bytes = usage.total();
    let n_us = n as usize;
    let uncapped =
        SaConfig { max_members: n_us, max_members_per_group: n_us, max_members_per_port: n_us, ..SaConfig::roce() };
    let (no_caps, no_caps_members) = sa_state(uncapped, n);
    let tx_ring = RingConfig::default().tx_frames as u64 * 2; // KiB: 2 KiB slots at MTU 1500
    let budget = rss_before + sa_state_bytes as u64 / 1024 + tx_ring;
    // The margin: allocator overhead on the SA's state (+50 %) and 1 MiB for the rest.
    let allowed = rss_before + sa_state_bytes as u64 * 3 / 2 / 1024 + tx_ring + 1024;

    println!(
        "sa_flood: {n} spoofed proxy joins from {FLOOD_IP} over {GROUPS} groups, --max-members-per-port {per_port}"
    );
    println!(
        "  sent in {flood_secs:.2} s: {:.0} frames/s (sender CPU {:.2} µs/frame: MAD, frame and ICRC built, TX ring)",
        f64::from(n) / flood_secs,
        flood_cpu * 1e6 / f64::from(n)
    );
    println!(
        "  answered {answered} of {n} ({:.1} %): {} SUCCESS, {} NO_RESOURCES, {} other; {} unanswered (lost at full rate)",
        answered as f64 * 100.0 / f64::from(n),
        a.success,
        a.no_resources,
        a.other,
        u64::from(n) - answered
    );
    println!(
        "  sa-server VmRSS before {:.2} MiB, at the end {:.2} MiB (+{:.2}), peak VmHWM {:.2} MiB",
        mib(rss_before),
        mib(rss_end),
        mib(rss_end.saturating_sub(rss_before)),
        mib(hwm)
    );
    println!(
        "  budget {:.2} MiB = RSS before + roce-sa memory_usage for {members} members {:.2} MiB (member vectors {:.1} B/member, group table {:.1} KiB, MLID pool {:.1} KiB, duplicate cache {:.1} KiB) + TX ring {:.2} MiB; asserted ≤ {:.2} MiB (+50 % on the SA state, +1 MiB)",
        mib(budget),
        sa_state_bytes as f64 / 1048576.0,
        usage.members as f64 / members as f64,
        usage.group_table as f64 / 1024.0,
        usage.mlid_pool as f64 / 1024.0,
        usage.dup_cache as f64 / 1024.0,
        mib(tx_ring),
        mib(allowed)
    );
    println!(
        "  the same {n} joins without caps (in process): {no_caps_members} members, roce-sa memory_usage {:.2} MiB",
        no_caps.total() as f64 / 1048576.0
    );
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    // The other host's round trips seen two ways: as the bench's reader thread read the
    // answers (its scheduling on a loaded machine included), and on the wire.
    let read = |a: &Answered| Some(a.rtt);
    let wire = |a: &Answered| wire_rtt(a, &v1);
    type Rtt<'a> = &'a dyn Fn(&Answered) -> Option<Duration>;
    let views: [(&str, Rtt); 2] = [
        ("as the bench read the answers", &read),
        ("on the wire (v1's kernel stamps, request out to answer in)", &wire),
    ];
    for (view, rtt) in views {
        let med = |p: &[[Answered; 2]], i: usize| us(median(p.iter().filter_map(|x| rtt(&x[i])).collect()));
        let (join_before, leave_before) = (med(&probes_before, 0), med(&probes_before, 1));
        let (join_after, leave_after) = (med(&probes_after, 0), med(&probes_after, 1));
        let first = |a: &Answered| rtt(a).map_or(f64::NAN, us);
        println!(
            "  other host ({OTHER_IP}) join / leave round trip {view}: before the flood (median of {PROBES}) {join_before:.0} / {leave_before:.0} µs; right after {:.0} / {:.0} µs (ratio {:.1} / {:.1}); median of {PROBES} after {join_after:.0} / {leave_after:.0} µs (ratio {:.2} / {:.2})",
            first(&join_first),
            first(&leave_first),
            first(&join_first) / join_before,
            first(&leave_first) / leave_before,
            join_after / join_before,
            leave_after / leave_before,
        );
    }
    println!(
        "  the first join / leave after the flood was sent {} / {} times (again after {} ms unanswered)",
        join_first.tries,
        leave_first.tries,
        RETRY_AFTER.as_millis()
    );
    for (what, a) in [("join", join_first), ("leave", leave_first)] {
        println!("  the other host's first {what} after the flood, step by step: {}", steps(&a, &v1, &v2));
    }
    println!("  sa-server stopped with SIGTERM ({status}); its final lines:");
    let lines = sa_lines.lock().unwrap();
    let last = lines.iter().rposition(|l| l.contains(" requests, ")).map_or(0, |i| i + 1);
    for l in &lines[last.saturating_sub(1)..] {
        println!("    {l}");
    }

    assert!(a.no_resources > 0, "joins past the cap answered NO_RESOURCES");
    assert!(
        lines.iter().any(|l| l.contains("refused with NO_RESOURCES past a member cap")),
        "sa-server counted the refusals"
    );
    assert!(rss_end.max(hwm) <= allowed, "RSS {rss_end} KiB, peak {hwm} KiB within {allowed} KiB");
}
