//! [`Requester`]: who sent a MAD, as the responder and its duplicate cache see it.

use roce_wire::{Gid, DEFAULT_PKEY};

/// Who sent a MAD: on RoCEv2 the source IP address as a GID (IPv4-mapped or IPv6), the
/// source QP from the DETH, and the P_Key of the BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Requester {
    /// The requester's port GID: the packet's source address (GRH SGID on IB).
    pub gid: Gid,
    /// The requester's QP number (DETH SrcQP; 1 for the kernel's GSI).
    pub qpn: u32,
    /// The P_Key the request came with (BTH). It stands for the requester port's partition
    /// membership in OpenSM's P_Key tests; [`Requester::new`] uses the default 0xFFFF.
    pub pkey: u16,
}

impl Requester {
    /// A requester in the default partition (P_Key 0xFFFF).
    pub const fn new(gid: Gid, qpn: u32) -> Requester {
        Requester { gid, qpn, pkey: DEFAULT_PKEY }
    }

    /// The same requester with another P_Key.
    pub const fn with_pkey(self, pkey: u16) -> Requester {
        Requester { pkey, ..self }
    }
}
