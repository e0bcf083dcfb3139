//! Bad input across the whole stack of parsers: every sample frame truncated at every offset,
//! with wrong versions and lengths, oversize pads and bad ICRCs. Each must give a typed error
//! naming a layer and an offset inside the input, and the decoder must still print one line.

use roce_decode::decode::decode_ethernet;
use roce_decode::samples::sample_frames;
use roce_wire::{frame, ContentError, Error, Layer};

fn roce_samples() -> Vec<(&'static str, Vec<u8>)> {
    sample_frames().into_iter().filter(|s| frame::parse(&s.bytes).is_ok()).map(|s| (s.name, s.bytes)).collect()
}

#[test]
fn truncation_at_every_offset_is_a_typed_error_and_decodes() {
    let mut checked = 0;
    for (name, bytes) in roce_samples() {
        for n in 0..bytes.len() {
            let e = frame::parse(&bytes[..n]).expect_err(name);
            assert!(e.offset() <= n, "{name} cut at {n}: offset {} past the end ({e})", e.offset());
            assert!(!e.to_string().is_empty());
            let d = decode_ethernet(&bytes[..n]);
            assert!(!d.summary.contains('\n'));
            checked += 1;
        }
    }
    assert!(checked > 5000, "{checked}");
}

#[test]
fn every_single_byte_corruption_is_handled() {
    for (name, bytes) in roce_samples() {
        for i in 0..bytes.len() {
            for v in [0x00u8, 0xff, bytes[i] ^ 0x01, bytes[i] ^ 0x80] {
                let mut b = bytes.clone();
                b[i] = v;
                if let Err(e) = frame::parse(&b) {
                    assert!(e.offset() <= b.len(), "{name} byte {i}={v:#x}: {e}");
                }
                let _ = frame::parse_lax(&b);
                let _ = decode_ethernet(&b);
            }
        }
    }
}

#[test]
fn specific_defects_name_layer_and_byte() {
    let g = roce_wire::golden::SA_DELETE_MCMEMBER;
    let check = |b: &[u8], layer: Layer, offset: usize| {
        let e = frame::parse(b).unwrap_err();
        assert_eq!((e.layer(), e.offset()), (layer, offset), "{e}");
        e
    };
    // Wrong IP version, IHL below 5, a fragment, not UDP, not 4791.
    let mut b = g;
    b[14] = 0x55;
    check(&b, Layer::Ipv4, 14);
    let mut b = g;
    b[14] = 0x44;
    check(&b, Layer::Ipv4, 14);
    let mut b = g;
    b[20] |= 0x20;
    check(&b, Layer::Ipv4, 20);
    let mut b = g;
    b[23] = 6;
    check(&b, Layer::Ipv4, 23);
    let mut b = g;
    b[37] = 0xb8;
    check(&b, Layer::Udp, 36);
    // IP total length longer than the frame; UDP length longer than the IP payload.
    let mut b = g;
    b[16] = 0x02;
    check(&b, Layer::Ipv4, 16);
    let mut b = g;
    b[38] = 0x02;
    let e = check(&b, Layer::Udp, 38);
    assert!(matches!(e, Error::Content { kind: ContentError::UdpLength { .. }, .. }));
    // UDP length too short for BTH + DETH + ICRC: the shortened datagram ends inside DETH.
    let mut b = g;
    b[38] = 0;
    b[39] = 8 + 12 + 4;
    let e = frame::parse(&b).unwrap_err();
    assert_eq!(e.layer(), Layer::Deth);
    // Bad ICRC: named at the ICRC's first byte.
    let mut b = g;
    b[318] ^= 0x10;
    let e = check(&b, Layer::Icrc, 318);
    assert!(matches!(e, Error::Content { kind: ContentError::IcrcMismatch { .. }, .. }));
}

#[test]
fn wrong_tver_is_refused_by_the_strict_parser_and_kept_by_the_lax_one() {
    // (An oversize pad is tested in roce-wire's frame tests: `oversize_pad_is_rejected`.)
    let g = roce_wire::golden::SCAPY_UC_SEND_ONLY;
    let mut b = g;
    b[14 + 20 + 8 + 1] = (b[14 + 20 + 8 + 1] & 0xf0) | 0x01;
    let e = frame::parse(&b).unwrap_err();
    assert_eq!((e.layer(), e.offset()), (Layer::Bth, 43));
    assert!(matches!(e, Error::Content { kind: ContentError::UnsupportedTver(1), .. }));
    let lax = frame::parse_lax(&b).unwrap();
    assert_eq!(lax.repr.bth.tver, 1);
}
