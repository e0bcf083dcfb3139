//! Ending like a process on the kernel: SIGINT, SIGTERM, SIGHUP and a closed stdout ask the
//! running command to stop; it then destroys its ids as `ucma_close` ▶ `rdma_destroy_id` does
//! (every group left: SA Delete sent and its answer awaited, IGMP/MLD leave; connected ids
//! disconnected), within [`GRACE`] (the port module destroys them), prints its summary and exits
//! 128+N (141 for stdout). This module keeps the stop's state (which signal, whether stdout
//! went away) and uses only [`super::exit`], so that the printer and the port can use it.
//!
//! Signals are caught with signal-hook: a flag, the signal's number, and a byte on a self-pipe
//! that the [`Driver`]'s poll waits on, so the wait wakes at once. A second signal exits at
//! once (signal-hook's conditional shutdown, armed by the first). A signal ignored at start (a
//! background job started with SIGINT ignored) stays ignored.

use std::os::fd::{AsRawFd, IntoRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use roce_net::device::Device;
use roce_net::driver::{Driver, MulticastFilter};

use crate::plumbing::exit;

/// The longest a command waits, after a stop, for its leaves and disconnects to be answered.
pub const GRACE: Duration = Duration::from_secs(3);

/// The signals that end a command gracefully.
pub const SIGNALS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

struct State {
    stop: Arc<AtomicBool>,
    status: Arc<AtomicUsize>,
    wake_rx: UnixStream,
    wake_tx: UnixStream,
}

static STATE: OnceLock<State> = OnceLock::new();
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

fn state() -> &'static State {
    STATE.get_or_init(|| {
        let (wake_rx, wake_tx) = UnixStream::pair().expect("a socketpair for the signal self-pipe");
        let _ = wake_rx.set_nonblocking(true);
        let _ = wake_tx.set_nonblocking(true);
        State { stop: Arc::default(), status: Arc::default(), wake_rx, wake_tx }
    })
}

fn ignored(sig: i32) -> bool {
    // SAFETY: a query only (null new action); `old` is a valid sigaction to fill.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

/// Catch SIGINT, SIGTERM and SIGHUP (those not ignored at start), and watch a piped stdout
/// for its reader going away. Returns the signals caught.
pub fn install() -> Vec<i32> {
    let s = state();
    watch_stdout();
    let mut caught = Vec::new();
    for sig in SIGNALS {
        if ignored(sig) {
            continue;
        }
        let status = i32::from(exit::signal_status(sig));
        // The shutdown goes first: armed by the first signal's flag, it ends the process on the
        // second.
        let ok = signal_hook::flag::register_conditional_shutdown(sig, status, s.stop.clone()).is_ok()
            && signal_hook::flag::register_usize(sig, s.status.clone(), status as usize).is_ok()
            && signal_hook::flag::register(sig, s.stop.clone()).is_ok()
            && s.wake_tx.try_clone().is_ok_and(|w| {
                let fd = w.into_raw_fd(); // kept open for the process's life
                signal_hook::low_level::pipe::register_raw(sig, fd).is_ok()
            });
        if ok {
            caught.push(sig);
        }
    }
    caught
}

/// A pipe or socket on stdout whose reader went away (`| head -1` after its line) shows POLLERR
/// on our end at once, while a write would only find it at the next line: a thread blocked in
/// poll(2) on it (no busy loop) turns that into a stop (141).
fn watch_stdout() {
    // SAFETY: fstat of fd 1 into a zeroed stat.
    let piped = unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstat(1, &mut st) == 0 && matches!(st.st_mode & libc::S_IFMT, libc::S_IFIFO | libc::S_IFSOCK)
    };
    if !piped {
        return;
    }
    let _ = std::thread::Builder::new().name("stdout-watch".into()).spawn(|| loop {
        let mut p = libc::pollfd { fd: 1, events: 0, revents: 0 };
        // SAFETY: one valid pollfd; events 0 waits for POLLERR/POLLHUP only.
        let r = unsafe { libc::poll(&mut p, 1, -1) };
        if r > 0 && p.revents & (libc::POLLERR | libc::POLLHUP) != 0 {
            stdout_went_away();
            return;
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    });
}

/// Whether standard output was found closed (its reader went away): nothing more is written
/// to it.
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

/// Standard output's reader went away (a write failed, or the watch saw POLLERR): mark it
/// closed and ask the running command to stop (141, after its ids are destroyed).
pub fn stdout_went_away() {
    STDOUT_CLOSED.store(true, Ordering::Relaxed);
    request(exit::CLOSED_PIPE);
}

/// Ask the running command to stop with exit status `status` (the first request wins).
pub fn request(status: u8) {
    let s = state();
    let _ = s.status.compare_exchange(0, usize::from(status), Ordering::SeqCst, Ordering::SeqCst);
    s.stop.store(true, Ordering::SeqCst);
    // Wake a waiting poll; a full pipe already wakes it.
    let _ = std::io::Write::write(&mut &s.wake_tx, &[1]);
}

/// The exit status a stop asked for (128+N, 141), if one was asked.
pub fn requested() -> Option<u8> {
    let s = state();
    if !s.stop.load(Ordering::SeqCst) {
        return None;
    }
    Some(u8::try_from(s.status.load(Ordering::SeqCst)).unwrap_or(exit::FAILED).max(exit::SIGNAL_BASE))
}

/// What asked for the stop, for the messages.
pub fn reason(status: u8) -> String {
    match i32::from(status) - i32::from(exit::SIGNAL_BASE) {
        1 => "SIGHUP".into(),
        2 => "SIGINT".into(),
        13 => "standard output closed".into(),
        15 => "SIGTERM".into(),
        n => format!("signal {n}"),
    }
}

/// The self-pipe's read end (non-blocking), for a poll loop of one's own.
pub fn wake_fd() -> RawFd {
    state().wake_rx.as_raw_fd()
}

/// Let a stop wake `d`'s wait and end its `run_until`.
pub fn attach<D: Device + MulticastFilter>(d: &mut Driver<D>) {
    let s = state();
    d.set_stop(s.wake_rx.as_raw_fd(), s.stop.clone());
}
