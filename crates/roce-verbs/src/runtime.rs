//! The stack inside the program: one engine ([`roce_cm::Stack`] on roce-net's [`Driver`],
//! opened exactly as the `roce` tools open their port), shared behind one lock by the
//! program's threads and a thread of its own.
//!
//! - **The program's threads drive it** (run to completion, as the `roce` tools' own loop
//!   does): a C call locks it, does its work, sends what the work queued and takes what
//!   arrived ([`Runtime::call`], [`Runtime::post`]); a program spinning on an empty CQ takes
//!   the next frames itself when the lock is free ([`Runtime::progress`]). No handoff between
//!   threads on the data path.
//! - **The stack's thread** waits on the device, the SA link and a wake pipe *without* the
//!   lock, for the frames nobody polls for and the timers (retransmissions, SA retries); a
//!   call that set an earlier timer than the one it sleeps for wakes it.
//! - Events go to the event channels and completions to the CQs, whose own locks
//!   `ibv_poll_cq` takes.
//!
//! Started at the first call that needs the port; with it a watcher process (watcher.rs)
//! that puts the frames of the process's end on the wire when the process dies without
//! destroying its ids (SIGKILL, a signal with no handler); a normal `exit` destroys them
//! here first, as the kernel does when a process's ucma file closes.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};
use std::time::{Duration, Instant};

use roce::plumbing::port::{open_port, set_port_mtu_from, CliDevice, PortOptions};
use roce_cm::{CmEvent, CmId};
use roce_net::driver::Driver;

use crate::ids::IdLink;
use crate::mr::MrTable;
use crate::queues::UdQpLink;
use crate::watcher::Watcher;

/// The running stack: the engine, and what the C side reads without it.
pub struct Runtime {
    engine: Arc<Mutex<Engine>>,
    wake: OwnedFd,
    /// The memory regions (lkey/rkey ▶ the program's memory), read by the posting threads.
    pub mrs: RwLock<MrTable>,
    /// The port's options (as `roce exec` or the environment gave them).
    pub options: PortOptions,
}

/// The engine and what goes with it, behind the runtime's lock.
pub struct Engine {
    /// The driven stack.
    pub d: Driver<CliDevice>,
    /// Each engine id's C object and channel.
    pub ids: HashMap<CmId, IdLink>,
    /// Each UD QP's CQs and posted receives.
    pub ud_qps: HashMap<u32, UdQpLink>,
    /// Datagrams that arrived with no receive posted (rxe drops them too), counted.
    pub ud_no_recv_drops: u64,
    /// Peers' MACs learned from their datagrams and the CM (for address handles).
    pub macs: HashMap<std::net::IpAddr, [u8; 6]>,
    /// Each connected QP's CQs and mirrored counts.
    pub conn_qps: HashMap<u32, crate::queues::ConnQpLink>,
    /// Each SRQ's C object (for its asynchronous events).
    pub srqs: HashMap<u32, crate::queues::SrqLink>,
    /// Completions of a QP already destroyed (counted, not delivered).
    pub orphan_completions: u64,
    watcher: Option<Watcher>,
    last_death_set: Vec<Vec<u8>>,
    /// Something changed what a death must send since the watcher last heard (worked out
    /// once the engine has been quiet for a millisecond: a copy of the whole engine).
    dirty: Option<Instant>,
    /// Until when (the engine's clock) the stack's thread sleeps: a call that needs it
    /// earlier wakes it.
    sleeping_until: Option<roce_cm::Instant>,
    /// When a program's thread last took frames itself (spinning on a CQ): while one does,
    /// the stack's thread leaves the device to it and wakes only for timers, so that the two
    /// do not race for each frame (and for the cores).
    polled_at: Option<Instant>,
}

static RUNTIME: OnceLock<Result<Runtime, (i32, String)>> = OnceLock::new();

/// The runtime, started on first use; `Err(errno)` (ENODEV without configuration, the
/// reason said once on stderr) when it cannot start.
pub fn runtime() -> Result<&'static Runtime, i32> {
    match RUNTIME.get_or_init(start) {
        Ok(rt) => Ok(rt),
        Err((errno, msg)) => {
            crate::ffi::say_once("start", msg);
            Err(*errno)
        }
    }
}

/// Whether the runtime has started (without starting it).
pub fn started() -> Option<&'static Runtime> {
    RUNTIME.get().and_then(|r| r.as_ref().ok())
}

fn start() -> Result<Runtime, (i32, String)> {
    let options = crate::config::from_env().map_err(|e| (libc::ENODEV, format!("roce: {}", e.message)))?;
    let before = crate::ffi::open_fds();
    let mut d = open_port(&options).map_err(|e| (libc::ENODEV, format!("roce: {}: {}", options.iface, e.message)))?;
    set_port_mtu_from(&mut d, &options.iface);
    let (wake_rx, wake_tx) = pipe().map_err(|e| (libc::EMFILE, format!("roce: a pipe for the engine: {e}")))?;
    let device_fds: Vec<RawFd> = crate::ffi::open_fds().into_iter().filter(|fd| !before.contains(fd)).collect();
    // The watcher is forked before the engine's thread exists: it owns a copy of the device.
    let watcher = match Watcher::spawn(&mut d.dev, &options.iface, &device_fds) {
        Ok(w) => Some(w),
        Err(e) => {
            eprintln!("roce: no watcher process ({e}): a SIGKILL would leave this process's groups joined");
            None
        }
    };
    let engine = Arc::new(Mutex::new(Engine {
        d,
        ids: HashMap::new(),
        ud_qps: HashMap::new(),
        ud_no_recv_drops: 0,
        macs: HashMap::new(),
        conn_qps: HashMap::new(),
        srqs: HashMap::new(),
        orphan_completions: 0,
        watcher,
        last_death_set: Vec::new(),
        dirty: None,
        sleeping_until: None,
        polled_at: None,
    }));
    let shared = engine.clone();
    std::thread::Builder::new()
        .name("roce-stack".into())
        .spawn(move || run(&shared, wake_rx))
        .map_err(|e| (libc::EAGAIN, format!("roce: the engine's thread: {e}")))?;
    // SAFETY: registering a plain extern "C" function with atexit.
    unsafe { libc::atexit(at_exit) };
    Ok(Runtime { engine, wake: wake_tx, mrs: RwLock::new(MrTable::default()), options })
}

fn lock(m: &Mutex<Engine>) -> MutexGuard<'_, Engine> {
    // A panic caught at the C boundary while the engine was held leaves it usable.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Runtime {
    /// Run `f` on the engine (on the calling thread, under the engine's lock), then send what
    /// it queued and hand out what arrived.
    pub fn call<R>(&self, f: impl FnOnce(&mut Engine) -> R) -> Result<R, i32> {
        let mut e = lock(&self.engine);
        let r = f(&mut e);
        e.dirty.get_or_insert_with(Instant::now);
        self.after_work(&mut e);
        Ok(r)
    }

    /// As [`Runtime::call`], for work whose answer nobody waits for (a work request): it
    /// changes nothing a death must send.
    pub fn post(&self, f: impl FnOnce(&mut Engine)) {
        let mut e = lock(&self.engine);
        f(&mut e);
        // Only what the work queued goes out: reading the device is for whoever polls.
        let _ = e.d.send_queued();
        self.after_send(&mut e);
    }

    /// For a program spinning on an empty CQ: if nobody holds the engine, take what arrived
    /// and send what is due. Returns whether it ran.
    pub fn progress(&self) -> bool {
        let Ok(mut e) = self.engine.try_lock() else { return false };
        e.polled_at = Some(Instant::now());
        self.after_work(&mut e);
        true
    }

    fn after_work(&self, e: &mut Engine) {
        let _ = e.d.turn(Duration::ZERO);
        self.after_send(e);
    }

    fn after_send(&self, e: &mut Engine) {
        if e.dispatch() {
            e.dirty.get_or_insert_with(Instant::now);
        }
        // The stack's thread sleeps for its own timers: one queued now that is due earlier
        // (a retransmission, an SA retry, the watcher's update) needs it awake.
        let due = e.d.now() + e.d.next_wait(IDLE);
        let due = if e.dirty.is_some() { due.min(e.d.now() + QUIET) } else { due };
        if e.sleeping_until.is_some_and(|t| due < t) {
            e.sleeping_until = None;
            // SAFETY: one byte from a valid buffer to our own non-blocking pipe.
            unsafe { libc::write(self.wake.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
        }
    }
}

/// How long the engine stays quiet after a change before the watcher hears of it.
const QUIET: Duration = Duration::from_millis(1);
/// How long after a program's thread last took frames itself the stack's thread takes the
/// device back (the program stopped polling its CQ: it blocks on a channel, computes, or
/// spins on memory as perftest's write_lat does). Measured on a 2-core veth pair (spec/capi.md):
/// none had the two threads race for every frame (ib_send_lat 29 µs against 17,
/// ibv_rc_pingpong 1.43× slower), 20 µs woke the stack's thread so often that it took the
/// programs' cores (1.44×); 1 ms keeps CQ pollers at the tools' speed and leaves a program
/// that spins on memory with its frames handled only once it polls or the window ends
/// (ib_write_lat t_typical about 0.5 ms: on two cores the spinning programs hold both).
const SPIN_HANDOVER: Duration = Duration::from_millis(1);
/// How long the stack's thread looks for more frames after a turn that received some
/// (the tools' `DATA_PATH_BUSY_POLL`).
const BUSY_POLL: Duration = roce::plumbing::port::DATA_PATH_BUSY_POLL;
/// A sleep at least this long flushes the capture first (shorter ones are the data path's).
const FLUSH_IDLE: Duration = Duration::from_millis(5);
/// The stack's thread's longest sleep with nothing due.
const IDLE: Duration = Duration::from_millis(200);

/// The stack's thread: take frames and run timers under the lock, wait without it.
fn run(engine: &Mutex<Engine>, wake: OwnedFd) {
    let mut pfds = [libc::pollfd { fd: -1, events: libc::POLLIN, revents: 0 }; 3];
    loop {
        let (n, wait, spin) = {
            let mut e = lock(engine);
            let _ = e.d.turn(Duration::ZERO);
            if e.dispatch() {
                e.dirty.get_or_insert_with(Instant::now);
            }
            if e.dirty.is_some_and(|t| t.elapsed() >= QUIET) {
                e.after_change();
                e.dirty = None;
            }
            // A program spinning on its CQ takes its frames itself; the stack's thread leaves
            // the device to it until the program has not polled for SPIN_HANDOVER (it then
            // spins on memory, blocks, or computes, and frames must not wait for it).
            let handover = e.polled_at.map(|t| SPIN_HANDOVER.saturating_sub(t.elapsed())).unwrap_or_default();
            let spinning = !handover.is_zero();
            let max = if e.dirty.is_some() {
                QUIET
            } else if spinning {
                handover
            } else {
                IDLE
            };
            let wait = e.d.next_wait(max);
            e.sleeping_until = Some(e.d.now() + wait);
            let device = if spinning { [None, None] } else { e.d.input_fds() };
            let mut n = 0;
            for fd in device.into_iter().flatten().chain([wake.as_raw_fd()]) {
                pfds[n] = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
                n += 1;
            }
            // After a turn that received, the next frames of a stream come within
            // microseconds: look for them a while before sleeping (the tools' busy poll), a
            // receiver whose program does not poll (a WRITE's target) stays awake.
            let spin = !spinning && e.d.received_last_turn();
            (n, wait, spin)
        };
        let mut ready = false;
        if !spin && wait >= FLUSH_IDLE {
            // Going to sleep: a capture's frames reach the file now, so that a program
            // killed while it sleeps (SIGKILL, a signal it does not catch) leaves them.
            lock(engine).d.dev.flush_capture();
        }
        if spin {
            let until = Instant::now() + BUSY_POLL.min(wait);
            while !ready && Instant::now() < until {
                // SAFETY: a valid array of `n` pollfds.
                ready = unsafe { libc::poll(pfds.as_mut_ptr(), n as libc::nfds_t, 0) } > 0;
            }
        }
        if !ready {
            // To the microsecond (a handover window is tens of them).
            let ts = libc::timespec { tv_sec: wait.as_secs() as libc::time_t, tv_nsec: wait.subsec_nanos().into() };
            // SAFETY: a valid array of `n` pollfds and a valid timespec; no signal mask.
            unsafe { libc::ppoll(pfds.as_mut_ptr(), n as libc::nfds_t, &ts, std::ptr::null()) };
        }
        drain(wake.as_raw_fd());
    }
}

/// How long the end of the process waits for the answers to its leaves (the tools' grace).
pub const EXIT_GRACE: Duration = Duration::from_secs(3);

extern "C" fn at_exit() {
    // exit() without destroying: destroy every id as the kernel does when the ucma file
    // closes (groups left and their answers awaited, connections disconnected), then tell the
    // watcher that nothing is left to do.
    // If exit() came from a signal handler that interrupted a call holding the engine, the
    // engine is not taken: the watcher sends the death set when the process is gone.
    let Some(rt) = started() else { return };
    let end = Instant::now() + Duration::from_millis(500);
    loop {
        if let Ok(mut e) = rt.engine.try_lock() {
            e.end_of_process();
            return;
        }
        if Instant::now() >= end {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

impl Engine {
    /// Hand the engine's events to their channels and the datagrams to the posted receives.
    /// Returns whether anything happened that may change what a death must send.
    pub fn dispatch(&mut self) -> bool {
        let mut changed = false;
        // Completions and the QPs' mirrored states first: an ESTABLISHED event finds its QP
        // in RTS, a completion its slot free.
        self.deliver_completions();
        while let Some(ev) = self.d.events.pop_front() {
            changed = true;
            self.deliver(ev);
        }
        self.deliver_datagrams();
        changed
    }

    fn deliver(&mut self, ev: CmEvent) {
        crate::ids::deliver_event(&mut self.ids, &mut self.macs, &self.d.stack, ev);
    }

    fn deliver_datagrams(&mut self) {
        crate::queues::deliver_datagrams(
            &mut self.d.stack,
            &mut self.ud_qps,
            &mut self.macs,
            &mut self.ud_no_recv_drops,
        );
    }

    /// After anything that can change the ids or groups: tell the watcher what a death would
    /// have to send now.
    pub fn after_change(&mut self) {
        let Some(w) = self.watcher.as_mut() else { return };
        let set = death_frames(&self.d);
        if set != self.last_death_set {
            if w.update(&set).is_err() {
                self.watcher = None;
            }
            self.last_death_set = set;
        }
    }

    /// The end of the process: every id destroyed (leaves answered within [`EXIT_GRACE`]),
    /// the watcher told that nothing is left.
    pub fn end_of_process(&mut self) {
        let ids: Vec<CmId> = self.d.stack.ids().collect();
        if !ids.is_empty() {
            let _ = roce::plumbing::port::destroy_ids("roce", &mut self.d, &ids);
        }
        // Leaves already in flight (a program that left and exited at once) are answered first.
        let t0 = Instant::now();
        while self.d.stack.sa_transactions() > 0 && t0.elapsed() < EXIT_GRACE {
            let _ = self.d.turn(Duration::from_millis(10));
        }
        self.d.events.clear();
        self.after_change();
        if let Some(Err(e)) = self.d.dev.close_capture() {
            eprintln!("roce: the capture (ROCE_PCAP): {e}");
        }
    }
}

/// The frames this process's end would put on the wire now: the engine's state copied, every
/// id destroyed in the copy, its timers run for the retries of what is still unanswered. Only
/// IP frames (RoCEv2, IGMP, MLD) are kept, each once.
pub fn death_frames(d: &Driver<CliDevice>) -> Vec<Vec<u8>> {
    let ids: Vec<CmId> = d.stack.ids().collect();
    if ids.is_empty() && d.stack.sa_transactions() == 0 {
        return Vec::new();
    }
    let mut snap = d.stack.clone();
    let mut now = d.now();
    for id in ids {
        let _ = snap.destroy_id(now, id);
    }
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut buf = vec![0u8; 9216];
    for _ in 0..16 {
        while let Some(n) = snap.poll_transmit(now, &mut buf) {
            let f = &buf[..n];
            let ip = f.len() > 14 && matches!(u16::from_be_bytes([f[12], f[13]]), 0x0800 | 0x86dd);
            let key = crate::watcher::request_key(f);
            if ip && !keys.contains(&key) {
                keys.push(key);
                out.push(f.to_vec());
            }
        }
        match snap.poll_timeout() {
            Some(t) if t.saturating_duration_since(d.now()) < Duration::from_secs(10) => {
                now = t.max(now);
                snap.handle_timeout(now);
            }
            _ => break,
        }
    }
    out
}

/// A non-blocking close-on-exec pipe (read end, write end).
pub fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: a valid two-int array for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 just returned these two descriptors, owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Read and discard what a non-blocking descriptor holds.
pub fn drain(fd: RawFd) {
    let mut b = [0u8; 256];
    // SAFETY: reads into a valid local buffer of its length.
    while unsafe { libc::read(fd, b.as_mut_ptr().cast(), b.len()) } > 0 {}
}

/// A queue shared with the C side, with its own lock.
pub type Shared<T> = Arc<Mutex<VecDeque<T>>>;
