//! CM connections: REQ → REP → RTU, then DREQ → DREP, or REJ (with its reason), MRAs along
//! the way; SIDR REQ → REP. A connection is found by either side's communication ID together
//! with the endpoint (IP address, GID or LID) of the side that chose it.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use roce_wire::cm::{attr, RejReason};

use super::series::Latency;
use super::{Endpoint, Note};

/// Connections kept in detail; beyond, only the aggregates count them
/// ([`CmTable::connections_dropped`]).
pub const MAX_CONNECTIONS: usize = 65_536;

/// One connection.
#[derive(Debug, Clone)]
pub struct Connection {
    /// The side that sent the REQ.
    pub active: Endpoint,
    /// The side it was sent to.
    pub passive: Endpoint,
    /// The REQ's local communication ID.
    pub active_comm_id: u32,
    /// The REP's local communication ID.
    pub passive_comm_id: Option<u32>,
    /// The REQ's service ID.
    pub service_id: u64,
    /// The REQ's local QPN (the active side's QP).
    pub active_qpn: u32,
    /// The REP's local QPN (the passive side's QP).
    pub passive_qpn: Option<u32>,
    /// Frame number of the REQ.
    pub frame: u64,
    /// Times (seconds since the capture's start) of the first of each message.
    pub req: f64,
    /// REP.
    pub rep: Option<f64>,
    /// RTU.
    pub rtu: Option<f64>,
    /// DREQ.
    pub dreq: Option<f64>,
    /// DREP.
    pub drep: Option<f64>,
    /// REJ: time and reason.
    pub rej: Option<(f64, u16)>,
    /// MRAs.
    pub mras: u64,
    /// Copies of a message after the first (REQ, REP, RTU, DREQ, DREP re-sent).
    pub resends: u64,
}

impl Connection {
    /// Where it ended up.
    pub fn state(&self) -> &'static str {
        if self.rej.is_some() {
            "rejected"
        } else if self.drep.is_some() {
            "closed"
        } else if self.dreq.is_some() {
            "closing"
        } else if self.rtu.is_some() {
            "established"
        } else if self.rep.is_some() {
            "replied"
        } else {
            "requested"
        }
    }
}

/// Every CM exchange.
#[derive(Debug, Default)]
pub struct CmTable {
    /// Connections, in REQ order.
    pub connections: Vec<Connection>,
    ids: HashMap<(Endpoint, u32), usize>,
    /// Connections (and SIDR requests waiting) past [`MAX_CONNECTIONS`].
    pub connections_dropped: u64,
    /// CM messages whose connection was not found (its REQ is before the capture).
    pub unmatched: u64,
    /// CM messages by attribute name.
    pub messages: BTreeMap<&'static str, u64>,
    /// REQ → REP over every connection.
    pub req_rep: Latency,
    /// REP → RTU.
    pub rep_rtu: Latency,
    /// DREQ → DREP.
    pub dreq_drep: Latency,
    /// REJs by reason code.
    pub rej_reasons: BTreeMap<u16, u64>,
    sidr_open: HashMap<(Endpoint, u32), f64>,
    /// SIDR REQs.
    pub sidr_requests: u64,
    /// SIDR REPs by status.
    pub sidr_replies: BTreeMap<u8, u64>,
    /// SIDR REQ → REP.
    pub sidr_latency: Latency,
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be24(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([0, b[at], b[at + 1], b[at + 2]])
}

/// The two QPs a REQ and its REP connected: (active side, its QPN, passive side, its QPN).
pub type QpPair = (Endpoint, u32, Endpoint, u32);

/// The REJ reason's name.
pub fn rej_reason_name(code: u16) -> String {
    format!("{:?}", RejReason::from(code))
}

fn first(slot: &mut Option<f64>, t: f64, resends: &mut u64) -> bool {
    if slot.is_some() {
        *resends += 1;
        false
    } else {
        *slot = Some(t);
        true
    }
}

impl CmTable {
    /// Account one CM MAD (256 bytes: the caller checks) from `src` to `dst`; the first REP
    /// of a connection returns the QPs it connected.
    pub fn mad(
        &mut self,
        src: Endpoint,
        dst: Endpoint,
        m: &[u8],
        t: f64,
        frame: u64,
        note: &mut Note,
    ) -> Option<QpPair> {
        let a = u16::from_be_bytes([m[16], m[17]]);
        *self.messages.entry(attr::name(a)).or_default() += 1;
        let d = &m[24..];
        let (local, remote) = (be32(d, 0), be32(d, 4));
        let find = |s: &Self| s.ids.get(&(src, local)).or_else(|| s.ids.get(&(dst, remote))).copied();
        let mut connected = None;
        match a {
            attr::REQ => {
                if let Some(&i) = self.ids.get(&(src, local)) {
                    self.connections[i].resends += 1;
                    note.add("REQ re-sent");
                    return None;
                }
                if self.connections.len() >= MAX_CONNECTIONS {
                    self.connections_dropped += 1;
                    return None;
                }
                let service_id = u64::from_be_bytes(d[8..16].try_into().unwrap_or([0; 8]));
                self.connections.push(Connection {
                    active: src,
                    passive: dst,
                    active_comm_id: local,
                    passive_comm_id: None,
                    service_id,
                    active_qpn: be24(d, roce_wire::cm::req::field::LOCAL_QPN.start),
                    passive_qpn: None,
                    frame,
                    req: t,
                    rep: None,
                    rtu: None,
                    dreq: None,
                    drep: None,
                    rej: None,
                    mras: 0,
                    resends: 0,
                });
                self.ids.insert((src, local), self.connections.len() - 1);
            }
            attr::SIDR_REQ => {
                self.sidr_requests += 1;
                if self.sidr_open.len() < MAX_CONNECTIONS {
                    self.sidr_open.insert((src, local), t);
                } else {
                    self.connections_dropped += 1;
                }
            }
            attr::SIDR_REP => {
                let status = d[4];
                *self.sidr_replies.entry(status).or_default() += 1;
                if let Some(t0) = self.sidr_open.remove(&(dst, local)) {
                    self.sidr_latency.add(t - t0);
                    let _ = write!(note.text(), "SIDR REP status {status} after {:.1} µs", (t - t0) * 1e6);
                }
            }
            attr::REP | attr::RTU | attr::DREQ | attr::DREP | attr::REJ | attr::MRA => {
                let Some(i) = find(self) else {
                    self.unmatched += 1;
                    return None;
                };
                let c = &mut self.connections[i];
                match a {
                    attr::REP => {
                        if first(&mut c.rep, t, &mut c.resends) {
                            c.passive_comm_id = Some(local);
                            let qpn = be24(d, roce_wire::cm::rep::field::LOCAL_QPN.start);
                            c.passive_qpn = Some(qpn);
                            connected = Some((c.active, c.active_qpn, c.passive, qpn));
                            self.ids.insert((src, local), i);
                            self.req_rep.add(t - c.req);
                            let _ =
                                write!(note.text(), "REP {:.1} µs after REQ (frame {})", (t - c.req) * 1e6, c.frame);
                        }
                    }
                    attr::RTU => {
                        if first(&mut c.rtu, t, &mut c.resends) {
                            if let Some(rep) = c.rep {
                                self.rep_rtu.add(t - rep);
                            }
                        }
                    }
                    attr::DREQ => {
                        first(&mut c.dreq, t, &mut c.resends);
                    }
                    attr::DREP => {
                        if first(&mut c.drep, t, &mut c.resends) {
                            if let Some(dreq) = c.dreq {
                                self.dreq_drep.add(t - dreq);
                                let _ = write!(note.text(), "DREP {:.1} µs after DREQ", (t - dreq) * 1e6);
                            }
                        }
                    }
                    attr::REJ => {
                        let reason = u16::from_be_bytes([d[10], d[11]]);
                        if c.rej.is_none() {
                            c.rej = Some((t, reason));
                            *self.rej_reasons.entry(reason).or_default() += 1;
                        } else {
                            c.resends += 1;
                        }
                        let _ = write!(note.text(), "REJ reason {reason} ({})", rej_reason_name(reason));
                    }
                    _ => c.mras += 1,
                }
            }
            _ => {}
        }
        connected
    }
}
