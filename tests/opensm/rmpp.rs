//! What OpenSM's multi-record GetTableResp looks like through ibsim, and what the engine makes
//! of it (spec/opensm.md "GetTableResp through ibsim"). OpenSM leaves RMPP to the kernel's MAD
//! layer; ibsim's umad shim has none, so the answer reaches us as ONE 256-byte MAD whose RMPP
//! header holds only the Active flag (version 0, type 0), cut at 256 bytes when the table is
//! longer (the sim's length field: 256), its tail past a shorter length not even zeroed by
//! OpenSM. The engine reads it as the one MAD it is — no reassembly, no ACK, no ABORT — counts
//! it as "unsegmented", and `roce sa-query` warns that records past it cannot be known.
//! Fails (never skips) without ibsim/OpenSM.

use std::process::Command;
use std::time::Duration;

use crate::ibsim_harness::{sa_exchange, Fabric};
use roce_wire::mad::{MadStatus, Method};
use roce_wire::sa::{attr, SaData, SaMad};
use roce_wire::service_record::ServiceRecord;

fn roce(f: &Fabric, args: &[&str]) -> (Option<i32>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_roce")).env("IBSIM_SOCKNAME", &f.sockname).args(args).output().unwrap();
    (o.status.code(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

#[test]
fn opensm_table_through_ibsim_is_one_unsegmented_mad() {
    let f = Fabric::start();
    for i in 0..3u64 {
        let (code, t) = roce(
            &f,
            &[
                "sa-query",
                "--ibsim",
                "Hca2",
                "-S",
                "--register",
                "--lease",
                "600",
                "--service-id",
                &format!("{:#x}", 0x1000 + i),
                "--service-name",
                &format!("svc-{i}"),
            ],
        );
        assert_eq!(code, Some(0), "{t}");
    }
    // OpenSM's own saquery goes through the same shim: it too lists one record of the three.
    let listed = f.saquery(&["-S"]);
    assert_eq!(listed.matches("ServiceRecord dump").count(), 1, "saquery -S:\n{listed}");
    // Each is there: a table by ServiceID is one record, a MAD shorter than 256 bytes.
    for i in 0..3u64 {
        let (code, t) = roce(&f, &["sa-query", "--ibsim", "Hca2", "-S", "--service-id", &format!("{:#x}", 0x1000 + i)]);
        assert_eq!(code, Some(0), "{t}");
        assert!(t.contains(&format!("svc-{i}")) && t.contains("\n1 records\n"), "{t}");
    }

    // The raw answer as the sim carries it: one MAD, length 256 (the table is 56 + 3 × 176
    // bytes), RMPP header Active only.
    let c = f.client("Hca2");
    let req =
        SaMad::request(Method::GetTable, 0x77, attr::SERVICE_RECORD, 0, SaData::service(ServiceRecord::default()));
    let (mad, len) = sa_exchange(&c, &req.to_bytes(), Duration::from_secs(3)).expect("OpenSM answers");
    let m = SaMad::parse(&mad).unwrap();
    assert_eq!((m.header.method, m.header.status), (Method::GetTable, MadStatus::SUCCESS));
    assert_eq!(len, 256, "cut at one MAD");
    assert_eq!(&mad[24..36], &[0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0], "RMPP: only the Active flag");
    assert_eq!(m.sa.attribute_offset, 22);
    // Only the (one) further answer MAD comes: no second segment.
    assert!(c.recv_mad(Some(Duration::from_millis(500))).unwrap().is_none(), "one MAD per answer");

    // The engine: one record (what fits in 200 bytes), counted unsegmented, a warning; no ACK,
    // no ABORT, nothing dropped.
    let (code, t) = roce(&f, &["sa-query", "--ibsim", "Hca2", "-S", "-v"]);
    assert_eq!(code, Some(0), "{t}");
    assert!(t.contains("\n1 records\n"), "{t}");
    assert!(t.contains("0 segments, 0 ACKs, 0 ABORTs, 1 unsegmented"), "{t}");
    assert!(t.contains("warning: the answer is one MAD with the RMPP Active flag"), "{t}");
    assert!(t.contains("dropped 0"), "{t}");

    // MCMemberRecords: OpenSM's groups (fewer than 4: one MAD holds them), exactly as many as
    // saquery lists, none read from the bytes past OpenSM's length.
    let groups = f.mc_groups();
    let (code, t) = roce(&f, &["sa-query", "--ibsim", "Hca2", "-v"]);
    assert_eq!(code, Some(0), "{t}");
    assert!(groups.len() < 4, "{groups:?}");
    assert!(t.contains(&format!("\n{} records\n", groups.len())), "saquery: {groups:?}\n{t}");
}
