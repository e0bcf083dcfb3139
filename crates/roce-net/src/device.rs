//! The seam between a driver loop and the wire: a non-blocking Ethernet frame device, and an
//! in-memory pair of devices connected back to back.

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

/// A non-blocking Ethernet device: whole frames (without FCS) in and out.
///
/// Wrappers ([`crate::PcapDevice`], [`crate::FaultDevice`]) take any `Device` and are one
/// themselves, smoltcp style, so they stack: `PcapDevice<FaultDevice<RawSocket>>`.
pub trait Device {
    /// Send one frame. `Ok` means the device took it (it may still be lost on the wire).
    fn send(&mut self, frame: &[u8]) -> io::Result<()>;

    /// Receive one frame into `buf` without blocking: `Ok(Some(len))` for a frame,
    /// `Ok(None)` when none is waiting. A frame longer than `buf` is an
    /// [`io::ErrorKind::InvalidInput`] error and stays queued (call again with a larger
    /// buffer; [`MAX_FRAME_LEN`] always suffices).
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>>;

    /// A file descriptor that polls readable when a frame may be waiting, for a `poll(2)`
    /// loop; `None` (the default) for devices that need none (in memory: poll them after
    /// every send).
    #[cfg(unix)]
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }

    /// Whether frames wait in a receive queue other than a flood's (with several queues,
    /// [`crate::raw::RawSocket::fan_out`]: the one that alone filled the last receive batch),
    /// at the cost of one system call: a loop answering a backlog looks between its sends and
    /// goes back to reading. `false` (the default) where the device cannot tell.
    fn rx_ready_beside_flood(&self) -> bool {
        false
    }

    /// Send several frames, in order; returns how many the device took (all of them, or the
    /// ones before an error that came after at least one was taken). The default sends them
    /// one by one; [`crate::raw::RawSocket`] hands them to the kernel in one `sendmmsg(2)`.
    fn send_batch(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        for (i, f) in frames.iter().enumerate() {
            if let Err(e) = self.send(f) {
                return if i == 0 { Err(e) } else { Ok(i) };
            }
        }
        Ok(frames.len())
    }

    /// Receive the frames waiting, up to the batch's capacity, without blocking; returns how
    /// many (0: none waiting). The default receives them one by one; [`crate::raw::RawSocket`]
    /// takes them from the kernel in one `recvmmsg(2)`. An error after some frames were
    /// received ends the batch early (it recurs on the next call).
    fn recv_batch(&mut self, batch: &mut RecvBatch) -> io::Result<usize> {
        batch.clear();
        for slot in 0..batch.capacity() {
            match self.recv(batch.slot_mut(slot)) {
                Ok(Some(n)) => batch.push(slot, n),
                Ok(None) => break,
                Err(e) if batch.is_empty() => return Err(e),
                Err(_) => break,
            }
        }
        Ok(batch.len())
    }

    /// [`Device::recv_batch`] for a device that can hand RoCEv2 datagrams over where it read
    /// them, without a frame built around them ([`crate::udp::RoceUdpSocket`]): each one whose
    /// ICRC it verified goes to `datagram` during the call (how it arrived, and the UDP payload
    /// from the BTH to the ICRC: for `Stack::handle_datagram_icrc_verified`); the frames left
    /// in `batch` arrived after them. Returns how many of both, up to the batch's capacity (0:
    /// none waiting). The default hands over no datagram (`recv_batch`): wrappers that must
    /// see every frame (a capture, a fault injector) keep it.
    fn recv_in_place(
        &mut self,
        batch: &mut RecvBatch,
        datagram: &mut dyn FnMut(&roce_wire::datagram::Arrival, &[u8]),
    ) -> io::Result<usize> {
        let _ = datagram;
        self.recv_batch(batch)
    }
}

/// The frames of one [`Device::recv_batch`]: `capacity` slots of `slot_len` bytes in one
/// buffer, allocated once and reused by every call.
#[derive(Debug, Clone)]
pub struct RecvBatch {
    buf: Vec<u8>,
    slot_len: usize,
    /// (slot, length, ICRC verified by the device) of each frame received, in order.
    frames: Vec<(usize, usize, bool)>,
}

impl RecvBatch {
    /// The largest batch: 1,024 slots.
    pub const MAX_SLOTS: usize = 1024;

    /// A batch of `slots` slots (1 to [`RecvBatch::MAX_SLOTS`]) of `slot_len` bytes (1 to
    /// [`MAX_FRAME_LEN`]; a frame longer than its slot is an error, as for [`Device::recv`]).
    pub fn new(slots: usize, slot_len: usize) -> io::Result<RecvBatch> {
        if !(1..=Self::MAX_SLOTS).contains(&slots) || !(1..=MAX_FRAME_LEN).contains(&slot_len) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a receive batch has 1 to {} slots of 1 to {MAX_FRAME_LEN} bytes (asked: {slots} of {slot_len})",
                    Self::MAX_SLOTS
                ),
            ));
        }
        Ok(RecvBatch { buf: vec![0; slots * slot_len], slot_len, frames: Vec::with_capacity(slots) })
    }

    /// Slots in all.
    pub fn capacity(&self) -> usize {
        self.buf.len() / self.slot_len
    }

    /// Bytes per slot.
    pub fn slot_len(&self) -> usize {
        self.slot_len
    }

    /// Frames received.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Whether no frame was received.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// The `i`th frame received.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let &(slot, len, _) = self.frames.get(i)?;
        Some(&self.buf[slot * self.slot_len..slot * self.slot_len + len])
    }

    /// The frames received, in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.frames.iter().map(|&(slot, len, _)| &self.buf[slot * self.slot_len..slot * self.slot_len + len])
    }

    /// The frames received, in order, each with whether the device computed its ICRC over
    /// these bytes and found it right ([`RecvBatch::push_icrc_verified`]): such a frame can go
    /// to the engine's `handle_frame_icrc_verified`, every other to `handle_frame`.
    pub fn iter_icrc_verified(&self) -> impl Iterator<Item = (&[u8], bool)> + '_ {
        self.frames.iter().map(|&(slot, len, ok)| (&self.buf[slot * self.slot_len..slot * self.slot_len + len], ok))
    }

    /// Forget the frames (a device does this before filling the batch).
    pub fn clear(&mut self) {
        self.frames.clear();
    }

    /// Slot `slot`'s bytes, for a device to receive into.
    ///
    /// # Panics
    /// If `slot` is not below [`RecvBatch::capacity`].
    ///
    /// A frame already pushed in that slot loses its ICRC verdict: whoever writes to it (a
    /// fault injector, say) may change what was verified.
    pub fn slot_mut(&mut self, slot: usize) -> &mut [u8] {
        for f in self.frames.iter_mut().filter(|f| f.0 == slot) {
            f.2 = false;
        }
        &mut self.buf[slot * self.slot_len..(slot + 1) * self.slot_len]
    }

    /// Every slot at once (for a device that receives several frames in one call). Every
    /// frame already pushed loses its ICRC verdict (see [`RecvBatch::slot_mut`]).
    pub fn slots_mut(&mut self) -> std::slice::ChunksExactMut<'_, u8> {
        for f in &mut self.frames {
            f.2 = false;
        }
        self.buf.chunks_exact_mut(self.slot_len)
    }

    /// Record that slot `slot` holds a frame of `len` bytes (the next one in order).
    ///
    /// # Panics
    /// If `slot` is out of range or `len` exceeds the slot.
    pub fn push(&mut self, slot: usize, len: usize) {
        assert!(slot < self.capacity() && len <= self.slot_len, "slot {slot}, length {len} out of range");
        self.frames.push((slot, len, false));
    }

    /// [`RecvBatch::push`] for a frame whose ICRC the device computed over the slot's bytes
    /// as they stand and found right (the engine need not compute it again). Writing to the
    /// slot afterwards ([`RecvBatch::slot_mut`]) takes the verdict back.
    ///
    /// # Panics
    /// As [`RecvBatch::push`].
    pub fn push_icrc_verified(&mut self, slot: usize, len: usize) {
        self.push(slot, len);
        if let Some(f) = self.frames.last_mut() {
            f.2 = true;
        }
    }
}

/// A receive buffer of this size holds any frame a device of this crate returns.
pub const MAX_FRAME_LEN: usize = 65_536;

/// `Device` for a pointer to a device: every method passed through (a default method would
/// lose the inner device's batching and descriptor).
macro_rules! forward_device {
    ($($ptr:ty),+) => {$(
        impl<D: Device + ?Sized> Device for $ptr {
            fn send(&mut self, frame: &[u8]) -> io::Result<()> {
                (**self).send(frame)
            }

            fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
                (**self).recv(buf)
            }

            #[cfg(unix)]
            fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
                (**self).raw_fd()
            }

            fn rx_ready_beside_flood(&self) -> bool {
                (**self).rx_ready_beside_flood()
            }

            fn send_batch(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
                (**self).send_batch(frames)
            }

            fn recv_batch(&mut self, batch: &mut RecvBatch) -> io::Result<usize> {
                (**self).recv_batch(batch)
            }

            fn recv_in_place(
                &mut self,
                batch: &mut RecvBatch,
                datagram: &mut dyn FnMut(&roce_wire::datagram::Arrival, &[u8]),
            ) -> io::Result<usize> {
                (**self).recv_in_place(batch, datagram)
            }
        }
    )+};
}

forward_device!(&mut D, Box<D>);

/// The error for a frame that does not fit the caller's buffer.
pub(crate) fn too_small(len: usize, buf: usize) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, format!("a {len}-byte frame does not fit a {buf}-byte buffer"))
}

type Queue = Arc<Mutex<VecDeque<Vec<u8>>>>;

fn lock(q: &Queue) -> MutexGuard<'_, VecDeque<Vec<u8>>> {
    // A panic while holding the lock cannot leave a VecDeque half-changed in a way that
    // matters here, so a poisoned lock is taken over.
    q.lock().unwrap_or_else(|e| e.into_inner())
}

/// One end of an in-memory cable: what one end sends, the other receives, in order, nothing
/// lost (the queues are unbounded). The ends are `Send`, so they may live on two threads.
#[derive(Debug)]
pub struct MemoryDevice {
    tx: Queue,
    rx: Queue,
    sent: u64,
    received: u64,
}

impl MemoryDevice {
    /// Two devices connected back to back.
    pub fn pair() -> (MemoryDevice, MemoryDevice) {
        let a: Queue = Arc::default();
        let b: Queue = Arc::default();
        (
            MemoryDevice { tx: a.clone(), rx: b.clone(), sent: 0, received: 0 },
            MemoryDevice { tx: b, rx: a, sent: 0, received: 0 },
        )
    }

    /// Frames waiting to be received at this end.
    pub fn pending(&self) -> usize {
        lock(&self.rx).len()
    }

    /// Frames sent from this end.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Frames received at this end.
    pub fn received(&self) -> u64 {
        self.received
    }
}

impl Device for MemoryDevice {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        lock(&self.tx).push_back(frame.to_vec());
        self.sent += 1;
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let mut q = lock(&self.rx);
        let Some(frame) = q.front() else { return Ok(None) };
        if frame.len() > buf.len() {
            return Err(too_small(frame.len(), buf.len()));
        }
        let frame = q.pop_front().expect("front exists");
        buf[..frame.len()].copy_from_slice(&frame);
        self.received += 1;
        Ok(Some(frame.len()))
    }
}

/// A device for tests of wrappers and drivers: a [`MemoryDevice`] end that records the batch
/// calls made on it and takes at most `room` more frames, refusing the rest with
/// [`io::ErrorKind::WouldBlock`] as a full socket buffer does.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct Batching {
    pub inner: MemoryDevice,
    /// The length of each `send_batch` call, in order.
    pub send_batches: Vec<usize>,
    /// `recv_batch` calls.
    pub recv_batches: usize,
    /// Frames it still takes.
    pub room: usize,
}

#[cfg(test)]
impl Batching {
    /// Around `inner`, taking every frame.
    pub fn new(inner: MemoryDevice) -> Batching {
        Batching { inner, send_batches: Vec::new(), recv_batches: 0, room: usize::MAX }
    }
}

#[cfg(test)]
impl Device for Batching {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        self.send_batch(&[frame]).map(|_| ())
    }
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        self.inner.recv(buf)
    }
    fn send_batch(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        self.send_batches.push(frames.len());
        let take = frames.len().min(self.room);
        if take == 0 && !frames.is_empty() {
            return Err(io::Error::new(io::ErrorKind::WouldBlock, "no room"));
        }
        self.room -= take;
        self.inner.send_batch(&frames[..take])
    }
    fn recv_batch(&mut self, batch: &mut RecvBatch) -> io::Result<usize> {
        self.recv_batches += 1;
        self.inner.recv_batch(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame's ICRC verdict holds only while nobody writes to its slot.
    #[test]
    fn an_icrc_verdict_is_lost_when_its_slot_is_written() {
        let mut b = RecvBatch::new(4, 64).unwrap();
        b.slot_mut(0)[..3].copy_from_slice(&[1, 2, 3]);
        b.push_icrc_verified(0, 3);
        b.push(1, 2);
        b.push_icrc_verified(2, 1);
        let verdicts: Vec<bool> = b.iter_icrc_verified().map(|(_, ok)| ok).collect();
        assert_eq!(verdicts, [true, false, true]);
        b.slot_mut(0)[0] ^= 1; // a fault injector flips a bit
        let verdicts: Vec<bool> = b.iter_icrc_verified().map(|(_, ok)| ok).collect();
        assert_eq!(verdicts, [false, false, true]);
        let _ = b.slots_mut();
        assert!(b.iter_icrc_verified().all(|(_, ok)| !ok));
        assert_eq!(b.iter().collect::<Vec<_>>(), b.iter_icrc_verified().map(|(f, _)| f).collect::<Vec<_>>());
    }

    #[test]
    fn pair_is_back_to_back_and_in_order() {
        let (mut a, mut b) = MemoryDevice::pair();
        let mut buf = [0u8; 64];
        assert_eq!(b.recv(&mut buf).unwrap(), None);
        a.send(&[1, 2, 3]).unwrap();
        a.send(&[4]).unwrap();
        b.send(&[9; 10]).unwrap();
        assert_eq!(b.pending(), 2);
        assert_eq!(b.recv(&mut buf).unwrap(), Some(3));
        assert_eq!(&buf[..3], [1, 2, 3]);
        assert_eq!(b.recv(&mut buf).unwrap(), Some(1));
        assert_eq!(buf[0], 4);
        assert_eq!(b.recv(&mut buf).unwrap(), None);
        assert_eq!(a.recv(&mut buf).unwrap(), Some(10));
        assert_eq!((a.sent(), a.received(), b.sent(), b.received()), (2, 1, 1, 2));
        #[cfg(unix)]
        assert_eq!(a.raw_fd(), None);
    }

    #[test]
    fn batches_send_and_receive_in_order() {
        let (mut a, mut b) = MemoryDevice::pair();
        assert_eq!(a.send_batch(&[&[1, 2], &[3], &[4, 5, 6]]).unwrap(), 3);
        let mut batch = RecvBatch::new(2, 16).unwrap();
        assert_eq!(b.recv_batch(&mut batch).unwrap(), 2);
        assert_eq!(batch.iter().collect::<Vec<_>>(), [&[1u8, 2][..], &[3]]);
        assert_eq!(b.recv_batch(&mut batch).unwrap(), 1);
        assert_eq!(batch.get(0), Some(&[4u8, 5, 6][..]));
        assert_eq!(b.recv_batch(&mut batch).unwrap(), 0);
        assert!(batch.is_empty());
        // Through a box, as a driver holds a device.
        let mut boxed: Box<dyn Device> = Box::new(a);
        assert_eq!(boxed.send_batch(&[&[9]]).unwrap(), 1);
        assert_eq!(b.recv_batch(&mut batch).unwrap(), 1);
        // Bounds are errors, not panics.
        assert!(RecvBatch::new(0, 16).is_err());
        assert!(RecvBatch::new(RecvBatch::MAX_SLOTS + 1, 16).is_err());
        assert!(RecvBatch::new(1, MAX_FRAME_LEN + 1).is_err());
        // A frame longer than a slot: an error when it comes first, as for recv.
        b.send(&[0; 32]).unwrap();
        assert_eq!(a_recv_err(&mut boxed, &mut batch), io::ErrorKind::InvalidInput);
    }

    fn a_recv_err(d: &mut Box<dyn Device>, batch: &mut RecvBatch) -> io::ErrorKind {
        d.recv_batch(batch).unwrap_err().kind()
    }

    #[test]
    fn small_buffer_is_an_error_and_keeps_the_frame() {
        let (mut a, mut b) = MemoryDevice::pair();
        a.send(&[7; 100]).unwrap();
        let err = b.recv(&mut [0u8; 10]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        let mut big = [0u8; 100];
        assert_eq!(b.recv(&mut big).unwrap(), Some(100));
    }

    #[test]
    fn ends_work_across_threads_and_through_references() {
        let (mut a, b) = MemoryDevice::pair();
        let t = std::thread::spawn(move || {
            let mut b: Box<dyn Device + Send> = Box::new(b);
            let mut buf = [0u8; 16];
            loop {
                if let Some(n) = b.recv(&mut buf).unwrap() {
                    return buf[..n].to_vec();
                }
                std::thread::yield_now();
            }
        });
        let mut r: &mut dyn Device = &mut a;
        Device::send(&mut r, &[5, 6]).unwrap();
        assert_eq!(t.join().unwrap(), [5, 6]);
    }
}
