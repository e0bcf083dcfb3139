//! The SA's ServiceRecord service (attribute 0x0031): register (SubnAdmSet), look up
//! (SubnAdmGet, SubnAdmGetTable, by component mask) and remove (SubnAdmDelete) service
//! records, with leases that expire — after OpenSM's `osm_sa_service_record.c` and
//! `osm_service.c`. The rules and where they differ from OpenSM are in spec/sa.md §Services.

use core::time::Duration;

use roce_wire::mad::{MadStatus, Method};
use roce_wire::sa::{SaData, SaMad};
use roce_wire::service_record::{ComponentMask as Sc, ServiceRecord, INFINITE_LEASE, SERVICE_RECORD_LEN};
use roce_wire::MAD_SIZE;

use crate::reply::{error_mad, segmented_table_reply, Reply};

/// AttributeOffset of a ServiceRecord response: 176 bytes = 22 eight-byte words.
pub const SERVICE_ATTRIBUTE_OFFSET: u16 = (SERVICE_RECORD_LEN / 8) as u16;

/// One registered service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    record: ServiceRecord,
    /// When the lease was last set or renewed (the responder's clock).
    modified: Duration,
}

impl Entry {
    fn expired(&self, now: Duration) -> bool {
        let lease = self.record.service_lease;
        lease != INFINITE_LEASE && now.saturating_sub(self.modified) >= Duration::from_secs(u64::from(lease))
    }

    /// The record ID OpenSM keys on: ServiceID, ServiceGID, ServiceP_Key [osm_service.c
    /// `match_rid_of_svc_rec`].
    fn same_rid(&self, r: &ServiceRecord) -> bool {
        let s = &self.record;
        s.service_id == r.service_id && s.service_gid == r.service_gid && s.service_p_key == r.service_p_key
    }
}

/// Counters of the ServiceRecord service.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServiceStats {
    /// Records added by a Set.
    pub registered: u64,
    /// Records replaced by a Set with the same record ID (a lease renewal).
    pub renewed: u64,
    /// Records removed by a Delete.
    pub deleted: u64,
    /// Records removed because their lease ran out.
    pub expired: u64,
    /// Get and GetTable requests answered.
    pub queries: u64,
    /// Requests refused with an error status (REQ_INVALID, NO_RECORDS, TOO_MANY_RECORDS,
    /// UNSUPPORTED_METHOD_ATTR).
    pub refused: u64,
}

/// The registered services (OpenSM's `sa_sr_list`), in registration order.
#[derive(Debug, Clone, Default)]
pub struct ServiceTable {
    entries: Vec<Entry>,
    now: Duration,
    stats: ServiceStats,
}

impl ServiceTable {
    /// The records registered now, in registration order.
    pub fn records(&self) -> impl Iterator<Item = &ServiceRecord> + '_ {
        self.entries.iter().map(|e| &e.record)
    }

    /// How many records are registered.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no record is registered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The counters.
    pub fn stats(&self) -> &ServiceStats {
        &self.stats
    }

    /// Advance the clock to `now` (a monotonic time since any fixed epoch) and drop the
    /// records whose lease ran out [`osm_sr_rcv_lease_cb`]. A clock that goes back is ignored.
    #[inline] // called before every MAD a host receives: nothing more to do without records
    pub fn handle_time(&mut self, now: Duration) {
        self.now = self.now.max(now);
        if !self.entries.is_empty() {
            self.expire();
        }
    }

    fn expire(&mut self) {
        let before = self.entries.len();
        let t = self.now;
        self.entries.retain(|e| !e.expired(t));
        self.stats.expired += (before - self.entries.len()) as u64;
    }

    /// When the next lease runs out, if any record has a finite lease.
    pub fn next_expiry(&self) -> Option<Duration> {
        self.entries
            .iter()
            .filter(|e| e.record.service_lease != INFINITE_LEASE)
            .map(|e| e.modified + Duration::from_secs(u64::from(e.record.service_lease)))
            .min()
    }

    /// Answer one ServiceRecord request (any method; the caller checked class, version, RMPP
    /// and SM_Key) [osm_sa_service_record.c `osm_sr_rcv_process`].
    pub fn handle(&mut self, req: &SaMad) -> Reply {
        let now = self.now;
        self.handle_time(now);
        let reply = match req.header.method {
            Method::Set => Reply::One(self.set(req)),
            Method::Delete => Reply::One(self.delete(req)),
            Method::Get | Method::GetTable => {
                self.stats.queries += 1;
                self.query(req)
            }
            _ => Reply::One(error_mad(req, MadStatus::UNSUPPORTED_METHOD_ATTR)),
        };
        if reply.first().is_some_and(|m| m[4..6] != [0, 0]) {
            self.stats.refused += 1;
        }
        reply
    }

    /// SubnAdmSet: needs ServiceID and ServiceGID in the mask (REQ_INVALID otherwise); no
    /// ServiceLease in the mask means an infinite lease; a record with the same record ID is
    /// replaced (its lease restarts); the answer is a GetResp with the record, its P_Key
    /// 0xFFFF when the mask has none [`osm_sr_rcv_process_set_method`].
    fn set(&mut self, req: &SaMad) -> [u8; MAD_SIZE] {
        let mask = Sc(req.sa.component_mask);
        let Some(mut rec) = req.data.as_service().copied() else {
            return error_mad(req, MadStatus::REQ_INVALID);
        };
        if !mask.contains(Sc::OPENSM_SET_REQUIRED) {
            return error_mad(req, MadStatus::REQ_INVALID);
        }
        if !mask.contains(Sc::SERVICE_LEASE) {
            rec.service_lease = INFINITE_LEASE;
        }
        let entry = Entry { record: rec, modified: self.now };
        match self.entries.iter_mut().find(|e| e.same_rid(&rec)) {
            Some(e) => {
                *e = entry;
                self.stats.renewed += 1;
            }
            None => {
                self.entries.push(entry);
                self.stats.registered += 1;
            }
        }
        if !mask.contains(Sc::SERVICE_P_KEY) {
            rec.service_p_key = 0xFFFF;
        }
        respond_one(req, Method::Get, rec)
    }

    /// SubnAdmDelete: the record with the request's record ID, NO_RECORDS if there is none;
    /// the answer is a DeleteResp with the removed record
    /// [`osm_sr_rcv_process_delete_method`].
    fn delete(&mut self, req: &SaMad) -> [u8; MAD_SIZE] {
        let Some(rec) = req.data.as_service() else {
            return error_mad(req, MadStatus::REQ_INVALID);
        };
        match self.entries.iter().position(|e| e.same_rid(rec)) {
            Some(i) => {
                let gone = self.entries.remove(i);
                self.stats.deleted += 1;
                respond_one(req, Method::Delete, gone.record)
            }
            None => error_mad(req, MadStatus::NO_RECORDS),
        }
    }

    /// SubnAdmGet / SubnAdmGetTable: every record that matches the mask's components
    /// ([`ServiceRecord::matches`]); a Get needs exactly one (NO_RECORDS, TOO_MANY_RECORDS);
    /// a GetTable answers with all of them, none included [`osm_sr_rcv_process_get_method`,
    /// osm_sa.c `osm_sa_respond`].
    fn query(&self, req: &SaMad) -> Reply {
        let mask = Sc(req.sa.component_mask);
        let Some(q) = req.data.as_service() else {
            return Reply::One(error_mad(req, MadStatus::REQ_INVALID));
        };
        let mut found: Vec<ServiceRecord> =
            self.entries.iter().map(|e| e.record).filter(|r| r.matches(q, mask)).collect();
        // p923: the ServiceKey is zero for an untrusted requester (SM_Key 0).
        if req.sa.sm_key == 0 {
            for r in &mut found {
                r.service_key = [0; 16];
            }
        }
        if req.header.method == Method::Get {
            return Reply::One(match found.len() {
                0 => error_mad(req, MadStatus::NO_RECORDS),
                1 => respond_one(req, Method::Get, found[0]),
                _ => error_mad(req, MadStatus::TOO_MANY_RECORDS),
            });
        }
        table_reply(req, &found)
    }
}

/// A one-record answer (GetResp, DeleteResp) with the ServiceKey zeroed for an untrusted
/// requester [`__osm_sr_rcv_respond`].
fn respond_one(req: &SaMad, method: Method, mut rec: ServiceRecord) -> [u8; MAD_SIZE] {
    if req.sa.sm_key == 0 {
        rec.service_key = [0; 16];
    }
    req.response_to(method, MadStatus::SUCCESS, SaData::service(rec)).to_bytes()
}

/// A GetTableResp of ServiceRecords, 176 bytes apart, cut into 200-byte RMPP DATA segments
/// (PayloadLength as mad_rmpp.c sets it: the whole transfer on the first segment, this
/// segment's on the last).
fn table_reply(req: &SaMad, records: &[ServiceRecord]) -> Reply {
    segmented_table_reply(req, SERVICE_RECORD_LEN, records.len(), SERVICE_ATTRIBUTE_OFFSET, |i, slot| {
        records[i].emit_bytes(slot)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Requester, SaConfig, SaResponder};
    use roce_wire::rmpp::RmppFlags;
    use roce_wire::sa::{attr, SA_HEADER_LEN};
    use roce_wire::Gid;

    fn gid(last: u8) -> Gid {
        Gid::from_ipv4([198, 18, 0, last].into())
    }

    fn svc(id: u64, name: &str, port: u8) -> ServiceRecord {
        ServiceRecord {
            service_id: id,
            service_gid: gid(port),
            service_p_key: 0xFFFF,
            service_name: ServiceRecord::name_field(name),
            service_key: [7; 16],
            ..ServiceRecord::default()
        }
    }

    const SET_MASK: u64 = 0x1 | 0x2 | 0x4 | 0x10 | 0x20 | 0x40;

    fn mad(method: Method, tid: u64, mask: u64, rec: ServiceRecord) -> Vec<u8> {
        SaMad::request(method, tid, attr::SERVICE_RECORD, mask, SaData::service(rec)).to_bytes().to_vec()
    }

    fn answer(sa: &mut SaResponder, m: &[u8]) -> Vec<SaMad> {
        sa.handle_mad(Requester::new(gid(1), 1), m).iter().map(|b| SaMad::parse(b).unwrap()).collect()
    }

    /// Register two, find by ID, by name and with GetTable, renew, delete, miss.
    #[test]
    fn register_get_delete() {
        let mut sa = SaResponder::new(SaConfig::roce()).unwrap();
        let a = ServiceRecord { service_lease: 60, ..svc(0x1000_0000_0000_0001, "alpha", 2) };
        let b = svc(0x1000_0000_0000_0002, "beta", 3);
        let r = answer(&mut sa, &mad(Method::Set, 1, SET_MASK, a));
        assert_eq!(
            (r[0].header.method, r[0].header.response, r[0].header.status),
            (Method::Get, true, MadStatus::SUCCESS)
        );
        assert_eq!(r[0].sa.attribute_offset, 22);
        // the key is not given back to an untrusted requester
        assert_eq!(r[0].data.as_service().unwrap().service_key, [0; 16]);
        // without ServiceLease in the mask the lease is infinite
        answer(&mut sa, &mad(Method::Set, 2, SET_MASK & !0x10, ServiceRecord { service_lease: 5, ..b }));
        assert_eq!(sa.services().len(), 2);
        assert!(sa.services().records().nth(1).unwrap().is_infinite_lease());

        // Get by ServiceID
        let q = ServiceRecord { service_id: b.service_id, ..ServiceRecord::default() };
        let r = answer(&mut sa, &mad(Method::Get, 3, Sc::SERVICE_ID.0, q));
        assert_eq!(r[0].header.status, MadStatus::SUCCESS);
        assert_eq!(r[0].data.as_service().unwrap().name(), Some("beta"));
        // GetTable by name: one record, RMPP active, offset 22
        let q = ServiceRecord { service_name: ServiceRecord::name_field("alpha"), ..ServiceRecord::default() };
        let r = answer(&mut sa, &mad(Method::GetTable, 4, Sc::SERVICE_NAME.0, q));
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].header.method, r[0].sa.attribute_offset), (Method::GetTable, 22));
        assert!(r[0].rmpp.flags.contains(RmppFlags::ACTIVE | RmppFlags::FIRST | RmppFlags::LAST));
        assert_eq!(r[0].rmpp.data2 as usize, SA_HEADER_LEN + 176);
        assert_eq!(r[0].data.as_service().unwrap().service_id, a.service_id);
        // GetTable of everything: two records over two segments
        let r = answer(&mut sa, &mad(Method::GetTable, 5, 0, ServiceRecord::default()));
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].rmpp.data2 as usize, 2 * 176 + 2 * SA_HEADER_LEN);
        // Get of everything: too many
        let r = answer(&mut sa, &mad(Method::Get, 6, 0, ServiceRecord::default()));
        assert_eq!(r[0].header.status, MadStatus::TOO_MANY_RECORDS);

        // a Set with the same record ID renews, it does not add
        answer(&mut sa, &mad(Method::Set, 7, SET_MASK, a));
        assert_eq!((sa.services().len(), sa.services().stats().renewed), (2, 1));

        // Delete by record ID
        let r = answer(&mut sa, &mad(Method::Delete, 8, 0x7, b));
        assert_eq!((r[0].header.method, r[0].header.status), (Method::Delete, MadStatus::SUCCESS));
        assert_eq!(r[0].data.as_service().unwrap().name(), Some("beta"));
        let r = answer(&mut sa, &mad(Method::Delete, 9, 0x7, b));
        assert_eq!(r[0].header.status, MadStatus::NO_RECORDS);
        let q = ServiceRecord { service_id: b.service_id, ..ServiceRecord::default() };
        let r = answer(&mut sa, &mad(Method::Get, 10, Sc::SERVICE_ID.0, q));
        assert_eq!(r[0].header.status, MadStatus::NO_RECORDS);
        // an empty GetTable is a success with no record
        let r = answer(&mut sa, &mad(Method::GetTable, 11, Sc::SERVICE_ID.0, q));
        assert_eq!((r.len(), r[0].header.status, r[0].sa.attribute_offset), (1, MadStatus::SUCCESS, 0));
        assert_eq!(r[0].rmpp.data2 as usize, SA_HEADER_LEN);
    }

    #[test]
    fn set_needs_id_and_gid() {
        let mut sa = SaResponder::new(SaConfig::roce()).unwrap();
        let r = answer(&mut sa, &mad(Method::Set, 1, Sc::SERVICE_ID.0, svc(1, "x", 2)));
        assert_eq!((r[0].header.method, r[0].header.status), (Method::Get, MadStatus::REQ_INVALID));
        assert!(sa.services().is_empty());
        let r = answer(&mut sa, &mad(Method::Report, 2, SET_MASK, svc(1, "x", 2)));
        assert_eq!(r[0].header.status, MadStatus::UNSUPPORTED_METHOD_ATTR);
        assert_eq!(sa.services().stats().refused, 2);
    }

    #[test]
    fn leases_expire() {
        let mut sa = SaResponder::new(SaConfig::roce()).unwrap();
        sa.handle_time(Duration::from_secs(100));
        let short = ServiceRecord { service_lease: 10, ..svc(1, "short", 2) };
        let forever = ServiceRecord { service_lease: INFINITE_LEASE, ..svc(2, "forever", 2) };
        answer(&mut sa, &mad(Method::Set, 1, SET_MASK, short));
        answer(&mut sa, &mad(Method::Set, 2, SET_MASK, forever));
        assert_eq!(sa.next_expiry(), Some(Duration::from_secs(110)));
        sa.handle_time(Duration::from_millis(109_999));
        assert_eq!(sa.services().len(), 2);
        // renewing restarts the lease
        answer(&mut sa, &mad(Method::Set, 3, SET_MASK, short));
        sa.handle_time(Duration::from_secs(115));
        assert_eq!(sa.services().len(), 2);
        sa.handle_time(Duration::from_secs(120));
        assert_eq!(sa.services().len(), 1);
        assert_eq!(sa.services().stats().expired, 1);
        assert_eq!(sa.next_expiry(), None);
        // a clock that goes back changes nothing
        sa.handle_time(Duration::ZERO);
        assert_eq!(sa.services().len(), 1);
    }
}
