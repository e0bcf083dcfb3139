//! Typed parse errors that say which layer failed and at which byte.
//!
//! Modelled on etherparse's `LenError` / `HeaderSliceError`: a buffer is either too short for
//! a layer ([`Error::Len`]) or holds a value the layer cannot accept ([`Error::Content`]).
//! Every offset is counted from the start of the buffer handed to the outermost parser, so an
//! error from `Frame::parse` points at the exact byte of the frame. Parsers of inner layers
//! report offsets relative to their own buffer; the caller adds the layer's start with
//! [`Error::add_offset`].

use core::fmt;

/// The protocol layer (header or record) an error belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Layer {
    /// The link-layer header of a capture that is not Ethernet (Linux cooked SLL or SLL2), or
    /// its link type.
    Link,
    /// Ethernet II header.
    Ethernet,
    /// IEEE 802.1Q VLAN tag.
    Vlan,
    /// IPv4 header.
    Ipv4,
    /// IPv6 header.
    Ipv6,
    /// UDP header.
    Udp,
    /// InfiniBand Base Transport Header.
    Bth,
    /// RDMA Extended Transport Header.
    Reth,
    /// ACK Extended Transport Header.
    Aeth,
    /// Datagram Extended Transport Header.
    Deth,
    /// XRC Extended Transport Header.
    Xrceth,
    /// Immediate data.
    ImmDt,
    /// Invalidate Extended Transport Header.
    Ieth,
    /// Flush Extended Transport Header.
    Feth,
    /// Atomic Extended Transport Header.
    AtomicEth,
    /// Atomic Acknowledge Extended Transport Header.
    AtomicAckEth,
    /// Transport payload and pad.
    Payload,
    /// Invariant CRC.
    Icrc,
    /// MAD common header.
    Mad,
    /// RMPP header.
    Rmpp,
    /// Subnet Administration header.
    SaHeader,
    /// SA MCMemberRecord.
    McMemberRecord,
    /// ClassPortInfo attribute.
    ClassPortInfo,
    /// SA ServiceRecord.
    ServiceRecord,
    /// A Communication Management message body (REQ, REP, …).
    Cm,
    /// The RDMA-CM private-data header carried in CM private data.
    CmaHeader,
    /// IGMP message.
    Igmp,
    /// MLD (ICMPv6) message.
    Mld,
    /// ARP packet.
    Arp,
    /// IPv6 neighbour discovery (ICMPv6) message.
    Ndisc,
    /// pcap capture file framing.
    Pcap,
    /// InfiniBand Local Route Header (native IB captures).
    Lrh,
    /// InfiniBand Global Route Header (native IB captures).
    Grh,
    /// InfiniBand Variant CRC.
    Vcrc,
    /// Subnet Management Packet (the MAD of QP0).
    Smp,
    /// ERF record header (link type 197).
    Erf,
}

impl Layer {
    /// A short, human name for the layer.
    pub const fn name(self) -> &'static str {
        match self {
            Layer::Link => "link layer",
            Layer::Ethernet => "Ethernet",
            Layer::Vlan => "802.1Q",
            Layer::Ipv4 => "IPv4",
            Layer::Ipv6 => "IPv6",
            Layer::Udp => "UDP",
            Layer::Bth => "BTH",
            Layer::Reth => "RETH",
            Layer::Aeth => "AETH",
            Layer::Deth => "DETH",
            Layer::Xrceth => "XRCETH",
            Layer::ImmDt => "ImmDt",
            Layer::Ieth => "IETH",
            Layer::Feth => "FETH",
            Layer::AtomicEth => "AtomicETH",
            Layer::AtomicAckEth => "AtomicAckETH",
            Layer::Payload => "payload",
            Layer::Icrc => "ICRC",
            Layer::Mad => "MAD",
            Layer::Rmpp => "RMPP",
            Layer::SaHeader => "SA header",
            Layer::McMemberRecord => "MCMemberRecord",
            Layer::ClassPortInfo => "ClassPortInfo",
            Layer::ServiceRecord => "ServiceRecord",
            Layer::Cm => "CM",
            Layer::CmaHeader => "RDMA-CM header",
            Layer::Igmp => "IGMP",
            Layer::Mld => "MLD",
            Layer::Arp => "ARP",
            Layer::Ndisc => "NDISC",
            Layer::Pcap => "pcap",
            Layer::Lrh => "LRH",
            Layer::Grh => "GRH",
            Layer::Vcrc => "VCRC",
            Layer::Smp => "SMP",
            Layer::Erf => "ERF",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What was wrong with the content of a layer that was long enough.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ContentError {
    /// The EtherType is neither IPv4, IPv6 nor (for an outer tag) 802.1Q.
    UnsupportedEtherType(u16),
    /// A capture's link type (pcap `LINKTYPE_*`) that is not dissected.
    UnsupportedLinkType(u32),
    /// The IP version nibble does not match the EtherType.
    IpVersionMismatch {
        /// The version found.
        version: u8,
    },
    /// The IPv4 header length field is below 5 words.
    Ipv4HeaderLenTooSmall {
        /// The IHL value found.
        ihl: u8,
    },
    /// The IPv4 packet is a fragment; RoCEv2 is never fragmented.
    Ipv4Fragmented,
    /// The IPv4 header checksum is wrong.
    Ipv4Checksum {
        /// The checksum in the header.
        found: u16,
        /// The checksum the header should have.
        expected: u16,
    },
    /// The IP length fields disagree with the frame (too long for it, or shorter than the header).
    IpLength {
        /// The length the header claims for the packet.
        claimed: usize,
        /// The bytes available.
        available: usize,
    },
    /// The IP next-header/protocol is not UDP.
    NotUdp {
        /// The protocol number found.
        protocol: u8,
    },
    /// The UDP destination port is not 4791.
    NotRoceV2Port {
        /// The destination port found.
        port: u16,
    },
    /// The UDP length field is below 8 or beyond the IP payload.
    UdpLength {
        /// The UDP length field.
        claimed: usize,
        /// The bytes the IP layer carries.
        available: usize,
    },
    /// BTH transport header version is not 0.
    UnsupportedTver(u8),
    /// The BTH pad count is larger than the payload area (or the payload is not 4-byte aligned).
    BadPad {
        /// The pad count from BTH.
        pad: u8,
        /// The bytes between the transport headers and the ICRC.
        payload_and_pad: usize,
    },
    /// The ICRC does not match the frame.
    IcrcMismatch {
        /// The ICRC value on the wire (as a CRC value, i.e. read least-significant byte first).
        found: u32,
        /// The ICRC computed over the frame.
        expected: u32,
    },
    /// A MAD base version other than 1.
    UnsupportedBaseVersion(u8),
    /// A MAD class version this parser does not know for its class.
    UnsupportedClassVersion {
        /// The management class.
        class: u8,
        /// The class version found.
        version: u8,
    },
    /// An RMPP field that is inconsistent (for example an unknown RMPP version).
    BadRmpp(u8),
    /// A length or count field inside a record points outside it.
    FieldOutOfRange {
        /// The value of the length/count field.
        value: usize,
        /// The maximum it may have.
        max: usize,
    },
    /// A checksum of an embedded protocol (IGMP, ICMPv6) is wrong.
    Checksum,
    /// A value the layer defines as invalid (reserved code, malformed option …).
    Malformed,
    /// A message type this parser does not implement.
    UnsupportedType(u8),
    /// The InfiniBand VCRC found differs from the one computed.
    VcrcMismatch {
        /// The VCRC in the packet.
        found: u16,
        /// The VCRC computed.
        expected: u16,
    },
    /// An InfiniBand LRH's PktLen (with the VCRC after it) runs past the bytes there are, or
    /// is shorter than the LRH itself.
    PacketLength {
        /// Bytes the LRH says the packet and its VCRC take.
        claimed: usize,
        /// Bytes available.
        available: usize,
    },
}

impl fmt::Display for ContentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ContentError::UnsupportedEtherType(t) => write!(f, "EtherType 0x{t:04x} is not IPv4 or IPv6"),
            ContentError::UnsupportedLinkType(t) => write!(f, "link type {t} is not dissected"),
            ContentError::IpVersionMismatch { version } => {
                write!(f, "IP version {version} does not match the EtherType")
            }
            ContentError::Ipv4HeaderLenTooSmall { ihl } => write!(f, "IHL {ihl} is below 5"),
            ContentError::Ipv4Fragmented => f.write_str("IPv4 fragment (RoCEv2 is never fragmented)"),
            ContentError::Ipv4Checksum { found, expected } => {
                write!(f, "header checksum 0x{found:04x}, expected 0x{expected:04x}")
            }
            ContentError::IpLength { claimed, available } => {
                write!(f, "length field says {claimed} bytes but {available} are there")
            }
            ContentError::NotUdp { protocol } => write!(f, "protocol {protocol} is not UDP (17)"),
            ContentError::NotRoceV2Port { port } => write!(f, "UDP destination port {port} is not 4791"),
            ContentError::UdpLength { claimed, available } => {
                write!(f, "UDP length {claimed} but the IP payload has {available} bytes")
            }
            ContentError::UnsupportedTver(v) => write!(f, "transport header version {v} (must be 0)"),
            ContentError::BadPad { pad, payload_and_pad } => {
                write!(f, "pad count {pad} does not fit {payload_and_pad} bytes of payload and pad")
            }
            ContentError::IcrcMismatch { found, expected } => {
                write!(f, "ICRC 0x{found:08x}, expected 0x{expected:08x}")
            }
            ContentError::UnsupportedBaseVersion(v) => write!(f, "MAD base version {v} (must be 1)"),
            ContentError::UnsupportedClassVersion { class, version } => {
                write!(f, "class 0x{class:02x} version {version} is not supported")
            }
            ContentError::BadRmpp(v) => write!(f, "RMPP field value {v} is invalid"),
            ContentError::FieldOutOfRange { value, max } => {
                write!(f, "field value {value} exceeds its maximum {max}")
            }
            ContentError::Checksum => f.write_str("checksum mismatch"),
            ContentError::Malformed => f.write_str("malformed"),
            ContentError::UnsupportedType(t) => write!(f, "message type 0x{t:02x} is not supported"),
            ContentError::VcrcMismatch { found, expected } => {
                write!(f, "VCRC 0x{found:04x}, expected 0x{expected:04x}")
            }
            ContentError::PacketLength { claimed, available } => {
                write!(f, "PktLen says {claimed} bytes with the VCRC but {available} are there")
            }
        }
    }
}

/// A parse error: the layer, the byte offset and what went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The buffer ended before the layer did.
    Len {
        /// The layer that needed more bytes.
        layer: Layer,
        /// Offset of the start of that layer.
        offset: usize,
        /// The bytes the layer needs (counted from `offset`).
        required_len: usize,
        /// The bytes that were there (counted from `offset`).
        len: usize,
    },
    /// The layer was long enough but a field holds an unacceptable value.
    Content {
        /// The layer holding the bad field.
        layer: Layer,
        /// Offset of the first byte of the bad field.
        offset: usize,
        /// What was wrong.
        kind: ContentError,
    },
}

impl Error {
    /// A length error at `offset` for `layer`.
    pub const fn len(layer: Layer, offset: usize, required_len: usize, len: usize) -> Self {
        Error::Len { layer, offset, required_len, len }
    }

    /// A content error at `offset` for `layer`.
    pub const fn content(layer: Layer, offset: usize, kind: ContentError) -> Self {
        Error::Content { layer, offset, kind }
    }

    /// The layer that failed.
    pub const fn layer(&self) -> Layer {
        match *self {
            Error::Len { layer, .. } | Error::Content { layer, .. } => layer,
        }
    }

    /// The byte offset of the failure (start of the layer for length errors, the field for
    /// content errors).
    pub const fn offset(&self) -> usize {
        match *self {
            Error::Len { offset, .. } | Error::Content { offset, .. } => offset,
        }
    }

    /// Shift the offset by `by` bytes: used when an inner layer's error travels outwards.
    #[must_use]
    pub const fn add_offset(self, by: usize) -> Self {
        match self {
            Error::Len { layer, offset, required_len, len } => {
                Error::Len { layer, offset: offset + by, required_len, len }
            }
            Error::Content { layer, offset, kind } => Error::Content { layer, offset: offset + by, kind },
        }
    }

    /// A stable, machine-readable reason, usable as a drop-counter name.
    pub const fn reason(&self) -> &'static str {
        match *self {
            Error::Len { .. } => "truncated",
            Error::Content { kind, .. } => match kind {
                ContentError::UnsupportedEtherType(_) => "ethertype",
                ContentError::UnsupportedLinkType(_) => "link_type",
                ContentError::IpVersionMismatch { .. } => "ip_version",
                ContentError::Ipv4HeaderLenTooSmall { .. } => "ipv4_ihl",
                ContentError::Ipv4Fragmented => "ipv4_fragment",
                ContentError::Ipv4Checksum { .. } => "ipv4_checksum",
                ContentError::IpLength { .. } => "ip_length",
                ContentError::NotUdp { .. } => "not_udp",
                ContentError::NotRoceV2Port { .. } => "not_rocev2",
                ContentError::UdpLength { .. } => "udp_length",
                ContentError::UnsupportedTver(_) => "bth_tver",
                ContentError::BadPad { .. } => "bad_pad",
                ContentError::IcrcMismatch { .. } => "bad_icrc",
                ContentError::UnsupportedBaseVersion(_) => "mad_base_version",
                ContentError::UnsupportedClassVersion { .. } => "mad_class_version",
                ContentError::BadRmpp(_) => "rmpp",
                ContentError::FieldOutOfRange { .. } => "field_range",
                ContentError::Checksum => "checksum",
                ContentError::Malformed => "malformed",
                ContentError::UnsupportedType(_) => "unsupported_type",
                ContentError::VcrcMismatch { .. } => "bad_vcrc",
                ContentError::PacketLength { .. } => "packet_length",
            },
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::Len { layer, offset, required_len, len } => {
                write!(f, "{layer} at byte {offset}: truncated, needs {required_len} bytes but only {len} remain")
            }
            Error::Content { layer, offset, kind } => write!(f, "{layer} at byte {offset}: {kind}"),
        }
    }
}

impl core::error::Error for Error {}

/// The result type of every parser in this crate.
pub type Result<T> = core::result::Result<T, Error>;

/// Check a count field read at `offset` against the bound a bounded repr can hold: the count,
/// or [`ContentError::FieldOutOfRange`] naming the field.
#[inline]
pub(crate) fn check_count(layer: Layer, offset: usize, value: usize, max: usize) -> Result<usize> {
    if value > max {
        Err(Error::content(layer, offset, ContentError::FieldOutOfRange { value, max }))
    } else {
        Ok(value)
    }
}

/// Check that `buf` holds at least `required` bytes for `layer`; offsets are relative to `buf`.
#[inline]
pub(crate) const fn check_len(layer: Layer, buf: &[u8], required: usize) -> Result<()> {
    if buf.len() < required {
        Err(Error::len(layer, 0, required, buf.len()))
    } else {
        Ok(())
    }
}
