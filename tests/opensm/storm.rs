//! Storm: 1,000 multicast groups joined and left against OpenSM 3.3 on ibsim (through the
//! pure-Rust sim client, from Hca2 as in tests/opensm/sa.rs), then the same sequence against
//! `roce_sa::SaResponder` in-process, in the same run, several rounds each.
//!
//! One round: 1,000 SubnAdmSet (FullMember, mask 0x130C7, RDMA-CM MGIDs of 239.2.0.0 ..
//! 239.2.3.231), each answered before the next is sent; every group checked to exist with an
//! MLID of its own; then 1,000 SubnAdmDelete (the kernel's leave: the SA's record, JoinState
//! FullMember, mask 0x10003); every group checked gone, and the SA's group count back where it
//! started: for OpenSM by an untrusted GetTable of all MCMemberRecords (one record per group;
//! its length counts them exactly below 4 records, see tests/ibsim/harness.rs `sa_exchange`) and
//! by `saquery -g` at the end; for roce-sa by the same GetTable and `group_count()`.
//!
//! The timed part of a round is the 2,000 transactions only (building the MAD, the exchange,
//! parsing and checking the answer), not the checks between the phases. Printed: each round's
//! transactions per second for both SAs, the median round, and the ratio. OpenSM's figure
//! includes two unix-datagram hops through ibsim each way per transaction; roce-sa's is a
//! function call, so the ratio measures the whole path, not the SA's code alone. Figures are
//! recorded in spec/opensm.md ("Differential", storm).

use std::net::Ipv6Addr;
use std::time::{Duration, Instant};

use crate::ibsim_harness::{sa_exchange, Fabric};
use crate::{JOIN_MASK, LEAVE_MASK, MGID_IPOIB_BCAST, NODE, SA_TIMEOUT};
use roce_net::ibsim::IbsimClient;
use roce_sa::{Requester, SaConfig, SaResponder};
use roce_wire::mad::Method;
use roce_wire::mcmember::{ComponentMask, JoinState, McMemberRecord};
use roce_wire::sa::{attr, SaData, SaMad, SA_DATA_OFFSET};
use roce_wire::{Gid, RDMA_UDP_QKEY};

const GROUPS: u16 = 1000;
const ROUNDS: usize = 5;

/// RDMA-CM's MGID for IPv4 group 239.2.(i >> 8).(i & 0xFF) on an IB port.
fn mgid(i: u16) -> Gid {
    Gid::from_ipv6(Ipv6Addr::new(0xff12, 0x4001, 0xffff, 0, 0, 0, 0xef02, i))
}

/// An SA reached by MADs: OpenSM through the sim, or ours in-process.
trait Sa {
    fn name(&self) -> &'static str;
    /// One request, its answer (`None`: no answer).
    fn exchange(&mut self, mad: &[u8; 256]) -> Option<([u8; 256], usize)>;
}

struct OpenSm {
    client: IbsimClient,
    fabric: Fabric,
}

impl Sa for OpenSm {
    fn name(&self) -> &'static str {
        "OpenSM"
    }
    fn exchange(&mut self, mad: &[u8; 256]) -> Option<([u8; 256], usize)> {
        sa_exchange(&self.client, mad, SA_TIMEOUT)
    }
}

struct Ours {
    sa: SaResponder,
    from: Requester,
}

impl Sa for Ours {
    fn name(&self) -> &'static str {
        "roce-sa"
    }
    fn exchange(&mut self, mad: &[u8; 256]) -> Option<([u8; 256], usize)> {
        self.sa.handle_mad(self.from, mad).first().map(|m| (*m, 256))
    }
}

/// Builds the requests (the same TIDs for both SAs) and checks the answers.
struct Driver {
    me: Gid,
    tid: u64,
}

impl Driver {
    fn request(&mut self, method: Method, mask: u64, rec: McMemberRecord) -> [u8; 256] {
        self.tid += 1;
        SaMad::request(method, self.tid, attr::MC_MEMBER_RECORD, mask, SaData::mc_member(rec)).to_bytes()
    }

    /// One transaction; the answer parsed, its status and record.
    fn transact(&mut self, sa: &mut dyn Sa, method: Method, mask: u64, rec: McMemberRecord) -> (u16, McMemberRecord) {
        let mad = self.request(method, mask, rec);
        let (resp, _) = sa
            .exchange(&mad)
            .unwrap_or_else(|| panic!("{}: no answer to {method:?} of {}", sa.name(), Ipv6Addr::from(rec.mgid.0)));
        let resp = SaMad::parse_checked(&resp).unwrap_or_else(|e| panic!("{}: unreadable answer: {e}", sa.name()));
        assert_eq!(resp.header.transaction_id & 0xFFFF_FFFF_FFFF, self.tid & 0xFFFF_FFFF_FFFF);
        (resp.header.status.0, resp.mc_member().copied().unwrap_or_default())
    }

    fn join_record(&self, i: u16) -> McMemberRecord {
        McMemberRecord {
            mgid: mgid(i),
            port_gid: self.me,
            q_key: RDMA_UDP_QKEY,
            p_key: 0xFFFF,
            join_state: JoinState::FULL_MEMBER,
            ..McMemberRecord::default()
        }
    }

    /// Whether group `i` exists: an untrusted Get by MGID.
    fn exists(&mut self, sa: &mut dyn Sa, i: u16) -> bool {
        let rec = McMemberRecord { mgid: mgid(i), ..McMemberRecord::default() };
        match self.transact(sa, Method::Get, ComponentMask::MGID.0, rec).0 {
            0x0000 => true,
            0x0300 => false,
            st => panic!("{}: Get of group {i}: status {st:#06x}", sa.name()),
        }
    }

    /// The SA's groups, by an untrusted GetTable of every MCMemberRecord (one record per group):
    /// `None` when there are too many to count (OpenSM's answer cut to one MAD by the sim).
    fn group_count(&mut self, sa: &mut dyn Sa) -> Option<usize> {
        let mad = self.request(Method::GetTable, 0, McMemberRecord::default());
        let (resp, len) = sa.exchange(&mad).unwrap_or_else(|| panic!("{}: no answer to GetTable", sa.name()));
        let m = SaMad::parse_checked(&resp).expect("GetTableResp");
        assert_eq!((m.header.method, m.header.status.0), (Method::GetTable, 0), "{}", sa.name());
        if len < 256 {
            // OpenSM through the sim: umad's length, 56 bytes of headers + 56 per record.
            Some((len - SA_DATA_OFFSET) / 56)
        } else if m.rmpp.version == 1 && m.rmpp.flags.0 & 0x2 != 0 {
            // roce-sa: RMPP, the first segment's PayloadLength is 20 per segment (of 200 data
            // bytes) + 56 per record.
            let total = m.rmpp.data2 as usize;
            (0..=total / 56).find(|n| 56 * n + 20 * (56 * n).div_ceil(200).max(1) == total)
        } else {
            None
        }
    }
}

/// One round on one SA: the timed joins and leaves with the checks between. Returns the time of
/// the 2,000 transactions.
fn round(d: &mut Driver, sa: &mut dyn Sa, groups_before: usize) -> Duration {
    let name = sa.name();
    let mut records = Vec::with_capacity(GROUPS as usize);
    let t0 = Instant::now();
    for i in 0..GROUPS {
        let (st, rec) = d.transact(sa, Method::Set, JOIN_MASK, d.join_record(i));
        assert_eq!(st, 0, "{name}: join of group {i}");
        assert_eq!((rec.mgid, rec.join_state), (mgid(i), JoinState::FULL_MEMBER), "{name}: join of group {i}");
        records.push(rec);
    }
    let joins = t0.elapsed();

    // Every group exists, each with an MLID of its own.
    let mut mlids: Vec<u16> = records.iter().map(|r| r.mlid).collect();
    assert!(mlids.iter().all(|&m| m >= 0xC000), "{name}: multicast LIDs");
    mlids.sort_unstable();
    mlids.dedup();
    assert_eq!(mlids.len(), GROUPS as usize, "{name}: one MLID per group");
    for i in 0..GROUPS {
        assert!(d.exists(sa, i), "{name}: group {i} exists after its join");
    }
    if let Some(n) = d.group_count(sa) {
        assert_eq!(n, groups_before + GROUPS as usize, "{name}: group count after the joins");
    }

    let t1 = Instant::now();
    for (i, rec) in records.iter().enumerate() {
        let leave = McMemberRecord { join_state: JoinState::FULL_MEMBER, ..*rec };
        let (st, back) = d.transact(sa, Method::Delete, LEAVE_MASK, leave);
        assert_eq!(st, 0, "{name}: leave of group {i}");
        assert_eq!(back.join_state, JoinState::NONE, "{name}: leave of group {i} keeps nothing");
    }
    let leaves = t1.elapsed();

    for i in 0..GROUPS {
        assert!(!d.exists(sa, i), "{name}: group {i} is gone after its leave");
    }
    assert_eq!(d.group_count(sa), Some(groups_before), "{name}: the group count is back where it started");
    joins + leaves
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn storm_1000_groups_join_and_leave() {
    let started = Instant::now();
    let fabric = Fabric::start();
    let client = fabric.client(NODE);
    let me = client.port_gid();
    let mut cfg = SaConfig::infiniband(client.gid_prefix());
    cfg.mtu = client.port_info()[41] & 0x0F; // PortInfo MTUCap, as OpenSM sizes groups
    let mut ours = Ours { sa: SaResponder::new(cfg).expect("a valid SaConfig"), from: Requester::new(me, 1) };
    let mut osm = OpenSm { client, fabric };
    let mut d = Driver { me, tid: 0x0000_5707_0000_0000 };

    // Where OpenSM starts: the IPoIB broadcast group only.
    let saquery_before = osm.fabric.mc_groups();
    assert_eq!(saquery_before, vec![MGID_IPOIB_BCAST], "saquery -g at start");
    let osm_before = d.group_count(&mut osm).expect("OpenSM's group count at start");
    assert_eq!(osm_before, 1, "OpenSM's GetTable at start: the broadcast group");
    let ours_before = d.group_count(&mut ours).expect("roce-sa's group count");
    assert_eq!(ours_before, 0);

    let tx = 2.0 * f64::from(GROUPS);
    // The transport's share, measured before the storm (after it, OpenSM re-routes the multicast
    // trees through the sim): as many round trips through the sim to a responder that is not
    // OpenSM, the sim's own SMA on our port (SubnGet(PortInfo), directed route, 0 hops), one hop
    // each way instead of two.
    let t = Instant::now();
    for _ in 0..2 * GROUPS {
        osm.client.smp_get(0x0015, 0).expect("SubnGet(PortInfo)");
    }
    let sim = tx / t.elapsed().as_secs_f64();
    println!("the sim alone: {tx:.0} SubnGet(PortInfo) round trips to our port's SMA at {sim:.0}/s");

    let (mut osm_rates, mut our_rates) = (Vec::new(), Vec::new());
    for r in 0..ROUNDS {
        let t_osm = round(&mut d, &mut osm, osm_before);
        let t_ours = round(&mut d, &mut ours, ours_before);
        assert_eq!((ours.sa.group_count(), ours.sa.member_count(), ours.sa.mlids_in_use()), (0, 0, 0));
        let (a, b) = (tx / t_osm.as_secs_f64(), tx / t_ours.as_secs_f64());
        println!(
            "round {}: OpenSM {GROUPS} joins + {GROUPS} leaves in {t_osm:.2?} = {a:.0} transactions/s; \
             roce-sa in {t_ours:.2?} = {b:.0} transactions/s; ratio {:.1}",
            r + 1,
            b / a
        );
        osm_rates.push(a);
        our_rates.push(b);
    }

    // OpenSM is back where it started, as saquery sees it too.
    assert_eq!(osm.fabric.mc_groups(), saquery_before, "saquery -g after the storm");
    let (a, b) = (median(osm_rates), median(our_rates));
    println!(
        "storm ({} build): OpenSM {a:.0} transactions/s, roce-sa {b:.0} transactions/s (median of {ROUNDS} rounds of \
         {tx:.0}); roce-sa/OpenSM = {:.1}; whole test {:.2?}",
        if cfg!(debug_assertions) { "debug" } else { "release" },
        b / a,
        started.elapsed()
    );
    println!("OpenSM's transactions/s are {:.0} % of the sim's round trips/s", 100.0 * a / sim);
    // Speed is reported, never asserted: the figures belong to the benchmarks' closing notes.
}
