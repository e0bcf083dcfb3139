//! The kernel's error numbers, as `rdma_cm` calls return them and events carry them.

use core::fmt;

/// A Linux errno (positive value; kernel calls return it negated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Errno {
    /// Operation not permitted.
    EPERM = 1,
    /// No such entry.
    ENOENT = 2,
    /// Interrupted (a cancelled multicast join).
    EINTR = 4,
    /// I/O error (a send failed).
    EIO = 5,
    /// No such device or address.
    ENXIO = 6,
    /// Try again.
    EAGAIN = 11,
    /// Out of memory.
    ENOMEM = 12,
    /// Permission denied (a port below 1024).
    EACCES = 13,
    /// Device busy.
    EBUSY = 16,
    /// No such device (no RDMA device or netdev for the address).
    ENODEV = 19,
    /// Invalid argument (a call in the wrong state, among others).
    EINVAL = 22,
    /// No space (too small a response buffer).
    ENOSPC = 28,
    /// No data (an IB service resolution without a record; no records to query).
    ENODATA = 61,
    /// Function not implemented (transport without this call).
    ENOSYS = 38,
    /// Protocol error (an RMPP transfer we aborted).
    EPROTO = 71,
    /// Message too long (an RMPP transfer past the receiver's bound).
    EMSGSIZE = 90,
    /// Protocol not supported (unknown port space).
    EPROTONOSUPPORT = 93,
    /// Operation not supported.
    EOPNOTSUPP = 95,
    /// Address family not supported.
    EAFNOSUPPORT = 97,
    /// Address already in use.
    EADDRINUSE = 98,
    /// Address not available.
    EADDRNOTAVAIL = 99,
    /// Network unreachable.
    ENETUNREACH = 101,
    /// Network dropped connection on reset (port or SM event).
    ENETRESET = 102,
    /// Connection aborted (the RMPP sender's ABORT or STOP).
    ECONNABORTED = 103,
    /// Connection reset.
    ECONNRESET = 104,
    /// Timed out.
    ETIMEDOUT = 110,
    /// Connection refused.
    ECONNREFUSED = 111,
    /// Transport endpoint already connected (rdma_notify on an established connection).
    EISCONN = 106,
    /// Host unreachable (address resolution failed).
    EHOSTUNREACH = 113,
    /// Operation already in progress (rdma_restrict_node_type after a bind).
    EALREADY = 114,
    /// Kernel-internal "operation not supported" (524): RDMA-CM's answer to an IPv6 join on RoCEv2.
    ENOTSUPP = 524,
}

impl Errno {
    /// The positive errno value.
    pub const fn value(self) -> i32 {
        self as i32
    }

    /// The status as the kernel reports it in events and return values (negative).
    pub const fn status(self) -> i32 {
        -(self as i32)
    }

    /// The symbolic name (`"EINVAL"`).
    pub const fn name(self) -> &'static str {
        match self {
            Errno::EPERM => "EPERM",
            Errno::ENOENT => "ENOENT",
            Errno::EINTR => "EINTR",
            Errno::EIO => "EIO",
            Errno::ENXIO => "ENXIO",
            Errno::EAGAIN => "EAGAIN",
            Errno::ENOMEM => "ENOMEM",
            Errno::EACCES => "EACCES",
            Errno::EBUSY => "EBUSY",
            Errno::ENODEV => "ENODEV",
            Errno::EINVAL => "EINVAL",
            Errno::ENOSPC => "ENOSPC",
            Errno::ENOSYS => "ENOSYS",
            Errno::EPROTO => "EPROTO",
            Errno::EMSGSIZE => "EMSGSIZE",
            Errno::ECONNABORTED => "ECONNABORTED",
            Errno::EPROTONOSUPPORT => "EPROTONOSUPPORT",
            Errno::EOPNOTSUPP => "EOPNOTSUPP",
            Errno::EAFNOSUPPORT => "EAFNOSUPPORT",
            Errno::EADDRINUSE => "EADDRINUSE",
            Errno::EADDRNOTAVAIL => "EADDRNOTAVAIL",
            Errno::ENETUNREACH => "ENETUNREACH",
            Errno::ENETRESET => "ENETRESET",
            Errno::ECONNRESET => "ECONNRESET",
            Errno::ETIMEDOUT => "ETIMEDOUT",
            Errno::ECONNREFUSED => "ECONNREFUSED",
            Errno::EHOSTUNREACH => "EHOSTUNREACH",
            Errno::EISCONN => "EISCONN",
            Errno::EALREADY => "EALREADY",
            Errno::ENODATA => "ENODATA",
            Errno::ENOTSUPP => "ENOTSUPP",
        }
    }

    /// Parse a symbolic name (as the state table in spec/ writes it).
    pub fn from_name(name: &str) -> Option<Errno> {
        ALL.iter().copied().find(|e| e.name() == name)
    }

    /// The errno with this (positive) value, if the engine knows it (`110` → `ETIMEDOUT`).
    pub fn from_value(value: i32) -> Option<Errno> {
        ALL.iter().copied().find(|e| e.value() == value)
    }
}

const ALL: [Errno; 31] = [
    Errno::EPROTO,
    Errno::EMSGSIZE,
    Errno::ECONNABORTED,
    Errno::EPERM,
    Errno::ENOENT,
    Errno::EINTR,
    Errno::EIO,
    Errno::ENXIO,
    Errno::EAGAIN,
    Errno::ENOMEM,
    Errno::EACCES,
    Errno::EBUSY,
    Errno::ENODEV,
    Errno::EINVAL,
    Errno::ENOSPC,
    Errno::ENOSYS,
    Errno::EPROTONOSUPPORT,
    Errno::EOPNOTSUPP,
    Errno::EAFNOSUPPORT,
    Errno::EADDRINUSE,
    Errno::EADDRNOTAVAIL,
    Errno::ENETUNREACH,
    Errno::ENETRESET,
    Errno::ECONNRESET,
    Errno::ETIMEDOUT,
    Errno::ECONNREFUSED,
    Errno::EHOSTUNREACH,
    Errno::ENOTSUPP,
    Errno::EISCONN,
    Errno::EALREADY,
    Errno::ENODATA,
];

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.value())
    }
}

impl std::error::Error for Errno {}
