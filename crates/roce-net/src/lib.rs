//! # roce-net: I/O for the roce engines
//!
//! - [`Node`]: the sans-IO engine shape (`handle_frame`, `poll_transmit`, `poll_timeout`,
//!   `handle_timeout`) that `roce_cm::Stack` implements and every driver runs.
//! - [`SimNet`]: a deterministic simulated Ethernet segment (a hub) with a virtual clock and
//!   per-node cables with latency, jitter, loss, duplication, reordering, corruption, MTU and
//!   bandwidth; it captures every frame to pcap. [`ScriptedNode`] is a hand-driven peer.
//! - [`Device`]: a non-blocking frame device for real I/O, with smoltcp-style wrappers
//!   [`PcapDevice`] (capture both directions) and [`FaultDevice`] (seeded loss, corruption,
//!   delay, duplication), and [`MemoryDevice`] (an in-memory back-to-back pair).
//! - [`raw::RawSocket`]: the production device, an AF_PACKET socket on one interface that moves
//!   frames in batches (`sendmmsg`/`recvmmsg`), or through PACKET_MMAP rings
//!   ([`ring::RingConfig`]: a TPACKET_V3 receive ring, a transmit ring) with a counted fallback.
//! - [`udp::RoceUdpSocket`]: the device that needs no privilege, a kernel UDP socket on port
//!   4791 (the kernel writes the IP and UDP headers, resolves neighbours and reports groups).
//! - [`fabric`]: RC flows between real engines through one simulated switch egress port that
//!   marks ECN as DCQCN's switches do, in virtual time (`roce bench congestion`).
//! - [`sa_queue::RequestQueue`]: an SA server's requests queued per requester and answered in
//!   deficit round robin, bounded and counted, so one host's flood cannot delay another's join.
//! - [`pcap`]: reading pcap/pcapng and writing pcap (roce-decode's `capture`, re-exported).
#![warn(missing_docs)]

mod corrupt;
pub mod device;
pub mod driver;
pub mod error;
pub mod fabric;
pub mod fault;
mod gso;
pub mod ibsim;
pub mod node;
pub mod pcap;
pub mod pcap_device;
pub mod raw;
pub mod ring;
mod rng;
pub mod sa_host;
pub mod sa_queue;
pub mod sim;
pub mod udp;
mod vnet;

pub use corrupt::CorruptScope;
pub use device::{Device, MemoryDevice};
pub use error::NetError;
pub use fault::{FaultConfig, FaultDevice, FaultFrames, FaultStats};
pub use node::{Node, Received, ScriptedNode};
pub use pcap_device::PcapDevice;
pub use roce_cm::Instant;
pub use sa_host::SaHost;
pub use sim::{CapturedTx, LinkConfig, Livelock, NodeId, NodeStats, SimNet};

/// Tests' helper: move the calling thread into a new network namespace holding a veth pair
/// `a`–`b`, both up. Needs root (CI runs as root): a missing privilege is a failure.
#[cfg(test)]
pub(crate) fn veth_in_own_netns(a: &str, b: &str) {
    // SAFETY: unshare(2) moves only this thread into a new network namespace.
    let r = unsafe { libc::unshare(libc::CLONE_NEWNET) };
    assert_eq!(r, 0, "unshare(CLONE_NEWNET): this test needs root: {}", std::io::Error::last_os_error());
    let ok = std::process::Command::new("sh")
        .args(["-c", &format!("ip link add {a} type veth peer name {b} && ip link set {a} up && ip link set {b} up")])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "ip link add (iproute2)");
}
