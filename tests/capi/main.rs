//! The `capi` test binary: Debian 12's own rdma-core programs, unmodified (the binaries of the
//! packages the interop setup downloads, never rebuilt, never installed on the host), running
//! over roce's drop-in `libibverbs.so.1`/`librdmacm.so.1` through `roce exec`: the library's
//! symbols against the real libraries', the device as `ibv_devinfo` prints it, `mckey` and
//! `udaddy` program against program on raw sockets and, as nobody, on the udp transport, and a
//! program's groups left on the wire however it dies. Needs root for the namespaces (CI runs
//! as root) and `bash tests/interop/setup.sh` (the .debs). spec/capi.md.

#[path = "../common/mod.rs"]
mod common;

mod death;
mod debian;
mod errors;
mod expect;
mod library;
mod perftest;
mod placement;
mod rc;
mod veth;
mod windows;
mod xrc;
