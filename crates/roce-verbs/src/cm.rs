//! librdmacm over the engine's `rdma_cm_id`s: event channels (a pipe each, so poll/select and
//! O_NONBLOCK work as on the real library), ids, address and route resolution, multicast join
//! and leave, listen/connect/accept/reject for UD (SIDR), `rdma_getaddrinfo`.
//!
//! The engine's thread turns each engine event into a `struct rdma_cm_event` and queues it on
//! the id's channel with a byte on the pipe; `rdma_get_cm_event` reads the byte, takes the
//! event and, on the program's thread, brings the id's addresses up to date (as librdmacm
//! queries the kernel there). Events the kernel does not have (the engine's MULTICAST_LEFT)
//! are not delivered. An id destroyed with events not yet acknowledged is freed at the last
//! acknowledgement.

use core::ffi::{c_char, c_int, c_void};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::sync::atomic::Ordering;
use std::time::Duration;

use roce_cm::{CmId, ConnectParam, PortSpace, QpType};
use roce_wire::mcmember::JoinState;
use roce_wire::Gid;

use crate::abi::*;
use crate::ffi::{boundary, fail_errno, null_errno};
use crate::ids::{addresses, new_channel, new_id, Channel, EventBox, Id, IdLink};
use crate::queues::read_record;
use crate::runtime::{runtime, Engine};
use crate::verbs::{new_ud_qp, Qp};

// ------------------------------------------------------------------------------------------
// Channels

/// `rdma_create_event_channel`: ENODEV when there is no device (no configuration).
#[no_mangle]
pub extern "C" fn rdma_create_event_channel() -> *mut rdma_event_channel {
    boundary("rdma_create_event_channel", std::ptr::null_mut(), || {
        if crate::port::port().is_none() {
            return null_errno(libc::ENODEV);
        }
        match new_channel() {
            Some((c, _)) => c,
            None => null_errno(libc::EMFILE),
        }
    })
}

/// `rdma_destroy_event_channel`.
///
/// # Safety
/// `ch` came from [`rdma_create_event_channel`] and no id uses it.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_event_channel(ch: *mut rdma_event_channel) {
    boundary("rdma_destroy_event_channel", (), || {
        if ch.is_null() {
            return;
        }
        // SAFETY: a Channel of ours.
        let b = unsafe { Box::from_raw(ch.cast::<Channel>()) };
        if let Ok(mut q) = b.shared.queue.lock() {
            for ev in q.drain(..) {
                // SAFETY: events queued by deliver_event, never handed out.
                unsafe { drop(Box::from_raw(ev as *mut EventBox)) };
            }
        }
        // A thread still blocked in rdma_get_cm_event stays blocked, as with the real library
        // (closing a descriptor does not wake a read on it). So does one that gets there just
        // after (rping's event thread, between its DISCONNECTED event and its next call, while
        // the main thread tears down): the channel, both its descriptors and its memory stay,
        // so that late call blocks on a descriptor nobody writes to again, instead of reading
        // a closed descriptor, or one reused by the next open(), and dying on what it reads (a
        // run of Debian's rping as nobody printed "rdma_get_cm_event: No such device" after
        // its DISCONNECT). Two descriptors and a few bytes per channel destroyed.
        std::mem::forget(b);
    })
}

// ------------------------------------------------------------------------------------------
// Ids

/// The process's default PD (`rdma_cm_id.pd` once an id has a device), allocated once.
fn default_pd() -> *mut ibv_pd {
    struct Pd(*mut ibv_pd);
    // SAFETY: written once, then only read.
    unsafe impl Send for Pd {}
    // SAFETY: as above.
    unsafe impl Sync for Pd {}
    static PD: std::sync::OnceLock<Pd> = std::sync::OnceLock::new();
    // SAFETY: our own context.
    PD.get_or_init(|| Pd(unsafe { crate::verbs::ibv_alloc_pd(crate::device::default_context()) })).0
}

/// The `ibv_qp_type` an id of port space `ps` gets when none is named (`rdma_create_id`).
fn qp_type_of(ps: PortSpace) -> u32 {
    match ps {
        PortSpace::Udp | PortSpace::Ipoib => IBV_QPT_UD,
        PortSpace::Tcp | PortSpace::Ib => IBV_QPT_RC,
    }
}

/// The engine's QP type of an `ibv_qp_type` an id may have (librdmacm's `rdma_create_id2`,
/// which `rdma_create_ep` uses with the address info's type).
fn engine_qp_type(t: u32) -> Option<QpType> {
    Some(match t {
        IBV_QPT_RC => QpType::Rc,
        IBV_QPT_UC => QpType::Uc,
        IBV_QPT_UD => QpType::Ud,
        IBV_QPT_XRC_SEND => QpType::XrcIni,
        IBV_QPT_XRC_RECV => QpType::XrcTgt,
        _ => return None,
    })
}

/// The XRC domain librdmacm gives an id's XRC QPs and SRQs when the program names none
/// (`ucma_get_xrcd`: one per device, opened with no file, kept for the process).
fn default_xrcd() -> *mut ibv_xrcd {
    struct Handle(*mut ibv_xrcd);
    // SAFETY: written once, then only read.
    unsafe impl Send for Handle {}
    // SAFETY: as above.
    unsafe impl Sync for Handle {}
    static XRCD: std::sync::Mutex<Option<Handle>> = std::sync::Mutex::new(None);
    let Ok(mut g) = XRCD.lock() else { return std::ptr::null_mut() };
    if let Some(h) = g.as_ref() {
        return h.0;
    }
    let mut attr = ibv_xrcd_init_attr {
        comp_mask: IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
        fd: -1,
        oflags: libc::O_CREAT,
    };
    // SAFETY: our default context and attributes.
    let x = unsafe { crate::xrcd::open_xrcd(crate::device::default_context(), &mut attr) };
    if !x.is_null() {
        *g = Some(Handle(x));
    }
    x
}

/// `rdma_create_id`: an id in IDLE on `channel` (a NULL channel, librdmacm's synchronous
/// mode, comes with the next issue: EINVAL).
///
/// # Safety
/// `channel` is ours; `id` points to a pointer slot.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_id(
    channel: *mut rdma_event_channel,
    id: *mut *mut rdma_cm_id,
    context: *mut c_void,
    ps: u32,
) -> c_int {
    // SAFETY: as the caller's.
    boundary("rdma_create_id", -1, || unsafe { create_id_typed(channel, id, context, ps, None) })
}

/// `rdma_create_id`, or librdmacm's `rdma_create_id2` with an explicit QP type (`qp_type`:
/// `rdma_create_ep` passes the address info's; EINVAL when the port space does not allow it).
///
/// # Safety
/// As [`rdma_create_id`].
unsafe fn create_id_typed(
    channel: *mut rdma_event_channel,
    id: *mut *mut rdma_cm_id,
    context: *mut c_void,
    ps: u32,
    qp_type: Option<u32>,
) -> c_int {
    if id.is_null() {
        return fail_errno(libc::EINVAL);
    }
    let Some(space) = u16::try_from(ps).ok().and_then(PortSpace::from_value) else {
        return fail_errno(libc::EINVAL);
    };
    let ibv_qt = qp_type.unwrap_or_else(|| qp_type_of(space));
    let Some(qt) = engine_qp_type(ibv_qt) else { return fail_errno(libc::EINVAL) };
    // No channel: librdmacm's synchronous mode, a channel of the id's own.
    let sync = channel.is_null();
    let channel = if sync { rdma_create_event_channel() } else { channel };
    if channel.is_null() {
        return -1;
    }
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => return fail_errno(e),
    };
    let cm = match rt.call(move |e| e.d.stack.create_id(space, qt)) {
        Ok(Ok(cm)) => cm,
        Ok(Err(e)) => return fail_errno(e.value()),
        Err(e) => return fail_errno(e),
    };
    // SAFETY: a Channel of ours.
    let shared = unsafe { (*channel.cast::<Channel>()).shared.clone() };
    let p = new_id(cm, channel, shared.clone(), context, ps, ibv_qt);
    // SAFETY: the id just made.
    unsafe { (*p).sync.store(sync, Ordering::Release) };
    let link = IdLink { id_ptr: p as usize, channel: shared };
    let _ = rt.call(move |e| {
        e.ids.insert(cm, link);
    });
    // SAFETY: the caller's slot.
    unsafe { *id = p.cast() };
    0
}

fn id_of<'a>(id: *mut rdma_cm_id) -> Option<&'a mut Id> {
    // SAFETY: an Id of ours (every rdma_cm_id the program has came from us), or NULL.
    (!id.is_null()).then(|| unsafe { &mut *id.cast::<Id>() })
}

/// Run an engine call for an id and map its result to librdmacm's -1/errno.
fn engine_call(
    id: *mut rdma_cm_id,
    f: impl FnOnce(&mut Engine, CmId) -> Result<(), roce_cm::Errno> + Send + 'static,
) -> c_int {
    let Some(i) = id_of(id) else { return fail_errno(libc::EINVAL) };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => return fail_errno(e),
    };
    let cm = i.cm;
    match rt.call(move |e| f(e, cm)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => fail_errno(e.value()),
        Err(e) => fail_errno(e),
    }
}

/// librdmacm's `ucma_complete`: for a synchronous id, wait for the event the call produced
/// (acknowledging the one before), and fail with its status (ECONNREFUSED for REJECTED).
/// An asynchronous id returns 0 at once.
fn complete(id: *mut rdma_cm_id, r: c_int) -> c_int {
    let Some(i) = id_of(id) else { return r };
    if r != 0 || !i.sync.load(Ordering::Acquire) {
        return r;
    }
    if !i.c.event.is_null() {
        // SAFETY: the id's last event, ours.
        unsafe { rdma_ack_cm_event(i.c.event) };
        i.c.event = std::ptr::null_mut();
    }
    let mut ev: *mut rdma_cm_event = std::ptr::null_mut();
    // SAFETY: the id's own channel; a slot for the event.
    if unsafe { rdma_get_cm_event(i.c.channel, &mut ev) } != 0 {
        return -1;
    }
    i.c.event = ev;
    // SAFETY: the event just taken.
    let (kind, status) = unsafe { ((*ev).event, (*ev).status) };
    if status == 0 {
        0
    } else if kind == RDMA_CM_EVENT_REJECTED {
        fail_errno(libc::ECONNREFUSED)
    } else {
        fail_errno(status.abs())
    }
}

/// The engine's view of a socket address (IPv4, IPv6; AF_IB is not supported: EAFNOSUPPORT).
///
/// # Safety
/// `sa` is NULL or points to a sockaddr of its family's size.
pub unsafe fn socket_addr(sa: *const libc::sockaddr) -> Result<Option<SocketAddr>, i32> {
    if sa.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's sockaddr, read as its family says.
    unsafe {
        match i32::from((*sa).sa_family) {
            libc::AF_INET => {
                let s = &*sa.cast::<libc::sockaddr_in>();
                Ok(Some(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)),
                    u16::from_be(s.sin_port),
                ))))
            }
            libc::AF_INET6 => {
                let s = &*sa.cast::<libc::sockaddr_in6>();
                Ok(Some(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(s.sin6_addr.s6_addr),
                    u16::from_be(s.sin6_port),
                    s.sin6_flowinfo,
                    s.sin6_scope_id,
                ))))
            }
            _ => Err(libc::EAFNOSUPPORT),
        }
    }
}

/// Write `a` as a sockaddr into `dst` (a `sockaddr_storage`-sized union).
pub fn write_sockaddr(dst: &mut rdma_sockaddr, a: SocketAddr) {
    // SAFETY: zero is valid for the union.
    *dst = unsafe { std::mem::zeroed() };
    match a {
        SocketAddr::V4(v) => {
            // SAFETY: writing the sockaddr_in member.
            let s = unsafe { &mut dst.sin };
            s.sin_family = libc::AF_INET as libc::sa_family_t;
            s.sin_port = v.port().to_be();
            s.sin_addr.s_addr = u32::from(*v.ip()).to_be();
        }
        SocketAddr::V6(v) => {
            // SAFETY: writing the sockaddr_in6 member.
            let s = unsafe { &mut dst.sin6 };
            s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            s.sin6_port = v.port().to_be();
            s.sin6_addr.s6_addr = v.ip().octets();
            s.sin6_scope_id = v.scope_id();
        }
    }
}

/// Bring an id's device fields and addresses up to date (on the program's thread).
fn refresh_id(i: &mut Id, src: Option<SocketAddr>, dst: Option<SocketAddr>, resolved_route: bool) {
    if let Some(s) = src {
        write_sockaddr(&mut i.c.route.addr.src, s);
        if i.c.verbs.is_null() {
            i.c.verbs = crate::device::default_context();
            i.c.pd = default_pd();
            i.c.port_num = 1;
        }
    }
    if let Some(d) = dst {
        write_sockaddr(&mut i.c.route.addr.dst, d);
    }
    if let (Some(p), Some(s), Some(d)) = (crate::port::port(), src, dst) {
        let (sg, dg) = (Gid::from_ip(s.ip()), Gid::from_ip(d.ip()));
        i.c.route.addr.addr.ibaddr.sgid.raw = sg.0;
        i.c.route.addr.addr.ibaddr.dgid.raw = dg.0;
        i.c.route.addr.addr.ibaddr.pkey = 0xffff;
        if resolved_route {
            i.path.sgid.raw = sg.0;
            i.path.dgid.raw = dg.0;
            i.path.pkey = 0xffffu16.to_be();
            i.path.hop_limit = 64;
            i.path.mtu = p.active_mtu as u8;
            i.path.reversible = 1;
            i.path.numb_path = 1;
            i.c.route.path_rec = &mut *i.path;
            i.c.route.num_paths = 1;
        }
    }
}

/// `rdma_bind_addr`.
///
/// # Safety
/// `id` is ours; `addr` a sockaddr.
#[no_mangle]
pub unsafe extern "C" fn rdma_bind_addr(id: *mut rdma_cm_id, addr: *mut libc::sockaddr) -> c_int {
    boundary("rdma_bind_addr", -1, || {
        // SAFETY: the caller's sockaddr.
        let a = match unsafe { socket_addr(addr) } {
            Ok(Some(a)) => a,
            Ok(None) => return fail_errno(libc::EINVAL),
            Err(e) => return fail_errno(e),
        };
        let Some(i) = id_of(id) else { return fail_errno(libc::EINVAL) };
        let Ok(rt) = runtime() else { return fail_errno(libc::ENODEV) };
        let cm = i.cm;
        match rt.call(move |e| e.d.stack.bind_addr(cm, a).map(|()| addresses(&e.d.stack, cm))) {
            Ok(Ok((src, dst))) => {
                refresh_id(i, src, dst, false);
                0
            }
            Ok(Err(e)) => fail_errno(e.value()),
            Err(e) => fail_errno(e),
        }
    })
}

/// `rdma_resolve_addr`: ADDR_RESOLVED (or ADDR_ERROR) follows on the channel.
///
/// # Safety
/// `id` is ours; `src` NULL or a sockaddr; `dst` a sockaddr.
#[no_mangle]
pub unsafe extern "C" fn rdma_resolve_addr(
    id: *mut rdma_cm_id,
    src: *mut libc::sockaddr,
    dst: *mut libc::sockaddr,
    timeout_ms: c_int,
) -> c_int {
    boundary("rdma_resolve_addr", -1, || {
        let r = (|| {
            // SAFETY: the caller's sockaddrs.
            let (s, d) = match unsafe { (socket_addr(src), socket_addr(dst)) } {
                (Ok(s), Ok(Some(d))) => (s, d),
                (Err(e), _) | (_, Err(e)) => return fail_errno(e),
                _ => return fail_errno(libc::EINVAL),
            };
            let Some(i) = id_of(id) else { return fail_errno(libc::EINVAL) };
            let Ok(rt) = runtime() else { return fail_errno(libc::ENODEV) };
            let cm = i.cm;
            let timeout = Duration::from_millis(timeout_ms.max(0) as u64);
            match rt.call(move |e| {
                let now = e.d.now();
                e.d.stack.resolve_addr(now, cm, s, d, timeout).map(|()| addresses(&e.d.stack, cm))
            }) {
                Ok(Ok((src, dst))) => {
                    refresh_id(i, src, dst, false);
                    0
                }
                Ok(Err(e)) => fail_errno(e.value()),
                Err(e) => fail_errno(e),
            }
        })();
        complete(id, r)
    })
}

/// `rdma_resolve_route`: ROUTE_RESOLVED follows.
///
/// # Safety
/// `id` is ours.
#[no_mangle]
pub unsafe extern "C" fn rdma_resolve_route(id: *mut rdma_cm_id, timeout_ms: c_int) -> c_int {
    boundary("rdma_resolve_route", -1, || {
        let r = {
            let timeout = Duration::from_millis(timeout_ms.max(0) as u64);
            engine_call(id, move |e, cm| {
                let now = e.d.now();
                e.d.stack.resolve_route(now, cm, timeout)
            })
        };
        complete(id, r)
    })
}

/// `rdma_listen`.
///
/// # Safety
/// `id` is ours.
#[no_mangle]
pub unsafe extern "C" fn rdma_listen(id: *mut rdma_cm_id, backlog: c_int) -> c_int {
    boundary("rdma_listen", -1, || engine_call(id, move |e, cm| e.d.stack.listen(cm, backlog.max(0) as u32)))
}

/// The device's most outstanding READs/atomics per QP, as responder and as initiator
/// (`max_qp_rd_atom`, `max_qp_init_rd_atom`: rxe's 128).
const MAX_RD_ATOM: u8 = 128;
/// `RDMA_MAX_RESP_RES` / `RDMA_MAX_INIT_DEPTH`: "as many as the device allows".
const RDMA_MAX: u8 = 0xff;

/// The parameters librdmacm sends for `p` (rdma_connect / rdma_accept): with none, or with
/// RDMA_MAX_RESP_RES / RDMA_MAX_INIT_DEPTH, the `most` (responder resources, initiator
/// depth) it would use — the device's for a connect, the request's offer capped at the
/// device's for an accept; retries 7 and 7 with no parameters (ucma_copy_conn_param_to_kern).
fn connect_param_or(p: *const rdma_conn_param, most: (u8, u8)) -> ConnectParam {
    if p.is_null() {
        return ConnectParam {
            responder_resources: most.0,
            initiator_depth: most.1,
            retry_count: 7,
            rnr_retry_count: 7,
            ..ConnectParam::default()
        };
    }
    let mut c = connect_param(p);
    if c.responder_resources == RDMA_MAX {
        c.responder_resources = most.0;
    }
    if c.initiator_depth == RDMA_MAX {
        c.initiator_depth = most.1;
    }
    c
}

fn connect_param(p: *const rdma_conn_param) -> ConnectParam {
    if p.is_null() {
        return ConnectParam::default();
    }
    // SAFETY: the caller's parameters and their private data.
    unsafe {
        let p = &*p;
        let private_data = if p.private_data.is_null() {
            Vec::new()
        } else {
            std::slice::from_raw_parts(p.private_data.cast::<u8>(), usize::from(p.private_data_len)).to_vec()
        };
        ConnectParam {
            private_data,
            responder_resources: p.responder_resources,
            initiator_depth: p.initiator_depth,
            retry_count: p.retry_count,
            rnr_retry_count: p.rnr_retry_count,
            qp_num: p.qp_num & 0xff_ffff,
        }
    }
}

/// `rdma_connect`: for a UD id, a SIDR request (ESTABLISHED with the service's QPN and Q_Key,
/// or UNREACHABLE, follows).
///
/// # Safety
/// `id` is ours; `param` NULL or connection parameters.
#[no_mangle]
pub unsafe extern "C" fn rdma_connect(id: *mut rdma_cm_id, param: *mut rdma_conn_param) -> c_int {
    boundary("rdma_connect", -1, || {
        let r = {
            let p = connect_param_or(param, (MAX_RD_ATOM, MAX_RD_ATOM));
            engine_call(id, move |e, cm| {
                let now = e.d.now();
                e.d.stack.connect(now, cm, &p)
            })
        };
        complete(id, r)
    })
}

/// `rdma_accept`: for a UD id, the SIDR reply with the id's QP.
///
/// # Safety
/// `id` is ours; `param` NULL or connection parameters.
#[no_mangle]
pub unsafe extern "C" fn rdma_accept(id: *mut rdma_cm_id, param: *mut rdma_conn_param) -> c_int {
    boundary("rdma_accept", -1, || {
        let ud = id_of(id).is_some_and(|i| i.c.qp_type == IBV_QPT_UD);
        let r = {
            let offered = id_of(id).map_or(0, |i| i.offered.load(std::sync::atomic::Ordering::Acquire));
            let most = (((offered >> 8) as u8).min(MAX_RD_ATOM), (offered as u8).min(MAX_RD_ATOM));
            let p = connect_param_or(param, most);
            engine_call(id, move |e, cm| {
                let now = e.d.now();
                e.d.stack.accept(now, cm, &p)
            })
        };
        if ud {
            r
        } else {
            complete(id, r)
        }
    })
}

/// `rdma_reject`.
///
/// # Safety
/// `id` is ours; `data` NULL or `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn rdma_reject(id: *mut rdma_cm_id, data: *const c_void, len: u8) -> c_int {
    boundary("rdma_reject", -1, || {
        let d = if data.is_null() {
            Vec::new()
        } else {
            // SAFETY: the caller's `len` bytes.
            unsafe { std::slice::from_raw_parts(data.cast::<u8>(), usize::from(len)).to_vec() }
        };
        engine_call(id, move |e, cm| e.d.stack.reject(cm, &d))
    })
}

/// `rdma_establish`: the RTU of an active id without a QP whose REP came as
/// CONNECT_RESPONSE, once the program has moved its own QP (`rping -q`); no event follows.
/// EINVAL when the id has a QP (librdmacm) or no REP is waiting.
///
/// # Safety
/// `id` is ours.
#[no_mangle]
pub unsafe extern "C" fn rdma_establish(id: *mut rdma_cm_id) -> c_int {
    boundary("rdma_establish", -1, || {
        let Some(i) = id_of(id) else { return fail_errno(libc::EINVAL) };
        if !i.c.qp.is_null() {
            return fail_errno(libc::EINVAL);
        }
        engine_call(id, |e, cm| e.d.stack.establish(cm))
    })
}

/// `rdma_disconnect`.
///
/// # Safety
/// `id` is ours.
#[no_mangle]
pub unsafe extern "C" fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int {
    boundary("rdma_disconnect", -1, || {
        let r = {
            engine_call(id, |e, cm| {
                let now = e.d.now();
                e.d.stack.disconnect(now, cm)
            })
        };
        complete(id, r)
    })
}

fn free_id(p: *mut Id) {
    // SAFETY: an Id of ours whose last reference this is.
    unsafe { drop(Box::from_raw(p)) };
}

/// `rdma_destroy_id`: leaves the id's groups and ends its connection (the engine's
/// destroy_id), then frees it (at the last acknowledgement if events are still out).
///
/// # Safety
/// `id` is ours; not used after this.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_id(id: *mut rdma_cm_id) -> c_int {
    boundary("rdma_destroy_id", -1, || {
        let Some(i) = id_of(id) else { return fail_errno(libc::EINVAL) };
        let cm = i.cm;
        // A synchronous id's last event is acknowledged here, and its own channel ends with
        // it (librdmacm's rdma_destroy_id and ucma_free_id).
        let own_channel = i.sync.load(Ordering::Acquire).then_some(i.c.channel);
        if own_channel.is_some() && !i.c.event.is_null() {
            // SAFETY: the id's last event, ours.
            unsafe { rdma_ack_cm_event(i.c.event) };
            i.c.event = std::ptr::null_mut();
        }
        if let Some(rt) = crate::runtime::started() {
            let _ = rt.call(move |e| {
                let now = e.d.now();
                let _ = e.d.stack.destroy_id(now, cm);
                e.ids.remove(&cm);
            });
        }
        i.destroyed.store(true, Ordering::Release);
        if i.outstanding.load(Ordering::Acquire) == 0 {
            free_id(id.cast());
        }
        if let Some(ch) = own_channel {
            // SAFETY: the channel the id was created with, no other id's.
            unsafe { rdma_destroy_event_channel(ch) };
        }
        0
    })
}

// ------------------------------------------------------------------------------------------
// QPs of ids

/// A CQ of `size` entries and its completion channel for an id, the id as the CQ's context.
fn id_cq(i: &Id, id: *mut rdma_cm_id, size: u32) -> Result<(*mut ibv_comp_channel, *mut ibv_cq), i32> {
    // SAFETY: the id's context; the channel just made; the id as the context.
    unsafe {
        let ch = crate::verbs::ibv_create_comp_channel(i.c.verbs);
        if ch.is_null() {
            return Err(crate::ffi::errno());
        }
        let cq = crate::verbs::ibv_create_cq(i.c.verbs, size.max(1) as c_int, id.cast(), ch, 0);
        if cq.is_null() {
            let e = crate::ffi::errno();
            crate::verbs::ibv_destroy_comp_channel(ch);
            return Err(e);
        }
        Ok((ch, cq))
    }
}

/// librdmacm's ucma_create_cqs: a receive CQ of `recv` and a send CQ of `send` entries (none
/// for 0), each with its own channel.
fn create_id_cqs(i: &mut Id, id: *mut rdma_cm_id, send: u32, recv: u32) -> Result<(), i32> {
    if recv > 0 {
        let (ch, cq) = id_cq(i, id, recv)?;
        i.c.recv_cq_channel = ch;
        i.c.recv_cq = cq;
    }
    if send > 0 {
        let (ch, cq) = id_cq(i, id, send)?;
        i.c.send_cq_channel = ch;
        i.c.send_cq = cq;
    }
    i.own_cqs.store(true, Ordering::Release);
    Ok(())
}

/// librdmacm's ucma_destroy_cqs: the CQs and channels [`create_id_cqs`] made.
fn destroy_id_cqs(i: &mut Id) {
    if !i.own_cqs.swap(false, Ordering::AcqRel) {
        return;
    }
    // SAFETY: the CQs and channels made for the id, no QP using them any more.
    unsafe {
        if !i.c.recv_cq.is_null() {
            crate::verbs::ibv_destroy_cq(i.c.recv_cq);
        }
        if !i.c.recv_cq_channel.is_null() {
            crate::verbs::ibv_destroy_comp_channel(i.c.recv_cq_channel);
        }
        if !i.c.send_cq.is_null() && i.c.send_cq != i.c.recv_cq {
            crate::verbs::ibv_destroy_cq(i.c.send_cq);
        }
        if !i.c.send_cq_channel.is_null() && i.c.send_cq_channel != i.c.recv_cq_channel {
            crate::verbs::ibv_destroy_comp_channel(i.c.send_cq_channel);
        }
    }
    i.c.recv_cq = std::ptr::null_mut();
    i.c.recv_cq_channel = std::ptr::null_mut();
    i.c.send_cq = std::ptr::null_mut();
    i.c.send_cq_channel = std::ptr::null_mut();
}

/// `rdma_get_request`: the next connection request of a synchronous listener, with a QP of
/// the endpoint's attributes if `rdma_create_ep` gave some. EINVAL for an asynchronous
/// listener or another event; ECONNREFUSED for REJECTED.
///
/// # Safety
/// `listen` is ours; `id` a pointer slot.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_request(listen: *mut rdma_cm_id, id: *mut *mut rdma_cm_id) -> c_int {
    boundary("rdma_get_request", -1, || {
        let Some(l) = id_of(listen) else { return fail_errno(libc::EINVAL) };
        if id.is_null() || !l.sync.load(Ordering::Acquire) {
            return fail_errno(libc::EINVAL);
        }
        if !l.c.event.is_null() {
            // SAFETY: the listener's last event, ours.
            unsafe { rdma_ack_cm_event(l.c.event) };
            l.c.event = std::ptr::null_mut();
        }
        let mut ev: *mut rdma_cm_event = std::ptr::null_mut();
        // SAFETY: the listener's own channel; a slot.
        if unsafe { rdma_get_cm_event(l.c.channel, &mut ev) } != 0 {
            return -1;
        }
        // SAFETY: the event just taken.
        let (kind, status, child) = unsafe { ((*ev).event, (*ev).status, (*ev).id) };
        let fail = |l: &mut Id, e: i32| {
            l.c.event = ev;
            fail_errno(e)
        };
        if kind == RDMA_CM_EVENT_REJECTED {
            return fail(l, libc::ECONNREFUSED);
        }
        if status != 0 {
            return fail(l, status.abs());
        }
        if kind != RDMA_CM_EVENT_CONNECT_REQUEST {
            return fail(l, libc::EINVAL);
        }
        let init = l.ep_qp_init.lock().ok().and_then(|g| *g);
        if let Some(mut attr) = init {
            if create_qp_for(child, l.c.pd, &mut attr, std::ptr::null_mut()) != 0 {
                let e = crate::ffi::errno();
                return fail(l, e);
            }
        }
        // SAFETY: the request's id (ours) and the caller's slot.
        unsafe {
            (*child).event = ev;
            *id = child;
        }
        0
    })
}

/// `rdma_create_ep`: a synchronous id for `res` — passive (RAI_PASSIVE): bound, with `pd`
/// and the QP attributes kept for [`rdma_get_request`]; active: address and route resolved
/// (2 s each) and its QP made from `qp_init_attr` if given.
///
/// # Safety
/// `id` a pointer slot; `res` from `rdma_getaddrinfo`; `pd` NULL or ours; `qp_init_attr` NULL
/// or attributes.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_ep(
    id: *mut *mut rdma_cm_id,
    res: *mut rdma_addrinfo,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    boundary("rdma_create_ep", -1, || {
        if id.is_null() || res.is_null() {
            return fail_errno(libc::EINVAL);
        }
        // SAFETY: the caller's address info.
        let r = unsafe { &*res };
        let mut cm_id: *mut rdma_cm_id = std::ptr::null_mut();
        let qp_type = (r.ai_qp_type != 0).then_some(r.ai_qp_type as u32);
        // SAFETY: a slot for the new id.
        if unsafe {
            create_id_typed(std::ptr::null_mut(), &mut cm_id, std::ptr::null_mut(), r.ai_port_space as u32, qp_type)
        } != 0
        {
            return -1;
        }
        let made = (|| {
            if r.ai_flags & RAI_PASSIVE as c_int != 0 {
                // SAFETY: the id just made and the caller's source address.
                if unsafe { rdma_bind_addr(cm_id, r.ai_src_addr) } != 0 {
                    return -1;
                }
                let i = id_of(cm_id).expect("the id just made");
                if !pd.is_null() {
                    i.c.pd = pd;
                }
                if !qp_init_attr.is_null() {
                    // SAFETY: the caller's attributes.
                    let mut a = unsafe { *qp_init_attr };
                    a.qp_type = r.ai_qp_type as u32;
                    if let Ok(mut g) = i.ep_qp_init.lock() {
                        *g = Some(a);
                    }
                }
                return 0;
            }
            // SAFETY: the id just made and the caller's addresses.
            if unsafe { rdma_resolve_addr(cm_id, r.ai_src_addr, r.ai_dst_addr, 2000) } != 0 {
                return -1;
            }
            // SAFETY: as above.
            if unsafe { rdma_resolve_route(cm_id, 2000) } != 0 {
                return -1;
            }
            if !qp_init_attr.is_null() {
                // SAFETY: the caller's attributes (librdmacm writes the type back).
                unsafe { (*qp_init_attr).qp_type = r.ai_qp_type as u32 };
                // SAFETY: as above.
                if unsafe { rdma_create_qp(cm_id, pd, qp_init_attr) } != 0 {
                    return -1;
                }
            }
            0
        })();
        if made != 0 {
            let e = crate::ffi::errno();
            // SAFETY: the id made above, not handed out.
            unsafe { rdma_destroy_ep(cm_id) };
            return fail_errno(e);
        }
        // SAFETY: the caller's slot.
        unsafe { *id = cm_id };
        0
    })
}

/// `rdma_destroy_ep`: the id's QP, the CQs made for it, then the id.
///
/// # Safety
/// `id` is ours; not used after this.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_ep(id: *mut rdma_cm_id) {
    boundary("rdma_destroy_ep", (), || {
        let Some(i) = id_of(id) else { return };
        if !i.c.qp.is_null() {
            // SAFETY: the id's QP.
            unsafe { rdma_destroy_qp(id) };
        }
        if !i.c.srq.is_null() {
            // SAFETY: the id's SRQ.
            unsafe { rdma_destroy_srq(id) };
        }
        destroy_id_cqs(i);
        // SAFETY: ours; not used after this.
        unsafe { rdma_destroy_id(id) };
    })
}

/// `rdma_migrate_id`: the id's events go to `channel` from now on (NULL: a channel of its
/// own, synchronous). EINVAL for NULL on an id that is synchronous already.
///
/// # Safety
/// `id` is ours; `channel` NULL or ours.
#[no_mangle]
pub unsafe extern "C" fn rdma_migrate_id(id: *mut rdma_cm_id, channel: *mut rdma_event_channel) -> c_int {
    boundary("rdma_migrate_id", -1, || {
        let Some(i) = id_of(id) else { return fail_errno(libc::EINVAL) };
        let was_sync = i.sync.load(Ordering::Acquire);
        if was_sync && channel.is_null() {
            return fail_errno(libc::EINVAL);
        }
        let (channel, shared, sync) = if channel.is_null() {
            match new_channel() {
                Some((c, sh)) => (c, sh, true),
                None => return fail_errno(libc::EMFILE),
            }
        } else {
            // SAFETY: a Channel of ours.
            (channel, unsafe { (*channel.cast::<Channel>()).shared.clone() }, false)
        };
        let Ok(rt) = runtime() else { return fail_errno(libc::ENODEV) };
        let (cm, ptr, sh) = (i.cm, id as usize, shared.clone());
        let _ = rt.call(move |e| {
            e.ids.insert(cm, IdLink { id_ptr: ptr, channel: sh });
        });
        let old = i.c.channel;
        if was_sync && !i.c.event.is_null() {
            // SAFETY: the id's last event, ours.
            unsafe { rdma_ack_cm_event(i.c.event) };
            i.c.event = std::ptr::null_mut();
        }
        i.channel = shared;
        i.c.channel = channel;
        i.sync.store(sync, Ordering::Release);
        if was_sync {
            // SAFETY: the id's own old channel, no other id's.
            unsafe { rdma_destroy_event_channel(old) };
        }
        0
    })
}

/// `rdma_init_qp_attr`: the attributes and mask that move the id's QP to `qp_attr.qp_state`
/// (INIT, RTR or RTS), as the CM would (ib_cm_init_qp_attr's rules: EINVAL in a CM state
/// that has none).
///
/// # Safety
/// `id` is ours; `qp_attr` and `qp_attr_mask` point to their types.
#[no_mangle]
pub unsafe extern "C" fn rdma_init_qp_attr(
    id: *mut rdma_cm_id,
    qp_attr: *mut ibv_qp_attr,
    qp_attr_mask: *mut c_int,
) -> c_int {
    boundary("rdma_init_qp_attr", -1, || {
        let Some(i) = id_of(id) else { return fail_errno(libc::EINVAL) };
        if qp_attr.is_null() || qp_attr_mask.is_null() {
            return fail_errno(libc::EINVAL);
        }
        // SAFETY: the caller's attributes.
        let want = unsafe { (*qp_attr).qp_state };
        let state = match want {
            IBV_QPS_INIT => roce_cm::InitQpState::Init,
            IBV_QPS_RTR => roce_cm::InitQpState::Rtr,
            IBV_QPS_RTS => roce_cm::InitQpState::Rts,
            _ => return fail_errno(libc::EINVAL),
        };
        let Ok(rt) = runtime() else { return fail_errno(libc::ENODEV) };
        let cm = i.cm;
        let at = match rt.call(move |e| e.d.stack.init_qp_attr(cm, state)) {
            Ok(Ok(at)) => at,
            Ok(Err(e)) => return fail_errno(e.value()),
            Err(e) => return fail_errno(e),
        };
        let (a, mask) = crate::conn::ibv_attr_for(want, &at);
        // SAFETY: the caller's out-parameters.
        unsafe {
            *qp_attr = a;
            *qp_attr_mask = mask as c_int;
        }
        0
    })
}

fn create_qp_for(id: *mut rdma_cm_id, pd: *mut ibv_pd, attr: &mut ibv_qp_init_attr, xrcd: *mut ibv_xrcd) -> c_int {
    let Some(i) = id_of(id) else { return fail_errno(libc::EINVAL) };
    if !i.c.qp.is_null() {
        return fail_errno(libc::EINVAL);
    }
    let pd = if pd.is_null() { i.c.pd } else { pd };
    if pd.is_null() || i.c.verbs.is_null() {
        return fail_errno(libc::EINVAL);
    }
    // NULL CQs: the id's own, made here with completion channels (librdmacm's
    // ucma_create_cqs; rdma_verbs.h's rdma_get_send_comp/rdma_get_recv_comp wait on them).
    if attr.send_cq.is_null() || attr.recv_cq.is_null() {
        let send = if attr.send_cq.is_null() && i.c.send_cq.is_null() { attr.cap.max_send_wr } else { 0 };
        let recv = if attr.recv_cq.is_null() && i.c.recv_cq.is_null() { attr.cap.max_recv_wr } else { 0 };
        if let Err(e) = create_id_cqs(i, id, send, recv) {
            return fail_errno(e);
        }
        if attr.send_cq.is_null() {
            attr.send_cq = i.c.send_cq;
        }
        if attr.recv_cq.is_null() {
            attr.recv_cq = i.c.recv_cq;
        }
    }
    if attr.qp_type != i.c.qp_type {
        // The id's port space fixed its QP type (RDMA_PS_TCP: RC, RDMA_PS_UDP: UD).
        return fail_errno(libc::EINVAL);
    }
    if matches!(attr.qp_type, IBV_QPT_RC | IBV_QPT_UC) && attr.srq.is_null() {
        attr.srq = i.c.srq; // the id's SRQ (rdma_create_srq), as librdmacm passes it
    }
    if matches!(attr.qp_type, IBV_QPT_RC | IBV_QPT_UC | IBV_QPT_XRC_SEND) {
        return match crate::verbs::create_conn_qp(pd, attr, Some(i.cm)) {
            Ok(qp) => {
                i.c.qp = qp.cast();
                i.c.send_cq = attr.send_cq;
                if attr.qp_type != IBV_QPT_XRC_SEND {
                    i.c.recv_cq = attr.recv_cq;
                }
                0
            }
            Err(e) => fail_errno(e),
        };
    }
    if attr.qp_type == IBV_QPT_XRC_RECV {
        // librdmacm's ucma_get_xrcd when the program names no domain.
        let xrcd = if xrcd.is_null() { default_xrcd() } else { xrcd };
        return match crate::xrc::target_qp(xrcd, attr.qp_context, Some(i.cm)) {
            Ok(qp) => {
                i.c.qp = qp.cast();
                attr.cap = ibv_qp_cap::default();
                0
            }
            Err(e) => fail_errno(e),
        };
    }
    if attr.qp_type != IBV_QPT_UD {
        return fail_errno(libc::EOPNOTSUPP);
    }
    if attr.send_cq.is_null() || attr.recv_cq.is_null() || !attr.srq.is_null() {
        return fail_errno(libc::EINVAL);
    }
    let Ok(rt) = runtime() else { return fail_errno(libc::ENODEV) };
    let cm = i.cm;
    let qpn = match rt.call(move |e| e.d.stack.create_qp_for_id(cm)) {
        Ok(Ok(q)) => q,
        Ok(Err(e)) => return fail_errno(e.value()),
        Err(e) => return fail_errno(e),
    };
    let Some(qp) = new_ud_qp(pd, attr, qpn, roce_wire::RDMA_UDP_QKEY, true) else { return fail_errno(libc::EINVAL) };
    let addr = qp as usize;
    // SAFETY: the QP lives until rdma_destroy_qp, which unlinks it on the engine's thread first.
    let _ = rt.call(move |e| e.link_ud_qp(unsafe { &*(addr as *const Qp) }));
    i.c.qp = qp.cast();
    i.c.send_cq = attr.send_cq;
    i.c.recv_cq = attr.recv_cq;
    0
}

/// `rdma_create_qp`: the id's UD QP (Q_Key 0x01234567, ready to send), on `pd` or the id's PD.
///
/// # Safety
/// `id` is ours; `attr` points to an `ibv_qp_init_attr`.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_qp(id: *mut rdma_cm_id, pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> c_int {
    boundary("rdma_create_qp", -1, || {
        if attr.is_null() {
            return fail_errno(libc::EINVAL);
        }
        // SAFETY: the caller's attributes.
        create_qp_for(id, pd, unsafe { &mut *attr }, std::ptr::null_mut())
    })
}

/// `rdma_create_qp_ex`: as [`rdma_create_qp`]; `IBV_QP_CREATE_BLOCK_SELF_MCAST_LB` is taken
/// (the stack never loops its own multicast back).
///
/// # Safety
/// `id` is ours; `attr` points to an `ibv_qp_init_attr_ex`.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_qp_ex(id: *mut rdma_cm_id, attr: *mut ibv_qp_init_attr_ex) -> c_int {
    boundary("rdma_create_qp_ex", -1, || {
        if attr.is_null() {
            return fail_errno(libc::EINVAL);
        }
        // SAFETY: the caller's attributes.
        let a = unsafe { *attr };
        let send_ops = match crate::qp_ex::check_attr(&a) {
            Ok(s) => s,
            Err(e) => return fail_errno(e),
        };
        let pd = if a.comp_mask & IBV_QP_INIT_ATTR_PD != 0 { a.pd } else { std::ptr::null_mut() };
        let mut basic = crate::qp_ex::basic_attr(&a);
        let xrcd = if a.comp_mask & IBV_QP_INIT_ATTR_XRCD != 0 { a.xrcd } else { std::ptr::null_mut() };
        let rc = create_qp_for(id, pd, &mut basic, xrcd);
        if rc == 0 {
            if let Some(i) = id_of(id) {
                // SAFETY: the id's QP just made (ours), the caller's attributes.
                unsafe {
                    if let Some(flags) = send_ops {
                        crate::qp_ex::enable(i.c.qp.cast::<crate::verbs::Qp>(), flags);
                    }
                    (*attr).cap = basic.cap;
                }
            }
        }
        rc
    })
}

/// `rdma_destroy_qp`.
///
/// # Safety
/// `id` is ours.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_qp(id: *mut rdma_cm_id) {
    boundary("rdma_destroy_qp", (), || {
        let Some(i) = id_of(id) else { return };
        if !i.c.qp.is_null() {
            // SAFETY: the id's QP, ours.
            unsafe { crate::verbs::ibv_destroy_qp(i.c.qp) };
            i.c.qp = std::ptr::null_mut();
        }
    })
}

// ------------------------------------------------------------------------------------------
// Multicast

fn join(id: *mut rdma_cm_id, addr: *mut libc::sockaddr, join_state: JoinState, context: *mut c_void) -> c_int {
    // SAFETY: the caller's sockaddr.
    let group = match unsafe { socket_addr(addr) } {
        Ok(Some(a)) => a.ip(),
        Ok(None) => return fail_errno(libc::EINVAL),
        Err(e) => return fail_errno(e),
    };
    let Some(i) = id_of(id) else { return fail_errno(libc::EINVAL) };
    let r = engine_call(id, move |e, cm| {
        let now = e.d.now();
        e.d.stack.join_multicast(now, cm, group, join_state)
    });
    if r == 0 {
        if let Ok(mut g) = i.groups.lock() {
            g.insert(group, context as usize);
        }
    }
    complete(id, r)
}

/// `rdma_join_multicast`: a FullMember join; MULTICAST_JOIN or MULTICAST_ERROR follows, with
/// `context` as its `param.ud.private_data`.
///
/// # Safety
/// `id` is ours; `addr` a sockaddr.
#[no_mangle]
pub unsafe extern "C" fn rdma_join_multicast(
    id: *mut rdma_cm_id,
    addr: *mut libc::sockaddr,
    context: *mut c_void,
) -> c_int {
    boundary("rdma_join_multicast", -1, || join(id, addr, JoinState::FULL_MEMBER, context))
}

/// `rdma_join_multicast_ex`: the join state from `join_flags` (FULLMEMBER, or
/// SENDONLY_FULLMEMBER); EINVAL without the address and flags in `comp_mask`, or another flag.
///
/// # Safety
/// `id` is ours; `attr` points to an `rdma_cm_join_mc_attr_ex`.
#[no_mangle]
pub unsafe extern "C" fn rdma_join_multicast_ex(
    id: *mut rdma_cm_id,
    attr: *mut rdma_cm_join_mc_attr_ex,
    context: *mut c_void,
) -> c_int {
    boundary("rdma_join_multicast_ex", -1, || {
        if attr.is_null() {
            return fail_errno(libc::EINVAL);
        }
        // SAFETY: the caller's attributes.
        let a = unsafe { *attr };
        let need = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
        if a.comp_mask & need != need || a.comp_mask & !need != 0 {
            return fail_errno(libc::EINVAL);
        }
        let state = match a.join_flags {
            RDMA_MC_JOIN_FLAG_FULLMEMBER => JoinState::FULL_MEMBER,
            RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER => JoinState::SEND_ONLY_FULL_MEMBER,
            _ => return fail_errno(libc::EINVAL),
        };
        join(id, a.addr, state, context)
    })
}

/// `rdma_leave_multicast`: the engine's leave (SA Delete with the join's JoinState, mask
/// 0x10003, and the IGMP/MLD leave), which goes on without blocking the program; EADDRNOTAVAIL
/// for a group the id has not joined, as librdmacm answers.
///
/// # Safety
/// `id` is ours; `addr` a sockaddr.
#[no_mangle]
pub unsafe extern "C" fn rdma_leave_multicast(id: *mut rdma_cm_id, addr: *mut libc::sockaddr) -> c_int {
    boundary("rdma_leave_multicast", -1, || {
        // SAFETY: the caller's sockaddr.
        let group = match unsafe { socket_addr(addr) } {
            Ok(Some(a)) => a.ip(),
            Ok(None) => return fail_errno(libc::EINVAL),
            Err(e) => return fail_errno(e),
        };
        let Some(i) = id_of(id) else { return fail_errno(libc::EINVAL) };
        let joined = i.groups.lock().map(|mut g| g.remove(&group).is_some()).unwrap_or(false);
        if !joined {
            return fail_errno(libc::EADDRNOTAVAIL);
        }
        engine_call(id, move |e, cm| {
            let now = e.d.now();
            e.d.stack.leave_multicast(now, cm, group)
        })
    })
}

// ------------------------------------------------------------------------------------------
// Events

/// `rdma_get_cm_event`: the next event (blocks unless the program set O_NONBLOCK on the
/// channel's fd: then -1/EAGAIN).
///
/// # Safety
/// `ch` is ours; `event` points to a pointer slot.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_cm_event(ch: *mut rdma_event_channel, event: *mut *mut rdma_cm_event) -> c_int {
    boundary("rdma_get_cm_event", -1, || {
        if ch.is_null() || event.is_null() {
            return fail_errno(libc::EINVAL);
        }
        // SAFETY: a Channel of ours.
        let chan = unsafe { &*ch.cast::<Channel>() };
        let mut b = [0u8; 1];
        match read_record(chan.c.fd, &mut b) {
            Ok(true) => {}
            Ok(false) => return fail_errno(libc::ENODEV),
            Err(e) => return fail_errno(e),
        }
        let Some(p) = chan.shared.queue.lock().ok().and_then(|mut q| q.pop_front()) else {
            return fail_errno(libc::EAGAIN);
        };
        let eb = p as *mut EventBox;
        // SAFETY: an EventBox queued by deliver_event; its id is alive (freed only after the
        // last acknowledgement).
        unsafe {
            let i = &mut *(*eb).ev.id.cast::<Id>();
            i.outstanding.fetch_add(1, Ordering::AcqRel);
            refresh_id(i, (*eb).src, (*eb).dst, (*eb).route);
            *event = &mut (*eb).ev;
        }
        0
    })
}

/// `rdma_ack_cm_event`.
///
/// # Safety
/// `event` came from [`rdma_get_cm_event`].
#[no_mangle]
pub unsafe extern "C" fn rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int {
    boundary("rdma_ack_cm_event", -1, || {
        if event.is_null() {
            return fail_errno(libc::EINVAL);
        }
        // SAFETY: an EventBox of ours (its first field is the event).
        let b = unsafe { Box::from_raw(event.cast::<EventBox>()) };
        let idp = b.ev.id.cast::<Id>();
        if !idp.is_null() {
            // SAFETY: the event's id, alive until this acknowledgement if it was destroyed.
            unsafe {
                let i = &mut *idp;
                if std::ptr::eq(i.c.event, event) {
                    i.c.event = std::ptr::null_mut();
                }
                if i.outstanding.fetch_sub(1, Ordering::AcqRel) == 1 && i.destroyed.load(Ordering::Acquire) {
                    free_id(idp);
                }
            }
        }
        0
    })
}

/// `rdma_event_str`.
#[no_mangle]
pub extern "C" fn rdma_event_str(event: u32) -> *const c_char {
    const NAMES: [&std::ffi::CStr; 17] = [
        c"RDMA_CM_EVENT_ADDR_RESOLVED",
        c"RDMA_CM_EVENT_ADDR_ERROR",
        c"RDMA_CM_EVENT_ROUTE_RESOLVED",
        c"RDMA_CM_EVENT_ROUTE_ERROR",
        c"RDMA_CM_EVENT_CONNECT_REQUEST",
        c"RDMA_CM_EVENT_CONNECT_RESPONSE",
        c"RDMA_CM_EVENT_CONNECT_ERROR",
        c"RDMA_CM_EVENT_UNREACHABLE",
        c"RDMA_CM_EVENT_REJECTED",
        c"RDMA_CM_EVENT_ESTABLISHED",
        c"RDMA_CM_EVENT_DISCONNECTED",
        c"RDMA_CM_EVENT_DEVICE_REMOVAL",
        c"RDMA_CM_EVENT_MULTICAST_JOIN",
        c"RDMA_CM_EVENT_MULTICAST_ERROR",
        c"RDMA_CM_EVENT_ADDR_CHANGE",
        c"RDMA_CM_EVENT_TIMEWAIT_EXIT",
        c"UNKNOWN EVENT",
    ];
    NAMES.get(event as usize).copied().unwrap_or(c"UNKNOWN EVENT").as_ptr()
}

/// `rdma_set_option`: RDMA_OPTION_ID's TOS, REUSEADDR and AFONLY reach the engine;
/// ACK_TIMEOUT is taken; others EINVAL (RDMA_OPTION_IB_PATH: ENOSYS).
///
/// # Safety
/// `id` is ours; `optval` points to `optlen` bytes.
#[no_mangle]
pub unsafe extern "C" fn rdma_set_option(
    id: *mut rdma_cm_id,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: usize,
) -> c_int {
    boundary("rdma_set_option", -1, || {
        if optval.is_null() {
            return fail_errno(libc::EINVAL);
        }
        let read_u8 = || {
            // SAFETY: the caller's option value of at least one byte.
            unsafe { *optval.cast::<u8>() }
        };
        let read_int = || {
            if optlen < 4 {
                return None;
            }
            // SAFETY: the caller's int.
            Some(unsafe { optval.cast::<c_int>().read_unaligned() })
        };
        match (level, optname) {
            (RDMA_OPTION_ID, RDMA_OPTION_ID_TOS) if optlen >= 1 => {
                let tos = read_u8();
                engine_call(id, move |e, cm| e.d.stack.set_service_type(cm, tos))
            }
            (RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR) => match read_int() {
                Some(v) => engine_call(id, move |e, cm| e.d.stack.set_reuseaddr(cm, v != 0)),
                None => fail_errno(libc::EINVAL),
            },
            (RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY) => match read_int() {
                Some(v) => engine_call(id, move |e, cm| e.d.stack.set_afonly(cm, v != 0)),
                None => fail_errno(libc::EINVAL),
            },
            (RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT) => 0,
            (RDMA_OPTION_IB, RDMA_OPTION_IB_PATH) => {
                crate::stub::not_implemented("rdma_set_option(RDMA_OPTION_IB_PATH)");
                -1
            }
            _ => fail_errno(libc::EINVAL),
        }
    })
}

/// `rdma_get_src_port`.
///
/// # Safety
/// `id` is ours.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_src_port(id: *mut rdma_cm_id) -> u16 {
    // SAFETY: reading the id's source address as its family says.
    id_of(id).map_or(0, |i| unsafe { port_of(&i.c.route.addr.src) })
}

/// `rdma_get_dst_port`.
///
/// # Safety
/// `id` is ours.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_dst_port(id: *mut rdma_cm_id) -> u16 {
    // SAFETY: as above.
    id_of(id).map_or(0, |i| unsafe { port_of(&i.c.route.addr.dst) })
}

unsafe fn port_of(a: &rdma_sockaddr) -> u16 {
    // SAFETY: reading the member the family names (both have the port at the same offset).
    unsafe {
        match i32::from(a.addr.sa_family) {
            libc::AF_INET => a.sin.sin_port,
            libc::AF_INET6 => a.sin6.sin6_port,
            _ => 0,
        }
    }
}

/// `rdma_get_devices`: the one context (NULL-terminated).
///
/// # Safety
/// `num` NULL or an int.
#[no_mangle]
pub unsafe extern "C" fn rdma_get_devices(num: *mut c_int) -> *mut *mut ibv_context {
    boundary("rdma_get_devices", std::ptr::null_mut(), || {
        let list: Vec<*mut ibv_context> =
            if crate::port::port().is_some() { vec![crate::device::default_context()] } else { Vec::new() };
        if !num.is_null() {
            // SAFETY: the caller's int.
            unsafe { *num = list.len() as c_int };
        }
        crate::ffi::null_terminated(list)
    })
}

/// `rdma_free_devices`.
///
/// # Safety
/// `list` came from [`rdma_get_devices`].
#[no_mangle]
pub unsafe extern "C" fn rdma_free_devices(list: *mut *mut ibv_context) {
    // SAFETY: the caller's list from rdma_get_devices.
    unsafe { crate::ffi::free_null_terminated(list) }
}

// ------------------------------------------------------------------------------------------
// rdma_getaddrinfo

fn resolve_host(node: &str) -> Result<Vec<IpAddr>, i32> {
    if let Ok(ip) = node.parse::<IpAddr>() {
        return Ok(vec![ip]);
    }
    use std::net::ToSocketAddrs;
    (node, 0).to_socket_addrs().map(|it| it.map(|a| a.ip()).collect()).map_err(|_| libc::EAI_NONAME)
}

fn boxed_sockaddr(a: SocketAddr) -> (*mut libc::sockaddr, libc::socklen_t) {
    // SAFETY: zero is valid for the union.
    let mut s: Box<rdma_sockaddr> = Box::new(unsafe { std::mem::zeroed() });
    write_sockaddr(&mut s, a);
    let len =
        if a.is_ipv4() { std::mem::size_of::<libc::sockaddr_in>() } else { std::mem::size_of::<libc::sockaddr_in6>() };
    (Box::into_raw(s).cast(), len as libc::socklen_t)
}

/// `rdma_getaddrinfo`: IPv4 and IPv6 (numeric or by name); `RAI_PASSIVE` makes `node` the
/// source (the wildcard when NULL), else the destination, with the hints' source kept. The
/// port space and QP type follow the hints (RDMA_PS_TCP and RC by default). Returns 0 or an
/// `EAI_*` code, as getaddrinfo does.
///
/// # Safety
/// `node`/`service` NULL or C strings; `hints` NULL or an `rdma_addrinfo`; `res` a pointer slot.
#[no_mangle]
pub unsafe extern "C" fn rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
    res: *mut *mut rdma_addrinfo,
) -> c_int {
    boundary("rdma_getaddrinfo", libc::EAI_FAIL, || {
        if res.is_null() || (node.is_null() && service.is_null()) {
            return libc::EAI_NONAME;
        }
        // SAFETY: the caller's C strings and hints.
        let (node, service, hints) = unsafe {
            (
                (!node.is_null()).then(|| std::ffi::CStr::from_ptr(node).to_string_lossy().into_owned()),
                (!service.is_null()).then(|| std::ffi::CStr::from_ptr(service).to_string_lossy().into_owned()),
                (!hints.is_null()).then(|| *hints),
            )
        };
        let flags = hints.map_or(0, |h| h.ai_flags);
        let passive = flags & RAI_PASSIVE as c_int != 0;
        let port: u16 = match service.as_deref().map(str::parse) {
            None => 0,
            Some(Ok(p)) => p,
            Some(Err(_)) => return libc::EAI_SERVICE,
        };
        let family = hints.map_or(0, |h| h.ai_family);
        let pick = |ips: Vec<IpAddr>| -> Option<IpAddr> {
            ips.into_iter().find(|ip| match family {
                libc::AF_INET => ip.is_ipv4(),
                libc::AF_INET6 => ip.is_ipv6(),
                _ => true,
            })
        };
        let ip = match &node {
            Some(n) => match resolve_host(n).map(pick) {
                Ok(Some(ip)) => Some(ip),
                Ok(None) => return libc::EAI_FAMILY,
                Err(e) => return e,
            },
            None => None,
        };
        let ps = match hints.map_or(0, |h| h.ai_port_space) {
            0 => RDMA_PS_TCP as c_int,
            p => p,
        };
        let qp_type = match hints.map_or(0, |h| h.ai_qp_type) {
            0 if ps == RDMA_PS_UDP as c_int || ps == RDMA_PS_IPOIB as c_int => IBV_QPT_UD as c_int,
            0 => IBV_QPT_RC as c_int,
            q => q,
        };
        // SAFETY: plain C data; zero is valid.
        let mut ai: rdma_addrinfo = unsafe { std::mem::zeroed() };
        ai.ai_flags = flags;
        ai.ai_port_space = ps;
        ai.ai_qp_type = qp_type;
        if passive {
            let src = SocketAddr::new(
                ip.unwrap_or(if family == libc::AF_INET6 {
                    IpAddr::V6(Ipv6Addr::UNSPECIFIED)
                } else {
                    IpAddr::V4(Ipv4Addr::UNSPECIFIED)
                }),
                port,
            );
            let (p, l) = boxed_sockaddr(src);
            ai.ai_src_addr = p;
            ai.ai_src_len = l;
            ai.ai_family = if src.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
        } else {
            let Some(ip) = ip else { return libc::EAI_NONAME };
            let dst = SocketAddr::new(ip, port);
            let (p, l) = boxed_sockaddr(dst);
            ai.ai_dst_addr = p;
            ai.ai_dst_len = l;
            ai.ai_family = if dst.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
            // The hints' source, copied.
            if let Some(h) = hints {
                // SAFETY: the hints' source sockaddr.
                if let Ok(Some(s)) = unsafe { socket_addr(h.ai_src_addr) } {
                    let (p, l) = boxed_sockaddr(s);
                    ai.ai_src_addr = p;
                    ai.ai_src_len = l;
                }
            }
        }
        // SAFETY: the caller's slot.
        unsafe { *res = Box::into_raw(Box::new(ai)) };
        0
    })
}

/// `rdma_freeaddrinfo`.
///
/// # Safety
/// `res` came from [`rdma_getaddrinfo`].
#[no_mangle]
pub unsafe extern "C" fn rdma_freeaddrinfo(res: *mut rdma_addrinfo) {
    let mut cur = res;
    while !cur.is_null() {
        // SAFETY: an rdma_addrinfo boxed by rdma_getaddrinfo, with its boxed sockaddrs.
        unsafe {
            let b = Box::from_raw(cur);
            for p in [b.ai_src_addr, b.ai_dst_addr] {
                if !p.is_null() {
                    drop(Box::from_raw(p.cast::<rdma_sockaddr>()));
                }
            }
            cur = b.ai_next;
        }
    }
}

// ------------------------------------------------------------------------------------------
// SRQs of ids

/// `rdma_create_srq_ex` (librdmacm's): an SRQ for the id on its PD unless the attributes name
/// one; for an XRC SRQ the default domain and the id's receive CQ (made with a channel if the
/// id has none, as ucma_create_cqs) unless named. The id keeps it (`id->srq`, where
/// `rdma_post_recv` posts and `rdma_create_qp` takes it). EINVAL without a type.
///
/// # Safety
/// `id` is ours; `attr` points to an `ibv_srq_init_attr_ex`.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_srq_ex(id: *mut rdma_cm_id, attr: *mut ibv_srq_init_attr_ex) -> c_int {
    boundary("rdma_create_srq_ex", -1, || {
        let Some(i) = id_of(id) else { return fail_errno(libc::EINVAL) };
        if attr.is_null() {
            return fail_errno(libc::EINVAL);
        }
        // SAFETY: the caller's attributes.
        let a = unsafe { &mut *attr };
        if a.comp_mask & IBV_SRQ_INIT_ATTR_TYPE == 0 {
            return fail_errno(libc::EINVAL);
        }
        if a.comp_mask & IBV_SRQ_INIT_ATTR_PD == 0 || a.pd.is_null() {
            a.pd = i.c.pd;
            a.comp_mask |= IBV_SRQ_INIT_ATTR_PD;
        }
        if a.srq_type == IBV_SRQT_XRC {
            if a.comp_mask & IBV_SRQ_INIT_ATTR_XRCD == 0 || a.xrcd.is_null() {
                a.xrcd = default_xrcd();
            }
            if a.comp_mask & IBV_SRQ_INIT_ATTR_CQ == 0 || a.cq.is_null() {
                if i.c.recv_cq.is_null() {
                    if let Err(e) = create_id_cqs(i, id, 0, a.attr.max_wr) {
                        return fail_errno(e);
                    }
                }
                a.cq = i.c.recv_cq;
            }
            a.comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
        }
        // SAFETY: the id's context and the attributes completed above.
        let srq = unsafe { crate::xrc::create_srq_ex(i.c.verbs, a) };
        if srq.is_null() {
            return -1; // errno set
        }
        if i.c.pd.is_null() {
            i.c.pd = a.pd;
        }
        i.c.srq = srq;
        0
    })
}

/// `rdma_create_srq`: [`rdma_create_srq_ex`] of an XRC SRQ for an XRC_RECV id, else a basic one.
///
/// # Safety
/// `id` is ours; `pd` NULL or ours; `attr` points to an `ibv_srq_init_attr`.
#[no_mangle]
pub unsafe extern "C" fn rdma_create_srq(id: *mut rdma_cm_id, pd: *mut ibv_pd, attr: *mut ibv_srq_init_attr) -> c_int {
    boundary("rdma_create_srq", -1, || {
        let Some(i) = id_of(id) else { return fail_errno(libc::EINVAL) };
        if attr.is_null() {
            return fail_errno(libc::EINVAL);
        }
        // SAFETY: the caller's attributes.
        let a = unsafe { &mut *attr };
        let mut ex = ibv_srq_init_attr_ex {
            srq_context: a.srq_context,
            attr: a.attr,
            comp_mask: IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD,
            srq_type: if i.c.qp_type == IBV_QPT_XRC_RECV { IBV_SRQT_XRC } else { IBV_SRQT_BASIC },
            pd,
            xrcd: std::ptr::null_mut(),
            cq: std::ptr::null_mut(),
            tm_cap: ibv_tm_cap::default(),
        };
        // SAFETY: ours and the attributes above.
        let rc = unsafe { rdma_create_srq_ex(id, &mut ex) };
        a.attr = ex.attr;
        rc
    })
}

/// `rdma_destroy_srq`: the id's SRQ, then the CQs made for the id (librdmacm's order).
///
/// # Safety
/// `id` is ours.
#[no_mangle]
pub unsafe extern "C" fn rdma_destroy_srq(id: *mut rdma_cm_id) {
    boundary("rdma_destroy_srq", (), || {
        let Some(i) = id_of(id) else { return };
        if !i.c.srq.is_null() {
            // SAFETY: the id's SRQ, ours.
            unsafe { crate::conn::ibv_destroy_srq(i.c.srq) };
            i.c.srq = std::ptr::null_mut();
        }
        destroy_id_cqs(i);
    })
}
