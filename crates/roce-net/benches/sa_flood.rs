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
//! joins and `--max-members-per-port 5000`, so that the cap is hit there too.
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
    probes: mpsc::Sender<(u64, MadStatus, Instant)>,
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
            let at = Instant::now();
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
                let _ = probes.send((tid, m.header.status, at));
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
}

/// The other host, which joins group 0 and leaves it.
struct OtherHost {
    sock: RawSocket,
    answers: mpsc::Receiver<(u64, MadStatus, Instant)>,
    tid: u64,
    frame: Vec<u8>,
}

impl OtherHost {
    /// One request and its answer (None: none after `TRIES` sends).
    fn transact(&mut self, method: Method, mask: ComponentMask, rec: McMemberRecord) -> Option<Answered> {
        self.tid += 1;
        let tid = PROBE_TAG | self.tid;
        let mad = SaMad::request(method, tid, attr::MC_MEMBER_RECORD, mask.0, SaData::mc_member(rec));
        let t0 = Instant::now();
        for tries in 1..=TRIES {
            frame_of(OTHER_IP, &mad, (self.tid as u32) << 5 | tries, &mut self.frame);
            self.sock.send(&self.frame).expect("send");
            let end = Instant::now() + RETRY_AFTER;
            while let Some(left) = end.checked_duration_since(Instant::now()) {
                let Ok((got, status, at)) = self.answers.recv_timeout(left) else { break };
                if got == tid {
                    return Some(Answered { status, rtt: at - t0, tries });
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

    /// `PROBES` join/leave pairs: the median round trips.
    fn median_join_leave(&mut self) -> (Duration, Duration) {
        let (mut joins, mut leaves) = (Vec::new(), Vec::new());
        for _ in 0..PROBES {
            let [j, l] = self.join_leave();
            joins.push(j.rtt);
            leaves.push(l.rtt);
        }
        joins.sort();
        leaves.sort();
        (joins[PROBES / 2], leaves[PROBES / 2])
    }
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

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn main() {
    // `cargo bench` passes --bench: the full figures. `cargo test --benches` does not: one
    // short run of the same code (as root), so that the bench cannot rot.
    let full = std::env::args().any(|a| a == "--bench");
    let (n, per_port): (u32, usize) =
        if full { (1_000_000, roce_sa::DEFAULT_MAX_MEMBERS_PER_PORT) } else { (20_000, 5000) };
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
    enter(&nets.0);
    let other = RawSocket::open("v1").expect("raw socket");
    let mut other = OtherHost { sock: other, answers: probe_rx, tid: 0, frame: Vec::new() };

    // Before: the other host alone (its first join also resolves the SA's ARP for v1).
    other.join_leave();
    let (join_before, leave_before) = other.median_join_leave();
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
    let (join_after, leave_after) = (join_first.rtt, leave_first.rtt);
    let (join_med_after, leave_med_after) = other.median_join_leave();

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
    println!(
        "  other host ({OTHER_IP}) join / leave round trip: before the flood (median of {PROBES}) {:.0} / {:.0} µs; right after {:.0} / {:.0} µs (ratio {:.1} / {:.1}; sent {} / {} times, again after {} ms unanswered); median of {PROBES} after {:.0} / {:.0} µs (ratio {:.2} / {:.2})",
        us(join_before),
        us(leave_before),
        us(join_after),
        us(leave_after),
        us(join_after) / us(join_before),
        us(leave_after) / us(leave_before),
        join_first.tries,
        leave_first.tries,
        RETRY_AFTER.as_millis(),
        us(join_med_after),
        us(leave_med_after),
        us(join_med_after) / us(join_before),
        us(leave_med_after) / us(leave_before),
    );
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
