//! The work requests a program builds between `ibv_wr_start` and `ibv_wr_complete` (qp_ex.rs
//! fills them; every QP carries one batch slot, verbs.rs).

use core::ffi::c_int;

use roce_cm::rc::SendOp;

use crate::abi::{ibv_send_wr, ibv_sge};

/// One work request being built.
pub struct Entry {
    /// The C form (opcode, wr_id, flags, immediate, remote address), its SGE list attached at
    /// `ibv_wr_complete`.
    pub wr: ibv_send_wr,
    /// `ibv_wr_set_sge*`: the elements, copied at the call.
    pub sges: Vec<ibv_sge>,
    /// `ibv_wr_set_inline_data*`: the bytes, copied at the call (the program may reuse them).
    pub inline: Option<Vec<u8>>,
    /// `ibv_wr_atomic_write`: the 8 bytes, copied at the call.
    pub atomic_write: Option<[u8; 8]>,
    /// `ibv_wr_flush` (rdma-core 45): the request, already the engine's.
    pub flush: Option<SendOp>,
}

/// The work requests between `ibv_wr_start` and `ibv_wr_complete`, and the first error met.
#[derive(Default)]
pub struct Batch {
    /// In the order the program began them.
    pub entries: Vec<Entry>,
    /// The first error (0: none), what `ibv_wr_complete` returns.
    pub err: c_int,
}

impl Batch {
    /// Remember `err` unless an earlier error is already what `ibv_wr_complete` returns.
    pub fn fail(&mut self, err: c_int) {
        if self.err == 0 {
            self.err = err;
        }
    }
}
