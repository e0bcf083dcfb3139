//! perftest 4.5-0.17's output, line for line (perftest_parameters.c: ctx_print_test_info,
//! print_report_bw, print_full_bw_report, print_report_lat, print_report_lat_duration;
//! perftest_communication.c: ctx_print_pingpong_data), so that a script that reads perftest
//! reads `roce perftest`. Times are nanoseconds where perftest has CPU cycles: the formulas
//! are perftest's with 1000 cycles per microsecond.

use roce_cm::rc::WcStatus;

use super::oob::{BwReport, Dest};

/// `RESULT_LINE`.
pub const RESULT_LINE: &str = "---------------------------------------------------------------------------------------";
/// `RESULT_FMT`: the bandwidth header in MB/sec (MB = 2^20 bytes).
pub const BW_HEADER_MB: &str = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";
/// `RESULT_FMT_G`: the bandwidth header in Gb/sec (Gb = 10^9 bits).
pub const BW_HEADER_GB: &str = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";
/// `RESULT_FMT_LAT`.
pub const LAT_HEADER: &str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";
/// `RESULT_FMT_LAT_DUR`.
pub const LAT_DUR_HEADER: &str = " #bytes        #iterations       t_avg[usec]    tps average";
/// The server's banner before it accepts.
pub const WAITING: &str =
    "\n************************************\n* Waiting for client to connect... *\n************************************";

/// perftest's verb (`testsStr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// SEND.
    Send,
    /// RDMA WRITE.
    Write,
    /// RDMA READ.
    Read,
    /// ATOMIC.
    Atomic,
}

impl Verb {
    /// `testsStr`.
    pub fn name(self) -> &'static str {
        match self {
            Verb::Send => "Send",
            Verb::Write => "RDMA_Write",
            Verb::Read => "RDMA_Read",
            Verb::Atomic => "Atomic",
        }
    }
}

/// What the test-information banner shows.
#[derive(Debug, Clone)]
pub struct Info<'a> {
    /// The verb.
    pub verb: Verb,
    /// "CMP_AND_SWAP" or "FETCH_AND_ADD" for atomics.
    pub atomic: &'a str,
    /// Bandwidth (else latency).
    pub bw: bool,
    /// The device name shown.
    pub device: &'a str,
    /// QPs.
    pub qps: u32,
    /// "RC", "UC" or "UD".
    pub conn: &'a str,
    /// Client (prints TX depth).
    pub client: bool,
    /// TX depth.
    pub tx_depth: u32,
    /// RX depth (SEND servers).
    pub rx_depth: u32,
    /// CQ moderation (bandwidth).
    pub cq_mod: u32,
    /// MTU in bytes.
    pub mtu: u32,
    /// GID index shown (-x), if given.
    pub gid_index: Option<u8>,
    /// Outstanding reads (READ/atomic).
    pub out_reads: u32,
    /// rdma_cm mode.
    pub rdma_cm: bool,
}

/// `ctx_print_test_info`.
pub fn test_info(i: &Info) -> String {
    let mut s = String::new();
    s.push_str(RESULT_LINE);
    s.push('\n');
    s.push_str("                    ");
    s.push_str(i.verb.name());
    s.push(' ');
    if i.verb == Verb::Atomic {
        s.push_str(i.atomic);
        s.push(' ');
    }
    s.push_str(if i.bw { "BW " } else { "Latency " });
    s.push_str("Test\n");
    s.push_str(&format!(" Dual-port       : OFF\t\tDevice         : {}\n", i.device));
    s.push_str(&format!(" Number of qps   : {}\t\tTransport type : IB\n", i.qps));
    s.push_str(&format!(" Connection type : {}\t\tUsing SRQ      : OFF\n", i.conn));
    s.push_str(" PCIe relax order: Unsupported\n");
    s.push_str(" ibv_wr* API     : OFF\n");
    if i.client || !i.bw {
        s.push_str(&format!(" TX depth        : {}\n", i.tx_depth));
    }
    if i.verb == Verb::Send && (!i.client || !i.bw) {
        s.push_str(&format!(" RX depth        : {}\n", i.rx_depth));
    }
    if i.bw {
        s.push_str(&format!(" CQ Moderation   : {}\n", i.cq_mod));
    }
    s.push_str(&format!(" Mtu             : {}[B]\n", i.mtu));
    s.push_str(" Link type       : Ethernet\n");
    if let Some(x) = i.gid_index {
        s.push_str(&format!(" GID index       : {x}\n"));
    }
    if matches!(i.verb, Verb::Read | Verb::Atomic) {
        s.push_str(&format!(" Outstand reads  : {}\n", i.out_reads));
    } else {
        s.push_str(" Max inline data : 0[B]\n");
    }
    s.push_str(&format!(" rdma_cm QPs\t : {}\n", if i.rdma_cm { "ON" } else { "OFF" }));
    s.push_str(&format!(" Data ex. method : {}", if i.rdma_cm { "rdma_cm" } else { "Ethernet" }));
    if i.rdma_cm && !i.client {
        s.push('\n');
        s.push_str(RESULT_LINE);
        s.push_str(
            "\n Waiting for client rdma_cm QP to connect\n Please run the same command with the IB/RoCE interface IP",
        );
    }
    s.push('\n');
    s.push_str(RESULT_LINE);
    s
}

/// C's `%#0Nx`: "0x" and zero padding to N characters in all, but no prefix for zero.
fn c_alt_hex(v: u64, width: usize) -> String {
    if v == 0 {
        format!("{:0width$}", 0)
    } else {
        format!("{v:#0width$x}")
    }
}

/// `ctx_print_pingpong_data`: the address line and the GID line of one side.
pub fn address_lines(side: &str, d: &Dest, verb: Verb) -> String {
    let mut s = format!(
        " {side} address: LID {} QPN {} PSN {}",
        c_alt_hex(u64::from(d.lid), 4),
        c_alt_hex(u64::from(d.qpn), 6),
        c_alt_hex(u64::from(d.psn), 6)
    );
    if verb == Verb::Read {
        s.push_str(&format!(" OUT {}", c_alt_hex(u64::from(d.out_reads), 4)));
    }
    if matches!(verb, Verb::Read | Verb::Write) {
        s.push_str(&format!(" RKey {} VAddr {}", c_alt_hex(u64::from(d.rkey), 8), c_alt_hex(d.vaddr, 16)));
    }
    s.push('\n');
    let g: Vec<String> = d.gid.iter().map(|b| format!("{b:02}")).collect();
    s.push_str(&format!(" GID: {}", g.join(":")));
    s
}

/// Post and completion times of a bandwidth run (perftest's tposted/tcompleted, in ns).
#[derive(Debug, Clone, Default)]
pub struct BwTimes {
    /// When each message was posted (only [0] with no peak).
    pub posted: Vec<u64>,
    /// When each message completed (only [0] with no peak).
    pub completed: Vec<u64>,
    /// `noPeak`: only the first post and the last completion are kept.
    pub no_peak: bool,
}

/// `print_report_bw`'s arithmetic: `iters` messages of `size` over `cq_mod`-moderated
/// completions; `gbits` selects Gb/s (10^9 bits) over MB/s (2^20 bytes).
pub fn bw_report(t: &BwTimes, size: u64, iters: u64, cq_mod: u64, gbits: bool) -> BwReport {
    const NS_PER_S: f64 = 1e9;
    let format_factor: u64 = if gbits { 125_000_000 } else { 0x100000 };
    let n = iters as usize;
    let first = |v: &Vec<u64>, i: usize| v.get(i).copied().unwrap_or(0);
    // perftest starts from tcompleted[0] - tposted[0], unsigned: a first message not
    // signalled (completion time 0) wraps to a huge value, which any window then beats.
    let (c0, p0) = (first(&t.completed, 0), first(&t.posted, 0));
    let mut opt_delta = if c0 >= p0 { (c0 - p0) as f64 } else { f64::INFINITY };
    let cq_mod = cq_mod.max(1) as usize;
    if !t.no_peak && t.posted.len() >= n && t.completed.len() >= n {
        for i in 0..n {
            let mut j = (i + 1).div_ceil(cq_mod) * cq_mod - 1;
            while j < n {
                let d = t.completed[j].saturating_sub(t.posted[i]) as f64 / (j - i + 1) as f64;
                opt_delta = opt_delta.min(d);
                j += cq_mod;
            }
            if !n.is_multiple_of(cq_mod) {
                let j = n - 1;
                let d = t.completed[j].saturating_sub(t.posted[i]) as f64 / (j - i + 1) as f64;
                opt_delta = opt_delta.min(d);
            }
        }
    }
    let last = if t.no_peak { 0 } else { n.saturating_sub(1) };
    let sum = first(&t.completed, last).saturating_sub(first(&t.posted, 0)).max(1) as f64;
    let bw_avg = (size as f64 * iters as f64 * NS_PER_S) / (sum * format_factor as f64);
    let msg_rate = (iters as f64 * NS_PER_S) / (sum * 1e6);
    // perftest divides in whole cycles; nanoseconds are coarser, so the window's time per
    // message stays fractional here.
    let peak_up = if t.no_peak { 0.0 } else { size as f64 * NS_PER_S };
    let peak_down = opt_delta.max(1e-3) * format_factor as f64;
    BwReport { size, iters, bw_peak: peak_up / peak_down, bw_avg, msg_rate }
}

/// `print_full_bw_report`'s row (`REPORT_FMT`, or `REPORT_FMT_EXT` for Gb/s under 0.1).
pub fn bw_row(r: &BwReport, gbits: bool) -> String {
    if gbits && r.bw_avg < 0.1 {
        format!(
            " {:<7}    {}           {:<7.6}            {:<7.6}            {:<7.6}",
            r.size, r.iters, r.bw_peak, r.bw_avg, r.msg_rate
        )
    } else {
        format!(
            " {:<7}    {:<10}       {:<7.2}            {:<7.2}\t\t   {:<7.6}",
            r.size, r.iters, r.bw_peak, r.bw_avg, r.msg_rate
        )
    }
}

/// The latency figures of one run, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatReport {
    /// Message size.
    pub size: u64,
    /// Iterations.
    pub iters: u64,
    /// Smallest.
    pub t_min: f64,
    /// Largest after the two largest are dropped.
    pub t_max: f64,
    /// Median.
    pub t_typical: f64,
    /// Mean.
    pub t_avg: f64,
    /// Standard deviation (perftest's, with its integer truncation).
    pub t_stdev: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
}

/// `print_report_lat`: the differences of consecutive post times (`posted` in ns), halved
/// for SEND and WRITE (`round_trip`), sorted, the two largest dropped.
pub fn lat_report(posted: &[u64], size: u64, round_trip: bool) -> Option<LatReport> {
    let rtt = if round_trip { 2.0 } else { 1.0 };
    let q = 1000.0 * rtt; // ns per usec, times the RTT factor
    let mut delta: Vec<u64> = posted.windows(2).map(|w| w[1].saturating_sub(w[0])).collect();
    delta.sort_unstable();
    let n = delta.len().checked_sub(2)?;
    if n == 0 {
        return None;
    }
    let median = if (n - 1) % 2 == 1 { (delta[n / 2] + delta[n / 2 - 1]) / 2 } else { delta[n / 2] };
    let avg = delta[..n].iter().map(|d| *d as f64 / q).sum::<f64>() / n as f64;
    // perftest keeps the difference and its square in ints.
    let var: f64 = delta[..n]
        .iter()
        .map(|d| {
            let t = (avg - *d as f64 / q) as i64;
            (t * t) as f64
        })
        .sum();
    let i99 = ((n as f64) * 0.99).ceil() as usize;
    let i999 = ((n as f64) * 0.999).ceil() as usize;
    Some(LatReport {
        size,
        iters: posted.len() as u64,
        t_min: delta[0] as f64 / q,
        t_max: delta[n] as f64 / q,
        t_typical: median as f64 / q,
        t_avg: avg,
        t_stdev: (var / n as f64).sqrt(),
        p99: delta[i99.min(delta.len() - 1)] as f64 / q,
        p999: delta[i999.min(delta.len() - 1)] as f64 / q,
    })
}

/// `REPORT_FMT_LAT`.
pub fn lat_row(r: &LatReport) -> String {
    format!(
        " {:<7} {}          {:<7.2}        {:<7.2}      {:<7.2}  \t       {:<7.2}     \t{:<7.2}\t\t{:<7.2} \t\t{:<7.2}",
        r.size, r.iters, r.t_min, r.t_max, r.t_typical, r.t_avg, r.t_stdev, r.p99, r.p999
    )
}

/// `print_report_lat_duration`: `iters` round trips in `elapsed_ns`.
pub fn lat_dur_row(size: u64, iters: u64, elapsed_ns: u64, round_trip: bool) -> String {
    let rtt = if round_trip { 2.0 } else { 1.0 };
    let us = elapsed_ns as f64 / 1000.0;
    let lat = if iters == 0 { 0.0 } else { us / rtt / iters as f64 };
    let tps = if us == 0.0 { 0.0 } else { iters as f64 / (us / 1e6) };
    format!(" {size:<7}       {iters}            {lat:<7.2}        {tps:<7.2}")
}

/// `enum ibv_wc_status`'s numbers (IBV_WC_BAD_RESP_ERR is 7: this table once said 8).
pub fn wc_status_code(s: WcStatus) -> u32 {
    u32::from(s.ibv_code())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_as_perftest_prints_them() {
        let r = BwReport { size: 65536, iters: 1000, bw_peak: 17.5, bw_avg: 17.25, msg_rate: 0.000276 };
        assert_eq!(bw_row(&r, false), " 65536      1000             17.50              17.25  \t\t   0.000276");
        let l = LatReport {
            size: 2,
            iters: 1000,
            t_min: 1.0,
            t_max: 2.0,
            t_typical: 1.5,
            t_avg: 1.25,
            t_stdev: 0.1,
            p99: 1.9,
            p999: 2.0,
        };
        assert_eq!(
            lat_row(&l),
            " 2       1000          1.00           2.00         1.50     \t       1.25        \t0.10   \t\t1.90    \t\t2.00   "
        );
    }

    #[test]
    fn bandwidth_arithmetic() {
        // 10 messages of 1 MiB, one every ms, each completing 1 ms after its post.
        let posted: Vec<u64> = (0..10).map(|i| i * 1_000_000).collect();
        let completed: Vec<u64> = posted.iter().map(|p| p + 1_000_000).collect();
        let t = BwTimes { posted, completed, no_peak: false };
        let r = bw_report(&t, 1 << 20, 10, 1, false);
        assert!((r.bw_avg - 1000.0).abs() < 1e-6, "{r:?}");
        assert!((r.bw_peak - 1000.0).abs() < 1e-6, "{r:?}");
        assert!((r.msg_rate - 0.001).abs() < 1e-9, "{r:?}");
        let g = bw_report(&t, 1 << 20, 10, 1, true);
        assert!((g.bw_avg - 8.388608).abs() < 1e-6, "{g:?}");
        // Moderated: only every 5th completes; the peak still comes from real windows.
        let posted: Vec<u64> = (0..10).map(|i| 1 + i * 1_000_000).collect();
        let mut completed = vec![0; 10];
        completed[4] = posted[4] + 1_000_000;
        completed[9] = posted[9] + 1_000_000;
        let m = bw_report(&BwTimes { posted, completed, no_peak: false }, 1 << 20, 10, 5, false);
        assert!((m.bw_peak - 1000.0).abs() < 1e-6, "{m:?}");
        let np = BwTimes { posted: vec![0], completed: vec![10_000_000], no_peak: true };
        let r = bw_report(&np, 1 << 20, 10, 1, false);
        assert_eq!(r.bw_peak, 0.0);
        assert!((r.bw_avg - 1000.0).abs() < 1e-6);
    }

    #[test]
    fn latency_arithmetic() {
        let posted: Vec<u64> = (0..11).map(|i| i * 4000).collect();
        let r = lat_report(&posted, 2, true).unwrap();
        assert_eq!(r.t_min, 2.0);
        assert_eq!(r.t_typical, 2.0);
        assert_eq!(r.iters, 11);
        assert!(lat_report(&posted[..3], 2, true).is_none());
    }

    #[test]
    fn address_lines_as_perftest() {
        let d = Dest {
            lid: 0,
            out_reads: 1,
            qpn: 0x11,
            psn: 0x5e3f7c,
            rkey: 0x20b,
            vaddr: 0x7f00_0000_1000,
            gid: super::super::oob::gid_of("198.18.0.2".parse().unwrap()),
            srqn: 0,
            gid_index: 0,
        };
        assert_eq!(
            address_lines("local", &d, Verb::Write),
            " local address: LID 0000 QPN 0x0011 PSN 0x5e3f7c RKey 0x00020b VAddr 0x007f0000001000\n GID: 00:00:00:00:00:00:00:00:00:00:255:255:198:18:00:02"
        );
        assert!(test_info(&Info {
            verb: Verb::Send,
            atomic: "",
            bw: true,
            device: "tap0",
            qps: 1,
            conn: "RC",
            client: false,
            tx_depth: 128,
            rx_depth: 512,
            cq_mod: 100,
            mtu: 1024,
            gid_index: None,
            out_reads: 1,
            rdma_cm: false
        })
        .contains(" RX depth        : 512\n"));
    }
}
