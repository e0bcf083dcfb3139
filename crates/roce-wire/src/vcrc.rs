//! The InfiniBand Variant CRC (2 bytes): the last field of every native IB packet, covering
//! every byte from the first LRH byte through the ICRC (or through the payload of a raw
//! packet), recomputed at every link hop [IBA 7.8.2].
//!
//! CRC-16 with the polynomial x^16 + x^12 + x^3 + x + 1 (0x100B), register preset to all
//! ones, bits taken least-significant first (the reflected form, polynomial 0xD008) and the
//! result inverted: the same conventions as the ICRC's CRC-32 (Endace's `dagcrc`
//! `infiniband_vcrc16_r`, the reference for ERF InfiniBand captures, computes it so). Like the
//! ICRC, the value goes on the wire least-significant byte first. Packets a real fabric sent
//! (`ib_frame` tests, `crcs_agree_with_real_hardware`) check all of this, byte order included.

/// Length of the VCRC.
pub const LEN: usize = 2;

/// The reflected polynomial.
const POLY_REFLECTED: u16 = 0xd008;

const TABLE: [u16; 256] = {
    let mut t = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u16;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY_REFLECTED } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// The VCRC of `packet` (LRH through ICRC, the VCRC itself excluded).
pub fn compute(packet: &[u8]) -> u16 {
    let mut c: u16 = 0xffff;
    for &b in packet {
        c = TABLE[usize::from((c ^ u16::from(b)) as u8)] ^ (c >> 8);
    }
    !c
}

/// The two wire bytes of a VCRC value (least-significant byte first).
pub const fn to_wire(vcrc: u16) -> [u8; 2] {
    vcrc.to_le_bytes()
}

/// The VCRC value of two wire bytes.
pub const fn from_wire(bytes: [u8; 2]) -> u16 {
    u16::from_le_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table form against a generic bit-by-bit CRC engine with the IBA parameters.
    #[test]
    fn matches_a_bitwise_crc16_0x100b() {
        const IB_VCRC: crc::Algorithm<u16> = crc::Algorithm {
            width: 16,
            poly: 0x100b,
            init: 0xffff,
            refin: true,
            refout: true,
            xorout: 0xffff,
            check: 0,
            residue: 0,
        };
        let engine = crc::Crc::<u16>::new(&IB_VCRC);
        let mut data = [0u8; 300];
        for (i, b) in data.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(29).wrapping_add(3);
        }
        for n in [0usize, 1, 8, 26, 64, 300] {
            assert_eq!(compute(&data[..n]), engine.checksum(&data[..n]), "{n} bytes");
        }
        assert_eq!(from_wire(to_wire(0x1234)), 0x1234);
        assert_eq!(to_wire(0x1234), [0x34, 0x12]);
    }
}
