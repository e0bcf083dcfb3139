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
}

/// A receive buffer of this size holds any frame a device of this crate returns.
pub const MAX_FRAME_LEN: usize = 65_536;

impl<D: Device + ?Sized> Device for &mut D {
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
}

impl<D: Device + ?Sized> Device for Box<D> {
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
}

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

#[cfg(test)]
mod tests {
    use super::*;

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
