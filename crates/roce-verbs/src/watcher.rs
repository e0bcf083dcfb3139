//! What outlives the program: the kernel leaves a dead process's groups and disconnects its
//! connections when its ucma file closes, SIGKILL included. A library cannot run code after
//! SIGKILL, so at start it forks a watcher that keeps a copy of the port's device (the same
//! sockets) and the frames the process's end would send (runtime.rs's `death_frames`),
//! which the engine's thread replaces whenever its ids or groups change. When the program's
//! end of the pipe closes (the process is gone, however it ended) the watcher sends them; SA
//! requests are sent again, up to [`TRIES`] times a second apart, until the SA answers (a
//! response with the request's TID); then it exits. A clean exit empties the set first.
//!
//! The watcher ignores SIGINT, SIGTERM and SIGHUP (a terminal's Ctrl-C reaches the whole
//! process group) and closes every descriptor but the device's and the pipe's, so it holds
//! none of the program's files, sockets or pipes open.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use roce::plumbing::port::CliDevice;
use roce_net::device::Device;

/// How many times an unanswered SA request of the death set is sent.
pub const TRIES: usize = 3;

/// The program's side of the watcher.
pub struct Watcher {
    pipe: OwnedFd,
    /// The watcher's process id.
    pub pid: libc::pid_t,
}

impl Watcher {
    /// Fork the watcher with a copy of `dev` (on interface `iface`); `keep` are the
    /// descriptors the device uses.
    pub fn spawn(dev: &mut CliDevice, iface: &str, keep: &[RawFd]) -> io::Result<Watcher> {
        let (rx, tx) = crate::queues::blocking_pipe()?;
        // SAFETY: fork; the child runs only `child_main`, which never returns (it _exits).
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            drop(tx);
            child_main(dev, iface, rx.as_raw_fd(), keep);
        }
        drop(rx);
        // The write end stays non-blocking: a full pipe (a stuck watcher) never stops the engine.
        Ok(Watcher { pipe: tx, pid })
    }

    /// Replace the death set: `[u32 count] ([u32 len] bytes)*`.
    pub fn update(&mut self, frames: &[Vec<u8>]) -> io::Result<()> {
        let mut msg = Vec::with_capacity(4 + frames.iter().map(|f| 4 + f.len()).sum::<usize>());
        msg.extend_from_slice(&(frames.len() as u32).to_le_bytes());
        for f in frames {
            msg.extend_from_slice(&(f.len() as u32).to_le_bytes());
            msg.extend_from_slice(f);
        }
        let len = (msg.len() as u32).to_le_bytes();
        let mut all = len.to_vec();
        all.extend_from_slice(&msg);
        let mut off = 0;
        let t0 = std::time::Instant::now();
        while off < all.len() {
            // SAFETY: writes from a valid buffer range to our pipe.
            let n = unsafe { libc::write(self.pipe.as_raw_fd(), all[off..].as_ptr().cast(), all.len() - off) };
            if n > 0 {
                off += n as usize;
            } else if io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock && t0.elapsed().as_secs() < 1 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            } else {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

fn child_main(dev: &mut CliDevice, iface: &str, pipe: RawFd, keep: &[RawFd]) -> ! {
    // SAFETY: plain system calls on this (forked, single-threaded) process's own descriptors
    // and signal dispositions.
    unsafe {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE, libc::SIGQUIT] {
            libc::signal(sig, libc::SIG_IGN);
        }
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        for fd in 0..3 {
            if null >= 0 {
                libc::dup2(null, fd);
            }
        }
        for fd in crate::ffi::open_fds() {
            if fd > 2 && fd != pipe && !keep.contains(&fd) {
                libc::close(fd);
            }
        }
        // Blocking reads from now on.
        let fl = libc::fcntl(pipe, libc::F_GETFL);
        libc::fcntl(pipe, libc::F_SETFL, fl & !libc::O_NONBLOCK);
    }
    let set = read_until_eof(pipe);
    if !set.is_empty() {
        // A raw socket's transmit ring went on with the program after the fork, so the copy's
        // ring position is stale (the kernel would not see its frames): a socket of its own,
        // without a ring, sends instead. The udp transport's socket has no ring.
        match dev {
            CliDevice::Raw(_) | CliDevice::Pcap(_) => match roce_net::raw::RawSocket::open(iface) {
                Ok(mut fresh) => send_and_wait(&mut fresh, &set),
                Err(_) => send_and_wait(dev, &set),
            },
            _ => send_and_wait(dev, &set),
        }
    }
    // SAFETY: ends the watcher without running the program's atexit handlers.
    unsafe { libc::_exit(0) }
}

/// The last complete death set the program sent before its end of the pipe closed.
fn read_until_eof(pipe: RawFd) -> Vec<Vec<u8>> {
    let mut buf: Vec<u8> = Vec::new();
    let mut set = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        // SAFETY: reads into a valid local buffer.
        let n = unsafe { libc::read(pipe, chunk.as_mut_ptr().cast(), chunk.len()) };
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        if n <= 0 {
            return set;
        }
        buf.extend_from_slice(&chunk[..n as usize]);
        while buf.len() >= 4 {
            let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
            if buf.len() < 4 + len {
                break;
            }
            set = parse_set(&buf[4..4 + len]);
            buf.drain(..4 + len);
        }
    }
}

fn parse_set(msg: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 4;
    let count = msg.get(..4).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    for _ in 0..count {
        let Some(l) = msg.get(at..at + 4) else { break };
        let len = u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize;
        let Some(f) = msg.get(at + 4..at + 4 + len) else { break };
        out.push(f.to_vec());
        at += 4 + len;
    }
    out
}

/// The TID of an SA request (management class 0x03, a request method) in a RoCEv2 frame.
pub fn sa_request_tid(frame: &[u8]) -> Option<[u8; 8]> {
    let mad = mad_of(frame)?;
    (mad[1] == 0x03 && mad[3] & 0x80 == 0).then(|| mad[8..16].try_into().ok()).flatten()
}

/// The TID of an SA response in a RoCEv2 frame.
pub fn sa_response_tid(frame: &[u8]) -> Option<[u8; 8]> {
    let mad = mad_of(frame)?;
    (mad[1] == 0x03 && mad[3] & 0x80 != 0).then(|| mad[8..16].try_into().ok()).flatten()
}

/// What makes two frames of a death set the same request: the frame with the fields that
/// change between a request and its retry (IPv4 identification and checksum, BTH PSN, MAD TID,
/// ICRC) zeroed. A retry of an unanswered request, or the same leave under a new TID, is kept
/// once: the watcher does its own retries.
pub fn request_key(f: &[u8]) -> Vec<u8> {
    let mut k = f.to_vec();
    let Some(mad_at) = mad_offset(f) else { return k };
    let ipv4 = u16::from_be_bytes([f[12], f[13]]) == 0x0800;
    if ipv4 {
        k[18..20].fill(0);
        k[24..26].fill(0);
    }
    let bth = mad_at - 20;
    k[bth + 9..bth + 12].fill(0);
    k[mad_at + 8..mad_at + 16].fill(0);
    let n = k.len();
    k[n - 4..].fill(0);
    k
}

/// The MAD of a RoCEv2 frame to or from QP1: Ethernet, IPv4 or IPv6, UDP 4791, BTH (dest QP
/// 1), DETH.
fn mad_of(f: &[u8]) -> Option<&[u8]> {
    let at = mad_offset(f)?;
    f.get(at..at + 24)
}

/// Where the MAD of a RoCEv2 frame to or from QP1 starts.
fn mad_offset(f: &[u8]) -> Option<usize> {
    let ip_len = match u16::from_be_bytes([*f.get(12)?, *f.get(13)?]) {
        0x0800 if *f.get(23)? == 17 => usize::from(f.get(14)? & 0x0f) * 4,
        0x86dd if *f.get(20)? == 17 => 40,
        _ => return None,
    };
    let udp = 14 + ip_len;
    if u16::from_be_bytes([*f.get(udp + 2)?, *f.get(udp + 3)?]) != roce_wire::ROCEV2_UDP_PORT {
        return None;
    }
    let bth = udp + 8;
    let dest_qp = u32::from_be_bytes([0, *f.get(bth + 5)?, *f.get(bth + 6)?, *f.get(bth + 7)?]);
    if dest_qp != 1 {
        return None;
    }
    let mad = bth + 12 + 8;
    (f.len() >= mad + 24 + 4).then_some(mad)
}

fn send_and_wait(dev: &mut impl Device, set: &[Vec<u8>]) {
    let mut pending: Vec<(&[u8], [u8; 8])> =
        set.iter().filter_map(|f| sa_request_tid(f).map(|t| (f.as_slice(), t))).collect();
    for f in set {
        let _ = dev.send(f);
    }
    let mut buf = vec![0u8; 9216];
    for attempt in 1..=TRIES {
        let end = std::time::Instant::now() + std::time::Duration::from_secs(1);
        while !pending.is_empty() {
            let left = end.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                break;
            }
            if let Some(fd) = dev.raw_fd() {
                let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(&mut p, 1, left.as_millis().clamp(1, 1000) as i32) };
            } else {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            while let Ok(Some(n)) = dev.recv(&mut buf) {
                if let Some(tid) = sa_response_tid(&buf[..n]) {
                    pending.retain(|(_, t)| *t != tid);
                }
            }
        }
        if pending.is_empty() || attempt == TRIES {
            break;
        }
        for (f, _) in &pending {
            let _ = dev.send(f);
        }
    }
}
