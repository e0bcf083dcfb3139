//! The network commands of the `roce` tool (`mckey`, `sa-query`, `sa-server`): a stack on a
//! raw socket, driven in real time. `main.rs` only parses arguments and calls these.

use std::fmt::Write as _;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant as WallInstant};

use roce_cm::event::EventParam;
use roce_cm::{Counters, EventKind, MulticastPaths, PortSpace, QpType, Stack, StackConfig, UdDest};
use roce_net::device::Device;
use roce_net::driver::{Direction, Driver, MulticastFilter};
use roce_net::raw::RawSocket;
use roce_net::PcapDevice;
use roce_wire::mad::{MadStatus, Method};
use roce_wire::mcmember::{ComponentMask, JoinState, McMemberRecord};
use roce_wire::sa::{attr, SaData, SaMad};
use roce_wire::Gid;

/// A raw socket, captured to a pcap or not.
pub enum CliDevice {
    /// Plain.
    Raw(RawSocket),
    /// Every frame also written to a pcap file.
    Pcap(PcapDevice<RawSocket>),
}

impl Device for CliDevice {
    fn send(&mut self, f: &[u8]) -> io::Result<()> {
        match self {
            CliDevice::Raw(d) => d.send(f),
            CliDevice::Pcap(d) => d.send(f),
        }
    }
    fn recv(&mut self, b: &mut [u8]) -> io::Result<Option<usize>> {
        match self {
            CliDevice::Raw(d) => d.recv(b),
            CliDevice::Pcap(d) => d.recv(b),
        }
    }
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        match self {
            CliDevice::Raw(d) => d.raw_fd(),
            CliDevice::Pcap(d) => d.raw_fd(),
        }
    }
}

impl MulticastFilter for CliDevice {
    fn set_multicast(&mut self, m: &std::collections::BTreeSet<[u8; 6]>) -> io::Result<()> {
        match self {
            CliDevice::Raw(d) => d.set_multicast(m),
            CliDevice::Pcap(d) => MulticastFilter::set_multicast(d, m),
        }
    }
}

/// Where a stack runs and how.
#[derive(Debug, Clone)]
pub struct PortOptions {
    /// Interface.
    pub iface: String,
    /// The stack's own address (beside the kernel's on the same link).
    pub local: IpAddr,
    /// Prefix length (default: the interface's for that subnet, else 24 / 64).
    pub prefix: Option<u8>,
    /// The SA's address.
    pub sa: Option<IpAddr>,
    /// Capture to this pcap.
    pub pcap: Option<PathBuf>,
    /// Print every frame.
    pub verbose: bool,
    /// Multicast paths.
    pub paths: MulticastPaths,
}

fn in_prefix(a: IpAddr, b: IpAddr, p: u8) -> bool {
    match (a, b) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let m = if p == 0 { 0 } else { u32::MAX << (32 - u32::from(p.min(32))) };
            u32::from(a) & m == u32::from(b) & m
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            let m = if p == 0 { 0 } else { u128::MAX << (128 - u32::from(p.min(128))) };
            u128::from(a) & m == u128::from(b) & m
        }
        _ => false,
    }
}

/// Open the interface and build a driven stack; errors are the user-facing messages.
pub fn open_port(o: &PortOptions) -> Result<Driver<CliDevice>, String> {
    let raw = RawSocket::open(&o.iface).map_err(|e| e.to_string())?;
    let info = raw.info.clone();
    let mac = info.mac.ok_or_else(|| format!("{} has no MAC address (not an Ethernet interface?)", o.iface))?;
    // The address must sit in one of the interface's subnets (when it has any of that family).
    let same_family: Vec<(IpAddr, u8)> = info
        .ips
        .iter()
        .copied()
        .filter(|(a, _)| a.is_ipv4() == o.local.is_ipv4())
        .filter(|(a, _)| !matches!(a, IpAddr::V6(v) if (v.segments()[0] & 0xffc0) == 0xfe80))
        .collect();
    let prefix = match o.prefix {
        Some(p) => p,
        None => match same_family.iter().find(|(a, p)| in_prefix(*a, o.local, *p)) {
            Some((_, p)) => *p,
            None if same_family.is_empty() => {
                if o.local.is_ipv4() {
                    24
                } else {
                    64
                }
            }
            None => {
                let nets: Vec<String> = same_family.iter().map(|(a, p)| format!("{a}/{p}")).collect();
                return Err(format!(
                    "{} is outside {}'s subnets ({}); pick an address in one of them or pass --prefix",
                    o.local,
                    o.iface,
                    nets.join(", ")
                ));
            }
        },
    };
    if same_family.iter().any(|(a, _)| *a == o.local) {
        eprintln!("note: {} is also the kernel's address on {}: both will answer ARP, and the kernel may send ICMP port-unreachable for RoCEv2 frames", o.local, o.iface);
    }
    let mut cfg = match o.local {
        IpAddr::V4(a) => StackConfig::new(mac, a, prefix),
        IpAddr::V6(a) => {
            let mut c = StackConfig::new(mac, std::net::Ipv4Addr::UNSPECIFIED, 32);
            c.ipv4 = None;
            c.ipv6.push((a, prefix));
            c
        }
    };
    cfg.sa = o.sa;
    cfg.multicast_paths = o.paths;
    cfg.seed = seed();
    let dev = match &o.pcap {
        Some(p) => CliDevice::Pcap(PcapDevice::create(raw, p).map_err(|e| format!("{}: {e}", p.display()))?),
        None => CliDevice::Raw(raw),
    };
    let mut d = Driver::new(dev, Stack::new(cfg));
    if o.verbose {
        d.set_tap(Box::new(|dir, now, f| {
            let s = crate::decode::decode_ethernet(f).summary;
            println!("{:>10.6} {} {s}", now.since_epoch().as_secs_f64(), if dir == Direction::Tx { ">" } else { "<" });
        }));
    }
    Ok(d)
}

fn seed() -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    (t.as_nanos() as u64) ^ (u64::from(std::process::id()) << 32)
}

/// Print the drop counters (all of them with `verbose`, else the non-zero ones).
pub fn print_counters(c: &Counters, verbose: bool) {
    let mut s = format!(
        "counters: rx {} accepted {} tx {} dropped {}",
        c.rx_frames,
        c.rx_accepted,
        c.tx_frames,
        c.total_dropped()
    );
    for (r, n) in &c.dropped {
        if *n > 0 || verbose {
            let _ = write!(s, "\n  dropped {r}: {n}");
        }
    }
    println!("{s}");
}

fn sa_timeout_text(d: &Driver<CliDevice>) -> String {
    let t = d.stack.config().sa_timing;
    format!(
        "no answer: timed out after {} transmissions over {:.1} s (retry interval {:.1} s)",
        t.max_sends(),
        t.timeout.as_secs_f64(),
        t.retry_interval().as_secs_f64()
    )
}

/// `roce mckey` options.
#[derive(Debug, Clone)]
pub struct MckeyOptions {
    /// Port.
    pub port: PortOptions,
    /// Group.
    pub group: IpAddr,
    /// Send (else receive).
    pub sender: bool,
    /// Messages.
    pub count: u32,
    /// Message size.
    pub size: usize,
    /// Join state.
    pub join_state: JoinState,
    /// Seconds to wait before leaving (after sending; receivers: the receive window).
    pub leave_after: Duration,
    /// No SA path (IGMP/MLD only).
    pub no_sa: bool,
}

/// `roce mckey`: join, send or receive, leave. Returns the exit code.
pub fn mckey(o: &MckeyOptions) -> i32 {
    let mut d = match open_port(&o.port) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("roce mckey: {e}");
            return 2;
        }
    };
    let s = &mut d.stack;
    let id = s.create_id(PortSpace::Udp, QpType::Ud).expect("UDP id");
    if let Err(e) = s.bind_addr(id, SocketAddr::new(o.port.local, 0)) {
        eprintln!("roce mckey: bind {}: {e}", o.port.local);
        return 2;
    }
    let qpn = s.create_qp_for_id(id).expect("UD QP");
    println!(
        "mckey: joining {} as {} on {} from {} (QP 0x{qpn:06x})",
        o.group, o.join_state, o.port.iface, o.port.local
    );
    let ev = match d.join(id, o.group, o.join_state, Duration::from_secs(10)) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("roce mckey: {e}");
            return 2;
        }
    };
    let mut ok_join = false;
    let mut ud = None;
    match ev {
        Some(e) if e.kind == EventKind::MulticastJoin => {
            if let EventParam::Multicast { record, ud: u, .. } = &e.param {
                ud = *u;
                println!(
                    "event: MULTICAST_JOIN status 0 MLID 0x{:04x} qp_num 0x{:06x} qkey 0x{:08x}",
                    record.map_or(0, |r| r.mlid),
                    u.map_or(0, |u| u.qp_num),
                    u.map_or(0, |u| u.qkey)
                );
            }
            ok_join = true;
        }
        Some(e) => {
            let sa = match &e.param {
                EventParam::Multicast { sa_status: Some(st), .. } => format!(" SA status {}", MadStatus(*st)),
                _ => String::new(),
            };
            println!("event: MULTICAST_ERROR status {}{sa}", e.status);
            if e.status == -110 {
                println!("join: {}", sa_timeout_text(&d));
            }
        }
        None => println!("join: no event within 10 s"),
    }
    let (mut sent, mut received) = (0u32, 0u32);
    let t0 = WallInstant::now();
    if ok_join && o.sender {
        if let Some(u) = ud {
            let dest = UdDest { ah: u.ah, remote_qpn: u.qp_num, remote_qkey: u.qkey };
            let mut payload = vec![0u8; o.size];
            for i in 0..o.count {
                payload.iter_mut().enumerate().for_each(|(j, b)| *b = (i as usize + j) as u8);
                let _ = d.stack.post_send(qpn, &dest, &payload, None);
                sent += 1;
                let _ = d.run_for(Duration::from_millis(1));
                if o.count >= 1000 && (i + 1) % 1000 == 0 {
                    println!("progress: sent {}/{}", i + 1, o.count);
                }
            }
        }
        let _ = d.run_for(o.leave_after);
    } else if ok_join {
        let deadline = WallInstant::now() + o.leave_after.max(Duration::from_millis(1));
        let mut last = 0;
        while WallInstant::now() < deadline && received < o.count {
            let _ = d.turn(Duration::from_millis(50));
            while d.stack.poll_recv(qpn).is_some() {
                received += 1;
            }
            if o.count >= 1000 && received / 1000 > last {
                last = received / 1000;
                println!("progress: received {received}/{}", o.count);
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64().max(1e-9);
    // Leave: SA Delete (and the IGMP/MLD leave); never blocks past its retries.
    let mut ok_leave = false;
    if ok_join {
        println!("mckey: leaving {}", o.group);
        match d.leave(id, o.group, Duration::from_secs(20)) {
            Ok(Some(e)) if e.kind == EventKind::MulticastLeft => {
                println!("event: MULTICAST_LEFT status 0");
                ok_leave = true;
            }
            Ok(Some(e)) => {
                println!("event: MULTICAST_ERROR status {} (leave)", e.status);
                if e.status == -110 {
                    println!("leave: {}", sa_timeout_text(&d));
                }
                ok_leave = o.no_sa;
            }
            Ok(None) => println!("leave: no event within 20 s"),
            Err(e) => eprintln!("roce mckey: {e}"),
        }
        let _ = d.run_for(Duration::from_millis(50));
    }
    let lost = if o.sender { 0 } else { o.count.saturating_sub(received) };
    let n = if o.sender { sent } else { received };
    println!(
        "summary: sent {sent} received {received} lost {lost} in {secs:.3} s ({:.0} msg/s, {:.2} Mbit/s)",
        f64::from(n) / secs,
        f64::from(n) * o.size as f64 * 8.0 / secs / 1e6
    );
    print_counters(d.stack.counters(), o.port.verbose);
    if ok_join && ok_leave {
        0
    } else {
        1
    }
}

fn print_member(r: &McMemberRecord) {
    println!("MCMemberRecord member dump:");
    println!("\t\tMGID....................{}", r.mgid);
    println!("\t\tPortGid.................{}", r.port_gid);
    println!("\t\tqkey....................0x{:X}", r.q_key);
    println!("\t\tmlid....................0x{:X}", r.mlid);
    println!("\t\tmtu.....................0x{:X}", (u8::from(r.mtu_selector) << 6) | r.mtu);
    println!("\t\tTClass..................0x{:X}", r.traffic_class);
    println!("\t\tpkey....................0x{:X}", r.p_key);
    println!("\t\trate....................0x{:X}", (u8::from(r.rate_selector) << 6) | r.rate);
    println!("\t\tpkt_life................0x{:X}", (u8::from(r.packet_life_time_selector) << 6) | r.packet_life_time);
    println!("\t\tSL......................0x{:X}", r.sl);
    println!("\t\tFlowLabel...............0x{:X}", r.flow_label);
    println!("\t\tHopLimit................0x{:X}", r.hop_limit);
    println!("\t\tScope...................0x{:X}", r.scope);
    println!("\t\tJoinState...............0x{:X} {}", r.join_state.0, r.join_state);
    println!("\t\tProxyJoin...............0x{:X}", u8::from(r.proxy_join));
}

/// `roce sa-query`: SA Get (with an MGID) or GetTable of MCMemberRecords. Returns the exit
/// code: 0 on a success status, 1 on an error status or no answer.
pub fn sa_query(port: &PortOptions, mgid: Option<Gid>) -> i32 {
    let mut d = match open_port(port) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("roce sa-query: {e}");
            return 2;
        }
    };
    let Some(sa) = port.sa else {
        eprintln!("roce sa-query: --sa ADDR is required");
        return 2;
    };
    let rec = McMemberRecord { mgid: mgid.unwrap_or_default(), ..McMemberRecord::default() };
    let (method, mask) = match mgid {
        Some(_) => (Method::Get, ComponentMask::MGID.0),
        None => (Method::GetTable, 0),
    };
    let req = SaMad::request(method, 0, attr::MC_MEMBER_RECORD, mask, SaData::mc_member(rec));
    let now = d.now();
    let handle = match d.stack.sa_query(now, req) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("roce sa-query: {e}");
            return 2;
        }
    };
    println!(
        "sa-query: {} MCMemberRecord to {sa} QP1 from {} on {}",
        if mgid.is_some() { "SubnAdmGet" } else { "SubnAdmGetTable" },
        port.local,
        port.iface
    );
    let mut result = None;
    let _ = d.run_until(Duration::from_secs(10), |d| {
        result = d.stack.poll_sa_result().filter(|r| r.handle == handle);
        result.is_some()
    });
    let code = match result.map(|r| r.result) {
        Some(Ok(resp)) => {
            let st = resp.header.status;
            println!("answer: {} status {} TID 0x{:016x}", resp.header.method_name(), st, resp.header.transaction_id);
            if st.0 != 0 {
                println!("error: the SA answered status {st}");
                1
            } else {
                print_records(&resp);
                0
            }
        }
        Some(Err(e)) => {
            println!("error: {e}: {}", sa_timeout_text(&d));
            1
        }
        None => {
            println!("error: no answer within 10 s");
            1
        }
    };
    print_counters(d.stack.counters(), port.verbose);
    code
}

/// `roce sa-server`: an SA on a raw socket, answering on QP1 of `port.local` (with its own ARP/ND),
/// for `duration` (forever if `None`).
pub fn sa_server(port: &PortOptions, duration: Option<Duration>) -> i32 {
    let mut d = match open_port(port) {
        Ok(d) => d.with_sa(roce_sa::SaResponder::new(roce_sa::SaConfig::default())),
        Err(e) => {
            eprintln!("roce sa-server: {e}");
            return 2;
        }
    };
    println!("sa-server: answering SA requests on {} QP1 ({})", port.local, port.iface);
    let end = duration.map(|d| WallInstant::now() + d);
    let mut last = 0;
    loop {
        if end.is_some_and(|e| WallInstant::now() >= e) {
            break;
        }
        if d.turn(Duration::from_millis(200)).is_err() {
            break;
        }
        let n = d.sa.as_ref().map_or(0, |s| s.stats().received);
        if n != last {
            let sa = d.sa.as_ref().unwrap();
            println!("sa-server: {} requests, {} groups, {} members", n, sa.group_count(), sa.member_count());
            last = n;
        }
    }
    print_counters(d.stack.counters(), port.verbose);
    0
}

// ------------------------------------------------------------------------------------------
// The same commands against OpenSM through ibsim (no RoCE framing: the MAD bytes are the same)

/// A stack whose SA transactions go to OpenSM through an ibsim client.
pub struct IbsimPort {
    /// The sim client.
    pub client: roce_net::ibsim::IbsimClient,
    /// The engine (SA transport External, IB-style MGIDs, PortGID = the sim port's GID).
    pub stack: Stack,
    /// Our TIDs by their low 48 bits: the sim puts its client number in the top 16 bits.
    tids: std::collections::HashMap<u64, u64>,
    epoch: WallInstant,
}

impl IbsimPort {
    /// Attach to the simulated HCA `node` (default: the sim's default port).
    pub fn connect(node: Option<&str>) -> Result<IbsimPort, String> {
        let mut opts = match node {
            Some(n) => roce_net::ibsim::IbsimOptions::node(n),
            None => roce_net::ibsim::IbsimOptions::default(),
        };
        opts.wait_active = Some(Duration::from_secs(20));
        let client = roce_net::ibsim::IbsimClient::connect(&opts).map_err(|e| e.to_string())?;
        // An IPoIB-style address for the RDMA-CM id (the SA path does not use it on the wire).
        let lid = client.port_lid();
        let ip = std::net::Ipv4Addr::new(198, 19, (lid >> 8) as u8, lid as u8);
        let mut cfg = StackConfig::new([0x02, 0, 0, 0, (lid >> 8) as u8, lid as u8], ip, 15);
        cfg.multicast_paths = MulticastPaths::SA_ONLY;
        cfg.sa_transport = roce_cm::SaTransport::External;
        cfg.mgid_style = roce_cm::MgidStyle::InfiniBand { pkey: 0xffff };
        cfg.port_gid = Some(client.port_gid());
        cfg.seed = seed();
        Ok(IbsimPort { client, stack: Stack::new(cfg), tids: Default::default(), epoch: WallInstant::now() })
    }

    fn now(&self) -> roce_cm::Instant {
        roce_cm::Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    /// Move MADs both ways until `done` holds or `timeout` passes.
    pub fn run_until(&mut self, timeout: Duration, mut done: impl FnMut(&mut Self) -> bool) -> io::Result<bool> {
        let end = WallInstant::now() + timeout;
        loop {
            let now = self.now();
            while let Some(mad) = self.stack.poll_sa_mad(now) {
                let tid = u64::from_be_bytes(mad[8..16].try_into().expect("8 bytes"));
                self.tids.insert(tid & 0xffff_ffff_ffff, tid);
                self.client.send_mad(self.client.sm_lid(), 1, &mad)?;
            }
            if done(self) {
                return Ok(true);
            }
            let left = end.saturating_duration_since(WallInstant::now());
            if left.is_zero() {
                return Ok(false);
            }
            let mut wait = left.min(Duration::from_millis(100));
            if let Some(t) = self.stack.poll_timeout() {
                wait = wait.min(t.saturating_duration_since(self.now()));
            }
            if let Some((_, _, mut mad)) = self.client.recv_mad(Some(wait.max(Duration::from_millis(1))))? {
                let low = u64::from_be_bytes(mad[8..16].try_into().expect("8 bytes")) & 0xffff_ffff_ffff;
                if let Some(tid) = self.tids.remove(&low) {
                    mad[8..16].copy_from_slice(&tid.to_be_bytes());
                }
                let now = self.now();
                self.stack.handle_sa_mad(now, &mad);
            }
            let now = self.now();
            if self.stack.poll_timeout().is_some_and(|t| t <= now) {
                self.stack.handle_timeout(now);
            }
        }
    }

    /// Take the first event of `id` whose kind is in `kinds`.
    pub fn wait_event(
        &mut self,
        id: roce_cm::CmId,
        kinds: &[EventKind],
        timeout: Duration,
    ) -> io::Result<Option<roce_cm::CmEvent>> {
        let mut got = None;
        self.run_until(timeout, |p| {
            while let Some(e) = p.stack.poll_event() {
                if e.id == id && kinds.contains(&e.kind) {
                    got = Some(e);
                    return true;
                }
            }
            false
        })?;
        Ok(got)
    }
}

/// `roce mckey --ibsim`: join and leave against OpenSM through ibsim (no data path on the sim).
pub fn mckey_ibsim(node: Option<&str>, group: IpAddr, join_state: JoinState, leave_after: Duration) -> i32 {
    let mut p = match IbsimPort::connect(node) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("roce mckey --ibsim: {e}");
            return 2;
        }
    };
    let local = IpAddr::V4(p.stack.config().ipv4.map(|(a, _)| a).unwrap_or(std::net::Ipv4Addr::UNSPECIFIED));
    let id = p.stack.create_id(PortSpace::Udp, QpType::Ud).expect("UDP id");
    p.stack.bind_addr(id, SocketAddr::new(local, 0)).expect("bind");
    let mgid = p.stack.mgid(&group);
    println!(
        "mckey: ibsim port LID {} GID {} (SM LID {}); joining {group} (MGID {mgid}) as {join_state}",
        p.client.port_lid(),
        p.client.port_gid(),
        p.client.sm_lid()
    );
    let now = p.now();
    if let Err(e) = p.stack.join_multicast(now, id, group, join_state) {
        eprintln!("roce mckey --ibsim: join_multicast: {e}");
        return 2;
    }
    let ev = p
        .wait_event(id, &[EventKind::MulticastJoin, EventKind::MulticastError], Duration::from_secs(10))
        .ok()
        .flatten();
    let joined = match ev {
        Some(e) if e.kind == EventKind::MulticastJoin => {
            if let EventParam::Multicast { record: Some(r), .. } = &e.param {
                println!(
                    "event: MULTICAST_JOIN status 0 MLID 0x{:04x} MTU {} rate {} qkey 0x{:08x}",
                    r.mlid, r.mtu, r.rate, r.q_key
                );
            }
            true
        }
        Some(e) => {
            let sa = match &e.param {
                EventParam::Multicast { sa_status: Some(st), .. } => format!(" SA status {}", MadStatus(*st)),
                _ => String::new(),
            };
            println!("event: MULTICAST_ERROR status {}{sa}", e.status);
            false
        }
        None => {
            println!("join: no event within 10 s");
            false
        }
    };
    if !joined {
        return 1;
    }
    let _ = p.run_until(leave_after, |_| false);
    println!("mckey: leaving {group}");
    let now = p.now();
    let _ = p.stack.leave_multicast(now, id, group);
    match p.wait_event(id, &[EventKind::MulticastLeft, EventKind::MulticastError], Duration::from_secs(20)) {
        Ok(Some(e)) if e.kind == EventKind::MulticastLeft => {
            println!("event: MULTICAST_LEFT status 0");
            0
        }
        Ok(Some(e)) => {
            println!("event: MULTICAST_ERROR status {} (leave)", e.status);
            1
        }
        _ => {
            println!("leave: no event within 20 s");
            1
        }
    }
}

/// `roce sa-query --ibsim`: Get (with an MGID) or GetTable of MCMemberRecords from OpenSM.
pub fn sa_query_ibsim(node: Option<&str>, mgid: Option<Gid>) -> i32 {
    let mut p = match IbsimPort::connect(node) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("roce sa-query --ibsim: {e}");
            return 2;
        }
    };
    let rec = McMemberRecord { mgid: mgid.unwrap_or_default(), ..McMemberRecord::default() };
    let (method, mask) = match mgid {
        Some(_) => (Method::Get, ComponentMask::MGID.0),
        None => (Method::GetTable, 0),
    };
    let req = SaMad::request(method, 0, attr::MC_MEMBER_RECORD, mask, SaData::mc_member(rec));
    let now = p.now();
    let handle = p.stack.sa_query(now, req).expect("External transport");
    let mut result = None;
    let _ = p.run_until(Duration::from_secs(10), |p| {
        result = p.stack.poll_sa_result().filter(|r| r.handle == handle);
        result.is_some()
    });
    match result.map(|r| r.result) {
        Some(Ok(resp)) => {
            let st = resp.header.status;
            println!("answer: {} status {} TID 0x{:016x}", resp.header.method_name(), st, resp.header.transaction_id);
            if st.0 != 0 {
                println!("error: the SA answered status {st}");
                return 1;
            }
            print_records(&resp);
            0
        }
        Some(Err(e)) => {
            println!("error: {e}: no answer from the SM's SA");
            1
        }
        None => {
            println!("error: no answer within 10 s");
            1
        }
    }
}

fn print_records(resp: &SaMad) {
    match &resp.data {
        SaData::McMember { record, .. } if resp.header.method == Method::Get => print_member(record),
        _ => {
            let bytes = resp.to_bytes();
            let step = usize::from(resp.sa.attribute_offset) * 8;
            let mut n = 0;
            if step >= McMemberRecord::LEN {
                let mut at = 56;
                while at + McMemberRecord::LEN <= bytes.len() {
                    if let Ok(r) = McMemberRecord::parse_bytes(&bytes[at..]) {
                        if r.mgid != Gid::ZERO {
                            print_member(&r);
                            n += 1;
                        }
                    }
                    at += step;
                }
            }
            println!("{n} records");
        }
    }
}
