//! The bodies of the cargo-fuzz targets in `fuzz/`, here so that `cargo test` can replay every
//! corpus and regression file through exactly the same code (tests/wire/fuzz_corpus.rs).
//!
//! Each function takes arbitrary bytes and panics only when an invariant breaks: a parser
//! panicking, or a Repr that does not survive emit ▶ parse (byte for byte where the format
//! keeps every bit).

use roce_wire::cm::CmMessage;
use roce_wire::demux::{Checks, LinkType, Payload, Sliced};
use roce_wire::mad::MadRepr;
use roce_wire::mcmember::McMemberRecord;
use roce_wire::sa::SaMad;
use roce_wire::{frame, l2, MAD_SIZE};

/// Whole RoCEv2 frames: strict and lax parsing never panic, errors print, and what the strict
/// parser accepts the lax one accepts too, with the same Repr. The demux walks the same
/// bytes to the same result (see [`demux`]).
pub fn frame(data: &[u8]) {
    let lax = frame::parse_lax(data);
    match frame::parse(data) {
        Ok(f) => assert_eq!(lax.map(|l| l.repr), Ok(f.repr), "lax and strict disagree on an accepted frame"),
        Err(e) => {
            let _ = (e.to_string(), e.reason(), e.layer(), e.offset());
            assert!(e.offset() <= data.len(), "error offset past the end of the input");
        }
    }
    demux(data);
}

/// The one demux entry (`roce_wire::demux`): on an Ethernet frame, strict and lax, it finds
/// what `frame::parse` (then `frame::parse_lax`) and, for a frame that is not RoCEv2,
/// `l2::parse_frame` find; on the other link types (the bytes taken as a cooked or raw IP
/// capture) it never panics and its errors point inside the input.
pub fn demux(data: &[u8]) {
    for checks in [Checks::Strict, Checks::Lax] {
        let sliced = Sliced::from_ethernet(data, checks);
        let strict = frame::parse(data);
        match (sliced, checks) {
            (Ok(Sliced { payload: Payload::RoceV2 { packet, refused }, .. }), _) => {
                let f = packet.to_frame().expect("a checked view builds its owned form");
                match &strict {
                    Ok(s) => assert_eq!((&f, refused), (s, None), "demux and frame::parse disagree"),
                    Err(e) => {
                        assert_eq!(checks, Checks::Lax, "strict demux accepts what frame::parse refuses");
                        assert_eq!(refused, Some(*e), "lax demux keeps another error than frame::parse's");
                        assert_eq!(Ok(f), frame::parse_lax(data), "demux and frame::parse_lax disagree");
                    }
                }
            }
            (Ok(Sliced { payload: Payload::NotRoce { packet, .. }, .. }), _) => {
                assert!(strict.is_err(), "demux says not RoCEv2 where frame::parse accepts");
                assert_eq!(packet, l2::parse_frame(data).map(|f| f.packet), "demux and l2::parse_frame disagree");
            }
            (Err(e), Checks::Strict) => {
                assert_eq!(Err(e), strict.map(|_| ()), "strict demux and frame::parse disagree")
            }
            (Err(e), Checks::Lax) => {
                assert_eq!(Err(e), frame::parse_lax(data).map(|_| ()), "lax demux and frame::parse_lax disagree")
            }
        }
    }
    for link in [LinkType::LinuxSll, LinkType::LinuxSll2, LinkType::Raw, LinkType::Ipv4, LinkType::Ipv6] {
        match Sliced::from_link(link, data, Checks::Lax) {
            Ok(Sliced { payload: Payload::RoceV2 { packet, .. }, .. }) => {
                let _ = packet.to_frame();
            }
            Ok(Sliced { payload: Payload::NotRoce { packet: Ok(p), .. }, .. }) => {
                let _ = p.to_string();
            }
            Ok(Sliced { payload: Payload::NotRoce { packet: Err(e), .. }, .. }) | Err(e) => {
                assert!(e.offset() <= data.len(), "error offset past the end of the input");
            }
        }
    }
}

/// parse ▶ emit ▶ parse: any frame the lax parser accepts (so a fuzzer need not forge ICRCs)
/// re-emits to a frame whose ICRC is right and that parses back to the same Repr; a frame the
/// strict parser accepts re-emits byte for byte when its IP packet held exactly the UDP
/// datagram.
pub fn roundtrip(data: &[u8]) {
    let Ok(f) = frame::parse_lax(data) else { return };
    let mut repr = f.repr.clone();
    repr.fill().expect("a parsed frame's lengths fit");
    let mut out = vec![0u8; repr.buffer_len()];
    let n = repr.emit(&mut out).expect("buffer_len is enough");
    assert_eq!(n, out.len());
    let again = frame::parse_lax(&out).expect("our own emitted frame parses");
    assert!(again.icrc_ok(), "our own emitted frame has a bad ICRC");
    assert!(again.ip_checksum_ok, "our own emitted frame has a bad IPv4 checksum");
    assert_eq!(again.repr, repr, "parse(emit(repr)) != repr");
    if repr.bth.tver == 0 {
        assert_eq!(frame::parse(&out).map(|g| g.repr), Ok(repr), "strict parse refuses our own frame");
    }
    let canonical = f.offsets.end == data.len() - f.trailer.len();
    if canonical && frame::parse(data).is_ok() {
        assert_eq!(&out[..], &data[..f.offsets.end], "a canonical frame re-emits byte for byte");
    }
}

/// MADs: the common header, whole SA MADs (MCMemberRecord, ClassPortInfo, ServiceRecord, raw),
/// a bare MCMemberRecord and a bare ServiceRecord; each re-emits byte for byte.
pub fn mad(data: &[u8]) {
    if let Ok(m) = MadRepr::parse_bytes(data) {
        assert_eq!(m.to_bytes()[..], data[..MAD_SIZE]);
        let _ = m.header.method_name();
        let _ = m.header.attribute_name();
    }
    if let Ok(sa) = SaMad::parse(data) {
        assert_eq!(sa.to_bytes()[..], data[..MAD_SIZE], "SA MAD re-emits byte for byte");
        let _ = SaMad::parse_checked(data);
    }
    if let Ok(r) = McMemberRecord::parse_bytes(data) {
        assert_eq!(r.to_bytes()[..], data[..McMemberRecord::LEN]);
        let _ = format!("{} {}", r.join_state, r.mgid);
    }
    if let Ok(r) = roce_wire::service_record::ServiceRecord::parse_bytes(data) {
        assert_eq!(r.to_bytes()[..], data[..roce_wire::service_record::SERVICE_RECORD_LEN]);
        let mask = roce_wire::service_record::ComponentMask(r.service_id);
        let _ = (r.matches(&r, mask), r.name(), format!("{mask}"));
        let _ = roce_cm::service::records_of(data);
    }
}

/// CM message bodies: the first two bytes pick the attribute ID, the rest is the 232-byte data
/// area (which must re-emit byte for byte).
pub fn cm(data: &[u8]) {
    if data.len() < 2 {
        return;
    }
    let attr = u16::from_be_bytes([data[0], data[1]]) & 0x1f;
    let body = &data[2..];
    if let Ok(msg) = CmMessage::parse(attr, body) {
        let mut out = [0u8; roce_wire::cm::DATA_LEN];
        msg.emit(&mut out);
        assert_eq!(out[..], body[..roce_wire::cm::DATA_LEN], "CM body re-emits byte for byte");
        let _ = (msg.name(), msg.local_comm_id(), msg.remote_comm_id());
        if let CmMessage::Req(r) = &msg {
            let _ = r.cma_header();
        }
        if let CmMessage::SidrReq(r) = &msg {
            let _ = r.cma_header();
        }
    }
}

/// Non-RoCE frames (ARP, IGMP, MLD, neighbour discovery): parsing and printing never panic.
pub fn l2(data: &[u8]) {
    if let Ok(f) = l2::parse_frame(data) {
        let _ = f.packet.to_string();
    }
}

/// The whole decoder of `roce decode`, both outputs: never panics, always one line. Every
/// input is read as an Ethernet frame, a native InfiniBand packet (link type 247) and an ERF
/// record (197), so that one corpus drives all three link layers; a native packet that
/// decodes whole encodes back to its bytes.
pub fn decode(data: &[u8]) {
    use crate::capture::linktype;
    for lt in [linktype::ETHERNET, linktype::INFINIBAND, linktype::ERF] {
        let d = crate::decode::decode_link(lt, data);
        assert!(!d.summary.contains('\n'));
        let mut json = d.json;
        let whole_ib = json.get("kind").and_then(|k| k.as_str()) == Some("infiniband")
            && json.contains_key("bth")
            && !json.contains_key("raw");
        json.insert("link_type".into(), lt.into());
        let line = serde_json::Value::Object(json);
        assert!(!line.to_string().contains('\n'));
        if whole_ib && lt == linktype::INFINIBAND {
            let e = crate::encode::encode_value(&line).expect("a whole IB packet encodes");
            assert_eq!(e.data, data, "a whole IB packet encodes back byte for byte");
        }
    }
}

/// A fuzz target's body.
pub type Target = fn(&[u8]);

/// Every target by name (the file names under fuzz/fuzz_targets/).
pub const TARGETS: [(&str, Target); 8] = [
    ("frame", frame),
    ("roundtrip", roundtrip),
    ("mad", mad),
    ("cm", cm),
    ("l2", l2),
    ("decode", decode),
    ("differential", differential),
    ("datagram", datagram),
];

/// Differential: the strict parser, the zero-copy view and the rxe acceptance predictor agree
/// on any bytes. Strict parse and `FramePacket::new_checked` give the same verdict and the
/// same fields; a frame the predictor accepts (the peer taken as the frame's own destination,
/// with a GSI QP at pool index 16) has a right ICRC and IPv4 checksum; a frame the strict
/// parser accepts is refused by the predictor only for a reason the parser does not check
/// (addresses, keys, QPs, fragments, UDP checksum, rxe's opcode table); and a strictly
/// accepted frame that ends where its IP packet does re-emits byte for byte.
pub fn differential(data: &[u8]) {
    use roce_wire::frame::FramePacket;
    use roce_wire::rxe_accept::{rxe_accepts, RxeDrop, RxeKernel, RxePeer, RxeQp, RxeQpType};
    let strict = frame::parse(data);
    let view = FramePacket::new_checked(data);
    assert_eq!(strict.is_ok(), view.is_ok(), "strict parse and view disagree on the verdict");
    if let (Ok(f), Ok(v)) = (&strict, &view) {
        assert_eq!(v.to_frame().as_ref(), Ok(f), "view and strict parse disagree on the fields");
        assert_eq!(v.bth().dest_qp(), f.repr.bth.dest_qp);
        assert_eq!((v.src_ip(), v.dst_ip()), (f.repr.ip.source(), f.repr.ip.destination()));
        if data.len() - f.trailer.len() == f.offsets.end {
            let mut out = vec![0u8; f.repr.buffer_len()];
            let n = f.repr.emit(&mut out).expect("an accepted frame re-emits");
            assert_eq!(&out[..n], &data[..f.offsets.end], "an accepted frame re-emits byte for byte");
        }
    }
    if data.len() < 14 {
        return;
    }
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&data[..6]);
    let dst = frame::parse_lax(data).map(|f| f.repr.ip.destination());
    let Ok(dst) = dst else {
        // the predictor may still accept what the lax parser cannot read only if the frame
        // is not RoCEv2 at all: then it refuses it too
        return;
    };
    let addrs = [dst];
    let qps = [RxeQp { index: 16, qp_type: RxeQpType::Gsi, qkey: roce_wire::GSI_QKEY }];
    for kernel in [RxeKernel::V6_1, RxeKernel::V6_12] {
        let peer = RxePeer { mac, addrs: &addrs, qps: &qps, kernel };
        let verdict = rxe_accepts(data, &peer);
        let lax = frame::parse_lax(data).expect("parsed above");
        let plain_ip = lax.repr.vlan.is_none() && lax.repr.ip.header_len() == if dst.is_ipv4() { 20 } else { 40 };
        // rxe's ICRC differs from the standard one only for opcodes whose table entry has no
        // payload offset (spec/rxe-acceptance.md §2)
        let quirk = lax.repr.vlan.is_none()
            && roce_wire::rxe_accept::rxe_expected_icrc(data, kernel).is_some_and(|c| c != lax.icrc_expected);
        if verdict.is_ok() && plain_ip {
            assert!(lax.ip_checksum_ok, "the predictor accepts a frame with a bad IP checksum");
            assert!(lax.icrc_ok() || quirk, "the predictor accepts a frame with a bad ICRC");
        }
        if let (Ok(_), Err(why)) = (&strict, verdict) {
            assert!(
                (quirk && why == RxeDrop::Icrc)
                    || matches!(
                        why,
                        RxeDrop::MartianSource
                            | RxeDrop::Fragment
                            | RxeDrop::UdpChecksum
                            | RxeDrop::Qp0
                            | RxeDrop::NoQp
                            | RxeDrop::QpType
                            | RxeDrop::PKey
                            | RxeDrop::QKey
                            | RxeDrop::Vlan
                            | RxeDrop::ShortHeaders
                            | RxeDrop::UnknownOpcode
                            | RxeDrop::IpHeader
                    ),
                "a strictly valid frame refused by the predictor for {why:?}"
            );
        }
    }
}

/// The udp transport's receive path in place (`roce_wire::datagram` and
/// `Stack::handle_datagram_icrc_verified`) against the frame path, on a UDP payload as a socket
/// hands it over. Input: byte 0 bit 0 IPv6 (else IPv4), bytes 1-2 the IPv4 ID, byte 3 the TOS or
/// traffic class, byte 4 the TTL or hop limit, then the datagram (BTH to ICRC). Checked:
/// - [`roce_wire::datagram::compute_icrc`] and `DatagramIcrc::verify` agree (twice, the second
///   time from its cached header hash), and verify leaves the datagram as it was;
/// - the frame the datagram came in (`write_frame_headers` around it) expects the same ICRC;
/// - with its ICRC made right, `RoceDatagram::new_icrc_verified` accepts exactly what the
///   strict `frame::parse` accepts of that frame;
/// - IPv4: an engine with a connected RC QP (the datagram's DestQP set to it) ends in the same
///   state whether the datagram comes in place or in its frame: counters, completions, what
///   it sends back and its memory region.
pub fn datagram(data: &[u8]) {
    use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
    use roce_wire::datagram::{compute_icrc, write_frame_headers, Arrival, DatagramIcrc, RoceDatagram};
    if data.len() < 5 || data.len() > 9000 {
        return;
    }
    let v6 = data[0] & 1 != 0;
    let id = u16::from_be_bytes([data[1], data[2]]);
    let (src, dst): (IpAddr, IpAddr) = if v6 {
        (Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1).into(), Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 3).into())
    } else {
        (Ipv4Addr::new(198, 18, 0, 1).into(), Ipv4Addr::new(198, 18, 0, 3).into())
    };
    let arrival = Arrival { src: SocketAddr::new(src, 49152), dst, traffic_class: data[3], hop_limit: data[4] };
    let mut d = data[5..].to_vec();
    let (mac, neighbor) = ([2, 0, 0, 0, 0, 3], roce_cm::KERNEL_NEIGHBOR_MAC);
    let frame_of = |d: &[u8]| {
        let mut f = vec![0u8; arrival.frame_header_len() + d.len()];
        let n = write_frame_headers(&mut f, d.len(), &arrival, mac, neighbor, id).expect("room for the headers");
        f[n..].copy_from_slice(d);
        f
    };
    let Ok((computed, carried)) = compute_icrc(&d, &arrival, id) else {
        assert!(DatagramIcrc::default().verify(&mut d, &arrival, id).is_err(), "verify takes what compute refuses");
        return;
    };
    let mut cache = DatagramIcrc::default();
    for _ in 0..2 {
        assert_eq!(cache.verify(&mut d, &arrival, id), Ok(computed == carried), "verify and compute_icrc disagree");
        assert_eq!(d, data[5..], "verify changed the datagram");
    }
    if let Ok(f) = frame::parse_lax(&frame_of(&d)) {
        assert_eq!(f.icrc_expected, computed, "the frame and the datagram expect different ICRCs");
    }
    let at = d.len() - roce_wire::icrc::ICRC_LEN;
    d[at..].copy_from_slice(&roce_wire::icrc::to_wire(computed));
    let framed = frame_of(&d);
    assert_eq!(
        RoceDatagram::new_icrc_verified(&d).is_ok(),
        frame::parse(&framed).is_ok(),
        "the datagram view and the frame parser disagree"
    );
    if !v6 {
        datagram_engine(&arrival, &mut d, &framed);
    }
}

/// [`datagram`]'s engine check: two engines alike, one given the frame, one the datagram.
fn datagram_engine(arrival: &roce_wire::datagram::Arrival, d: &mut [u8], framed: &[u8]) {
    use roce_cm::rc::{Access, QpAttr, QpInit, QpState, RecvWr, Sge};
    use roce_cm::{Instant, Stack, StackConfig};
    use std::net::{IpAddr, Ipv4Addr};
    let engine = || {
        let mut s = Stack::new(StackConfig::new([2, 0, 0, 0, 0, 3], Ipv4Addr::new(198, 18, 0, 3), 24));
        let q = s.create_qp_with(QpInit::default()).expect("a QP");
        let mut at = QpAttr::new(IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)), 0x11);
        (at.path_mtu, at.sq_psn, at.rq_psn, at.dmac) = (1024, 100, 100, Some(roce_cm::KERNEL_NEIGHBOR_MAC));
        for st in [QpState::Init, QpState::Rtr, QpState::Rts] {
            s.rc_mut().modify_qp(Instant::ZERO, q, st, &at).expect("to RTS");
        }
        let mr = s.rc_mut().reg_mr(1 << 14, Access::ALL).expect("an MR");
        for i in 0..2u64 {
            let sg = vec![Sge { addr: mr.addr + i * 8192, length: 8192, lkey: mr.lkey }];
            s.rc_mut().post_recv(q, RecvWr { wr_id: i, sg_list: sg }).expect("a receive");
        }
        (s, q, mr)
    };
    let (mut by_frame, q, mr) = engine();
    let (mut in_place, ..) = engine();
    let mut framed = framed.to_vec();
    if d.len() >= roce_wire::bth::BTH_LEN {
        // DestQP: ours, so that the in-place path takes it.
        let qpn = q.to_be_bytes();
        d[5..8].copy_from_slice(&qpn[1..]);
        let at = framed.len() - d.len();
        framed[at + 5..at + 8].copy_from_slice(&qpn[1..]);
    }
    by_frame.handle_frame_icrc_verified(Instant::ZERO, &framed);
    in_place.handle_datagram_icrc_verified(Instant::ZERO, arrival, d);
    let out = |s: &mut Stack| {
        let mut buf = vec![0u8; 9216];
        let sent: Vec<Vec<u8>> =
            std::iter::from_fn(|| s.poll_transmit(Instant::ZERO, &mut buf).map(|n| buf[..n].to_vec())).collect();
        let wcs: Vec<_> = std::iter::from_fn(|| s.rc_mut().poll_cq()).collect();
        (s.counters().clone(), sent, wcs, s.rc().mr(mr.lkey).map(|m| m.to_vec()))
    };
    assert!(
        out(&mut by_frame) == out(&mut in_place),
        "the datagram and its frame leave the engine in different states"
    );
}
