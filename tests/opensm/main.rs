//! The `opensm` test binary: interop with OpenSM 3.3 on a fabric simulated by ibsim
//! (tests/ibsim: `bash tests/ibsim/setup.sh` installs the tools; a missing one fails).
//! One binary for the area (issue 27); `cargo test --test opensm storm::` runs one former file.
//!
//! Every [`ibsim_harness::Fabric`] has its own ibsim socket name and directory, so the tests
//! run in parallel threads without meeting.

#[path = "../common/mod.rs"]
mod common;
#[path = "../ibsim/harness.rs"]
mod ibsim_harness;

mod differential;
mod engine;
mod rmpp;
mod sa;
mod service;
mod signals;
mod storm;

use std::net::Ipv6Addr;
use std::time::Duration;

use roce_wire::mcmember::ComponentMask;

// The fabric's ports and groups, shared by the modules (tests/ibsim/net).

/// Our port.
const NODE: &str = "Hca2";
/// Another port of the fabric.
const OTHER_NODE: &str = "Hca3";
/// How long a hand-built SA request waits for OpenSM's answer.
const SA_TIMEOUT: Duration = Duration::from_secs(5);

/// The MGID the kernel's RDMA-CM builds for IPv4 group 239.1.2.3 on an IB port with
/// `RDMA_PS_UDP` (`cma_set_mgid`: `ip_ib_mc_map` with the RDMA CM signature byte 0x01 instead
/// of IPoIB's 0x1B): ff12:4001:ffff::ef01:203.
const MGID_CM: Ipv6Addr = Ipv6Addr::new(0xff12, 0x4001, 0xffff, 0, 0, 0, 0xef01, 0x0203);
/// Another RDMA-CM style MGID (IPv6 group ff0e::1:2:3 ▶ signature 0x6001).
const MGID_CM6: Ipv6Addr = Ipv6Addr::new(0xff12, 0x6001, 0xffff, 0, 0, 0x1, 0x2, 0x3);
/// An MGID with the IPoIB signature 0x601B (IPv6-over-IB): OpenSM creates such groups with
/// IPoIB's parameters (Q_Key 0x0B1B), so a join with RDMA-CM's Q_Key is refused.
const MGID_IPOIB: Ipv6Addr = Ipv6Addr::new(0xff12, 0x601b, 0xffff, 0, 0, 0x1, 0x2, 0x3);
/// The group of the proxy join (239.1.2.4 in RDMA-CM's mapping).
const MGID_PROXY: Ipv6Addr = Ipv6Addr::new(0xff12, 0x4001, 0xffff, 0, 0, 0, 0xef01, 0x0204);
/// The IPoIB broadcast group OpenSM creates at start (no members).
const MGID_IPOIB_BCAST: Ipv6Addr = Ipv6Addr::new(0xff12, 0x401b, 0xffff, 0, 0, 0, 0xffff, 0xffff);

/// The component mask of the kernel's join (0x130C7) and leave (0x10003).
const JOIN_MASK: u64 = ComponentMask::KERNEL_JOIN.0;
const LEAVE_MASK: u64 = ComponentMask::KERNEL_LEAVE.0;
