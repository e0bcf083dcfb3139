//! `roce analyze` as a library: one pass over a capture, memory bounded by the number of
//! flows and open transactions (never by frames), answering what each QP did.
//!
//! [`Analyzer::frame`] takes one captured frame at a time; [`Analyzer::finish`] closes what
//! is still open. The sections live one per file: [`flows`] (per (source, destination, dest QP):
//! packets, bytes, messages, PSN gaps/out-of-order/duplicates/retransmissions, the RC
//! acknowledgement side, ECN CE, CNPs, bad ICRCs), [`mad`] (transactions by TID, RMPP),
//! [`cm`] (connections), [`mcast`] (SA joins/leaves, IGMP/MLD). The reports render the result:
//! [`report_text`] (tables, as tshark's `-z`), [`report_json`] (one document, shape in
//! spec/analyze.schema.json), [`report_html`] (self-contained, inline SVG), and [`annotate`]
//! writes the capture back as pcapng with a comment per frame where [`Analyzer::note`] has one.
//!
//! Frames go through roce_wire's demux, the decoder's own walk (lax: a bad ICRC is counted,
//! not refused), so every link type the decoder reads flows in here too.

pub mod annotate;
pub mod cm;
pub mod flows;
pub mod mad;
pub mod mcast;
pub mod report_html;
pub mod report_json;
pub mod report_text;
pub mod series;

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use roce_wire::bth;
use roce_wire::demux::{Checks, LinkHeader, LinkType, Payload, Sliced};
use roce_wire::frame::FramePacket;
use roce_wire::l2::L2Packet;

/// Ladder rungs (CM and SA messages) kept for the HTML report; beyond, counted in
/// [`Ladder::dropped`].
pub const MAX_RUNGS: usize = 400;
/// Flows kept by default (`--max-flows`).
pub const DEFAULT_MAX_FLOWS: usize = 100_000;

/// What analysis has to say about the frame just seen (the `--annotate` comment).
#[derive(Debug, Default, Clone)]
pub struct Note {
    text: String,
}

impl Note {
    /// The buffer to append to (a "; " goes between remarks).
    pub fn text(&mut self) -> &mut String {
        if !self.text.is_empty() {
            self.text.push_str("; ");
        }
        &mut self.text
    }

    /// Append a remark.
    pub fn add(&mut self, s: &str) {
        self.text().push_str(s);
    }

    /// The comment, empty if none.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// Where a transport packet comes from or goes to: the IP address of a RoCEv2 packet, the
/// GID of a native InfiniBand packet with a GRH (a GID's text form is an IPv6 address's), or
/// the LID of one routed by LID alone. Shown as the address, or as `LID 4`: never as an
/// address it is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Endpoint {
    /// An IP address or a GID.
    Ip(IpAddr),
    /// A LID (an IB packet without a GRH).
    Lid(u16),
}

impl Endpoint {
    /// The IP address or GID, `None` for a LID.
    pub fn ip(self) -> Option<IpAddr> {
        match self {
            Endpoint::Ip(ip) => Some(ip),
            Endpoint::Lid(_) => None,
        }
    }

    /// The LID, `None` for an IP address or GID.
    pub fn lid(self) -> Option<u16> {
        match self {
            Endpoint::Ip(_) => None,
            Endpoint::Lid(lid) => Some(lid),
        }
    }
}

impl From<IpAddr> for Endpoint {
    fn from(ip: IpAddr) -> Endpoint {
        Endpoint::Ip(ip)
    }
}

impl From<Ipv4Addr> for Endpoint {
    fn from(ip: Ipv4Addr) -> Endpoint {
        Endpoint::Ip(ip.into())
    }
}

impl From<Ipv6Addr> for Endpoint {
    fn from(ip: Ipv6Addr) -> Endpoint {
        Endpoint::Ip(ip.into())
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Ip(ip) => write!(f, "{ip}"),
            Endpoint::Lid(lid) => write!(f, "LID {lid}"),
        }
    }
}

/// One transport packet as the analysis sees it, whatever link carried it: RoCEv2 frames are
/// read into it from the demux ([`Packet::from_roce`]); a native InfiniBand packet can be read
/// into it from its LRH/GRH (the GIDs as the endpoints) and handed to [`Analyzer::packet`].
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    /// The source endpoint.
    pub src: Endpoint,
    /// The destination endpoint.
    pub dst: Endpoint,
    /// The BTH.
    pub bth: bth::Packet<&'a [u8]>,
    /// The extension headers the opcode carries, in wire order.
    pub ext: &'a [u8],
    /// The payload (pad and ICRC excluded).
    pub payload: &'a [u8],
    /// Whether the ICRC is right.
    pub icrc_ok: bool,
    /// Whether the packet carries a congestion mark (IP ECN bits 11).
    pub ecn_ce: bool,
}

impl<'a> Packet<'a> {
    /// The packet of a RoCEv2 frame the demux checked.
    pub fn from_roce(fp: &FramePacket<'a>) -> Packet<'a> {
        let b = fp.as_bytes();
        let ip = fp.offsets.ip;
        // ECN: the low two bits of the IPv4 TOS, or of the IPv6 traffic class.
        let ecn = if fp.is_ipv6() { (b[ip + 1] >> 4) & 3 } else { b[ip + 1] & 3 };
        Packet {
            src: fp.src_ip().into(),
            dst: fp.dst_ip().into(),
            bth: fp.bth(),
            ext: &b[fp.offsets.ext..fp.offsets.payload],
            payload: fp.payload(),
            icrc_ok: fp.icrc_ok(),
            ecn_ce: ecn == 3,
        }
    }
}

impl<'a> Packet<'a> {
    /// The packet of a native InfiniBand transport packet (`buf` from the LRH on, parsed as
    /// `ib`): the endpoints are the GRH's GIDs, or, for a packet routed by LID alone (no
    /// GRH), its LIDs; the congestion mark is the BTH's FECN; the ICRC verdict is the VCRC's and the ICRC's
    /// together (a port drops a packet for either). `None` for a raw packet (no BTH).
    pub fn from_infiniband(buf: &'a [u8], ib: &roce_wire::ib_frame::IbFrame<'a>) -> Option<Packet<'a>> {
        let t = ib.transport()?;
        let (src, dst) = match &ib.grh {
            Some(g) => (Ipv6Addr::from(g.sgid).into(), Ipv6Addr::from(g.dgid).into()),
            None => (Endpoint::Lid(ib.lrh.slid), Endpoint::Lid(ib.lrh.dlid)),
        };
        let bth_at = ib.offsets.bth;
        let bth = bth::Packet::new_unchecked(buf.get(bth_at..bth_at + bth::BTH_LEN)?);
        Some(Packet {
            src,
            dst,
            ecn_ce: bth.fecn(),
            bth,
            ext: buf.get(bth_at + bth::BTH_LEN..ib.offsets.payload)?,
            payload: t.payload,
            icrc_ok: t.icrc_ok() && ib.vcrc_ok(),
        })
    }
}

/// One message of the ladder diagram.
#[derive(Debug, Clone)]
pub struct Rung {
    /// Seconds since the capture's start.
    pub t: f64,
    /// Frame number.
    pub frame: u64,
    /// Sender.
    pub src: Endpoint,
    /// Receiver.
    pub dst: Endpoint,
    /// What it was ("CM REQ", "SA Set(MCMemberRecord)", …).
    pub label: String,
}

/// The CM and SA messages for the ladder diagram (the first [`MAX_RUNGS`]).
#[derive(Debug, Default)]
pub struct Ladder {
    /// The rungs kept.
    pub rungs: Vec<Rung>,
    /// Rungs not kept.
    pub dropped: u64,
}

/// Frame counts of the whole capture.
#[derive(Debug, Default, Clone)]
pub struct Totals {
    /// Frames read.
    pub frames: u64,
    /// Captured bytes.
    pub bytes: u64,
    /// Transport packets: RoCEv2 frames, native InfiniBand packets (link types 247 and 197)
    /// and packets handed to [`Analyzer::packet`].
    pub roce: u64,
    /// IGMP and MLD messages.
    pub multicast_reports: u64,
    /// Other frames (ARP, ND, other protocols) by kind.
    pub other: BTreeMap<&'static str, u64>,
    /// Frames that did not parse, by "layer: reason".
    pub malformed: BTreeMap<String, u64>,
    /// Time of the first frame since the epoch.
    pub start: Option<Duration>,
    /// Seconds from the first frame to the last.
    pub duration: f64,
}

impl Totals {
    /// Count a frame that does not parse, under its layer and reason.
    fn count_malformed(&mut self, e: &roce_wire::Error) {
        *self.malformed.entry(format!("{}: {}", e.layer().name(), e.reason())).or_default() += 1;
    }
}

/// The analysis state.
pub struct Analyzer {
    /// Frame counts.
    pub totals: Totals,
    /// Flows.
    pub flows: flows::FlowTable,
    /// MAD transactions.
    pub mads: mad::MadTable,
    /// CM connections.
    pub cm: cm::CmTable,
    /// Multicast groups.
    pub mcast: mcast::McastTable,
    /// The ladder diagram's messages.
    pub ladder: Ladder,
    note: Note,
}

impl Default for Analyzer {
    fn default() -> Self {
        Analyzer::new(DEFAULT_MAX_FLOWS)
    }
}

impl Analyzer {
    /// An analyzer keeping at most `max_flows` flows.
    pub fn new(max_flows: usize) -> Analyzer {
        Analyzer {
            totals: Totals::default(),
            flows: flows::FlowTable::new(max_flows),
            mads: mad::MadTable::default(),
            cm: cm::CmTable::default(),
            mcast: mcast::McastTable::default(),
            ladder: Ladder::default(),
            note: Note::default(),
        }
    }

    /// What the analysis said about the last frame (empty if nothing).
    pub fn note(&self) -> &str {
        self.note.as_str()
    }

    /// Count a frame of `len` captured bytes at `timestamp`: its number and its time since
    /// the first frame.
    fn start(&mut self, timestamp: Duration, len: usize) -> (u64, f64) {
        self.note.text.clear();
        let tot = &mut self.totals;
        tot.frames += 1;
        tot.bytes += len as u64;
        let start = *tot.start.get_or_insert(timestamp);
        let t = timestamp.saturating_sub(start).as_secs_f64();
        tot.duration = tot.duration.max(t);
        (tot.frames, t)
    }

    /// Analyse one transport packet whose link the caller read (from a frame of `cap_len`
    /// captured bytes), as [`Analyzer::frame`] analyses a RoCEv2 frame.
    pub fn packet(&mut self, timestamp: Duration, cap_len: usize, p: &Packet<'_>) {
        let (n, t) = self.start(timestamp, cap_len);
        self.transport(p, t, n);
    }

    fn transport(&mut self, p: &Packet<'_>, t: f64, n: u64) {
        self.totals.roce += 1;
        self.flows.frame(p, t, n, &mut self.note);
        let m = p.payload;
        if p.bth.dest_qp() <= 1 && m.len() >= roce_wire::MAD_SIZE {
            self.mad(p.src, p.dst, &m[..roce_wire::MAD_SIZE], t, n);
        }
    }

    /// A native InfiniBand packet (from the LRH on).
    fn infiniband(&mut self, data: &[u8], t: f64, n: u64) {
        match roce_wire::ib_frame::parse(data) {
            Ok(ib) => match Packet::from_infiniband(data, &ib) {
                Some(p) => self.transport(&p, t, n),
                None => *self.totals.other.entry("infiniband_raw").or_default() += 1,
            },
            Err(e) => {
                self.totals.count_malformed(&e);
                let _ = std::fmt::Write::write_fmt(self.note.text(), format_args!("malformed: {e}"));
            }
        }
    }

    /// Analyse one frame (`linktype`: see [`crate::capture::linktype`]).
    pub fn frame(&mut self, timestamp: Duration, linktype: u32, data: &[u8]) {
        let (n, t) = self.start(timestamp, data.len());
        // Native InfiniBand: the packet itself (247), or inside an ERF record (197).
        if linktype == crate::capture::linktype::INFINIBAND {
            return self.infiniband(data, t, n);
        }
        if linktype == crate::capture::linktype::ERF {
            use roce_wire::erf::{parse_record, RecordType};
            match parse_record(data) {
                Ok(r) if r.header.record_type == RecordType::Infiniband => return self.infiniband(r.frame, t, n),
                Ok(_) => *self.totals.other.entry("erf_not_infiniband").or_default() += 1,
                Err(e) => self.totals.count_malformed(&e),
            }
            return;
        }
        let tot = &mut self.totals;
        let sliced =
            LinkHeader::parse(LinkType::from(linktype), data).and_then(|h| Sliced::after_link(h, data, Checks::Lax));
        let sliced = match sliced {
            Ok(s) => s,
            Err(e) if e.reason() == "link_type" => {
                // A link type the demux does not read (as `roce decode`'s `unsupported_link`).
                *tot.other.entry("unsupported_link").or_default() += 1;
                return;
            }
            Err(e) => {
                tot.count_malformed(&e);
                let _ = std::fmt::Write::write_fmt(self.note.text(), format_args!("malformed: {e}"));
                return;
            }
        };
        match sliced.payload {
            Payload::RoceV2 { packet, .. } => self.transport(&Packet::from_roce(&packet), t, n),
            Payload::NotRoce { packet: Ok(p), .. } => match p {
                L2Packet::Igmp { ip, msg } => {
                    tot.multicast_reports += 1;
                    self.mcast.igmp(IpAddr::from(ip.source), &msg, t);
                }
                L2Packet::Mld { ip, msg, .. } => {
                    tot.multicast_reports += 1;
                    self.mcast.mld(IpAddr::from(ip.source), &msg, t);
                }
                L2Packet::Arp(_) => *tot.other.entry("arp").or_default() += 1,
                L2Packet::Ndisc { .. } => *tot.other.entry("ndisc").or_default() += 1,
                L2Packet::Other { .. } => *tot.other.entry("other").or_default() += 1,
            },
            Payload::NotRoce { packet: Err(e), .. } => {
                tot.count_malformed(&e);
            }
        }
    }

    fn mad(&mut self, src: Endpoint, dst: Endpoint, m: &[u8], t: f64, frame: u64) {
        use roce_wire::mad::{attribute_name, method_name, Method, MgmtClass};
        let class = MgmtClass::from(m[1]);
        let attr = u16::from_be_bytes([m[16], m[17]]);
        let closed = self.mads.mad(src, dst, m, t, frame, &mut self.note);
        if m[1] == roce_wire::cm::MGMT_CLASS {
            if let Some(pair) = self.cm.mad(src, dst, m, t, frame, &mut self.note) {
                self.flows.connected(pair);
            }
        }
        if m[1] == 0x03 && attr == roce_wire::sa::attr::MC_MEMBER_RECORD {
            self.mcast.sa(m, closed.map(|c| (c.method, c.status)), t, &mut self.note);
        }
        if matches!(m[1], 0x03 | 0x07) {
            if self.ladder.rungs.len() >= MAX_RUNGS {
                self.ladder.dropped += 1;
                return;
            }
            let response = m[3] & 0x80 != 0;
            let label = if m[1] == 0x07 {
                format!("CM {}", roce_wire::cm::attr::name(attr))
            } else {
                format!(
                    "SA {}({})",
                    method_name(class, Method::from(m[3] & 0x7f), response),
                    attribute_name(class, attr)
                )
            };
            self.ladder.rungs.push(Rung { t, frame, src, dst, label });
        }
    }

    /// Close what is still open (transactions never answered) and put each CNP on the data
    /// flow it answers, where the capture tells which.
    pub fn finish(&mut self) {
        self.mads.finish();
        self.flows.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::samples::sample_frames;
    use proptest::prelude::*;
    use serde_json::json;

    /// Sequences of sample frames with bytes changed, cut, or plain junk, on any link type:
    /// the analysis and every report never panic, and the JSON document is one line.
    fn run(frames: &[(u32, Vec<u8>)]) {
        let mut a = Analyzer::new(8);
        let mut w = annotate::PcapngWriter::new(Vec::new()).unwrap();
        for (i, (lt, f)) in frames.iter().enumerate() {
            let t = Duration::from_micros(i as u64 * 3);
            a.frame(t, *lt, f);
            w.write(t, *lt, f.len() as u32, f, a.note()).unwrap();
        }
        a.finish();
        assert!(!report_json::document(&a).to_string().contains('\n'));
        let _ = report_text::render(&a);
        assert!(report_html::render(&a).ends_with("</html>\n"));
        let bytes = w.finish().unwrap();
        let mut r = crate::capture::Reader::new(&bytes[..]).unwrap();
        let mut n = 0;
        while r.next_frame().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, frames.len());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
        #[test]
        fn any_frames_any_link_never_panic(
            picks in proptest::collection::vec((0usize..64, any::<u16>(), any::<u8>(), 0usize..400, 0u8..6), 1..40),
        ) {
            let samples = sample_frames();
            const LINKS: [u32; 6] = [1, 1, 1, 101, 113, 276];
            let frames: Vec<(u32, Vec<u8>)> = picks
                .iter()
                .map(|&(k, at, v, cut, lt)| {
                    let mut f = samples[k % samples.len()].bytes.clone();
                    if !f.is_empty() {
                        let i = usize::from(at) % f.len();
                        f[i] ^= v;
                    }
                    if cut < f.len() && cut % 3 == 0 {
                        f.truncate(cut);
                    }
                    (LINKS[usize::from(lt)], f)
                })
                .collect();
            run(&frames);
        }
    }

    /// A caller that reads the link itself and hands the packets over gets the same flows.
    #[test]
    fn packets_handed_over_give_the_same_flows() {
        let mut by_frame = Analyzer::default();
        let mut by_packet = Analyzer::default();
        for (i, s) in crate::samples_mixed::mixed_frames(600, 3).enumerate() {
            let t = Duration::from_micros(i as u64);
            if let Ok(Sliced { payload: Payload::RoceV2 { packet, .. }, .. }) = Sliced::from_ethernet(&s, Checks::Lax) {
                by_frame.frame(t, 1, &s);
                by_packet.packet(t, s.len(), &Packet::from_roce(&packet));
            }
        }
        let flows = |a: &Analyzer| report_json::document(a)["flows"].clone();
        assert!(by_frame.totals.roce > 300);
        assert_eq!(flows(&by_frame), flows(&by_packet));
        assert_eq!(by_frame.mads.mads, by_packet.mads.mads);
    }

    /// A LID stays a LID: the JSON's `src_lid` beside a null `src`, `LID 3` in the text; an
    /// address has a null `_lid` beside it.
    #[test]
    fn lid_endpoints_never_read_as_addresses() {
        let mut a = Analyzer::default();
        let bth = [0x64, 0, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 7]; // UD SEND ONLY to QP 1, PSN 7
        let mut p = Packet {
            src: Endpoint::Lid(3),
            dst: Endpoint::Lid(0xffff),
            bth: bth::Packet::new_unchecked(&bth[..]),
            ext: &[],
            payload: &[],
            icrc_ok: true,
            ecn_ce: false,
        };
        a.packet(Duration::ZERO, 64, &p);
        p.src = Ipv6Addr::LOCALHOST.into();
        a.packet(Duration::ZERO, 64, &p);
        let doc = report_json::document(&a);
        let (lid, gid) = (&doc["flows"][0], &doc["flows"][1]);
        assert_eq!(
            (&lid["src"], &lid["src_lid"], &lid["dst"], &lid["dst_lid"]),
            (&json!(null), &json!(3), &json!(null), &json!(0xffff))
        );
        assert_eq!((&gid["src"], &gid["src_lid"]), (&json!("::1"), &json!(null)));
        let text = report_text::render(&a);
        assert!(text.contains("LID 3") && text.contains("LID 65535") && !text.contains("0.0.0.3"), "{text}");
    }

    #[test]
    fn every_sample_frame_through_every_report() {
        let frames: Vec<(u32, Vec<u8>)> = sample_frames().into_iter().map(|s| (1, s.bytes)).collect();
        run(&frames);
        let mut a = Analyzer::default();
        for (lt, f) in &frames {
            a.frame(Duration::ZERO, *lt, f);
        }
        assert_eq!(a.totals.frames, frames.len() as u64);
        assert!(!a.flows.flows.is_empty() && !a.mads.rows.is_empty());
        // A link type nothing here reads (802.11) is counted apart, not as malformed.
        a.frame(Duration::ZERO, 105, &frames[0].1);
        assert_eq!((a.totals.other["unsupported_link"], a.totals.malformed.len()), (1, 1));
    }
}
