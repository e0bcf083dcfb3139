//! XRC's verbs through the drop-in libibverbs, case by case (issue 37 item 2): a C program
//! (tests/capi/xrc.c, built against Debian 12's headers) asks for each and prints what it got;
//! Debian's `ibv_xsrq_pingpong` moving data over them is in tests/capi/rc.rs. The answers are
//! the kernel's and libibverbs':
//! - `ibv_open_xrcd`: a comp_mask past the known bits EOPNOTSUPP, without FD and OFLAGS EINVAL
//!   (rdma-core `ibv_cmd_open_xrcd`); a descriptor that is not open EBADF, a file with no
//!   domain yet and no `O_CREAT` EAGAIN, `O_EXCL` on a file that has one EINVAL; a second open
//!   of the file is another handle on the same domain (`ib_uverbs_open_xrcd`);
//! - `ibv_close_xrcd`: EBUSY while an SRQ or target QP made through that handle remains
//!   (`uverbs_free_xrcd`'s `ib_destroy_usecnt`); the domain goes with its last handle (a new
//!   open without `O_CREAT` is EAGAIN again);
//! - `ibv_create_srq_ex`: XRC without its domain or CQ EINVAL (`ib_uverbs_create_xsrq`); tag
//!   matching EOPNOTSUPP (rxe's provider); `ibv_get_srq_num` a 24-bit number;
//! - target QPs (`IBV_QPT_XRC_RECV`) need their domain (EINVAL); initiators
//!   (`IBV_QPT_XRC_SEND`) get no receive queue (its capacities 0); the transitions require what
//!   `ib_modify_qp_is_ok` requires of each (a target's RTR the responder's attributes, an
//!   initiator's RTS the requester's); a target posts nothing, an initiator receives nothing
//!   (EINVAL), and a remote SRQ number past 24 bits is EINVAL.

use crate::common;
use crate::common::netns::Netns;
use crate::debian;
use crate::library::exec;

#[test]
fn xrc_verbs_answer_as_the_kernel_and_libibverbs_do() {
    let dir = common::artefact_dir("capi_xrc_verbs");
    let prog = debian::build_c(&dir, "xrc", include_str!("xrc.c"));
    let ns = Netns::veth_pair("capixrcv");
    ns.sh("ip addr add 198.18.2.1/24 dev veth0");
    let file = dir.join("xrc_domain");
    let o = exec(&ns, &["-I", "198.18.2.1", "--transport", "udp"], &prog, &[file.to_str().unwrap()]).output().unwrap();
    let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    std::fs::write(dir.join("output.txt"), &out).unwrap();
    assert!(o.status.success(), "{out}");
    let (einval, eopnotsupp, eagain, ebadf, ebusy) =
        (libc::EINVAL, libc::EOPNOTSUPP, libc::EAGAIN, libc::EBADF, libc::EBUSY);
    let want = [
        "case=device_cap_xrc 1".to_string(),
        format!("case=xrcd_no_mask {einval}"),
        format!("case=xrcd_no_oflags {einval}"),
        format!("case=xrcd_reserved_mask {eopnotsupp}"),
        format!("case=xrcd_new_without_creat {eagain}"),
        format!("case=xrcd_bad_fd {ebadf}"),
        "case=xrcd_create 0".to_string(),
        format!("case=xrcd_exclusive_again {einval}"),
        "case=xrcd_open_again 0 distinct=1".to_string(),
        "case=xrcd_private 0".to_string(),
        format!("case=xsrq_no_cq {einval}"),
        format!("case=xsrq_no_xrcd {einval}"),
        format!("case=srq_tm {eopnotsupp}"),
        "case=xsrq 0 num_ok=1".to_string(),
        "case=basic_srq_ex 0".to_string(),
        format!("case=tgt_no_xrcd {einval}"),
        "case=tgt 0".to_string(),
        format!("case=close_with_its_srq {ebusy}"),
        format!("case=close_with_its_tgt {ebusy}"),
        "case=close_private 0".to_string(),
        "case=tgt_init 0".to_string(),
        format!("case=tgt_rtr_without_responder_attrs {einval}"),
        "case=tgt_rtr 0".to_string(),
        "case=tgt_rts 0".to_string(),
        "case=ini 0 recv_caps=0".to_string(),
        format!("case=ini_post_send_in_reset {einval}"),
        format!("case=ini_post_recv {einval}"),
        format!("case=tgt_post_recv {einval}"),
        format!("case=tgt_post_send {einval}"),
        "case=ini_init 0".to_string(),
        "case=ini_rtr 0".to_string(),
        format!("case=ini_rts_without_retry {einval}"),
        "case=ini_rts 0".to_string(),
        format!("case=ini_srqn_past_24_bits {einval}"),
        "case=destroy_srq_in_domain 0".to_string(),
        "case=close_after_its_srq 0".to_string(),
        "case=destroy_tgt 0".to_string(),
        "case=close_last 0".to_string(),
        format!("case=reopen_after_close {eagain}"),
    ];
    let got: Vec<&str> = out.lines().filter(|l| l.starts_with("case=")).collect();
    assert_eq!(got, want, "{out}");
}
