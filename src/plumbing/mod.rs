//! What several commands share and none owns, each module using only those above it:
//!
//! - [`exit`]: the one table of exit statuses;
//! - [`shutdown`]: ending like a process on the kernel on a signal or a closed stdout (the
//!   stop's state and the self-pipe that wakes a waiting driver);
//! - [`out`]: the one printer of results, status lines, events and counters;
//! - [`port`]: a driven stack on a raw socket or ibsim: opening it, the checks before any
//!   traffic, the path MTU, and the one ending (ids destroyed, counters, exit status);
//! - [`options`]: the clap options several commands take (where a stack runs, seconds, MAC
//!   addresses) and their bounds;
//! - [`cm_steps`]: the RDMA-CM steps the CM commands (`udaddy`, `cmatose`, `rping`) share;
//! - [`input`]: a file argument where `-` is standard input (`decode`, `encode`, `send`).
//!
//! These live here rather than in `cmd/` so that no command imports another.

pub mod cm_steps;
pub mod exit;
pub mod input;
pub mod options;
pub mod out;
pub mod port;
pub mod shutdown;
