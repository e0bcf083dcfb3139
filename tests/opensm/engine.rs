//! The engine's SA client against OpenSM through ibsim: `roce mckey --ibsim` joins (SA Set ▶
//! GetResp with an MLID, the MGID as RDMA-CM builds it on IB) and leaves (Delete ▶ DeleteResp);
//! `saquery` lists our port in the group meanwhile and not afterwards; `roce sa-query --ibsim`
//! reads OpenSM's MCMemberRecords. Fails (never skips) without ibsim/OpenSM.

use std::process::Command;
use std::time::Duration;

use crate::ibsim_harness::Fabric;
use crate::MGID_CM;

#[test]
fn mckey_and_sa_query_through_ibsim() {
    let f = Fabric::start();
    let roce = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_roce")).env("IBSIM_SOCKNAME", &f.sockname).args(args).spawn().unwrap()
    };
    // Join, hold the group for 3 s, leave.
    let child = roce(&["mckey", "--ibsim", "Hca2", "-m", "239.1.2.3", "--leave-after", "3"]);
    std::thread::sleep(Duration::from_millis(1500));
    let during = f.mc_members(Some(MGID_CM));
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "mckey --ibsim failed");
    assert_eq!(during.len(), 1, "saquery lists our port while joined: {during:?}");
    assert_eq!(during[0].join_state(), 1, "FullMember");
    let after = f.mc_members(Some(MGID_CM));
    assert!(after.is_empty(), "after the leave OpenSM no longer lists us: {after:?}");

    // A send-only join and leave.
    let child =
        roce(&["mckey", "--ibsim", "Hca2", "-m", "239.1.2.3", "--join-state", "sendonly", "--leave-after", "0.5"]);
    assert!(child.wait_with_output().unwrap().status.success());

    // A request OpenSM refuses, through the engine: an IPv6 group whose MGID carries the IPoIB
    // signature (RDMA-CM uses an IPv6 group address as the MGID on IB) with RDMA-CM's Q_Key,
    // which differs from the IPoIB broadcast group's: OpenSM answers 0x0200 and the join ends
    // in MULTICAST_ERROR carrying that SA status; mckey exits 1.
    let out = Command::new(env!("CARGO_BIN_EXE_roce"))
        .env("IBSIM_SOCKNAME", &f.sockname)
        .args(["mckey", "--ibsim", "Hca2", "-m", "ff12:401b:ffff::1:2", "--leave-after", "0.5"])
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("event: MULTICAST_ERROR") && text.contains("SA status 0x0200"), "{text}");
    assert!(f.mc_members(Some("ff12:401b:ffff::1:2".parse().unwrap())).is_empty(), "no group after a refused join");

    // sa-query: GetTable answers with OpenSM's records (the IPoIB broadcast group at least).
    let out = Command::new(env!("CARGO_BIN_EXE_roce"))
        .env("IBSIM_SOCKNAME", &f.sockname)
        .args(["sa-query", "--ibsim", "Hca2"])
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("SubnAdmGetTableResp") && text.contains("ff12:401b:ffff::ffff:ffff"), "{text}");
    // A Get of a group that does not exist: OpenSM's NO_RECORDS, and the exit code says so.
    let out = Command::new(env!("CARGO_BIN_EXE_roce"))
        .env("IBSIM_SOCKNAME", &f.sockname)
        .args(["sa-query", "--ibsim", "Hca2", "--mgid", "ff12:4001:ffff::ef09:909"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("0x0300"), "{text}");
}
