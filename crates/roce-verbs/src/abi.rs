//! `#[repr(C)]` twins of the structures, unions and constants that Debian 12's programs see
//! through `<infiniband/verbs.h>`, `<infiniband/sa.h>`, `<infiniband/verbs_api.h>` and
//! `<rdma/rdma_cma.h>` (rdma-core 44.0-2, x86_64).
//!
//! Names are the C names. Every size is `const`-asserted here and every field offset is
//! compared with gcc's `offsetof` on the real headers by `tests/layout.rs` (+ `tests/layout.c`).
//!
//! C enums are `u32`/`i32` type aliases (gcc gives an enum without negative values the type
//! `unsigned int`, one with a negative value `int`) plus `pub const`s: a value arriving from C
//! is never turned into a Rust `enum`.
//!
//! Anonymous C unions have no name to mirror; they are rendered so:
//! * `ibv_wc.{imm_data, invalidated_rkey}` and `ibv_send_wr.{imm_data, invalidate_rkey}`
//!   (two `u32` at the same place): one `u32` field `imm_data`;
//! * `ibv_send_wr.{bind_mw, tso}`: field `bind_mw_tso` of union [`ibv_send_wr_bind_mw_tso`];
//! * `rdma_addr.{src_addr, src_sin, src_sin6, src_storage}` (and `dst_*`): fields `src` and
//!   `dst` of union [`rdma_sockaddr`] with members `addr`, `sin`, `sin6`, `storage`.
//!
//! Named C unions get a type `<struct>_<field>`: `ibv_send_wr.wr` is [`ibv_send_wr_wr`]
//! (members `rdma`, `atomic`, `ud`), `ibv_send_wr.qp_type` is [`ibv_send_wr_qp_type`]
//! (member `xrc`), `ibv_async_event.element` is [`ibv_async_event_element`],
//! `rdma_cm_event.param` is [`rdma_cm_event_param`], `rdma_addr.addr` is [`rdma_addr_addr`].
#![allow(missing_docs)]

use core::ffi::{c_char, c_int, c_uint, c_void};
use core::marker::{PhantomData, PhantomPinned};
use core::mem::size_of;

use libc::{pthread_cond_t, pthread_mutex_t, sockaddr, sockaddr_in, sockaddr_in6, sockaddr_storage, socklen_t};

/// A function pointer slot whose signature the stack never calls through (C placeholder).
pub type ibv_opaque_fn = Option<unsafe extern "C" fn()>;

/// `(void *)UINTPTR_MAX`: `ibv_context.abi_compat` of a context embedded in a `verbs_context`.
pub const __VERBS_ABI_IS_EXTENDED: usize = usize::MAX;

// ---------------------------------------------------------------------------------------------
// Opaque types only ever seen through pointers.

/// `struct ibv_wq` (opaque here: only pointed to from `ibv_async_event`).
#[repr(C)]
pub struct ibv_wq {
    _private: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

/// `struct ibv_rwq_ind_table` (opaque here: only pointed to from `ibv_qp_init_attr_ex`).
#[repr(C)]
pub struct ibv_rwq_ind_table {
    _private: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

// ---------------------------------------------------------------------------------------------
// GIDs

/// `union ibv_gid::global`: the GID as subnet prefix and interface id (big-endian values).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_gid_global {
    pub subnet_prefix: u64,
    pub interface_id: u64,
}

/// `union ibv_gid`: a 16-byte GID (an IPv6 address on RoCE).
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_gid {
    pub raw: [u8; 16],
    pub global: ibv_gid_global,
}

/// `enum ibv_gid_type` (stored as `uint32_t gid_type` in `ibv_gid_entry`).
pub type ibv_gid_type = u32;
pub const IBV_GID_TYPE_IB: ibv_gid_type = 0;
pub const IBV_GID_TYPE_ROCE_V1: ibv_gid_type = 1;
pub const IBV_GID_TYPE_ROCE_V2: ibv_gid_type = 2;

/// `struct ibv_gid_entry`: one GID table entry (`ibv_query_gid_ex`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_gid_entry {
    pub gid: ibv_gid,
    pub gid_index: u32,
    pub port_num: u32,
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

// ---------------------------------------------------------------------------------------------
// Enumerations

/// `enum ibv_node_type`.
pub type ibv_node_type = i32;
pub const IBV_NODE_UNKNOWN: ibv_node_type = -1;
pub const IBV_NODE_CA: ibv_node_type = 1;
pub const IBV_NODE_SWITCH: ibv_node_type = 2;
pub const IBV_NODE_ROUTER: ibv_node_type = 3;
pub const IBV_NODE_RNIC: ibv_node_type = 4;
pub const IBV_NODE_USNIC: ibv_node_type = 5;
pub const IBV_NODE_USNIC_UDP: ibv_node_type = 6;
pub const IBV_NODE_UNSPECIFIED: ibv_node_type = 7;

/// `enum ibv_transport_type`.
pub type ibv_transport_type = i32;
pub const IBV_TRANSPORT_UNKNOWN: ibv_transport_type = -1;
pub const IBV_TRANSPORT_IB: ibv_transport_type = 0;
pub const IBV_TRANSPORT_IWARP: ibv_transport_type = 1;
pub const IBV_TRANSPORT_USNIC: ibv_transport_type = 2;
pub const IBV_TRANSPORT_USNIC_UDP: ibv_transport_type = 3;
pub const IBV_TRANSPORT_UNSPECIFIED: ibv_transport_type = 4;

/// `enum ibv_atomic_cap`.
pub type ibv_atomic_cap = u32;
pub const IBV_ATOMIC_NONE: ibv_atomic_cap = 0;
pub const IBV_ATOMIC_HCA: ibv_atomic_cap = 1;
pub const IBV_ATOMIC_GLOB: ibv_atomic_cap = 2;

/// `enum ibv_mtu`.
pub type ibv_mtu = u32;
pub const IBV_MTU_256: ibv_mtu = 1;
pub const IBV_MTU_512: ibv_mtu = 2;
pub const IBV_MTU_1024: ibv_mtu = 3;
pub const IBV_MTU_2048: ibv_mtu = 4;
pub const IBV_MTU_4096: ibv_mtu = 5;

/// `enum ibv_port_state`.
pub type ibv_port_state = u32;
pub const IBV_PORT_NOP: ibv_port_state = 0;
pub const IBV_PORT_DOWN: ibv_port_state = 1;
pub const IBV_PORT_INIT: ibv_port_state = 2;
pub const IBV_PORT_ARMED: ibv_port_state = 3;
pub const IBV_PORT_ACTIVE: ibv_port_state = 4;
pub const IBV_PORT_ACTIVE_DEFER: ibv_port_state = 5;

/// `ibv_port_attr.link_layer` values (anonymous enum).
pub const IBV_LINK_LAYER_UNSPECIFIED: u8 = 0;
pub const IBV_LINK_LAYER_INFINIBAND: u8 = 1;
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;

/// `enum ibv_port_cap_flags` (the ones a RoCE port reports).
pub const IBV_PORT_CM_SUP: u32 = 1 << 16;
pub const IBV_PORT_IP_BASED_GIDS: u32 = 1 << 26;

/// `ibv_device.name` and friends (anonymous enum).
pub const IBV_SYSFS_NAME_MAX: usize = 64;
pub const IBV_SYSFS_PATH_MAX: usize = 256;

/// `enum ibv_event_type`.
pub type ibv_event_type = u32;
pub const IBV_EVENT_CQ_ERR: ibv_event_type = 0;
pub const IBV_EVENT_QP_FATAL: ibv_event_type = 1;
pub const IBV_EVENT_QP_REQ_ERR: ibv_event_type = 2;
pub const IBV_EVENT_QP_ACCESS_ERR: ibv_event_type = 3;
pub const IBV_EVENT_COMM_EST: ibv_event_type = 4;
pub const IBV_EVENT_SQ_DRAINED: ibv_event_type = 5;
pub const IBV_EVENT_PATH_MIG: ibv_event_type = 6;
pub const IBV_EVENT_PATH_MIG_ERR: ibv_event_type = 7;
pub const IBV_EVENT_DEVICE_FATAL: ibv_event_type = 8;
pub const IBV_EVENT_PORT_ACTIVE: ibv_event_type = 9;
pub const IBV_EVENT_PORT_ERR: ibv_event_type = 10;
pub const IBV_EVENT_LID_CHANGE: ibv_event_type = 11;
pub const IBV_EVENT_PKEY_CHANGE: ibv_event_type = 12;
pub const IBV_EVENT_SM_CHANGE: ibv_event_type = 13;
pub const IBV_EVENT_SRQ_ERR: ibv_event_type = 14;
pub const IBV_EVENT_SRQ_LIMIT_REACHED: ibv_event_type = 15;
pub const IBV_EVENT_QP_LAST_WQE_REACHED: ibv_event_type = 16;
pub const IBV_EVENT_CLIENT_REREGISTER: ibv_event_type = 17;
pub const IBV_EVENT_GID_CHANGE: ibv_event_type = 18;
pub const IBV_EVENT_WQ_FATAL: ibv_event_type = 19;

/// `enum ibv_wc_status`.
pub type ibv_wc_status = u32;
pub const IBV_WC_SUCCESS: ibv_wc_status = 0;
pub const IBV_WC_LOC_LEN_ERR: ibv_wc_status = 1;
pub const IBV_WC_LOC_QP_OP_ERR: ibv_wc_status = 2;
pub const IBV_WC_LOC_EEC_OP_ERR: ibv_wc_status = 3;
pub const IBV_WC_LOC_PROT_ERR: ibv_wc_status = 4;
pub const IBV_WC_WR_FLUSH_ERR: ibv_wc_status = 5;
pub const IBV_WC_MW_BIND_ERR: ibv_wc_status = 6;
pub const IBV_WC_BAD_RESP_ERR: ibv_wc_status = 7;
pub const IBV_WC_LOC_ACCESS_ERR: ibv_wc_status = 8;
pub const IBV_WC_REM_INV_REQ_ERR: ibv_wc_status = 9;
pub const IBV_WC_REM_ACCESS_ERR: ibv_wc_status = 10;
pub const IBV_WC_REM_OP_ERR: ibv_wc_status = 11;
pub const IBV_WC_RETRY_EXC_ERR: ibv_wc_status = 12;
pub const IBV_WC_RNR_RETRY_EXC_ERR: ibv_wc_status = 13;
pub const IBV_WC_LOC_RDD_VIOL_ERR: ibv_wc_status = 14;
pub const IBV_WC_REM_INV_RD_REQ_ERR: ibv_wc_status = 15;
pub const IBV_WC_REM_ABORT_ERR: ibv_wc_status = 16;
pub const IBV_WC_INV_EECN_ERR: ibv_wc_status = 17;
pub const IBV_WC_INV_EEC_STATE_ERR: ibv_wc_status = 18;
pub const IBV_WC_FATAL_ERR: ibv_wc_status = 19;
pub const IBV_WC_RESP_TIMEOUT_ERR: ibv_wc_status = 20;
pub const IBV_WC_GENERAL_ERR: ibv_wc_status = 21;
pub const IBV_WC_TM_ERR: ibv_wc_status = 22;
pub const IBV_WC_TM_RNDV_INCOMPLETE: ibv_wc_status = 23;

/// `enum ibv_wc_opcode`.
pub type ibv_wc_opcode = u32;
pub const IBV_WC_SEND: ibv_wc_opcode = 0;
pub const IBV_WC_RDMA_WRITE: ibv_wc_opcode = 1;
pub const IBV_WC_RDMA_READ: ibv_wc_opcode = 2;
pub const IBV_WC_COMP_SWAP: ibv_wc_opcode = 3;
pub const IBV_WC_FETCH_ADD: ibv_wc_opcode = 4;
pub const IBV_WC_BIND_MW: ibv_wc_opcode = 5;
pub const IBV_WC_LOCAL_INV: ibv_wc_opcode = 6;
pub const IBV_WC_TSO: ibv_wc_opcode = 7;
/// `IBV_WC_FLUSH` (rdma-core 45 on; v44, whose ABI this is, has no FLUSH verb).
pub const IBV_WC_FLUSH: ibv_wc_opcode = 8;
pub const IBV_WC_ATOMIC_WRITE: ibv_wc_opcode = 9;
pub const IBV_WC_RECV: ibv_wc_opcode = 1 << 7;
pub const IBV_WC_RECV_RDMA_WITH_IMM: ibv_wc_opcode = 129;
pub const IBV_WC_TM_ADD: ibv_wc_opcode = 130;
pub const IBV_WC_TM_DEL: ibv_wc_opcode = 131;
pub const IBV_WC_TM_SYNC: ibv_wc_opcode = 132;
pub const IBV_WC_TM_RECV: ibv_wc_opcode = 133;
pub const IBV_WC_TM_NO_TAG: ibv_wc_opcode = 134;
pub const IBV_WC_DRIVER1: ibv_wc_opcode = 135;
pub const IBV_WC_DRIVER2: ibv_wc_opcode = 136;
pub const IBV_WC_DRIVER3: ibv_wc_opcode = 137;

/// `enum ibv_wc_flags` (`ibv_wc.wc_flags`).
pub const IBV_WC_GRH: c_uint = 1 << 0;
pub const IBV_WC_WITH_IMM: c_uint = 1 << 1;
pub const IBV_WC_IP_CSUM_OK_SHIFT: c_uint = 2;
pub const IBV_WC_IP_CSUM_OK: c_uint = 1 << 2;
pub const IBV_WC_WITH_INV: c_uint = 1 << 3;
pub const IBV_WC_TM_SYNC_REQ: c_uint = 1 << 4;
pub const IBV_WC_TM_MATCH: c_uint = 1 << 5;
pub const IBV_WC_TM_DATA_VALID: c_uint = 1 << 6;

/// `enum ibv_access_flags`.
pub type ibv_access_flags = u32;
pub const IBV_ACCESS_LOCAL_WRITE: ibv_access_flags = 1;
pub const IBV_ACCESS_REMOTE_WRITE: ibv_access_flags = 1 << 1;
pub const IBV_ACCESS_REMOTE_READ: ibv_access_flags = 1 << 2;
pub const IBV_ACCESS_REMOTE_ATOMIC: ibv_access_flags = 1 << 3;
pub const IBV_ACCESS_MW_BIND: ibv_access_flags = 1 << 4;
pub const IBV_ACCESS_ZERO_BASED: ibv_access_flags = 1 << 5;
pub const IBV_ACCESS_ON_DEMAND: ibv_access_flags = 1 << 6;
pub const IBV_ACCESS_HUGETLB: ibv_access_flags = 1 << 7;
/// `IB_UVERBS_ACCESS_OPTIONAL_FIRST` (`<infiniband/ib_user_ioctl_verbs.h>`).
pub const IBV_ACCESS_OPTIONAL_FIRST: ibv_access_flags = 1 << 20;
pub const IBV_ACCESS_RELAXED_ORDERING: ibv_access_flags = IBV_ACCESS_OPTIONAL_FIRST;
/// `IB_UVERBS_ACCESS_OPTIONAL_LAST` (no `IBV_` alias in the headers).
pub const IB_UVERBS_ACCESS_OPTIONAL_LAST: ibv_access_flags = 1 << 29;
/// Access bits 20..=29, which a provider may ignore (`IB_UVERBS_ACCESS_OPTIONAL_RANGE`).
pub const IBV_ACCESS_OPTIONAL_RANGE: ibv_access_flags =
    ((IB_UVERBS_ACCESS_OPTIONAL_LAST << 1) - 1) & !(IBV_ACCESS_OPTIONAL_FIRST - 1);

/// `enum ibv_mw_type`.
pub type ibv_mw_type = u32;
pub const IBV_MW_TYPE_1: ibv_mw_type = 1;
pub const IBV_MW_TYPE_2: ibv_mw_type = 2;

/// `enum ibv_srq_attr_mask`.
pub const IBV_SRQ_MAX_WR: c_int = 1 << 0;
pub const IBV_SRQ_LIMIT: c_int = 1 << 1;

/// `enum ibv_srq_type`.
pub type ibv_srq_type = u32;
pub const IBV_SRQT_BASIC: ibv_srq_type = 0;
pub const IBV_SRQT_XRC: ibv_srq_type = 1;
pub const IBV_SRQT_TM: ibv_srq_type = 2;

/// `enum ibv_srq_init_attr_mask`.
pub const IBV_SRQ_INIT_ATTR_TYPE: u32 = 1 << 0;
pub const IBV_SRQ_INIT_ATTR_PD: u32 = 1 << 1;
pub const IBV_SRQ_INIT_ATTR_XRCD: u32 = 1 << 2;
pub const IBV_SRQ_INIT_ATTR_CQ: u32 = 1 << 3;
pub const IBV_SRQ_INIT_ATTR_TM: u32 = 1 << 4;
pub const IBV_SRQ_INIT_ATTR_RESERVED: u32 = 1 << 5;

/// `enum ibv_xrcd_init_attr_mask`.
pub const IBV_XRCD_INIT_ATTR_FD: u32 = 1 << 0;
pub const IBV_XRCD_INIT_ATTR_OFLAGS: u32 = 1 << 1;
pub const IBV_XRCD_INIT_ATTR_RESERVED: u32 = 1 << 2;

/// `IBV_DEVICE_XRC` of `enum ibv_device_cap_flags`.
pub const IBV_DEVICE_XRC: u32 = 1 << 20;

/// `enum ibv_qp_type`.
pub type ibv_qp_type = u32;
pub const IBV_QPT_RC: ibv_qp_type = 2;
pub const IBV_QPT_UC: ibv_qp_type = 3;
pub const IBV_QPT_UD: ibv_qp_type = 4;
pub const IBV_QPT_RAW_PACKET: ibv_qp_type = 8;
pub const IBV_QPT_XRC_SEND: ibv_qp_type = 9;
pub const IBV_QPT_XRC_RECV: ibv_qp_type = 10;
pub const IBV_QPT_DRIVER: ibv_qp_type = 0xff;

/// `enum ibv_qp_init_attr_mask` (`ibv_qp_init_attr_ex.comp_mask`).
pub const IBV_QP_INIT_ATTR_PD: u32 = 1 << 0;
pub const IBV_QP_INIT_ATTR_XRCD: u32 = 1 << 1;
pub const IBV_QP_INIT_ATTR_CREATE_FLAGS: u32 = 1 << 2;
pub const IBV_QP_INIT_ATTR_MAX_TSO_HEADER: u32 = 1 << 3;
pub const IBV_QP_INIT_ATTR_IND_TABLE: u32 = 1 << 4;
pub const IBV_QP_INIT_ATTR_RX_HASH: u32 = 1 << 5;
pub const IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;

/// `enum ibv_qp_attr_mask`.
pub type ibv_qp_attr_mask = u32;
pub const IBV_QP_STATE: ibv_qp_attr_mask = 1 << 0;
pub const IBV_QP_CUR_STATE: ibv_qp_attr_mask = 1 << 1;
pub const IBV_QP_EN_SQD_ASYNC_NOTIFY: ibv_qp_attr_mask = 1 << 2;
pub const IBV_QP_ACCESS_FLAGS: ibv_qp_attr_mask = 1 << 3;
pub const IBV_QP_PKEY_INDEX: ibv_qp_attr_mask = 1 << 4;
pub const IBV_QP_PORT: ibv_qp_attr_mask = 1 << 5;
pub const IBV_QP_QKEY: ibv_qp_attr_mask = 1 << 6;
pub const IBV_QP_AV: ibv_qp_attr_mask = 1 << 7;
pub const IBV_QP_PATH_MTU: ibv_qp_attr_mask = 1 << 8;
pub const IBV_QP_TIMEOUT: ibv_qp_attr_mask = 1 << 9;
pub const IBV_QP_RETRY_CNT: ibv_qp_attr_mask = 1 << 10;
pub const IBV_QP_RNR_RETRY: ibv_qp_attr_mask = 1 << 11;
pub const IBV_QP_RQ_PSN: ibv_qp_attr_mask = 1 << 12;
pub const IBV_QP_MAX_QP_RD_ATOMIC: ibv_qp_attr_mask = 1 << 13;
pub const IBV_QP_ALT_PATH: ibv_qp_attr_mask = 1 << 14;
pub const IBV_QP_MIN_RNR_TIMER: ibv_qp_attr_mask = 1 << 15;
pub const IBV_QP_SQ_PSN: ibv_qp_attr_mask = 1 << 16;
pub const IBV_QP_MAX_DEST_RD_ATOMIC: ibv_qp_attr_mask = 1 << 17;
pub const IBV_QP_PATH_MIG_STATE: ibv_qp_attr_mask = 1 << 18;
pub const IBV_QP_CAP: ibv_qp_attr_mask = 1 << 19;
pub const IBV_QP_DEST_QPN: ibv_qp_attr_mask = 1 << 20;
pub const IBV_QP_RATE_LIMIT: ibv_qp_attr_mask = 1 << 25;

/// `enum ibv_qp_state`.
pub type ibv_qp_state = u32;
pub const IBV_QPS_RESET: ibv_qp_state = 0;
pub const IBV_QPS_INIT: ibv_qp_state = 1;
pub const IBV_QPS_RTR: ibv_qp_state = 2;
pub const IBV_QPS_RTS: ibv_qp_state = 3;
pub const IBV_QPS_SQD: ibv_qp_state = 4;
pub const IBV_QPS_SQE: ibv_qp_state = 5;
pub const IBV_QPS_ERR: ibv_qp_state = 6;
pub const IBV_QPS_UNKNOWN: ibv_qp_state = 7;

/// `enum ibv_mig_state`.
pub type ibv_mig_state = u32;
pub const IBV_MIG_MIGRATED: ibv_mig_state = 0;
pub const IBV_MIG_REARM: ibv_mig_state = 1;
pub const IBV_MIG_ARMED: ibv_mig_state = 2;

/// `enum ibv_wr_opcode`.
pub type ibv_wr_opcode = u32;
pub const IBV_WR_RDMA_WRITE: ibv_wr_opcode = 0;
pub const IBV_WR_RDMA_WRITE_WITH_IMM: ibv_wr_opcode = 1;
pub const IBV_WR_SEND: ibv_wr_opcode = 2;
pub const IBV_WR_SEND_WITH_IMM: ibv_wr_opcode = 3;
pub const IBV_WR_RDMA_READ: ibv_wr_opcode = 4;
pub const IBV_WR_ATOMIC_CMP_AND_SWP: ibv_wr_opcode = 5;
pub const IBV_WR_ATOMIC_FETCH_AND_ADD: ibv_wr_opcode = 6;
pub const IBV_WR_LOCAL_INV: ibv_wr_opcode = 7;
pub const IBV_WR_BIND_MW: ibv_wr_opcode = 8;
pub const IBV_WR_SEND_WITH_INV: ibv_wr_opcode = 9;
pub const IBV_WR_TSO: ibv_wr_opcode = 10;
pub const IBV_WR_DRIVER1: ibv_wr_opcode = 11;
/// `IBV_WR_FLUSH` (rdma-core 45 on).
pub const IBV_WR_FLUSH: ibv_wr_opcode = 14;
pub const IBV_WR_ATOMIC_WRITE: ibv_wr_opcode = 15;

/// `enum ibv_send_flags`.
pub type ibv_send_flags = u32;
pub const IBV_SEND_FENCE: ibv_send_flags = 1 << 0;
pub const IBV_SEND_SIGNALED: ibv_send_flags = 1 << 1;
pub const IBV_SEND_SOLICITED: ibv_send_flags = 1 << 2;
pub const IBV_SEND_INLINE: ibv_send_flags = 1 << 3;
pub const IBV_SEND_IP_CSUM: ibv_send_flags = 1 << 4;

/// `enum rdma_cm_event_type`.
pub type rdma_cm_event_type = u32;
pub const RDMA_CM_EVENT_ADDR_RESOLVED: rdma_cm_event_type = 0;
pub const RDMA_CM_EVENT_ADDR_ERROR: rdma_cm_event_type = 1;
pub const RDMA_CM_EVENT_ROUTE_RESOLVED: rdma_cm_event_type = 2;
pub const RDMA_CM_EVENT_ROUTE_ERROR: rdma_cm_event_type = 3;
pub const RDMA_CM_EVENT_CONNECT_REQUEST: rdma_cm_event_type = 4;
pub const RDMA_CM_EVENT_CONNECT_RESPONSE: rdma_cm_event_type = 5;
pub const RDMA_CM_EVENT_CONNECT_ERROR: rdma_cm_event_type = 6;
pub const RDMA_CM_EVENT_UNREACHABLE: rdma_cm_event_type = 7;
pub const RDMA_CM_EVENT_REJECTED: rdma_cm_event_type = 8;
pub const RDMA_CM_EVENT_ESTABLISHED: rdma_cm_event_type = 9;
pub const RDMA_CM_EVENT_DISCONNECTED: rdma_cm_event_type = 10;
pub const RDMA_CM_EVENT_DEVICE_REMOVAL: rdma_cm_event_type = 11;
pub const RDMA_CM_EVENT_MULTICAST_JOIN: rdma_cm_event_type = 12;
pub const RDMA_CM_EVENT_MULTICAST_ERROR: rdma_cm_event_type = 13;
pub const RDMA_CM_EVENT_ADDR_CHANGE: rdma_cm_event_type = 14;
pub const RDMA_CM_EVENT_TIMEWAIT_EXIT: rdma_cm_event_type = 15;

/// `enum rdma_port_space`.
pub type rdma_port_space = u32;
pub const RDMA_PS_IPOIB: rdma_port_space = 0x0002;
pub const RDMA_PS_TCP: rdma_port_space = 0x0106;
pub const RDMA_PS_UDP: rdma_port_space = 0x0111;
pub const RDMA_PS_IB: rdma_port_space = 0x013F;

/// `RDMA_IB_IP_*` (service id composition, `#define`s).
pub const RDMA_IB_IP_PS_MASK: u64 = 0xFFFF_FFFF_FFFF_0000;
pub const RDMA_IB_IP_PORT_MASK: u64 = 0x0000_0000_0000_FFFF;
pub const RDMA_IB_IP_PS_TCP: u64 = 0x0000_0000_0106_0000;
pub const RDMA_IB_IP_PS_UDP: u64 = 0x0000_0000_0111_0000;
pub const RDMA_IB_PS_IB: u64 = 0x0000_0000_013F_0000;

/// The Q_Key of `RDMA_PS_UDP` ids (`#define RDMA_UDP_QKEY`).
pub const RDMA_UDP_QKEY: u32 = 0x0123_4567;

/// `RDMA_MAX_RESP_RES` / `RDMA_MAX_INIT_DEPTH` (anonymous enum).
pub const RDMA_MAX_RESP_RES: u8 = 0xFF;
pub const RDMA_MAX_INIT_DEPTH: u8 = 0xFF;

/// `rdma_set_option` levels.
pub const RDMA_OPTION_ID: c_int = 0;
pub const RDMA_OPTION_IB: c_int = 1;
/// `rdma_set_option` names at level `RDMA_OPTION_ID`.
pub const RDMA_OPTION_ID_TOS: c_int = 0;
pub const RDMA_OPTION_ID_REUSEADDR: c_int = 1;
pub const RDMA_OPTION_ID_AFONLY: c_int = 2;
pub const RDMA_OPTION_ID_ACK_TIMEOUT: c_int = 3;
/// `rdma_set_option` name at level `RDMA_OPTION_IB`.
pub const RDMA_OPTION_IB_PATH: c_int = 1;

/// `rdma_addrinfo.ai_flags` bits (`#define RAI_*`).
pub const RAI_PASSIVE: c_int = 0x0000_0001;
pub const RAI_NUMERICHOST: c_int = 0x0000_0002;
pub const RAI_NOROUTE: c_int = 0x0000_0004;
pub const RAI_FAMILY: c_int = 0x0000_0008;

/// `enum rdma_cm_join_mc_attr_mask` (`rdma_cm_join_mc_attr_ex.comp_mask`).
pub type rdma_cm_join_mc_attr_mask = u32;
pub const RDMA_CM_JOIN_MC_ATTR_ADDRESS: rdma_cm_join_mc_attr_mask = 1 << 0;
pub const RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS: rdma_cm_join_mc_attr_mask = 1 << 1;
pub const RDMA_CM_JOIN_MC_ATTR_RESERVED: rdma_cm_join_mc_attr_mask = 1 << 2;

/// `enum rdma_cm_mc_join_flags` (`rdma_cm_join_mc_attr_ex.join_flags`).
pub type rdma_cm_mc_join_flags = u32;
pub const RDMA_MC_JOIN_FLAG_FULLMEMBER: rdma_cm_mc_join_flags = 0;
pub const RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER: rdma_cm_mc_join_flags = 1;
pub const RDMA_MC_JOIN_FLAG_RESERVED: rdma_cm_mc_join_flags = 2;

// ---------------------------------------------------------------------------------------------
// Device and context

/// `struct _ibv_device_ops`: obsolete, never called, kept for the layout of `ibv_device`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct _ibv_device_ops {
    pub _dummy1: Option<unsafe extern "C" fn(device: *mut ibv_device, cmd_fd: c_int) -> *mut ibv_context>,
    pub _dummy2: Option<unsafe extern "C" fn(context: *mut ibv_context)>,
}

/// `struct ibv_device`: one entry of `ibv_get_device_list`.
#[repr(C)]
pub struct ibv_device {
    pub _ops: _ibv_device_ops,
    pub node_type: ibv_node_type,
    pub transport_type: ibv_transport_type,
    pub name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_path: [c_char; IBV_SYSFS_PATH_MAX],
    pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
}

/// `struct ibv_context_ops`: the table the inline `ibv_post_send` & co. call through.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_context_ops {
    pub _compat_query_device:
        Option<unsafe extern "C" fn(context: *mut ibv_context, device_attr: *mut ibv_device_attr) -> c_int>,
    /// The last argument is a `struct _compat_ibv_port_attr *`.
    pub _compat_query_port:
        Option<unsafe extern "C" fn(context: *mut ibv_context, port_num: u8, port_attr: *mut c_void) -> c_int>,
    pub _compat_alloc_pd: Option<unsafe extern "C" fn() -> *mut c_void>,
    pub _compat_dealloc_pd: Option<unsafe extern "C" fn() -> *mut c_void>,
    pub _compat_reg_mr: Option<unsafe extern "C" fn() -> *mut c_void>,
    pub _compat_rereg_mr: Option<unsafe extern "C" fn() -> *mut c_void>,
    pub _compat_dereg_mr: Option<unsafe extern "C" fn() -> *mut c_void>,
    pub alloc_mw: Option<unsafe extern "C" fn(pd: *mut ibv_pd, type_: ibv_mw_type) -> *mut ibv_mw>,
    /// The last argument is a `struct ibv_mw_bind *`.
    pub bind_mw: Option<unsafe extern "C" fn(qp: *mut ibv_qp, mw: *mut ibv_mw, mw_bind: *mut c_void) -> c_int>,
    pub dealloc_mw: Option<unsafe extern "C" fn(mw: *mut ibv_mw) -> c_int>,
    pub _compat_create_cq: Option<unsafe extern "C" fn() -> *mut c_void>,
    pub poll_cq: Option<unsafe extern "C" fn(cq: *mut ibv_cq, num_entries: c_int, wc: *mut ibv_wc) -> c_int>,
    pub req_notify_cq: Option<unsafe extern "C" fn(cq: *mut ibv_cq, solicited_only: c_int) -> c_int>,
    pub _compat_cq_event: Option<unsafe extern "C" fn() -> *mut c_void>,
    pub _compat_resize_cq: Option<unsafe extern "C" fn() -> *mut c_void>,
    pub _compat_destroy_cq: Option<unsafe extern "C" fn() -> *mut c_void>,
    pub _compat_create_srq: Option<unsafe extern "C" fn() -> *mut c_void>,
    pub _compat_modify_srq: Option<unsafe extern "C" fn() -> *mut c_void>,
    pub _compat_query_srq: Option<unsafe extern "C" fn() -> *mut c_void>,
    pub _compat_destroy_srq: Option<unsafe extern "C" fn() -> *mut c_void>,
    pub post_srq_recv: Option<
        unsafe extern "C" fn(srq: *mut ibv_srq, recv_wr: *mut ibv_recv_wr, bad_recv_wr: *mut *mut ibv_recv_wr) -> c_int,
    >,
    pub _compat_create_qp: Option<unsafe extern "C" fn() -> *mut c_void>,
    pub _compat_query_qp: Option<unsafe extern "C" fn() -> *mut c_void>,
    pub _compat_modify_qp: Option<unsafe extern "C" fn() -> *mut c_void>,
    pub _compat_destroy_qp: Option<unsafe extern "C" fn() -> *mut c_void>,
    pub post_send:
        Option<unsafe extern "C" fn(qp: *mut ibv_qp, wr: *mut ibv_send_wr, bad_wr: *mut *mut ibv_send_wr) -> c_int>,
    pub post_recv:
        Option<unsafe extern "C" fn(qp: *mut ibv_qp, wr: *mut ibv_recv_wr, bad_wr: *mut *mut ibv_recv_wr) -> c_int>,
    pub _compat_create_ah: Option<unsafe extern "C" fn() -> *mut c_void>,
    pub _compat_destroy_ah: Option<unsafe extern "C" fn() -> *mut c_void>,
    pub _compat_attach_mcast: Option<unsafe extern "C" fn() -> *mut c_void>,
    pub _compat_detach_mcast: Option<unsafe extern "C" fn() -> *mut c_void>,
    pub _compat_async_event: Option<unsafe extern "C" fn() -> *mut c_void>,
}

/// `struct ibv_context`: an open device (`ibv_open_device`).
#[repr(C)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    pub ops: ibv_context_ops,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: pthread_mutex_t,
    /// `NULL`, or [`__VERBS_ABI_IS_EXTENDED`] when the context ends a [`verbs_context`].
    pub abi_compat: *mut c_void,
}

/// `struct verbs_context`: the extended ops that precede an `ibv_context` whose
/// `abi_compat` is [`__VERBS_ABI_IS_EXTENDED`] (`ibv_context` is its last field).
#[repr(C)]
#[allow(non_snake_case)]
pub struct verbs_context {
    pub query_port: Option<
        unsafe extern "C" fn(
            context: *mut ibv_context,
            port_num: u8,
            port_attr: *mut ibv_port_attr,
            port_attr_len: usize,
        ) -> c_int,
    >,
    pub advise_mr: ibv_opaque_fn,
    pub alloc_null_mr: ibv_opaque_fn,
    pub read_counters: ibv_opaque_fn,
    pub attach_counters_point_flow: ibv_opaque_fn,
    pub create_counters: ibv_opaque_fn,
    pub destroy_counters: ibv_opaque_fn,
    pub reg_dm_mr: ibv_opaque_fn,
    pub alloc_dm: ibv_opaque_fn,
    pub free_dm: ibv_opaque_fn,
    pub modify_flow_action_esp: ibv_opaque_fn,
    pub destroy_flow_action: ibv_opaque_fn,
    pub create_flow_action_esp: ibv_opaque_fn,
    pub modify_qp_rate_limit: ibv_opaque_fn,
    pub alloc_parent_domain: ibv_opaque_fn,
    pub dealloc_td: ibv_opaque_fn,
    pub alloc_td: ibv_opaque_fn,
    pub modify_cq: ibv_opaque_fn,
    pub post_srq_ops: ibv_opaque_fn,
    pub destroy_rwq_ind_table: ibv_opaque_fn,
    pub create_rwq_ind_table: ibv_opaque_fn,
    pub destroy_wq: ibv_opaque_fn,
    pub modify_wq: ibv_opaque_fn,
    pub create_wq: ibv_opaque_fn,
    pub query_rt_values: ibv_opaque_fn,
    /// `struct ibv_cq_ex *(*)(struct ibv_context *, struct ibv_cq_init_attr_ex *)`.
    pub create_cq_ex: ibv_opaque_fn,
    pub priv_: *mut c_void,
    /// `int (*)(struct ibv_context *, const struct ibv_query_device_ex_input *,
    /// struct ibv_device_attr_ex *, size_t)`.
    pub query_device_ex: ibv_opaque_fn,
    pub ibv_destroy_flow: ibv_opaque_fn,
    pub ABI_placeholder2: ibv_opaque_fn,
    pub ibv_create_flow: ibv_opaque_fn,
    pub ABI_placeholder1: ibv_opaque_fn,
    pub open_qp: ibv_opaque_fn,
    pub create_qp_ex: Option<
        unsafe extern "C" fn(context: *mut ibv_context, qp_init_attr_ex: *mut ibv_qp_init_attr_ex) -> *mut ibv_qp,
    >,
    pub get_srq_num: Option<unsafe extern "C" fn(srq: *mut ibv_srq, srq_num: *mut u32) -> c_int>,
    pub create_srq_ex:
        Option<unsafe extern "C" fn(context: *mut ibv_context, attr: *mut ibv_srq_init_attr_ex) -> *mut ibv_srq>,
    pub open_xrcd:
        Option<unsafe extern "C" fn(context: *mut ibv_context, attr: *mut ibv_xrcd_init_attr) -> *mut ibv_xrcd>,
    pub close_xrcd: Option<unsafe extern "C" fn(xrcd: *mut ibv_xrcd) -> c_int>,
    pub _ABI_placeholder3: u64,
    /// Bytes of this struct in use, counted back from `context` (must sit just before it).
    pub sz: usize,
    pub context: ibv_context,
}

// ---------------------------------------------------------------------------------------------
// Attributes

/// `struct ibv_device_attr` (`ibv_query_device`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_device_attr {
    pub fw_ver: [c_char; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: c_uint,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: ibv_atomic_cap,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// `struct ibv_port_attr` (`ibv_query_port`; no bitfields in v44).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_port_attr {
    pub state: ibv_port_state,
    pub max_mtu: ibv_mtu,
    pub active_mtu: ibv_mtu,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

// ---------------------------------------------------------------------------------------------
// Resources

/// `struct ibv_pd`: a protection domain.
#[repr(C)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

/// `struct ibv_xrcd`: an XRC domain.
#[repr(C)]
pub struct ibv_xrcd {
    pub context: *mut ibv_context,
}

/// `struct ibv_mr`: a registered memory region.
#[repr(C)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `struct ibv_mw`: a memory window.
#[repr(C)]
pub struct ibv_mw {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub rkey: u32,
    pub handle: u32,
    pub type_: ibv_mw_type,
}

/// `struct ibv_mw_bind_info`: what a memory window binds (in `ibv_send_wr`'s `bind_mw`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_mw_bind_info {
    pub mr: *mut ibv_mr,
    pub addr: u64,
    pub length: u64,
    pub mw_access_flags: c_uint,
}

/// `struct ibv_comp_channel`: a completion event channel (an fd).
#[repr(C)]
pub struct ibv_comp_channel {
    pub context: *mut ibv_context,
    pub fd: c_int,
    pub refcnt: c_int,
}

/// `struct ibv_cq`: a completion queue.
#[repr(C)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

/// `struct ibv_srq`: a shared receive queue.
#[repr(C)]
pub struct ibv_srq {
    pub context: *mut ibv_context,
    pub srq_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub handle: u32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

/// `struct ibv_qp`: a queue pair.
#[repr(C)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub handle: u32,
    pub qp_num: u32,
    pub state: ibv_qp_state,
    pub qp_type: ibv_qp_type,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

/// `struct ibv_ah`: an address handle.
#[repr(C)]
pub struct ibv_ah {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub handle: u32,
}

/// `struct ibv_global_route`: the GRH part of an address vector.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_global_route {
    pub dgid: ibv_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr`: an address vector.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_srq_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_srq_attr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

/// `struct ibv_srq_init_attr` (`ibv_create_srq`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_srq_init_attr {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
}

/// `struct ibv_tm_cap` (tag matching: not offered here).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_tm_cap {
    pub max_num_tags: u32,
    pub max_ops: u32,
}

/// `struct ibv_srq_init_attr_ex` (`ibv_create_srq_ex`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_srq_init_attr_ex {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
    pub comp_mask: u32,
    pub srq_type: ibv_srq_type,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut ibv_xrcd,
    pub cq: *mut ibv_cq,
    pub tm_cap: ibv_tm_cap,
}

/// `struct ibv_xrcd_init_attr` (`ibv_open_xrcd`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_xrcd_init_attr {
    pub comp_mask: u32,
    pub fd: c_int,
    pub oflags: c_int,
}

/// `struct ibv_qp_cap`: queue sizes of a QP.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr` (`ibv_create_qp`, `rdma_create_qp`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    pub qp_type: ibv_qp_type,
    pub sq_sig_all: c_int,
}

/// `struct ibv_rx_hash_conf` (part of `ibv_qp_init_attr_ex`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_rx_hash_conf {
    pub rx_hash_function: u8,
    pub rx_hash_key_len: u8,
    pub rx_hash_key: *mut u8,
    pub rx_hash_fields_mask: u64,
}

/// `struct ibv_qp_init_attr_ex` (`ibv_create_qp_ex`, `rdma_create_qp_ex`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_init_attr_ex {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    pub qp_type: ibv_qp_type,
    pub sq_sig_all: c_int,
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut ibv_xrcd,
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut ibv_rwq_ind_table,
    pub rx_hash_conf: ibv_rx_hash_conf,
    pub source_qpn: u32,
    pub send_ops_flags: u64,
}

/// `struct ibv_qp_attr` (`ibv_modify_qp`, `ibv_query_qp`; no bitfields in v44).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_attr {
    pub qp_state: ibv_qp_state,
    pub cur_qp_state: ibv_qp_state,
    pub path_mtu: ibv_mtu,
    pub path_mig_state: ibv_mig_state,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

// ---------------------------------------------------------------------------------------------
// Work requests and completions

/// `enum ibv_qp_create_send_ops_flags` (`ibv_qp_init_attr_ex.send_ops_flags`).
pub const IBV_QP_EX_WITH_RDMA_WRITE: u64 = 1 << 0;
pub const IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM: u64 = 1 << 1;
pub const IBV_QP_EX_WITH_SEND: u64 = 1 << 2;
pub const IBV_QP_EX_WITH_SEND_WITH_IMM: u64 = 1 << 3;
pub const IBV_QP_EX_WITH_RDMA_READ: u64 = 1 << 4;
pub const IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP: u64 = 1 << 5;
pub const IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD: u64 = 1 << 6;
pub const IBV_QP_EX_WITH_LOCAL_INV: u64 = 1 << 7;
pub const IBV_QP_EX_WITH_BIND_MW: u64 = 1 << 8;
pub const IBV_QP_EX_WITH_SEND_WITH_INV: u64 = 1 << 9;
pub const IBV_QP_EX_WITH_TSO: u64 = 1 << 10;
pub const IBV_QP_EX_WITH_ATOMIC_WRITE: u64 = 1 << 12;
/// `IBV_QP_EX_WITH_FLUSH` (rdma-core 45 on; `ibv_wr_flush` sits right after v44's
/// `struct ibv_qp_ex`, see [`ibv_wr_flush_fn`]).
pub const IBV_QP_EX_WITH_FLUSH: u64 = 1 << 11;

/// `void (*wr_flush)(struct ibv_qp_ex *, uint32_t rkey, uint64_t remote_addr, size_t len,
/// uint8_t type, uint8_t level)`: rdma-core 45's member after `wr_atomic_write`.
pub type ibv_wr_flush_fn = Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, usize, u8, u8)>;

/// `struct ibv_data_buf` (`ibv_wr_set_inline_data_list`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_data_buf {
    pub addr: *mut c_void,
    pub length: usize,
}

/// The members of `struct ibv_qp_ex` after its `qp_base`: the work-request builder the
/// `ibv_wr_*` inlines call through (rdma-core v44 verbs.h).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_ex_ops {
    pub comp_mask: u64,
    pub wr_id: u64,
    pub wr_flags: c_uint,
    pub wr_atomic_cmp_swp: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u64, u64)>,
    pub wr_atomic_fetch_add: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u64)>,
    pub wr_bind_mw: Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut ibv_mw, u32, *const ibv_mw_bind_info)>,
    pub wr_local_inv: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_rdma_read: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64)>,
    pub wr_rdma_write: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64)>,
    pub wr_rdma_write_imm: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u32)>,
    pub wr_send: Option<unsafe extern "C" fn(*mut ibv_qp_ex)>,
    pub wr_send_imm: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_send_inv: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_send_tso: ibv_opaque_fn,
    pub wr_set_ud_addr: Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut ibv_ah, u32, u32)>,
    pub wr_set_xrc_srqn: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_set_inline_data: Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut c_void, usize)>,
    pub wr_set_inline_data_list: Option<unsafe extern "C" fn(*mut ibv_qp_ex, usize, *const ibv_data_buf)>,
    pub wr_set_sge: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u32)>,
    pub wr_set_sge_list: Option<unsafe extern "C" fn(*mut ibv_qp_ex, usize, *const ibv_sge)>,
    pub wr_start: Option<unsafe extern "C" fn(*mut ibv_qp_ex)>,
    pub wr_complete: Option<unsafe extern "C" fn(*mut ibv_qp_ex) -> c_int>,
    pub wr_abort: Option<unsafe extern "C" fn(*mut ibv_qp_ex)>,
    pub wr_atomic_write: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, *const c_void)>,
}

/// `struct ibv_qp_ex`: a QP with the work-request builder (`ibv_qp_to_qp_ex`).
#[repr(C)]
pub struct ibv_qp_ex {
    pub qp_base: ibv_qp,
    pub ops: ibv_qp_ex_ops,
}

/// `struct ibv_sge`: one scatter/gather element.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `ibv_send_wr.wr.rdma`: target of an RDMA write/read.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_send_wr_rdma {
    pub remote_addr: u64,
    pub rkey: u32,
}

/// `ibv_send_wr.wr.atomic`: target and operands of an atomic.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_send_wr_atomic {
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub rkey: u32,
}

/// `ibv_send_wr.wr.ud`: destination of a UD send.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_ud {
    pub ah: *mut ibv_ah,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

/// `ibv_send_wr.wr`: the opcode-dependent part of a send work request.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_wr {
    pub rdma: ibv_send_wr_rdma,
    pub atomic: ibv_send_wr_atomic,
    pub ud: ibv_send_wr_ud,
}

/// `ibv_send_wr.qp_type.xrc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_send_wr_xrc {
    pub remote_srqn: u32,
}

/// `ibv_send_wr.qp_type`: the QP-type-dependent part of a send work request.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_qp_type {
    pub xrc: ibv_send_wr_xrc,
}

/// `ibv_send_wr.bind_mw`: a memory-window bind.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_bind_mw {
    pub mw: *mut ibv_mw,
    pub rkey: u32,
    pub bind_info: ibv_mw_bind_info,
}

/// `ibv_send_wr.tso`: a TSO send's header.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_tso {
    pub hdr: *mut c_void,
    pub hdr_sz: u16,
    pub mss: u16,
}

/// The anonymous union `{ bind_mw; tso; }` ending `ibv_send_wr` (field `bind_mw_tso`).
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_bind_mw_tso {
    pub bind_mw: ibv_send_wr_bind_mw,
    pub tso: ibv_send_wr_tso,
}

/// `struct ibv_send_wr`: a send work request (`ibv_post_send`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    pub opcode: ibv_wr_opcode,
    pub send_flags: c_uint,
    /// C: anonymous union of `__be32 imm_data` and `uint32_t invalidate_rkey`.
    pub imm_data: u32,
    pub wr: ibv_send_wr_wr,
    pub qp_type: ibv_send_wr_qp_type,
    /// C: the anonymous union `{ bind_mw; tso; }`.
    pub bind_mw_tso: ibv_send_wr_bind_mw_tso,
}

/// `struct ibv_recv_wr`: a receive work request (`ibv_post_recv`, `ibv_post_srq_recv`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
}

/// `struct ibv_wc`: a work completion (`ibv_poll_cq`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_wc {
    pub wr_id: u64,
    pub status: ibv_wc_status,
    pub opcode: ibv_wc_opcode,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// C: anonymous union of `__be32 imm_data` and `uint32_t invalidated_rkey`.
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// `ibv_async_event.element`: the object an async event is about.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_async_event_element {
    pub cq: *mut ibv_cq,
    pub qp: *mut ibv_qp,
    pub srq: *mut ibv_srq,
    pub wq: *mut ibv_wq,
    pub port_num: c_int,
}

/// `struct ibv_async_event` (`ibv_get_async_event`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_async_event {
    pub element: ibv_async_event_element,
    pub event_type: ibv_event_type,
}

// ---------------------------------------------------------------------------------------------
// <infiniband/sa.h>

/// `struct ibv_sa_path_rec`: a path record (`rdma_cm_id.route.path_rec`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_sa_path_rec {
    pub dgid: ibv_gid,
    pub sgid: ibv_gid,
    pub dlid: u16,
    pub slid: u16,
    pub raw_traffic: c_int,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub reversible: c_int,
    pub numb_path: u8,
    pub pkey: u16,
    pub sl: u8,
    pub mtu_selector: u8,
    pub mtu: u8,
    pub rate_selector: u8,
    pub rate: u8,
    pub packet_life_time_selector: u8,
    pub packet_life_time: u8,
    pub preference: u8,
}

// ---------------------------------------------------------------------------------------------
// <rdma/rdma_cma.h>

/// `struct rdma_event_channel`: a CM event channel (an fd).
#[repr(C)]
pub struct rdma_event_channel {
    pub fd: c_int,
}

/// The anonymous unions `{ src_addr; src_sin; src_sin6; src_storage; }` (and `dst_*`) of
/// `rdma_addr`: C's `src_addr` is Rust's `src.addr`, `src_sin6` is `src.sin6`, and so on.
#[repr(C)]
#[derive(Clone, Copy)]
pub union rdma_sockaddr {
    pub addr: sockaddr,
    pub sin: sockaddr_in,
    pub sin6: sockaddr_in6,
    pub storage: sockaddr_storage,
}

/// `struct rdma_ib_addr`: GIDs and P_Key of a resolved address.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_ib_addr {
    pub sgid: ibv_gid,
    pub dgid: ibv_gid,
    pub pkey: u16,
}

/// `rdma_addr.addr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union rdma_addr_addr {
    pub ibaddr: rdma_ib_addr,
}

/// `struct rdma_addr`: source and destination of an id.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_addr {
    /// C: `src_addr` / `src_sin` / `src_sin6` / `src_storage`.
    pub src: rdma_sockaddr,
    /// C: `dst_addr` / `dst_sin` / `dst_sin6` / `dst_storage`.
    pub dst: rdma_sockaddr,
    pub addr: rdma_addr_addr,
}

/// `struct rdma_route`: addresses and path records of an id.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_route {
    pub addr: rdma_addr,
    pub path_rec: *mut ibv_sa_path_rec,
    pub num_paths: c_int,
}

/// `struct rdma_cm_id`: a CM identifier.
#[repr(C)]
pub struct rdma_cm_id {
    pub verbs: *mut ibv_context,
    pub channel: *mut rdma_event_channel,
    pub context: *mut c_void,
    pub qp: *mut ibv_qp,
    pub route: rdma_route,
    pub ps: rdma_port_space,
    pub port_num: u8,
    pub event: *mut rdma_cm_event,
    pub send_cq_channel: *mut ibv_comp_channel,
    pub send_cq: *mut ibv_cq,
    pub recv_cq_channel: *mut ibv_comp_channel,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub pd: *mut ibv_pd,
    pub qp_type: ibv_qp_type,
}

/// `struct rdma_conn_param`: connection parameters (connect/accept, connection events).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_conn_param {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub flow_control: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub srq: u8,
    pub qp_num: u32,
}

/// `struct rdma_ud_param`: UD parameters (route resolution, multicast join events).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_ud_param {
    pub private_data: *const c_void,
    pub private_data_len: u8,
    pub ah_attr: ibv_ah_attr,
    pub qp_num: u32,
    pub qkey: u32,
}

/// `rdma_cm_event.param`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union rdma_cm_event_param {
    pub conn: rdma_conn_param,
    pub ud: rdma_ud_param,
}

/// `struct rdma_cm_event` (`rdma_get_cm_event`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_cm_event {
    pub id: *mut rdma_cm_id,
    pub listen_id: *mut rdma_cm_id,
    pub event: rdma_cm_event_type,
    pub status: c_int,
    pub param: rdma_cm_event_param,
}

/// `struct rdma_addrinfo` (`rdma_getaddrinfo`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_addrinfo {
    pub ai_flags: c_int,
    pub ai_family: c_int,
    pub ai_qp_type: c_int,
    pub ai_port_space: c_int,
    pub ai_src_len: socklen_t,
    pub ai_dst_len: socklen_t,
    pub ai_src_addr: *mut sockaddr,
    pub ai_dst_addr: *mut sockaddr,
    pub ai_src_canonname: *mut c_char,
    pub ai_dst_canonname: *mut c_char,
    pub ai_route_len: usize,
    pub ai_route: *mut c_void,
    pub ai_connect_len: usize,
    pub ai_connect: *mut c_void,
    pub ai_next: *mut rdma_addrinfo,
}

/// `struct rdma_cm_join_mc_attr_ex` (`rdma_join_multicast_ex`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_cm_join_mc_attr_ex {
    pub comp_mask: u32,
    pub join_flags: u32,
    pub addr: *mut sockaddr,
}

// ---------------------------------------------------------------------------------------------
// Sizes measured with gcc on Debian 12's headers (tests/layout.rs checks every field).

macro_rules! assert_size {
    ($($t:ty = $n:expr),* $(,)?) => { $(const _: () = assert!(size_of::<$t>() == $n);)* };
}

assert_size! {
    ibv_gid_global = 16,
    ibv_gid = 16,
    ibv_gid_entry = 32,
    _ibv_device_ops = 16,
    ibv_device = 664,
    ibv_context_ops = 256,
    ibv_context = 328,
    verbs_context = 648,
    ibv_device_attr = 232,
    ibv_port_attr = 52,
    ibv_pd = 16,
    ibv_xrcd = 8,
    ibv_mr = 48,
    ibv_mw = 32,
    ibv_mw_bind_info = 32,
    ibv_comp_channel = 16,
    ibv_cq = 128,
    ibv_srq = 128,
    ibv_qp = 160,
    ibv_qp_ex = 352,
    ibv_data_buf = 16,
    ibv_ah = 24,
    ibv_global_route = 24,
    ibv_ah_attr = 32,
    ibv_srq_attr = 12,
    ibv_srq_init_attr = 24,
    ibv_tm_cap = 8,
    ibv_srq_init_attr_ex = 64,
    ibv_xrcd_init_attr = 12,
    ibv_qp_cap = 20,
    ibv_qp_init_attr = 64,
    ibv_rx_hash_conf = 24,
    ibv_qp_init_attr_ex = 136,
    ibv_qp_attr = 144,
    ibv_sge = 16,
    ibv_send_wr_rdma = 16,
    ibv_send_wr_atomic = 32,
    ibv_send_wr_ud = 16,
    ibv_send_wr_wr = 32,
    ibv_send_wr_xrc = 4,
    ibv_send_wr_qp_type = 4,
    ibv_send_wr_bind_mw = 48,
    ibv_send_wr_tso = 16,
    ibv_send_wr_bind_mw_tso = 48,
    ibv_send_wr = 128,
    ibv_recv_wr = 32,
    ibv_wc = 48,
    ibv_async_event_element = 8,
    ibv_async_event = 16,
    ibv_sa_path_rec = 64,
    rdma_event_channel = 4,
    rdma_sockaddr = 128,
    rdma_ib_addr = 40,
    rdma_addr_addr = 40,
    rdma_addr = 296,
    rdma_route = 312,
    rdma_cm_id = 416,
    rdma_conn_param = 24,
    rdma_ud_param = 56,
    rdma_cm_event_param = 56,
    rdma_cm_event = 80,
    rdma_addrinfo = 96,
    rdma_cm_join_mc_attr_ex = 16,
}
