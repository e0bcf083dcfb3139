//! What both transports' GSO sends share: which consecutive datagrams of a transmit batch go
//! to the kernel as one run (the udp transport's UDP_SEGMENT message, the raw transport's
//! PACKET_VNET_HDR frame), and each segment's ICRC corrected for the IPv4 Identification the
//! kernel gives it (`inet_gso_segment` counts up from the first segment's ID).

use std::io;
use std::os::fd::RawFd;

use roce_wire::icrc;

/// Segments per GSO run: the kernel's UDP_MAX_SEGMENTS (include/linux/udp.h), also the bound
/// `virtio_net_hdr_to_skb` puts on a VIRTIO_NET_HDR_GSO_UDP_L4 frame.
pub(crate) const GSO_MAX_SEGMENTS: usize = 64;
/// UDP payload bytes per run: an IPv4 datagram's most (65535 − 20 − 8).
pub(crate) const GSO_MAX_BYTES: usize = 65_507;

/// A datagram as run classification sees it.
pub(crate) trait RunMember {
    /// Its UDP payload's length (BTH … ICRC).
    fn payload_len(&self) -> usize;
    /// Whether it may follow `first` in `first`'s run: one destination, one header but for
    /// what the kernel rewrites per segment (lengths, checksums, the IPv4 ID).
    fn joins(&self, first: &Self) -> bool;
    /// Whether a second copy of it is harmless (RC and UC: the receiver discards a PSN it has
    /// seen). Only such datagrams are moved ahead of others: when the kernel takes a batch
    /// only in part, the caller is told the prefix it took and sends the rest again, a moved
    /// datagram included.
    fn resend_safe(&self) -> bool {
        false
    }
}

/// The most datagrams [`split_runs`] and [`split_flow_runs`] take at once (a driver batch).
pub(crate) const MAX_BATCH: usize = 64;

/// Split `items` into runs, written to `runs` as (first index, count); returns how many. A run
/// is consecutive datagrams that join its first, all of the first's payload length but the
/// last, which may be shorter (`__udp_gso_segment`: every segment `gso_size` but the last), up
/// to [`GSO_MAX_SEGMENTS`] and [`GSO_MAX_BYTES`]. Without `gso` every datagram is a run of its
/// own. At most [`MAX_BATCH`] items are taken; `runs` holds at least as many entries.
pub(crate) fn split_runs<T: RunMember>(items: &[T], gso: bool, runs: &mut [(usize, usize)]) -> usize {
    let mut order = [0usize; MAX_BATCH];
    // Consecutive runs: `order` is the identity, so a run's start in it is its first index.
    split_flow_runs(items, gso, false, &mut order, runs)
}

/// [`split_runs`], and with `across` a run also gathers the later datagrams that join it past
/// others that do not (a flow's packets between other QPs' on the raw transport, where each QP
/// has its own UDP source port): `order` gets the datagrams' indices in the order they go out,
/// and `runs` (start in `order`, count). A flow's datagrams keep their order (each run of a
/// flow starts at its first datagram not yet taken, and runs go out by their first datagram);
/// only datagrams of different flows may pass each other.
pub(crate) fn split_flow_runs<T: RunMember>(
    items: &[T],
    gso: bool,
    across: bool,
    order: &mut [usize; MAX_BATCH],
    runs: &mut [(usize, usize)],
) -> usize {
    let n = items.len().min(runs.len()).min(MAX_BATCH);
    let mut taken = [false; MAX_BATCH];
    let (mut n_runs, mut n_order) = (0, 0);
    for i in 0..n {
        if taken[i] {
            continue;
        }
        let (first, start) = (&items[i], n_order);
        order[n_order] = i;
        n_order += 1;
        let seg = first.payload_len();
        let (mut k, mut bytes, mut j) = (1, seg, i + 1);
        // Whether a datagram not yet sent (neither in an earlier run nor in this one) was passed.
        let mut left_behind = false;
        while gso && j < n && k < GSO_MAX_SEGMENTS {
            let e = &items[j];
            // Past a datagram left behind, only one that may go twice moves ahead of it.
            if taken[j] || !e.joins(first) || (left_behind && !e.resend_safe()) {
                if across {
                    left_behind |= !taken[j];
                    j += 1;
                    continue;
                }
                break;
            }
            let len = e.payload_len();
            if len > seg || bytes + len > GSO_MAX_BYTES {
                break;
            }
            (taken[j], order[n_order]) = (true, j);
            n_order += 1;
            bytes += len;
            k += 1;
            j += 1;
            if len < seg {
                break; // a shorter one ends the run
            }
        }
        runs[n_runs] = (start, k);
        n_runs += 1;
    }
    n_runs
}

/// ICRCs corrected for a new IPv4 Identification, the shift for the last packet length kept
/// (a window's segments share one length).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IdCorrection {
    shift: Option<(usize, icrc::Ipv4IdentificationShift)>,
}

impl IdCorrection {
    /// The wire ICRC `wire` of an IPv4 packet of `len` bytes (IP header to the last pad byte)
    /// whose Identification goes from `have` to `want`; unchanged where `len` is too short to
    /// be a RoCEv2 packet.
    pub(crate) fn icrc(&mut self, wire: [u8; 4], len: usize, have: u16, want: u16) -> [u8; 4] {
        if have == want {
            return wire;
        }
        let s = match self.shift {
            Some((l, s)) if l == len => s,
            _ => match icrc::Ipv4IdentificationShift::new(len) {
                Ok(s) => self.shift.insert((len, s)).1,
                Err(_) => return wire,
            },
        };
        icrc::to_wire(icrc::from_wire(wire) ^ s.icrc_change(have, want))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy)]
    struct D(u8, usize);
    impl RunMember for D {
        fn payload_len(&self) -> usize {
            self.1
        }
        fn joins(&self, first: &Self) -> bool {
            self.0 == first.0
        }
        /// Flows 1-9 are RC-like, 10 and up UD-like.
        fn resend_safe(&self) -> bool {
            self.0 < 10
        }
    }

    /// Equal lengths run together up to the bounds; a shorter one ends a run, a longer one or
    /// another destination starts the next.
    #[test]
    fn runs_follow_the_kernels_rules() {
        let mut runs = [(0, 0); 200];
        let items: Vec<D> =
            [D(1, 1000); 3].into_iter().chain([D(1, 500), D(1, 1000), D(2, 1000), D(2, 1200)]).collect();
        let n = split_runs(&items, true, &mut runs);
        assert_eq!(&runs[..n], &[(0, 4), (4, 1), (5, 1), (6, 1)]);
        assert_eq!(split_runs(&items, false, &mut runs), items.len());
        let many = vec![D(1, 1040); 64];
        let n = split_runs(&many, true, &mut runs);
        assert_eq!(&runs[..n], &[(0, 62), (62, 2)], "65,507 bytes at most");
        let small = vec![D(1, 100); 64];
        let n = split_runs(&small, true, &mut runs);
        assert_eq!(&runs[..n], &[(0, 64)], "64 segments at most");
    }

    /// Across flows, each flow's datagrams gather into runs in their order, passing others'.
    #[test]
    fn flow_runs_gather_a_flows_datagrams_in_order() {
        let mut runs = [(0, 0); 64];
        let mut order = [0; MAX_BATCH];
        // Two QPs' packets interleaved, the second's last one shorter, then a longer one.
        let items = [D(1, 1000), D(2, 1000), D(1, 1000), D(2, 500), D(1, 1000), D(2, 1000), D(3, 9)];
        let n = split_flow_runs(&items, true, true, &mut order, &mut runs);
        assert_eq!(&runs[..n], &[(0, 3), (3, 2), (5, 1), (6, 1)]);
        assert_eq!(&order[..7], &[0, 2, 4, 1, 3, 5, 6]);
        let n = split_flow_runs(&items, true, false, &mut order, &mut runs);
        assert_eq!(n, 7, "consecutive runs only: none here");
        // A datagram that must not go twice never passes one left behind: a partial send
        // would send it again. Passing datagrams already taken by an earlier run is fine.
        let items = [D(10, 100), D(2, 100), D(10, 100), D(10, 100), D(2, 100), D(10, 100)];
        let n = split_flow_runs(&items, true, true, &mut order, &mut runs);
        assert_eq!(&runs[..n], &[(0, 1), (1, 2), (3, 3)]);
        assert_eq!(&order[..6], &[0, 1, 4, 2, 3, 5]);
    }
}

/// What [`send_messages`] did: the messages the kernel took (a prefix of those given), the
/// `sendmmsg` calls that took some, and the error that stopped it before the end, if any.
#[derive(Debug)]
pub(crate) struct MessagesSent {
    pub taken: usize,
    pub calls: u64,
    pub error: Option<io::Error>,
}

/// `sendmmsg(2)` of `msgs` on `fd`, again after EINTR and after a partial send, until every
/// message went, the kernel took none, or it failed (`error`: the first message not taken is
/// `msgs[taken]`). Both transports' senders share it: each decides what an error means.
pub(crate) fn send_messages(fd: RawFd, msgs: &mut [libc::mmsghdr]) -> MessagesSent {
    let mut sent = MessagesSent { taken: 0, calls: 0, error: None };
    while sent.taken < msgs.len() {
        let rest = &mut msgs[sent.taken..];
        // SAFETY: the caller's messages point at live buffers (addresses, iovecs, control
        // data) that the kernel only reads.
        let r = unsafe { libc::sendmmsg(fd, rest.as_mut_ptr(), rest.len() as libc::c_uint, 0) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            sent.error = Some(e);
            break;
        }
        if r == 0 {
            break;
        }
        sent.taken += r as usize;
        sent.calls += 1;
    }
    sent
}
