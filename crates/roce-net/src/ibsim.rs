//! A client of ibsim, the InfiniBand fabric simulator of linux-rdma (Debian `ibsim-utils`), in
//! pure Rust: it attaches to one simulated port the way `libumad2sim.so` (the `LD_PRELOAD`
//! shim behind `ibsim-run`) does, and sends and receives whole 256-byte MADs through the
//! simulated fabric, to OpenSM's SA or to the simulated SMAs.
//!
//! # The sim protocol (ibsim 0.10, as learnt from `include/ibsim.h`, `ibsim/ibsim.c`,
//! `ibsim/sim_mad.c` and `umad2sim/sim_client.c`)
//!
//! Everything is `AF_UNIX` datagram sockets in the **abstract** namespace, named after a base
//! name: `sim` unless the environment variable `IBSIM_SOCKNAME` says otherwise (the server and
//! the shim both read it, so several simulators can run side by side). Every abstract name
//! includes the C string's terminating NUL (`"\0sim:ctl\0"`, as `/proc/net/unix` shows with
//! `@sim:ctl@`); a name without it is another socket.
//!
//! - `@BASE:ctl` (server): the control socket. A client binds its own `@BASE:ctlID`, connects
//!   to it and exchanges fixed 80-byte `struct sim_ctl { u32 magic = 0xdeadbeef, u32 clientid,
//!   u32 type, u32 len, u8 data[64] }` (host byte order) request/reply pairs; a reply whose type
//!   is 0 (`SIM_CTL_ERROR`) is a refusal.
//! - `SIM_CTL_CONNECT` (1) carries `struct sim_client_info { u32 id, u32 qp, u32 issm, char
//!   nodeid[32] }`: `id` is the caller's connection id (the shim uses its pid), `nodeid` the node
//!   to attach to as named in the net file (empty: the sim's default port, the first one in the
//!   file, which is where OpenSM attaches). Before answering, the server connects its data
//!   socket `@BASE:outN` to the client's `@BASE:inID` (which must already be bound); the reply
//!   holds the client number N (0..10, at most 10 clients) in `id` and the node's name in
//!   `nodeid`. `SIM_CTL_DISCONNECT` (2) frees the slot.
//! - `SIM_CTL_GET_NODEINFO` (7) and `SIM_CTL_GET_PORTINFO` (8, `data[0]` = port number, 0 for
//!   the client's own port) answer with the first 64 bytes of the SMA's NodeInfo and PortInfo
//!   attributes (big-endian, as on the wire). This is how the port's LID (PortInfo 16..18), the
//!   SM's LID (MasterSMLID, 18..20), the port state (byte 32, bits 3:0) and the GID prefix
//!   (8..16) are learnt; the port GUID is the NodeGUID (NodeInfo 12..20) plus the port number
//!   (PortInfo LocalPortNum, byte 28), as the shim computes it for its fake sysfs (the sim's own
//!   NodeInfo SMP answers with the same PortGUID; [`IbsimClient::smp_get`] asks it).
//! - Data: the client's `@BASE:inID`, connected to `@BASE:outN`, carries 288-byte
//!   `struct sim_request { u32 dlid, u32 slid, u32 dqp, u32 sqp, u32 status, (4 bytes pad),
//!   u64 length, u8 mad[256] }` in both directions. `dlid`/`slid` hold `htons(lid)` in a host
//!   `u32` (network order in the first two bytes on little-endian hosts), `dqp`/`sqp`/`status`
//!   are big-endian (`htonl`), `length` big-endian (`htobe64`, 256). A `slid` of 0 is filled in
//!   by the sim with the sender's LID; `dlid` 0xFFFF (with `slid` 0xFFFF) means directed route.
//! - Routing: the sim routes by LID through the switches' forwarding tables that OpenSM
//!   programmed. At the destination port it answers SMPs (class 0x01/0x81) and PerfMgt itself;
//!   anything else goes to a client attached to that port: a request to QP 0/1 to the port's SM
//!   client (`issm`), a MAD to QP > 1 to the client that registered that QP, and a response to
//!   the client whose number is in the TID's upper 16 bits: **the sim overwrites bits 63..48 of
//!   every request's TID with the sender's client number** (`update_trid`), so responses come
//!   back with those bits changed ([`IbsimClient::new_tid`] puts the client number there from
//!   the start; [`IbsimClient::request`] matches the low 48 bits). A MAD the sim cannot deliver
//!   (no route, nobody at the destination, a dead client) comes back to its sender with
//!   `status` = `htonl(110)` (ETIMEDOUT).
//! - Management classes: umad's agent registration (`IB_USER_MAD_REGISTER_AGENT`) stays inside
//!   the shim, which sorts what it reads by class; the sim itself knows no classes. So there is
//!   nothing to register: this client (connected with `qp` 0, `issm` 0) receives the responses to
//!   its own requests of any class (SA, SMP, PerfMgt), and nobody's requests.
//!
//! Linux only (abstract unix sockets).
#![cfg(target_os = "linux")]

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use roce_wire::Gid;

/// The socket base name when neither the options nor `IBSIM_SOCKNAME` give one.
pub const DEFAULT_SOCKNAME: &str = "sim";
/// The environment variable ibsim and `libumad2sim.so` read for the socket base name.
pub const SOCKNAME_ENV: &str = "IBSIM_SOCKNAME";
/// The environment variable `libumad2sim.so` reads for the node to attach to.
pub const SIM_HOST_ENV: &str = "SIM_HOST";
/// A MAD's size.
pub const MAD_LEN: usize = 256;
/// `sizeof(struct sim_request)`.
pub const SIM_REQUEST_LEN: usize = 288;
/// `sizeof(struct sim_ctl)`.
const SIM_CTL_LEN: usize = 80;
const SIM_CTL_DATA_LEN: usize = 64;
const SIM_MAGIC: u32 = 0xdead_beef;
/// The most clients one ibsim serves (`IBSIM_MAX_CLIENTS`).
pub const MAX_CLIENTS: u32 = 10;
/// The longest abstract socket name (`sun_path` less its leading NUL).
const ABSTRACT_NAME_MAX: usize = 107;
/// The status ibsim puts in a MAD it could not deliver (`htonl(110)`, ETIMEDOUT).
pub const STATUS_DROPPED: u32 = 110;

// enum SIM_CTL_TYPES
const CTL_ERROR: u32 = 0;
const CTL_CONNECT: u32 = 1;
const CTL_DISCONNECT: u32 = 2;
const CTL_GET_NODEINFO: u32 = 7;
const CTL_GET_PORTINFO: u32 = 8;

const NODE_TYPE_CA: u8 = 1;
const NODE_TYPE_SWITCH: u8 = 2;

/// PortInfo PortState values (PortInfo byte 32, bits 3:0).
pub mod port_state {
    /// Down.
    pub const DOWN: u8 = 1;
    /// Initialize.
    pub const INIT: u8 = 2;
    /// Armed.
    pub const ARMED: u8 = 3;
    /// Active: the SM has configured the port.
    pub const ACTIVE: u8 = 4;
}

/// Which simulated node to attach to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum IbsimNode {
    /// `$SIM_HOST` when set (as the shim does); else the sim's default port (the first port of
    /// the net file) when it is an HCA's; else the first HCA found walking the fabric from
    /// there ([`IbsimClient::walk_fabric`]: breadth first, switch ports in ascending order). In
    /// ibsim's examples the default port is a switch's port 0, where OpenSM attaches.
    #[default]
    Default,
    /// The node named so in the net file (`Hca 1 "Hca1"` ▶ `"Hca1"`).
    Name(String),
    /// The node with this NodeGUID, found by walking the fabric and attached to by its
    /// NodeDescription (the sim attaches by name only).
    Guid(u64),
}

/// How to connect: [`IbsimClient::connect`].
#[derive(Debug, Clone)]
pub struct IbsimOptions {
    /// The socket base name; `None`: `$IBSIM_SOCKNAME`, else `sim`.
    pub sockname: Option<String>,
    /// The node to attach to.
    pub node: IbsimNode,
    /// How long to wait for each control reply (default 2 s).
    pub ctl_timeout: Duration,
    /// When set, [`IbsimClient::connect`] also waits up to this long until the SM has made the
    /// port Active and given it a LID ([`IbsimClient::wait_active`]).
    pub wait_active: Option<Duration>,
}

impl Default for IbsimOptions {
    fn default() -> Self {
        IbsimOptions {
            sockname: None,
            node: IbsimNode::Default,
            ctl_timeout: Duration::from_secs(2),
            wait_active: None,
        }
    }
}

impl IbsimOptions {
    /// Options to attach to the node named `name` in the net file.
    pub fn node(name: &str) -> IbsimOptions {
        IbsimOptions { node: IbsimNode::Name(name.to_string()), ..IbsimOptions::default() }
    }

    /// The same options with this socket base name.
    pub fn with_sockname(mut self, sockname: &str) -> IbsimOptions {
        self.sockname = Some(sockname.to_string());
        self
    }

    /// The same options, waiting up to `timeout` for the port to be Active with a LID.
    pub fn with_wait_active(mut self, timeout: Duration) -> IbsimOptions {
        self.wait_active = Some(timeout);
        self
    }

    fn resolved_sockname(&self) -> String {
        match &self.sockname {
            Some(s) => s.clone(),
            None => std::env::var(SOCKNAME_ENV).ok().filter(|s| !s.is_empty()).unwrap_or(DEFAULT_SOCKNAME.to_string()),
        }
    }
}

/// One `struct sim_request`: a MAD with its addressing, decoded to host values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimPacket {
    /// Destination LID (0xFFFF: directed route / permissive).
    pub dlid: u16,
    /// Source LID (0 on send: the sim fills in the sender's LID).
    pub slid: u16,
    /// Destination QP.
    pub dqp: u32,
    /// Source QP.
    pub sqp: u32,
    /// 0, or [`STATUS_DROPPED`] when the sim returns a MAD it could not deliver.
    pub status: u32,
    /// The MAD's length (256).
    pub length: u64,
    /// The MAD.
    pub mad: [u8; MAD_LEN],
}

impl SimPacket {
    /// The 288 bytes ibsim exchanges.
    pub fn to_bytes(&self) -> [u8; SIM_REQUEST_LEN] {
        let mut b = [0u8; SIM_REQUEST_LEN];
        b[0..4].copy_from_slice(&u32::from(self.dlid.to_be()).to_ne_bytes());
        b[4..8].copy_from_slice(&u32::from(self.slid.to_be()).to_ne_bytes());
        b[8..12].copy_from_slice(&self.dqp.to_be_bytes());
        b[12..16].copy_from_slice(&self.sqp.to_be_bytes());
        b[16..20].copy_from_slice(&self.status.to_be_bytes());
        b[24..32].copy_from_slice(&self.length.to_be_bytes());
        b[32..].copy_from_slice(&self.mad);
        b
    }

    /// Decode the 288 bytes of a `struct sim_request`.
    pub fn from_bytes(b: &[u8]) -> io::Result<SimPacket> {
        if b.len() != SIM_REQUEST_LEN {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("ibsim: a sim_request is {SIM_REQUEST_LEN} bytes, got a datagram of {}", b.len()),
            ));
        }
        let u32_at = |o: usize| [b[o], b[o + 1], b[o + 2], b[o + 3]];
        let lid = |o: usize| u16::from_be(u32::from_ne_bytes(u32_at(o)) as u16);
        let mut mad = [0u8; MAD_LEN];
        mad.copy_from_slice(&b[32..]);
        let mut len = [0u8; 8];
        len.copy_from_slice(&b[24..32]);
        Ok(SimPacket {
            dlid: lid(0),
            slid: lid(4),
            dqp: u32::from_be_bytes(u32_at(8)),
            sqp: u32::from_be_bytes(u32_at(12)),
            status: u32::from_be_bytes(u32_at(16)),
            length: u64::from_be_bytes(len),
            mad,
        })
    }

    /// The MAD's TransactionID.
    pub fn tid(&self) -> u64 {
        let mut t = [0u8; 8];
        t.copy_from_slice(&self.mad[8..16]);
        u64::from_be_bytes(t)
    }
}

/// A client attached to one simulated port: see the module documentation.
///
/// Dropping it disconnects from the sim (which serves at most 10 clients).
#[derive(Debug)]
pub struct IbsimClient {
    ctl: UnixDatagram,
    data: UnixDatagram,
    sockname: String,
    conn_id: u32,
    client_id: u32,
    node_id: String,
    node_info: [u8; SIM_CTL_DATA_LEN],
    port_info: [u8; SIM_CTL_DATA_LEN],
    ctl_timeout: Duration,
    next_tid: u64,
}

static CONN_SEQ: AtomicU32 = AtomicU32::new(0);

fn abstract_addr(name: &str) -> io::Result<SocketAddr> {
    // "\0NAME\0": ibsim 0.10 and its shim include the string's terminating NUL in the address.
    let mut bytes = name.as_bytes().to_vec();
    bytes.push(0);
    if bytes.len() > ABSTRACT_NAME_MAX {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("ibsim: socket name {name:?} is too long")));
    }
    SocketAddr::from_abstract_name(bytes)
}

fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

fn ctl_exchange(
    sock: &UnixDatagram,
    sockname: &str,
    client_id: u32,
    kind: u32,
    data: &[u8],
) -> io::Result<Option<[u8; SIM_CTL_DATA_LEN]>> {
    let mut req = [0u8; SIM_CTL_LEN];
    req[0..4].copy_from_slice(&SIM_MAGIC.to_ne_bytes());
    req[4..8].copy_from_slice(&client_id.to_ne_bytes());
    req[8..12].copy_from_slice(&kind.to_ne_bytes());
    req[12..16].copy_from_slice(&(data.len() as u32).to_ne_bytes());
    req[16..16 + data.len()].copy_from_slice(data);
    sock.send(&req).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("ibsim: control request to @{sockname}:ctl failed: {e} (is ibsim still running?)"),
        )
    })?;
    let mut rep = [0u8; SIM_CTL_LEN + 16];
    loop {
        let n = match sock.recv(&mut rep) {
            Ok(n) => n,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "ibsim: no answer on @{sockname}:ctl to control request {kind} (is ibsim running, \
                         started with -s so that its network is up?)"
                    ),
                ))
            }
            Err(e) => return Err(io::Error::new(e.kind(), format!("ibsim: reading @{sockname}:ctl: {e}"))),
        };
        if n != SIM_CTL_LEN || rep[0..4] != SIM_MAGIC.to_ne_bytes() {
            continue; // not a sim_ctl reply: ignore it
        }
        if u32::from_ne_bytes([rep[8], rep[9], rep[10], rep[11]]) == CTL_ERROR {
            return Ok(None);
        }
        let mut out = [0u8; SIM_CTL_DATA_LEN];
        out.copy_from_slice(&rep[16..SIM_CTL_LEN]);
        return Ok(Some(out));
    }
}

impl IbsimClient {
    /// Attach to a simulated port: bind this client's sockets, connect to the sim's control
    /// socket, ask for a client slot at the chosen node, connect the data socket, and read the
    /// port's NodeInfo and PortInfo. Errors name the socket and say what to check when the sim
    /// is not running or refuses the node.
    pub fn connect(opts: &IbsimOptions) -> io::Result<IbsimClient> {
        match &opts.node {
            IbsimNode::Name(name) => Self::connect_named(opts, Some(name)),
            IbsimNode::Guid(guid) => {
                let mut probe = Self::connect_named(opts, None)?;
                if probe.node_guid() == *guid {
                    return Ok(probe);
                }
                let found = probe.walk_fabric(|n| n.node_guid == *guid)?;
                drop(probe);
                let Some(node) = found else {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("ibsim: no node with NodeGUID {guid:#018x} is reachable in the simulated fabric"),
                    ));
                };
                Self::connect_found(opts, &node)
            }
            IbsimNode::Default => {
                if let Some(host) = std::env::var(SIM_HOST_ENV).ok().filter(|s| !s.is_empty()) {
                    return Self::connect_named(opts, Some(&host));
                }
                let mut probe = Self::connect_named(opts, None)?;
                if probe.node_type() == NODE_TYPE_CA {
                    return Ok(probe);
                }
                let found = probe.walk_fabric(|n| n.node_type == NODE_TYPE_CA)?;
                drop(probe);
                let Some(node) = found else {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        "ibsim: the simulated fabric has no HCA reachable from its default port",
                    ));
                };
                Self::connect_found(opts, &node)
            }
        }
    }

    /// Attach to a node found by [`IbsimClient::walk_fabric`], by its NodeDescription (ibsim
    /// describes a node by its net-file name unless the file gives a description).
    fn connect_found(opts: &IbsimOptions, node: &FabricNode) -> io::Result<IbsimClient> {
        let c = Self::connect_named(opts, Some(&node.description)).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "ibsim: found NodeGUID {:#018x} described as {:?}, but cannot attach by that name: {e}",
                    node.node_guid, node.description
                ),
            )
        })?;
        if c.node_guid() != node.node_guid {
            return Err(crate::NetError::NodeGuid {
                description: node.description.clone(),
                found: c.node_guid(),
                expected: node.node_guid,
            }
            .into());
        }
        Ok(c)
    }

    /// Walk the simulated fabric breadth first from this client's port with directed-route
    /// SubnGet(NodeInfo) and SubnGet(NodeDescription) SMPs (answered by the sim's SMAs, no SM
    /// needed), switch ports in ascending order, and return the first node `want` accepts.
    pub fn walk_fabric(&mut self, mut want: impl FnMut(&FabricNode) -> bool) -> io::Result<Option<FabricNode>> {
        let mut seen = std::collections::HashSet::new();
        let mut queue = std::collections::VecDeque::from([Vec::<u8>::new()]);
        while let Some(path) = queue.pop_front() {
            let Ok(info) = self.smp_get_dr(&path, 0x0011, 0) else {
                continue; // a port that is down or leads nowhere
            };
            let node_guid = be64(&info[12..20]);
            if !seen.insert(node_guid) {
                continue;
            }
            let desc = self.smp_get_dr(&path, 0x0010, 0)?;
            let end = desc.iter().position(|&b| b == 0).unwrap_or(desc.len());
            let node = FabricNode {
                path: path.clone(),
                node_type: info[2],
                num_ports: info[3],
                node_guid,
                port_guid: be64(&info[20..28]),
                description: String::from_utf8_lossy(&desc[..end]).into_owned(),
            };
            if want(&node) {
                return Ok(Some(node));
            }
            // Switches forward directed routes; a CA only from the start of the path.
            if (node.node_type == NODE_TYPE_SWITCH || path.is_empty()) && path.len() < 63 {
                for port in 1..=node.num_ports {
                    let mut next = path.clone();
                    next.push(port);
                    queue.push_back(next);
                }
            }
        }
        Ok(None)
    }

    fn connect_named(opts: &IbsimOptions, node: Option<&str>) -> io::Result<IbsimClient> {
        let sockname = opts.resolved_sockname();
        if let Some(n) = node {
            if n.len() >= 32 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("ibsim: node name {n:?} is longer than the sim's 31 bytes"),
                ));
            }
        }
        let server_ctl = abstract_addr(&format!("{sockname}:ctl"))?;
        // Our own names: @BASE:ctlID and @BASE:inID with an ID unique on this machine (the pid,
        // plus a per-process sequence number above the pid's 22 bits).
        let pid = std::process::id() & 0x3F_FFFF;
        let mut attempt = 0;
        let (ctl, data, conn_id) = loop {
            let seq = CONN_SEQ.fetch_add(1, Ordering::Relaxed) & 0x1FF;
            let id = pid | (seq << 22);
            let id = if id == 0 { 1 << 22 } else { id };
            let bound = UnixDatagram::bind_addr(&abstract_addr(&format!("{sockname}:ctl{id}"))?)
                .and_then(|c| Ok((c, UnixDatagram::bind_addr(&abstract_addr(&format!("{sockname}:in{id}"))?)?)));
            match bound {
                Ok((c, d)) => break (c, d, id),
                Err(e) if e.kind() == io::ErrorKind::AddrInUse && attempt < 32 => attempt += 1,
                Err(e) => return Err(io::Error::new(e.kind(), format!("ibsim: binding this client's sockets: {e}"))),
            }
        };
        ctl.connect_addr(&server_ctl).map_err(|e| {
            let kind = e.kind();
            let why = if matches!(kind, io::ErrorKind::ConnectionRefused | io::ErrorKind::NotFound) {
                format!(
                    "ibsim is not running: nothing listens on the abstract unix socket @{sockname}:ctl \
                     (start `ibsim -s NETFILE` with {SOCKNAME_ENV}={sockname}; {e})"
                )
            } else {
                format!("ibsim: cannot connect to @{sockname}:ctl: {e}")
            };
            io::Error::new(kind, why)
        })?;
        ctl.set_read_timeout(Some(opts.ctl_timeout.max(Duration::from_millis(1))))?;

        // SIM_CTL_CONNECT with struct sim_client_info { id, qp, issm, nodeid[32] }.
        let mut info = [0u8; 44];
        info[0..4].copy_from_slice(&conn_id.to_ne_bytes());
        if let Some(n) = node {
            info[12..12 + n.len()].copy_from_slice(n.as_bytes());
        }
        let reply = ctl_exchange(&ctl, &sockname, 0, CTL_CONNECT, &info)?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "ibsim @{sockname}:ctl refused the connection: no node {:?} in its net file, or all {MAX_CLIENTS} \
                     client slots are taken",
                    node.unwrap_or("(default)")
                ),
            )
        })?;
        let client_id = u32::from_ne_bytes([reply[0], reply[1], reply[2], reply[3]]);
        let name_bytes = &reply[12..44];
        let end = name_bytes.iter().position(|&b| b == 0).unwrap_or(name_bytes.len());
        let node_id = String::from_utf8_lossy(&name_bytes[..end]).into_owned();
        let mut client = IbsimClient {
            ctl,
            data,
            sockname: sockname.clone(),
            conn_id,
            client_id,
            node_id,
            node_info: [0; SIM_CTL_DATA_LEN],
            port_info: [0; SIM_CTL_DATA_LEN],
            ctl_timeout: opts.ctl_timeout,
            next_tid: 1,
        };
        // From here on, Drop disconnects.
        if client_id >= MAX_CLIENTS {
            return Err(crate::NetError::BadClient(client_id).into());
        }
        client.data.connect_addr(&abstract_addr(&format!("{sockname}:out{client_id}"))?).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("ibsim: cannot connect to the data socket @{sockname}:out{client_id}: {e}"),
            )
        })?;
        client.node_info = client.ctl(CTL_GET_NODEINFO, &[])?;
        client.refresh()?;
        if let Some(t) = opts.wait_active {
            client.wait_active(t)?;
        }
        Ok(client)
    }

    fn ctl(&self, kind: u32, data: &[u8]) -> io::Result<[u8; SIM_CTL_DATA_LEN]> {
        ctl_exchange(&self.ctl, &self.sockname, self.client_id, kind, data)?.ok_or_else(|| {
            crate::NetError::CtlRefused { sockname: self.sockname.clone(), kind, client: self.client_id }.into()
        })
    }

    /// Read the port's PortInfo again (LID, SM LID, state and GID prefix change when the SM
    /// sweeps).
    pub fn refresh(&mut self) -> io::Result<()> {
        self.port_info = self.ctl(CTL_GET_PORTINFO, &[0])?;
        Ok(())
    }

    /// Wait until the port is Active with a LID and an SM LID (OpenSM has swept the fabric),
    /// re-reading PortInfo every 50 ms; [`io::ErrorKind::TimedOut`] after `timeout`.
    pub fn wait_active(&mut self, timeout: Duration) -> io::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            self.refresh()?;
            if self.port_state() == port_state::ACTIVE && self.port_lid() != 0 && self.sm_lid() != 0 {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "ibsim: port of node {:?} still in state {} with LID {} and SM LID {} after {:?}: is an SM \
                         (OpenSM under ibsim-run) running on this fabric?",
                        self.node_id,
                        self.port_state(),
                        self.port_lid(),
                        self.sm_lid(),
                        timeout
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The socket base name in use.
    pub fn sockname(&self) -> &str {
        &self.sockname
    }

    /// The client number the sim gave us (0..10).
    pub fn client_id(&self) -> u32 {
        self.client_id
    }

    /// The connection id this client sent (its sockets are `@BASE:ctlID` and `@BASE:inID`).
    pub fn conn_id(&self) -> u32 {
        self.conn_id
    }

    /// The node's name in the net file.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// The NodeInfo attribute (first 64 bytes, wire order) as the sim reported it at connect.
    pub fn node_info(&self) -> &[u8; 64] {
        &self.node_info
    }

    /// The PortInfo attribute (first 64 bytes, wire order) as last read.
    pub fn port_info(&self) -> &[u8; 64] {
        &self.port_info
    }

    /// NodeType (1 CA, 2 switch, 3 router).
    pub fn node_type(&self) -> u8 {
        self.node_info[2]
    }

    /// The NodeGUID.
    pub fn node_guid(&self) -> u64 {
        be64(&self.node_info[12..20])
    }

    /// The port number (PortInfo LocalPortNum).
    pub fn port_num(&self) -> u8 {
        self.port_info[28]
    }

    /// The port GUID: NodeGUID + port number, as the sim's SMA reports it in NodeInfo.PortGUID
    /// (a switch's port 0 has the NodeGUID).
    pub fn port_guid(&self) -> u64 {
        self.node_guid().wrapping_add(u64::from(self.port_num()))
    }

    /// The port's LID (PortInfo LID; 0 until the SM assigns one).
    pub fn port_lid(&self) -> u16 {
        u16::from_be_bytes([self.port_info[16], self.port_info[17]])
    }

    /// The SM's LID (PortInfo MasterSMLID; 0 until an SM has configured the port).
    pub fn sm_lid(&self) -> u16 {
        u16::from_be_bytes([self.port_info[18], self.port_info[19]])
    }

    /// PortInfo PortState ([`port_state`]).
    pub fn port_state(&self) -> u8 {
        self.port_info[32] & 0x0F
    }

    /// The GID prefix the SM configured (PortInfo GidPrefix).
    pub fn gid_prefix(&self) -> u64 {
        be64(&self.port_info[8..16])
    }

    /// The port's GID 0: GidPrefix ‖ port GUID.
    pub fn port_gid(&self) -> Gid {
        Gid::from_parts(self.gid_prefix(), self.port_guid())
    }

    /// A TransactionID for a new request: the sim's client number in bits 63..48 (the sim puts
    /// it there anyway and routes the response by it), the low 16 bits of our connection id in
    /// bits 47..32, and a counter in bits 31..0.
    pub fn new_tid(&mut self) -> u64 {
        let t = (u64::from(self.client_id) << 48)
            | (u64::from(self.conn_id & 0xFFFF) << 32)
            | (self.next_tid & 0xFFFF_FFFF);
        self.next_tid = self.next_tid.wrapping_add(1);
        t
    }

    /// Send one packet as it is (see [`SimPacket`]).
    pub fn send_packet(&self, p: &SimPacket) -> io::Result<()> {
        let b = p.to_bytes();
        let n = self.data.send(&b).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "ibsim: sending on @{}:in{} failed: {e} (is ibsim still running?)",
                    self.sockname, self.conn_id
                ),
            )
        })?;
        if n != b.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("ibsim: short send ({n} of {} bytes)", b.len()),
            ));
        }
        Ok(())
    }

    /// Send a MAD to `dlid` (0xFFFF: directed route) and QP `dqp`, from QP 0 for SMPs (class
    /// 0x01/0x81) and QP 1 otherwise; the sim fills in our LID as the source.
    pub fn send_mad(&self, dlid: u16, dqp: u32, mad: &[u8; MAD_LEN]) -> io::Result<()> {
        let sqp = if matches!(mad[1], 0x01 | 0x81) { 0 } else { 1 };
        self.send_packet(&SimPacket {
            dlid,
            slid: if dlid == 0xFFFF { 0xFFFF } else { 0 },
            dqp,
            sqp,
            status: 0,
            length: MAD_LEN as u64,
            mad: *mad,
        })
    }

    /// Receive one packet, whatever its status: wait up to `timeout` (`None`: without limit;
    /// zero: do not wait). `Ok(None)` when none came.
    pub fn recv_packet(&self, timeout: Option<Duration>) -> io::Result<Option<SimPacket>> {
        let mut buf = [0u8; SIM_REQUEST_LEN + 64];
        let res = match timeout {
            Some(t) if t.is_zero() => {
                self.data.set_nonblocking(true)?;
                let r = self.data.recv(&mut buf);
                self.data.set_nonblocking(false)?;
                r
            }
            t => {
                self.data.set_read_timeout(t)?;
                self.data.recv(&mut buf)
            }
        };
        match res {
            Ok(n) => SimPacket::from_bytes(&buf[..n]).map(Some),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => Ok(None),
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!(
                    "ibsim: receiving on @{}:in{} failed: {e} (is ibsim still running?)",
                    self.sockname, self.conn_id
                ),
            )),
        }
    }

    /// Receive one MAD: `(slid, sqp, mad)`, waiting up to `timeout` (`None`: without limit;
    /// zero: do not wait). A MAD of ours that the sim could not deliver (no route, or no client
    /// for it at the destination) comes back as an error naming its TID.
    pub fn recv_mad(&self, timeout: Option<Duration>) -> io::Result<Option<(u16, u32, [u8; MAD_LEN])>> {
        Ok(self.recv_mad_len(timeout)?.map(|(slid, sqp, mad, _)| (slid, sqp, mad)))
    }

    /// [`IbsimClient::recv_mad`] with the length the sim carried (the sender's umad length,
    /// at most 256: OpenSM's answers say how much of the 256 bytes is message).
    pub fn recv_mad_len(&self, timeout: Option<Duration>) -> io::Result<Option<ReceivedMad>> {
        match self.recv_packet(timeout)? {
            None => Ok(None),
            Some(p) if p.status != 0 => Err(io::Error::new(
                io::ErrorKind::HostUnreachable,
                format!(
                    "ibsim could not deliver our MAD (class {:#04x}, method {:#04x}, TID {:#018x}) to LID {}: status {} \
                     (no route, or no client for it at the destination)",
                    p.mad[1],
                    p.mad[3],
                    p.tid(),
                    p.dlid,
                    p.status
                ),
            )),
            Some(p) => Ok(Some((p.slid, p.sqp, p.mad, usize::try_from(p.length).unwrap_or(MAD_LEN).min(MAD_LEN)))),
        }
    }

    /// Send a request and wait up to `timeout` for its response: the first response MAD whose
    /// TID matches in bits 47..0 (the sim rewrites bits 63..48). Other MADs that arrive
    /// meanwhile are dropped.
    pub fn request(&self, dlid: u16, dqp: u32, mad: &[u8; MAD_LEN], timeout: Duration) -> io::Result<[u8; MAD_LEN]> {
        const LOW48: u64 = 0xFFFF_FFFF_FFFF;
        let tid = be64(&mad[8..16]);
        self.send_mad(dlid, dqp, mad)?;
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("ibsim: no response to TID {tid:#018x} from LID {dlid} within {timeout:?}"),
                ));
            }
            if let Some((_, _, resp)) = self.recv_mad(Some(left))? {
                if be64(&resp[8..16]) & LOW48 == tid & LOW48 && resp[3] & 0x80 != 0 {
                    return Ok(resp);
                }
            }
        }
    }

    /// Ask this port's simulated SMA for an attribute with a directed-route SubnGet (hop count
    /// 0, so it stays on our port), as `umad_get_port`-style tools do: returns the 64 bytes of
    /// SMP data (NodeInfo 0x0011, PortInfo 0x0015, ...) or an error with the SMP status.
    pub fn smp_get(&mut self, attribute_id: u16, attribute_modifier: u32) -> io::Result<[u8; 64]> {
        self.smp_get_dr(&[], attribute_id, attribute_modifier)
    }

    /// A directed-route SubnGet along `path` (the out-port of each hop; at most 63 hops) to the
    /// SMA at its end: the 64 bytes of SMP data, or an error (SMP status, or the sim could not
    /// route it).
    pub fn smp_get_dr(&mut self, path: &[u8], attribute_id: u16, attribute_modifier: u32) -> io::Result<[u8; 64]> {
        if path.len() > 63 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "ibsim: a directed route has at most 63 hops"));
        }
        let mut mad = [0u8; MAD_LEN];
        mad[0] = 1; // BaseVersion
        mad[1] = 0x81; // directed-route SMP
        mad[2] = 1; // ClassVersion
        mad[3] = 0x01; // SubnGet
        mad[7] = path.len() as u8; // HopCount (HopPointer 0, direction outbound)
        let tid = self.new_tid();
        mad[8..16].copy_from_slice(&tid.to_be_bytes());
        mad[16..18].copy_from_slice(&attribute_id.to_be_bytes());
        mad[20..24].copy_from_slice(&attribute_modifier.to_be_bytes());
        mad[32..34].copy_from_slice(&0xFFFFu16.to_be_bytes()); // DrSLID: permissive
        mad[34..36].copy_from_slice(&0xFFFFu16.to_be_bytes()); // DrDLID: permissive
        mad[129..129 + path.len()].copy_from_slice(path); // InitialPath[1..=HopCount]
        let resp = self.request(0xFFFF, 0, &mad, self.ctl_timeout)?;
        let status = u16::from_be_bytes([resp[4], resp[5]]) & 0x7FFF;
        if status != 0 {
            return Err(crate::NetError::SmpStatus { attribute: attribute_id, path: path.to_vec(), status }.into());
        }
        let mut out = [0u8; 64];
        out.copy_from_slice(&resp[64..128]);
        Ok(out)
    }
}

/// A node found by [`IbsimClient::walk_fabric`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FabricNode {
    /// The directed route to it (out-port per hop).
    pub path: Vec<u8>,
    /// NodeType (1 CA, 2 switch, 3 router).
    pub node_type: u8,
    /// NumPorts.
    pub num_ports: u8,
    /// NodeGUID.
    pub node_guid: u64,
    /// PortGUID of the port the route entered by.
    pub port_guid: u64,
    /// NodeDescription (ibsim: the net file's name for it).
    pub description: String,
}

impl AsRawFd for IbsimClient {
    /// The data socket: readable when a MAD is waiting.
    fn as_raw_fd(&self) -> RawFd {
        self.data.as_raw_fd()
    }
}

impl AsFd for IbsimClient {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.data.as_fd()
    }
}

impl Drop for IbsimClient {
    fn drop(&mut self) {
        // Free the sim's client slot; best effort, briefly.
        let _ = self.ctl.set_read_timeout(Some(Duration::from_millis(200)));
        let _ = ctl_exchange(&self.ctl, &self.sockname, self.client_id, CTL_DISCONNECT, &[]);
    }
}

/// OpenSM's SA through ibsim as a [`crate::driver::SaLink`]: the stack's SA MADs go to the
/// SM's LID, QP 1. The sim overwrites bits 63..48 of a request's TID with its client number,
/// so the link keeps our TIDs by their low 48 bits and puts ours back into the responses.
pub struct IbsimSaLink {
    /// The sim client.
    pub client: IbsimClient,
    tids: std::collections::HashMap<u64, u64>,
}

impl IbsimSaLink {
    /// Carry SA MADs over `client`.
    pub fn new(client: IbsimClient) -> IbsimSaLink {
        IbsimSaLink { client, tids: Default::default() }
    }
}

impl crate::driver::SaLink for IbsimSaLink {
    fn send_sa_mad(&mut self, mad: &[u8; MAD_LEN]) -> io::Result<()> {
        let tid = be64(&mad[8..16]);
        self.tids.insert(tid & 0xFFFF_FFFF_FFFF, tid);
        self.client.send_mad(self.client.sm_lid(), 1, mad)
    }

    fn recv_sa_mad(&mut self) -> io::Result<Option<[u8; MAD_LEN]>> {
        let Some((_, _, mut mad, len)) = self.client.recv_mad_len(Some(Duration::ZERO))? else { return Ok(None) };
        // Past the sender's length the 256 bytes are not its message (OpenSM's answers leave
        // them as they were in its buffer): zeroed, so that they cannot read as records.
        mad[len.max(24)..].fill(0);
        if let Some(tid) = self.tids.remove(&(be64(&mad[8..16]) & 0xFFFF_FFFF_FFFF)) {
            mad[8..16].copy_from_slice(&tid.to_be_bytes());
        }
        Ok(Some(mad))
    }

    fn raw_fd(&self) -> Option<RawFd> {
        Some(self.client.as_raw_fd())
    }
}

/// A received MAD with what the sim says of it: `(slid, sqp, mad, length)`.
pub type ReceivedMad = (u16, u32, [u8; MAD_LEN], usize);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sim_request_layout() {
        let mut mad = [0u8; MAD_LEN];
        mad[0] = 1;
        mad[255] = 0xAB;
        let p = SimPacket { dlid: 0x0102, slid: 0xC003, dqp: 1, sqp: 0x00AB_CDEF, status: 0, length: 256, mad };
        let b = p.to_bytes();
        // dlid/slid: htons(lid) in a host u32: network order in the u16 the host reads.
        assert_eq!(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as u16, 0x0102u16.to_be());
        assert_eq!(&b[8..12], &[0, 0, 0, 1]);
        assert_eq!(&b[12..16], &[0, 0xAB, 0xCD, 0xEF]);
        assert_eq!(&b[24..32], &[0, 0, 0, 0, 0, 0, 1, 0]);
        assert_eq!(b[32], 1);
        assert_eq!(b[287], 0xAB);
        assert_eq!(SimPacket::from_bytes(&b).unwrap(), p);
        assert!(SimPacket::from_bytes(&b[..287]).is_err());
    }

    #[test]
    fn not_running_is_a_clear_error() {
        let opts =
            IbsimOptions { sockname: Some(format!("roce-no-such-sim-{}", std::process::id())), ..Default::default() };
        let e = IbsimClient::connect(&opts).unwrap_err();
        assert!(e.to_string().contains("ibsim is not running"), "{e}");
    }
}
