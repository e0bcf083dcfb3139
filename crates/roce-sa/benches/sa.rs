//! SA responder throughput with 100,000 groups of 4 members, and memory per group and member.
//!
//! `cargo bench -p roce-sa`. Every transaction goes through `handle_mad` with a 256-byte MAD
//! (parse, checks, state change, duplicate cache, answer emitted), each with a fresh TID so
//! that none is answered from the cache except in `duplicate`.

use std::hint::black_box;
use std::net::Ipv4Addr;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use roce_sa::{Group, Member, Requester, SaConfig, SaResponder};
use roce_wire::mad::Method;
use roce_wire::mcmember::{ComponentMask, JoinState, McMemberRecord};
use roce_wire::sa::{attr, SaData, SaMad};
use roce_wire::{Gid, MAD_SIZE};

const GROUPS: u32 = 100_000;
const MEMBERS: u8 = 4;
/// Distinct prebuilt requests cycled through (random groups and members).
const POOL: usize = 1 << 15;

fn mgid(i: u32) -> Gid {
    Gid::from_ipv4(Ipv4Addr::new(239, (i >> 16) as u8, (i >> 8) as u8, i as u8))
}

fn port(j: u8) -> Gid {
    Gid::from_ipv4(Ipv4Addr::new(198, 18, 0, j + 1))
}

fn join_mad(i: u32, j: u8, js: JoinState) -> [u8; MAD_SIZE] {
    let rec = McMemberRecord {
        mgid: mgid(i),
        port_gid: port(j),
        q_key: 0x0123_4567,
        p_key: 0xFFFF,
        join_state: js,
        ..Default::default()
    };
    SaMad::request(Method::Set, 0, attr::MC_MEMBER_RECORD, ComponentMask::KERNEL_JOIN.0, SaData::mc_member(rec))
        .to_bytes()
}

fn leave_mad(i: u32, j: u8, js: JoinState) -> [u8; MAD_SIZE] {
    let rec = McMemberRecord::leave(mgid(i), port(j), js);
    SaMad::request(Method::Delete, 0, attr::MC_MEMBER_RECORD, ComponentMask::KERNEL_LEAVE.0, SaData::mc_member(rec))
        .to_bytes()
}

/// Resident set size in bytes (Linux), for a cross-check of the computed figures.
fn rss() -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

struct Bench {
    sa: SaResponder,
    tid: u64,
}

impl Bench {
    fn send(&mut self, from: u8, mad: &mut [u8; MAD_SIZE]) -> usize {
        self.tid += 1;
        mad[8..16].copy_from_slice(&self.tid.to_be_bytes());
        let r = self.sa.handle_mad(Requester::new(port(from), 1), mad);
        debug_assert_eq!(&r[0][4..6], &[0, 0]);
        r.len()
    }
}

fn populated() -> Bench {
    // 100,000 groups need more than the 16,383 MLIDs of 0xC000..=0xFFFE: share them. Each of
    // the 4 ports joins every group, 100,000 members a port and 400,000 in all: past the
    // default member caps (spec/sa.md R-CAP), so this SA is configured to hold them.
    let cfg = SaConfig {
        share_mlids: true,
        max_groups: 2 * GROUPS as usize,
        max_members: 1 << 22,
        max_members_per_port: 1 << 22,
        ..SaConfig::roce()
    };
    let rss0 = rss();
    let mut b = Bench { sa: SaResponder::new(cfg).expect("a valid SaConfig"), tid: 0 };
    for i in 0..GROUPS {
        for j in 0..MEMBERS {
            let mut m = join_mad(i, j, JoinState::FULL_MEMBER);
            b.send(j, &mut m);
        }
    }
    assert_eq!((b.sa.group_count(), b.sa.member_count()), (GROUPS as usize, GROUPS as usize * MEMBERS as usize));
    let mem = b.sa.memory_usage();
    let groups = f64::from(GROUPS);
    let members = b.sa.member_count() as f64;
    println!("roce-sa memory, {GROUPS} groups x {MEMBERS} members (computed from container capacities):");
    println!("  size_of::<Group>() = {} B, size_of::<Member>() = {} B", size_of::<Group>(), size_of::<Member>());
    println!(
        "  group table {:.1} MiB = {:.1} B/group; member vectors {:.1} MiB = {:.1} B/member; MLID pool {} KiB; dup cache {} KiB",
        mem.group_table as f64 / 1048576.0,
        mem.group_table as f64 / groups,
        mem.members as f64 / 1048576.0,
        mem.members as f64 / members,
        mem.mlid_pool / 1024,
        mem.dup_cache / 1024,
    );
    println!(
        "  total {:.1} MiB = {:.1} B per group of {MEMBERS}",
        mem.total() as f64 / 1048576.0,
        mem.total() as f64 / groups
    );
    if let (Some(a), Some(z)) = (rss0, rss()) {
        println!(
            "  RSS grew {:.1} MiB while populating ({:.1} B per group, allocator overhead included)",
            (z - a) as f64 / 1048576.0,
            (z - a) as f64 / groups
        );
    }
    b
}

/// A deterministic spread of (group, member) pairs.
fn picks() -> Vec<(u32, u8)> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..POOL)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x % u64::from(GROUPS)) as u32, (x >> 32) as u8 % MEMBERS)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut b = populated();
    let picks = picks();
    let mut g = c.benchmark_group("sa_100k_groups_x4");

    // Set: a member joins again (its state unchanged), found, checked and answered.
    let mut sets: Vec<(u8, [u8; MAD_SIZE])> =
        picks.iter().map(|&(i, j)| (j, join_mad(i, j, JoinState::FULL_MEMBER))).collect();
    g.throughput(Throughput::Elements(1));
    let mut k = 0;
    g.bench_function("set_rejoin", |bn| {
        bn.iter(|| {
            let (j, m) = &mut sets[k % POOL];
            k += 1;
            black_box(b.send(*j, m))
        })
    });

    // Delete then Set: a member leaves (one of four full members: the group stays) and
    // joins back; two transactions per iteration.
    let mut pairs: Vec<(u8, [u8; MAD_SIZE], [u8; MAD_SIZE])> = picks
        .iter()
        .map(|&(i, j)| (j, leave_mad(i, j, JoinState::FULL_MEMBER), join_mad(i, j, JoinState::FULL_MEMBER)))
        .collect();
    g.throughput(Throughput::Elements(2));
    let mut k = 0;
    g.bench_function("delete_then_set", |bn| {
        bn.iter(|| {
            let (j, del, set) = &mut pairs[k % POOL];
            k += 1;
            black_box(b.send(*j, del) + b.send(*j, set))
        })
    });

    // Create a group and delete it (MLID allocated and freed): two transactions.
    let mut create = join_mad(GROUPS + 1, 0, JoinState::FULL_MEMBER);
    let mut destroy = leave_mad(GROUPS + 1, 0, JoinState::FULL_MEMBER);
    g.bench_function("create_then_delete_group", |bn| {
        bn.iter(|| black_box(b.send(0, &mut create) + b.send(0, &mut destroy)))
    });

    // A retransmitted Set answered from the duplicate cache.
    g.throughput(Throughput::Elements(1));
    let mut dup = join_mad(7, 0, JoinState::FULL_MEMBER);
    b.send(0, &mut dup);
    let from = Requester::new(port(0), 1);
    g.bench_function("duplicate_from_cache", |bn| bn.iter(|| black_box(b.sa.handle_mad(from, &dup).len())));

    // Get(MCMemberRecord) by MGID.
    let q = McMemberRecord { mgid: mgid(4242), ..Default::default() };
    let get =
        SaMad::request(Method::Get, 9, attr::MC_MEMBER_RECORD, ComponentMask::MGID.0, SaData::mc_member(q)).to_bytes();
    g.bench_function("get_by_mgid", |bn| bn.iter(|| black_box(b.sa.handle_mad(from, &get).len())));
    g.finish();

    assert_eq!(b.sa.group_count(), GROUPS as usize);
    let s = b.sa.stats();
    println!(
        "roce-sa: {} MADs handled, {} joins, {} leaves, {} duplicates, {} errors",
        s.received, s.joins, s.leaves, s.duplicates, s.errors
    );
    assert_eq!(s.errors, 0);
}

criterion_group!(benches, bench);
criterion_main!(benches);
