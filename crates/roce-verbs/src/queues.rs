//! What the program's threads and the engine's thread share: completion queues (each with its
//! own lock, so `ibv_poll_cq` never waits for the engine), completion channels, UD QPs' posted
//! receives, and the pipes that make channels pollable. The engine's thread fills them
//! ([`deliver_datagrams`]); the verbs read them.

use core::ffi::c_int;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::abi::*;

/// What a completion channel shares with the engine's thread: the write end of its pipe.
pub struct CompChannelShared {
    /// The write end (the engine's thread writes a CQ's address when it fires).
    pub wfd: OwnedFd,
}

/// What a CQ shares with the engine's thread.
pub struct CqShared {
    /// The completions not yet polled.
    pub wcs: Mutex<VecDeque<ibv_wc>>,
    /// The CQ's capacity (`cqe`); past it a completion is counted as an overrun and dropped.
    pub capacity: usize,
    /// Armed by `ibv_req_notify_cq`: [`ARMED_NEXT`] (the next completion writes the CQ to its
    /// channel), [`ARMED_SOLICITED`] (the next solicited one), 0 (not armed).
    pub armed: AtomicU8,
    /// The CQ's completion channel, if any.
    pub channel: Option<Arc<CompChannelShared>>,
    /// The CQ's address (what the channel carries).
    pub cq_addr: std::sync::atomic::AtomicUsize,
    /// Completions dropped because the CQ was full.
    pub overruns: AtomicU32,
}

impl CqShared {
    /// Queue a completion; wake the channel if the CQ is armed for it. Only an error is
    /// solicited among completions that carry no Solicited Event bit (sends, UD receives).
    pub fn push(&self, wc: ibv_wc) {
        let solicited = wc.status != IBV_WC_SUCCESS;
        self.push_solicited(wc, solicited);
    }

    /// As [`CqShared::push`], for a receive whose message carried the Solicited Event bit or
    /// not (rxe_cq_post's `solicited`: a CQ armed with `solicited_only` wakes only for one).
    pub fn push_solicited(&self, wc: ibv_wc, solicited: bool) {
        if let Ok(mut q) = self.wcs.lock() {
            if q.len() >= self.capacity {
                self.overruns.fetch_add(1, Ordering::Relaxed);
                return;
            }
            q.push_back(wc);
        }
        let mode = self.armed.load(Ordering::Acquire);
        let fires = mode == ARMED_NEXT || (mode == ARMED_SOLICITED && solicited);
        if fires && self.armed.compare_exchange(mode, 0, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            if let Some(ch) = &self.channel {
                let addr = self.cq_addr.load(Ordering::Acquire).to_ne_bytes();
                // SAFETY: 8 bytes from a local array to the channel's pipe.
                unsafe { libc::write(ch.wfd.as_raw_fd(), addr.as_ptr().cast(), addr.len()) };
            }
        }
    }
}

/// [`CqShared::armed`]: armed for the next completion.
pub const ARMED_NEXT: u8 = 1;
/// [`CqShared::armed`]: armed for the next solicited completion (or error).
pub const ARMED_SOLICITED: u8 = 2;

/// A posted receive: where a datagram goes.
#[derive(Debug, Clone)]
pub struct RecvWr {
    /// The program's id of the request.
    pub wr_id: u64,
    /// Checked elements (address, length).
    pub sges: Vec<(u64, u32)>,
}

/// A UD QP as the engine's thread sees it.
pub struct UdQpLink {
    /// Posted receives, oldest first.
    pub recvs: VecDeque<RecvWr>,
    /// Where their completions go.
    pub recv_cq: Arc<CqShared>,
    /// The most receives it holds (`cap.max_recv_wr`).
    pub max_recv: usize,
}

impl UdQpLink {
    /// A QP with no receive posted.
    pub fn new(recv_cq: Arc<CqShared>, max_recv: usize) -> UdQpLink {
        UdQpLink { recvs: VecDeque::new(), recv_cq, max_recv }
    }
}

/// A pipe whose read end blocks (as a real channel's fd does until the program sets
/// O_NONBLOCK) and whose write end never does. Both close on exec.
pub fn blocking_pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: a valid two-int array for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 just returned these two descriptors, owned by nobody else.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fcntl on our own descriptor.
    unsafe {
        let fl = libc::fcntl(w.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(w.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
    Ok((r, w))
}

/// Read exactly `buf.len()` bytes from `fd` (a pipe whose records are written whole):
/// Ok(true), Ok(false) for EOF, Err(errno) (EAGAIN when the program made it non-blocking).
pub fn read_record(fd: c_int, buf: &mut [u8]) -> Result<bool, i32> {
    let mut off = 0;
    while off < buf.len() {
        // SAFETY: reads into the unread part of the caller's buffer.
        let n = unsafe { libc::read(fd, buf[off..].as_mut_ptr().cast(), buf.len() - off) };
        if n > 0 {
            off += n as usize;
        } else if n == 0 {
            return Ok(false);
        } else {
            let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
            if e == libc::EINTR || (e == libc::EAGAIN && off > 0) {
                continue;
            }
            return Err(e);
        }
    }
    Ok(true)
}

/// The 40 bytes before a UD datagram in its receive buffer, as rxe writes them: for IPv4 the
/// IPv4 header in the last 20 bytes (the first 20 zero), for IPv6 the IPv6 header.
pub fn grh_area(dg: &roce_cm::Datagram) -> [u8; 40] {
    let mut g = [0u8; 40];
    let payload_len = 12 + 8 + if dg.imm_data.is_some() { 4 } else { 0 } + dg.payload.len() + 4;
    match (dg.src, dg.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let h = &mut g[20..40];
            let total = (20 + 8 + payload_len) as u16;
            h[0] = 0x45;
            h[1] = dg.traffic_class;
            h[2..4].copy_from_slice(&total.to_be_bytes());
            h[6] = 0x40;
            h[8] = dg.hop_limit;
            h[9] = 17;
            h[12..16].copy_from_slice(&s.octets());
            h[16..20].copy_from_slice(&d.octets());
            let mut sum: u32 = h.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum();
            while sum > 0xffff {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            h[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        }
        (s, d) => {
            let v6 = |a: IpAddr| match a {
                IpAddr::V6(v) => v.octets(),
                IpAddr::V4(v) => v.to_ipv6_mapped().octets(),
            };
            g[0] = 0x60 | (dg.traffic_class >> 4);
            g[1] = dg.traffic_class << 4;
            g[4..6].copy_from_slice(&((8 + payload_len) as u16).to_be_bytes());
            g[6] = 17;
            g[7] = dg.hop_limit;
            g[8..24].copy_from_slice(&v6(s));
            g[24..40].copy_from_slice(&v6(d));
        }
    }
    g
}

/// Hand each UD QP's datagrams to its posted receives (GRH area, then the payload); a
/// datagram with no receive posted is dropped and counted in `drops`, as rxe drops it.
pub fn deliver_datagrams(
    stack: &mut roce_cm::Stack,
    ud_qps: &mut HashMap<u32, UdQpLink>,
    macs: &mut HashMap<IpAddr, [u8; 6]>,
    drops: &mut u64,
) {
    for (qpn, link) in ud_qps.iter_mut() {
        let qpn = *qpn;
        while let Some(dg) = stack.poll_recv(qpn) {
            macs.insert(dg.src, dg.src_mac);
            let Some(wr) = link.recvs.pop_front() else {
                *drops += 1;
                continue;
            };
            let grh = grh_area(&dg);
            let total = 40 + dg.payload.len();
            let room: usize = wr.sges.iter().map(|(_, l)| *l as usize).sum();
            let mut c = ibv_wc {
                wr_id: wr.wr_id,
                status: IBV_WC_SUCCESS,
                opcode: IBV_WC_RECV,
                qp_num: qpn,
                ..Default::default()
            };
            if total > room {
                c.status = IBV_WC_LOC_LEN_ERR;
            } else {
                let mut src = grh.iter().chain(dg.payload.iter());
                for (addr, len) in &wr.sges {
                    // SAFETY: checked at post time against a region with local write.
                    let dst = unsafe { std::slice::from_raw_parts_mut(*addr as *mut u8, *len as usize) };
                    for (d, s) in dst.iter_mut().zip(&mut src) {
                        *d = *s;
                    }
                }
                c.byte_len = total as u32;
                c.src_qp = dg.src_qp;
                c.wc_flags = IBV_WC_GRH;
                if let Some(imm) = dg.imm_data {
                    c.imm_data = imm.to_be();
                    c.wc_flags |= IBV_WC_WITH_IMM;
                }
                c.pkey_index = 0;
            }
            link.recv_cq.push(c);
        }
    }
}

/// A connected QP's counts, mirrored by the engine's thread for the posting threads.
#[derive(Debug, Default)]
pub struct QpMirror {
    /// The engine's QP state (`ibv_qp_state`).
    pub state: AtomicU32,
    /// Send work requests the engine holds.
    pub sq_len: AtomicU32,
    /// Receive work requests it holds.
    pub rq_len: AtomicU32,
    /// Send requests posted and not yet taken by the engine's thread.
    pub sq_pending: AtomicU32,
    /// Receive requests posted and not yet taken.
    pub rq_pending: AtomicU32,
}

/// A connected QP as the engine's thread sees it.
pub struct ConnQpLink {
    /// Where send completions go (an XRC target has no send CQ).
    pub send_cq: Option<Arc<CqShared>>,
    /// Where receive completions go (the XRC types have none: an XRC SRQ's CQ takes them).
    pub recv_cq: Option<Arc<CqShared>>,
    /// The counts it mirrors.
    pub mirror: Arc<QpMirror>,
}

/// An SRQ as the engine's thread sees it (the address its async events carry).
pub struct SrqLink {
    /// The `ibv_srq` object's address.
    pub srq_ptr: usize,
    /// An XRC SRQ's CQ, where its receives complete.
    pub cq: Option<Arc<CqShared>>,
}

struct AsyncPipe(OwnedFd, OwnedFd);
static ASYNC: OnceLock<Option<AsyncPipe>> = OnceLock::new();

/// Queue an asynchronous event for `ibv_get_async_event` (the engine's thread).
pub fn raise_async_event(element: ibv_async_event_element, event_type: u32) {
    let Some(p) = ASYNC.get_or_init(|| blocking_pipe().ok().map(|(r, w)| AsyncPipe(r, w))).as_ref() else { return };
    let ev = ibv_async_event { element, event_type };
    // SAFETY: the event's bytes, whole, to our own pipe (one record per write).
    unsafe {
        libc::write(p.1.as_raw_fd(), (&ev as *const ibv_async_event).cast(), std::mem::size_of::<ibv_async_event>())
    };
}

/// The read end of the asynchronous events' pipe (`ibv_context.async_fd`).
pub fn async_fd() -> c_int {
    ASYNC.get_or_init(|| blocking_pipe().ok().map(|(r, w)| AsyncPipe(r, w))).as_ref().map_or(-1, |p| p.0.as_raw_fd())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn armed_cq() -> (CqShared, OwnedFd) {
        let (r, w) = blocking_pipe().unwrap();
        let cq = CqShared {
            wcs: Mutex::new(VecDeque::new()),
            capacity: 16,
            armed: AtomicU8::new(0),
            channel: Some(Arc::new(CompChannelShared { wfd: w })),
            cq_addr: std::sync::atomic::AtomicUsize::new(0x1234),
            overruns: AtomicU32::new(0),
        };
        (cq, r)
    }

    fn fired(r: &OwnedFd) -> usize {
        // SAFETY: fcntl and a read on our own pipe, made non-blocking for the count.
        unsafe {
            let fl = libc::fcntl(r.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(r.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
        let mut n = 0;
        let mut b = [0u8; 8];
        // SAFETY: reads into a local buffer of its length.
        while unsafe { libc::read(r.as_raw_fd(), b.as_mut_ptr().cast(), 8) } == 8 {
            n += 1;
        }
        n
    }

    /// `ibv_req_notify_cq(cq, 1)` wakes the channel only for a solicited completion or an
    /// error (rxe_cq_post); `ibv_req_notify_cq(cq, 0)` for the next one; either fires once.
    #[test]
    fn solicited_only_arming_fires_for_solicited_receives_and_errors() {
        let (cq, r) = armed_cq();
        let ok = ibv_wc { status: IBV_WC_SUCCESS, ..Default::default() };
        cq.armed.store(ARMED_SOLICITED, Ordering::Release);
        cq.push_solicited(ok, false);
        cq.push(ok);
        assert_eq!(fired(&r), 0);
        cq.push_solicited(ok, true);
        cq.push_solicited(ok, true);
        assert_eq!(fired(&r), 1, "once, then disarmed");
        cq.armed.store(ARMED_SOLICITED, Ordering::Release);
        cq.push(ibv_wc { status: IBV_WC_REM_ACCESS_ERR, ..Default::default() });
        assert_eq!(fired(&r), 1, "an error is solicited");
        cq.armed.store(ARMED_NEXT, Ordering::Release);
        cq.push_solicited(ok, false);
        assert_eq!(fired(&r), 1);
        assert_eq!(cq.wcs.lock().unwrap().len(), 6);
    }
}
