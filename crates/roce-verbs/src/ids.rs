//! The ids and event channels as the engine's thread and the program's threads share them:
//! each `rdma_cm_id` object ([`Id`]), each channel's queue ([`ChannelShared`]), and the turning
//! of an engine event into a `struct rdma_cm_event` queued on its channel with a byte on the
//! channel's pipe ([`deliver_event`]). Events the kernel does not have (the engine's
//! MULTICAST_LEFT) are not delivered.

use core::ffi::c_void;
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use roce_cm::{CmEvent, CmId, EventKind, EventParam, Stack};

use crate::abi::*;
use crate::queues::blocking_pipe;

/// An engine id's C side.
#[derive(Clone)]
pub struct IdLink {
    /// The `rdma_cm_id` (an [`Id`]) as an address.
    pub id_ptr: usize,
    /// Its event channel.
    pub channel: Arc<ChannelShared>,
}

/// What an event channel shares with the engine's thread.
pub struct ChannelShared {
    /// Events not yet taken (EventBox addresses).
    pub queue: Mutex<VecDeque<usize>>,
    /// The write end of the channel's pipe.
    pub wfd: OwnedFd,
}

/// An id.
#[repr(C)]
pub struct Id {
    /// What the program sees.
    pub c: rdma_cm_id,
    /// The engine's id.
    pub cm: CmId,
    /// Its channel.
    pub channel: Arc<ChannelShared>,
    /// Events handed out and not yet acknowledged.
    pub outstanding: AtomicU32,
    /// Destroyed by the program (freed at the last acknowledgement).
    pub destroyed: AtomicBool,
    /// Joined groups and the context each join gave.
    pub groups: Mutex<HashMap<IpAddr, usize>>,
    /// The route's one path record.
    pub path: Box<ibv_sa_path_rec>,
    /// What a connection request offered, as its event gave it to the program: responder
    /// resources (high byte) and initiator depth (low byte). `rdma_accept` with no
    /// parameters (or RDMA_MAX_RESP_RES / RDMA_MAX_INIT_DEPTH) answers with these, capped at
    /// the device's, as librdmacm does.
    pub offered: AtomicU16,
    /// librdmacm's synchronous mode: the id was created without a channel (or is the
    /// request of a synchronous listener); its channel is its own, and each call that
    /// produces an event waits for it.
    pub sync: AtomicBool,
    /// A passive endpoint's QP attributes (`rdma_create_ep`): `rdma_get_request` gives each
    /// request a QP of these.
    pub ep_qp_init: Mutex<Option<ibv_qp_init_attr>>,
    /// CQs and channels `rdma_create_qp` made for the id (a NULL CQ in its attributes, as
    /// librdmacm's ucma_create_cqs): `rdma_destroy_ep` ends them.
    pub own_cqs: AtomicBool,
}

/// A new id object (boxed; the program gets its address).
pub fn new_id(
    cm: CmId,
    channel: *mut rdma_event_channel,
    shared: Arc<ChannelShared>,
    context: *mut c_void,
    ps: u32,
    qp_type: u32,
) -> *mut Id {
    // SAFETY: plain C data; zero is valid.
    let mut c: rdma_cm_id = unsafe { std::mem::zeroed() };
    c.channel = channel;
    c.context = context;
    c.ps = ps;
    c.qp_type = qp_type;
    // SAFETY: plain C data; zero is valid.
    let path: Box<ibv_sa_path_rec> = Box::new(unsafe { std::mem::zeroed() });
    Box::into_raw(Box::new(Id {
        c,
        cm,
        channel: shared,
        outstanding: AtomicU32::new(0),
        destroyed: AtomicBool::new(false),
        groups: Mutex::new(HashMap::new()),
        path,
        offered: AtomicU16::new(0),
        sync: AtomicBool::new(false),
        ep_qp_init: Mutex::new(None),
        own_cqs: AtomicBool::new(false),
    }))
}

/// An event as handed to the program, with what it owns.
#[repr(C)]
pub struct EventBox {
    /// What the program sees.
    pub ev: rdma_cm_event,
    /// The private data `ev` points to.
    pub private: Vec<u8>,
    /// The id's source address when the event was made.
    pub src: Option<SocketAddr>,
    /// Its destination address.
    pub dst: Option<SocketAddr>,
    /// Whether the route was resolved (ROUTE_RESOLVED).
    pub route: bool,
}

fn ah_attr(ah: &roce_cm::event::AddressHandle, dlid: u16) -> ibv_ah_attr {
    // SAFETY: plain C data; zero is valid.
    let mut a: ibv_ah_attr = unsafe { std::mem::zeroed() };
    a.grh.dgid.raw = ah.dgid.0;
    a.grh.flow_label = ah.flow_label;
    a.grh.sgid_index = crate::port::port().and_then(|p| p.gid_index(&ah.sgid)).unwrap_or(1);
    a.grh.hop_limit = ah.hop_limit;
    a.grh.traffic_class = ah.traffic_class;
    a.dlid = dlid;
    a.sl = ah.sl;
    a.is_global = 1;
    a.port_num = 1;
    a
}

/// Queue an engine event on its id's channel (the engine's thread).
pub fn deliver_event(
    links: &mut HashMap<CmId, IdLink>,
    macs: &mut HashMap<IpAddr, [u8; 6]>,
    stack: &Stack,
    ev: CmEvent,
) {
    // Only the kernel's events reach programs (the engine's MULTICAST_LEFT is its own).
    if ev.kind.value() >= 256 {
        return;
    }
    let link = if ev.kind == EventKind::ConnectRequest {
        let Some(parent) = ev.listen_id.and_then(|l| links.get(&l)).cloned() else { return };
        // SAFETY: the listener's Id, alive while it is in the table.
        let (channel_ptr, context, ps, qp_type, sync) = unsafe {
            let p = &*(parent.id_ptr as *const Id);
            (p.c.channel, p.c.context, p.c.ps, p.c.qp_type, p.sync.load(Ordering::Acquire))
        };
        // A synchronous listener's requests get channels of their own (librdmacm migrates
        // each to a new channel: ucma_process_conn_req); the request event itself goes to
        // the listener's.
        let own = sync.then(new_channel).flatten();
        let (child_channel, child_shared) = match &own {
            Some((c, sh)) => (*c, sh.clone()),
            None => (channel_ptr, parent.channel.clone()),
        };
        let child = new_id(ev.id, child_channel, child_shared.clone(), context, ps, qp_type);
        if own.is_some() {
            // SAFETY: the id just made.
            unsafe { (*child).sync.store(true, Ordering::Release) };
        }
        links.insert(ev.id, IdLink { id_ptr: child as usize, channel: child_shared });
        IdLink { id_ptr: child as usize, channel: parent.channel.clone() }
    } else {
        match links.get(&ev.id) {
            Some(l) => l.clone(),
            None => return,
        }
    };
    let listen_ptr = ev.listen_id.and_then(|l| links.get(&l)).map_or(0, |l| l.id_ptr);
    let (src, dst) = addresses(stack, ev.id);
    // SAFETY: plain C data; zero is valid.
    let mut c: rdma_cm_event = unsafe { std::mem::zeroed() };
    c.id = link.id_ptr as *mut rdma_cm_id;
    c.listen_id = listen_ptr as *mut rdma_cm_id;
    c.event = ev.kind.value();
    c.status = ev.status;
    let mut private = Vec::new();
    // SAFETY: the id's C object, alive while it is in the table.
    let (is_ud, groups) = unsafe {
        let i = &*(link.id_ptr as *const Id);
        (i.c.qp_type == IBV_QPT_UD, i.groups.lock().map(|g| g.clone()).unwrap_or_default())
    };
    match &ev.param {
        EventParam::Multicast { group, record, ud, .. } => {
            let ctx_ptr = groups.get(group).copied().unwrap_or(0) as *const c_void;
            if let Some(u) = ud {
                macs.insert(u.ah.dgid.to_ip(), u.ah.dmac);
                let mlid = record.as_ref().map_or(0, |r| r.mlid);
                c.param.ud = rdma_ud_param {
                    private_data: ctx_ptr,
                    private_data_len: 0,
                    ah_attr: ah_attr(&u.ah, mlid),
                    qp_num: u.qp_num,
                    qkey: u.qkey,
                };
            } else {
                // SAFETY: writing the ud member of the zeroed union.
                c.param.ud.private_data = ctx_ptr;
            }
        }
        EventParam::Ud(u) => {
            macs.insert(u.ah.dgid.to_ip(), u.ah.dmac);
            c.param.ud = rdma_ud_param {
                private_data: std::ptr::null(),
                private_data_len: 0,
                ah_attr: ah_attr(&u.ah, 0),
                qp_num: u.qp_num,
                qkey: u.qkey,
            };
        }
        EventParam::Conn(p) => {
            private = p.private_data.clone();
            if is_ud {
                c.param.ud = rdma_ud_param {
                    private_data: std::ptr::null(),
                    private_data_len: private.len().min(255) as u8,
                    // SAFETY: plain C data; zero is valid.
                    ah_attr: unsafe { std::mem::zeroed() },
                    qp_num: p.remote_qpn,
                    qkey: 0,
                };
            } else {
                if ev.kind == EventKind::ConnectRequest {
                    // SAFETY: the id's C object, alive while it is in the table.
                    let i = unsafe { &*(link.id_ptr as *const Id) };
                    let v = u16::from(p.responder_resources) << 8 | u16::from(p.initiator_depth);
                    i.offered.store(v, Ordering::Release);
                }
                c.param.conn = rdma_conn_param {
                    private_data: std::ptr::null(),
                    private_data_len: private.len().min(255) as u8,
                    responder_resources: p.responder_resources,
                    initiator_depth: p.initiator_depth,
                    flow_control: 0,
                    retry_count: p.retry_count,
                    rnr_retry_count: p.rnr_retry_count,
                    srq: 0,
                    qp_num: p.remote_qpn,
                };
            }
        }
        EventParam::None => {}
    }
    let route = ev.kind == EventKind::RouteResolved;
    let b = Box::into_raw(Box::new(EventBox { ev: c, private, src, dst, route }));
    // The private data's address is only known once the box is.
    // SAFETY: the box just made.
    unsafe {
        if !(*b).private.is_empty() {
            let p = (*b).private.as_ptr().cast::<c_void>();
            if is_ud {
                (*b).ev.param.ud.private_data = p;
            } else {
                (*b).ev.param.conn.private_data = p;
            }
        }
    }
    if let Ok(mut q) = link.channel.queue.lock() {
        q.push_back(b as usize);
    }
    // SAFETY: one byte to the channel's pipe.
    unsafe { libc::write(link.channel.wfd.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
}

/// The engine id's source and destination addresses.
pub fn addresses(stack: &Stack, cm: CmId) -> (Option<SocketAddr>, Option<SocketAddr>) {
    stack.id(cm).map_or((None, None), |r| (r.src, r.dst))
}

/// An event channel.
#[repr(C)]
pub struct Channel {
    /// What the program sees.
    pub c: rdma_event_channel,
    /// What it shares with the engine.
    pub shared: Arc<ChannelShared>,
    /// The read end of its pipe.
    pub rfd: OwnedFd,
}

/// A new channel and what it shares with the engine (None: no pipe to be had).
pub fn new_channel() -> Option<(*mut rdma_event_channel, Arc<ChannelShared>)> {
    let (r, w) = blocking_pipe().ok()?;
    let shared = Arc::new(ChannelShared { queue: Mutex::new(VecDeque::new()), wfd: w });
    let ch = Box::new(Channel { c: rdma_event_channel { fd: r.as_raw_fd() }, shared: shared.clone(), rfd: r });
    Some((Box::into_raw(ch).cast(), shared))
}
