//! The receiver's user-space cost per RC packet on the udp transport, without the kernel (no
//! socket, no veth: what `rc_veth` cannot show through its noise): 64 KiB SENDs at path MTU
//! 1024 from one engine, their datagrams laid out back to back as a GRO read leaves them, handed
//! to the other engine
//! - as frames: each datagram copied into a batch slot behind rebuilt Ethernet, IP and UDP
//!   headers, its ICRC checked there (`frame_datagram`), then `handle_frame_icrc_verified`
//!   (the udp transport before it handed datagrams over in place);
//! - in place: the ICRC computed over headers written on the stack and the datagram where it
//!   lies (`datagram::compute_icrc`), then `handle_datagram_icrc_verified`.
//!
//! Only the receive calls are timed; the sender's work, the receives posted and the ACKs sent
//! back are not. `cargo bench -p roce-net --bench rc_receive`.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant as WallInstant};

use criterion::{criterion_group, Criterion, Throughput};
use roce_cm::rc::{Access, MrInfo, QpAttr, QpInit, QpState, RecvWr, SendOp, SendWr, Sge};
use roce_cm::{Instant, Stack, StackConfig};
use roce_net::udp::{frame_datagram, header_len, Arrival};
use roce_wire::datagram::DatagramIcrc;

const A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];
const MSG: u32 = 1 << 16;

/// Two engines with a connected RC QP pair (path MTU 1024), each with a region of two messages.
struct Pair {
    a: Stack,
    b: Stack,
    qa: u32,
    qb: u32,
    ma: MrInfo,
    mb: MrInfo,
    buf: Vec<u8>,
    /// One message's datagrams back to back (a GRO read), with where each is.
    read: Vec<u8>,
    spans: Vec<(usize, usize)>,
    arrival: Arrival,
    slot: Vec<u8>,
    icrc: DatagramIcrc,
    wr: u64,
}

impl Pair {
    fn new() -> Pair {
        let mut a = Stack::new(StackConfig::new(MAC_A, A, 24));
        let mut b = Stack::new(StackConfig::new(MAC_B, B, 24));
        let qa = a.create_qp_with(QpInit::default()).unwrap();
        let qb = b.create_qp_with(QpInit::default()).unwrap();
        for (s, q, peer, pq, mac) in [(&mut a, qa, B, qb, MAC_B), (&mut b, qb, A, qa, MAC_A)] {
            let mut at = QpAttr::new(IpAddr::V4(peer), pq);
            at.path_mtu = 1024;
            at.dmac = Some(mac);
            for st in [QpState::Init, QpState::Rtr, QpState::Rts] {
                s.rc_mut().modify_qp(Instant::ZERO, q, st, &at).unwrap();
            }
        }
        let ma = a.rc_mut().reg_mr(2 * MSG as usize, Access::ALL).unwrap();
        let mb = b.rc_mut().reg_mr(2 * MSG as usize, Access::ALL).unwrap();
        let arrival = Arrival {
            src: SocketAddr::new(IpAddr::V4(A), roce_wire::ROCEV2_UDP_PORT),
            dst: IpAddr::V4(B),
            traffic_class: 0,
            hop_limit: 64,
        };
        Pair {
            a,
            b,
            qa,
            qb,
            ma,
            mb,
            buf: vec![0; 9216],
            read: Vec::with_capacity(1 << 17),
            spans: Vec::with_capacity(128),
            arrival,
            slot: vec![0; 9216],
            icrc: DatagramIcrc::default(),
            wr: 0,
        }
    }

    /// The next message's datagrams into `read` (a receive posted for it); not timed.
    fn next_message(&mut self) {
        self.wr += 1;
        let at = (self.wr & 1) * u64::from(MSG);
        let sg = vec![Sge { addr: self.mb.addr + at, length: MSG, lkey: self.mb.lkey }];
        self.b.rc_mut().post_recv(self.qb, RecvWr { wr_id: self.wr, sg_list: sg }).unwrap();
        let sg = vec![Sge { addr: self.ma.addr + at, length: MSG, lkey: self.ma.lkey }];
        let wr =
            SendWr { wr_id: self.wr, op: SendOp::Send, sg_list: sg, signaled: false, solicited: false, inline: None };
        self.a.rc_mut().post_send(Instant::ZERO, self.qa, wr).unwrap();
        self.read.clear();
        self.spans.clear();
        while let Some(n) = self.a.poll_transmit(Instant::ZERO, &mut self.buf) {
            // (The UDP source port the sender's QP gives its packets, as the socket reports it.)
            let sport = u16::from_be_bytes([self.buf[34], self.buf[35]]);
            self.arrival.src.set_port(sport);
            let start = self.read.len();
            self.read.extend_from_slice(&self.buf[header_len(true)..n]);
            self.spans.push((start, self.read.len()));
        }
        assert_eq!(self.spans.len(), 64, "64 packets per message");
    }

    /// After the timed part: the receiver's ACKs back to the sender, its completions taken.
    fn settle(&mut self) {
        while let Some(n) = self.b.poll_transmit(Instant::ZERO, &mut self.buf) {
            self.a.handle_frame(Instant::ZERO, &self.buf[..n]);
        }
        while self.b.rc_mut().poll_cq().is_some() {}
        while self.a.rc_mut().poll_cq().is_some() {}
    }

    /// The udp transport before: copy into a slot, frame, check the ICRC, the frame path.
    fn receive_as_frames(&mut self) {
        let hdr = header_len(true);
        for &(s, e) in &self.spans {
            let len = e - s;
            self.slot[hdr..hdr + len].copy_from_slice(&self.read[s..e]);
            let f = frame_datagram(&mut self.slot, len, &self.arrival, MAC_B, 0);
            assert!(f.icrc_verified);
            self.b.handle_frame_icrc_verified(Instant::ZERO, &self.slot[..f.len]);
        }
    }

    /// In place: the ICRC over the datagram where it lies (the headers' hash kept across the
    /// read), the datagram entry.
    fn receive_in_place(&mut self) {
        for &(s, e) in &self.spans {
            let d = &mut self.read[s..e];
            assert_eq!(self.icrc.verify(d, &self.arrival, 0), Ok(true));
            self.b.handle_datagram_icrc_verified(Instant::ZERO, &self.arrival, d);
        }
    }

    /// `iters` messages received one way; the time of the receive calls only.
    fn time(&mut self, iters: u64, in_place: bool) -> Duration {
        let mut spent = Duration::ZERO;
        for _ in 0..iters {
            self.next_message();
            let t = WallInstant::now();
            if in_place {
                self.receive_in_place();
            } else {
                self.receive_as_frames();
            }
            spent += t.elapsed();
            black_box(&self.b);
            self.settle();
        }
        let c = self.b.counters();
        assert_eq!(c.total_dropped(), 0, "{c:?}");
        spent
    }
}

fn rc_receive(c: &mut Criterion) {
    let mut g = c.benchmark_group("rc_receive_64KiB_send_mtu1024");
    g.throughput(Throughput::Bytes(u64::from(MSG)));
    let mut frames = Pair::new();
    g.bench_function("as_frames", |b| b.iter_custom(|iters| frames.time(iters, false)));
    let mut in_place = Pair::new();
    g.bench_function("in_place", |b| b.iter_custom(|iters| in_place.time(iters, true)));
    g.finish();
}

criterion_group!(benches, rc_receive);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
