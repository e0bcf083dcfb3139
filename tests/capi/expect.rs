//! What tests/capi/atomwr.c and tests/capi/mw.c print when both ends do what rxe does: one
//! list for the veth tests (tests/capi/placement.rs, windows.rs) and the kernel interop test
//! (tests/interop/capi.rs), which includes this file.

/// atomwr's client between two ends with ATOMIC WRITE (rxe 6.2 on, roce).
pub const ATOMWR_CLIENT: [&str; 7] = [
    "case=qp_ex ok=1",
    "case=batch complete=0",
    "case=atomic_write status=0 opcode=9 wr_id=1",
    "case=read status=0 wr_id=2 same=1",
    "case=abort wcs=0",
    "case=send_inline complete=0 status=0 wr_id=4",
    "case=atomic_write_misaligned complete=0 status=9",
];

/// atomwr's client's FLUSH lines (`-f`): a range and the whole region, both IBV_WC_FLUSH (8).
pub const ATOMWR_FLUSH: [&str; 2] =
    ["case=flush complete=0 status=0 opcode=8 wr_id=6", "case=flush_mr complete=0 status=0 opcode=8 wr_id=7"];

/// atomwr's server once the client has gone: the word the ATOMIC WRITE placed, and the inline
/// SEND's bytes.
pub const ATOMWR_SERVER: &str = "server word=1122334455667788 recv=1 status=0 len=5 text=done!";

/// mw's client between two ends with memory windows, and a region of the server's second PD
/// (an rkey violation: rxe's `lookup_mr(qp->pd, …)`).
pub const MW_CLIENT: [&str; 6] = [
    "case=keys status=0 len=28",
    "case=read_type2 status=0 same=1",
    "case=read_type1 status=0 same=1",
    "case=send_inv status=0",
    "case=read_after_inv status=10",
    "case=read_other_pd status=10",
];

/// mw's server (on roce: the receive of the SEND with invalidate carries IBV_WC_WITH_INV).
pub const MW_SERVER: [&str; 4] = [
    "server bind2 status=0 opcode=5",
    "server bind1 status=0 opcode=5 rkey_changed=1",
    "server keys status=0",
    "server recv=1 status=0 flags=0x8 rkey_ok=1",
];
