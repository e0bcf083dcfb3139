//! The engine's notion of time: an opaque instant supplied by the caller (sans-IO: the engine
//! has no clock of its own), so that a simulated link can run it on a virtual clock and a
//! real driver on the monotonic clock.

use core::fmt;
use core::ops::{Add, AddAssign, Sub};
use core::time::Duration;

/// A point in time, in nanoseconds since an epoch the driver chooses.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant(0);

    /// An instant `nanos` after the epoch.
    pub const fn from_nanos(nanos: u64) -> Instant {
        Instant(nanos)
    }

    /// An instant `millis` after the epoch.
    pub const fn from_millis(millis: u64) -> Instant {
        Instant(millis * 1_000_000)
    }

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time since the epoch.
    pub const fn since_epoch(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:09}s", self.0 / 1_000_000_000, self.0 % 1_000_000_000)
    }
}
