/* Prints the layout of the rdma-core 44 ABI as gcc sees it in Debian 12's headers:
 *   sizeof T N / alignof T N       for every type
 *   T.field offset size            for every field (nested union members by path)
 *   NAME value                     for every constant
 * tests/layout.rs compiles this against the downloaded libibverbs-dev / librdmacm-dev headers
 * and compares it, line for line, with the same list printed from src/abi.rs. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <infiniband/verbs.h>
#include <infiniband/sa.h>
#include <rdma/rdma_cma.h>

#define TYPE(kind, T)                                                                      \
	printf("sizeof %s %zu\n", #T, sizeof(kind T));                                     \
	printf("alignof %s %zu\n", #T, _Alignof(kind T));
#define FIELD(kind, T, path)                                                               \
	printf("%s.%s %zu %zu\n", #T, #path, offsetof(kind T, path),                       \
	       sizeof(((kind T *)0)->path));
#define ST(T) TYPE(struct, T)
#define UN(T) TYPE(union, T)
#define S(T, path) FIELD(struct, T, path)
#define U(T, path) FIELD(union, T, path)
#define C(name) printf("%s %lld\n", #name, (long long)(name));
#define CP(name) printf("%s %lld\n", #name, (long long)(intptr_t)(name));

static void types(void)
{
	UN(ibv_gid)
	U(ibv_gid, raw) U(ibv_gid, global) U(ibv_gid, global.subnet_prefix)
	U(ibv_gid, global.interface_id)

	ST(ibv_gid_entry)
	S(ibv_gid_entry, gid) S(ibv_gid_entry, gid_index) S(ibv_gid_entry, port_num)
	S(ibv_gid_entry, gid_type) S(ibv_gid_entry, ndev_ifindex)

	ST(_ibv_device_ops)
	S(_ibv_device_ops, _dummy1) S(_ibv_device_ops, _dummy2)

	ST(ibv_device)
	S(ibv_device, _ops) S(ibv_device, node_type) S(ibv_device, transport_type)
	S(ibv_device, name) S(ibv_device, dev_name) S(ibv_device, dev_path)
	S(ibv_device, ibdev_path)

	ST(ibv_context_ops)
	S(ibv_context_ops, _compat_query_device) S(ibv_context_ops, _compat_query_port)
	S(ibv_context_ops, _compat_alloc_pd) S(ibv_context_ops, _compat_dealloc_pd)
	S(ibv_context_ops, _compat_reg_mr) S(ibv_context_ops, _compat_rereg_mr)
	S(ibv_context_ops, _compat_dereg_mr) S(ibv_context_ops, alloc_mw)
	S(ibv_context_ops, bind_mw) S(ibv_context_ops, dealloc_mw)
	S(ibv_context_ops, _compat_create_cq) S(ibv_context_ops, poll_cq)
	S(ibv_context_ops, req_notify_cq) S(ibv_context_ops, _compat_cq_event)
	S(ibv_context_ops, _compat_resize_cq) S(ibv_context_ops, _compat_destroy_cq)
	S(ibv_context_ops, _compat_create_srq) S(ibv_context_ops, _compat_modify_srq)
	S(ibv_context_ops, _compat_query_srq) S(ibv_context_ops, _compat_destroy_srq)
	S(ibv_context_ops, post_srq_recv) S(ibv_context_ops, _compat_create_qp)
	S(ibv_context_ops, _compat_query_qp) S(ibv_context_ops, _compat_modify_qp)
	S(ibv_context_ops, _compat_destroy_qp) S(ibv_context_ops, post_send)
	S(ibv_context_ops, post_recv) S(ibv_context_ops, _compat_create_ah)
	S(ibv_context_ops, _compat_destroy_ah) S(ibv_context_ops, _compat_attach_mcast)
	S(ibv_context_ops, _compat_detach_mcast) S(ibv_context_ops, _compat_async_event)

	ST(ibv_context)
	S(ibv_context, device) S(ibv_context, ops) S(ibv_context, cmd_fd)
	S(ibv_context, async_fd) S(ibv_context, num_comp_vectors) S(ibv_context, mutex)
	S(ibv_context, abi_compat)

	ST(verbs_context)
	S(verbs_context, query_port) S(verbs_context, advise_mr) S(verbs_context, alloc_null_mr)
	S(verbs_context, read_counters) S(verbs_context, attach_counters_point_flow)
	S(verbs_context, create_counters) S(verbs_context, destroy_counters)
	S(verbs_context, reg_dm_mr) S(verbs_context, alloc_dm) S(verbs_context, free_dm)
	S(verbs_context, modify_flow_action_esp) S(verbs_context, destroy_flow_action)
	S(verbs_context, create_flow_action_esp) S(verbs_context, modify_qp_rate_limit)
	S(verbs_context, alloc_parent_domain) S(verbs_context, dealloc_td)
	S(verbs_context, alloc_td) S(verbs_context, modify_cq) S(verbs_context, post_srq_ops)
	S(verbs_context, destroy_rwq_ind_table) S(verbs_context, create_rwq_ind_table)
	S(verbs_context, destroy_wq) S(verbs_context, modify_wq) S(verbs_context, create_wq)
	S(verbs_context, query_rt_values) S(verbs_context, create_cq_ex) S(verbs_context, priv)
	S(verbs_context, query_device_ex) S(verbs_context, ibv_destroy_flow)
	S(verbs_context, ABI_placeholder2) S(verbs_context, ibv_create_flow)
	S(verbs_context, ABI_placeholder1) S(verbs_context, open_qp)
	S(verbs_context, create_qp_ex) S(verbs_context, get_srq_num)
	S(verbs_context, create_srq_ex) S(verbs_context, open_xrcd) S(verbs_context, close_xrcd)
	S(verbs_context, _ABI_placeholder3) S(verbs_context, sz) S(verbs_context, context)
	S(verbs_context, context.abi_compat)

	ST(ibv_device_attr)
	S(ibv_device_attr, fw_ver) S(ibv_device_attr, node_guid)
	S(ibv_device_attr, sys_image_guid) S(ibv_device_attr, max_mr_size)
	S(ibv_device_attr, page_size_cap) S(ibv_device_attr, vendor_id)
	S(ibv_device_attr, vendor_part_id) S(ibv_device_attr, hw_ver) S(ibv_device_attr, max_qp)
	S(ibv_device_attr, max_qp_wr) S(ibv_device_attr, device_cap_flags)
	S(ibv_device_attr, max_sge) S(ibv_device_attr, max_sge_rd) S(ibv_device_attr, max_cq)
	S(ibv_device_attr, max_cqe) S(ibv_device_attr, max_mr) S(ibv_device_attr, max_pd)
	S(ibv_device_attr, max_qp_rd_atom) S(ibv_device_attr, max_ee_rd_atom)
	S(ibv_device_attr, max_res_rd_atom) S(ibv_device_attr, max_qp_init_rd_atom)
	S(ibv_device_attr, max_ee_init_rd_atom) S(ibv_device_attr, atomic_cap)
	S(ibv_device_attr, max_ee) S(ibv_device_attr, max_rdd) S(ibv_device_attr, max_mw)
	S(ibv_device_attr, max_raw_ipv6_qp) S(ibv_device_attr, max_raw_ethy_qp)
	S(ibv_device_attr, max_mcast_grp) S(ibv_device_attr, max_mcast_qp_attach)
	S(ibv_device_attr, max_total_mcast_qp_attach) S(ibv_device_attr, max_ah)
	S(ibv_device_attr, max_fmr) S(ibv_device_attr, max_map_per_fmr)
	S(ibv_device_attr, max_srq) S(ibv_device_attr, max_srq_wr)
	S(ibv_device_attr, max_srq_sge) S(ibv_device_attr, max_pkeys)
	S(ibv_device_attr, local_ca_ack_delay) S(ibv_device_attr, phys_port_cnt)

	ST(ibv_port_attr)
	S(ibv_port_attr, state) S(ibv_port_attr, max_mtu) S(ibv_port_attr, active_mtu)
	S(ibv_port_attr, gid_tbl_len) S(ibv_port_attr, port_cap_flags)
	S(ibv_port_attr, max_msg_sz) S(ibv_port_attr, bad_pkey_cntr)
	S(ibv_port_attr, qkey_viol_cntr) S(ibv_port_attr, pkey_tbl_len) S(ibv_port_attr, lid)
	S(ibv_port_attr, sm_lid) S(ibv_port_attr, lmc) S(ibv_port_attr, max_vl_num)
	S(ibv_port_attr, sm_sl) S(ibv_port_attr, subnet_timeout)
	S(ibv_port_attr, init_type_reply) S(ibv_port_attr, active_width)
	S(ibv_port_attr, active_speed) S(ibv_port_attr, phys_state)
	S(ibv_port_attr, link_layer) S(ibv_port_attr, flags) S(ibv_port_attr, port_cap_flags2)

	ST(ibv_pd)
	S(ibv_pd, context) S(ibv_pd, handle)

	ST(ibv_xrcd)
	S(ibv_xrcd, context)

	ST(ibv_mr)
	S(ibv_mr, context) S(ibv_mr, pd) S(ibv_mr, addr) S(ibv_mr, length) S(ibv_mr, handle)
	S(ibv_mr, lkey) S(ibv_mr, rkey)

	ST(ibv_mw)
	S(ibv_mw, context) S(ibv_mw, pd) S(ibv_mw, rkey) S(ibv_mw, handle) S(ibv_mw, type)

	ST(ibv_mw_bind_info)
	S(ibv_mw_bind_info, mr) S(ibv_mw_bind_info, addr) S(ibv_mw_bind_info, length)
	S(ibv_mw_bind_info, mw_access_flags)

	ST(ibv_comp_channel)
	S(ibv_comp_channel, context) S(ibv_comp_channel, fd) S(ibv_comp_channel, refcnt)

	ST(ibv_cq)
	S(ibv_cq, context) S(ibv_cq, channel) S(ibv_cq, cq_context) S(ibv_cq, handle)
	S(ibv_cq, cqe) S(ibv_cq, mutex) S(ibv_cq, cond) S(ibv_cq, comp_events_completed)
	S(ibv_cq, async_events_completed)

	ST(ibv_srq)
	S(ibv_srq, context) S(ibv_srq, srq_context) S(ibv_srq, pd) S(ibv_srq, handle)
	S(ibv_srq, mutex) S(ibv_srq, cond) S(ibv_srq, events_completed)

	ST(ibv_qp)
	S(ibv_qp, context) S(ibv_qp, qp_context) S(ibv_qp, pd) S(ibv_qp, send_cq)
	S(ibv_qp, recv_cq) S(ibv_qp, srq) S(ibv_qp, handle) S(ibv_qp, qp_num) S(ibv_qp, state)
	S(ibv_qp, qp_type) S(ibv_qp, mutex) S(ibv_qp, cond) S(ibv_qp, events_completed)
	ST(ibv_qp_ex)
	S(ibv_qp_ex, qp_base) S(ibv_qp_ex, comp_mask) S(ibv_qp_ex, wr_id) S(ibv_qp_ex, wr_flags) S(ibv_qp_ex, wr_atomic_cmp_swp) S(ibv_qp_ex, wr_atomic_fetch_add) S(ibv_qp_ex, wr_bind_mw) S(ibv_qp_ex, wr_local_inv) S(ibv_qp_ex, wr_rdma_read) S(ibv_qp_ex, wr_rdma_write) S(ibv_qp_ex, wr_rdma_write_imm) S(ibv_qp_ex, wr_send) S(ibv_qp_ex, wr_send_imm) S(ibv_qp_ex, wr_send_inv) S(ibv_qp_ex, wr_send_tso) S(ibv_qp_ex, wr_set_ud_addr) S(ibv_qp_ex, wr_set_xrc_srqn) S(ibv_qp_ex, wr_set_inline_data) S(ibv_qp_ex, wr_set_inline_data_list) S(ibv_qp_ex, wr_set_sge) S(ibv_qp_ex, wr_set_sge_list) S(ibv_qp_ex, wr_start) S(ibv_qp_ex, wr_complete) S(ibv_qp_ex, wr_abort) S(ibv_qp_ex, wr_atomic_write)
	ST(ibv_data_buf)
	S(ibv_data_buf, addr) S(ibv_data_buf, length)

	ST(ibv_ah)
	S(ibv_ah, context) S(ibv_ah, pd) S(ibv_ah, handle)

	ST(ibv_global_route)
	S(ibv_global_route, dgid) S(ibv_global_route, flow_label)
	S(ibv_global_route, sgid_index) S(ibv_global_route, hop_limit)
	S(ibv_global_route, traffic_class)

	ST(ibv_ah_attr)
	S(ibv_ah_attr, grh) S(ibv_ah_attr, grh.dgid) S(ibv_ah_attr, grh.sgid_index)
	S(ibv_ah_attr, dlid) S(ibv_ah_attr, sl) S(ibv_ah_attr, src_path_bits)
	S(ibv_ah_attr, static_rate) S(ibv_ah_attr, is_global) S(ibv_ah_attr, port_num)

	ST(ibv_srq_attr)
	S(ibv_srq_attr, max_wr) S(ibv_srq_attr, max_sge) S(ibv_srq_attr, srq_limit)

	ST(ibv_srq_init_attr)
	S(ibv_srq_init_attr, srq_context) S(ibv_srq_init_attr, attr)

	ST(ibv_tm_cap)
	S(ibv_tm_cap, max_num_tags) S(ibv_tm_cap, max_ops)

	ST(ibv_srq_init_attr_ex)
	S(ibv_srq_init_attr_ex, srq_context) S(ibv_srq_init_attr_ex, attr)
	S(ibv_srq_init_attr_ex, comp_mask) S(ibv_srq_init_attr_ex, srq_type)
	S(ibv_srq_init_attr_ex, pd) S(ibv_srq_init_attr_ex, xrcd) S(ibv_srq_init_attr_ex, cq)
	S(ibv_srq_init_attr_ex, tm_cap)

	ST(ibv_xrcd_init_attr)
	S(ibv_xrcd_init_attr, comp_mask) S(ibv_xrcd_init_attr, fd) S(ibv_xrcd_init_attr, oflags)

	ST(ibv_qp_cap)
	S(ibv_qp_cap, max_send_wr) S(ibv_qp_cap, max_recv_wr) S(ibv_qp_cap, max_send_sge)
	S(ibv_qp_cap, max_recv_sge) S(ibv_qp_cap, max_inline_data)

	ST(ibv_qp_init_attr)
	S(ibv_qp_init_attr, qp_context) S(ibv_qp_init_attr, send_cq)
	S(ibv_qp_init_attr, recv_cq) S(ibv_qp_init_attr, srq) S(ibv_qp_init_attr, cap)
	S(ibv_qp_init_attr, qp_type) S(ibv_qp_init_attr, sq_sig_all)

	ST(ibv_rx_hash_conf)
	S(ibv_rx_hash_conf, rx_hash_function) S(ibv_rx_hash_conf, rx_hash_key_len)
	S(ibv_rx_hash_conf, rx_hash_key) S(ibv_rx_hash_conf, rx_hash_fields_mask)

	ST(ibv_qp_init_attr_ex)
	S(ibv_qp_init_attr_ex, qp_context) S(ibv_qp_init_attr_ex, send_cq)
	S(ibv_qp_init_attr_ex, recv_cq) S(ibv_qp_init_attr_ex, srq) S(ibv_qp_init_attr_ex, cap)
	S(ibv_qp_init_attr_ex, qp_type) S(ibv_qp_init_attr_ex, sq_sig_all)
	S(ibv_qp_init_attr_ex, comp_mask) S(ibv_qp_init_attr_ex, pd)
	S(ibv_qp_init_attr_ex, xrcd) S(ibv_qp_init_attr_ex, create_flags)
	S(ibv_qp_init_attr_ex, max_tso_header) S(ibv_qp_init_attr_ex, rwq_ind_tbl)
	S(ibv_qp_init_attr_ex, rx_hash_conf) S(ibv_qp_init_attr_ex, source_qpn)
	S(ibv_qp_init_attr_ex, send_ops_flags)

	ST(ibv_qp_attr)
	S(ibv_qp_attr, qp_state) S(ibv_qp_attr, cur_qp_state) S(ibv_qp_attr, path_mtu)
	S(ibv_qp_attr, path_mig_state) S(ibv_qp_attr, qkey) S(ibv_qp_attr, rq_psn)
	S(ibv_qp_attr, sq_psn) S(ibv_qp_attr, dest_qp_num) S(ibv_qp_attr, qp_access_flags)
	S(ibv_qp_attr, cap) S(ibv_qp_attr, ah_attr) S(ibv_qp_attr, alt_ah_attr)
	S(ibv_qp_attr, pkey_index) S(ibv_qp_attr, alt_pkey_index)
	S(ibv_qp_attr, en_sqd_async_notify) S(ibv_qp_attr, sq_draining)
	S(ibv_qp_attr, max_rd_atomic) S(ibv_qp_attr, max_dest_rd_atomic)
	S(ibv_qp_attr, min_rnr_timer) S(ibv_qp_attr, port_num) S(ibv_qp_attr, timeout)
	S(ibv_qp_attr, retry_cnt) S(ibv_qp_attr, rnr_retry) S(ibv_qp_attr, alt_port_num)
	S(ibv_qp_attr, alt_timeout) S(ibv_qp_attr, rate_limit)

	ST(ibv_sge)
	S(ibv_sge, addr) S(ibv_sge, length) S(ibv_sge, lkey)

	ST(ibv_send_wr)
	S(ibv_send_wr, wr_id) S(ibv_send_wr, next) S(ibv_send_wr, sg_list)
	S(ibv_send_wr, num_sge) S(ibv_send_wr, opcode) S(ibv_send_wr, send_flags)
	S(ibv_send_wr, imm_data) S(ibv_send_wr, invalidate_rkey)
	S(ibv_send_wr, wr)
	S(ibv_send_wr, wr.rdma) S(ibv_send_wr, wr.rdma.remote_addr) S(ibv_send_wr, wr.rdma.rkey)
	S(ibv_send_wr, wr.atomic) S(ibv_send_wr, wr.atomic.remote_addr)
	S(ibv_send_wr, wr.atomic.compare_add) S(ibv_send_wr, wr.atomic.swap)
	S(ibv_send_wr, wr.atomic.rkey)
	S(ibv_send_wr, wr.ud) S(ibv_send_wr, wr.ud.ah) S(ibv_send_wr, wr.ud.remote_qpn)
	S(ibv_send_wr, wr.ud.remote_qkey)
	S(ibv_send_wr, qp_type) S(ibv_send_wr, qp_type.xrc) S(ibv_send_wr, qp_type.xrc.remote_srqn)
	S(ibv_send_wr, bind_mw) S(ibv_send_wr, bind_mw.mw) S(ibv_send_wr, bind_mw.rkey)
	S(ibv_send_wr, bind_mw.bind_info) S(ibv_send_wr, bind_mw.bind_info.mr)
	S(ibv_send_wr, bind_mw.bind_info.addr) S(ibv_send_wr, bind_mw.bind_info.length)
	S(ibv_send_wr, bind_mw.bind_info.mw_access_flags)
	S(ibv_send_wr, tso) S(ibv_send_wr, tso.hdr) S(ibv_send_wr, tso.hdr_sz)
	S(ibv_send_wr, tso.mss)

	ST(ibv_recv_wr)
	S(ibv_recv_wr, wr_id) S(ibv_recv_wr, next) S(ibv_recv_wr, sg_list)
	S(ibv_recv_wr, num_sge)

	ST(ibv_wc)
	S(ibv_wc, wr_id) S(ibv_wc, status) S(ibv_wc, opcode) S(ibv_wc, vendor_err)
	S(ibv_wc, byte_len) S(ibv_wc, imm_data) S(ibv_wc, invalidated_rkey) S(ibv_wc, qp_num)
	S(ibv_wc, src_qp) S(ibv_wc, wc_flags) S(ibv_wc, pkey_index) S(ibv_wc, slid)
	S(ibv_wc, sl) S(ibv_wc, dlid_path_bits)

	ST(ibv_async_event)
	S(ibv_async_event, element) S(ibv_async_event, element.cq)
	S(ibv_async_event, element.qp) S(ibv_async_event, element.srq)
	S(ibv_async_event, element.wq) S(ibv_async_event, element.port_num)
	S(ibv_async_event, event_type)

	ST(ibv_sa_path_rec)
	S(ibv_sa_path_rec, dgid) S(ibv_sa_path_rec, sgid) S(ibv_sa_path_rec, dlid)
	S(ibv_sa_path_rec, slid) S(ibv_sa_path_rec, raw_traffic) S(ibv_sa_path_rec, flow_label)
	S(ibv_sa_path_rec, hop_limit) S(ibv_sa_path_rec, traffic_class)
	S(ibv_sa_path_rec, reversible) S(ibv_sa_path_rec, numb_path) S(ibv_sa_path_rec, pkey)
	S(ibv_sa_path_rec, sl) S(ibv_sa_path_rec, mtu_selector) S(ibv_sa_path_rec, mtu)
	S(ibv_sa_path_rec, rate_selector) S(ibv_sa_path_rec, rate)
	S(ibv_sa_path_rec, packet_life_time_selector) S(ibv_sa_path_rec, packet_life_time)
	S(ibv_sa_path_rec, preference)

	ST(rdma_event_channel)
	S(rdma_event_channel, fd)

	ST(rdma_ib_addr)
	S(rdma_ib_addr, sgid) S(rdma_ib_addr, dgid) S(rdma_ib_addr, pkey)

	ST(rdma_addr)
	S(rdma_addr, src_addr) S(rdma_addr, src_sin) S(rdma_addr, src_sin6)
	S(rdma_addr, src_storage) S(rdma_addr, dst_addr) S(rdma_addr, dst_sin)
	S(rdma_addr, dst_sin6) S(rdma_addr, dst_storage) S(rdma_addr, addr)
	S(rdma_addr, addr.ibaddr) S(rdma_addr, addr.ibaddr.sgid) S(rdma_addr, addr.ibaddr.dgid)
	S(rdma_addr, addr.ibaddr.pkey)

	ST(rdma_route)
	S(rdma_route, addr) S(rdma_route, path_rec) S(rdma_route, num_paths)

	ST(rdma_cm_id)
	S(rdma_cm_id, verbs) S(rdma_cm_id, channel) S(rdma_cm_id, context) S(rdma_cm_id, qp)
	S(rdma_cm_id, route) S(rdma_cm_id, route.addr.src_addr) S(rdma_cm_id, route.addr.dst_addr)
	S(rdma_cm_id, route.addr.addr) S(rdma_cm_id, route.path_rec)
	S(rdma_cm_id, route.num_paths) S(rdma_cm_id, ps) S(rdma_cm_id, port_num)
	S(rdma_cm_id, event) S(rdma_cm_id, send_cq_channel) S(rdma_cm_id, send_cq)
	S(rdma_cm_id, recv_cq_channel) S(rdma_cm_id, recv_cq) S(rdma_cm_id, srq)
	S(rdma_cm_id, pd) S(rdma_cm_id, qp_type)

	ST(rdma_conn_param)
	S(rdma_conn_param, private_data) S(rdma_conn_param, private_data_len)
	S(rdma_conn_param, responder_resources) S(rdma_conn_param, initiator_depth)
	S(rdma_conn_param, flow_control) S(rdma_conn_param, retry_count)
	S(rdma_conn_param, rnr_retry_count) S(rdma_conn_param, srq) S(rdma_conn_param, qp_num)

	ST(rdma_ud_param)
	S(rdma_ud_param, private_data) S(rdma_ud_param, private_data_len)
	S(rdma_ud_param, ah_attr) S(rdma_ud_param, qp_num) S(rdma_ud_param, qkey)

	ST(rdma_cm_event)
	S(rdma_cm_event, id) S(rdma_cm_event, listen_id) S(rdma_cm_event, event)
	S(rdma_cm_event, status) S(rdma_cm_event, param)
	S(rdma_cm_event, param.conn) S(rdma_cm_event, param.conn.private_data)
	S(rdma_cm_event, param.conn.private_data_len) S(rdma_cm_event, param.conn.qp_num)
	S(rdma_cm_event, param.ud) S(rdma_cm_event, param.ud.private_data)
	S(rdma_cm_event, param.ud.private_data_len) S(rdma_cm_event, param.ud.ah_attr)
	S(rdma_cm_event, param.ud.qp_num) S(rdma_cm_event, param.ud.qkey)

	ST(rdma_addrinfo)
	S(rdma_addrinfo, ai_flags) S(rdma_addrinfo, ai_family) S(rdma_addrinfo, ai_qp_type)
	S(rdma_addrinfo, ai_port_space) S(rdma_addrinfo, ai_src_len)
	S(rdma_addrinfo, ai_dst_len) S(rdma_addrinfo, ai_src_addr)
	S(rdma_addrinfo, ai_dst_addr) S(rdma_addrinfo, ai_src_canonname)
	S(rdma_addrinfo, ai_dst_canonname) S(rdma_addrinfo, ai_route_len)
	S(rdma_addrinfo, ai_route) S(rdma_addrinfo, ai_connect_len)
	S(rdma_addrinfo, ai_connect) S(rdma_addrinfo, ai_next)

	ST(rdma_cm_join_mc_attr_ex)
	S(rdma_cm_join_mc_attr_ex, comp_mask) S(rdma_cm_join_mc_attr_ex, join_flags)
	S(rdma_cm_join_mc_attr_ex, addr)
}

static void constants(void)
{
	CP(__VERBS_ABI_IS_EXTENDED)
	C(IBV_GID_TYPE_IB) C(IBV_GID_TYPE_ROCE_V1) C(IBV_GID_TYPE_ROCE_V2)

	C(IBV_NODE_UNKNOWN) C(IBV_NODE_CA) C(IBV_NODE_SWITCH) C(IBV_NODE_ROUTER)
	C(IBV_NODE_RNIC) C(IBV_NODE_USNIC) C(IBV_NODE_USNIC_UDP) C(IBV_NODE_UNSPECIFIED)

	C(IBV_TRANSPORT_UNKNOWN) C(IBV_TRANSPORT_IB) C(IBV_TRANSPORT_IWARP)
	C(IBV_TRANSPORT_USNIC) C(IBV_TRANSPORT_USNIC_UDP) C(IBV_TRANSPORT_UNSPECIFIED)

	C(IBV_ATOMIC_NONE) C(IBV_ATOMIC_HCA) C(IBV_ATOMIC_GLOB)

	C(IBV_MTU_256) C(IBV_MTU_512) C(IBV_MTU_1024) C(IBV_MTU_2048) C(IBV_MTU_4096)

	C(IBV_PORT_NOP) C(IBV_PORT_DOWN) C(IBV_PORT_INIT) C(IBV_PORT_ARMED)
	C(IBV_PORT_ACTIVE) C(IBV_PORT_ACTIVE_DEFER)

	C(IBV_LINK_LAYER_UNSPECIFIED) C(IBV_LINK_LAYER_INFINIBAND) C(IBV_LINK_LAYER_ETHERNET)
	C(IBV_PORT_CM_SUP) C(IBV_PORT_IP_BASED_GIDS)
	C(IBV_SYSFS_NAME_MAX) C(IBV_SYSFS_PATH_MAX)

	C(IBV_EVENT_CQ_ERR) C(IBV_EVENT_QP_FATAL) C(IBV_EVENT_QP_REQ_ERR)
	C(IBV_EVENT_QP_ACCESS_ERR) C(IBV_EVENT_COMM_EST) C(IBV_EVENT_SQ_DRAINED)
	C(IBV_EVENT_PATH_MIG) C(IBV_EVENT_PATH_MIG_ERR) C(IBV_EVENT_DEVICE_FATAL)
	C(IBV_EVENT_PORT_ACTIVE) C(IBV_EVENT_PORT_ERR) C(IBV_EVENT_LID_CHANGE)
	C(IBV_EVENT_PKEY_CHANGE) C(IBV_EVENT_SM_CHANGE) C(IBV_EVENT_SRQ_ERR)
	C(IBV_EVENT_SRQ_LIMIT_REACHED) C(IBV_EVENT_QP_LAST_WQE_REACHED)
	C(IBV_EVENT_CLIENT_REREGISTER) C(IBV_EVENT_GID_CHANGE) C(IBV_EVENT_WQ_FATAL)

	C(IBV_WC_SUCCESS) C(IBV_WC_LOC_LEN_ERR) C(IBV_WC_LOC_QP_OP_ERR)
	C(IBV_WC_LOC_EEC_OP_ERR) C(IBV_WC_LOC_PROT_ERR) C(IBV_WC_WR_FLUSH_ERR)
	C(IBV_WC_MW_BIND_ERR) C(IBV_WC_BAD_RESP_ERR) C(IBV_WC_LOC_ACCESS_ERR)
	C(IBV_WC_REM_INV_REQ_ERR) C(IBV_WC_REM_ACCESS_ERR) C(IBV_WC_REM_OP_ERR)
	C(IBV_WC_RETRY_EXC_ERR) C(IBV_WC_RNR_RETRY_EXC_ERR) C(IBV_WC_LOC_RDD_VIOL_ERR)
	C(IBV_WC_REM_INV_RD_REQ_ERR) C(IBV_WC_REM_ABORT_ERR) C(IBV_WC_INV_EECN_ERR)
	C(IBV_WC_INV_EEC_STATE_ERR) C(IBV_WC_FATAL_ERR) C(IBV_WC_RESP_TIMEOUT_ERR)
	C(IBV_WC_GENERAL_ERR) C(IBV_WC_TM_ERR) C(IBV_WC_TM_RNDV_INCOMPLETE)

	C(IBV_WC_SEND) C(IBV_WC_RDMA_WRITE) C(IBV_WC_RDMA_READ) C(IBV_WC_COMP_SWAP)
	C(IBV_WC_FETCH_ADD) C(IBV_WC_BIND_MW) C(IBV_WC_LOCAL_INV) C(IBV_WC_TSO)
	C(IBV_WC_ATOMIC_WRITE) C(IBV_WC_RECV) C(IBV_WC_RECV_RDMA_WITH_IMM) C(IBV_WC_TM_ADD)
	C(IBV_WC_TM_DEL) C(IBV_WC_TM_SYNC) C(IBV_WC_TM_RECV) C(IBV_WC_TM_NO_TAG)
	C(IBV_WC_DRIVER1) C(IBV_WC_DRIVER2) C(IBV_WC_DRIVER3)

	C(IBV_WC_GRH) C(IBV_WC_WITH_IMM) C(IBV_WC_IP_CSUM_OK_SHIFT) C(IBV_WC_IP_CSUM_OK)
	C(IBV_WC_WITH_INV) C(IBV_WC_TM_SYNC_REQ) C(IBV_WC_TM_MATCH) C(IBV_WC_TM_DATA_VALID)

	C(IBV_ACCESS_LOCAL_WRITE) C(IBV_ACCESS_REMOTE_WRITE) C(IBV_ACCESS_REMOTE_READ)
	C(IBV_ACCESS_REMOTE_ATOMIC) C(IBV_ACCESS_MW_BIND) C(IBV_ACCESS_ZERO_BASED)
	C(IBV_ACCESS_ON_DEMAND) C(IBV_ACCESS_HUGETLB) C(IBV_ACCESS_OPTIONAL_FIRST)
	C(IBV_ACCESS_RELAXED_ORDERING) C(IB_UVERBS_ACCESS_OPTIONAL_LAST)
	C(IBV_ACCESS_OPTIONAL_RANGE)

	C(IBV_MW_TYPE_1) C(IBV_MW_TYPE_2)
	C(IBV_SRQ_MAX_WR) C(IBV_SRQ_LIMIT)

	C(IBV_QPT_RC) C(IBV_QPT_UC) C(IBV_QPT_UD) C(IBV_QPT_RAW_PACKET) C(IBV_QPT_XRC_SEND)
	C(IBV_QPT_XRC_RECV) C(IBV_QPT_DRIVER)

	C(IBV_QP_INIT_ATTR_PD) C(IBV_QP_INIT_ATTR_XRCD) C(IBV_QP_INIT_ATTR_CREATE_FLAGS)
	C(IBV_QP_INIT_ATTR_MAX_TSO_HEADER) C(IBV_QP_INIT_ATTR_IND_TABLE)
	C(IBV_QP_INIT_ATTR_RX_HASH) C(IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
	C(IBV_QP_EX_WITH_RDMA_WRITE) C(IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM) C(IBV_QP_EX_WITH_SEND)
	C(IBV_QP_EX_WITH_SEND_WITH_IMM) C(IBV_QP_EX_WITH_RDMA_READ) C(IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP)
	C(IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD) C(IBV_QP_EX_WITH_LOCAL_INV) C(IBV_QP_EX_WITH_BIND_MW)
	C(IBV_QP_EX_WITH_SEND_WITH_INV) C(IBV_QP_EX_WITH_TSO) C(IBV_QP_EX_WITH_ATOMIC_WRITE)

	C(IBV_QP_STATE) C(IBV_QP_CUR_STATE) C(IBV_QP_EN_SQD_ASYNC_NOTIFY)
	C(IBV_QP_ACCESS_FLAGS) C(IBV_QP_PKEY_INDEX) C(IBV_QP_PORT) C(IBV_QP_QKEY)
	C(IBV_QP_AV) C(IBV_QP_PATH_MTU) C(IBV_QP_TIMEOUT) C(IBV_QP_RETRY_CNT)
	C(IBV_QP_RNR_RETRY) C(IBV_QP_RQ_PSN) C(IBV_QP_MAX_QP_RD_ATOMIC) C(IBV_QP_ALT_PATH)
	C(IBV_QP_MIN_RNR_TIMER) C(IBV_QP_SQ_PSN) C(IBV_QP_MAX_DEST_RD_ATOMIC)
	C(IBV_QP_PATH_MIG_STATE) C(IBV_QP_CAP) C(IBV_QP_DEST_QPN) C(IBV_QP_RATE_LIMIT)

	C(IBV_QPS_RESET) C(IBV_QPS_INIT) C(IBV_QPS_RTR) C(IBV_QPS_RTS) C(IBV_QPS_SQD)
	C(IBV_QPS_SQE) C(IBV_QPS_ERR) C(IBV_QPS_UNKNOWN)

	C(IBV_MIG_MIGRATED) C(IBV_MIG_REARM) C(IBV_MIG_ARMED)

	C(IBV_WR_RDMA_WRITE) C(IBV_WR_RDMA_WRITE_WITH_IMM) C(IBV_WR_SEND)
	C(IBV_WR_SEND_WITH_IMM) C(IBV_WR_RDMA_READ) C(IBV_WR_ATOMIC_CMP_AND_SWP)
	C(IBV_WR_ATOMIC_FETCH_AND_ADD) C(IBV_WR_LOCAL_INV) C(IBV_WR_BIND_MW)
	C(IBV_WR_SEND_WITH_INV) C(IBV_WR_TSO) C(IBV_WR_DRIVER1) C(IBV_WR_ATOMIC_WRITE)

	C(IBV_SEND_FENCE) C(IBV_SEND_SIGNALED) C(IBV_SEND_SOLICITED) C(IBV_SEND_INLINE)
	C(IBV_SEND_IP_CSUM)

	C(RDMA_CM_EVENT_ADDR_RESOLVED) C(RDMA_CM_EVENT_ADDR_ERROR)
	C(RDMA_CM_EVENT_ROUTE_RESOLVED) C(RDMA_CM_EVENT_ROUTE_ERROR)
	C(RDMA_CM_EVENT_CONNECT_REQUEST) C(RDMA_CM_EVENT_CONNECT_RESPONSE)
	C(RDMA_CM_EVENT_CONNECT_ERROR) C(RDMA_CM_EVENT_UNREACHABLE) C(RDMA_CM_EVENT_REJECTED)
	C(RDMA_CM_EVENT_ESTABLISHED) C(RDMA_CM_EVENT_DISCONNECTED)
	C(RDMA_CM_EVENT_DEVICE_REMOVAL) C(RDMA_CM_EVENT_MULTICAST_JOIN)
	C(RDMA_CM_EVENT_MULTICAST_ERROR) C(RDMA_CM_EVENT_ADDR_CHANGE)
	C(RDMA_CM_EVENT_TIMEWAIT_EXIT)

	C(RDMA_PS_IPOIB) C(RDMA_PS_TCP) C(RDMA_PS_UDP) C(RDMA_PS_IB)
	C(RDMA_IB_IP_PS_MASK) C(RDMA_IB_IP_PORT_MASK) C(RDMA_IB_IP_PS_TCP)
	C(RDMA_IB_IP_PS_UDP) C(RDMA_IB_PS_IB)
	C(RDMA_UDP_QKEY) C(RDMA_MAX_RESP_RES) C(RDMA_MAX_INIT_DEPTH)

	C(RDMA_OPTION_ID) C(RDMA_OPTION_IB) C(RDMA_OPTION_ID_TOS) C(RDMA_OPTION_ID_REUSEADDR)
	C(RDMA_OPTION_ID_AFONLY) C(RDMA_OPTION_ID_ACK_TIMEOUT) C(RDMA_OPTION_IB_PATH)

	C(RAI_PASSIVE) C(RAI_NUMERICHOST) C(RAI_NOROUTE) C(RAI_FAMILY)

	C(RDMA_CM_JOIN_MC_ATTR_ADDRESS) C(RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS)
	C(RDMA_CM_JOIN_MC_ATTR_RESERVED)
	C(RDMA_MC_JOIN_FLAG_FULLMEMBER) C(RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
	C(RDMA_MC_JOIN_FLAG_RESERVED)
}

int main(void)
{
	types();
	constants();
	return fflush(stdout) != 0;
}
