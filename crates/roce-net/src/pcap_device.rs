//! A device wrapper that writes every frame, in both directions, to a pcap (smoltcp's
//! `PcapWriter`).

use std::fmt;
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::device::{Device, RecvBatch};
use crate::pcap::{CaptureFile, PcapFileWriter};

/// Where a [`PcapDevice`] takes its timestamps from.
pub type Clock = Box<dyn FnMut() -> Duration + Send>;

/// The wall clock as a [`Clock`]: time since the Unix epoch.
pub fn system_clock() -> Clock {
    Box::new(|| SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default())
}

/// Writes every frame sent through it and every frame received from it to a pcap (Ethernet,
/// nanosecond timestamps), then passes it on unchanged.
///
/// A frame is written after the inner device accepted (send) or returned (receive) it; a
/// batch goes to the inner device as one batch (the udp transport's GSO runs, the raw
/// socket's sendmmsg), and only the frames it took are written. A capture write error never fails or loses a frame: the first one is kept
/// ([`PcapDevice::capture_error`]), capturing stops, and [`PcapDevice::finish`] returns it.
pub struct PcapDevice<D, W: Write = CaptureFile> {
    inner: D,
    writer: PcapFileWriter<W>,
    clock: Clock,
    written: u64,
    error: Option<io::Error>,
}

impl<D: fmt::Debug, W: Write> fmt::Debug for PcapDevice<D, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PcapDevice")
            .field("inner", &self.inner)
            .field("written", &self.written)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<D: Device> PcapDevice<D> {
    /// Capture to a new (truncated) pcap file, with wall-clock timestamps.
    pub fn create(inner: D, path: &Path) -> io::Result<Self> {
        Ok(PcapDevice::new(inner, PcapFileWriter::create(path)?))
    }
}

impl<D: Device, W: Write> PcapDevice<D, W> {
    /// Capture to `writer`, with wall-clock timestamps ([`system_clock`]).
    pub fn new(inner: D, writer: PcapFileWriter<W>) -> Self {
        PcapDevice::with_clock(inner, writer, system_clock())
    }

    /// Capture to `writer`, with timestamps from `clock` (e.g. a driver's virtual clock).
    pub fn with_clock(inner: D, writer: PcapFileWriter<W>, clock: Clock) -> Self {
        PcapDevice { inner, writer, clock, written: 0, error: None }
    }

    /// Frames written to the capture.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The first capture write error, if any (capturing stopped there).
    pub fn capture_error(&self) -> Option<&io::Error> {
        self.error.as_ref()
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The wrapped device, mutably (frames sent through it directly are not captured).
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// Write out the frames captured so far (for a file capture; see
    /// [`PcapFileWriter::flush`]). A flush error is kept as a write error is.
    pub fn flush_capture(&mut self) {
        if self.error.is_none() {
            if let Err(e) = self.writer.flush() {
                self.error = Some(e);
            }
        }
    }

    /// Flush the capture and return the device and the capture's writer, or the first capture
    /// error.
    pub fn finish(self) -> io::Result<(D, W)> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let w = self.writer.finish()?;
        Ok((self.inner, w))
    }

    fn capture(&mut self, frame: &[u8]) {
        self.capture_all(std::iter::once(frame));
    }

    /// Write `frames`, all with one timestamp (they left or arrived in one call).
    fn capture_all<'f>(&mut self, frames: impl Iterator<Item = &'f [u8]>) {
        if self.error.is_some() {
            return;
        }
        let t = (self.clock)();
        for frame in frames {
            match self.writer.write(t, frame) {
                Ok(()) => self.written += 1,
                Err(e) => {
                    self.error = Some(e);
                    return;
                }
            }
        }
    }
}

impl<D: Device, W: Write> Device for PcapDevice<D, W> {
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        self.inner.send(frame)?;
        self.capture(frame);
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        let got = self.inner.recv(buf)?;
        if let Some(n) = got {
            self.capture(&buf[..n]);
        }
        Ok(got)
    }

    #[cfg(unix)]
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        self.inner.raw_fd()
    }

    // The inner device's own batches: without them the udp transport would send one
    // datagram per sendmsg (no GSO) whenever a capture is on.
    fn send_batch(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        let taken = self.inner.send_batch(frames)?.min(frames.len());
        self.capture_all(frames[..taken].iter().copied());
        Ok(taken)
    }

    fn recv_batch(&mut self, batch: &mut RecvBatch) -> io::Result<usize> {
        let n = self.inner.recv_batch(batch)?;
        self.capture_all(batch.iter());
        Ok(n)
    }

    fn rx_ready_beside_flood(&self) -> bool {
        self.inner.rx_ready_beside_flood()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Batching, MemoryDevice};
    use crate::pcap::read_bytes;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    #[test]
    fn captures_both_directions_with_the_callers_clock() {
        let (a, mut b) = MemoryDevice::pair();
        let tick = Arc::new(AtomicU64::new(1_000));
        let t = tick.clone();
        let clock: Clock = Box::new(move || Duration::from_nanos(t.load(Ordering::Relaxed)));
        let mut dev = PcapDevice::with_clock(a, PcapFileWriter::new(Vec::new()).unwrap(), clock);
        dev.send(&[1; 60]).unwrap();
        tick.store(2_500, Ordering::Relaxed);
        b.send(&[2; 64]).unwrap();
        let mut buf = [0u8; 128];
        assert_eq!(dev.recv(&mut buf).unwrap(), Some(64));
        assert_eq!(dev.recv(&mut buf).unwrap(), None);
        assert_eq!(dev.written(), 2);
        assert!(dev.capture_error().is_none());
        let (_, bytes) = dev.finish().unwrap();
        let frames = read_bytes(&bytes).unwrap();
        assert_eq!(frames.len(), 2);
        assert_eq!((frames[0].timestamp, &frames[0].data[..]), (Duration::from_nanos(1_000), &[1; 60][..]));
        assert_eq!((frames[1].timestamp, &frames[1].data[..]), (Duration::from_nanos(2_500), &[2; 64][..]));
        assert_eq!(b.recv(&mut buf).unwrap(), Some(60));
    }

    /// A batch reaches the inner device as one batch, and only the frames it took are
    /// captured as sent; a received batch is captured whole, in order.
    #[test]
    fn batches_pass_whole_and_capture_what_the_device_took() {
        let (a, mut b) = MemoryDevice::pair();
        let mut inner = Batching::new(a);
        inner.room = 3;
        let mut dev = PcapDevice::new(inner, PcapFileWriter::new(Vec::new()).unwrap());
        let frames: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 60]).collect();
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        assert_eq!(dev.send_batch(&refs).unwrap(), 3);
        assert_eq!(dev.send_batch(&refs[3..]).unwrap_err().kind(), io::ErrorKind::WouldBlock);
        assert_eq!(dev.inner().send_batches, [5, 2]);
        assert_eq!((dev.written(), b.pending()), (3, 3));
        for i in 10..14u8 {
            b.send(&[i; 64]).unwrap();
        }
        let mut batch = RecvBatch::new(8, 128).unwrap();
        assert_eq!(dev.recv_batch(&mut batch).unwrap(), 4);
        assert_eq!(dev.recv_batch(&mut batch).unwrap(), 0);
        assert_eq!((dev.inner().recv_batches, dev.written()), (2, 7));
        let (_, bytes) = dev.finish().unwrap();
        let captured: Vec<Vec<u8>> = read_bytes(&bytes).unwrap().into_iter().map(|f| f.data).collect();
        let want: Vec<Vec<u8>> = (0..3u8).map(|i| vec![i; 60]).chain((10..14u8).map(|i| vec![i; 64])).collect();
        assert_eq!(captured, want);
    }

    /// The udp transport behind a capture keeps its GSO runs and GRO reads: ten datagrams
    /// leave in one UDP_SEGMENT message and are read back coalesced, all twenty captured.
    /// Over loopback, on addresses of 127/8 of this process's own.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_udp_transport_behind_a_capture_still_sends_gso_runs() {
        use crate::udp::tests::{engine_frame, loopback_pair};
        let (a, b, tx, rx) = loopback_pair(21, 22);
        let mut tx = PcapDevice::new(tx, PcapFileWriter::new(Vec::new()).unwrap());
        let mut rx = PcapDevice::new(rx, PcapFileWriter::new(Vec::new()).unwrap());
        let frames: Vec<Vec<u8>> =
            (0..10u8).map(|i| engine_frame(a, b, roce_wire::ROCEV2_UDP_PORT, &[i; 1000])).collect();
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        assert_eq!(tx.send_batch(&refs).unwrap(), 10);
        let st = tx.inner().stats();
        assert_eq!((st.sent, st.send_messages, tx.written()), (10, 1, 10), "{st:?}");
        let mut batch = RecvBatch::new(64, 9216).unwrap();
        for _ in 0..200 {
            if rx.recv_batch(&mut batch).unwrap() == 0 && rx.written() >= 10 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let rs = rx.inner().stats();
        assert!(rs.received == 10 && rs.reads < 10, "GRO coalesced them: {rs:?}");
        assert_eq!(rx.written(), 10);
    }

    /// A writer that accepts the pcap header and then fails.
    struct Full(usize);

    impl Write for Full {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            if self.0 < b.len() {
                return Err(io::Error::other("disk full"));
            }
            self.0 -= b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_capture_error_loses_no_frame() {
        let (a, b) = MemoryDevice::pair();
        let mut dev = PcapDevice::new(a, PcapFileWriter::new(Full(24)).unwrap());
        dev.send(&[3; 60]).unwrap();
        dev.send(&[4; 60]).unwrap();
        assert_eq!(b.pending(), 2);
        assert_eq!(dev.written(), 0);
        assert!(dev.capture_error().is_some());
        assert!(dev.finish().is_err());
    }

    #[test]
    fn file_capture_reads_back() {
        let path = std::env::temp_dir().join(format!("roce-net-pcapdev-{}.pcap", std::process::id()));
        let (a, _b) = MemoryDevice::pair();
        let mut dev = PcapDevice::create(a, &path).unwrap();
        dev.send(&roce_wire::golden::CX4_CNP).unwrap();
        dev.finish().unwrap();
        let frames = crate::pcap::read_file(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].data, roce_wire::golden::CX4_CNP);
        assert!(frames[0].timestamp > Duration::from_secs(1_600_000_000));
    }
}
