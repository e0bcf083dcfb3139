//! The C ABI of roce: one shared library that answers to `libibverbs.so.1` and
//! `librdmacm.so.1` (rdma-core 44's symbols and version nodes), so that unmodified programs
//! run over roce on a host with no RDMA device: `roce exec -I ADDR -- mckey …` (spec/capi.md).
//!
//! A thin skin over the engine the `roce` tools run: the stack runs on a thread inside the
//! program (runtime.rs); ids, events and multicast are cm.rs; devices and queries device.rs;
//! PDs, MRs, CQs, QPs and the data path verbs.rs; memory regions mr.rs; the process that
//! leaves a dead program's groups watcher.rs. `unsafe` lives here, at the C boundary, and in
//! no crate below.
#![allow(non_camel_case_types)]
#![warn(missing_docs)]

pub mod abi;
pub mod cm;
pub mod config;
pub mod conn;
pub mod device;
pub mod ffi;
pub mod ids;
pub mod mr;
pub mod mw;
pub mod port;
pub mod qp_ex;
pub mod queues;
pub mod runtime;
pub mod stub;
pub mod verbs;
pub mod watcher;
pub mod wr_batch;
pub mod xrc;
pub mod xrcd;

/// `verbs_allow_disassociate_destroy` (IBVERBS_PRIVATE_34): a provider's flag in the real
/// library; nothing here reads it.
#[no_mangle]
#[allow(non_upper_case_globals)]
pub static mut verbs_allow_disassociate_destroy: bool = false;
