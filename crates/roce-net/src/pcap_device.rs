//! A device wrapper that writes every frame, in both directions, to a pcap (smoltcp's
//! `PcapWriter`).

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::device::Device;
use crate::pcap::PcapFileWriter;

/// Where a [`PcapDevice`] takes its timestamps from.
pub type Clock = Box<dyn FnMut() -> Duration + Send>;

/// The wall clock as a [`Clock`]: time since the Unix epoch.
pub fn system_clock() -> Clock {
    Box::new(|| SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default())
}

/// Writes every frame sent through it and every frame received from it to a pcap (Ethernet,
/// nanosecond timestamps), then passes it on unchanged.
///
/// A frame is written after the inner device accepted (send) or returned (receive) it. A
/// capture write error never fails or loses a frame: the first one is kept
/// ([`PcapDevice::capture_error`]), capturing stops, and [`PcapDevice::finish`] returns it.
pub struct PcapDevice<D, W: Write = BufWriter<File>> {
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
        if self.error.is_some() {
            return;
        }
        let t = (self.clock)();
        match self.writer.write(t, frame) {
            Ok(()) => self.written += 1,
            Err(e) => self.error = Some(e),
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::MemoryDevice;
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
