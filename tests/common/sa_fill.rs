//! Filling an SA in-process: `n` groups of one member each, or `n` ServiceRecords, joined or
//! registered straight into a [`SaResponder`] (each answered status 0), so a test can ask for
//! a table of a known size.

use std::net::Ipv4Addr;

use roce_sa::{Requester, SaResponder};
use roce_wire::mad::{MadStatus, Method};
use roce_wire::mcmember::{ComponentMask as Cm, JoinState, McMemberRecord};
use roce_wire::sa::{attr, SaData, SaMad};
use roce_wire::service_record::{ComponentMask as Sc, ServiceRecord};
use roce_wire::Gid;

/// Host `n`'s GID: 198.18.(n / 256 + 1).(n % 256).
pub fn host(n: u16) -> Gid {
    Gid::from_ipv4(Ipv4Addr::new(198, 18, (n >> 8) as u8 + 1, n as u8))
}

/// The MGID of group `i`: ::ffff:239.7.(i / 256).(i % 256).
pub fn group(i: u16) -> Gid {
    Gid::from_ipv4(Ipv4Addr::new(239, 7, (i >> 8) as u8, i as u8))
}

/// `n` groups of one member each (host `i` in group `i`), joined straight into the responder.
pub fn fill_groups(sa: &mut SaResponder, n: u16) {
    for i in 0..n {
        let rec = McMemberRecord {
            mgid: group(i),
            port_gid: host(i),
            q_key: 0x0123_4567,
            p_key: 0xFFFF,
            join_state: JoinState::FULL_MEMBER,
            ..McMemberRecord::default()
        };
        let m = SaMad::request(
            Method::Set,
            0x100 + u64::from(i),
            attr::MC_MEMBER_RECORD,
            Cm::KERNEL_JOIN.0,
            SaData::mc_member(rec),
        );
        let r = sa.handle_mad(Requester::new(host(i), 1), &m.to_bytes());
        assert_eq!(SaMad::parse(&r.as_slice()[0]).unwrap().header.status, MadStatus::SUCCESS, "join {i}");
    }
}

/// `n` ServiceRecords (ServiceID 0x1000 + i, named `svc-i`) registered straight into the
/// responder.
pub fn fill_services(sa: &mut SaResponder, n: u16) {
    for i in 0..n {
        let rec = ServiceRecord {
            service_id: 0x1000 + u64::from(i),
            service_gid: host(i),
            service_p_key: 0xFFFF,
            service_name: ServiceRecord::name_field(&format!("svc-{i}")),
            ..ServiceRecord::default()
        };
        let mask = Sc::SERVICE_ID | Sc::SERVICE_GID | Sc::SERVICE_P_KEY | Sc::SERVICE_NAME;
        let m = SaMad::request(Method::Set, 0x9000 + u64::from(i), attr::SERVICE_RECORD, mask.0, SaData::service(rec));
        let r = sa.handle_mad(Requester::new(host(i), 1), &m.to_bytes());
        assert_eq!(SaMad::parse(&r.as_slice()[0]).unwrap().header.status, MadStatus::SUCCESS, "service {i}");
    }
}
