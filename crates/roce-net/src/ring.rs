//! PACKET_MMAP rings for [`crate::raw::RawSocket`]: a TPACKET_V3 receive ring (the kernel
//! fills blocks of frames and hands a block over when it is full or its retire timer fires)
//! and a transmit ring (frames written in place, one `send` kick per batch). The memory is
//! mapped once when the socket opens; no allocation per frame.
//!
//! Layout (Documentation/networking/packet_mmap.rst): one mapping, the receive ring first,
//! then the transmit ring. A receive block starts with `tpacket_block_desc`; its frames are
//! chained by `tp_next_offset`, each a `tpacket3_hdr`, then `sockaddr_ll`, then the frame at
//! `tp_mac`. A transmit slot is a `tpacket3_hdr` followed by the frame at offset 48
//! (`TPACKET_ALIGN(sizeof(tpacket3_hdr))`).

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{fence, AtomicU32, Ordering};

/// How to size the rings of a [`crate::raw::RawSocket`] (see [`crate::raw::RawSocket::open_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingConfig {
    /// Receive through a TPACKET_V3 ring (else `recvmmsg`).
    pub rx: bool,
    /// Bytes per receive block (a multiple of the page size, 4 KiB to 4 MiB).
    pub rx_block_size: u32,
    /// Receive blocks (1 to 1024).
    pub rx_blocks: u32,
    /// Milliseconds after which the kernel hands over a block that is not full (1 to 1000).
    /// A lone frame waits this long: rings suit streams, not request/response.
    pub rx_retire_ms: u32,
    /// Transmit through a ring (else `sendmmsg`).
    pub tx: bool,
    /// Transmit slots (1 to 65536); each holds one frame of up to the interface's MTU (at most
    /// 16 KiB − 48 bytes: a longer frame is refused with `InvalidInput`).
    pub tx_frames: u32,
    /// Hand transmitted frames straight to the driver (PACKET_QDISC_BYPASS), skipping the
    /// qdisc, as trafgen does.
    pub qdisc_bypass: bool,
}

impl Default for RingConfig {
    /// Both rings: 16 receive blocks of 256 KiB handed over after at most 1 ms, 512 transmit
    /// slots, no qdisc bypass.
    fn default() -> Self {
        RingConfig {
            rx: true,
            rx_block_size: 256 << 10,
            rx_blocks: 16,
            rx_retire_ms: 1,
            tx: true,
            tx_frames: 512,
            qdisc_bypass: false,
        }
    }
}

impl RingConfig {
    /// No ring at all (`recvmmsg`/`sendmmsg`, the default of [`crate::raw::RawSocket::open`]).
    pub const NONE: RingConfig = RingConfig {
        rx: false,
        rx_block_size: 0,
        rx_blocks: 0,
        rx_retire_ms: 0,
        tx: false,
        tx_frames: 0,
        qdisc_bypass: false,
    };

    /// A transmit ring only: batches leave with one kick, while frames are received one
    /// `recvmmsg` at a time with no retire delay (for request/response traffic).
    pub fn tx_only() -> RingConfig {
        RingConfig { rx: false, ..RingConfig::default() }
    }

    pub(crate) fn check(&self) -> io::Result<()> {
        let bad = |what: String| Err(io::Error::new(io::ErrorKind::InvalidInput, what));
        if self.rx {
            if !(4096..=4 << 20).contains(&self.rx_block_size) || !self.rx_block_size.is_multiple_of(4096) {
                return bad(format!(
                    "a receive block is a multiple of 4096 bytes from 4 KiB to 4 MiB (asked: {})",
                    self.rx_block_size
                ));
            }
            if !(1..=1024).contains(&self.rx_blocks) {
                return bad(format!("1 to 1024 receive blocks (asked: {})", self.rx_blocks));
            }
            if !(1..=1000).contains(&self.rx_retire_ms) {
                return bad(format!("a block retire timeout of 1 to 1000 ms (asked: {})", self.rx_retire_ms));
            }
        }
        if self.tx && !(1..=65536).contains(&self.tx_frames) {
            return bad(format!("1 to 65536 transmit slots (asked: {})", self.tx_frames));
        }
        Ok(())
    }
}

/// The frame's offset in a transmit slot: `TPACKET_ALIGN(sizeof(struct tpacket3_hdr))`.
const TX_DATA_OFF: usize = 48;
/// Where `sockaddr_ll` follows a received frame's `tpacket3_hdr`.
const RX_SLL_OFF: usize = 48;
/// `tpacket3_hdr` field offsets.
const H_NEXT: usize = 0;
const H_SNAPLEN: usize = 12;
const H_LEN: usize = 16;
const H_STATUS: usize = 20;
const H_MAC: usize = 24;
/// `tpacket_block_desc` field offsets (`hdr.bh1`).
const B_STATUS: usize = 8;
const B_NUM_PKTS: usize = 12;
const B_FIRST: usize = 16;
/// `sockaddr_ll.sll_pkttype`.
const SLL_PKTTYPE: usize = 10;

/// The shared mapping of both rings.
#[derive(Debug)]
struct Mapping {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned by one socket and only touched through `&mut self` methods of
// its rings; the kernel's side is synchronised through the status words.
unsafe impl Send for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly what mmap returned; nothing refers to it after drop.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// A status word shared with the kernel.
///
/// # Safety
/// `p` must point at a live, 4-byte aligned u32 inside the mapping.
unsafe fn status<'a>(p: *mut u8) -> &'a AtomicU32 {
    // SAFETY: by the caller's contract; AtomicU32 has u32's layout.
    unsafe { &*(p as *const AtomicU32) }
}

/// Read a plain u32 the kernel wrote before it released the status word we acquired.
///
/// # Safety
/// `p` must point at 4 readable bytes inside the mapping.
unsafe fn rd32(p: *const u8) -> u32 {
    // SAFETY: by the caller's contract (unaligned read: no alignment assumed).
    unsafe { std::ptr::read_unaligned(p as *const u32) }
}

/// Both rings of one socket (either may be absent).
#[derive(Debug)]
pub(crate) struct Rings {
    map: Mapping,
    rx: Option<RxRing>,
    tx: Option<TxRing>,
}

#[derive(Debug)]
struct RxRing {
    block_size: usize,
    blocks: usize,
    /// The block being read.
    block: usize,
    /// Frames of it still to read, and where the next one is (offset in the block).
    left: u32,
    next: usize,
}

#[derive(Debug)]
struct TxRing {
    /// Start of the ring in the mapping.
    off: usize,
    frame_size: usize,
    frames: usize,
    /// The next slot to fill.
    head: usize,
    /// Slots filled since the last kick.
    queued: usize,
}

/// A frame taken from the receive ring: its bytes (`len` ≤ the caller's slot) or a truncated
/// one (`snaplen` < `len`, or larger than the slot).
pub(crate) enum RxFrame<'a> {
    Frame(&'a [u8]),
    Outgoing,
    Truncated(usize),
}

fn setsockopt<T>(fd: RawFd, opt: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: the option value points at a live `T` of the size given.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_PACKET,
            opt,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl Rings {
    /// Set the rings up on a bound packet socket whose interface has MTU `mtu`. An error leaves
    /// the socket in an unknown ring state: the caller closes it and opens a plain one.
    pub(crate) fn setup(fd: RawFd, cfg: &RingConfig, mtu: usize) -> io::Result<Rings> {
        cfg.check()?;
        let ctx = |what: &'static str| move |e: io::Error| io::Error::new(e.kind(), format!("{what}: {e}"));
        setsockopt(fd, libc::PACKET_VERSION, &(libc::tpacket_versions::TPACKET_V3 as libc::c_int))
            .map_err(ctx("PACKET_VERSION TPACKET_V3"))?;
        if cfg.tx {
            // A malformed slot is skipped instead of stopping the ring for good (before any
            // ring exists, or the kernel says EBUSY).
            setsockopt(fd, libc::PACKET_LOSS, &(1 as libc::c_int)).map_err(ctx("PACKET_LOSS"))?;
        }
        let mut rx_len = 0usize;
        if cfg.rx {
            let req = libc::tpacket_req3 {
                tp_block_size: cfg.rx_block_size,
                tp_block_nr: cfg.rx_blocks,
                tp_frame_size: 2048,
                tp_frame_nr: cfg.rx_block_size / 2048 * cfg.rx_blocks,
                tp_retire_blk_tov: cfg.rx_retire_ms,
                tp_sizeof_priv: 0,
                tp_feature_req_word: 0,
            };
            setsockopt(fd, libc::PACKET_RX_RING, &req).map_err(ctx("PACKET_RX_RING"))?;
            rx_len = cfg.rx_block_size as usize * cfg.rx_blocks as usize;
        }
        let mut tx = None;
        let mut tx_len = 0usize;
        if cfg.tx {
            // A slot holds the header and a frame of MTU + Ethernet + VLAN header, up to 16 KiB
            // (jumbo frames; a RoCE frame is at most 4 KiB of payload plus headers, and `lo`'s
            // 64 KiB MTU would make the ring 64 MiB); slots of a power of two pack blocks of
            // 64 KiB (or one slot) exactly.
            let frame_size = (TX_DATA_OFF + mtu + 18).next_power_of_two().clamp(2048, 16 << 10);
            let block_size = frame_size.max(64 << 10);
            let per_block = block_size / frame_size;
            let frames = (cfg.tx_frames as usize).div_ceil(per_block) * per_block;
            let req = libc::tpacket_req3 {
                tp_block_size: block_size as u32,
                tp_block_nr: (frames / per_block) as u32,
                tp_frame_size: frame_size as u32,
                tp_frame_nr: frames as u32,
                tp_retire_blk_tov: 0,
                tp_sizeof_priv: 0,
                tp_feature_req_word: 0,
            };
            setsockopt(fd, libc::PACKET_TX_RING, &req).map_err(ctx("PACKET_TX_RING"))?;
            if cfg.qdisc_bypass {
                setsockopt(fd, libc::PACKET_QDISC_BYPASS, &(1 as libc::c_int)).map_err(ctx("PACKET_QDISC_BYPASS"))?;
            }
            tx = Some(TxRing { off: rx_len, frame_size, frames, head: 0, queued: 0 });
            tx_len = frames * frame_size;
        }
        let len = rx_len + tx_len;
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no ring asked for"));
        }
        // SAFETY: mapping the socket's rings, length as configured; checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(ctx("mmap of the packet rings")(io::Error::last_os_error()));
        }
        let rx = cfg.rx.then_some(RxRing {
            block_size: cfg.rx_block_size as usize,
            blocks: cfg.rx_blocks as usize,
            block: 0,
            left: 0,
            next: 0,
        });
        Ok(Rings { map: Mapping { base: base.cast(), len }, rx, tx })
    }

    pub(crate) fn has_rx(&self) -> bool {
        self.rx.is_some()
    }

    pub(crate) fn has_tx(&self) -> bool {
        self.tx.is_some()
    }

    /// The next received frame, copied by `take` while it is in the ring; `None` when no block
    /// is ready. `take` sees the frame's bytes (or why it is skipped).
    pub(crate) fn rx_next<R>(&mut self, take: impl FnOnce(RxFrame<'_>) -> R) -> Option<R> {
        let base = self.map.base;
        loop {
            let rx = self.rx.as_mut()?;
            // SAFETY: block `rx.block` lies inside the receive ring of the mapping.
            let blk = unsafe { base.add(rx.block * rx.block_size) };
            if rx.left == 0 {
                // SAFETY: the block status word, 4-byte aligned at offset 8 of a page-aligned block.
                let st = unsafe { status(blk.add(B_STATUS)) };
                if st.load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                    return None;
                }
                // SAFETY: the block is ours (TP_STATUS_USER, acquired): its header is written.
                let (n, first) = unsafe { (rd32(blk.add(B_NUM_PKTS)), rd32(blk.add(B_FIRST))) };
                if n == 0 {
                    self.release_block();
                    continue;
                }
                rx.left = n;
                rx.next = first as usize;
            }
            if rx.next + RX_SLL_OFF + 12 > rx.block_size {
                // A corrupt chain: give the block back rather than read outside it.
                self.release_block();
                continue;
            }
            // SAFETY: the frame header lies inside the block (checked just above).
            let h = unsafe { blk.add(rx.next) };
            // SAFETY: fields of the frame header and its sockaddr_ll, inside the block.
            let (next, snap, len, mac, pkttype) = unsafe {
                (
                    rd32(h.add(H_NEXT)) as usize,
                    rd32(h.add(H_SNAPLEN)) as usize,
                    rd32(h.add(H_LEN)) as usize,
                    std::ptr::read_unaligned(h.add(H_MAC) as *const u16) as usize,
                    *h.add(RX_SLL_OFF + SLL_PKTTYPE),
                )
            };
            let start = rx.next + mac;
            let r = if pkttype == libc::PACKET_OUTGOING {
                take(RxFrame::Outgoing)
            } else if snap < len || start + snap > rx.block_size {
                take(RxFrame::Truncated(len))
            } else {
                // SAFETY: `start..start + snap` lies inside the block (checked), which is ours
                // until it is released below, after `take` returned.
                take(RxFrame::Frame(unsafe { std::slice::from_raw_parts(blk.add(start), snap) }))
            };
            rx.left -= 1;
            rx.next += next;
            if rx.left == 0 {
                self.release_block();
            }
            return Some(r);
        }
    }

    fn release_block(&mut self) {
        let base = self.map.base;
        let rx = self.rx.as_mut().expect("a receive ring");
        // SAFETY: the status word of the current block, inside the mapping.
        let st = unsafe { status(base.add(rx.block * rx.block_size + B_STATUS)) };
        st.store(libc::TP_STATUS_KERNEL, Ordering::Release);
        rx.block = (rx.block + 1) % rx.blocks;
        rx.left = 0;
    }

    /// Put one frame in the next transmit slot (not sent before [`Rings::tx_kick`]). `Ok(false)`:
    /// the slot is still the kernel's (the ring is full: kick and wait).
    pub(crate) fn tx_put(&mut self, frame: &[u8]) -> io::Result<bool> {
        let base = self.map.base;
        let tx = self.tx.as_mut().expect("a transmit ring");
        if frame.len() < 14 || frame.len() > tx.frame_size - TX_DATA_OFF {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a {}-byte frame: an Ethernet frame is 14 bytes up to the interface's MTU (transmit slots hold {} bytes)",
                    frame.len(),
                    tx.frame_size - TX_DATA_OFF
                ),
            ));
        }
        // SAFETY: slot `head` lies inside the transmit ring (blocks hold whole slots).
        let slot = unsafe { base.add(tx.off + tx.head * tx.frame_size) };
        // SAFETY: the slot's status word, 4-byte aligned.
        let st = unsafe { status(slot.add(H_STATUS)) };
        let s = st.load(Ordering::Acquire);
        if s & (libc::TP_STATUS_SEND_REQUEST | libc::TP_STATUS_SENDING) != 0 {
            return Ok(false);
        }
        // SAFETY: the slot is ours (status AVAILABLE or WRONG_FORMAT, acquired); the frame fits
        // after the header (checked above).
        unsafe {
            std::ptr::copy_nonoverlapping(frame.as_ptr(), slot.add(TX_DATA_OFF), frame.len());
            std::ptr::write_unaligned(slot.add(H_LEN) as *mut u32, frame.len() as u32);
            std::ptr::write_unaligned(slot.add(H_SNAPLEN) as *mut u32, frame.len() as u32);
            std::ptr::write_unaligned(slot.add(H_NEXT) as *mut u32, 0);
        }
        fence(Ordering::Release);
        st.store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
        tx.head = (tx.head + 1) % tx.frames;
        tx.queued += 1;
        Ok(true)
    }

    /// Slots filled since the last kick.
    pub(crate) fn tx_queued(&self) -> usize {
        self.tx.as_ref().map_or(0, |t| t.queued)
    }

    /// Tell the kernel to send the filled slots: `wait` blocks until they have left (and
    /// their slots are free again). A kick without waiting that finds the socket's send buffer
    /// full (EAGAIN/ENOBUFS) waits instead: frames must not sit in the ring until the next
    /// batch, which may never come.
    pub(crate) fn tx_kick(&mut self, fd: RawFd, wait: bool) -> io::Result<()> {
        let mut flags = if wait { 0 } else { libc::MSG_DONTWAIT };
        if let Some(t) = self.tx.as_mut() {
            t.queued = 0;
        }
        loop {
            // SAFETY: a zero-length send on the socket: the kernel reads the ring, not a buffer.
            let r = unsafe { libc::send(fd, std::ptr::null(), 0, flags) };
            if r >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) if flags != 0 => flags = 0,
                _ => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_bounds_are_errors() {
        assert!(RingConfig::default().check().is_ok());
        assert!(RingConfig::tx_only().check().is_ok());
        assert!(RingConfig::NONE.check().is_ok());
        for bad in [
            RingConfig { rx_block_size: 1000, ..RingConfig::default() },
            RingConfig { rx_block_size: 8 << 20, ..RingConfig::default() },
            RingConfig { rx_blocks: 0, ..RingConfig::default() },
            RingConfig { rx_retire_ms: 0, ..RingConfig::default() },
            RingConfig { tx_frames: 0, ..RingConfig::default() },
        ] {
            assert_eq!(bad.check().unwrap_err().kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
    }

    /// Both rings for real, between the ends of a veth pair in a network namespace of the
    /// test's own thread: a batch arrives complete, in order and byte-identical; single frames
    /// too; our own frames are not received; a frame beyond the MTU is refused. Needs root
    /// (CI runs as root): a missing privilege is a failure.
    #[test]
    fn rings_carry_frames_over_a_veth_pair() {
        use crate::device::{Device, RecvBatch};
        use crate::raw::RawSocket;
        std::thread::spawn(|| {
            crate::veth_in_own_netns("r1", "r2");
            let mut a = RawSocket::open_with("r1", RingConfig::default()).unwrap();
            let mut b = RawSocket::open_with(
                "r2",
                RingConfig { rx_blocks: 4, rx_block_size: 64 << 10, ..RingConfig::default() },
            )
            .unwrap();
            assert_eq!(
                (a.rings(), b.rings()),
                ((true, true), (true, true)),
                "{:?} {:?}",
                a.ring_fallback(),
                b.ring_fallback()
            );
            // 300 frames (more than a 64 KiB block holds) of a local experimental EtherType.
            let frames: Vec<Vec<u8>> = (0..300u32)
                .map(|i| {
                    let mut f = vec![0xff; 6];
                    f.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0x88, 0xb5]);
                    f.extend_from_slice(&i.to_be_bytes());
                    f.resize(60 + (i as usize % 7) * 100, i as u8);
                    f
                })
                .collect();
            let refs: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
            assert_eq!(a.send_batch(&refs).unwrap(), 300);
            a.send(&frames[0]).unwrap();
            let mut batch = RecvBatch::new(64, 2048).unwrap();
            let mut got: Vec<Vec<u8>> = Vec::new();
            let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while got.len() < 301 && std::time::Instant::now() < end {
                if b.recv_batch(&mut batch).unwrap() == 0 {
                    let mut p = libc::pollfd { fd: b.raw_fd().unwrap(), events: libc::POLLIN, revents: 0 };
                    // SAFETY: one live pollfd.
                    unsafe { libc::poll(&mut p, 1, 10) };
                }
                got.extend(batch.iter().filter(|f| f.get(12..14) == Some(&[0x88, 0xb5][..])).map(<[u8]>::to_vec));
            }
            assert_eq!(got.len(), 301);
            assert_eq!(&got[..300], &frames[..]);
            assert_eq!(got[300], frames[0]);
            // The other way, one frame through recv(); a's own frames never come back to a.
            b.send(&frames[5]).unwrap();
            let mut buf = [0u8; 2048];
            let mut back = None;
            while back.is_none() && std::time::Instant::now() < end {
                match a.recv(&mut buf).unwrap() {
                    Some(n) if buf[12..14] == [0x88, 0xb5] => back = Some(buf[..n].to_vec()),
                    _ => std::thread::sleep(std::time::Duration::from_millis(1)),
                }
            }
            assert_eq!(back.as_deref(), Some(&frames[5][..]));
            let e = a.send(&vec![0u8; 20_000]).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
            let st = b.stats();
            assert_eq!((st.truncated, st.ring_fallbacks), (0, 0));
            assert!(a.stats().tx_kicks >= 2);
        })
        .join()
        .unwrap();
    }
}
