//! Corrupting one byte of a frame, anywhere or only where the RoCEv2 ICRC would notice.

use roce_wire::{bth::BTH_LEN, frame};

use crate::rng::Rng;

/// Which bytes a corruption may hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CorruptScope {
    /// Any byte of the frame.
    #[default]
    Any,
    /// Only a byte the ICRC covers without masking and whose change leaves the frame's
    /// structure intact: BTH bytes 5–11 (DestQP, AckReq, PSN), the extension headers, the
    /// payload and the pad. A strict parse of the result fails with `IcrcMismatch` (CRC-32
    /// detects every single-byte error). Frames that are not RoCEv2 (as
    /// `roce_wire::frame::parse_lax` sees them) are left intact and counted as skipped.
    IcrcCovered,
}

/// XOR one byte of `frame` (chosen within `scope`) with a random non-zero value. Returns the
/// offset it changed, or `None` when the scope holds no byte (the frame is unchanged).
pub(crate) fn corrupt(frame: &mut [u8], scope: CorruptScope, rng: &mut Rng) -> Option<usize> {
    let range = match scope {
        CorruptScope::Any => 0..frame.len(),
        CorruptScope::IcrcCovered => icrc_covered(frame)?,
    };
    if range.is_empty() {
        return None;
    }
    let at = range.start + rng.below(range.len());
    let flip = 1 + rng.below(255) as u8;
    frame[at] ^= flip;
    Some(at)
}

/// The bytes whose change makes the ICRC wrong and nothing else (see [`CorruptScope`]).
fn icrc_covered(frame: &[u8]) -> Option<core::ops::Range<usize>> {
    let f = frame::parse_lax(frame).ok()?;
    let start = f.offsets.bth + 5;
    debug_assert!(f.offsets.bth + BTH_LEN <= f.offsets.icrc);
    Some(start..f.offsets.icrc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use roce_wire::golden;
    use roce_wire::{ContentError, Error};

    #[test]
    fn icrc_covered_corruption_breaks_only_the_icrc() {
        let mut rng = Rng::new(3);
        for golden in [&golden::SA_DELETE_MCMEMBER[..], &golden::SCAPY_UC_SEND_ONLY[..], &golden::CX4_CNP[..]] {
            assert!(frame::parse(golden).is_ok());
            for _ in 0..200 {
                let mut f = golden.to_vec();
                let at = corrupt(&mut f, CorruptScope::IcrcCovered, &mut rng).unwrap();
                assert_ne!(f, golden);
                assert_eq!(f.iter().zip(golden).filter(|(a, b)| a != b).count(), 1, "at {at}");
                match frame::parse(&f) {
                    Err(Error::Content { kind: ContentError::IcrcMismatch { .. }, .. }) => {}
                    other => panic!("corrupting byte {at}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn scopes() {
        let mut rng = Rng::new(4);
        let mut not_roce = vec![0u8; 60];
        assert_eq!(corrupt(&mut not_roce, CorruptScope::IcrcCovered, &mut rng), None);
        assert!(not_roce.iter().all(|&b| b == 0));
        let at = corrupt(&mut not_roce, CorruptScope::Any, &mut rng).unwrap();
        assert_ne!(not_roce[at], 0);
        assert_eq!(corrupt(&mut [], CorruptScope::Any, &mut rng), None);
    }
}
