//! `rdma_resolve_ib_service` and the records it retrieves (`RDMA_USER_CM_QUERY_IB_SERVICE`):
//! an SA ServiceRecord GetTable by service ID and/or name, with the kernel's states, events and
//! errnos [cma.c `rdma_resolve_ib_service`, `cma_resolve_ib_service`,
//! `cma_query_ib_service_handler`; sa_query.c `ib_sa_service_rec_get`,
//! `ib_sa_service_rec_callback`; ucma.c `ucma_query_ib_service` (Linux 6.17)].
//!
//! ADDR_BOUND ▶ ADDRINFO_QUERY ▶ ADDRINFO_RESOLVED (event ADDRINFO_RESOLVED, the first
//! record's GID and service ID become the destination) or back to ADDR_BOUND (event
//! ADDRINFO_ERROR with the errno). From ADDRINFO_RESOLVED `rdma_resolve_route` goes on.

use core::time::Duration;
use std::collections::BTreeMap;
use std::net::SocketAddr;

use roce_wire::cm::cma_hdr;
use roce_wire::mad::{MadHeader, Method};
use roce_wire::rmpp::RmppType;
use roce_wire::sa::{attr, SaData, SaMad, SA_DATA_LEN, SA_DATA_OFFSET, SA_HEADER_LEN};
use roce_wire::service_record::{ComponentMask, ServiceRecord, SERVICE_NAME_LEN, SERVICE_RECORD_LEN};

use crate::event::{CmEvent, EventKind, EventParam};
use crate::sa_client::TxnOwner;
use crate::{CmId, CmState, Errno, Instant, Stack};

/// The SA query's whole budget the kernel gives it (`cma_resolve_ib_service` passes 2000 ms
/// to `ib_sa_service_rec_get`).
pub const KERNEL_TIMEOUT: Duration = Duration::from_millis(2000);

/// `struct rdma_ucm_ib_service` [rdma_user_cm.h]: what to resolve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IbService {
    /// ServiceID, used with [`IbService::FLAG_ID`].
    pub service_id: u64,
    /// ServiceName (NUL-padded; the kernel copies it with `strscpy`, so byte 63 is always
    /// NUL), used with [`IbService::FLAG_NAME`].
    pub service_name: [u8; SERVICE_NAME_LEN],
    /// `RDMA_USER_CM_IB_SERVICE_FLAG_*`: which of the two the query matches on. With neither,
    /// the component mask is 0 and every registered record matches (as in the kernel).
    pub flags: u32,
}

impl IbService {
    /// `RDMA_USER_CM_IB_SERVICE_FLAG_ID`: match ServiceID.
    pub const FLAG_ID: u32 = 1 << 0;
    /// `RDMA_USER_CM_IB_SERVICE_FLAG_NAME`: match ServiceName.
    pub const FLAG_NAME: u32 = 1 << 1;

    /// Resolve by service ID.
    pub fn by_id(service_id: u64) -> IbService {
        IbService { service_id, service_name: [0; SERVICE_NAME_LEN], flags: Self::FLAG_ID }
    }

    /// Resolve by service name (cut at 63 bytes).
    pub fn by_name(name: &str) -> IbService {
        IbService { service_id: 0, service_name: ServiceRecord::name_field(name), flags: Self::FLAG_NAME }
    }

    /// The SA request the kernel builds: a ServiceRecord with the ID and/or the name, and
    /// the component mask ServiceID (bit 0) and/or ServiceName (bit 6).
    pub fn query(&self) -> (ServiceRecord, ComponentMask) {
        let mut rec = ServiceRecord::default();
        let mut mask = ComponentMask::NONE;
        if self.flags & Self::FLAG_ID != 0 {
            rec.service_id = self.service_id;
            mask |= ComponentMask::SERVICE_ID;
        }
        if self.flags & Self::FLAG_NAME != 0 {
            // strscpy: at most 63 bytes, NUL-terminated.
            rec.service_name[..SERVICE_NAME_LEN - 1].copy_from_slice(&self.service_name[..SERVICE_NAME_LEN - 1]);
            mask |= ComponentMask::SERVICE_NAME;
        }
        (rec, mask)
    }
}

/// The records each id resolved (`id->route.service_recs`), kept until the id is destroyed.
#[derive(Debug, Default)]
pub(crate) struct IbServices {
    recs: BTreeMap<CmId, Vec<ServiceRecord>>,
}

impl IbServices {
    pub(crate) fn forget(&mut self, id: CmId) {
        self.recs.remove(&id);
    }
}

/// The records of one GetTableResp MAD: `(length - 56) / 176` of them, as
/// `ib_sa_service_rec_callback` counts them, the length from an RMPP DATA segment's
/// PayloadLength, none when AttributeOffset is 0 (an SA's empty table). A table of several
/// segments is reassembled by the SA client first ([`records_in`] reads it). An answer whose
/// RMPP header is not a DATA segment (OpenSM's through ibsim's umad shim, which leaves RMPP to a
/// kernel that is not there: type 0, only the Active flag; its empty table's data is not even
/// zeroed) is read by AttributeOffset alone.
pub fn records_of(payload: &[u8]) -> Vec<ServiceRecord> {
    let Ok(m) = SaMad::parse(payload) else { return Vec::new() };
    let len = if m.rmpp.is_active() && m.rmpp.rmpp_type == RmppType::Data {
        // PayloadLength counts the SA header.
        (m.rmpp.data2 as usize).saturating_sub(SA_HEADER_LEN).min(SA_DATA_LEN)
    } else {
        SA_DATA_LEN
    };
    records_in(&payload[SA_DATA_OFFSET..SA_DATA_OFFSET + len], m.sa.attribute_offset)
}

/// The ServiceRecords of an answer's SA data (a reassembled RMPP message's, or one MAD's):
/// one every `attribute_offset` × 8 bytes, those that end within `data`.
pub fn records_in(data: &[u8], attribute_offset: u16) -> Vec<ServiceRecord> {
    let stride = usize::from(attribute_offset) * 8;
    if stride < SERVICE_RECORD_LEN {
        return Vec::new();
    }
    (0..)
        .map(|i| i * stride)
        .take_while(|at| at + SERVICE_RECORD_LEN <= data.len())
        .filter_map(|at| ServiceRecord::parse_bytes(&data[at..]).ok())
        .collect()
}

impl Stack {
    /// `rdma_resolve_ib_service`: from ADDR_BOUND on a device (a specific address bound) to
    /// ADDRINFO_QUERY, then an SA SubnAdmGetTable(ServiceRecord) by `service`; EINVAL in any
    /// other state or without a device; EOPNOTSUPP without an SA (the kernel's answer for a port
    /// without `rdma_cap_ib_sa`, which on a kernel is every RoCE port: see spec/api.md).
    /// `timeout` is the query's whole budget ([`KERNEL_TIMEOUT`] is the kernel's fixed one),
    /// retransmitted as [`crate::SaTiming`] says. The answer comes as ADDRINFO_RESOLVED or
    /// ADDRINFO_ERROR (status ETIMEDOUT, EINVAL for an SA error status, ENODATA for no record).
    pub fn resolve_ib_service(
        &mut self,
        now: Instant,
        id: CmId,
        service: &IbService,
        timeout: Duration,
    ) -> Result<(), Errno> {
        let r = self.ids.get(&id).ok_or(Errno::ENOENT)?;
        if !r.has_device || r.state != CmState::AddrBound {
            return Err(Errno::EINVAL);
        }
        if self.cfg.sa.is_none() && self.cfg.sa_transport != crate::config::SaTransport::External {
            return Err(Errno::EOPNOTSUPP);
        }
        if timeout.is_zero() {
            return Err(Errno::EINVAL);
        }
        let (rec, mask) = service.query();
        let mad = SaMad::request(Method::GetTable, 0, attr::SERVICE_RECORD, mask.0, SaData::service(rec));
        self.ids.set_state(id, CmState::AddrInfoQuery);
        self.sa.start_with_timeout(now, mad, TxnOwner::Service(id), timeout);
        Ok(())
    }

    /// `RDMA_USER_CM_QUERY_IB_SERVICE`: the records the last resolution returned (the first
    /// is the destination); ENODATA before one succeeded, ENOENT for an unknown id.
    pub fn query_ib_service(&self, id: CmId) -> Result<&[ServiceRecord], Errno> {
        self.ids.get(&id).ok_or(Errno::ENOENT)?;
        self.ib_services.recs.get(&id).map(Vec::as_slice).ok_or(Errno::ENODATA)
    }

    /// The SA answered a resolution [`cma_query_ib_service_handler`]: one MAD, or the whole
    /// reassembled RMPP message (`table`), every record of which the kernel keeps.
    pub(crate) fn ib_service_answered(
        &mut self,
        id: CmId,
        h: &MadHeader,
        payload: &[u8],
        table: Option<&crate::rmpp_recv::Reassembly>,
    ) {
        // Any SA status: -EINVAL (sa_query.c `recv_handler`); no record: -ENODATA
        // (`ib_sa_service_rec_callback`).
        if h.status.0 != 0 {
            return self.ib_service_failed(id, Errno::EINVAL);
        }
        let recs = match table {
            Some(t) => records_in(&t.data, SaMad::parse(&t.first).map_or(0, |m| m.sa.attribute_offset)),
            None => records_of(payload),
        };
        let Some(first) = recs.first().copied() else {
            return self.ib_service_failed(id, Errno::ENODATA);
        };
        if self.ib_services.recs.contains_key(&id) {
            return self.ib_service_failed(id, Errno::EALREADY);
        }
        let Some(r) = self.ids.get_mut(&id) else { return };
        if r.state != CmState::AddrInfoQuery {
            return;
        }
        // The destination: the record's GID (an IP address on RoCE) and, for an RDMA-CM IP
        // service ID, its port (the kernel sets an AF_IB address with GID, P_Key and SID).
        let port =
            if cma_hdr::is_ip_service_id(first.service_id) { cma_hdr::split_service_id(first.service_id).1 } else { 0 };
        r.dst = Some(SocketAddr::new(first.service_gid.to_ip(), port));
        r.state = CmState::AddrInfoResolved;
        self.ib_services.recs.insert(id, recs);
        self.push_event(CmEvent {
            id,
            listen_id: None,
            kind: EventKind::AddrInfoResolved,
            status: 0,
            param: EventParam::None,
        });
    }

    /// The resolution failed: back to ADDR_BOUND with ADDRINFO_ERROR and the errno.
    pub(crate) fn ib_service_failed(&mut self, id: CmId, err: Errno) {
        let Some(r) = self.ids.get_mut(&id) else { return };
        if r.state != CmState::AddrInfoQuery {
            return;
        }
        r.state = CmState::AddrBound;
        self.push_event(CmEvent {
            id,
            listen_id: None,
            kind: EventKind::AddrInfoError,
            status: err.status(),
            param: EventParam::None,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_query() {
        let (rec, mask) = IbService::by_id(0x1234).query();
        assert_eq!((rec.service_id, mask), (0x1234, ComponentMask::SERVICE_ID));
        let (rec, mask) = IbService::by_name("svc").query();
        assert_eq!((rec.name(), mask), (Some("svc"), ComponentMask::SERVICE_NAME));
        let both = IbService { flags: IbService::FLAG_ID | IbService::FLAG_NAME, ..IbService::by_name("x") };
        assert_eq!(both.query().1 .0, 0x41);
        // strscpy keeps byte 63 a NUL whatever the caller put there
        let full = IbService { service_name: [b'a'; 64], ..IbService::by_name("") };
        assert_eq!(full.query().0.service_name[63], 0);
        assert_eq!(IbService { flags: 0, ..full }.query().1, ComponentMask::NONE);
    }
}
