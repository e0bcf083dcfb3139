//! The one device, `roce0`, and its port as rxe presents them: `ibv_get_device_list`,
//! `ibv_open_device`, the queries. Answered from the configuration alone (no socket is opened
//! to list or query the device: `ibv_devinfo` works while another process holds the port).
//!
//! The GID table is rxe's: GID 0 is the link-local address made from the MAC (EUI-64), GID 1
//! the port's address (IPv4-mapped for IPv4), both RoCEv2; so `-g 1` / `-x 1` mean the same as
//! against rxe.

use core::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;

use roce_wire::Gid;

use crate::abi::*;
use crate::ffi::{boundary, null_errno, set_errno};
use crate::port::{port, PortInfo, GID_TABLE_LEN};

/// The device object (one per process).
struct DeviceBox(*mut ibv_device);
// SAFETY: the device is written once, before it is shared, and never freed.
unsafe impl Send for DeviceBox {}
// SAFETY: as above; readers only read.
unsafe impl Sync for DeviceBox {}

static DEVICE: OnceLock<DeviceBox> = OnceLock::new();

/// The device's name.
pub const DEVICE_NAME: &str = "roce0";

fn copy_c(dst: &mut [c_char], s: &str) {
    for (d, b) in dst.iter_mut().zip(s.bytes().chain(std::iter::once(0))) {
        *d = b as c_char;
    }
}

fn device() -> *mut ibv_device {
    DEVICE
        .get_or_init(|| {
            // SAFETY: ibv_device is plain C data; all-zero is a valid value for it.
            let mut d: Box<ibv_device> = Box::new(unsafe { std::mem::zeroed() });
            d.node_type = IBV_NODE_CA;
            d.transport_type = IBV_TRANSPORT_IB;
            copy_c(&mut d.name, DEVICE_NAME);
            copy_c(&mut d.dev_name, "uverbs0");
            copy_c(&mut d.dev_path, "/sys/class/infiniband_verbs/uverbs0");
            copy_c(&mut d.ibdev_path, "/sys/class/infiniband/roce0");
            DeviceBox(Box::into_raw(d))
        })
        .0
}

/// Whether `dev` is our device.
pub fn is_ours(dev: *const ibv_device) -> bool {
    !dev.is_null() && DEVICE.get().is_some_and(|d| std::ptr::eq(d.0, dev))
}

/// `ibv_get_device_list`: `roce0` when the configuration gives a port, else an empty list.
///
/// # Safety
/// `num` is NULL or points to an int.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device {
    boundary("ibv_get_device_list", std::ptr::null_mut(), || {
        let list: Vec<*mut ibv_device> = if port().is_some() { vec![device()] } else { Vec::new() };
        if !num.is_null() {
            // SAFETY: the caller's int.
            unsafe { *num = list.len() as c_int };
        }
        crate::ffi::null_terminated(list)
    })
}

/// `ibv_free_device_list`.
///
/// # Safety
/// `list` came from [`ibv_get_device_list`].
#[no_mangle]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    // SAFETY: the caller's list from ibv_get_device_list.
    boundary("ibv_free_device_list", (), || unsafe { crate::ffi::free_null_terminated(list) })
}

/// `ibv_get_device_name`.
///
/// # Safety
/// `dev` is a device of the list.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_name(dev: *mut ibv_device) -> *const c_char {
    if !is_ours(dev) {
        return null_errno::<c_char>(libc::EINVAL);
    }
    // SAFETY: our device, alive for the process.
    unsafe { (*dev).name.as_ptr() }
}

/// `ibv_get_device_guid`: the node GUID (network order).
///
/// # Safety
/// `dev` is a device of the list.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_guid(dev: *mut ibv_device) -> u64 {
    match (is_ours(dev), port()) {
        (true, Some(p)) => p.node_guid_be(),
        _ => 0,
    }
}

/// `ibv_get_device_index`: 0 for `roce0`, -1 otherwise.
///
/// # Safety
/// `dev` is a device of the list.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_index(dev: *mut ibv_device) -> c_int {
    if is_ours(dev) {
        0
    } else {
        -1
    }
}

/// `ibv_open_device`: a context whose ops are the data-path verbs (the inline
/// `ibv_post_send` & co. call through them).
///
/// # Safety
/// `dev` is a device of the list.
#[no_mangle]
pub unsafe extern "C" fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context {
    boundary("ibv_open_device", std::ptr::null_mut(), || {
        if !is_ours(dev) || port().is_none() {
            return null_errno(libc::ENODEV);
        }
        open_context()
    })
}

/// A new context on our device: the `ibv_context` at the end of a `verbs_context`, as
/// libibverbs allocates every context, so that the inlines that look for an extended op
/// (`ibv_create_qp_ex`) find ours; the ops left NULL send them to their legacy path.
pub fn open_context() -> *mut ibv_context {
    // SAFETY: verbs_context is plain C data (pointers, ints, a mutex); all-zero is valid for it.
    let mut v: Box<verbs_context> = Box::new(unsafe { std::mem::zeroed() });
    v.sz = std::mem::size_of::<verbs_context>();
    v.create_qp_ex = Some(crate::qp_ex::create_qp_ex);
    v.open_xrcd = Some(crate::xrcd::open_xrcd);
    v.close_xrcd = Some(crate::xrcd::close_xrcd);
    v.create_srq_ex = Some(crate::xrc::create_srq_ex);
    v.get_srq_num = Some(crate::xrc::get_srq_num);
    let c = &mut v.context;
    c.device = device();
    c.ops = crate::verbs::context_ops();
    c.ops.alloc_mw = Some(crate::mw::alloc_mw);
    c.ops.bind_mw = Some(crate::mw::bind_mw);
    c.ops.dealloc_mw = Some(crate::mw::dealloc_mw);
    c.cmd_fd = -1;
    c.async_fd = crate::queues::async_fd();
    c.num_comp_vectors = 1;
    // SAFETY: initialising the context's own mutex in place.
    unsafe { libc::pthread_mutex_init(&mut c.mutex, std::ptr::null()) };
    c.abi_compat = __VERBS_ABI_IS_EXTENDED as *mut c_void;
    let v = Box::into_raw(v);
    // SAFETY: the verbs_context just boxed; its context lives as long as it does.
    unsafe { &raw mut (*v).context }
}

/// The process's default context (`rdma_cm_id.verbs`), opened once.
pub fn default_context() -> *mut ibv_context {
    struct Ctx(*mut ibv_context);
    // SAFETY: written once, then only read.
    unsafe impl Send for Ctx {}
    // SAFETY: as above.
    unsafe impl Sync for Ctx {}
    static CTX: OnceLock<Ctx> = OnceLock::new();
    CTX.get_or_init(|| Ctx(open_context())).0
}

/// `ibv_close_device`.
///
/// # Safety
/// `ctx` came from [`ibv_open_device`].
#[no_mangle]
pub unsafe extern "C" fn ibv_close_device(ctx: *mut ibv_context) -> c_int {
    boundary("ibv_close_device", -1, || {
        if ctx.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        // The default context of the CM ids lives as long as the process.
        if std::ptr::eq(ctx, default_context()) {
            return 0;
        }
        // SAFETY: the context of a verbs_context boxed by open_context, not used after close.
        unsafe {
            let v = ctx.byte_sub(std::mem::offset_of!(verbs_context, context)).cast::<verbs_context>();
            drop(Box::from_raw(v));
        }
        0
    })
}

/// `ibv_query_device`, with rxe's limits (rxe_param.h).
///
/// # Safety
/// `attr` points to an `ibv_device_attr`.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_device(ctx: *mut ibv_context, attr: *mut ibv_device_attr) -> c_int {
    boundary("ibv_query_device", libc::EIO, || {
        let Some(p) = port() else { return libc::ENODEV };
        if ctx.is_null() || attr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: plain C data.
        let mut a: ibv_device_attr = unsafe { std::mem::zeroed() };
        copy_c(&mut a.fw_ver, env!("CARGO_PKG_VERSION"));
        a.node_guid = p.node_guid_be();
        a.sys_image_guid = p.node_guid_be();
        a.max_mr_size = u64::MAX;
        a.page_size_cap = 0xffff_f000;
        a.vendor_id = 0xffffff; // rxe's: no vendor, so programs take the plain verbs path
        a.vendor_part_id = 0;
        a.hw_ver = 0;
        a.max_qp = 0x10000;
        a.max_qp_wr = 0x4000;
        // XRC is roce's beyond rxe (which has none): announced so that programs that check
        // the flag before `ibv_open_xrcd` use it.
        a.device_cap_flags = IBV_DEVICE_XRC;
        a.max_sge = 32;
        a.max_sge_rd = 32;
        a.max_cq = 0x4000;
        a.max_cqe = (1 << 15) - 1;
        a.max_mr = 0x40000;
        a.max_pd = 0x7ffc;
        a.max_qp_rd_atom = 128;
        a.max_res_rd_atom = 0x3f000;
        a.max_qp_init_rd_atom = 128;
        a.atomic_cap = IBV_ATOMIC_HCA;
        a.max_mw = 0;
        a.max_mcast_grp = 8192;
        a.max_mcast_qp_attach = 56;
        a.max_total_mcast_qp_attach = 0x70000;
        a.max_ah = 0x7fff;
        a.max_srq = 0x10000;
        a.max_srq_wr = 0x4000;
        a.max_srq_sge = 27;
        a.max_pkeys = 1;
        a.local_ca_ack_delay = 15;
        a.phys_port_cnt = 1;
        // SAFETY: the caller's struct.
        unsafe { *attr = a };
        0
    })
}

/// The port's attributes as rxe reports them.
pub fn port_attr(p: &PortInfo) -> ibv_port_attr {
    ibv_port_attr {
        state: IBV_PORT_ACTIVE,
        max_mtu: IBV_MTU_4096,
        active_mtu: p.active_mtu,
        gid_tbl_len: GID_TABLE_LEN,
        port_cap_flags: IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS,
        max_msg_sz: 0x800000,
        bad_pkey_cntr: 0,
        qkey_viol_cntr: 0,
        pkey_tbl_len: 1,
        lid: 0,
        sm_lid: 0,
        lmc: 0,
        max_vl_num: 1,
        sm_sl: 0,
        subnet_timeout: 0,
        init_type_reply: 0,
        active_width: 1,
        active_speed: 1,
        phys_state: 5, // LinkUp
        link_layer: IBV_LINK_LAYER_ETHERNET,
        flags: 0,
        port_cap_flags2: 0,
    }
}

/// `ibv_query_port` (the inline `___ibv_query_port` calls it: our contexts are not extended).
///
/// # Safety
/// `attr` points to an `ibv_port_attr`.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_port(ctx: *mut ibv_context, port_num: u8, attr: *mut c_void) -> c_int {
    boundary("ibv_query_port", libc::EIO, || {
        let Some(p) = port() else { return libc::ENODEV };
        if ctx.is_null() || attr.is_null() || port_num != 1 {
            return libc::EINVAL;
        }
        // SAFETY: the caller's ibv_port_attr (52 bytes, the layout test checks it).
        unsafe { *(attr.cast::<ibv_port_attr>()) = port_attr(p) };
        0
    })
}

/// `ibv_query_gid`: rxe's table; an empty entry is all zeros.
///
/// # Safety
/// `gid` points to 16 bytes.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid(ctx: *mut ibv_context, port_num: u8, index: c_int, gid: *mut ibv_gid) -> c_int {
    boundary("ibv_query_gid", -1, || {
        let Some(p) = port() else { return crate::ffi::fail_errno(libc::ENODEV) };
        if ctx.is_null() || gid.is_null() || port_num != 1 || !(0..GID_TABLE_LEN).contains(&index) {
            return crate::ffi::fail_errno(libc::EINVAL);
        }
        let g = p.gids.get(index as usize).copied().unwrap_or(Gid::ZERO);
        // SAFETY: the caller's 16 bytes.
        unsafe { (*gid).raw = g.0 };
        0
    })
}

/// `_ibv_query_gid_ex`: one GID entry (RoCEv2); ENODATA for an empty one.
///
/// # Safety
/// `entry` points to `entry_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn _ibv_query_gid_ex(
    ctx: *mut ibv_context,
    port_num: u32,
    gid_index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    boundary("_ibv_query_gid_ex", libc::EIO, || {
        let Some(p) = port() else { return libc::ENODEV };
        if ctx.is_null()
            || entry.is_null()
            || flags != 0
            || port_num != 1
            || entry_size < std::mem::size_of::<ibv_gid_entry>()
        {
            return libc::EINVAL;
        }
        let Some(g) = p.gids.get(gid_index as usize) else { return libc::ENODATA };
        // SAFETY: the caller's entry.
        unsafe {
            let e = &mut *entry;
            e.gid.raw = g.0;
            e.gid_index = gid_index;
            e.port_num = 1;
            e.gid_type = IBV_GID_TYPE_ROCE_V2;
            e.ndev_ifindex = p.ifindex;
        }
        0
    })
}

/// `ibv_query_gid_type` (IBVERBS_PRIVATE_34, `ibv_devinfo`): RoCEv2 for every entry, in the
/// sysfs numbering (`enum ibv_gid_type_sysfs`: 0 IB/RoCEv1, 1 RoCEv2).
///
/// # Safety
/// `type_` points to an int.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid_type(ctx: *mut ibv_context, port_num: u8, index: u32, type_: *mut u32) -> c_int {
    boundary("ibv_query_gid_type", -1, || {
        if ctx.is_null() || type_.is_null() || port_num != 1 || index >= GID_TABLE_LEN as u32 {
            return crate::ffi::fail_errno(libc::EINVAL);
        }
        // SAFETY: the caller's int.
        unsafe { *type_ = GID_TYPE_SYSFS_ROCE_V2 };
        0
    })
}

/// `IBV_GID_TYPE_SYSFS_ROCE_V2` of `enum ibv_gid_type_sysfs` (libibverbs/driver.h).
pub const GID_TYPE_SYSFS_ROCE_V2: u32 = 1;

/// `ibv_query_pkey`: the default P_Key at index 0.
///
/// # Safety
/// `pkey` points to a u16.
#[no_mangle]
pub unsafe extern "C" fn ibv_query_pkey(ctx: *mut ibv_context, port_num: u8, index: c_int, pkey: *mut u16) -> c_int {
    if ctx.is_null() || pkey.is_null() || port_num != 1 || index != 0 {
        return crate::ffi::fail_errno(libc::EINVAL);
    }
    // SAFETY: the caller's u16.
    unsafe { *pkey = 0xffffu16.to_be() };
    0
}

/// `ibv_get_pkey_index`: index 0 for the default P_Key.
///
/// # Safety
/// `ctx` is a context.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_pkey_index(ctx: *mut ibv_context, port_num: u8, pkey: u16) -> c_int {
    if !ctx.is_null() && port_num == 1 && u16::from_be(pkey) & 0x7fff == 0x7fff {
        0
    } else {
        crate::ffi::fail_errno(libc::ENOENT)
    }
}

/// `ibv_read_sysfs_file`: our device has no sysfs files; -1 (as for a missing file).
///
/// # Safety
/// Any arguments.
#[no_mangle]
pub unsafe extern "C" fn ibv_read_sysfs_file(
    _dir: *const c_char,
    _file: *const c_char,
    _buf: *mut c_char,
    _size: usize,
) -> c_int {
    crate::ffi::fail_errno(libc::ENOENT)
}
