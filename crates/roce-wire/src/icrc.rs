//! The RoCEv2 Invariant CRC, computed exactly as Linux rxe computes it.
//!
//! [rxe_icrc.c rxe_icrc_hdr / rxe_icrc_generate / rxe_icrc_check; scapy contrib/roce.py
//! `BTH.compute_icrc`; protocol.md §1.9]
//!
//! ICRC = CRC-32 (IEEE 802.3, reflected, as zlib's `crc32`) over
//! `8 × 0xFF ‖ IP header (masked) ‖ UDP header (masked) ‖ BTH (masked) ‖ rest of the transport
//! headers ‖ payload ‖ pad`, where the masked fields are set to all ones:
//! - IPv4: TOS (byte 1), TTL (byte 8), header checksum (bytes 10–11);
//! - IPv6: traffic class and flow label (bytes 0–3 become `6F FF FF FF`), hop limit (byte 7);
//! - UDP: checksum (bytes 6–7);
//! - BTH: the whole of byte 4 (FECN, BECN and the six reserved bits).
//!
//! The 32-bit value goes on the wire least-significant byte first (like the Ethernet FCS).
//!
//! One deliberate difference: rxe copies exactly 20 bytes of IPv4 header into its pseudo-header
//! and assumes UDP follows; for an IPv4 header with options (which RoCEv2 never sends) this
//! crate covers the whole IP header, as the IBA annex defines it.

use crate::error::{Error, Layer, Result};

/// zlib's `crc32(b"\xff" * 8)`: the CRC register after the 8 bytes standing for the masked LRH
/// (rxe's seed 0xDEBB20E3 is its complement, before the final inversion).
pub const SEED: u32 = 0x2144_df1c;

/// Length of the ICRC.
pub const ICRC_LEN: usize = 4;

const UDP_LEN: usize = 8;
const BTH_LEN: usize = crate::bth::BTH_LEN;
/// The largest masked prefix: an IPv4 header with 40 bytes of options (60) + UDP + BTH.
const MAX_PREFIX: usize = 60 + UDP_LEN + BTH_LEN;

/// The IP version of the packet the ICRC covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpVersion {
    /// IPv4 (masks TOS, TTL, header checksum).
    V4,
    /// IPv6 (masks traffic class, flow label, hop limit).
    V6,
}

/// Compute the ICRC of `packet`, which runs from the first byte of the IP header to the last
/// pad byte (the ICRC itself excluded). `ip_header_len` is where UDP starts (20 for IPv4
/// without options, 40 for IPv6). Returns a length error if `packet` is shorter than the
/// IP, UDP and BTH headers.
///
/// How it stays at raw CRC speed: masking a field to all ones is XORing it with a delta, and
/// CRC is linear, so a delta at byte `j` has the same effect on the result as a known change
/// of the CRC register before byte 0 (the delta run backwards through `j` byte steps; the
/// byte step is invertible). Those register changes are tabulated per masked byte position at
/// compile time, so the ICRC is one CRC pass over the unmodified bytes from an adjusted seed,
/// with no masked copy. IPv4 headers with options take the plain masked-copy path.
pub fn compute(packet: &[u8], version: IpVersion, ip_header_len: usize) -> Result<u32> {
    let prefix_len = ip_header_len + UDP_LEN + BTH_LEN;
    if prefix_len > MAX_PREFIX || packet.len() < prefix_len {
        return Err(Error::len(Layer::Icrc, 0, prefix_len, packet.len()));
    }
    let adjust = match (version, ip_header_len) {
        (IpVersion::V4, 20) => seed_adjust(packet, &V4_MASKED, &V4_TABLES),
        (IpVersion::V6, 40) => seed_adjust(packet, &V6_MASKED, &V6_TABLES),
        _ => return Ok(compute_by_copy(packet, version, ip_header_len)),
    };
    let mut h = crc32fast::Hasher::new_with_initial(SEED ^ adjust);
    h.update(packet);
    Ok(h.finalize())
}

/// [`compute`] for a packet the caller may change for the time of the call (a frame being
/// emitted): the masked fields are set to ones in place, the packet hashed in one pass and
/// the fields put back, so `packet` ends as it came. The same value as [`compute`].
pub fn compute_in_place(packet: &mut [u8], version: IpVersion, ip_header_len: usize) -> Result<u32> {
    let prefix_len = ip_header_len + UDP_LEN + BTH_LEN;
    if prefix_len > MAX_PREFIX || packet.len() < prefix_len {
        return Err(Error::len(Layer::Icrc, 0, prefix_len, packet.len()));
    }
    match (version, ip_header_len) {
        (IpVersion::V4, 20) => Ok(hash_masked(packet, &V4_MASKED)),
        (IpVersion::V6, 40) => Ok(hash_masked(packet, &V6_MASKED)),
        _ => Ok(compute_by_copy(packet, version, ip_header_len)),
    }
}

/// Hash `packet` with the `masked` bits set, then put the bytes back.
#[inline(always)]
fn hash_masked<const N: usize>(packet: &mut [u8], masked: &[(usize, u8); N]) -> u32 {
    let mut kept = [0u8; N];
    for (k, &(pos, bits)) in kept.iter_mut().zip(masked) {
        *k = packet[pos];
        packet[pos] |= bits;
    }
    let mut h = seeded();
    h.update(packet);
    for (k, &(pos, _)) in kept.iter().zip(masked) {
        packet[pos] = *k;
    }
    h.finalize()
}

/// A hasher whose register holds the 8 bytes of 0xFF, its CRC implementation chosen once per
/// process (`Clone` keeps the choice; `Hasher::new_with_initial` detects the CPU's CRC
/// instructions on every call). [`compute`] seeds a new hasher per packet instead: splitting
/// its seed adjustment off the shared one costs more than the detection (measured).
#[cfg(feature = "std")]
#[inline]
pub(crate) fn seeded() -> crc32fast::Hasher {
    static SEEDED: std::sync::LazyLock<crc32fast::Hasher> =
        std::sync::LazyLock::new(|| crc32fast::Hasher::new_with_initial(SEED));
    SEEDED.clone()
}

/// Without std the CRC implementation is chosen at compile time: nothing to keep.
#[cfg(not(feature = "std"))]
#[inline]
pub(crate) fn seeded() -> crc32fast::Hasher {
    crc32fast::Hasher::new_with_initial(SEED)
}

/// The register change equivalent to setting the masked bits of `packet` to one.
#[inline(always)]
fn seed_adjust<const N: usize>(packet: &[u8], masked: &[(usize, u8); N], tables: &[[u32; 256]; N]) -> u32 {
    let mut adjust = 0;
    let mut i = 0;
    while i < N {
        let (pos, bits) = masked[i];
        // The delta is the bits that masking turns from 0 to 1.
        let delta = !packet[pos] & bits;
        adjust ^= tables[i][usize::from(delta)];
        i += 1;
    }
    adjust
}

/// [`compute`] for a packet in two pieces: `ip_udp`, its IP and UDP headers
/// (`ip_header_len` + 8 bytes), and `datagram`, the UDP payload from the BTH to the last pad
/// byte — for a receiver that has the datagram where a UDP socket read it and the headers
/// written elsewhere (see [`crate::datagram`]). The same value as [`compute`] of the two
/// joined; a length error if `ip_udp` is not the headers' length or `datagram` is shorter than
/// a BTH.
pub fn compute_split(ip_udp: &[u8], version: IpVersion, ip_header_len: usize, datagram: &[u8]) -> Result<u32> {
    let head = ip_header_len + UDP_LEN;
    if ip_udp.len() != head || head + BTH_LEN > MAX_PREFIX {
        return Err(Error::len(Layer::Icrc, 0, head, ip_udp.len()));
    }
    if datagram.len() < BTH_LEN {
        return Err(Error::len(Layer::Icrc, head, BTH_LEN, datagram.len()));
    }
    Ok(compute_by_copy_split(ip_udp, &datagram[..BTH_LEN], &[&datagram[BTH_LEN..]], version, ip_header_len))
}

/// The reference form: copy the headers, set the masked fields to ones, hash in two parts.
fn compute_by_copy(packet: &[u8], version: IpVersion, ip_header_len: usize) -> u32 {
    let prefix_len = ip_header_len + UDP_LEN + BTH_LEN;
    compute_by_copy_split(&packet[..prefix_len], &[], &[&packet[prefix_len..]], version, ip_header_len)
}

/// [`compute_by_copy`] of `head ‖ bth ‖ rest`, where `head ‖ bth` is the masked prefix.
fn compute_by_copy_split(head: &[u8], bth: &[u8], rest: &[&[u8]], version: IpVersion, ip_header_len: usize) -> u32 {
    let prefix_len = ip_header_len + UDP_LEN + BTH_LEN;
    let mut prefix = [0u8; MAX_PREFIX];
    let masked = &mut prefix[..prefix_len];
    masked[..head.len()].copy_from_slice(head);
    masked[head.len()..].copy_from_slice(bth);
    match version {
        IpVersion::V4 => {
            masked[1] = 0xff;
            masked[8] = 0xff;
            masked[10] = 0xff;
            masked[11] = 0xff;
        }
        IpVersion::V6 => {
            masked[0] |= 0x0f;
            masked[1] = 0xff;
            masked[2] = 0xff;
            masked[3] = 0xff;
            masked[7] = 0xff;
        }
    }
    masked[ip_header_len + 6] = 0xff;
    masked[ip_header_len + 7] = 0xff;
    masked[ip_header_len + UDP_LEN + 4] = 0xff;
    let mut h = seeded();
    h.update(masked);
    for r in rest {
        h.update(r);
    }
    h.finalize()
}

/// The IPv4 Identification that makes `packet`'s ICRC equal `icrc`, given every other field:
/// for a receiver that sees the datagram but not its IP header (a kernel UDP socket reports
/// addresses, TOS and TTL, never the ID). `packet` is as for [`compute`] (IPv4, no options),
/// with any ID in bytes 4–5; `None` when no ID does (the frame was damaged elsewhere).
///
/// The ICRC is linear in the ID: `icrc ^ compute(packet)` is the CRC (zero register, no final
/// inversion) of the ID's change followed by the `len − 6` bytes after it, so the change is
/// that value times x^−(8·(len − 6) + 32) modulo the CRC polynomial, and exists only if it
/// fits 16 bits. A damaged frame passes with probability 2^−16 instead of 2^−32: the ID's 16
/// bits are taken from the 32 of the check.
pub fn solve_ipv4_identification(packet: &[u8], icrc: u32) -> Result<Option<u16>> {
    let have = compute(packet, IpVersion::V4, 20)?;
    let after = (packet.len() - 6) as u64; // bytes hashed after the ID (the prefix check above: ≥ 40)
    let change = gf2_mul(icrc ^ have, gf2_pow(X_INVERSE, 8 * after + 32));
    if change & 0xffff != 0 {
        return Ok(None);
    }
    // In the reflected form bit 31 − k holds x^k: the first byte's first bit (its LSB) is x^15.
    let delta = u16::from_be_bytes([(change >> 16) as u8, (change >> 24) as u8]);
    Ok(Some(u16::from_be_bytes([packet[4], packet[5]]) ^ delta))
}

/// How the ICRC of an IPv4 packet of one length changes with its Identification: for a sender
/// whose kernel numbers the IDs (UDP GSO segments count up from the first's), so that each
/// segment's ICRC can be corrected without hashing the segment again.
///
/// The ICRC is linear in the ID: changing it by `delta` changes the ICRC by the CRC (zero
/// register) of `delta` followed by the `len − 6` bytes after it, that is `delta` times
/// x^(8·(len − 6) + 32) modulo the CRC polynomial; the power depends only on the length, so it
/// is computed once here and each change costs one GF(2) product.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4IdentificationShift {
    /// The power times x^k for k = 0..16, reflected: what each of the ID delta's 16 bits
    /// contributes to the change (a GF(2) product is linear in its bits), so that a change
    /// is a few XORs, not a 32-step product — it runs for every GSO segment sent.
    terms: [u32; 16],
}

impl Ipv4IdentificationShift {
    /// For packets of `len` bytes as [`compute`] takes them (IP header to the last pad byte,
    /// IPv4 without options). A length shorter than the IPv4, UDP and BTH headers is an error.
    pub fn new(len: usize) -> Result<Self> {
        let min = 20 + UDP_LEN + BTH_LEN;
        if len < min {
            return Err(Error::len(Layer::Icrc, 0, min, len));
        }
        let mut term = gf2_pow(1 << 30, 8 * (len as u64 - 6) + 32);
        let mut terms = [0; 16];
        for t in &mut terms {
            *t = term;
            term = times_x(term);
        }
        Ok(Ipv4IdentificationShift { terms })
    }

    /// What to XOR into the ICRC of a packet of this length when its Identification goes from
    /// `from` to `to`.
    pub fn icrc_change(&self, from: u16, to: u16) -> u32 {
        let [hi, lo] = (from ^ to).to_be_bytes();
        // Reflected: the first byte's bits are x^15 … x^8 (bits 16–23), the second's x^7 … x^0
        // (bits 24–31); bit 31 − k is x^k and selects `terms[k]`.
        let mut bits = (u32::from(hi) << 16) | (u32::from(lo) << 24);
        let mut change = 0;
        while bits != 0 {
            change ^= self.terms[31 - bits.trailing_zeros() as usize];
            bits &= bits - 1;
        }
        change
    }
}

/// a·x modulo the CRC polynomial (reflected: one step of the CRC register).
const fn times_x(a: u32) -> u32 {
    if a & 1 != 0 {
        (a >> 1) ^ POLY_REFLECTED
    } else {
        a >> 1
    }
}

/// The reflected CRC-32 polynomial (x^32 implied).
const POLY_REFLECTED: u32 = 0xEDB8_8320;
/// x^−1 modulo the polynomial, reflected: the y with y·x = 1 (x^0 is bit 31).
const X_INVERSE: u32 = ((POLY_REFLECTED ^ (1 << 31)) << 1) | 1;

/// a·b modulo the CRC polynomial, both reflected.
fn gf2_mul(a: u32, mut b: u32) -> u32 {
    let mut p = 0;
    for k in 0..32 {
        if a & (1 << (31 - k)) != 0 {
            p ^= b;
        }
        b = times_x(b);
    }
    p
}

/// base^e modulo the CRC polynomial (square and multiply).
fn gf2_pow(mut base: u32, mut e: u64) -> u32 {
    let mut r = 1 << 31;
    while e != 0 {
        if e & 1 != 0 {
            r = gf2_mul(r, base);
        }
        base = gf2_mul(base, base);
        e >>= 1;
    }
    r
}

/// (byte position from the IP header, bits the ICRC sets) for IPv4 without options:
/// TOS, TTL, header checksum, UDP checksum, BTH byte 4.
const V4_MASKED: [(usize, u8); 7] = [(1, 0xff), (8, 0xff), (10, 0xff), (11, 0xff), (26, 0xff), (27, 0xff), (32, 0xff)];
/// The same for IPv6: traffic class and flow label (low nibble of byte 0, bytes 1–3), hop
/// limit, UDP checksum, BTH byte 4.
const V6_MASKED: [(usize, u8); 8] =
    [(0, 0x0f), (1, 0xff), (2, 0xff), (3, 0xff), (7, 0xff), (46, 0xff), (47, 0xff), (52, 0xff)];

static V4_TABLES: [[u32; 256]; 7] = delta_tables(&V4_MASKED);
static V6_TABLES: [[u32; 256]; 8] = delta_tables(&V6_MASKED);

/// The reflected CRC-32 byte table (polynomial 0xEDB88320).
const CRC_TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ 0xEDB8_8320 } else { c >> 1 };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// For each top byte of a table entry, its index (the top bytes are a permutation).
const CRC_TABLE_INDEX_BY_TOP: [u8; 256] = {
    let mut inv = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        inv[(CRC_TABLE[i] >> 24) as usize] = i as u8;
        i += 1;
    }
    inv
};

/// Undo one byte step of the reflected CRC register: `r' = (r >> 8) ^ T[r & 0xff]`.
const fn unstep(r: u32) -> u32 {
    let i = CRC_TABLE_INDEX_BY_TOP[(r >> 24) as usize];
    ((r ^ CRC_TABLE[i as usize]) << 8) | i as u32
}

/// Per masked position `j`: for every delta byte `d`, the register change before byte 0 that
/// has the effect of XORing `d` into byte `j` (`d` run back through `j` byte steps).
const fn delta_tables<const N: usize>(masked: &[(usize, u8); N]) -> [[u32; 256]; N] {
    let mut out = [[0u32; 256]; N];
    let mut m = 0;
    while m < N {
        let mut d = 0;
        while d < 256 {
            let mut r = d as u32;
            let mut j = 0;
            while j < masked[m].0 {
                r = unstep(r);
                j += 1;
            }
            out[m][d] = r;
            d += 1;
        }
        m += 1;
    }
    out
}

/// The four wire bytes of an ICRC value (least-significant byte first).
pub const fn to_wire(icrc: u32) -> [u8; 4] {
    icrc.to_le_bytes()
}

/// The ICRC value of four wire bytes.
pub const fn from_wire(bytes: [u8; 4]) -> u32 {
    u32::from_le_bytes(bytes)
}

/// Verify a packet that ends with its ICRC (IP header first). Returns `(found, computed)`.
pub fn check(packet_with_icrc: &[u8], version: IpVersion, ip_header_len: usize) -> Result<(u32, u32)> {
    let n = packet_with_icrc.len();
    let min = ip_header_len + UDP_LEN + BTH_LEN + ICRC_LEN;
    if n < min {
        return Err(Error::len(Layer::Icrc, 0, min, n));
    }
    let found =
        from_wire([packet_with_icrc[n - 4], packet_with_icrc[n - 3], packet_with_icrc[n - 2], packet_with_icrc[n - 1]]);
    Ok((found, compute(&packet_with_icrc[..n - 4], version, ip_header_len)?))
}

/// The headers of an RC FLUSH request after its BTH: FETH and RETH.
const FLUSH_EXT_LEN: usize = crate::feth::LEN + crate::reth::LEN;

/// The ICRC Linux rxe (6.2 and later) puts on, and expects of, an RC FLUSH request (opcode
/// 0x1C): the standard ICRC's bytes followed by the 32 header bytes (BTH, FETH, RETH, as they
/// are) a second time. rxe_opcode.c's `IB_OPCODE_RC_FLUSH` entry gives no `RXE_PAYLOAD`
/// offset, so `payload_addr()` is the BTH and `payload_size()` the headers' length, and
/// rxe_icrc_check / rxe_icrc_generate run over them again; a FLUSH with the IBA's ICRC fails
/// rxe's check and is dropped without an answer (spec/kernel-findings.md §6). `packet` is as
/// for [`compute`] (IP header to the last header byte; a FLUSH has no payload or pad); a
/// length error when it is shorter than the IP, UDP, BTH, FETH and RETH headers.
pub fn compute_rxe_flush(packet: &[u8], version: IpVersion, ip_header_len: usize) -> Result<u32> {
    let bth_at = ip_header_len + UDP_LEN;
    let end = bth_at + BTH_LEN + FLUSH_EXT_LEN;
    if bth_at + BTH_LEN > MAX_PREFIX || packet.len() < end {
        return Err(Error::len(Layer::Icrc, 0, end, packet.len()));
    }
    Ok(compute_by_copy_split(
        &packet[..bth_at],
        &packet[bth_at..bth_at + BTH_LEN],
        &[&packet[bth_at + BTH_LEN..], &packet[bth_at..end]],
        version,
        ip_header_len,
    ))
}

/// Length of the LRH the native ICRC starts with.
const LRH_LEN: usize = crate::lrh::LEN;
/// Length of the GRH of a native global packet.
const GRH_LEN: usize = crate::grh::LEN;

/// The ICRC of a native InfiniBand packet, as IBA 7.8.1 defines it: CRC-32 (the same as
/// RoCEv2's) over `packet`, which runs from the first LRH byte to the last pad byte, with the
/// variant fields set to ones:
/// - a local packet (`global` false: LRH, then BTH): the LRH's VL (byte 0 bits 7:4) and the
///   BTH's Resv8a (its byte 4);
/// - a global packet (LRH, GRH, BTH): the whole LRH (a router rewrites it), the GRH's TClass,
///   FlowLabel and HopLmt, and the BTH's Resv8a. RoCEv1 and RoCEv2 inherit this form: their
///   8 bytes of ones are this masked LRH.
///
/// Returns a length error when `packet` is shorter than its LRH, GRH and BTH.
pub fn compute_native(packet: &[u8], global: bool) -> Result<u32> {
    let prefix_len = LRH_LEN + if global { GRH_LEN } else { 0 } + BTH_LEN;
    if packet.len() < prefix_len {
        return Err(Error::len(Layer::Icrc, 0, prefix_len, packet.len()));
    }
    let mut prefix = [0u8; LRH_LEN + GRH_LEN + BTH_LEN];
    let masked = &mut prefix[..prefix_len];
    masked.copy_from_slice(&packet[..prefix_len]);
    if global {
        masked[..LRH_LEN].fill(0xff);
        let grh = &mut masked[LRH_LEN..LRH_LEN + GRH_LEN];
        grh[0] |= 0x0f;
        grh[1..4].fill(0xff);
        grh[7] = 0xff;
    } else {
        masked[0] |= 0xf0;
    }
    masked[prefix_len - BTH_LEN + 4] = 0xff;
    let mut h = crc32fast::Hasher::new();
    h.update(masked);
    h.update(&packet[prefix_len..]);
    Ok(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// rxe's FLUSH ICRC is the standard one of the packet with its 32 header bytes appended,
    /// never the standard ICRC of the packet itself; too short a packet is a length error.
    #[test]
    fn rxe_flush_icrc_covers_the_headers_twice() {
        for (version, ip_len) in [(IpVersion::V4, 20), (IpVersion::V6, 40)] {
            let mut p = vec![0u8; ip_len + 8 + 12 + 20];
            p[0] = if ip_len == 20 { 0x45 } else { 0x60 };
            for (i, b) in p.iter_mut().enumerate().skip(1) {
                *b = (i * 37) as u8;
            }
            p[ip_len + 8] = 0x1c; // RC FLUSH
            let headers = p[ip_len + 8..].to_vec();
            let mut twice = p.clone();
            twice.extend_from_slice(&headers);
            let rxe = compute_rxe_flush(&p, version, ip_len).unwrap();
            assert_eq!(rxe, compute(&twice, version, ip_len).unwrap());
            assert_ne!(rxe, compute(&p, version, ip_len).unwrap());
            let short = &p[..p.len() - 1];
            assert!(compute_rxe_flush(short, version, ip_len).is_err());
        }
    }

    #[test]
    fn seed_is_eight_ff_bytes() {
        let mut h = crc32fast::Hasher::new();
        h.update(&[0xff; 8]);
        assert_eq!(h.finalize(), SEED);
        assert_eq!(!SEED, 0xdebb_20e3);
    }

    /// scapy's UC SEND_ONLY unit test frame (protocol.md §1.11): IP ID 0x0478, wire ICRC
    /// 78 f3 53 f3 (not part of the 60 bytes).
    fn scapy_uc_send_only_packet() -> [u8; 60] {
        let ip: [u8; 20] =
            [0x45, 0x01, 0x00, 0x40, 0x04, 0x78, 0x40, 0x00, 0x40, 0x11, 0xb4, 0xd5, 192, 168, 0, 7, 192, 168, 0, 7];
        let mut pkt = [0u8; 60];
        pkt[..20].copy_from_slice(&ip);
        pkt[20..28].copy_from_slice(&[0xc0, 0x00, 0x12, 0xb7, 0x00, 0x2c, 0x00, 0x00]);
        pkt[28..40].copy_from_slice(&[0x24, 0x60, 0xff, 0xff, 0x00, 0x00, 0x00, 0xd3, 0x00, 0xcf, 0x17, 0x10]);
        pkt[40..60].copy_from_slice(&[
            0x46, 0x30, 0x81, 0x8b, 0xe2, 0x89, 0x35, 0xd9, 0x0e, 0x9a, 0x95, 0x50, 0x54, 0x01, 0xbe, 0x88, 0x5e, 0x50,
            0x00, 0x00,
        ]);
        pkt
    }

    #[test]
    fn scapy_uc_send_only() {
        let pkt = scapy_uc_send_only_packet();
        let icrc = compute(&pkt, IpVersion::V4, 20).unwrap();
        assert_eq!(icrc, 0xf353_f378);
        assert_eq!(to_wire(icrc), [0x78, 0xf3, 0x53, 0xf3]);
    }

    /// The ID a UDP socket hides comes back from the ICRC: scapy's frame (ID 0x0478) with its
    /// ID zeroed, then IDs over a range of lengths; a damaged byte elsewhere finds none.
    #[test]
    fn ipv4_identification_is_solved_from_the_icrc() {
        let mut pkt = scapy_uc_send_only_packet();
        pkt[4..6].copy_from_slice(&[0, 0]);
        let icrc = from_wire([0x78, 0xf3, 0x53, 0xf3]);
        assert_eq!(solve_ipv4_identification(&pkt, icrc).unwrap(), Some(0x0478));
        let mut rng = crate::rng::SplitMix64::stream(7, 0);
        for len in [40usize, 41, 64, 300, 1100, 4200] {
            let mut whole = [0u8; 4200];
            let p = random_ipv4_packet(&mut rng, &mut whole[..len]);
            let id = rng.next_u64() as u16;
            p[4..6].copy_from_slice(&id.to_be_bytes());
            let icrc = compute(p, IpVersion::V4, 20).unwrap();
            p[4..6].copy_from_slice(&[0, 0]);
            assert_eq!(solve_ipv4_identification(p, icrc).unwrap(), Some(id), "length {len}");
            p[len - 1] ^= 0x10;
            assert_eq!(solve_ipv4_identification(p, icrc).unwrap(), None, "length {len}, damaged");
        }
        assert!(solve_ipv4_identification(&pkt[..30], icrc).is_err());
    }

    /// `p` filled with random bytes behind an IPv4 version/IHL byte.
    fn random_ipv4_packet<'a>(rng: &mut crate::rng::SplitMix64, p: &'a mut [u8]) -> &'a mut [u8] {
        for b in p.iter_mut() {
            *b = rng.next_u64() as u8;
        }
        p[0] = 0x45;
        p
    }

    /// A GSO segment's ICRC corrected for the ID its kernel gives it equals the ICRC hashed
    /// with that ID, at every length, for IDs 1 … 63 and any.
    #[test]
    fn an_identification_change_shifts_the_icrc() {
        let mut rng = crate::rng::SplitMix64::stream(9, 0);
        for len in [40usize, 41, 64, 1052, 4124, 9000] {
            let mut whole = [0u8; 9000];
            let p = random_ipv4_packet(&mut rng, &mut whole[..len]);
            p[4..6].copy_from_slice(&[0, 0]);
            let at_zero = compute(p, IpVersion::V4, 20).unwrap();
            let shift = Ipv4IdentificationShift::new(len).unwrap();
            for id in (1u16..64).chain([0x1234, 0xffff, rng.next_u64() as u16]) {
                p[4..6].copy_from_slice(&id.to_be_bytes());
                let want = compute(p, IpVersion::V4, 20).unwrap();
                assert_eq!(at_zero ^ shift.icrc_change(0, id), want, "length {len}, ID {id}");
                assert_eq!(want ^ shift.icrc_change(id, 7), at_zero ^ shift.icrc_change(0, 7));
            }
        }
        assert!(Ipv4IdentificationShift::new(39).is_err());
    }

    #[test]
    fn seed_adjustment_equals_masked_copy() {
        // Every byte value at every masked position, both IP versions, against the copy form.
        for version in [IpVersion::V4, IpVersion::V6] {
            let hl = if version == IpVersion::V4 { 20 } else { 40 };
            let mut pkt = [0u8; 120];
            for (i, b) in pkt.iter_mut().enumerate() {
                *b = (i as u8).wrapping_mul(37).wrapping_add(11);
            }
            for pos in 0..hl + 20 {
                for v in [0u8, 0x0f, 0x5a, 0xf0, 0xff] {
                    let mut p = pkt;
                    p[pos] = v;
                    assert_eq!(
                        compute(&p, version, hl).unwrap(),
                        compute_by_copy(&p, version, hl),
                        "{version:?} byte {pos} = {v:#x}"
                    );
                }
            }
        }
    }

    #[test]
    fn in_place_equals_compute_and_restores_the_packet() {
        for version in [IpVersion::V4, IpVersion::V6] {
            let hl = if version == IpVersion::V4 { 20 } else { 40 };
            for len in [hl + 20, hl + 21, hl + 64, 304, 1100] {
                let mut buf = [0u8; 1100];
                for (i, b) in buf.iter_mut().enumerate() {
                    *b = (i as u8).wrapping_mul(73).wrapping_add(len as u8);
                }
                let before = buf;
                let c = compute(&buf[..len], version, hl).unwrap();
                assert_eq!(compute_in_place(&mut buf[..len], version, hl).unwrap(), c, "{version:?} {len}");
                assert_eq!(buf, before);
            }
        }
        let mut opts = [0x5au8; 24 + 20 + 8];
        assert_eq!(compute_in_place(&mut opts, IpVersion::V4, 24).unwrap(), compute(&opts, IpVersion::V4, 24).unwrap());
        assert!(compute_in_place(&mut [0u8; 39], IpVersion::V4, 20).is_err());
    }

    #[test]
    fn short_input_is_an_error() {
        for n in 0..40 {
            assert!(compute(&[0u8; 40][..n], IpVersion::V4, 20).is_err());
            assert!(check(&[0u8; 44][..n], IpVersion::V4, 20).is_err());
        }
        assert!(compute(&[0u8; 200], IpVersion::V4, 100).is_err());
    }
    /// A global native packet's ICRC equals the RoCE form over the same GRH-onwards bytes:
    /// both mask the LRH to ones (RoCEv1 is a global IB packet without its LRH). A local
    /// packet's ICRC changes with the LRH's SL but not with its VL.
    #[test]
    fn native_masks() {
        let mut pkt = [0u8; 8 + 40 + 12 + 24];
        for (i, b) in pkt.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(53).wrapping_add(7);
        }
        let global = compute_native(&pkt, true).unwrap();
        let mut roce_v1 = [0xffu8; 8 + 40 + 12 + 24];
        roce_v1[8..].copy_from_slice(&pkt[8..]);
        let mut h = crc32fast::Hasher::new();
        let mut grh = [0u8; 40 + 12];
        grh.copy_from_slice(&pkt[8..60]);
        grh[0] |= 0x0f;
        grh[1..4].fill(0xff);
        grh[7] = 0xff;
        grh[44] = 0xff;
        h.update(&[0xff; 8]);
        h.update(&grh);
        h.update(&pkt[60..]);
        assert_eq!(global, h.finalize());
        let mut changed = pkt;
        changed[..8].fill(0);
        changed[8] ^= 0x0f;
        changed[9] ^= 0x55;
        changed[15] ^= 0x10;
        changed[52] ^= 0xc0;
        assert_eq!(compute_native(&changed, true).unwrap(), global, "variant fields are masked");
        changed[20] ^= 1;
        assert_ne!(compute_native(&changed, true).unwrap(), global, "the SGID is covered");

        let local = compute_native(&pkt[..44], false).unwrap();
        let mut vl = pkt;
        vl[0] ^= 0xa0;
        vl[12] ^= 0xff;
        assert_eq!(compute_native(&vl[..44], false).unwrap(), local);
        vl[1] ^= 0x10;
        assert_ne!(compute_native(&vl[..44], false).unwrap(), local, "the SL is covered");
        assert!(compute_native(&pkt[..19], false).is_err());
        assert!(compute_native(&pkt[..59], true).is_err());
    }
}
