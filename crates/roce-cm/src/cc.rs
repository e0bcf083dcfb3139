//! Congestion control of connected QPs: DCQCN [Zhu et al., "Congestion Control for
//! Large-Scale RDMA Deployments", SIGCOMM 2015], as a RoCE NIC runs it (spec/congestion.md).
//! This module is the pure part (no QP, no packet); `rc/` uses it for its QPs.
//!
//! Three roles. The congestion point is a switch: it marks ECN-capable packets CE as its
//! queue grows (not here: `roce_net::fabric` simulates one). The notification point is the
//! receiving QP: a data packet arriving CE-marked makes it send a CNP (BTH opcode 0x81) to the
//! sending QP, at most one per [`DcqcnParams::cnp_interval`] ([`CnpPacer`]). The reaction point
//! is the sending QP: [`Dcqcn`] cuts its rate on a CNP and raises it again by timer and byte
//! counter, and the requester sends no faster than that rate.
//!
//! Everything is pure: time comes in as an argument, timers are evaluated when the QP is next
//! touched (a timer that fired in between is applied at its own instant, in order), so a QP
//! that waits for nothing costs no wake-ups. Off by default ([`Congestion::Off`]): then no
//! packet is marked, a CE mark only counts, and a CNP only counts.

use core::time::Duration;

use crate::Instant;

/// The ECN field of an IP header: the low two bits of the IPv4 TOS or the IPv6 traffic class
/// [RFC 3168 §5].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Ecn {
    /// 00: not ECN-capable.
    #[default]
    NotEct,
    /// 01: ECN-capable transport (1).
    Ect1,
    /// 10: ECN-capable transport (0), what a RoCE NIC marks its packets with.
    Ect0,
    /// 11: congestion experienced (set by a switch).
    Ce,
}

impl Ecn {
    /// The ECN field of a TOS / traffic class byte.
    pub const fn of(traffic_class: u8) -> Ecn {
        match traffic_class & 3 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The field's two bits.
    pub const fn bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0,
            Ecn::Ect1 => 1,
            Ecn::Ect0 => 2,
            Ecn::Ce => 3,
        }
    }

    /// `traffic_class` with its ECN field set to `self` (the DSCP kept).
    pub const fn set(self, traffic_class: u8) -> u8 {
        (traffic_class & !3) | self.bits()
    }

    /// Whether a switch may mark the packet CE (ECT(0) or ECT(1)).
    pub const fn is_ect(self) -> bool {
        matches!(self, Ecn::Ect0 | Ecn::Ect1)
    }
}

/// The congestion control of a port's connected QPs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Congestion {
    /// None (rxe has none; the default): packets go out not-ECT, a CE mark or a CNP is only
    /// counted.
    #[default]
    Off,
    /// DCQCN: data packets go out ECT(0), a CE-marked one is answered with a CNP, a CNP cuts
    /// the sending QP's rate.
    Dcqcn(DcqcnParams),
}

impl Congestion {
    /// DCQCN with a NIC's defaults ([`DcqcnParams::default`]).
    pub fn dcqcn() -> Congestion {
        Congestion::Dcqcn(DcqcnParams::default())
    }

    /// The DCQCN parameters, when on.
    pub fn params(&self) -> Option<&DcqcnParams> {
        match self {
            Congestion::Off => None,
            Congestion::Dcqcn(p) => Some(p),
        }
    }
}

/// DCQCN's parameters. Each field is named after the paper's symbol, with the mlx5
/// name (`rp_*`/`np_*` in the driver's debugfs `cc_params`, `RPG_*` etc. in mlxconfig) it
/// corresponds to; [`DcqcnParams::default`] has the NIC defaults, [`DcqcnParams::paper`] the
/// paper's (spec/congestion.md lists both with their sources).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DcqcnParams {
    /// The line rate in bit/s: where a QP starts and what it never exceeds (`rpg_max_rate`,
    /// 0 = the port's speed). The engine does not know the port's speed: 100 Gbit/s unless
    /// told.
    pub line_rate: u64,
    /// The lowest rate a cut may reach, bit/s (`rpg_min_rate`, 1 Mbit/s).
    pub min_rate: u64,
    /// R_AI: the target rate's step in additive increase, bit/s (`rpg_ai_rate`, 5 Mbit/s).
    pub rate_ai: u64,
    /// R_HAI: the target rate's step in hyper increase, bit/s (`rpg_hai_rate`, 50 Mbit/s).
    pub rate_hai: u64,
    /// T: the rate-increase timer (`rpg_time_reset`, 300 µs). Zero: no timer.
    pub timer: Duration,
    /// B: bytes sent between byte-counter rate increases (`rpg_byte_reset`, 32767). Zero: no
    /// byte counter.
    pub byte_counter: u64,
    /// F: rate-increase events of one kind before leaving fast recovery (`rpg_threshold`, 1;
    /// the paper's F = 5).
    pub threshold: u32,
    /// g, the weight of the newest sample in alpha's moving average, in 1024ths (mlx5:
    /// `1024 - dce_tcp_g` = 1024 − 1019 = 5; the paper's g = 1/256 is 4).
    pub g_1024: u16,
    /// K: alpha's update period (`dce_tcp_rtt`, 1 µs; the paper's 55 µs).
    pub alpha_period: Duration,
    /// Alpha at a QP's first CNP, in 1024ths (`initial_alpha_value`, 1023; the paper's 1).
    pub initial_alpha_1024: u16,
    /// The shortest time between two rate cuts (`rate_reduce_monitor_period`, 4 µs): CNPs
    /// within it lead to one cut at its end. Zero: a cut per CNP (the paper).
    pub rate_reduce_period: Duration,
    /// Whether every cut sets the target rate to the current rate (the paper; mlx5's
    /// `clamp_tgt_rate` = 1), or only a cut after some rate increase does (mlx5's default
    /// `clamp_tgt_rate` 0 with `clamp_tgt_rate_after_time_inc` 1), so that cuts in a row keep
    /// the target from before them.
    pub clamp_target_rate: bool,
    /// N, the notification point's shortest time between two CNPs of one QP
    /// (`np_min_time_between_cnps` / `min_time_between_cnps`, 4 µs; the paper's 50 µs).
    pub cnp_interval: Duration,
}

impl Default for DcqcnParams {
    /// A ConnectX NIC's defaults ([`DcqcnParams::nic`]).
    fn default() -> Self {
        DcqcnParams::nic()
    }
}

/// One megabit per second.
const MBPS: u64 = 1_000_000;

impl DcqcnParams {
    /// The NIC defaults (ConnectX-4 and later, mlx5; spec/congestion.md for the sources), at a
    /// 100 Gbit/s line rate.
    pub const fn nic() -> DcqcnParams {
        DcqcnParams {
            line_rate: 100_000 * MBPS,
            min_rate: MBPS,
            rate_ai: 5 * MBPS,
            rate_hai: 50 * MBPS,
            timer: Duration::from_micros(300),
            byte_counter: 32_767,
            threshold: 1,
            g_1024: 5,
            alpha_period: Duration::from_micros(1),
            initial_alpha_1024: 1023,
            rate_reduce_period: Duration::from_micros(4),
            clamp_target_rate: false,
            cnp_interval: Duration::from_micros(4),
        }
    }

    /// The paper's values (§5.3 and table 2: 40 Gbit/s links, T = K = 55 µs, B = 10 MB,
    /// F = 5, g = 1/256, R_AI = 40 Mbit/s, N = 50 µs), at a 40 Gbit/s line rate. The paper
    /// gives no R_HAI: 10 × R_AI here.
    pub const fn paper() -> DcqcnParams {
        DcqcnParams {
            line_rate: 40_000 * MBPS,
            min_rate: MBPS,
            rate_ai: 40 * MBPS,
            rate_hai: 400 * MBPS,
            timer: Duration::from_micros(55),
            byte_counter: 10 * 1024 * 1024,
            threshold: 5,
            g_1024: 4,
            alpha_period: Duration::from_micros(55),
            initial_alpha_1024: 1024,
            rate_reduce_period: Duration::ZERO,
            clamp_target_rate: true,
            cnp_interval: Duration::from_micros(50),
        }
    }

    /// These parameters at another line rate.
    pub const fn with_line_rate(mut self, bits_per_second: u64) -> DcqcnParams {
        self.line_rate = bits_per_second;
        self
    }
}

/// Counters of the congestion path (part of [`crate::rc::RcCounters`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CcCounters {
    /// Packets for a connected QP that arrived CE-marked (counted with congestion control off
    /// too).
    pub ce_received: u64,
    /// CNPs sent (notification point).
    pub cnp_sent: u64,
    /// CE marks answered with no CNP: one went to that QP less than `cnp_interval` before.
    pub cnp_suppressed_by_interval: u64,
    /// CNPs received for a connected QP.
    pub cnp_received: u64,
    /// CNPs received with congestion control off (counted in `cnp_received` too, else
    /// ignored).
    pub cnp_ignored: u64,
    /// CNPs that came within a rate-reduce period of the last cut: folded into one cut at its
    /// end.
    pub cnp_coalesced: u64,
    /// Rate cuts (reaction point).
    pub rate_cuts: u64,
    /// Rate increases in fast recovery (the current rate halfway to the target).
    pub rate_increase_fast_recovery: u64,
    /// Rate increases in additive increase (the target up by R_AI).
    pub rate_increase_additive: u64,
    /// Rate increases in hyper increase (the target up by i · R_HAI).
    pub rate_increase_hyper: u64,
    /// Request and READ response packets a QP held back for its rate (each counted once per
    /// poll that found the gate closed).
    pub paced: u64,
}

/// The notification point's per-QP limit: at most one CNP per interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CnpPacer {
    last: Option<Instant>,
}

impl CnpPacer {
    /// Whether a CNP may go at `now` (if so, it is taken as sent).
    pub fn allow(&mut self, now: Instant, interval: Duration) -> bool {
        match self.last {
            Some(t) if now < t + interval => false,
            _ => {
                self.last = Some(now);
                true
            }
        }
    }
}

/// Which rate increase an event makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Increase {
    /// Fast recovery: R_C = (R_T + R_C) / 2.
    FastRecovery,
    /// Additive increase: R_T += R_AI, then as fast recovery.
    Additive,
    /// Hyper increase: R_T += i · R_HAI, then as fast recovery.
    Hyper,
}

/// Rate-increase events a QP processes in one call at most; past it the timer skips ahead
/// (only a nonsense setting, such as a zero R_AI with a nanosecond timer, gets there).
const MAX_EVENTS_PER_CALL: u32 = 100_000;

/// DCQCN's reaction point for one QP: the current rate R_C, the target rate R_T, alpha, the
/// timer and byte-counter stages, and the pacing gate.
///
/// A QP starts at the line rate, unlimited. The first CNP makes it limited: alpha starts at
/// `initial_alpha`, its period clock starts, and the cut (R_T = R_C, R_C = R_C · (1 − α/2))
/// restarts the timer and zeroes both stages. Every timer expiry and every `byte_counter`
/// bytes sent is a rate-increase event, whose kind the stages before it decide (T and BC, the
/// events of each source since the cut): fast recovery while both are below F, hyper increase
/// once both are above F (by i = min(T, BC) − F), additive increase in between. Once R_C is
/// back at the line rate the QP is unlimited again, its timers stopped. Alpha moves every
/// period: α = (1 − g)·α + g if a CNP came in it, else α = (1 − g)·α.
#[derive(Debug, Clone, PartialEq)]
pub struct Dcqcn {
    p: DcqcnParams,
    rc: u64,
    rt: u64,
    alpha: f64,
    /// The next alpha update (from the first CNP on).
    alpha_next: Option<Instant>,
    /// A CNP came in the current alpha period.
    alpha_cnp: bool,
    /// Below the line rate: the rate gate and the increase timer run.
    limited: bool,
    timer_next: Instant,
    t_stage: u32,
    b_stage: u32,
    bytes: u64,
    last_cut: Option<Instant>,
    /// A CNP within the rate-reduce period after `last_cut`: a cut at its end.
    cut_pending: bool,
    /// A rate increase since the last cut (for `clamp_target_rate` false).
    increased: bool,
    next_send: Instant,
}

impl Dcqcn {
    /// A QP's reaction point at the line rate.
    pub fn new(p: DcqcnParams) -> Dcqcn {
        let line = p.line_rate.max(1);
        Dcqcn {
            p,
            rc: line,
            rt: line,
            alpha: 0.0,
            alpha_next: None,
            alpha_cnp: false,
            limited: false,
            timer_next: Instant::ZERO,
            t_stage: 0,
            b_stage: 0,
            bytes: 0,
            last_cut: None,
            cut_pending: false,
            increased: false,
            next_send: Instant::ZERO,
        }
    }

    /// The parameters.
    pub fn params(&self) -> &DcqcnParams {
        &self.p
    }

    /// R_C, the current rate in bit/s (as of the last call that took a time).
    pub fn rate(&self) -> u64 {
        self.rc
    }

    /// R_T, the target rate in bit/s.
    pub fn target_rate(&self) -> u64 {
        self.rt
    }

    /// Alpha, 0..=1.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// Whether the QP is held below the line rate.
    pub fn is_limited(&self) -> bool {
        self.limited
    }

    /// The timer and byte-counter stages (events of each since the last cut).
    pub fn stages(&self) -> (u32, u32) {
        (self.t_stage, self.b_stage)
    }

    /// When the next packet may go (meaningful while limited).
    pub fn next_send(&self) -> Instant {
        self.next_send
    }

    /// Whether a packet may go at `now` (after [`Dcqcn::advance`] to `now`).
    pub fn may_send(&self, now: Instant) -> bool {
        !self.limited || self.next_send <= now
    }

    /// A CNP arrived at `now`: the rate is cut now, or at the end of the rate-reduce period
    /// if a cut was less than one ago.
    pub fn on_cnp(&mut self, now: Instant, c: &mut CcCounters) {
        self.advance(now, c);
        if self.alpha_next.is_none() {
            // The flow's first CNP: alpha starts at its initial value, its clock now.
            self.alpha = f64::from(self.p.initial_alpha_1024.min(1024)) / 1024.0;
            self.alpha_next = Some(now + self.p.alpha_period);
        } else {
            self.alpha_cnp = true;
        }
        match self.last_cut {
            Some(t) if now < t + self.p.rate_reduce_period => {
                self.cut_pending = true;
                c.cnp_coalesced += 1;
            }
            _ => self.cut(now, c),
        }
    }

    /// `bytes` left at `now` (a paced packet's frame): the gate closes for their time at the
    /// current rate, and the byte counter moves.
    pub fn on_sent(&mut self, now: Instant, bytes: u64, c: &mut CcCounters) {
        self.advance(now, c);
        if !self.limited {
            return;
        }
        let ns = (u128::from(bytes) * 8 * 1_000_000_000).div_ceil(u128::from(self.rc.max(1)));
        self.next_send = self.next_send.max(now) + Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX));
        let b = self.p.byte_counter;
        if b == 0 {
            return;
        }
        self.bytes += bytes;
        while self.limited && self.bytes >= b {
            self.bytes -= b;
            self.increase(c);
            self.b_stage = self.b_stage.saturating_add(1);
        }
    }

    /// Apply everything due by `now`, in time order: alpha updates, a pending cut, timer
    /// rate increases.
    pub fn advance(&mut self, now: Instant, c: &mut CcCounters) {
        let mut events = 0u32;
        loop {
            let cut_at = self.cut_pending.then(|| self.last_cut.unwrap_or(now) + self.p.rate_reduce_period);
            let timer_at = (self.limited && !self.p.timer.is_zero()).then_some(self.timer_next);
            let next = match (cut_at, timer_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            match next {
                Some(t) if t <= now => {
                    self.alpha_until(t);
                    if cut_at == Some(t) {
                        self.cut(t, c);
                    } else {
                        events += 1;
                        if events > MAX_EVENTS_PER_CALL {
                            self.timer_next = now + self.p.timer;
                            continue;
                        }
                        self.timer_next = t + self.p.timer;
                        self.increase(c);
                        self.t_stage = self.t_stage.saturating_add(1);
                    }
                }
                _ => {
                    self.alpha_until(now);
                    return;
                }
            }
        }
    }

    /// Every alpha update due by `t`: the first with the period's CNP flag, the rest (periods
    /// without a CNP) at once.
    fn alpha_until(&mut self, t: Instant) {
        let Some(next) = self.alpha_next else { return };
        if next > t {
            return;
        }
        let g = f64::from(self.p.g_1024.min(1024)) / 1024.0;
        let hit = if self.alpha_cnp { g } else { 0.0 };
        self.alpha = (1.0 - g) * self.alpha + hit;
        self.alpha_cnp = false;
        let period = self.p.alpha_period.as_nanos().max(1);
        let more = (t - next).as_nanos() / period;
        if more > 0 {
            self.alpha *= (1.0 - g).powi(i32::try_from(more).unwrap_or(i32::MAX));
        }
        let skip = u64::try_from((more + 1) * period).unwrap_or(u64::MAX);
        self.alpha_next = Some(next + Duration::from_nanos(skip));
    }

    /// The cut: R_T = R_C (see `clamp_target_rate`), R_C = R_C · (1 − α/2), stages reset.
    fn cut(&mut self, t: Instant, c: &mut CcCounters) {
        if self.p.clamp_target_rate || self.increased || !self.limited {
            self.rt = self.rc;
        }
        let cut = (self.rc as f64 * (1.0 - self.alpha / 2.0)).round() as u64;
        let floor = self.p.min_rate.max(1).min(self.p.line_rate.max(1));
        self.rc = cut.max(floor).min(self.rc);
        self.limited = true;
        self.t_stage = 0;
        self.b_stage = 0;
        self.bytes = 0;
        self.timer_next = t + self.p.timer;
        self.last_cut = Some(t);
        self.cut_pending = false;
        self.increased = false;
        c.rate_cuts += 1;
    }

    /// The timer and byte-counter stages as the increase rule reads them: with one source
    /// off, its stage is taken as the other's.
    fn effective_stages(&self) -> (u32, u32) {
        let (t, b) = (self.t_stage, self.b_stage);
        match (self.p.timer.is_zero(), self.p.byte_counter == 0) {
            (true, false) => (b, b),
            (false, true) => (t, t),
            _ => (t, b),
        }
    }

    /// The kind of increase the next event makes, from the stages before it.
    pub fn next_increase(&self) -> Increase {
        let f = self.p.threshold;
        let (t, b) = self.effective_stages();
        if t.max(b) < f {
            Increase::FastRecovery
        } else if t.min(b) > f {
            Increase::Hyper
        } else {
            Increase::Additive
        }
    }

    fn increase(&mut self, c: &mut CcCounters) {
        let line = self.p.line_rate.max(1);
        match self.next_increase() {
            Increase::FastRecovery => c.rate_increase_fast_recovery += 1,
            Increase::Additive => {
                self.rt = self.rt.saturating_add(self.p.rate_ai).min(line);
                c.rate_increase_additive += 1;
            }
            Increase::Hyper => {
                let (t, b) = self.effective_stages();
                let i = u64::from(t.min(b) - self.p.threshold);
                self.rt = self.rt.saturating_add(i.saturating_mul(self.p.rate_hai)).min(line);
                c.rate_increase_hyper += 1;
            }
        }
        // Halfway, rounded up so that it reaches the target.
        self.rc = (self.rc / 2 + self.rt / 2 + (self.rc % 2 + self.rt % 2).div_ceil(2)).min(line);
        self.increased = true;
        if self.rc >= line {
            self.rc = line;
            self.rt = line;
            self.limited = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = 1_000_000_000;

    fn us(n: u64) -> Instant {
        Instant::from_nanos(n * 1000)
    }

    /// The paper's parameters with the byte counter out of reach (timer events only).
    fn paper_timer_only() -> DcqcnParams {
        DcqcnParams { byte_counter: 0, ..DcqcnParams::paper() }
    }

    #[test]
    fn ecn_field_of_a_traffic_class() {
        for (tc, e) in [(0xb8, Ecn::NotEct), (0xb9, Ecn::Ect1), (0xba, Ecn::Ect0), (0xbb, Ecn::Ce)] {
            assert_eq!(Ecn::of(tc), e);
            assert_eq!(e.set(0xb8), tc, "the DSCP kept");
        }
        assert!(Ecn::Ect0.is_ect() && Ecn::Ect1.is_ect() && !Ecn::Ce.is_ect() && !Ecn::NotEct.is_ect());
    }

    #[test]
    fn the_pacer_allows_one_cnp_per_interval() {
        let mut p = CnpPacer::default();
        let n = Duration::from_micros(4);
        assert!(p.allow(us(10), n));
        assert!(!p.allow(us(10), n));
        assert!(!p.allow(Instant::from_nanos(13_999), n));
        assert!(p.allow(us(14), n), "a whole interval later");
        assert!(!p.allow(us(17), n));
        let mut p = CnpPacer::default();
        assert!(p.allow(us(1), Duration::ZERO) && p.allow(us(1), Duration::ZERO), "interval 0: every CE mark");
    }

    /// The first CNP: α = 1, R_T = R_C, R_C = R_C · (1 − α/2) [the paper, eq. (1)].
    #[test]
    fn the_first_cnp_halves_the_rate_and_keeps_the_target() {
        let mut c = CcCounters::default();
        let mut d = Dcqcn::new(DcqcnParams::paper());
        assert!(!d.is_limited() && d.may_send(Instant::ZERO));
        d.on_cnp(us(0), &mut c);
        assert_eq!((d.rate(), d.target_rate(), d.alpha()), (20 * G, 40 * G, 1.0));
        assert!(d.is_limited());
        assert_eq!(c.rate_cuts, 1);
        // The NIC's initial alpha is 1023/1024.
        let mut n = Dcqcn::new(DcqcnParams::nic().with_line_rate(10 * G));
        n.on_cnp(us(0), &mut c);
        assert_eq!(n.rate(), (10.0 * G as f64 * (1.0 - 1023.0 / 2048.0)).round() as u64);
    }

    /// Alpha: (1 − g)·α per period without a CNP, (1 − g)·α + g with one [eq. (2), (3)].
    #[test]
    fn alpha_decays_per_quiet_period_and_rises_with_a_cnp() {
        let mut c = CcCounters::default();
        let p = paper_timer_only();
        let g: f64 = 1.0 / 256.0;
        let mut d = Dcqcn::new(p);
        d.on_cnp(us(0), &mut c);
        d.advance(us(55 * 3), &mut c);
        assert!((d.alpha() - (1.0 - g).powi(3)).abs() < 1e-12, "{}", d.alpha());
        // A CNP in the fourth period: that period's update adds g.
        d.on_cnp(us(55 * 3 + 10), &mut c);
        let before = d.alpha();
        d.advance(us(55 * 4), &mut c);
        assert!((d.alpha() - ((1.0 - g) * before + g)).abs() < 1e-12);
        // Many quiet periods at once.
        let a = d.alpha();
        d.advance(us(55 * 1004), &mut c);
        assert!((d.alpha() - a * (1.0 - g).powi(1000)).abs() < 1e-12);
    }

    /// After a cut, F timer events of fast recovery (R_C halfway to R_T), then additive
    /// increase (R_T += R_AI) while the byte counter stays below F [§3.1, fig. 6].
    #[test]
    fn fast_recovery_then_additive_increase() {
        let mut c = CcCounters::default();
        let mut d = Dcqcn::new(DcqcnParams { byte_counter: 10 * 1024 * 1024, ..DcqcnParams::paper() });
        d.on_cnp(us(0), &mut c); // 20 G, target 40 G
        d.on_cnp(us(10), &mut c); // α still 1: target 20 G, rate 10 G
        assert_eq!((d.rate(), d.target_rate()), (10 * G, 20 * G));
        let mut rc = 10 * G;
        for k in 1..=5 {
            d.advance(us(10 + 55 * k), &mut c);
            rc = (rc + 20 * G).div_ceil(2);
            assert_eq!((d.rate(), d.target_rate()), (rc, 20 * G), "fast recovery {k}");
        }
        assert_eq!(c.rate_increase_fast_recovery, 5);
        d.advance(us(10 + 55 * 6), &mut c);
        let rt = 20 * G + 40_000_000;
        assert_eq!((d.target_rate(), d.rate()), (rt, (rc + rt).div_ceil(2)));
        assert_eq!((c.rate_increase_additive, c.rate_increase_hyper), (1, 0), "no bytes sent: never hyper");
        assert_eq!(d.stages(), (6, 0));
    }

    /// Hyper increase once both stages pass F, by i · R_HAI with i = min(T, BC) − F; with one
    /// source off, the other's stage counts for both.
    #[test]
    fn hyper_increase_needs_both_counters_past_the_threshold() {
        let mut c = CcCounters::default();
        // Timer only, F = 1: FR, AI, HAI (i = 1), HAI (i = 2).
        let nic = DcqcnParams { clamp_target_rate: true, ..DcqcnParams::nic().with_line_rate(10 * G) };
        let p = DcqcnParams { byte_counter: 0, ..nic };
        let mut d = Dcqcn::new(p);
        d.on_cnp(us(0), &mut c);
        d.on_cnp(us(10), &mut c); // second cut, clamped: target = the first cut's rate
        let rt0 = d.target_rate();
        let steps = [0, 0, 5_000_000, 5_000_000 + 50_000_000, 5_000_000 + 150_000_000];
        for (k, add) in steps.iter().enumerate().skip(1) {
            d.advance(us(10 + 300 * k as u64), &mut c);
            assert_eq!(d.target_rate(), rt0 + add, "event {k}");
        }
        assert_eq!((c.rate_increase_fast_recovery, c.rate_increase_additive, c.rate_increase_hyper), (1, 1, 2));
        // Both sources, F = 1: the byte counter alone moves on to additive, not hyper.
        let mut c = CcCounters::default();
        let p = DcqcnParams { timer: Duration::from_millis(10), ..nic };
        let mut d = Dcqcn::new(p);
        d.on_cnp(us(0), &mut c);
        d.on_cnp(us(10), &mut c);
        for _ in 0..4 {
            d.on_sent(us(10), 32_767, &mut c);
        }
        assert_eq!((c.rate_increase_fast_recovery, c.rate_increase_additive, c.rate_increase_hyper), (1, 3, 0));
        d.advance(us(10 + 10_000), &mut c); // a timer event at T = 0, BC = 4: additive
        d.advance(us(10 + 20_000), &mut c); // T = 1, BC = 4: still additive (min = F)
        d.on_sent(us(10 + 20_000), 32_767, &mut c); // a byte event at T = 2, BC = 4: hyper, i = 1
        assert_eq!((c.rate_increase_additive, c.rate_increase_hyper), (5, 1));
    }

    /// mlx5's rate-reduce period: CNPs within 4 µs of a cut fold into one cut at its end;
    /// without clamping, cuts in a row keep the target from before them.
    #[test]
    fn cnps_within_the_rate_reduce_period_fold_into_one_cut() {
        let mut c = CcCounters::default();
        let mut d = Dcqcn::new(DcqcnParams::nic().with_line_rate(10 * G));
        d.on_cnp(us(0), &mut c);
        let r1 = d.rate();
        d.on_cnp(us(1), &mut c);
        d.on_cnp(us(2), &mut c);
        assert_eq!((c.rate_cuts, c.cnp_coalesced, d.rate()), (1, 2, r1));
        d.advance(Instant::from_nanos(3_999), &mut c);
        assert_eq!(c.rate_cuts, 1);
        d.advance(us(4), &mut c);
        assert_eq!(c.rate_cuts, 2);
        assert!(d.rate() < r1);
        assert_eq!(d.target_rate(), 10 * G, "no increase between the cuts: the target stays");
        // With clamping (the paper's rule) the second cut would have set it.
        let mut c = CcCounters::default();
        let mut d = Dcqcn::new(DcqcnParams { clamp_target_rate: true, ..DcqcnParams::nic().with_line_rate(10 * G) });
        d.on_cnp(us(0), &mut c);
        d.on_cnp(us(5), &mut c);
        assert_eq!(d.target_rate(), r1);
    }

    /// The gate: a limited QP's next packet waits for the last one's time at R_C.
    #[test]
    fn the_gate_spaces_packets_at_the_current_rate() {
        let mut c = CcCounters::default();
        let mut d = Dcqcn::new(DcqcnParams { line_rate: 2 * G, ..paper_timer_only() });
        d.on_sent(us(0), 1000, &mut c);
        assert!(d.may_send(us(0)), "unlimited: no gate");
        d.on_cnp(us(0), &mut c); // 1 Gbit/s
        d.on_sent(us(0), 1000, &mut c); // 8 µs
        assert!(!d.may_send(Instant::from_nanos(7_999)));
        assert!(d.may_send(us(8)));
        d.on_sent(us(20), 500, &mut c); // idle before: from now, 4 µs
        assert_eq!(d.next_send(), us(24));
    }

    /// Left alone, a limited QP climbs back to the line rate and stops its timers; a cut never
    /// goes below the minimum rate.
    #[test]
    fn recovery_reaches_the_line_rate_and_cuts_stop_at_the_floor() {
        let mut c = CcCounters::default();
        let mut d = Dcqcn::new(DcqcnParams::nic().with_line_rate(100 * G));
        for k in 0..200 {
            d.on_cnp(us(10 * k), &mut c);
        }
        assert_eq!(d.rate(), DcqcnParams::nic().min_rate);
        d.advance(Instant::from_millis(10_000), &mut c);
        assert_eq!((d.rate(), d.target_rate(), d.is_limited()), (100 * G, 100 * G, false));
        let events = c.rate_increase_fast_recovery + c.rate_increase_additive + c.rate_increase_hyper;
        d.advance(Instant::from_millis(20_000), &mut c);
        let after = c.rate_increase_fast_recovery + c.rate_increase_additive + c.rate_increase_hyper;
        assert_eq!(events, after, "no timer once back at the line rate");
    }
}
