//! The C boundary's helpers: errno, one-line messages, and the panic boundary every export
//! goes through (a panic never unwinds into C: it becomes the call's error value, with a line
//! on stderr naming the call).

use std::collections::HashSet;
use std::sync::Mutex;

/// Set the calling thread's errno.
pub fn set_errno(e: i32) {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

/// The calling thread's errno.
pub fn errno() -> i32 {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() }
}

static SAID: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Print `msg` on stderr the first time `key` is said in this process.
pub fn say_once(key: &str, msg: &str) {
    let first = SAID.lock().map(|mut s| s.get_or_insert_with(HashSet::new).insert(key.to_string())).unwrap_or(true);
    if first {
        eprintln!("{msg}");
    }
}

/// Run an export's body; a panic becomes `fail` (errno EIO) and a line naming the call.
pub fn boundary<R>(name: &'static str, fail: R, body: impl FnOnce() -> R) -> R {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(r) => r,
        Err(_) => {
            say_once(
                name,
                &format!("roce: {name}: internal error (a panic, caught at the C boundary); returning an error"),
            );
            set_errno(libc::EIO);
            fail
        }
    }
}

/// `-1` with errno `e` (librdmacm's convention).
pub fn fail_errno(e: i32) -> i32 {
    set_errno(e);
    -1
}

/// A NULL pointer with errno `e` (the allocating calls' convention).
pub fn null_errno<T>(e: i32) -> *mut T {
    set_errno(e);
    std::ptr::null_mut()
}

/// The process's open descriptors (probed with fcntl: listing /proc/self/fd would count the
/// listing's own descriptor, whose number the next socket then takes).
pub fn open_fds() -> Vec<std::os::fd::RawFd> {
    // SAFETY: getrlimit into a local struct.
    let max = unsafe {
        let mut l: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 {
            l.rlim_cur.min(65536) as std::os::fd::RawFd
        } else {
            1024
        }
    };
    // SAFETY: F_GETFD only asks whether the descriptor is open.
    (0..max).filter(|fd| unsafe { libc::fcntl(*fd, libc::F_GETFD) } != -1).collect()
}

/// A NULL-terminated C array of `items` (`ibv_get_device_list`, `rdma_get_devices`), freed by
/// [`free_null_terminated`].
pub fn null_terminated<T>(mut items: Vec<*mut T>) -> *mut *mut T {
    items.push(std::ptr::null_mut());
    Box::into_raw(items.into_boxed_slice()).cast()
}

/// Free an array from [`null_terminated`].
///
/// # Safety
/// `list` is NULL or came from [`null_terminated`] and is not used after.
pub unsafe fn free_null_terminated<T>(list: *mut *mut T) {
    if list.is_null() {
        return;
    }
    // SAFETY: a NULL-terminated array boxed by null_terminated.
    unsafe {
        let mut n = 0;
        while !(*list.add(n)).is_null() {
            n += 1;
        }
        drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(list, n + 1)));
    }
}
