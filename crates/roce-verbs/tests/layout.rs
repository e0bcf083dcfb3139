//! `src/abi.rs` against the real headers: `tests/layout.c`, compiled against Debian 12's
//! `libibverbs-dev` and `librdmacm-dev` (44.0-2), prints the size, alignment and every field's
//! offset and size of each type, and every constant; this test prints the same list from the
//! Rust twins and fails listing every line that differs.
//!
//! The headers live in `<workspace>/target/capi/layout/usr/include`. When they are missing the
//! test fetches them (`apt-get download`, `dpkg-deb -x`; it never installs anything) and fails
//! loudly if that does not work: it is never skipped.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::mem::{align_of, size_of, MaybeUninit};
use std::path::{Path, PathBuf};
use std::process::Command;

use roce_verbs::abi::*;

const PACKAGES: [&str; 2] = ["libibverbs-dev", "librdmacm-dev"];

/// Size of the pointee of a raw pointer: gives a field's size from `&raw const (*p).field`.
fn size_of_pointee<T>(_: *const T) -> usize {
    size_of::<T>()
}

/// One field line: `T.cname offset size`, where `cname` is the C path of the member and
/// `$($p).+` the Rust path (they differ only where C has an anonymous union).
macro_rules! field {
    ($out:ident, $t:ident, $cname:expr, $($p:ident).+) => {{
        let off = core::mem::offset_of!($t, $($p).+);
        let u = MaybeUninit::<$t>::uninit();
        let base = u.as_ptr();
        // SAFETY: only the address of a (possibly union) field of `base` is taken; nothing is read.
        #[allow(unused_unsafe)]
        let fp = unsafe { &raw const (*base).$($p).+ };
        let size = size_of_pointee(fp);
        assert_eq!(fp as usize - base as usize, off, "offset_of! disagrees with the address");
        $out.push(format!("{}.{} {} {}", stringify!($t), $cname.replace(' ', ""), off, size));
    }};
}

/// `layout!(out, T; a, b.c, "c_name" = rust.path, ...)`: `sizeof`, `alignof` and one line per
/// field of `T`.
macro_rules! layout {
    ($out:ident, $t:ident; $($body:tt)*) => {{
        $out.push(format!("sizeof {} {}", stringify!($t), size_of::<$t>()));
        $out.push(format!("alignof {} {}", stringify!($t), align_of::<$t>()));
        layout!(@f $out, $t, $($body)*);
    }};
    (@f $out:ident, $t:ident, ) => {};
    (@f $out:ident, $t:ident, $c:literal = $($p:ident).+ $(, $($rest:tt)*)?) => {
        field!($out, $t, $c, $($p).+);
        layout!(@f $out, $t, $($($rest)*)?);
    };
    (@f $out:ident, $t:ident, $($p:ident).+ $(, $($rest:tt)*)?) => {
        field!($out, $t, stringify!($($p).+), $($p).+);
        layout!(@f $out, $t, $($($rest)*)?);
    };
}

/// `consts!(out; A, B, ...)`: one `NAME value` line per constant.
macro_rules! consts {
    ($out:ident; $($name:ident),* $(,)?) => {
        $( $out.push(format!("{} {}", stringify!($name), $name as i64)); )*
    };
}

fn rust_lines() -> Vec<String> {
    let mut o = Vec::new();
    layout!(o, ibv_gid; raw, global, global.subnet_prefix, global.interface_id);
    layout!(o, ibv_gid_entry; gid, gid_index, port_num, gid_type, ndev_ifindex);
    layout!(o, _ibv_device_ops; _dummy1, _dummy2);
    layout!(o, ibv_device; _ops, node_type, transport_type, name, dev_name, dev_path, ibdev_path);
    layout!(o, ibv_context_ops; _compat_query_device, _compat_query_port, _compat_alloc_pd, _compat_dealloc_pd,
        _compat_reg_mr, _compat_rereg_mr, _compat_dereg_mr, alloc_mw, bind_mw, dealloc_mw, _compat_create_cq,
        poll_cq, req_notify_cq, _compat_cq_event, _compat_resize_cq, _compat_destroy_cq, _compat_create_srq,
        _compat_modify_srq, _compat_query_srq, _compat_destroy_srq, post_srq_recv, _compat_create_qp,
        _compat_query_qp, _compat_modify_qp, _compat_destroy_qp, post_send, post_recv, _compat_create_ah,
        _compat_destroy_ah, _compat_attach_mcast, _compat_detach_mcast, _compat_async_event);
    layout!(o, ibv_context; device, ops, cmd_fd, async_fd, num_comp_vectors, mutex, abi_compat);
    layout!(o, verbs_context; query_port, advise_mr, alloc_null_mr, read_counters, attach_counters_point_flow,
        create_counters, destroy_counters, reg_dm_mr, alloc_dm, free_dm, modify_flow_action_esp,
        destroy_flow_action, create_flow_action_esp, modify_qp_rate_limit, alloc_parent_domain, dealloc_td,
        alloc_td, modify_cq, post_srq_ops, destroy_rwq_ind_table, create_rwq_ind_table, destroy_wq, modify_wq,
        create_wq, query_rt_values, create_cq_ex, "priv" = priv_, query_device_ex, ibv_destroy_flow,
        ABI_placeholder2, ibv_create_flow, ABI_placeholder1, open_qp, create_qp_ex, get_srq_num, create_srq_ex,
        open_xrcd, close_xrcd, _ABI_placeholder3, sz, context, context.abi_compat);
    layout!(o, ibv_device_attr; fw_ver, node_guid, sys_image_guid, max_mr_size, page_size_cap, vendor_id,
        vendor_part_id, hw_ver, max_qp, max_qp_wr, device_cap_flags, max_sge, max_sge_rd, max_cq, max_cqe,
        max_mr, max_pd, max_qp_rd_atom, max_ee_rd_atom, max_res_rd_atom, max_qp_init_rd_atom,
        max_ee_init_rd_atom, atomic_cap, max_ee, max_rdd, max_mw, max_raw_ipv6_qp, max_raw_ethy_qp,
        max_mcast_grp, max_mcast_qp_attach, max_total_mcast_qp_attach, max_ah, max_fmr, max_map_per_fmr,
        max_srq, max_srq_wr, max_srq_sge, max_pkeys, local_ca_ack_delay, phys_port_cnt);
    layout!(o, ibv_port_attr; state, max_mtu, active_mtu, gid_tbl_len, port_cap_flags, max_msg_sz,
        bad_pkey_cntr, qkey_viol_cntr, pkey_tbl_len, lid, sm_lid, lmc, max_vl_num, sm_sl, subnet_timeout,
        init_type_reply, active_width, active_speed, phys_state, link_layer, flags, port_cap_flags2);
    layout!(o, ibv_pd; context, handle);
    layout!(o, ibv_xrcd; context);
    layout!(o, ibv_mr; context, pd, addr, length, handle, lkey, rkey);
    layout!(o, ibv_mw; context, pd, rkey, handle, "type" = type_);
    layout!(o, ibv_mw_bind_info; mr, addr, length, mw_access_flags);
    layout!(o, ibv_comp_channel; context, fd, refcnt);
    layout!(o, ibv_cq; context, channel, cq_context, handle, cqe, mutex, cond, comp_events_completed,
        async_events_completed);
    layout!(o, ibv_srq; context, srq_context, pd, handle, mutex, cond, events_completed);
    layout!(o, ibv_qp; context, qp_context, pd, send_cq, recv_cq, srq, handle, qp_num, state, qp_type, mutex,
        cond, events_completed);
    layout!(o, ibv_qp_ex; qp_base, "comp_mask" = ops.comp_mask, "wr_id" = ops.wr_id, "wr_flags" = ops.wr_flags, "wr_atomic_cmp_swp" = ops.wr_atomic_cmp_swp, "wr_atomic_fetch_add" = ops.wr_atomic_fetch_add, "wr_bind_mw" = ops.wr_bind_mw, "wr_local_inv" = ops.wr_local_inv, "wr_rdma_read" = ops.wr_rdma_read, "wr_rdma_write" = ops.wr_rdma_write, "wr_rdma_write_imm" = ops.wr_rdma_write_imm, "wr_send" = ops.wr_send, "wr_send_imm" = ops.wr_send_imm, "wr_send_inv" = ops.wr_send_inv, "wr_send_tso" = ops.wr_send_tso, "wr_set_ud_addr" = ops.wr_set_ud_addr, "wr_set_xrc_srqn" = ops.wr_set_xrc_srqn, "wr_set_inline_data" = ops.wr_set_inline_data, "wr_set_inline_data_list" = ops.wr_set_inline_data_list, "wr_set_sge" = ops.wr_set_sge, "wr_set_sge_list" = ops.wr_set_sge_list, "wr_start" = ops.wr_start, "wr_complete" = ops.wr_complete, "wr_abort" = ops.wr_abort, "wr_atomic_write" = ops.wr_atomic_write);
    layout!(o, ibv_data_buf; addr, length);
    layout!(o, ibv_ah; context, pd, handle);
    layout!(o, ibv_global_route; dgid, flow_label, sgid_index, hop_limit, traffic_class);
    layout!(o, ibv_ah_attr; grh, grh.dgid, grh.sgid_index, dlid, sl, src_path_bits, static_rate, is_global,
        port_num);
    layout!(o, ibv_srq_attr; max_wr, max_sge, srq_limit);
    layout!(o, ibv_srq_init_attr; srq_context, attr);
    layout!(o, ibv_tm_cap; max_num_tags, max_ops);
    layout!(o, ibv_srq_init_attr_ex; srq_context, attr, comp_mask, srq_type, pd, xrcd, cq, tm_cap);
    layout!(o, ibv_xrcd_init_attr; comp_mask, fd, oflags);
    layout!(o, ibv_qp_cap; max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data);
    layout!(o, ibv_qp_init_attr; qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all);
    layout!(o, ibv_rx_hash_conf; rx_hash_function, rx_hash_key_len, rx_hash_key, rx_hash_fields_mask);
    layout!(o, ibv_qp_init_attr_ex; qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all, comp_mask, pd,
        xrcd, create_flags, max_tso_header, rwq_ind_tbl, rx_hash_conf, source_qpn, send_ops_flags);
    layout!(o, ibv_qp_attr; qp_state, cur_qp_state, path_mtu, path_mig_state, qkey, rq_psn, sq_psn, dest_qp_num,
        qp_access_flags, cap, ah_attr, alt_ah_attr, pkey_index, alt_pkey_index, en_sqd_async_notify,
        sq_draining, max_rd_atomic, max_dest_rd_atomic, min_rnr_timer, port_num, timeout, retry_cnt, rnr_retry,
        alt_port_num, alt_timeout, rate_limit);
    layout!(o, ibv_sge; addr, length, lkey);
    layout!(o, ibv_send_wr; wr_id, next, sg_list, num_sge, opcode, send_flags, imm_data,
        "invalidate_rkey" = imm_data, wr, wr.rdma, wr.rdma.remote_addr, wr.rdma.rkey, wr.atomic,
        wr.atomic.remote_addr, wr.atomic.compare_add, wr.atomic.swap, wr.atomic.rkey, wr.ud, wr.ud.ah,
        wr.ud.remote_qpn, wr.ud.remote_qkey, qp_type, qp_type.xrc, qp_type.xrc.remote_srqn,
        "bind_mw" = bind_mw_tso.bind_mw, "bind_mw.mw" = bind_mw_tso.bind_mw.mw,
        "bind_mw.rkey" = bind_mw_tso.bind_mw.rkey, "bind_mw.bind_info" = bind_mw_tso.bind_mw.bind_info,
        "bind_mw.bind_info.mr" = bind_mw_tso.bind_mw.bind_info.mr,
        "bind_mw.bind_info.addr" = bind_mw_tso.bind_mw.bind_info.addr,
        "bind_mw.bind_info.length" = bind_mw_tso.bind_mw.bind_info.length,
        "bind_mw.bind_info.mw_access_flags" = bind_mw_tso.bind_mw.bind_info.mw_access_flags,
        "tso" = bind_mw_tso.tso, "tso.hdr" = bind_mw_tso.tso.hdr, "tso.hdr_sz" = bind_mw_tso.tso.hdr_sz,
        "tso.mss" = bind_mw_tso.tso.mss);
    layout!(o, ibv_recv_wr; wr_id, next, sg_list, num_sge);
    layout!(o, ibv_wc; wr_id, status, opcode, vendor_err, byte_len, imm_data, "invalidated_rkey" = imm_data,
        qp_num, src_qp, wc_flags, pkey_index, slid, sl, dlid_path_bits);
    layout!(o, ibv_async_event; element, element.cq, element.qp, element.srq, element.wq, element.port_num,
        event_type);
    layout!(o, ibv_sa_path_rec; dgid, sgid, dlid, slid, raw_traffic, flow_label, hop_limit, traffic_class,
        reversible, numb_path, pkey, sl, mtu_selector, mtu, rate_selector, rate, packet_life_time_selector,
        packet_life_time, preference);
    layout!(o, rdma_event_channel; fd);
    layout!(o, rdma_ib_addr; sgid, dgid, pkey);
    layout!(o, rdma_addr; "src_addr" = src.addr, "src_sin" = src.sin, "src_sin6" = src.sin6,
        "src_storage" = src.storage, "dst_addr" = dst.addr, "dst_sin" = dst.sin, "dst_sin6" = dst.sin6,
        "dst_storage" = dst.storage, addr, addr.ibaddr, addr.ibaddr.sgid, addr.ibaddr.dgid, addr.ibaddr.pkey);
    layout!(o, rdma_route; addr, path_rec, num_paths);
    layout!(o, rdma_cm_id; verbs, channel, context, qp, route, "route.addr.src_addr" = route.addr.src.addr,
        "route.addr.dst_addr" = route.addr.dst.addr, route.addr.addr, route.path_rec, route.num_paths, ps,
        port_num, event, send_cq_channel, send_cq, recv_cq_channel, recv_cq, srq, pd, qp_type);
    layout!(o, rdma_conn_param; private_data, private_data_len, responder_resources, initiator_depth,
        flow_control, retry_count, rnr_retry_count, srq, qp_num);
    layout!(o, rdma_ud_param; private_data, private_data_len, ah_attr, qp_num, qkey);
    layout!(o, rdma_cm_event; id, listen_id, event, status, param, param.conn, param.conn.private_data,
        param.conn.private_data_len, param.conn.qp_num, param.ud, param.ud.private_data,
        param.ud.private_data_len, param.ud.ah_attr, param.ud.qp_num, param.ud.qkey);
    layout!(o, rdma_addrinfo; ai_flags, ai_family, ai_qp_type, ai_port_space, ai_src_len, ai_dst_len,
        ai_src_addr, ai_dst_addr, ai_src_canonname, ai_dst_canonname, ai_route_len, ai_route, ai_connect_len,
        ai_connect, ai_next);
    layout!(o, rdma_cm_join_mc_attr_ex; comp_mask, join_flags, addr);

    consts!(o; __VERBS_ABI_IS_EXTENDED, IBV_GID_TYPE_IB, IBV_GID_TYPE_ROCE_V1, IBV_GID_TYPE_ROCE_V2);
    consts!(o; IBV_NODE_UNKNOWN, IBV_NODE_CA, IBV_NODE_SWITCH, IBV_NODE_ROUTER, IBV_NODE_RNIC, IBV_NODE_USNIC,
        IBV_NODE_USNIC_UDP, IBV_NODE_UNSPECIFIED);
    consts!(o; IBV_TRANSPORT_UNKNOWN, IBV_TRANSPORT_IB, IBV_TRANSPORT_IWARP, IBV_TRANSPORT_USNIC,
        IBV_TRANSPORT_USNIC_UDP, IBV_TRANSPORT_UNSPECIFIED);
    consts!(o; IBV_ATOMIC_NONE, IBV_ATOMIC_HCA, IBV_ATOMIC_GLOB);
    consts!(o; IBV_MTU_256, IBV_MTU_512, IBV_MTU_1024, IBV_MTU_2048, IBV_MTU_4096);
    consts!(o; IBV_PORT_NOP, IBV_PORT_DOWN, IBV_PORT_INIT, IBV_PORT_ARMED, IBV_PORT_ACTIVE,
        IBV_PORT_ACTIVE_DEFER);
    consts!(o; IBV_LINK_LAYER_UNSPECIFIED, IBV_LINK_LAYER_INFINIBAND, IBV_LINK_LAYER_ETHERNET, IBV_PORT_CM_SUP,
        IBV_PORT_IP_BASED_GIDS, IBV_SYSFS_NAME_MAX, IBV_SYSFS_PATH_MAX);
    consts!(o; IBV_EVENT_CQ_ERR, IBV_EVENT_QP_FATAL, IBV_EVENT_QP_REQ_ERR, IBV_EVENT_QP_ACCESS_ERR,
        IBV_EVENT_COMM_EST, IBV_EVENT_SQ_DRAINED, IBV_EVENT_PATH_MIG, IBV_EVENT_PATH_MIG_ERR,
        IBV_EVENT_DEVICE_FATAL, IBV_EVENT_PORT_ACTIVE, IBV_EVENT_PORT_ERR, IBV_EVENT_LID_CHANGE,
        IBV_EVENT_PKEY_CHANGE, IBV_EVENT_SM_CHANGE, IBV_EVENT_SRQ_ERR, IBV_EVENT_SRQ_LIMIT_REACHED,
        IBV_EVENT_QP_LAST_WQE_REACHED, IBV_EVENT_CLIENT_REREGISTER, IBV_EVENT_GID_CHANGE, IBV_EVENT_WQ_FATAL);
    consts!(o; IBV_WC_SUCCESS, IBV_WC_LOC_LEN_ERR, IBV_WC_LOC_QP_OP_ERR, IBV_WC_LOC_EEC_OP_ERR,
        IBV_WC_LOC_PROT_ERR, IBV_WC_WR_FLUSH_ERR, IBV_WC_MW_BIND_ERR, IBV_WC_BAD_RESP_ERR,
        IBV_WC_LOC_ACCESS_ERR, IBV_WC_REM_INV_REQ_ERR, IBV_WC_REM_ACCESS_ERR, IBV_WC_REM_OP_ERR,
        IBV_WC_RETRY_EXC_ERR, IBV_WC_RNR_RETRY_EXC_ERR, IBV_WC_LOC_RDD_VIOL_ERR, IBV_WC_REM_INV_RD_REQ_ERR,
        IBV_WC_REM_ABORT_ERR, IBV_WC_INV_EECN_ERR, IBV_WC_INV_EEC_STATE_ERR, IBV_WC_FATAL_ERR,
        IBV_WC_RESP_TIMEOUT_ERR, IBV_WC_GENERAL_ERR, IBV_WC_TM_ERR, IBV_WC_TM_RNDV_INCOMPLETE);
    consts!(o; IBV_WC_SEND, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ, IBV_WC_COMP_SWAP, IBV_WC_FETCH_ADD,
        IBV_WC_BIND_MW, IBV_WC_LOCAL_INV, IBV_WC_TSO, IBV_WC_ATOMIC_WRITE, IBV_WC_RECV,
        IBV_WC_RECV_RDMA_WITH_IMM, IBV_WC_TM_ADD, IBV_WC_TM_DEL, IBV_WC_TM_SYNC, IBV_WC_TM_RECV,
        IBV_WC_TM_NO_TAG, IBV_WC_DRIVER1, IBV_WC_DRIVER2, IBV_WC_DRIVER3);
    consts!(o; IBV_WC_GRH, IBV_WC_WITH_IMM, IBV_WC_IP_CSUM_OK_SHIFT, IBV_WC_IP_CSUM_OK, IBV_WC_WITH_INV,
        IBV_WC_TM_SYNC_REQ, IBV_WC_TM_MATCH, IBV_WC_TM_DATA_VALID);
    consts!(o; IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_READ,
        IBV_ACCESS_REMOTE_ATOMIC, IBV_ACCESS_MW_BIND, IBV_ACCESS_ZERO_BASED, IBV_ACCESS_ON_DEMAND,
        IBV_ACCESS_HUGETLB, IBV_ACCESS_OPTIONAL_FIRST, IBV_ACCESS_RELAXED_ORDERING,
        IB_UVERBS_ACCESS_OPTIONAL_LAST, IBV_ACCESS_OPTIONAL_RANGE);
    consts!(o; IBV_MW_TYPE_1, IBV_MW_TYPE_2, IBV_SRQ_MAX_WR, IBV_SRQ_LIMIT);
    consts!(o; IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_RAW_PACKET, IBV_QPT_XRC_SEND, IBV_QPT_XRC_RECV,
        IBV_QPT_DRIVER);
    consts!(o; IBV_QP_INIT_ATTR_PD, IBV_QP_INIT_ATTR_XRCD, IBV_QP_INIT_ATTR_CREATE_FLAGS,
        IBV_QP_INIT_ATTR_MAX_TSO_HEADER, IBV_QP_INIT_ATTR_IND_TABLE, IBV_QP_INIT_ATTR_RX_HASH,
        IBV_QP_INIT_ATTR_SEND_OPS_FLAGS);
    consts!(o; IBV_QP_EX_WITH_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, IBV_QP_EX_WITH_SEND,
        IBV_QP_EX_WITH_SEND_WITH_IMM, IBV_QP_EX_WITH_RDMA_READ, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP,
        IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, IBV_QP_EX_WITH_LOCAL_INV, IBV_QP_EX_WITH_BIND_MW,
        IBV_QP_EX_WITH_SEND_WITH_INV, IBV_QP_EX_WITH_TSO, IBV_QP_EX_WITH_ATOMIC_WRITE);
    consts!(o; IBV_QP_STATE, IBV_QP_CUR_STATE, IBV_QP_EN_SQD_ASYNC_NOTIFY, IBV_QP_ACCESS_FLAGS,
        IBV_QP_PKEY_INDEX, IBV_QP_PORT, IBV_QP_QKEY, IBV_QP_AV, IBV_QP_PATH_MTU, IBV_QP_TIMEOUT,
        IBV_QP_RETRY_CNT, IBV_QP_RNR_RETRY, IBV_QP_RQ_PSN, IBV_QP_MAX_QP_RD_ATOMIC, IBV_QP_ALT_PATH,
        IBV_QP_MIN_RNR_TIMER, IBV_QP_SQ_PSN, IBV_QP_MAX_DEST_RD_ATOMIC, IBV_QP_PATH_MIG_STATE, IBV_QP_CAP,
        IBV_QP_DEST_QPN, IBV_QP_RATE_LIMIT);
    consts!(o; IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_SQD, IBV_QPS_SQE, IBV_QPS_ERR,
        IBV_QPS_UNKNOWN);
    consts!(o; IBV_MIG_MIGRATED, IBV_MIG_REARM, IBV_MIG_ARMED);
    consts!(o; IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND, IBV_WR_SEND_WITH_IMM,
        IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_LOCAL_INV,
        IBV_WR_BIND_MW, IBV_WR_SEND_WITH_INV, IBV_WR_TSO, IBV_WR_DRIVER1, IBV_WR_ATOMIC_WRITE);
    consts!(o; IBV_SEND_FENCE, IBV_SEND_SIGNALED, IBV_SEND_SOLICITED, IBV_SEND_INLINE, IBV_SEND_IP_CSUM);
    consts!(o; RDMA_CM_EVENT_ADDR_RESOLVED, RDMA_CM_EVENT_ADDR_ERROR, RDMA_CM_EVENT_ROUTE_RESOLVED,
        RDMA_CM_EVENT_ROUTE_ERROR, RDMA_CM_EVENT_CONNECT_REQUEST, RDMA_CM_EVENT_CONNECT_RESPONSE,
        RDMA_CM_EVENT_CONNECT_ERROR, RDMA_CM_EVENT_UNREACHABLE, RDMA_CM_EVENT_REJECTED,
        RDMA_CM_EVENT_ESTABLISHED, RDMA_CM_EVENT_DISCONNECTED, RDMA_CM_EVENT_DEVICE_REMOVAL,
        RDMA_CM_EVENT_MULTICAST_JOIN, RDMA_CM_EVENT_MULTICAST_ERROR, RDMA_CM_EVENT_ADDR_CHANGE,
        RDMA_CM_EVENT_TIMEWAIT_EXIT);
    consts!(o; RDMA_PS_IPOIB, RDMA_PS_TCP, RDMA_PS_UDP, RDMA_PS_IB, RDMA_IB_IP_PS_MASK, RDMA_IB_IP_PORT_MASK,
        RDMA_IB_IP_PS_TCP, RDMA_IB_IP_PS_UDP, RDMA_IB_PS_IB, RDMA_UDP_QKEY, RDMA_MAX_RESP_RES,
        RDMA_MAX_INIT_DEPTH);
    consts!(o; RDMA_OPTION_ID, RDMA_OPTION_IB, RDMA_OPTION_ID_TOS, RDMA_OPTION_ID_REUSEADDR,
        RDMA_OPTION_ID_AFONLY, RDMA_OPTION_ID_ACK_TIMEOUT, RDMA_OPTION_IB_PATH);
    consts!(o; RAI_PASSIVE, RAI_NUMERICHOST, RAI_NOROUTE, RAI_FAMILY);
    consts!(o; RDMA_CM_JOIN_MC_ATTR_ADDRESS, RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS, RDMA_CM_JOIN_MC_ATTR_RESERVED,
        RDMA_MC_JOIN_FLAG_FULLMEMBER, RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER, RDMA_MC_JOIN_FLAG_RESERVED);
    o
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let shown = format!("{cmd:?}");
    let out = cmd.output().map_err(|e| format!("{shown}: cannot run: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{shown}: {}\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn debs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> =
        std::fs::read_dir(dir).map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "deb"));
    v.sort();
    v
}

/// `<workspace>/target/capi/layout/usr/include`, downloaded and unpacked if missing.
fn headers() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/capi/layout");
    let inc = dir.join("usr/include");
    let present = |inc: &Path| inc.join("infiniband/verbs.h").is_file() && inc.join("rdma/rdma_cma.h").is_file();
    if !present(&inc) {
        std::fs::create_dir_all(&dir).expect("create target/capi/layout");
        let download = || run(Command::new("apt-get").arg("download").args(PACKAGES).current_dir(&dir));
        if let Err(first) = download() {
            eprintln!("apt-get download failed, running apt-get update:\n{first}");
            run(Command::new("apt-get").arg("update")).unwrap_or_else(|e| panic!("apt-get update failed:\n{e}"));
            download().unwrap_or_else(|e| panic!("cannot fetch the rdma-core headers:\n{e}"));
        }
        for deb in debs(&dir) {
            run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&dir))
                .unwrap_or_else(|e| panic!("cannot unpack {}:\n{e}", deb.display()));
        }
        assert!(present(&inc), "no verbs.h / rdma_cma.h under {} after unpacking", inc.display());
    }
    // The layouts in src/abi.rs are those of rdma-core 44 (Debian 12).
    for deb in debs(&dir) {
        let v = run(Command::new("dpkg-deb").arg("-f").arg(&deb).arg("Version"))
            .unwrap_or_else(|e| panic!("cannot read the version of {}:\n{e}", deb.display()));
        assert!(v.trim().starts_with("44."), "{} is version {}, not rdma-core 44", deb.display(), v.trim());
    }
    inc
}

fn c_lines(inc: &Path) -> Vec<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/layout.c");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("roce-verbs-layout-c");
    run(Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=gnu11", "-Wall", "-Wextra", "-O0", "-I"])
        .arg(inc)
        .arg(&src)
        .arg("-o")
        .arg(&exe))
    .unwrap_or_else(|e| panic!("cannot compile tests/layout.c:\n{e}"));
    let out = run(&mut Command::new(&exe)).unwrap_or_else(|e| panic!("layout.c failed:\n{e}"));
    out.lines().map(str::to_owned).collect()
}

/// `sizeof T N` -> (`sizeof T`, `N`); `T.f off size` -> (`T.f`, `off size`); `NAME v` -> (`NAME`, `v`).
fn keyed(lines: &[String], side: &str, errors: &mut String) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for l in lines {
        let words: Vec<&str> = l.split_whitespace().collect();
        let k = if matches!(words.first(), Some(&"sizeof" | &"alignof")) { 2 } else { 1 };
        if words.len() <= k {
            let _ = writeln!(errors, "{side}: malformed line {l:?}");
            continue;
        }
        let (key, val) = (words[..k].join(" "), words[k..].join(" "));
        if m.insert(key.clone(), val).is_some() {
            let _ = writeln!(errors, "{side}: {key} listed twice");
        }
    }
    m
}

#[test]
fn abi_matches_debian12_rdma_core_headers() {
    let inc = headers();
    let c = c_lines(&inc);
    let rust = rust_lines();
    let mut errors = String::new();
    let cm = keyed(&c, "C", &mut errors);
    let rm = keyed(&rust, "Rust", &mut errors);
    let mut mismatches = 0;
    for (k, cv) in &cm {
        match rm.get(k) {
            Some(rv) if rv == cv => {}
            Some(rv) => {
                mismatches += 1;
                let _ = writeln!(errors, "MISMATCH {k}: C {cv} | Rust {rv}");
            }
            None => {
                mismatches += 1;
                let _ = writeln!(errors, "MISSING in Rust: {k} {cv}");
            }
        }
    }
    for (k, rv) in &rm {
        if !cm.contains_key(k) {
            mismatches += 1;
            let _ = writeln!(errors, "MISSING in C: {k} {rv}");
        }
    }
    // Same order too: both files walk the types in the same order, so a diff reads well.
    if errors.is_empty() && c != rust {
        let first = c.iter().zip(&rust).position(|(a, b)| a != b).unwrap_or(c.len().min(rust.len()));
        let _ = writeln!(errors, "same lines, different order from line {}", first + 1);
    }
    assert!(c.len() > 700, "layout.c printed only {} lines", c.len());
    assert!(errors.is_empty(), "{mismatches} layout differences against {}:\n{errors}", inc.display());
    println!("{} lines identical (types, fields, constants)", c.len());
}
