//! The tests themselves: the sequence of sync points each of perftest's mains runs (send_bw.c,
//! write_bw.c, read_bw.c, atomic_bw.c, *_lat.c) and its data loops (perftest_resources.c:
//! run_iter_bw, run_iter_bw_server, run_iter_lat_send, run_iter_lat_write, run_iter_lat), on
//! the engine's connected QPs.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::net::IpAddr;
use std::time::{Duration, Instant as WallInstant};

use roce_cm::rc::{Access, MrInfo, QpAttr, QpCap, QpInit, QpState, RecvWr, SendOp, SendWr, Sge, TransportService};
use roce_cm::rc::{WcOpcode, WcStatus, WorkCompletion};
use roce_net::driver::Driver;

use super::cm::{self, CmChannel};
use super::oob::{self, BwReport, Channel, Dest, Tcp};
use super::report::{self, BwTimes, Info, Verb};
use super::{Args, AtomicType, Conn};
use crate::plumbing::out::out;
use crate::plumbing::port::CliDevice;

/// `DEF_CACHE_LINE_SIZE`: what this side advertises as its cache line.
const CACHE_LINE: u64 = 64;
/// The cycle buffer this side advertises: the page size.
const PAGE: u64 = 4096;
/// `MAX_SIZE`: the largest size of `-a`.
const MAX_SIZE: u64 = 1 << 23;
/// `MSG_SIZE_CQ_MOD_LIMIT`: over this, completion moderation is off.
const CQ_MOD_LIMIT: u64 = 8192;
/// Outstanding READ/atomic requests this side answers (its `out_reads`).
pub const OUT_READS: u32 = 16;
/// `UD_ADDITION`: the GRH in front of a UD receive.
const UD_ADDITION: u64 = 40;
/// `DEF_QKEY`.
pub const DEF_QKEY: u32 = 0x1111_1111;

/// Which of the eight tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// ib_send_bw.
    SendBw,
    /// ib_write_bw.
    WriteBw,
    /// ib_read_bw.
    ReadBw,
    /// ib_atomic_bw.
    AtomicBw,
    /// ib_send_lat.
    SendLat,
    /// ib_write_lat.
    WriteLat,
    /// ib_read_lat.
    ReadLat,
    /// ib_atomic_lat.
    AtomicLat,
}

impl Kind {
    fn parse(s: &str) -> Option<Kind> {
        Some(match s {
            "send_bw" => Kind::SendBw,
            "write_bw" => Kind::WriteBw,
            "read_bw" => Kind::ReadBw,
            "atomic_bw" => Kind::AtomicBw,
            "send_lat" => Kind::SendLat,
            "write_lat" => Kind::WriteLat,
            "read_lat" => Kind::ReadLat,
            "atomic_lat" => Kind::AtomicLat,
            _ => return None,
        })
    }
    fn verb(self) -> Verb {
        match self {
            Kind::SendBw | Kind::SendLat => Verb::Send,
            Kind::WriteBw | Kind::WriteLat => Verb::Write,
            Kind::ReadBw | Kind::ReadLat => Verb::Read,
            Kind::AtomicBw | Kind::AtomicLat => Verb::Atomic,
        }
    }
    fn bw(self) -> bool {
        matches!(self, Kind::SendBw | Kind::WriteBw | Kind::ReadBw | Kind::AtomicBw)
    }
}

/// The test's parameters after perftest's defaults and force_dependecies.
#[derive(Debug, Clone)]
pub struct Params {
    /// The test.
    pub kind: Kind,
    /// Client (with the server's address) or server.
    pub server: Option<IpAddr>,
    /// Our address.
    pub local: IpAddr,
    /// Size (the first of `-a`'s).
    pub size: u64,
    /// Sizes run (one, or 2..2^23 with -a).
    pub sizes: Vec<u64>,
    /// Iterations per QP (0 with -D).
    pub iters: u64,
    /// -D seconds.
    pub duration: Option<u64>,
    /// Send queue depth.
    pub tx_depth: u64,
    /// Receive queue depth.
    pub rx_depth: u64,
    /// Completion moderation.
    pub cq_mod: u64,
    /// QPs.
    pub qps: u64,
    /// RC, UC or UD.
    pub conn: Conn,
    /// -m in bytes.
    pub mtu: Option<u32>,
    /// -A.
    pub atomic: AtomicType,
    /// -p.
    pub port: u16,
    /// -R.
    pub rdma_cm: bool,
    /// Gb/s.
    pub gbits: bool,
    /// The banner's device name.
    pub device: String,
    /// -x.
    pub gid_index: Option<u8>,
    /// -u.
    pub qp_timeout: u8,
    /// The interface (for its MTU).
    pub iface: String,
    /// Per-step wait.
    pub timeout: Duration,
    /// The server's wait for a client.
    pub accept_timeout: Duration,
    /// noPeak.
    pub no_peak: bool,
    /// `-s` was given (a UD size over the MTU is then an error, not capped).
    pub size_given: bool,
}

impl Params {
    /// perftest's parser defaults and dependencies (perftest_parameters.c).
    pub fn from_args(a: &Args) -> Result<Params, String> {
        let kind = Kind::parse(&a.test).ok_or("unknown test")?;
        let verb = kind.verb();
        let bw = kind.bw();
        let client = a.server.is_some();
        match (a.conn, verb) {
            (Conn::Uc, Verb::Read | Verb::Atomic) => {
                return Err("UC connection not possible in READ/ATOMIC verbs".into())
            }
            (Conn::Ud, Verb::Write | Verb::Read | Verb::Atomic) => {
                return Err("UD connection only possible in SEND verb".into())
            }
            _ => {}
        }
        if a.rdma_cm && a.conn != Conn::Rc {
            return Err("-R: RC only here".into());
        }
        if !bw && a.qps > 1 {
            return Err("Multiple QPs only available on bw tests".into());
        }
        if a.all && a.duration.is_some() {
            return Err("Duration mode isn't supported with -a".into());
        }
        let mut size = a.size.unwrap_or(if bw { 65536 } else { 2 });
        if verb == Verb::Atomic {
            if a.size.is_some_and(|s| s != 8) {
                return Err("Message size cannot be changed for Atomic tests".into());
            }
            size = 8;
        }
        let iters_given = a.iters.is_some();
        let mut iters = a.iters.unwrap_or(if bw && verb == Verb::Write { 5000 } else { 1000 });
        if a.duration.is_some() {
            if iters_given {
                return Err("Duration mode and -n cannot be used together".into());
            }
            iters = 0;
        }
        let mut tx_depth = a.tx_depth.unwrap_or(if bw { 128 } else { 1 });
        let mut rx_depth = a.rx_depth.unwrap_or(if verb == Verb::Send { 512 } else { 1 });
        let mut cq_mod = a.cq_mod.unwrap_or(100);
        if a.duration.is_none() {
            tx_depth = tx_depth.min(iters);
            if verb == Verb::Send {
                rx_depth = rx_depth.min(iters);
            }
            // UC and UD cannot wait for a receive: every message has one posted up front.
            if a.conn != Conn::Rc && a.rx_depth.is_none() {
                rx_depth = iters.min(16_000);
            }
        }
        if a.all && matches!(verb, Verb::Atomic) {
            return Err("-a is not supported for atomic tests".into());
        }
        if size > CQ_MOD_LIMIT && a.conn != Conn::Ud && !a.all && a.cq_mod.is_none() {
            cq_mod = 1;
        }
        cq_mod = cq_mod.min(tx_depth).max(1);
        let sizes = if a.all {
            // 2 to MAX_SIZE (UD: to 4096, capped at the MTU once it is known).
            let top = if a.conn == Conn::Ud { 4096 } else { MAX_SIZE };
            (1..24).map(|i| 1u64 << i).filter(|s| *s <= top).collect()
        } else {
            vec![size]
        };
        let no_peak = a.duration.is_some() || (iters > 20000 && bw) || (verb == Verb::Send && bw && !client);
        Ok(Params {
            kind,
            server: a.server,
            local: a.source,
            size: sizes[0],
            sizes,
            iters,
            duration: a.duration,
            tx_depth,
            rx_depth,
            cq_mod,
            qps: a.qps,
            conn: a.conn,
            mtu: a.mtu,
            atomic: a.atomic_type,
            port: a.port,
            rdma_cm: a.rdma_cm,
            gbits: a.report_gbits,
            device: a.device.clone().unwrap_or_else(|| a.net.iface.clone()),
            gid_index: a.gid_index,
            qp_timeout: a.qp_timeout,
            iface: a.net.iface.clone(),
            timeout: Duration::from_secs_f64(a.timeout),
            accept_timeout: Duration::from_secs_f64(a.accept_timeout),
            no_peak,
            size_given: a.size.is_some(),
        })
    }

    fn client(&self) -> bool {
        self.server.is_some()
    }
}

/// How long the peer must have been quiet before the test's RC QPs go, and the most the
/// tool waits for that.
const LINGER_QUIET: Duration = Duration::from_millis(300);
const LINGER_MAX: Duration = Duration::from_secs(3);

/// Keep the test's RC QPs answering until the peer has sent nothing for [`LINGER_QUIET`] (at
/// most [`LINGER_MAX`]), as TCP's TIME_WAIT keeps a connection for the last ACK: the latency
/// tests end without a closing handshake, so when the ACK of the peer's last WRITE is lost (a
/// real link, `--fault`) the peer retransmits after its ACK timeout to a QP that is gone, and
/// rxe retries for ever at perftest's retry_cnt 7 (rxe_comp.c decrements only below 7): its
/// ib_write_lat never ends. Lingering, our responder ACKs the duplicate and the peer completes.
pub fn linger(d: &mut Driver<CliDevice>) {
    let mut last = (d.stack.counters().rx_frames, WallInstant::now());
    let _ = d.run_until(LINGER_MAX, |d| {
        let rx = d.stack.counters().rx_frames;
        if rx != last.0 {
            last = (rx, WallInstant::now());
        }
        last.1.elapsed() >= LINGER_QUIET
    });
}

/// What a test holds in the engine, destroyed on every exit path.
#[derive(Debug, Default)]
pub struct Resources {
    /// RC/UC QPs.
    pub qps: Vec<u32>,
    /// UD QPs.
    pub ud_qps: Vec<u32>,
    /// Memory regions (lkeys).
    pub mrs: Vec<u32>,
}

impl Resources {
    /// Destroy every QP and MR (ibv_destroy_qp, ibv_dereg_mr).
    pub fn destroy(&mut self, d: &mut Driver<CliDevice>) {
        for q in self.qps.drain(..) {
            let _ = d.stack.rc_mut().destroy_qp(q);
        }
        for q in self.ud_qps.drain(..) {
            let _ = d.stack.destroy_qp(q);
        }
        for m in self.mrs.drain(..) {
            let _ = d.stack.rc_mut().dereg_mr(m);
        }
    }
}

/// The buffer layout of perftest's ctx_init: per QP a local area and a remote-visible area of
/// `slot` bytes each (`INC(BUFF_SIZE(size, cycle_buffer), cache_line)`).
struct Layout {
    mr: MrInfo,
    slot: u64,
    nq: u64,
}

impl Layout {
    fn local(&self, i: usize) -> u64 {
        self.mr.addr + i as u64 * self.slot
    }
    fn remote(&self, i: usize) -> u64 {
        self.mr.addr + (self.nq + i as u64) * self.slot
    }
}

fn inc(size: u64, cache_line: u64) -> u64 {
    if size > cache_line {
        size.div_ceil(cache_line) * cache_line
    } else {
        cache_line
    }
}

fn random24() -> u32 {
    let mut h = RandomState::new().build_hasher();
    h.write_u128(WallInstant::now().elapsed().as_nanos() ^ u128::from(std::process::id()));
    (h.finish() as u32) & 0xff_ffff
}

/// The whole test on a connected channel.
struct Test<'a> {
    d: &'a mut Driver<CliDevice>,
    p: &'a Params,
    ch: Box<dyn Channel>,
    epoch: WallInstant,
    /// The MTU both sides use, in bytes.
    mtu: u32,
    cycle: u64,
    cache_line: u64,
    layout: Option<Layout>,
    my: Vec<Dest>,
    rem: Vec<Dest>,
    qpns: Vec<u32>,
    rem_ip: Option<IpAddr>,
    /// The sizes run (UD: capped at the MTU).
    sizes: Vec<u64>,
    /// Completions of UD sends (the engine completes a UD send when it is queued).
    ud_done: Vec<WorkCompletion>,
    /// Since when no turn brought a completion.
    idle: Option<WallInstant>,
}

/// Run the test: connect the channel, exchange, connect the QPs, run, report.
pub fn perftest(d: &mut Driver<CliDevice>, p: &Params, res: &mut Resources) -> Result<(), String> {
    if p.server.is_none() {
        out!("{}", report::WAITING);
    }
    let ch: Box<dyn Channel> = match (p.server, p.rdma_cm) {
        (Some(s), false) => Box::new(
            Tcp::connect(s, p.port, p.timeout)
                .map_err(|e| format!("{e}\n Unable to open file descriptor for socket connection"))?,
        ),
        (None, false) => Box::new(Tcp::accept(d, p.local, p.port, p.timeout, p.accept_timeout)?),
        (Some(s), true) => Box::new(CmChannel::connect(d, p.local, s, p.port, p.timeout)?),
        (None, true) => Box::new(CmChannel::accept(d, p.local, p.port, p.timeout, p.accept_timeout)?),
    };
    let mut t = Test {
        d,
        p,
        ch,
        epoch: WallInstant::now(),
        mtu: 1024,
        cycle: PAGE,
        cache_line: CACHE_LINE,
        layout: None,
        my: Vec::new(),
        rem: Vec::new(),
        qpns: Vec::new(),
        rem_ip: None,
        sizes: p.sizes.clone(),
        ud_done: Vec::new(),
        idle: None,
    };
    t.prelude()?;
    t.setup(res)?;
    t.sequence()
}

impl Test<'_> {
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn xchg(&mut self, mine: &[u8]) -> Result<Vec<u8>, String> {
        self.ch.xchg(self.d, mine).map_err(|e| format!(" Failed to exchange data between server and clients: {e}"))
    }

    /// exchange_versions, check_version_compatibility, check_sys_data, check_mtu.
    fn prelude(&mut self) -> Result<(), String> {
        let rv = self.xchg(&oob::version_msg(oob::VERSION))?;
        let remote = oob::version_of(&rv);
        oob::check_version(&remote)?;
        let rc = self.xchg(&(PAGE as u32).to_be_bytes())?;
        let rl = self.xchg(&(CACHE_LINE as u32).to_be_bytes())?;
        let rem_cycle = u64::from(u32::from_be_bytes([rc[0], rc[1], rc[2], rc[3]]));
        let rem_cl = u64::from(u32::from_be_bytes([rl[0], rl[1], rl[2], rl[3]]));
        // Each keeps the larger (bounded: a peer's page size past 1 GiB is not believed).
        self.cycle = PAGE.max(rem_cycle.min(1 << 30));
        self.cache_line = CACHE_LINE.max(rem_cl.min(1 << 20));
        let port_code = match self.p.mtu {
            Some(m) => mtu_code(m),
            None => {
                crate::plumbing::port::iface_mtu(&self.p.iface).map(crate::plumbing::port::iboe_mtu_code).unwrap_or(3)
            }
        };
        let cur = format!("{port_code}");
        let mut msg = [0u8; 2];
        msg[0] = cur.as_bytes()[0];
        let rm = self.xchg(&msg)?;
        let rem_code = (rm[0] as char).to_digit(10).unwrap_or(0) as u8;
        let code = if (1..=5).contains(&rem_code) && rem_code < port_code { rem_code } else { port_code };
        self.mtu = roce_cm::rc::mtu_bytes(code);
        if self.p.conn == Conn::Ud && self.sizes.iter().any(|s| *s > u64::from(self.mtu)) {
            if self.p.sizes.len() > 1 || !self.p.size_given {
                eprintln!(" Max msg size in UD is MTU {}\n Changing to this MTU", self.mtu);
                let mtu = u64::from(self.mtu);
                self.sizes.retain(|s| *s <= mtu);
                if self.sizes.is_empty() || self.p.sizes.len() == 1 {
                    self.sizes = vec![mtu];
                }
            } else {
                return Err(" Max message size in UD cannot be greater than MTU".into());
            }
        }
        Ok(())
    }

    /// ctx_init and set_up_connection: QPs, the buffer, our key messages; the banner.
    fn setup(&mut self, res: &mut Resources) -> Result<(), String> {
        let p = self.p;
        let nq = p.qps;
        let top = *self.sizes.iter().max().unwrap_or(&p.size);
        let slot = inc(top.max(self.cycle), self.cache_line);
        let mut len = slot * 2 * nq;
        if p.conn == Conn::Ud {
            len += self.cache_line;
        }
        let mr = self
            .d
            .stack
            .rc_mut()
            .reg_mr(len as usize, Access::ALL)
            .map_err(|e| format!("Couldn't allocate MR: ibv_reg_mr: {e}"))?;
        res.mrs.push(mr.lkey);
        self.layout = Some(Layout { mr, slot, nq });
        let out_reads = if matches!(p.kind.verb(), Verb::Read | Verb::Atomic) { OUT_READS } else { 1 };
        let gid = oob::gid_of(p.local);
        // rdma_cm mode: every test QP through the CM first (the ids end with the others').
        let cm_qps = if p.rdma_cm {
            let n = nq as usize;
            cm::connect_test_qps(self.d, self.ch.as_mut(), p.local, p.server, p.port, out_reads as u8, p.timeout, n)?
        } else {
            Vec::new()
        };
        for i in 0..nq as usize {
            let qpn = if let Some(&(_id, q)) = cm_qps.get(i) {
                q
            } else if p.conn == Conn::Ud {
                let q = self.d.stack.create_qp(DEF_QKEY);
                res.ud_qps.push(q);
                q
            } else {
                let service = if p.conn == Conn::Uc { TransportService::Uc } else { TransportService::Rc };
                let cap = QpCap {
                    max_send_wr: (p.tx_depth as u32).clamp(1, 1 << 15),
                    max_recv_wr: (p.rx_depth as u32).clamp(1, 1 << 15),
                };
                let q = self
                    .d
                    .stack
                    .create_qp_with(QpInit { service, cap, srq: None, pd: 0 })
                    .map_err(|e| format!("Couldn't create QP: ibv_create_qp: {e}"))?;
                res.qps.push(q);
                q
            };
            self.qpns.push(qpn);
            let l = self.layout.as_ref().ok_or("no buffer")?;
            self.my.push(Dest {
                lid: 0,
                out_reads,
                qpn,
                psn: random24(),
                rkey: mr.rkey,
                vaddr: l.remote(i),
                gid,
                srqn: 0,
                gid_index: i32::from(p.gid_index.unwrap_or(0)),
            });
        }
        self.rem = vec![Dest::default(); nq as usize];
        let info = Info {
            verb: p.kind.verb(),
            atomic: match p.atomic {
                AtomicType::CmpAndSwap => "CMP_AND_SWAP",
                AtomicType::FetchAndAdd => "FETCH_AND_ADD",
            },
            bw: p.kind.bw(),
            device: &p.device,
            qps: nq as u32,
            conn: p.conn.name(),
            client: p.client(),
            tx_depth: p.tx_depth as u32,
            rx_depth: p.rx_depth as u32,
            cq_mod: p.cq_mod as u32,
            mtu: self.mtu,
            gid_index: p.gid_index,
            out_reads,
            rdma_cm: p.rdma_cm,
        };
        out!("{}", report::test_info(&info));
        Ok(())
    }

    fn hand_shake(&mut self, i: usize) -> Result<(), String> {
        let my = self.my[i];
        let r = self
            .ch
            .hand_shake(self.d, &my)
            .map_err(|e| format!(" Failed to exchange data between server and clients: {e}"))?;
        self.rem[i] = r;
        Ok(())
    }

    /// The per-test sequence of sync points.
    fn sequence(&mut self) -> Result<(), String> {
        let k = self.p.kind;
        let nq = self.p.qps as usize;
        let lat = !k.bw();
        let send = k.verb() == Verb::Send;
        if lat && k != Kind::SendLat {
            self.hand_shake(0)?;
        }
        for i in 0..nq {
            self.hand_shake(i)?;
        }
        if !self.p.rdma_cm && oob::gid_is_v4(&self.my[0].gid) != oob::gid_is_v4(&self.rem[0].gid) {
            return Err(
                "\n Found Incompatibility issue with GID types.\n Please Try to use a different IP version.\n".into()
            );
        }
        self.connect_qps()?;
        if send {
            self.hand_shake(0)?;
        }
        for i in 0..nq {
            out!("{}", report::address_lines("local", &self.my[i], self.shown_verb()));
        }
        for i in 0..nq {
            self.hand_shake(i)?;
            out!("{}", report::address_lines("remote", &self.rem[i], self.shown_verb()));
        }
        if !send {
            self.hand_shake(0)?;
        }
        let client = self.p.client();
        match k {
            Kind::SendBw => {
                self.bw_header();
                let sizes = self.sizes.clone();
                for size in sizes.iter() {
                    if !client {
                        self.post_recvs(*size, self.p.rx_depth)?;
                    }
                    self.hand_shake(0)?;
                    let r = if client { self.run_bw(*size)? } else { self.run_bw_server(*size)? };
                    out!("{}", report::bw_row(&r, self.p.gbits));
                    if sizes.len() > 1 {
                        self.hand_shake(0)?;
                    }
                }
                out!("{}", report::RESULT_LINE);
                self.close()
            }
            Kind::WriteBw | Kind::ReadBw | Kind::AtomicBw => {
                self.bw_header();
                if !client {
                    self.hand_shake(0)?;
                    let r = oob::xchg_reports(self.ch.as_mut(), self.d, &BwReport::default())?;
                    out!("{}", report::bw_row(&r, self.p.gbits));
                    self.close()?;
                    out!("{}", report::RESULT_LINE);
                    return Ok(());
                }
                let mut last = BwReport::default();
                for size in self.sizes.clone() {
                    last = self.run_bw(size)?;
                    out!("{}", report::bw_row(&last, self.p.gbits));
                }
                out!("{}", report::RESULT_LINE);
                self.hand_shake(0)?;
                oob::xchg_reports(self.ch.as_mut(), self.d, &last)?;
                self.close()
            }
            Kind::SendLat => {
                self.lat_header();
                for size in self.sizes.clone() {
                    self.post_recvs(size, self.p.rx_depth)?;
                    self.hand_shake(0)?;
                    let row = self.run_lat_send(size)?;
                    out!("{row}");
                }
                out!("{}", report::RESULT_LINE);
                self.close()
            }
            Kind::WriteLat => {
                self.lat_header();
                for size in self.sizes.clone() {
                    let row = self.run_lat_write(size)?;
                    out!("{row}");
                }
                out!("{}", report::RESULT_LINE);
                Ok(())
            }
            Kind::ReadLat | Kind::AtomicLat => {
                if !client {
                    self.close()?;
                    out!("{}", report::RESULT_LINE);
                    return Ok(());
                }
                self.lat_header();
                for size in self.sizes.clone() {
                    let row = self.run_lat_read(size)?;
                    out!("{row}");
                }
                self.close()?;
                out!("{}", report::RESULT_LINE);
                Ok(())
            }
        }
    }

    /// The verb the address lines are printed for: in rdma_cm mode perftest prints them with
    /// the control channel's parameters (verb SEND), so without RKey, VAddr and OUT.
    fn shown_verb(&self) -> Verb {
        if self.p.rdma_cm {
            Verb::Send
        } else {
            self.p.kind.verb()
        }
    }

    fn bw_header(&self) {
        out!("{}", report::RESULT_LINE);
        out!("{}", if self.p.gbits { report::BW_HEADER_GB } else { report::BW_HEADER_MB });
    }

    fn lat_header(&self) {
        out!("{}", report::RESULT_LINE);
        out!("{}", if self.p.duration.is_some() { report::LAT_DUR_HEADER } else { report::LAT_HEADER });
    }

    /// ctx_close_connection: one more handshake, then "done" that nobody reads.
    fn close(&mut self) -> Result<(), String> {
        self.hand_shake(0)?;
        let _ = self.ch.write_only(self.d, oob::DONE);
        Ok(())
    }

    /// ctx_connect: every QP to INIT, RTR and RTS with the peer's QPN, PSN and GID.
    fn connect_qps(&mut self) -> Result<(), String> {
        let p = self.p;
        let now = self.d.now();
        let dest_ip = oob::ip_of_gid(&self.rem[0].gid);
        self.rem_ip = Some(dest_ip);
        // rdma_cm mode: the CM moved the QPs to RTR and RTS.
        if p.conn == Conn::Ud || p.rdma_cm {
            return Ok(());
        }
        for i in 0..self.qpns.len() {
            let (my, rem) = (self.my[i], self.rem[i]);
            let mut attr = QpAttr::new(oob::ip_of_gid(&rem.gid), rem.qpn & 0xff_ffff);
            attr.path_mtu = self.mtu;
            attr.rq_psn = rem.psn & 0xff_ffff;
            attr.sq_psn = my.psn;
            attr.timeout = p.qp_timeout;
            attr.retry_cnt = 7;
            attr.rnr_retry = 7;
            attr.min_rnr_timer = 12;
            attr.max_rd_atomic = rem.out_reads.clamp(1, 255) as u8;
            attr.max_dest_rd_atomic = my.out_reads.clamp(1, 255) as u8;
            attr.hop_limit = 0xff;
            attr.access =
                Access::LOCAL_WRITE.union(Access::REMOTE_WRITE).union(Access::REMOTE_READ).union(Access::REMOTE_ATOMIC);
            let qpn = self.qpns[i];
            let rc = self.d.stack.rc_mut();
            for st in [QpState::Init, QpState::Rtr, QpState::Rts] {
                rc.modify_qp(now, qpn, st, &attr)
                    .map_err(|e| format!("Failed to modify QP {qpn:#x} to {}: {e}", st.name()))?;
            }
        }
        Ok(())
    }

    fn layout(&self) -> Result<&Layout, String> {
        self.layout.as_ref().ok_or_else(|| "no buffer".to_string())
    }

    /// ctx_set_recv_wqes: `depth` receives per QP into its receive area.
    fn post_recvs(&mut self, size: u64, depth: u64) -> Result<(), String> {
        if self.p.conn == Conn::Ud {
            return Ok(());
        }
        let l = self.layout()?;
        let lkey = l.mr.lkey;
        let addrs: Vec<u64> = (0..self.qpns.len()).map(|i| l.remote(i)).collect();
        for (i, qpn) in self.qpns.clone().into_iter().enumerate() {
            for _ in 0..depth {
                let wr = RecvWr { wr_id: i as u64, sg_list: vec![Sge { addr: addrs[i], length: size as u32, lkey }] };
                self.d.stack.rc_mut().post_recv(qpn, wr).map_err(|e| format!("Couldn't post recv Qp = {i}: {e}"))?;
            }
        }
        Ok(())
    }

    fn send_op(&self, i: usize, remote_addr: u64) -> SendOp {
        let rkey = self.rem[i].rkey;
        match self.p.kind.verb() {
            Verb::Send => SendOp::Send,
            Verb::Write => SendOp::Write { remote_addr, rkey },
            Verb::Read => SendOp::Read { remote_addr, rkey },
            Verb::Atomic => match self.p.atomic {
                AtomicType::FetchAndAdd => SendOp::FetchAdd { remote_addr, rkey, add: 1 },
                AtomicType::CmpAndSwap => SendOp::CompareSwap { remote_addr, rkey, compare: 0, swap: 0 },
            },
        }
    }

    fn post(&mut self, i: usize, op: SendOp, size: u64, signaled: bool, wr_id: u64) -> Result<(), String> {
        let l = self.layout()?;
        let sge = Sge { addr: l.local(i), length: size as u32, lkey: l.mr.lkey };
        if self.p.conn == Conn::Ud {
            return self.post_ud(i, size, signaled, wr_id);
        }
        let now = self.d.now();
        let wr = SendWr { wr_id, op, sg_list: vec![sge], signaled, solicited: false, inline: None };
        self.d.stack.rc_mut().post_send(now, self.qpns[i], wr).map_err(|e| format!("Couldn't post send: {e}"))
    }

    /// A UD SEND of `size` bytes to the peer's QP (Q_Key `DEF_QKEY`); the engine completes it
    /// once queued, so its completion is made here.
    fn post_ud(&mut self, i: usize, size: u64, signaled: bool, wr_id: u64) -> Result<(), String> {
        let rem = self.rem[i];
        let ah = roce_cm::event::AddressHandle {
            dgid: roce_wire::Gid(rem.gid),
            sgid: roce_wire::Gid(self.my[i].gid),
            dmac: [0; 6],
            hop_limit: 0xff,
            traffic_class: 0,
            flow_label: 0,
            sl: 0,
        };
        let dest = roce_cm::UdDest { ah, remote_qpn: rem.qpn & 0xff_ffff, remote_qkey: DEF_QKEY };
        let l = self.layout()?;
        let off = (l.local(i) - l.mr.addr) as usize;
        let payload = self
            .d
            .stack
            .rc()
            .mr(l.mr.lkey)
            .and_then(|m| m.get(off..off + size as usize))
            .map(<[u8]>::to_vec)
            .ok_or("the send buffer is gone")?;
        self.d.stack.post_send(self.qpns[i], &dest, &payload, None).map_err(|e| format!("Couldn't post send: {e}"))?;
        if signaled {
            self.ud_done.push(WorkCompletion {
                wr_id,
                status: WcStatus::Success,
                opcode: WcOpcode::Send,
                qp_num: self.qpns[i],
                byte_len: size as u32,
                imm_data: None,
                solicited: false,
                invalidated_rkey: None,
                srq: None,
            });
        }
        Ok(())
    }

    /// One turn of the driver, then the completions; a stop or a quiet `timeout` ends it.
    fn poll(&mut self, last_progress: &mut WallInstant) -> Result<Vec<WorkCompletion>, String> {
        // Bandwidth tests: busy while completions come and for SPIN after the last one, then
        // asleep in poll() until a frame (or 1 ms): a side spinning longer takes the CPU its
        // peer and the kernel's veth need. Latency tests always spin, as perftest: a sleeping
        // side wakes only when its raw socket's receive block is handed over, and both sides
        // of a ping-pong would end up waiting on each other's wake-up (125 us instead of 10).
        const SPIN: Duration = Duration::from_micros(100);
        let wait = match self.idle {
            Some(t) if self.p.kind.bw() && t.elapsed() > SPIN => Duration::from_millis(1),
            _ => Duration::ZERO,
        };
        self.d.turn(wait).map_err(|e| format!("{e}"))?;
        let mut v = std::mem::take(&mut self.ud_done);
        v.extend(self.ch.take_others());
        while let Some(wc) = self.d.stack.rc_mut().poll_cq() {
            v.extend(self.ch.claim(wc));
        }
        if self.p.conn == Conn::Ud {
            // A datagram is a receive completion: the GRH's 40 bytes and the payload.
            for &qpn in &self.qpns {
                while let Some(dg) = self.d.stack.poll_recv(qpn) {
                    v.push(WorkCompletion {
                        wr_id: 0,
                        status: WcStatus::Success,
                        opcode: WcOpcode::Recv,
                        qp_num: qpn,
                        byte_len: (dg.payload.len() as u64 + UD_ADDITION) as u32,
                        imm_data: None,
                        solicited: false,
                        invalidated_rkey: None,
                        srq: None,
                    });
                }
            }
        }
        if v.is_empty() {
            self.idle.get_or_insert_with(WallInstant::now);
        } else {
            self.idle = None;
        }
        if !v.is_empty() {
            *last_progress = WallInstant::now();
        } else if last_progress.elapsed() > self.p.timeout {
            return Err(format!(" No completion within {:.1} s: the peer is gone", self.p.timeout.as_secs_f64()));
        }
        if crate::plumbing::shutdown::requested().is_some() {
            return Err(" Stopped".into());
        }
        Ok(v)
    }

    fn duration_over(&self, start: WallInstant) -> bool {
        self.p.duration.is_some_and(|s| start.elapsed() >= Duration::from_secs(s))
    }

    /// run_iter_bw: post up to tx_depth per QP, every cq_mod-th signalled.
    fn run_bw(&mut self, size: u64) -> Result<BwReport, String> {
        let p = self.p;
        let nq = self.qpns.len();
        let iters = p.iters;
        let dur = p.duration.is_some();
        let tot = iters * nq as u64;
        let cq_mod = if size > CQ_MOD_LIMIT && self.sizes.len() == 1 && p.conn != Conn::Ud { 1 } else { p.cq_mod };
        let step = inc(size, self.cache_line);
        let wrap = (self.cycle / step).max(1);
        let cycling = size <= self.cycle / 2;
        let mut rem_addr: Vec<u64> = self.rem.iter().map(|r| r.vaddr).collect();
        let mut scnt = vec![0u64; nq];
        let mut ccnt = vec![0u64; nq];
        let (mut totscnt, mut totccnt) = (0u64, 0u64);
        let keep = !p.no_peak;
        let mut t = BwTimes {
            posted: vec![0; if keep { tot as usize } else { 1 }],
            completed: vec![0; if keep { tot as usize } else { 1 }],
            no_peak: p.no_peak,
        };
        let start = WallInstant::now();
        t.posted[0] = self.now_ns();
        let mut progress = WallInstant::now();
        let index: std::collections::HashMap<u32, usize> = self.qpns.iter().enumerate().map(|(i, q)| (*q, i)).collect();
        loop {
            let stop = dur && self.duration_over(start);
            if !dur && totscnt >= tot && totccnt >= tot {
                break;
            }
            if dur && stop && totccnt >= totscnt {
                break;
            }
            for i in 0..nq {
                while !stop && (dur || scnt[i] < iters) && scnt[i] - ccnt[i].min(scnt[i]) < p.tx_depth {
                    let signaled = scnt[i] % cq_mod == cq_mod - 1 || (!dur && scnt[i] == iters - 1);
                    if keep {
                        t.posted[totscnt as usize] = self.now_ns();
                    }
                    let op = self.send_op(i, rem_addr[i]);
                    self.post(i, op, size, signaled, i as u64)?;
                    if cycling && p.kind.verb() != Verb::Send {
                        rem_addr[i] += step;
                        if (scnt[i] + 1).is_multiple_of(wrap) {
                            rem_addr[i] = self.rem[i].vaddr;
                        }
                    }
                    scnt[i] += 1;
                    totscnt += 1;
                }
            }
            for wc in self.poll(&mut progress)? {
                if wc.status != WcStatus::Success {
                    return Err(comp_error("client", &wc, Some((totscnt, totccnt))));
                }
                let i = index.get(&wc.qp_num).copied().unwrap_or(0);
                ccnt[i] += cq_mod;
                totccnt += cq_mod;
                if keep {
                    let j = (totccnt.min(tot) as usize).saturating_sub(1);
                    t.completed[j] = self.now_ns();
                }
            }
            if dur && stop {
                // Duration: the sends in flight complete, then the count is the sent ones.
                for i in 0..nq {
                    ccnt[i] = ccnt[i].min(scnt[i]);
                }
                totccnt = totccnt.min(totscnt);
            }
        }
        if !keep {
            t.completed[0] = self.now_ns();
        }
        let n = if dur { totscnt } else { tot };
        Ok(report::bw_report(&t, size, n, cq_mod, p.gbits))
    }

    /// run_iter_bw_server: count the receives, repost while more are due.
    fn run_bw_server(&mut self, size: u64) -> Result<BwReport, String> {
        let p = self.p;
        let nq = self.qpns.len();
        let tot = p.iters * nq as u64;
        let dur = p.duration;
        let mut posted = vec![p.rx_depth; nq];
        let mut rcnt = 0u64;
        let mut t = BwTimes { posted: vec![0], completed: vec![0], no_peak: true };
        let mut first: Option<WallInstant> = None;
        let mut progress = WallInstant::now();
        let index: std::collections::HashMap<u32, usize> = self.qpns.iter().enumerate().map(|(i, q)| (*q, i)).collect();
        let l = self.layout()?;
        let lkey = l.mr.lkey;
        let addrs: Vec<u64> = (0..nq).map(|i| l.remote(i)).collect();
        loop {
            if dur.is_none() && rcnt >= tot {
                break;
            }
            if let (Some(s), Some(f)) = (dur, first) {
                if f.elapsed() >= Duration::from_secs(s) {
                    break;
                }
            }
            for wc in self.poll(&mut progress)? {
                if wc.status != WcStatus::Success {
                    return Err(comp_error("server", &wc, None));
                }
                if !matches!(wc.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm) {
                    continue;
                }
                if first.is_none() {
                    first = Some(WallInstant::now());
                    t.posted[0] = self.now_ns();
                }
                let i = index.get(&wc.qp_num).copied().unwrap_or(0);
                rcnt += 1;
                if p.conn != Conn::Ud && (dur.is_some() || posted[i] < p.iters) {
                    let wr =
                        RecvWr { wr_id: i as u64, sg_list: vec![Sge { addr: addrs[i], length: size as u32, lkey }] };
                    self.d
                        .stack
                        .rc_mut()
                        .post_recv(self.qpns[i], wr)
                        .map_err(|e| format!("Couldn't post recv Qp={i} rcnt={rcnt}: {e}"))?;
                    posted[i] += 1;
                }
            }
        }
        t.completed[0] = self.now_ns();
        let n = if dur.is_some() { rcnt } else { tot };
        Ok(report::bw_report(&t, size, n, 1, p.gbits))
    }

    /// Wait for one completion of `want` (a receive or our send).
    fn wait_wc(&mut self, pending: &mut Vec<WorkCompletion>, recv: bool) -> Result<WorkCompletion, String> {
        let mut progress = WallInstant::now();
        loop {
            if let Some(pos) = pending.iter().position(|w| {
                (w.opcode == WcOpcode::Recv || w.opcode == WcOpcode::RecvRdmaWithImm) == recv
                    || w.status != WcStatus::Success
            }) {
                let wc = pending.remove(pos);
                if wc.status != WcStatus::Success {
                    return Err(comp_error(if recv { "server" } else { "client" }, &wc, None));
                }
                return Ok(wc);
            }
            let v = self.poll(&mut progress)?;
            pending.extend(v);
        }
    }

    /// run_iter_lat_send: the client sends first; each side answers each receive.
    fn run_lat_send(&mut self, size: u64) -> Result<String, String> {
        let p = self.p;
        let client = p.client();
        let iters = p.iters;
        let start = WallInstant::now();
        let mut posted = Vec::with_capacity(iters as usize);
        let (mut scnt, mut rcnt) = (0u64, 0u64);
        let mut pending = Vec::new();
        let mut recvs_posted = p.rx_depth;
        let dur = p.duration.is_some();
        let cq_mod = p.cq_mod.max(1);
        while dur || scnt < iters || rcnt < iters {
            if dur && self.duration_over(start) {
                break;
            }
            if (dur || rcnt < iters) && (!client || scnt >= 1) {
                self.wait_wc(&mut pending, true)?;
                rcnt += 1;
                if dur || recvs_posted < iters {
                    self.post_recvs(size, 1)?;
                    recvs_posted += 1;
                }
            }
            if dur || scnt < iters {
                posted.push(self.now_ns());
                scnt += 1;
                let signaled = scnt % cq_mod == 0 || (!dur && scnt == iters);
                let op = self.send_op(0, 0);
                self.post(0, op, size, signaled, 0)?;
                if signaled {
                    self.wait_wc(&mut pending, false)?;
                }
            }
        }
        Ok(self.lat_row(&posted, size, true, start))
    }

    /// run_iter_lat_write: the server writes first; each side spins on the last byte of its
    /// own buffer until the peer's count arrives, then writes its own.
    fn run_lat_write(&mut self, size: u64) -> Result<String, String> {
        let p = self.p;
        let client = p.client();
        let iters = p.iters;
        let l = self.layout()?;
        let lkey = l.mr.lkey;
        let poll_off = (l.remote(0) - l.mr.addr + size - 1) as usize;
        let post_off = (l.local(0) - l.mr.addr + size - 1) as usize;
        let start = WallInstant::now();
        let mut posted = Vec::with_capacity(iters as usize);
        let (mut scnt, mut ccnt, mut rcnt) = (0u64, 0u64, 0u64);
        let mut pending = Vec::new();
        let dur = p.duration.is_some();
        let rem_addr = self.rem[0].vaddr;
        while dur || scnt < iters || ccnt < iters || rcnt < iters {
            if dur && self.duration_over(start) {
                break;
            }
            if (dur || rcnt < iters) && (client || scnt >= 1) {
                rcnt += 1;
                let want = rcnt as u8;
                let mut progress = WallInstant::now();
                loop {
                    let b = self.d.stack.rc().mr(lkey).and_then(|m| m.get(poll_off).copied()).unwrap_or(0);
                    if b == want {
                        break;
                    }
                    let v = self.poll(&mut progress)?;
                    if let Some(bad) = v.iter().find(|w| w.status != WcStatus::Success) {
                        return Err(comp_error("client", bad, Some((scnt, ccnt))));
                    }
                    pending.extend(v);
                    if dur && self.duration_over(start) {
                        break;
                    }
                }
            }
            if dur || scnt < iters {
                posted.push(self.now_ns());
                scnt += 1;
                if let Some(m) = self.d.stack.rc_mut().mr_mut(lkey) {
                    if let Some(b) = m.get_mut(post_off) {
                        *b = scnt as u8;
                    }
                }
                let op = self.send_op(0, rem_addr);
                self.post(0, op, size, true, 0)?;
            }
            if dur || ccnt < iters {
                self.wait_wc(&mut pending, false)?;
                ccnt += 1;
            }
        }
        Ok(self.lat_row(&posted, size, true, start))
    }

    /// run_iter_lat: one READ or atomic at a time (client only).
    fn run_lat_read(&mut self, size: u64) -> Result<String, String> {
        let p = self.p;
        let start = WallInstant::now();
        let mut posted = Vec::with_capacity(p.iters as usize);
        let mut pending = Vec::new();
        let rem_addr = self.rem[0].vaddr;
        let dur = p.duration.is_some();
        let mut scnt = 0u64;
        while if dur { !self.duration_over(start) } else { scnt < p.iters } {
            posted.push(self.now_ns());
            scnt += 1;
            let op = self.send_op(0, rem_addr);
            self.post(0, op, size, true, 0)?;
            self.wait_wc(&mut pending, false)?;
        }
        Ok(self.lat_row(&posted, size, false, start))
    }

    fn lat_row(&self, posted: &[u64], size: u64, round_trip: bool, start: WallInstant) -> String {
        if self.p.duration.is_some() {
            return report::lat_dur_row(size, posted.len() as u64, start.elapsed().as_nanos() as u64, round_trip);
        }
        match report::lat_report(posted, size, round_trip) {
            Some(r) => report::lat_row(&r),
            None => format!(" {size:<7} {}", posted.len()),
        }
    }
}

/// An IBA MTU code of a size in bytes.
fn mtu_code(m: u32) -> u8 {
    match m {
        256 => 1,
        512 => 2,
        2048 => 4,
        4096 => 5,
        _ => 3,
    }
}

/// perftest's NOTIFY_COMP_ERROR_SEND / _RECV, with ibv_wc_status_str's name.
fn comp_error(side: &str, wc: &WorkCompletion, counts: Option<(u64, u64)>) -> String {
    let mut s = format!(
        " Completion with error at {side}\n Failed status {}: wr_id {} syndrom 0x0 ({})",
        report::wc_status_code(wc.status),
        wc.wr_id,
        wc.status.as_str()
    );
    if let Some((scnt, ccnt)) = counts {
        s.push_str(&format!("\nscnt={scnt}, ccnt={ccnt}"));
    }
    s
}
