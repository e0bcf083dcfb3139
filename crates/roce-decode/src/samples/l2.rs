//! The non-RoCE sample frames: ARP between the hosts, and the IGMPv3 join and leave the Linux
//! kernel sends for an IPv4 RoCEv2 group (RDMA-CM's `ip_mc_inc_group` / `ip_mc_dec_group`).

use std::net::Ipv4Addr;

use roce_wire::arp;
use roce_wire::igmp::IgmpMessage;
use roce_wire::l2::{ArpFrame, EmitFrame, IgmpFrame};

use super::{IP_A, IP_SA, MAC_A, MAC_SA};

fn emit(f: &dyn EmitFrame) -> Vec<u8> {
    let mut out = vec![0u8; f.buffer_len()];
    let n = f.emit(&mut out);
    out.truncate(n);
    out
}

/// Who has the SA's address, and its answer.
pub fn arp_exchange() -> Vec<(&'static str, Vec<u8>)> {
    let req = arp::request(MAC_A, IP_A, IP_SA);
    let rep = arp::reply(MAC_SA, IP_SA, MAC_A, IP_A);
    vec![("arp_request", emit(&ArpFrame::new(req))), ("arp_reply", emit(&ArpFrame::new(rep)))]
}

/// The IGMPv3 membership report of a join.
pub fn igmp_join(group: Ipv4Addr) -> Vec<(&'static str, Vec<u8>)> {
    vec![("igmpv3_join", emit(&IgmpFrame::new(MAC_A, IP_A, IgmpMessage::v3_join(group))))]
}

/// The IGMPv3 report of a leave (and the IGMPv2 leave an older querier would see).
pub fn igmp_leave(group: Ipv4Addr) -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("igmpv3_leave", emit(&IgmpFrame::new(MAC_A, IP_A, IgmpMessage::v3_leave(group)))),
        ("igmpv2_leave", emit(&IgmpFrame::new(MAC_A, IP_A, IgmpMessage::v2_leave(group)))),
    ]
}

/// The multicast MAC of an IPv4 group.
pub fn ipv4_multicast_mac(g: Ipv4Addr) -> [u8; 6] {
    roce_wire::l2::ipv4_multicast_mac(g)
}

/// IPv6 neighbour discovery for the SA's address, and the MLDv2 join and leave of a group.
pub fn ipv6_exchange() -> Vec<(&'static str, Vec<u8>)> {
    use roce_wire::l2::{MldFrame, NdiscFrame};
    use roce_wire::mld::MldMessage;
    use std::net::Ipv6Addr;
    let a: Ipv6Addr = "fd00::1".parse().unwrap();
    let sa: Ipv6Addr = "fd00::2".parse().unwrap();
    let ll: Ipv6Addr = "fe80::ff:fe00:1".parse().unwrap();
    let group: Ipv6Addr = "ff0e::1:2:3".parse().unwrap();
    vec![
        ("ndisc_solicit", emit(&NdiscFrame::solicit(MAC_A, a, sa))),
        ("ndisc_advert", emit(&NdiscFrame::advert(MAC_SA, sa, a, MAC_A))),
        ("mldv2_join", emit(&MldFrame::new(MAC_A, ll, MldMessage::join(group)))),
        ("mldv2_leave", emit(&MldFrame::new(MAC_A, ll, MldMessage::leave(group)))),
    ]
}
