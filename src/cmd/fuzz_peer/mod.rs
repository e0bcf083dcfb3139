//! `roce fuzz-peer`: a structure-aware network fuzzer for a live RoCEv2 peer (a kernel rxe).
//!
//! Frames are built from the wire crate's Reprs (BTH and its extension headers, MADs, SA
//! MCMemberRecords, CM bodies) with boundary and random values in every field, then some are
//! mutated byte-wise below the RoCE layer (IP/UDP fields, lengths, checksums, truncation).
//! For every frame [`roce_wire::rxe_accept::rxe_accepts`] predicts whether the peer counts it
//! in `rcvd_pkts`. Every few hundred frames a probe with a known answer checks that the peer
//! is alive: an SA Get to QP1 (the MAD core answers GetResp status 0x000C) and a CM REQ to a
//! closed service (the CM answers REJ). Everything is drawn from one SplitMix64 seeded by
//! `--seed`: the same seed sends the same frames.

use std::fs;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use roce_net::device::Device;
use roce_net::pcap::PcapFileWriter;
use roce_net::raw::RawSocket;
use roce_wire::bth::{self, Opcode};
use roce_wire::cm::{self as wire_cm, cma_hdr, CmMessage};
use roce_wire::ext::ExtHeaders;
use roce_wire::frame::{self, rxe_udp_sport, FrameRepr};
use roce_wire::mad::Method;
use roce_wire::mcmember::{ComponentMask, JoinState, McMemberRecord};
use roce_wire::rng::SplitMix64;
use roce_wire::rxe_accept::{rxe_accepts, RxeDrop, RxeKernel, RxePeer, RxeQp, RxeQpType, RxeVerdict};
use roce_wire::sa::{attr, SaData, SaMad};
use roce_wire::{Gid, GSI_QKEY, MULTICAST_QPN};

use crate::plumbing::exit;

pub mod cm;

/// What `roce fuzz-peer` fuzzes.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Target {
    /// Frames of every opcode, QPN and length, mutated below RoCE (rxe's receive path).
    #[default]
    Frames,
    /// The kernel's CM through REQ/REP/RTU/DREQ/DREP/REJ/MRA/LAP/APR/SIDR sequences
    /// (`--service`).
    Cm,
}

/// The longest campaign `--duration` accepts (one week).
pub const MAX_DURATION_S: f64 = 7.0 * 86_400.0;

/// Fuzz a live RoCEv2 peer (a kernel rxe) with structure-aware frames, predicting for each
/// whether rxe counts it, and probing the peer's liveness.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// What to fuzz: `frames` (rxe's receive path) or `cm` (the kernel's CM, stateful).
    #[arg(long, value_enum, default_value_t = Target::Frames)]
    pub target: Target,
    /// With `--target cm`: a listening rdma_cm service in the peer to aim REQs (tcp) and
    /// SIDR_REQs (udp) at, as PS:PORT (tcp:7174, udp:7174); repeatable. Default: tcp:7471
    /// (ucmatose) and udp:7174 (udaddy).
    #[arg(long, value_name = "PS:PORT")]
    pub service: Vec<cm::Service>,
    /// With `--target cm`: a shell command (sh -c) that prints the peer kernel's new log
    /// lines (e.g. `ssh guest dmesg -c`); run before the campaign, every --log-every seconds
    /// and at the end, its lines scanned for BUG/WARNING/Oops/general protection/soft
    /// lockup/KASAN/Kernel panic. Each such finding is kept (finding-N.pcap in --out) and,
    /// with --reset-cmd, minimised (finding-N-min.pcap).
    #[arg(long)]
    pub log_cmd: Option<String>,
    /// Seconds between two --log-cmd runs.
    #[arg(long, default_value_t = 10.0)]
    pub log_every: f64,
    /// The interface the peer is reachable on (raw frames: CAP_NET_RAW).
    #[arg(long)]
    pub iface: String,
    /// Our address on that interface (the frames' source).
    #[arg(short = 'b', long = "bind")]
    pub bind: IpAddr,
    /// The peer's address (same family as -b; resolved by ARP or neighbour discovery).
    #[arg(long)]
    pub peer: IpAddr,
    /// How long to fuzz, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// The seed (default: from the clock; the summary prints it).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Frames per second at most (a TCG guest drops what its virtio queue cannot hold).
    #[arg(long, default_value_t = 500.0)]
    pub rate: f64,
    /// Probe the peer's liveness every this many frames.
    #[arg(long, default_value_t = 300)]
    pub probe_every: u32,
    /// The peer's kernel version, for the predictor: rxe's opcode table has FLUSH and ATOMIC
    /// WRITE from 6.2 on. A version (6.1, 6.12, 7.2.13, …) or `sid` (Debian unstable's newest).
    #[arg(long, value_parser = rxe_kernel, default_value = "6.1", value_name = "VERSION")]
    pub kernel: RxeKernel,
    /// The peer's GSI QP index in rxe's QP pool: QPN 1 maps to it, and the index itself
    /// reaches the GSI QP too (16 on a fresh rxe device, as the oracle measured).
    #[arg(long, default_value_t = 16)]
    pub gsi_index: u32,
    /// Print the summary as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Keep sent.pcap and, per liveness loss, loss-N.pcap (the frames since the last good
    /// probe) in this directory; with --reset-cmd also loss-N-min.pcap (the same minimised).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// A shell command (sh -c) that resets the peer (e.g. re-creates its rxe device) and exits
    /// 0 once the peer answers again. With it, each liveness loss is minimised by delta
    /// debugging: reset, replay a subsequence of the frames since the last good probe, probe;
    /// then one more reset and the campaign goes on. A failing reset ends the run (exit 1).
    /// Without it losses are kept un-minimised and the campaign goes on against the dead peer.
    #[arg(long)]
    pub reset_cmd: Option<String>,
    /// At most this many resets to minimise one loss (1..=1000; one more to go on).
    #[arg(long, default_value_t = 40)]
    pub max_resets: u32,
    /// Seconds one --reset-cmd may take before it is killed and counted as failed.
    #[arg(long, default_value_t = 120.0)]
    pub reset_timeout: f64,
    /// No status lines.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Also send UD SENDs longer than a MAD to QPN 1 (on 6.1 they put the peer's GSI QP in the
    /// error state: every later probe goes unanswered; 6.12 survives them). With `--target cm`:
    /// a mutated CM message may be a MAD with trailing bytes.
    #[arg(long)]
    pub kill_gsi: bool,
    /// Also send IPv6 frames whose UDP payload is shorter than a BTH: rxe_rcv drops them
    /// before it clears pkt->qp and puts a "QP" made of the IPv6 control block's bytes, and
    /// the peer's kernel oopses (spec/rxe-acceptance.md §2).
    #[arg(long)]
    pub kill_rxe: bool,
}

/// The one source of every random choice: roce-wire's SplitMix64 (the workspace's one
/// PRNG), with the fuzz peer's own reductions (a modulo, as recorded runs drew them).
#[derive(Debug, Clone)]
pub struct Rng(SplitMix64);

impl Rng {
    /// Seeded.
    pub fn new(seed: u64) -> Rng {
        Rng(SplitMix64::new(seed))
    }
    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    /// Uniform below `n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    /// True with `percent` % probability.
    pub fn pct(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// Who sends to whom, and how the peer is modelled.
#[derive(Debug, Clone, Copy)]
pub struct Endpoints {
    /// Our MAC.
    pub src_mac: [u8; 6],
    /// The peer's MAC.
    pub dst_mac: [u8; 6],
    /// Our address.
    pub src: IpAddr,
    /// The peer's address.
    pub dst: IpAddr,
    /// The peer's kernel.
    pub kernel: RxeKernel,
    /// The peer's GSI QP pool index.
    pub gsi_index: u32,
}

impl Endpoints {
    /// The predictor's view of the peer: one address, the GSI QP.
    pub fn predict(&self, frame: &[u8]) -> RxeVerdict {
        let addrs = [self.dst];
        let qps = [RxeQp { index: self.gsi_index, qp_type: RxeQpType::Gsi, qkey: GSI_QKEY }];
        rxe_accepts(frame, &RxePeer { mac: self.dst_mac, addrs: &addrs, qps: &qps, kernel: self.kernel })
    }
}

/// The frame generator.
#[derive(Debug, Clone)]
pub struct Generator {
    /// Keep UD SENDs to QPN 1 within a MAD's 256 bytes (true unless `--kill-gsi`).
    pub spare_gsi: bool,
    /// Send no IPv6 frame whose UDP payload is shorter than a BTH (true unless `--kill-rxe`).
    pub spare_rxe: bool,
    rng: Rng,
    ep: Endpoints,
    psn: u32,
    tid: u64,
}

const PROBE_TID_TAG: u64 = 0xF022_0000_0000_0000;

impl Generator {
    /// A generator for `ep` seeded with `seed`.
    pub fn new(seed: u64, ep: Endpoints) -> Generator {
        Generator { spare_gsi: true, spare_rxe: true, rng: Rng::new(seed), ep, psn: 0, tid: 0 }
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.rng.below(xs.len() as u64) as usize]
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.rng.next_u64() as u8).collect()
    }

    fn mad(&mut self) -> Vec<u8> {
        self.tid += 1;
        let tid = self.tid;
        match self.rng.below(4) {
            0 | 1 => {
                let method =
                    self.pick(&[Method::Get, Method::Set, Method::Delete, Method::GetTable, Method::Unknown(0x7f)]);
                let a = self.pick(&[attr::MC_MEMBER_RECORD, attr::MC_MEMBER_RECORD, 0x0011, 0x0035, 0xffff]);
                let rec = McMemberRecord {
                    mgid: Gid::from_ipv4(Ipv4Addr::new(239, 1, self.rng.below(256) as u8, 3)),
                    port_gid: Gid::from(self.ep.src),
                    q_key: self.rng.next_u64() as u32,
                    p_key: self.pick(&[0xffff, 0x7fff, 0]),
                    join_state: JoinState::FULL_MEMBER,
                    ..McMemberRecord::default()
                };
                let mask = self.pick(&[ComponentMask::KERNEL_JOIN.0, 0, u64::MAX]);
                SaMad::request(method, tid, a, mask, SaData::mc_member(rec)).to_bytes().to_vec()
            }
            2 => {
                let mut m = self.bytes(256);
                m[0] = 1; // base version: the MAD layer drops others early
                m[1] = self.pick(&[0x03, 0x07, 0x04, m[1]]);
                m
            }
            _ => {
                let mut r = wire_cm::ReqRepr { local_comm_id: self.rng.next_u64() as u32, ..Default::default() };
                r.service_id = self.rng.next_u64();
                r.partition_key = 0xffff;
                CmMessage::Req(r).to_mad(tid).to_bytes().to_vec()
            }
        }
    }

    fn repr_frame(&self, b: bth::Repr, ext: ExtHeaders, payload: &[u8], auto_pad: bool) -> Vec<u8> {
        let mut r = FrameRepr::new(self.ep.src_mac, self.ep.dst_mac, self.ep.src, self.ep.dst, b, ext, payload);
        r.udp.source_port = rxe_udp_sport(1);
        if auto_pad {
            r = r.with_auto_pad();
        }
        let mut out = vec![0u8; r.buffer_len()];
        match r.emit(&mut out) {
            Ok(n) => out.truncate(n),
            Err(_) => out.clear(),
        }
        out
    }

    /// One fuzzed frame. Frames rxe drops for an unknown opcode or a length shorter than its
    /// headers, pad and ICRC are sent too: before 6.1.175 / 6.12.88 they read out of bounds
    /// (CVE-2026-46133; spec/rxe-acceptance.md §1).
    /// Over IPv6 a frame that rxe drops as shorter than a BTH crashes the peer (6.1.192 and
    /// 6.12.117: spec/rxe-acceptance.md §2): drawn again unless `spare_rxe` is off.
    pub fn next_frame(&mut self) -> Vec<u8> {
        loop {
            let f = self.draw();
            if f.is_empty() {
                continue;
            }
            if self.spare_rxe && self.ep.dst.is_ipv6() && self.ep.predict(&f) == Err(RxeDrop::ShortBth) {
                continue;
            }
            return f;
        }
    }

    fn draw(&mut self) -> Vec<u8> {
        self.psn = (self.psn + 1) & 0xff_ffff;
        let kind = self.rng.below(100);
        let mut f = if kind < 20 {
            // a MAD to QP1, as the MAD layer expects it (or nearly)
            let mut b = bth::Repr::new(Opcode::UdSendOnly, 1, self.psn);
            b.ack_req = self.rng.pct(50);
            if self.rng.pct(10) {
                b.pkey = self.pick(&[0x7fff, 0x8001, 0, 0xfffe]);
            }
            let qkey = if self.rng.pct(90) { GSI_QKEY } else { self.rng.next_u64() as u32 };
            let mad = self.mad();
            self.repr_frame(b, ExtHeaders::deth(qkey, 1), &mad, true)
        } else {
            // every opcode, QPN, key, TVer, pad and length
            let table: Vec<Opcode> = Opcode::ALL.to_vec();
            let op = if self.rng.pct(5) {
                // RD opcodes (rxe's table has them; the crate keeps them as unknown)
                Opcode::from(0x40 + self.rng.below(0x15) as u8)
            } else if self.rng.pct(40) {
                self.pick(&[Opcode::UdSendOnly, Opcode::UdSendOnlyWithImmediate])
            } else if self.rng.pct(10) {
                Opcode::from(self.rng.next_u64() as u8)
            } else {
                self.pick(&table)
            };
            let qpn = match self.rng.below(10) {
                0..=3 => 1,
                4 => MULTICAST_QPN,
                5 => 0,
                6 => self.pick(&[16, 17, 18, self.ep.gsi_index]),
                _ => self.rng.next_u64() as u32 & 0xff_ffff,
            };
            let mut b = bth::Repr::new(op, qpn, self.rng.next_u64() as u32 & 0xff_ffff);
            let r16 = self.rng.next_u64() as u16;
            b.pkey = self.pick(&[0xffff, 0xffff, 0xffff, 0x7fff, 0x8000, 0, r16]);
            b.solicited = self.rng.pct(20);
            b.mig_req = self.rng.pct(20);
            b.ack_req = self.rng.pct(50);
            b.fecn = self.rng.pct(5);
            b.becn = self.rng.pct(5);
            if self.rng.pct(5) {
                b.tver = (self.rng.below(15) + 1) as u8;
            }
            let mut ext = ExtHeaders::default();
            let mask = op.ext_headers();
            if mask.contains(roce_wire::ext::ExtMask::DETH) {
                let r32 = self.rng.next_u64() as u32;
                let qkey = self.pick(&[GSI_QKEY, GSI_QKEY, GSI_QKEY, 0, r32]);
                ext = ExtHeaders::deth(qkey, self.rng.next_u64() as u32 & 0xff_ffff);
            }
            // the other extension headers as random bytes of their length (in the payload)
            let mut payload = self.bytes(mask.len().saturating_sub(if ext.deth.is_some() { 8 } else { 0 }));
            let mut n = self.pick(&[0usize, 1, 2, 3, 4, 8, 64, 256, 1000]);
            if self.spare_gsi && (qpn == 1 || qpn == self.ep.gsi_index) && op.transport() == bth::Transport::Ud {
                // A UD SEND to the GSI QP (QPN 1 or its pool index) longer than a MAD (256
                // bytes) overflows the MAD layer's receive buffer: on 6.1 the GSI QP goes to the
                // error state and the peer's MAD and CM services stop (spec/rxe-acceptance.md);
                // sent only with --kill-gsi.
                let room = 256usize.saturating_sub(payload.len());
                n = n.min(room);
            }
            payload.extend(self.bytes(n));
            let auto = self.rng.pct(80);
            if !auto {
                b.pad_count = self.rng.below(4) as u8;
            }
            // the named extension headers other than DETH are emitted from the Reprs' defaults
            let ext = ExtHeaders { deth: ext.deth, ..ExtHeaders::default() };
            let mut b2 = b;
            if mask.0 & !roce_wire::ext::ExtMask::DETH.0 != 0 {
                // keep the opcode, but let the payload carry the other headers' bytes
                b2.opcode = op;
            }
            self.raw_opcode_frame(b2, ext, &payload, auto)
        };
        if f.is_empty() {
            return f;
        }
        // rxe's own ICRC where it differs from the standard one (RC FLUSH, RD ACK), for half
        // of those frames: the other half shows that the standard one is refused
        let bth_at = if self.ep.dst.is_ipv4() { 14 + 20 + 8 } else { 14 + 40 + 8 };
        if matches!(f.get(bth_at), Some(&0x1c) | Some(&0x51) | Some(&0x52)) && self.rng.pct(50) {
            if let Some(c) = roce_wire::rxe_accept::rxe_expected_icrc(&f, self.ep.kernel) {
                let n = f.len();
                f[n - 4..].copy_from_slice(&c.to_le_bytes());
            }
        }
        // below the RoCE layer: 15 % of the frames get one mutation
        if self.rng.pct(15) {
            self.mutate(&mut f);
        } else if self.rng.pct(8) {
            // a wrong ICRC
            let n = f.len();
            f[n - 1 - self.rng.below(4) as usize] ^= 1 << self.rng.below(8);
        }
        f
    }

    /// Emit `b` with `ext` (DETH only) and `payload`; the BTH's opcode may name extension
    /// headers that are then bytes of the payload (emitted with the DETH-only layout and the
    /// opcode patched in, the ICRC recomputed).
    fn raw_opcode_frame(&self, b: bth::Repr, ext: ExtHeaders, payload: &[u8], auto_pad: bool) -> Vec<u8> {
        let carrier = if ext.deth.is_some() { Opcode::UdSendOnly } else { Opcode::RcSendOnly };
        let mut b0 = b;
        b0.opcode = carrier;
        let mut f = self.repr_frame(b0, ext, payload, auto_pad);
        if f.is_empty() {
            return f;
        }
        let bth_at = if self.ep.dst.is_ipv4() { 14 + 20 + 8 } else { 14 + 40 + 8 };
        f[bth_at] = u8::from(b.opcode);
        fix_icrc(&mut f, self.ep.dst.is_ipv6());
        f
    }

    fn mutate(&mut self, f: &mut Vec<u8>) {
        let v6 = self.ep.dst.is_ipv6();
        let ip = 14;
        let udp = if v6 { ip + 40 } else { ip + 20 };
        match self.rng.below(9) {
            0 => {
                // truncate the frame (IP and UDP lengths stay: the kernel sees a short packet)
                let cut = self.rng.below(f.len() as u64) as usize;
                f.truncate(cut.max(14));
            }
            1 => {
                // UDP length changed, ICRC recomputed where it now ends
                let ulen = u16::from_be_bytes([f[udp + 4], f[udp + 5]]);
                let d = self.pick(&[-8i32, -4, -1, 1, 4, 12, -(i32::from(ulen)) + 20]);
                let nl = (i32::from(ulen) + d).clamp(0, 0xffff) as u16;
                f[udp + 4..udp + 6].copy_from_slice(&nl.to_be_bytes());
            }
            2 => f[udp + 6..udp + 8].copy_from_slice(&(self.rng.next_u64() as u16).to_be_bytes()),
            3 => {
                let at = udp + 2;
                f[at..at + 2].copy_from_slice(&self.pick(&[4790u16, 4792, 0, 4791]).to_be_bytes());
            }
            4 if !v6 => {
                // IPv4 flags/fragment offset
                f[ip + 6] = self.pick(&[0x20, 0x00, 0x40, 0x00]);
                f[ip + 7] = self.pick(&[0, 1]);
                ipv4_checksum(f);
            }
            5 if !v6 => {
                // a broken IPv4 header checksum
                f[ip + 10] ^= 0x01;
            }
            6 => {
                // TTL / hop limit, TOS / traffic class: masked by the ICRC
                if v6 {
                    f[ip + 7] = self.rng.next_u64() as u8;
                    f[ip + 1] ^= 0x0f;
                } else {
                    f[ip + 8] = self.rng.next_u64() as u8;
                    f[ip + 1] = self.rng.next_u64() as u8;
                    ipv4_checksum(f);
                }
            }
            7 => {
                // another destination MAC or EtherType
                if self.rng.pct(50) {
                    f[0] ^= 0x02;
                } else {
                    f[12] = 0x88;
                    f[13] = 0xb5;
                }
            }
            _ => {
                // one random bit anywhere in BTH..ICRC, then the ICRC fixed or not
                let bth = udp + 8;
                if f.len() > bth {
                    let at = bth + self.rng.below((f.len() - bth) as u64) as usize;
                    f[at] ^= 1 << self.rng.below(8);
                    if self.rng.pct(70) {
                        fix_icrc(f, v6);
                    }
                }
            }
        }
    }

    /// A handful of frames at the edges of `rxe_rcv`'s length check `paylen < header_size +
    /// bth_pad + ICRC` and its unknown-opcode check (spec/rxe-acceptance.md §1 and the 0x4E
    /// class), each with a right ICRC: RD READ RESPONSE MIDDLE (0x4E), RC SEND ONLY and UD
    /// SEND ONLY whose PadCnt is larger than the bytes after their headers (dropped), the same
    /// with the pad's bytes present (counted), and opcode 0xFF to QPN 0xFFFFFF (dropped).
    pub fn length_edge_frames(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let rd = |after: usize| vec![0u8; 4 + after];
        for (op, qpn, deth, payload, pad) in [
            (0x4e, MULTICAST_QPN, false, rd(0), 3u8),
            (0x4e, MULTICAST_QPN, false, rd(0), 1),
            (0x4e, MULTICAST_QPN, false, rd(4), 3),
            (0x4e, MULTICAST_QPN, false, rd(0), 0),
            (0x04, MULTICAST_QPN, false, vec![], 2),
            (0x04, MULTICAST_QPN, false, vec![0; 4], 3),
            (0x64, 1, true, vec![], 3),
            (0x64, 1, true, vec![0; 4], 3),
            (0xff, MULTICAST_QPN, false, vec![0; 8], 0),
        ] {
            self.psn = (self.psn + 1) & 0xff_ffff;
            let b = bth::Repr::new(Opcode::from(op), qpn, self.psn);
            let ext = if deth { ExtHeaders::deth(GSI_QKEY, 1) } else { ExtHeaders::default() };
            let mut f = self.raw_opcode_frame(b, ext, &payload, false);
            if f.is_empty() {
                continue;
            }
            let bth_at = if self.ep.dst.is_ipv4() { 14 + 20 + 8 } else { 14 + 40 + 8 };
            f[bth_at + 1] = (f[bth_at + 1] & !0x30) | (pad << 4);
            fix_icrc(&mut f, self.ep.dst.is_ipv6());
            out.push(f);
        }
        out
    }

    /// A liveness probe: an SA Get(MCMemberRecord) to QP1; returns its TID and frame.
    pub fn sa_probe(&mut self) -> (u64, Vec<u8>) {
        self.tid += 1;
        let tid = PROBE_TID_TAG | self.tid;
        let rec = McMemberRecord {
            mgid: Gid::from_ipv4(Ipv4Addr::new(239, 1, 2, 3)),
            port_gid: Gid::from(self.ep.src),
            join_state: JoinState::FULL_MEMBER,
            ..McMemberRecord::default()
        };
        let mad = SaMad::request(
            Method::Get,
            tid,
            attr::MC_MEMBER_RECORD,
            ComponentMask::KERNEL_JOIN.0,
            SaData::mc_member(rec),
        );
        self.psn = (self.psn + 1) & 0xff_ffff;
        let mut b = bth::Repr::new(Opcode::UdSendOnly, 1, self.psn);
        b.ack_req = true;
        (tid, self.repr_frame(b, ExtHeaders::deth(GSI_QKEY, 1), &mad.to_bytes(), true))
    }

    /// A liveness probe: a CM REQ to a service nobody listens on (RDMA_PS_TCP port 1);
    /// returns its local communication ID and frame.
    pub fn cm_probe(&mut self) -> (u32, Vec<u8>) {
        self.tid += 1;
        let comm = (self.rng.next_u64() as u32) | 1;
        let mut m = wire_cm::ReqRepr {
            local_comm_id: comm,
            service_id: cma_hdr::service_id(cma_hdr::RDMA_PS_TCP, 1),
            local_ca_guid: 0x0252_00ff_fe00_0001,
            local_qpn: 0x11,
            responder_resources: 1,
            initiator_depth: 1,
            remote_cm_response_timeout: 20,
            starting_psn: 1,
            local_cm_response_timeout: 20,
            retry_count: 7,
            partition_key: 0xffff,
            path_mtu: 3,
            rnr_retry_count: 7,
            max_cm_retries: 15,
            ..Default::default()
        };
        m.primary_path.local_lid = 0xffff;
        m.primary_path.remote_lid = 0xffff;
        m.primary_path.local_gid = Gid::from_ip(self.ep.src);
        m.primary_path.remote_gid = Gid::from_ip(self.ep.dst);
        m.primary_path.hop_limit = 64;
        m.primary_path.local_ack_timeout = 18;
        let hdr = match (self.ep.src, self.ep.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => cma_hdr::Repr::new_v4(s, 40000, d),
            (s, d) => {
                let v6 = |a: IpAddr| match a {
                    IpAddr::V6(x) => x,
                    IpAddr::V4(x) => x.to_ipv6_mapped(),
                };
                cma_hdr::Repr::new_v6(v6(s), 40000, v6(d))
            }
        };
        hdr.emit_bytes(&mut m.private_data);
        let mad = CmMessage::Req(m).to_mad(PROBE_TID_TAG | self.tid).to_bytes();
        self.psn = (self.psn + 1) & 0xff_ffff;
        let mut b = bth::Repr::new(Opcode::UdSendOnly, 1, self.psn);
        b.ack_req = true;
        (comm, self.repr_frame(b, ExtHeaders::deth(GSI_QKEY, 1), &mad, true))
    }
}

/// What a liveness check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Liveness {
    /// A probe was answered.
    Alive,
    /// Two probes went unanswered (loss-N.pcap written, minimised with --reset-cmd).
    Lost,
    /// A --reset-cmd failed: the run ends.
    RunEnds,
}

/// What sending a frame needs besides the socket: the peer (for the predictor), the run's
/// start (pcap timestamps) and the gap between frames (replays).
#[derive(Debug, Clone, Copy)]
struct SendCtx {
    ep: Endpoints,
    t0: Instant,
    gap: Duration,
}

/// Probe the peer (probe `n_probe`: odd an SA Get, even a CM REQ to a closed service; one
/// retry, 3 s each); every other frame received meanwhile goes to `other`. On a loss keep
/// loss-N.pcap (the frames since the last good probe) and, with --reset-cmd, minimise it.
/// Err: receiving failed.
#[allow(clippy::too_many_arguments)]
fn check_liveness(
    a: &Args,
    sock: &mut RawSocket,
    pcap: &mut Option<PcapFileWriter<roce_net::pcap::CaptureFile>>,
    ctx: SendCtx,
    gen: &mut Generator,
    n_probe: u64,
    since_probe: &[Vec<u8>],
    s: &mut Summary,
    other: &mut dyn FnMut(&[u8]),
) -> Result<Liveness, String> {
    let mut buf = vec![0u8; roce_net::device::MAX_FRAME_LEN];
    for _attempt in 0..2 {
        let (probe, f) = if n_probe % 2 == 1 {
            let (t, f) = gen.sa_probe();
            (Probe::Sa(t), f)
        } else {
            let (c, f) = gen.cm_probe();
            (Probe::Cm(c), f)
        };
        if !send_counted(&f, s, sock, pcap, ctx.ep, ctx.t0) {
            continue;
        }
        s.probes_sent += 1;
        let answered = wait_answer_or(sock, &probe, Duration::from_secs(3), &mut buf, other)
            .map_err(|e| format!("receive on {}: {e}", a.iface))?;
        if answered {
            s.probes_answered += 1;
            return Ok(Liveness::Alive);
        }
    }
    s.peer_unresponsive += 1;
    eprintln!(
        "roce fuzz-peer: liveness lost after frame {} (no answer to two probes); {} frames since the last good probe",
        s.sent,
        since_probe.len()
    );
    if let Some(dir) = &a.out {
        write_pcap(&dir.join(format!("loss-{}.pcap", s.peer_unresponsive)), since_probe);
    }
    let Some(cmd) = &a.reset_cmd else { return Ok(Liveness::Lost) };
    let r = minimise_loss(a, cmd, sock, gen, since_probe, ctx.gap, s);
    if let Some(m) = s.minimised.last() {
        if !a.quiet {
            eprintln!(
                "roce fuzz-peer: loss {} minimised: {} frames -> {} with {} resets",
                m.loss,
                m.frames,
                m.min_frames.map_or("not reproduced".to_string(), |n| n.to_string()),
                m.resets
            );
        }
    }
    match r {
        Ok(Some(min)) => {
            if let Some(dir) = &a.out {
                write_pcap(&dir.join(format!("loss-{}-min.pcap", s.peer_unresponsive)), &min);
            }
            Ok(Liveness::Lost)
        }
        Ok(None) => Ok(Liveness::Lost),
        Err(e) => {
            eprintln!("roce fuzz-peer: {e}; the run ends here");
            s.reset_error = Some(e);
            Ok(Liveness::RunEnds)
        }
    }
}

/// Send `f`, count it (sent, the predictor's verdict) and keep it in `pcap`; a send error is
/// counted, never reported as sent. True when sent.
fn send_counted(
    f: &[u8],
    s: &mut Summary,
    sock: &mut RawSocket,
    pcap: &mut Option<PcapFileWriter<roce_net::pcap::CaptureFile>>,
    ep: Endpoints,
    t0: Instant,
) -> bool {
    match sock.send(f) {
        Ok(()) => {
            s.sent += 1;
            match ep.predict(f) {
                Ok(_) => s.predicted_accept += 1,
                Err(d) => *s.predicted_drop.entry(d.name().to_string()).or_default() += 1,
            }
            if let Some(w) = pcap.as_mut() {
                let _ = w.write(t0.elapsed(), f);
            }
            true
        }
        Err(_) => {
            s.send_errors += 1;
            false
        }
    }
}

/// Recompute the ICRC of a frame built by the generator (no VLAN) over what its UDP length
/// covers now; frames too short for one are left alone.
fn fix_icrc(f: &mut [u8], v6: bool) {
    let ip = 14;
    let iph = if v6 { 40 } else { 20 };
    let udp = ip + iph;
    if f.len() < udp + 8 {
        return;
    }
    let ulen = usize::from(u16::from_be_bytes([f[udp + 4], f[udp + 5]]));
    let end = udp + ulen;
    if ulen < 8 + 12 + 4 || end > f.len() {
        return;
    }
    let version = if v6 { roce_wire::icrc::IpVersion::V6 } else { roce_wire::icrc::IpVersion::V4 };
    if let Ok(c) = roce_wire::icrc::compute(&f[ip..end - 4], version, iph) {
        f[end - 4..end].copy_from_slice(&c.to_le_bytes());
    }
}

fn ipv4_checksum(f: &mut [u8]) {
    f[24] = 0;
    f[25] = 0;
    let mut sum = 0u32;
    for c in f[14..34].chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

/// Delta debugging (Zeller's ddmin) of a liveness loss: the shortest subsequence of `frames`
/// (order kept) for which `loses` still returns true, within `budget` calls of `loses` (each
/// one a peer reset and a replay, so the budget bounds the resets). `loses` is first asked
/// about the whole sequence; when that does not lose (a loss that does not reproduce), the
/// result is `None`. The second value is the number of calls made. A result is 1-minimal
/// (no single frame can be removed) when the budget was not exhausted.
pub fn ddmin<T: Clone>(frames: &[T], budget: usize, mut loses: impl FnMut(&[T]) -> bool) -> (Option<Vec<T>>, usize) {
    let mut calls = 0usize;
    let mut test = |xs: &[T], calls: &mut usize| {
        *calls += 1;
        loses(xs)
    };
    if budget == 0 || !test(frames, &mut calls) {
        return (None, calls);
    }
    let mut cur: Vec<T> = frames.to_vec();
    let mut n = 2usize;
    'outer: while cur.len() >= 2 && calls < budget {
        let chunk = cur.len().div_ceil(n);
        let parts: Vec<(usize, usize)> =
            (0..cur.len()).step_by(chunk).map(|a| (a, (a + chunk).min(cur.len()))).collect();
        // a chunk alone
        for &(a, b) in &parts {
            if calls >= budget {
                break 'outer;
            }
            if test(&cur[a..b], &mut calls) {
                cur = cur[a..b].to_vec();
                n = 2;
                continue 'outer;
            }
        }
        // everything but one chunk
        if parts.len() > 2 {
            for &(a, b) in &parts {
                if calls >= budget {
                    break 'outer;
                }
                let rest: Vec<T> = cur[..a].iter().chain(&cur[b..]).cloned().collect();
                if test(&rest, &mut calls) {
                    cur = rest;
                    n = (n - 1).max(2);
                    continue 'outer;
                }
            }
        }
        if n >= cur.len() {
            break;
        }
        n = (2 * n).min(cur.len());
    }
    (Some(cur), calls)
}

/// What a probe's answer looks like: a GetResp with the probe's TID, or a REJ to its comm ID.
fn answers(frame_bytes: &[u8], probe: &Probe) -> bool {
    let Ok(f) = frame::parse(frame_bytes) else { return false };
    let payload = f.repr.payload;
    match *probe {
        Probe::Sa(tid) => SaMad::parse(payload).is_ok_and(|m| m.header.response && m.header.transaction_id == tid),
        Probe::Cm(comm) => {
            let Ok(m) = roce_wire::mad::MadRepr::parse_bytes(payload) else { return false };
            m.header.attribute_id == wire_cm::attr::REJ
                && payload.len() >= 24 + 8
                && u32::from_be_bytes([payload[28], payload[29], payload[30], payload[31]]) == comm
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Probe {
    Sa(u64),
    Cm(u32),
}

/// The end summary.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Frames the device accepted (probes included).
    pub sent: u64,
    /// Frames the device refused (never counted as sent).
    pub send_errors: u64,
    /// Frames predicted to be counted in rcvd_pkts (probes included).
    pub predicted_accept: u64,
    /// Probes sent.
    pub probes_sent: u64,
    /// Probes answered.
    pub probes_answered: u64,
    /// Liveness losses (a probe and its retry unanswered).
    pub peer_unresponsive: u64,
    /// The seed.
    pub seed: u64,
    /// Seconds run.
    pub duration_s: f64,
    /// Predicted drops by step.
    pub predicted_drop: std::collections::BTreeMap<String, u64>,
    /// Resets of the peer by `--reset-cmd` (minimisation and going on).
    pub resets: u64,
    /// Per liveness loss minimised with `--reset-cmd`.
    pub minimised: Vec<Minimised>,
    /// Why the last `--reset-cmd` failed (the run ended there).
    pub reset_error: Option<String>,
    /// `--target cm`: what the CM fuzzer sent and the kernel answered.
    pub cm: Option<cm::CmStats>,
    /// `--log-cmd` runs that failed (exit status, time out).
    pub log_errors: u64,
}

/// One liveness loss minimised against the peer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Minimised {
    /// The loss's number (loss-N.pcap).
    pub loss: u64,
    /// Frames since the last good probe.
    pub frames: usize,
    /// Frames of the minimised sequence; None when replaying all of them on a reset peer did
    /// not lose liveness again (or the minimisation was cut short before that was known).
    pub min_frames: Option<usize>,
    /// Resets (replays) the minimisation used.
    pub resets: usize,
}

impl Summary {
    /// The summary as one JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = self.frames_json();
        if let (Some(cm), Some(o)) = (&self.cm, v.as_object_mut()) {
            o.insert("cm".to_string(), cm.to_json());
            o.insert("log_errors".to_string(), self.log_errors.into());
        }
        v
    }

    fn frames_json(&self) -> serde_json::Value {
        serde_json::json!({
            "sent": self.sent,
            "send_errors": self.send_errors,
            "predicted_accept": self.predicted_accept,
            "probes_sent": self.probes_sent,
            "probes_answered": self.probes_answered,
            "peer_unresponsive": self.peer_unresponsive,
            "seed": self.seed,
            "duration_s": self.duration_s,
            "predicted_drop": self.predicted_drop,
            "resets": self.resets,
            "minimised": self.minimised.iter().map(|m| serde_json::json!({
                "loss": m.loss, "frames": m.frames, "min_frames": m.min_frames, "resets": m.resets,
            })).collect::<Vec<_>>(),
            "reset_error": self.reset_error,
        })
    }
}

static SIGNALLED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNALLED.store(sig, Ordering::Relaxed);
}

/// The peer's MAC: ARP for IPv4, a neighbour solicitation for IPv6 (the frames the engine's
/// neighbour table sends, from roce-wire's l2 module); three tries, 1 s apart.
fn resolve_mac(sock: &mut RawSocket, our_mac: [u8; 6], src: IpAddr, dst: IpAddr) -> io::Result<Option<[u8; 6]>> {
    use roce_wire::l2::{self, ArpFrame, EmitFrame, L2Packet, NdiscFrame};
    use roce_wire::ndisc::NdiscMessage;
    let emit = |f: &dyn EmitFrame| {
        let mut out = vec![0u8; f.buffer_len()];
        let n = f.emit(&mut out);
        out.truncate(n);
        out
    };
    let request = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => emit(&ArpFrame::new(roce_wire::arp::request(our_mac, s, d))),
        (IpAddr::V6(s), IpAddr::V6(d)) => emit(&NdiscFrame::solicit(our_mac, s, d)),
        _ => return Err(io::Error::other("-b and --peer are of different address families")),
    };
    let mut buf = vec![0u8; roce_net::device::MAX_FRAME_LEN];
    for _ in 0..3 {
        sock.send(&request)?;
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(1) {
            let Some(n) = sock.recv(&mut buf)? else {
                std::thread::sleep(Duration::from_millis(2));
                continue;
            };
            let Ok(f) = l2::parse_frame(&buf[..n]) else { continue };
            match (&f.packet, dst) {
                (L2Packet::Arp(r), IpAddr::V4(d)) => {
                    let (op, smac, sip, _, _) = roce_wire::arp::fields(r);
                    if sip == d && op == roce_wire::arp::ArpOperation::Reply {
                        return Ok(Some(smac));
                    }
                }
                (L2Packet::Ndisc { msg: m @ NdiscMessage::NeighborAdvert { target_addr, .. }, .. }, IpAddr::V6(d))
                    if *target_addr == d =>
                {
                    return Ok(Some(m.lladdr().unwrap_or(f.ethernet.source)));
                }
                _ => {}
            }
        }
    }
    Ok(None)
}

fn wait_answer(sock: &mut RawSocket, probe: &Probe, timeout: Duration, buf: &mut [u8]) -> io::Result<bool> {
    wait_answer_or(sock, probe, timeout, buf, &mut |_| {})
}

/// [`wait_answer`], handing every other frame received meanwhile to `other`.
fn wait_answer_or(
    sock: &mut RawSocket,
    probe: &Probe,
    timeout: Duration,
    buf: &mut [u8],
    other: &mut dyn FnMut(&[u8]),
) -> io::Result<bool> {
    let t0 = Instant::now();
    while t0.elapsed() < timeout {
        match sock.recv(buf)? {
            Some(n) if answers(&buf[..n], probe) => return Ok(true),
            Some(n) => other(&buf[..n]),
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    }
    Ok(false)
}

/// Run `cmd` with `sh -c` in its own process group; Ok(time taken) when it exits 0 within
/// `timeout`. Its standard output goes to our stderr (stdout carries only the summary). On
/// timeout or a signal to us its process group is killed.
fn reset_peer(cmd: &str, timeout: Duration) -> Result<Duration, String> {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let t0 = Instant::now();
    let mut child = Command::new("sh")
        .args(["-c", cmd])
        .stdin(Stdio::null())
        .stdout(Stdio::from(io::stderr()))
        .process_group(0)
        .spawn()
        .map_err(|e| format!("--reset-cmd: sh: {e}"))?;
    loop {
        match child.try_wait() {
            Ok(Some(st)) if st.success() => return Ok(t0.elapsed()),
            Ok(Some(st)) => return Err(format!("--reset-cmd exited with {st}")),
            Ok(None) => {}
            Err(e) => return Err(format!("--reset-cmd: wait: {e}")),
        }
        let why = if t0.elapsed() >= timeout {
            Some(format!("--reset-cmd did not finish within {} s", timeout.as_secs_f64()))
        } else if SIGNALLED.load(Ordering::Relaxed) != 0 {
            Some("--reset-cmd interrupted by a signal".to_string())
        } else {
            None
        };
        if let Some(why) = why {
            // SAFETY: kill(2) on the process group we created; no memory is touched.
            unsafe {
                libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL);
            }
            let _ = child.wait();
            return Err(why);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether the peer's GSI QP answers an SA Get (one retry, 3 s each).
fn gsi_alive(sock: &mut RawSocket, gen: &mut Generator, buf: &mut [u8]) -> io::Result<bool> {
    for _ in 0..2 {
        let (tid, f) = gen.sa_probe();
        if sock.send(&f).is_err() {
            continue;
        }
        if wait_answer(sock, &Probe::Sa(tid), Duration::from_secs(3), buf)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Minimise one liveness loss with ddmin: each candidate is judged on a freshly reset peer
/// (which must answer a probe first) by whether the probe after replaying it goes unanswered.
/// Then one more reset so that the campaign can go on. Err: a reset failed (or the peer did
/// not answer after one); the run ends.
fn minimise_loss(
    a: &Args,
    cmd: &str,
    sock: &mut RawSocket,
    gen: &mut Generator,
    frames: &[Vec<u8>],
    gap: Duration,
    s: &mut Summary,
) -> Result<Option<Vec<Vec<u8>>>, String> {
    let timeout = Duration::from_secs_f64(a.reset_timeout);
    let mut buf = vec![0u8; roce_net::device::MAX_FRAME_LEN];
    let mut failed: Option<String> = None;
    let mut reset = |sock: &mut RawSocket, gen: &mut Generator, s: &mut Summary| -> Result<(), String> {
        reset_peer(cmd, timeout)?;
        s.resets += 1;
        match gsi_alive(sock, gen, &mut buf) {
            Ok(true) => Ok(()),
            Ok(false) => Err("the peer does not answer a probe after --reset-cmd".to_string()),
            Err(e) => Err(format!("receive on {}: {e}", a.iface)),
        }
    };
    let (min, calls) = ddmin(frames, a.max_resets as usize, |xs| {
        if failed.is_some() {
            return false;
        }
        if let Err(e) = reset(sock, gen, s) {
            failed = Some(e);
            return false;
        }
        for f in xs {
            let _ = sock.send(f);
            std::thread::sleep(gap);
        }
        let mut b = vec![0u8; roce_net::device::MAX_FRAME_LEN];
        match gsi_alive(sock, gen, &mut b) {
            Ok(alive) => !alive,
            Err(e) => {
                failed = Some(format!("receive on {}: {e}", a.iface));
                false
            }
        }
    });
    // a cut-short minimisation keeps what was verified, unless the whole never was
    let min = if failed.is_some() && calls <= 1 { None } else { min };
    s.minimised.push(Minimised {
        loss: s.peer_unresponsive,
        frames: frames.len(),
        min_frames: min.as_ref().map(Vec::len),
        resets: calls,
    });
    if let Some(e) = failed {
        return Err(e);
    }
    reset(sock, gen, s)?;
    Ok(min)
}

fn write_pcap(p: &std::path::Path, frames: &[Vec<u8>]) {
    match PcapFileWriter::create(p) {
        Ok(mut w) => {
            for (i, f) in frames.iter().enumerate() {
                let _ = w.write(Duration::from_millis(i as u64), f);
            }
            let _ = w.finish();
        }
        Err(e) => eprintln!("roce fuzz-peer: {}: {e}", p.display()),
    }
}

/// Run `roce fuzz-peer`.
pub fn run(args: Args) -> ExitCode {
    let a = &args;
    let code = |c: u8| ExitCode::from(c);
    if !a.duration.is_finite() || a.duration < 0.0 || a.duration > MAX_DURATION_S {
        eprintln!("roce fuzz-peer: --duration must be between 0 and {MAX_DURATION_S} s, not {}", a.duration);
        return code(exit::USAGE);
    }
    if !a.rate.is_finite() || a.rate <= 0.0 || a.rate > 1e6 {
        eprintln!("roce fuzz-peer: --rate must be above 0 and at most 1000000 frames/s, not {}", a.rate);
        return code(exit::USAGE);
    }
    if a.probe_every == 0 || a.probe_every > 1_000_000 {
        eprintln!("roce fuzz-peer: --probe-every must be between 1 and 1000000");
        return code(exit::USAGE);
    }
    if a.max_resets == 0 || a.max_resets > 1000 {
        eprintln!("roce fuzz-peer: --max-resets must be between 1 and 1000, not {}", a.max_resets);
        return code(exit::USAGE);
    }
    if !a.reset_timeout.is_finite() || a.reset_timeout <= 0.0 || a.reset_timeout > 3600.0 {
        eprintln!("roce fuzz-peer: --reset-timeout must be above 0 and at most 3600 s, not {}", a.reset_timeout);
        return code(exit::USAGE);
    }
    if a.reset_cmd.as_deref().is_some_and(|c| c.trim().is_empty()) {
        eprintln!("roce fuzz-peer: --reset-cmd is empty");
        return code(exit::USAGE);
    }
    if a.target == Target::Frames && (!a.service.is_empty() || a.log_cmd.is_some()) {
        eprintln!("roce fuzz-peer: --service and --log-cmd go with --target cm");
        return code(exit::USAGE);
    }
    if a.log_cmd.as_deref().is_some_and(|c| c.trim().is_empty()) {
        eprintln!("roce fuzz-peer: --log-cmd is empty");
        return code(exit::USAGE);
    }
    if !a.log_every.is_finite() || a.log_every <= 0.0 || a.log_every > 86_400.0 {
        eprintln!("roce fuzz-peer: --log-every must be above 0 and at most 86400 s, not {}", a.log_every);
        return code(exit::USAGE);
    }
    if a.bind.is_ipv4() != a.peer.is_ipv4() {
        eprintln!("roce fuzz-peer: -b {} and --peer {} are of different address families", a.bind, a.peer);
        return code(exit::USAGE);
    }
    let mut sock = match RawSocket::open(&a.iface) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("roce fuzz-peer: {e}");
            return code(exit::ENVIRONMENT);
        }
    };
    let Some(our_mac) = sock.info.mac else {
        eprintln!("roce fuzz-peer: {} has no MAC address", a.iface);
        return code(exit::ENVIRONMENT);
    };
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
    });
    let peer_mac = match resolve_mac(&mut sock, our_mac, a.bind, a.peer) {
        Ok(Some(m)) => m,
        Ok(None) => {
            let how = if a.peer.is_ipv4() { "ARP" } else { "neighbour advertisement" };
            eprintln!("roce fuzz-peer: no {how} answer from {} on {} (3 requests, 1 s apart)", a.peer, a.iface);
            return code(exit::FAILED);
        }
        Err(e) => {
            eprintln!("roce fuzz-peer: {e}");
            return code(exit::ENVIRONMENT);
        }
    };
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let kernel = a.kernel;
    let ep =
        Endpoints { src_mac: our_mac, dst_mac: peer_mac, src: a.bind, dst: a.peer, kernel, gsi_index: a.gsi_index };
    let mut gen = Generator::new(seed, ep);
    gen.spare_gsi = !a.kill_gsi;
    gen.spare_rxe = !a.kill_rxe;
    let mut pcap = None;
    if let Some(dir) = &a.out {
        if let Err(e) = fs::create_dir_all(dir) {
            eprintln!("roce fuzz-peer: {}: {e}", dir.display());
            return code(exit::ENVIRONMENT);
        }
        match PcapFileWriter::create(&dir.join("sent.pcap")) {
            Ok(w) => pcap = Some(w),
            Err(e) => {
                eprintln!("roce fuzz-peer: {}: {e}", dir.join("sent.pcap").display());
                return code(exit::ENVIRONMENT);
            }
        }
    }
    let mut s = Summary { seed, ..Summary::default() };
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(a.duration);
    let gap = Duration::from_secs_f64(1.0 / a.rate);
    let mut buf = vec![0u8; roce_net::device::MAX_FRAME_LEN];
    let mut since_probe: Vec<Vec<u8>> = Vec::new();
    let mut last_status = t0;
    let mut n_probe = 0u64;
    let mut next_send = Instant::now();
    let send =
        |f: &[u8],
         s: &mut Summary,
         sock: &mut RawSocket,
         pcap: &mut Option<PcapFileWriter<roce_net::pcap::CaptureFile>>| send_counted(f, s, sock, pcap, ep, t0);
    if a.target == Target::Cm {
        if let Err(e) = cm::run(a, &mut sock, ep, &mut pcap, &mut s) {
            eprintln!("roce fuzz-peer: {e}");
            return code(exit::ENVIRONMENT);
        }
    }
    while a.target == Target::Frames && Instant::now() < end && SIGNALLED.load(Ordering::Relaxed) == 0 {
        let f = gen.next_frame();
        let now = Instant::now();
        if next_send > now {
            std::thread::sleep(next_send - now);
        }
        next_send = Instant::now().max(next_send) + gap;
        if send(&f, &mut s, &mut sock, &mut pcap) {
            since_probe.push(f);
        }
        // drain what came back (answers to fuzzed MADs)
        while let Ok(Some(_)) = sock.recv(&mut buf) {}
        if since_probe.len() as u64 >= u64::from(a.probe_every) {
            n_probe += 1;
            let ctx = SendCtx { ep, t0, gap };
            match check_liveness(a, &mut sock, &mut pcap, ctx, &mut gen, n_probe, &since_probe, &mut s, &mut |_| {}) {
                Ok(Liveness::Alive) => {}
                Ok(Liveness::Lost) => {
                    if a.reset_cmd.is_some() {
                        next_send = Instant::now();
                    }
                }
                Ok(Liveness::RunEnds) => {
                    since_probe.clear();
                    break;
                }
                Err(e) => {
                    eprintln!("roce fuzz-peer: {e}");
                    return code(exit::ENVIRONMENT);
                }
            }
            since_probe.clear();
        }
        if !a.quiet && last_status.elapsed() >= Duration::from_secs(3) {
            last_status = Instant::now();
            let el = t0.elapsed().as_secs_f64();
            eprintln!(
                "#{} elapsed {:.0}s sent {} ({:.0}/s) predicted_accept {:.1}% probes {}/{} liveness_losses {}",
                s.sent,
                el,
                s.sent,
                s.sent as f64 / el.max(1e-9),
                100.0 * s.predicted_accept as f64 / (s.sent.max(1)) as f64,
                s.probes_answered,
                s.probes_sent,
                s.peer_unresponsive
            );
        }
    }
    s.duration_s = (t0.elapsed().as_secs_f64() * 1000.0).round() / 1000.0;
    if let Some(w) = pcap.take() {
        let _ = w.finish();
    }
    if let (Target::Cm, Some(dir)) = (a.target, &a.out) {
        cm::write_report(dir, a, &s);
    }
    let out = if a.json {
        s.to_json().to_string()
    } else {
        let drops: Vec<String> = s.predicted_drop.iter().map(|(k, v)| format!("{k} {v}")).collect();
        format!(
            "sent {} predicted_accept {} probes_sent {} probes_answered {} peer_unresponsive {} send_errors {} seed {} duration_s {:.1}\npredicted drops: {}{}",
            s.sent,
            s.predicted_accept,
            s.probes_sent,
            s.probes_answered,
            s.peer_unresponsive,
            s.send_errors,
            s.seed,
            s.duration_s,
            drops.join(", "),
            s.minimised
                .iter()
                .map(|m| format!(
                    "\nloss {}: {} frames minimised to {} with {} resets",
                    m.loss,
                    m.frames,
                    m.min_frames.map_or("- (not reproduced)".to_string(), |n| n.to_string()),
                    m.resets
                ))
                .chain(s.reset_error.iter().map(|e| format!("\nreset failed: {e}")))
                .chain(s.cm.iter().map(|c| format!(
                    "\ncm: sequences {} handshakes_answered {} sent {:?} answers {:?} log_checks {} findings {}",
                    c.sequences,
                    c.handshakes_answered,
                    c.sent,
                    c.answers,
                    c.log_checks,
                    c.findings.len()
                )))
                .collect::<String>()
        )
    };
    let mut stdout = io::stdout();
    if writeln!(stdout, "{out}").is_err() {
        return code(exit::CLOSED_PIPE);
    }
    let sig = SIGNALLED.load(Ordering::Relaxed);
    if sig != 0 {
        return code(exit::signal_status(sig));
    }
    if s.peer_unresponsive > 0
        || s.cm.as_ref().is_some_and(|c| !c.findings.is_empty())
        || s.reset_error.is_some()
        || s.send_errors > 0
        || s.probes_answered < s.probes_sent.min(1)
    {
        return code(exit::FAILED);
    }
    code(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(dst: IpAddr, src: IpAddr, kernel: RxeKernel) -> Endpoints {
        Endpoints {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [0x52, 0x54, 0, 0x12, 0x34, 0x56],
            src,
            dst,
            kernel,
            gsi_index: 16,
        }
    }

    #[test]
    fn reset_cmd_success_failure_and_timeout() {
        assert!(reset_peer("exit 0", Duration::from_secs(10)).is_ok());
        let e = reset_peer("exit 3", Duration::from_secs(10)).unwrap_err();
        assert!(e.contains("exit status: 3"), "{e}");
        let t0 = Instant::now();
        let e = reset_peer("sleep 30", Duration::from_millis(200)).unwrap_err();
        assert!(e.contains("did not finish within 0.2 s"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(20), "the command was killed");
    }

    #[test]
    fn ddmin_finds_the_one_frame_and_a_pair() {
        let xs: Vec<u32> = (0..50).collect();
        let (min, calls) = ddmin(&xs, 100, |s| s.contains(&37));
        assert_eq!(min, Some(vec![37]));
        assert!(calls <= 20, "{calls} calls");
        // two frames that only lose together, in order
        let (min, _) = ddmin(&xs, 200, |s| s.contains(&3) && s.contains(&44));
        assert_eq!(min, Some(vec![3, 44]));
        // not reproduced: one call, no result
        assert_eq!(ddmin(&xs, 10, |_| false), (None, 1));
        // the budget bounds the calls; the result still loses
        let (min, calls) = ddmin(&xs, 3, |s| s.contains(&7));
        assert_eq!(calls, 3);
        assert!(min.unwrap().contains(&7));
    }

    #[test]
    fn length_edge_frames_are_predicted_as_rxe_rcv_checks_them() {
        let v4 = (IpAddr::from([198, 18, 0, 2]), IpAddr::from([198, 18, 0, 1]));
        let v6: (IpAddr, IpAddr) = ("fd00::2".parse().unwrap(), "fd00::1".parse().unwrap());
        for (dst, src) in [v4, v6] {
            for kernel in [RxeKernel::V6_1, RxeKernel::V6_12] {
                let e = ep(dst, src, kernel);
                let got: Vec<&str> = Generator::new(1, e)
                    .length_edge_frames()
                    .iter()
                    .map(|f| e.predict(f).map_or_else(|d| d.name(), |_| "counted"))
                    .collect();
                assert_eq!(
                    got,
                    [
                        "short_headers",
                        "short_headers",
                        "counted",
                        "counted",
                        "short_headers",
                        "counted",
                        "short_headers",
                        "counted",
                        "unknown_opcode"
                    ],
                    "{dst} {kernel:?}"
                );
            }
        }
    }
}

/// `--kernel`: a kernel version (major.minor, more parts ignored) or `sid`, as the opcode table
/// the predictor needs: before 6.2, 6.1's; from 6.2 on, 6.12's.
fn rxe_kernel(s: &str) -> Result<RxeKernel, String> {
    if s == "sid" {
        return Ok(RxeKernel::V6_12);
    }
    let mut parts = s.split(['.', '-', '+']);
    let num = |p: Option<&str>| p.and_then(|v| v.parse::<u32>().ok());
    match (num(parts.next()), num(parts.next())) {
        (Some(major), Some(minor)) if (major, minor) >= (6, 2) => Ok(RxeKernel::V6_12),
        (Some(major), Some(minor)) if (major, minor) >= (5, 0) => Ok(RxeKernel::V6_1),
        (Some(_), Some(_)) => Err(format!("kernel {s} is older than any rxe the predictor models (5.0 and later)")),
        _ => Err(format!("'{s}' is not a kernel version (like 6.1 or 6.12) nor sid")),
    }
}

#[cfg(test)]
mod kernel_arg_tests {
    use super::*;

    #[test]
    fn kernel_versions_pick_the_opcode_table_of_their_rxe() {
        for (arg, want) in [
            ("6.1", RxeKernel::V6_1),
            ("5.10", RxeKernel::V6_1),
            ("6.1.0-57-amd64", RxeKernel::V6_1),
            ("6.2", RxeKernel::V6_12),
            ("6.12", RxeKernel::V6_12),
            ("7.2.13+deb14-amd64", RxeKernel::V6_12),
            ("sid", RxeKernel::V6_12),
        ] {
            assert_eq!(rxe_kernel(arg), Ok(want), "{arg}");
        }
        for bad in ["", "6", "x.y", "4.19", "latest"] {
            assert!(rxe_kernel(bad).is_err(), "{bad}");
        }
    }
}
