//! The stack inside the program: one engine ([`roce_cm::Stack`] on roce-net's [`Driver`],
//! opened exactly as the `roce` tools open their port) on one thread that owns it. The C
//! calls reach it through a queue and, when they need an answer, wait for it ([`call`]);
//! work requests go without waiting ([`post`]). The thread hands events to the event
//! channels and completions to the CQs, whose own locks `ibv_poll_cq` takes: a program
//! spinning on its CQ never takes the engine's.
//!
//! Started at the first call that needs the port; with it a watcher process (watcher.rs)
//! that puts the frames of the process's end on the wire when the process dies without
//! destroying its ids (SIGKILL, a signal with no handler); a normal `exit` destroys them
//! here first, as the kernel does when a process's ucma file closes.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use roce::plumbing::port::{open_port, set_port_mtu_from, CliDevice, PortOptions};
use roce_cm::{CmEvent, CmId};
use roce_net::driver::Driver;

use crate::ids::IdLink;
use crate::mr::MrTable;
use crate::queues::UdQpLink;
use crate::watcher::Watcher;

/// A unit of work for the engine's thread.
pub type Cmd = Box<dyn FnOnce(&mut Engine) + Send>;

/// The running stack: the way to its thread, and what the C side reads without it.
pub struct Runtime {
    tx: Mutex<mpsc::Sender<Cmd>>,
    wake: OwnedFd,
    /// The memory regions (lkey/rkey ▶ the program's memory), read by the posting threads.
    pub mrs: RwLock<MrTable>,
    /// The port's options (as `roce exec` or the environment gave them).
    pub options: PortOptions,
    thread: std::thread::ThreadId,
}

/// What the engine's thread owns.
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
    pub conn_qps: HashMap<u32, crate::conn::ConnQpLink>,
    /// Each SRQ's C object (for its asynchronous events).
    pub srqs: HashMap<u32, crate::conn::SrqLink>,
    /// Completions of a QP already destroyed (counted, not delivered).
    pub orphan_completions: u64,
    watcher: Option<Watcher>,
    last_death_set: Vec<Vec<u8>>,
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
    // The driver's wait wakes on this pipe (a command arrived); its flag is never set.
    d.set_stop(wake_rx.as_raw_fd(), Arc::new(AtomicBool::new(false)));
    let device_fds: Vec<RawFd> = crate::ffi::open_fds().into_iter().filter(|fd| !before.contains(fd)).collect();
    // The watcher is forked before the engine's thread exists: it owns a copy of the device.
    let watcher = match Watcher::spawn(&mut d.dev, &options.iface, &device_fds) {
        Ok(w) => Some(w),
        Err(e) => {
            eprintln!("roce: no watcher process ({e}): a SIGKILL would leave this process's groups joined");
            None
        }
    };
    let (tx, rx) = mpsc::channel::<Cmd>();
    let mut engine = Engine {
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
    };
    let thread = std::thread::Builder::new()
        .name("roce-stack".into())
        .spawn(move || {
            let _keep = wake_rx;
            engine.run(rx, _keep.as_raw_fd());
        })
        .map_err(|e| (libc::EAGAIN, format!("roce: the engine's thread: {e}")))?;
    // SAFETY: registering a plain extern "C" function with atexit.
    unsafe { libc::atexit(at_exit) };
    Ok(Runtime {
        tx: Mutex::new(tx),
        wake: wake_tx,
        mrs: RwLock::new(MrTable::default()),
        options,
        thread: thread.thread().id(),
    })
}

impl Runtime {
    /// Run `f` on the engine's thread and wait for its answer.
    pub fn call<R: Send + 'static>(&self, f: impl FnOnce(&mut Engine) -> R + Send + 'static) -> Result<R, i32> {
        if std::thread::current().id() == self.thread {
            // A call from the engine's own thread (an atexit handler run there) cannot wait on it.
            return Err(libc::EDEADLK);
        }
        let (tx, rx) = mpsc::sync_channel(1);
        self.post(move |e| {
            let _ = tx.send(f(e));
        });
        rx.recv().map_err(|_| libc::EIO)
    }

    /// Queue `f` for the engine's thread without waiting.
    pub fn post(&self, f: impl FnOnce(&mut Engine) + Send + 'static) {
        if let Ok(tx) = self.tx.lock() {
            let _ = tx.send(Box::new(f));
        }
        // SAFETY: one byte from a valid buffer to our own pipe (non-blocking: a full pipe
        // already wakes the thread).
        unsafe { libc::write(self.wake.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
    }
}

/// How long the end of the process waits for the answers to its leaves (the tools' grace).
pub const EXIT_GRACE: Duration = Duration::from_secs(3);

extern "C" fn at_exit() {
    // exit() without destroying: destroy every id as the kernel does when the ucma file
    // closes (groups left and their answers awaited, connections disconnected), then tell the
    // watcher that nothing is left to do.
    if let Some(rt) = started() {
        let _ = rt.call(|e| e.end_of_process());
    }
}

impl Engine {
    fn run(&mut self, rx: mpsc::Receiver<Cmd>, wake: RawFd) {
        // The watcher's death set is worked out (a copy of the whole engine) once the engine has
        // been idle for a millisecond after a change, not between a request and its answer.
        let mut dirty = false;
        loop {
            let mut ran = false;
            loop {
                match rx.try_recv() {
                    Ok(cmd) => {
                        cmd(self);
                        ran = true;
                    }
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => return,
                }
            }
            if ran {
                // What the commands queued leaves now (a join's Set, a leave's Delete).
                let _ = self.d.turn(Duration::ZERO);
                self.dispatch();
                dirty = true;
            }
            let wait = if dirty { Duration::from_millis(1) } else { Duration::from_millis(200) };
            let _ = self.d.turn(wait);
            drain(wake);
            if self.dispatch() {
                dirty = true;
                continue;
            }
            if dirty {
                self.after_change();
                dirty = false;
            }
        }
    }

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
