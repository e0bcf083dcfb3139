//! `rdma_resolve_ib_service` and the records it retrieves (`RDMA_USER_CM_QUERY_IB_SERVICE`):
//! an SA ServiceRecord GetTable by service ID and/or name, with the kernel's states, events and
//! errnos [cma.c `rdma_resolve_ib_service`, `cma_resolve_ib_service`,
//! `cma_query_ib_service_handler`; sa_query.c `ib_sa_service_rec_get`,
//! `ib_sa_service_rec_callback`; ucma.c `ucma_query_ib_service` (Linux 6.17)].
//!
//! ADDR_BOUND ▶ ADDRINFO_QUERY ▶ ADDRINFO_RESOLVED (event ADDRINFO_RESOLVED, the first
//! record's GID and service ID become the destination) or back to ADDR_BOUND (event
//! ADDRINFO_ERROR with the errno). From ADDRINFO_RESOLVED `rdma_resolve_route` goes on.
//!
//! This module keeps the query and the records; the calls on the stack are in [`crate::api`],
//! so that this owner does not import the stack that composes it.

use core::time::Duration;
use std::collections::BTreeMap;

use roce_wire::rmpp::RmppType;
use roce_wire::sa::{SaMad, SA_DATA_LEN, SA_DATA_OFFSET, SA_HEADER_LEN};
use roce_wire::service_record::{ComponentMask, ServiceRecord, SERVICE_NAME_LEN, SERVICE_RECORD_LEN};

use crate::id::CmId;

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
#[derive(Clone, Debug, Default)]
pub(crate) struct IbServices {
    recs: BTreeMap<CmId, Vec<ServiceRecord>>,
}

impl IbServices {
    pub(crate) fn forget(&mut self, id: CmId) {
        self.recs.remove(&id);
    }

    /// The records `id` resolved, if it resolved any.
    pub(crate) fn records(&self, id: CmId) -> Option<&[ServiceRecord]> {
        self.recs.get(&id).map(Vec::as_slice)
    }

    /// Whether `id` resolved records already.
    pub(crate) fn contains(&self, id: CmId) -> bool {
        self.recs.contains_key(&id)
    }

    /// Keep the records `id` resolved.
    pub(crate) fn insert(&mut self, id: CmId, recs: Vec<ServiceRecord>) {
        self.recs.insert(id, recs);
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
