//! The sans-IO engine from Python: `Stack` (roce-cm's engine, driven by the caller's frames
//! and clock, or living on a `SimNet`) and `SimNet` (roce-net's simulated link with hosts and
//! an SA, as `roce demo` runs them). Time crosses as float seconds.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use roce_cm::event::EventParam;
use roce_cm::{CmEvent, CmId, ConnectParam, Errno, Instant, MulticastPaths, PortSpace, QpType, StackConfig, UdDest};
use roce_net::{LinkConfig, NodeId, SaHost, SimNet as Net};
use roce_wire::mcmember::JoinState;

use crate::convert::bytes_of;

fn errno(e: Errno) -> PyErr {
    PyOSError::new_err((e.value(), format!("{e}")))
}

fn instant(now: f64) -> PyResult<Instant> {
    if !now.is_finite() || now < 0.0 {
        return Err(PyValueError::new_err(format!("now: {now} is not a time (seconds from 0)")));
    }
    Ok(Instant::from_nanos((now * 1e9) as u64))
}

fn seconds(t: Instant) -> f64 {
    t.since_epoch().as_secs_f64()
}

fn duration(s: f64, what: &str) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s)
        .map_err(|_| PyValueError::new_err(format!("{what}: {s} is not a duration in seconds")))
}

fn parse_mac(s: &str) -> PyResult<[u8; 6]> {
    let parts: Vec<&str> = s.split(':').collect();
    let bad = || PyValueError::new_err(format!("mac: {s:?} is not six hex bytes like 02:00:00:00:00:01"));
    if parts.len() != 6 {
        return Err(bad());
    }
    let mut m = [0u8; 6];
    for (i, p) in parts.iter().enumerate() {
        m[i] = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    Ok(m)
}

fn parse_ip(s: &str, what: &str) -> PyResult<IpAddr> {
    s.parse().map_err(|_| PyValueError::new_err(format!("{what}: {s:?} is not an IPv4 or IPv6 address")))
}

fn join_state(s: &Bound<'_, PyAny>) -> PyResult<JoinState> {
    if let Ok(n) = s.extract::<u8>() {
        return Ok(JoinState(n));
    }
    let name: String = s.extract().map_err(|_| PyTypeError::new_err("join_state: an int or a name"))?;
    Ok(match name.as_str() {
        "FullMember" | "full" => JoinState::FULL_MEMBER,
        "NonMember" => JoinState::NON_MEMBER,
        "SendOnlyNonMember" => JoinState::SEND_ONLY_NON_MEMBER,
        "SendOnlyFullMember" => JoinState::SEND_ONLY_FULL_MEMBER,
        _ => {
            return Err(PyValueError::new_err(format!(
                "join_state: {name:?} is not FullMember, NonMember, SendOnlyNonMember or SendOnlyFullMember"
            )))
        }
    })
}

fn port_space(s: &str) -> PyResult<PortSpace> {
    Ok(match s {
        "udp" | "UDP" => PortSpace::Udp,
        "tcp" | "TCP" => PortSpace::Tcp,
        "ib" | "IB" => PortSpace::Ib,
        "ipoib" | "IPOIB" => PortSpace::Ipoib,
        _ => return Err(PyValueError::new_err(format!("port_space: {s:?} is not udp, tcp, ib or ipoib"))),
    })
}

fn qp_type(s: &str) -> PyResult<QpType> {
    Ok(match s {
        "ud" | "UD" => QpType::Ud,
        "rc" | "RC" => QpType::Rc,
        "uc" | "UC" => QpType::Uc,
        _ => return Err(PyValueError::new_err(format!("qp_type: {s:?} is not ud, rc or uc"))),
    })
}

/// Where to send a UD datagram: the address handle, remote QPN and Q_Key, as a
/// MULTICAST_JOIN or ESTABLISHED event gives it (`event["dest"]`).
#[pyclass(module = "roce", frozen)]
#[derive(Clone)]
pub struct UdDestination {
    dest: UdDest,
}

#[pymethods]
impl UdDestination {
    /// Remote QPN (0xFFFFFF for a group).
    #[getter]
    fn qp_num(&self) -> u32 {
        self.dest.remote_qpn
    }
    /// Remote Q_Key.
    #[getter]
    fn qkey(&self) -> u32 {
        self.dest.remote_qkey
    }
    /// Destination GID.
    #[getter]
    fn dgid(&self) -> String {
        self.dest.ah.dgid.to_string()
    }
    /// Destination MAC.
    #[getter]
    fn dmac(&self) -> String {
        let m = self.dest.ah.dmac;
        format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
    }
    fn __repr__(&self) -> String {
        format!(
            "UdDestination(dgid={}, dmac={}, qp_num=0x{:06x}, qkey=0x{:08x})",
            self.dgid(),
            self.dmac(),
            self.qp_num(),
            self.qkey()
        )
    }
}

/// An event as a dict: id, kind (the kernel's name without RDMA_CM_EVENT_), status, and what
/// the event carries.
fn event_dict<'py>(py: Python<'py>, e: &CmEvent) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("id", e.id.0)?;
    d.set_item("kind", e.kind.name())?;
    d.set_item("status", e.status)?;
    d.set_item("listen_id", e.listen_id.map(|l| l.0))?;
    match &e.param {
        EventParam::None => {}
        EventParam::Multicast { group, record, ud, sa_status } => {
            d.set_item("group", group.to_string())?;
            if let Some(r) = record {
                d.set_item("mlid", r.mlid)?;
                d.set_item("mtu", r.mtu)?;
                d.set_item("rate", r.rate)?;
                d.set_item("mgid", r.mgid.to_string())?;
                d.set_item("q_key", r.q_key)?;
            }
            if let Some(u) = ud {
                let dest = UdDest { ah: u.ah, remote_qpn: u.qp_num, remote_qkey: u.qkey };
                d.set_item("dest", UdDestination { dest })?;
            }
            d.set_item("sa_status", *sa_status)?;
        }
        EventParam::Ud(u) => {
            let dest = UdDest { ah: u.ah, remote_qpn: u.qp_num, remote_qkey: u.qkey };
            d.set_item("dest", UdDestination { dest })?;
        }
        EventParam::Conn(c) => {
            d.set_item("private_data", PyBytes::new(py, &c.private_data))?;
            d.set_item("remote_qpn", c.remote_qpn)?;
            d.set_item("responder_resources", c.responder_resources)?;
            d.set_item("initiator_depth", c.initiator_depth)?;
        }
    }
    Ok(d)
}

fn config(mac: &str, ipv4: &str, ipv6: Option<&str>, sa: Option<&str>, seed: u64) -> PyResult<StackConfig> {
    let (v4, prefix) = match ipv4.split_once('/') {
        Some((a, p)) => {
            (a, p.parse::<u8>().map_err(|_| PyValueError::new_err(format!("ipv4: bad prefix in {ipv4:?}")))?)
        }
        None => (ipv4, 24),
    };
    let v4: Ipv4Addr = v4.parse().map_err(|_| PyValueError::new_err(format!("ipv4: {ipv4:?} is not an address")))?;
    let mut c = StackConfig::new(parse_mac(mac)?, v4, prefix);
    if let Some(v6) = ipv6 {
        let (a, p) = v6.split_once('/').unwrap_or((v6, "64"));
        let a: Ipv6Addr = a.parse().map_err(|_| PyValueError::new_err(format!("ipv6: {v6:?} is not an address")))?;
        let p: u8 = p.parse().map_err(|_| PyValueError::new_err(format!("ipv6: bad prefix in {v6:?}")))?;
        c.ipv6.push((a, p));
    }
    c.sa = sa.map(|s| parse_ip(s, "sa")).transpose()?;
    c.seed = seed;
    c.multicast_paths = MulticastPaths::BOTH;
    Ok(c)
}

enum Home {
    Own { stack: Box<roce_cm::Stack>, now: Instant },
    Net { net: Py<SimNet>, node: NodeId },
}

/// Stack(mac="02:00:00:00:00:01", ipv4="198.18.0.1/24", ipv6=None, sa=None, seed=1)
///
/// The sans-IO RoCEv2 CM and multicast engine (rdma_cm ids, multicast joins and leaves
/// through the SA and IGMP/MLD, UD QPs, RC connections). A Stack of your own is driven by
/// you: feed it frames with handle_frame(frame, now), take frames with poll_transmit(now),
/// events with poll_event(), and call handle_timeout(now) at poll_timeout(). Times are float
/// seconds on your clock; calls that take `now` default to the last time you gave.
/// A Stack from SimNet.add_host lives on the simulated link, which drives it: its `now`
/// is the network's.
///
/// Errors of the API (the kernel's errno) raise OSError(errno, "EINVAL (22)").
#[pyclass(unsendable, module = "roce", name = "Stack")]
pub struct PyStack {
    home: Home,
}

impl PyStack {
    fn with<R>(
        &mut self,
        py: Python<'_>,
        now: Option<f64>,
        f: impl FnOnce(&mut roce_cm::Stack, Instant) -> Result<R, Errno>,
    ) -> PyResult<R> {
        match &mut self.home {
            Home::Own { stack, now: last } => {
                if let Some(t) = now {
                    *last = instant(t)?;
                }
                f(stack, *last).map_err(errno)
            }
            Home::Net { net, node } => {
                let mut n = net.borrow_mut(py);
                let t = n.net.now();
                let s = n
                    .net
                    .try_node_mut::<roce_cm::Stack>(*node)
                    .ok_or_else(|| PyRuntimeError::new_err("this node is not a Stack"))?;
                f(s, t).map_err(errno)
            }
        }
    }

    /// `with`, for the calls that take `rdma_conn_param` (connect, accept).
    fn with_conn_param(
        &mut self,
        py: Python<'_>,
        private_data: Option<&Bound<'_, PyAny>>,
        now: Option<f64>,
        f: impl FnOnce(&mut roce_cm::Stack, Instant, &ConnectParam) -> Result<(), Errno>,
    ) -> PyResult<()> {
        let p = conn_param(private_data)?;
        self.with(py, now, |s, t| f(s, t, &p))
    }

    fn own(&mut self, what: &str) -> PyResult<(&mut roce_cm::Stack, &mut Instant)> {
        match &mut self.home {
            Home::Own { stack, now } => Ok((stack, now)),
            Home::Net { .. } => {
                Err(PyRuntimeError::new_err(format!("{what}: this Stack lives on a SimNet, which drives it")))
            }
        }
    }
}

#[pymethods]
impl PyStack {
    #[new]
    #[pyo3(signature = (mac = "02:00:00:00:00:01", ipv4 = "198.18.0.1/24", ipv6 = None, sa = None, seed = 1))]
    fn new(mac: &str, ipv4: &str, ipv6: Option<&str>, sa: Option<&str>, seed: u64) -> PyResult<Self> {
        let c = config(mac, ipv4, ipv6, sa, seed)?;
        Ok(PyStack { home: Home::Own { stack: Box::new(roce_cm::Stack::new(c)), now: Instant::from_nanos(0) } })
    }

    /// handle_frame(frame: bytes, now: float) -> None: a frame from the wire.
    fn handle_frame(&mut self, frame: &Bound<'_, PyAny>, now: f64) -> PyResult<()> {
        let b = bytes_of(frame, "frame")?;
        let t = instant(now)?;
        let (s, last) = self.own("handle_frame")?;
        *last = t;
        s.handle_frame(t, &b);
        Ok(())
    }

    /// poll_transmit(now: float) -> bytes | None: the next frame to put on the wire.
    fn poll_transmit<'py>(&mut self, py: Python<'py>, now: f64) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let t = instant(now)?;
        let (s, last) = self.own("poll_transmit")?;
        *last = t;
        let mut buf = vec![0u8; 10240];
        Ok(s.poll_transmit(t, &mut buf).map(|n| PyBytes::new(py, &buf[..n.min(buf.len())])))
    }

    /// handle_timeout(now: float) -> None: run the timers due by now (retries, ARP, reports).
    fn handle_timeout(&mut self, now: f64) -> PyResult<()> {
        let t = instant(now)?;
        let (s, last) = self.own("handle_timeout")?;
        *last = t;
        s.handle_timeout(t);
        Ok(())
    }

    /// poll_timeout() -> float | None: when handle_timeout wants to run next.
    fn poll_timeout(&mut self, py: Python<'_>) -> PyResult<Option<f64>> {
        self.with(py, None, |s, _| Ok(s.poll_timeout().map(seconds)))
    }

    /// poll_event() -> dict | None: the next rdma_cm event (id, kind, status, and what it
    /// carries: group, mlid, dest for MULTICAST_JOIN; private_data for CM events).
    fn poll_event<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let e = self.with(py, None, |s, _| Ok(s.poll_event()))?;
        e.map(|e| event_dict(py, &e)).transpose()
    }

    /// create_id(port_space="udp", qp_type="ud") -> int: rdma_create_id.
    #[pyo3(signature = (port_space = "udp", qp_type = "ud"))]
    fn create_id(&mut self, py: Python<'_>, port_space: &str, qp_type: &str) -> PyResult<u32> {
        let (ps, qt) = (self::port_space(port_space)?, self::qp_type(qp_type)?);
        self.with(py, None, |s, _| s.create_id(ps, qt).map(|i| i.0))
    }

    /// bind_addr(id: int, ip: str, port: int = 0): rdma_bind_addr.
    #[pyo3(signature = (id, ip, port = 0))]
    fn bind_addr(&mut self, py: Python<'_>, id: u32, ip: &str, port: u16) -> PyResult<()> {
        let a = SocketAddr::new(parse_ip(ip, "ip")?, port);
        self.with(py, None, |s, _| s.bind_addr(CmId(id), a))
    }

    /// resolve_addr(id, dst, port=0, src=None, timeout=2.0, now=None): rdma_resolve_addr.
    #[pyo3(signature = (id, dst, port = 0, src = None, timeout = 2.0, now = None))]
    #[allow(clippy::too_many_arguments)]
    fn resolve_addr(
        &mut self,
        py: Python<'_>,
        id: u32,
        dst: &str,
        port: u16,
        src: Option<&str>,
        timeout: f64,
        now: Option<f64>,
    ) -> PyResult<()> {
        let d = SocketAddr::new(parse_ip(dst, "dst")?, port);
        let sa = src.map(|x| parse_ip(x, "src").map(|i| SocketAddr::new(i, 0))).transpose()?;
        let to = duration(timeout, "timeout")?;
        self.with(py, now, |s, t| s.resolve_addr(t, CmId(id), sa, d, to))
    }

    /// resolve_route(id, timeout=2.0, now=None): rdma_resolve_route.
    #[pyo3(signature = (id, timeout = 2.0, now = None))]
    fn resolve_route(&mut self, py: Python<'_>, id: u32, timeout: f64, now: Option<f64>) -> PyResult<()> {
        let to = duration(timeout, "timeout")?;
        self.with(py, now, |s, t| s.resolve_route(t, CmId(id), to))
    }

    /// create_qp(id) -> int: a QP for the id (rdma_create_qp); returns its number.
    fn create_qp(&mut self, py: Python<'_>, id: u32) -> PyResult<u32> {
        self.with(py, None, |s, _| s.create_qp_for_id(CmId(id)))
    }

    /// listen(id, backlog=16): rdma_listen.
    #[pyo3(signature = (id, backlog = 16))]
    fn listen(&mut self, py: Python<'_>, id: u32, backlog: u32) -> PyResult<()> {
        self.with(py, None, |s, _| s.listen(CmId(id), backlog))
    }

    /// connect(id, private_data=b"", now=None): rdma_connect.
    #[pyo3(signature = (id, private_data = None, now = None))]
    fn connect(
        &mut self,
        py: Python<'_>,
        id: u32,
        private_data: Option<&Bound<'_, PyAny>>,
        now: Option<f64>,
    ) -> PyResult<()> {
        self.with_conn_param(py, private_data, now, |s, t, p| s.connect(t, CmId(id), p))
    }

    /// accept(id, private_data=b"", now=None): rdma_accept.
    #[pyo3(signature = (id, private_data = None, now = None))]
    fn accept(
        &mut self,
        py: Python<'_>,
        id: u32,
        private_data: Option<&Bound<'_, PyAny>>,
        now: Option<f64>,
    ) -> PyResult<()> {
        self.with_conn_param(py, private_data, now, |s, t, p| s.accept(t, CmId(id), p))
    }

    /// establish(id, now=None): rdma_establish (the RTU of an id without a QP whose REP came
    /// as CONNECT_RESPONSE).
    #[pyo3(signature = (id, now = None))]
    fn establish(&mut self, py: Python<'_>, id: u32, now: Option<f64>) -> PyResult<()> {
        self.with(py, now, |s, _| s.establish(CmId(id)))
    }

    /// disconnect(id, now=None): rdma_disconnect.
    #[pyo3(signature = (id, now = None))]
    fn disconnect(&mut self, py: Python<'_>, id: u32, now: Option<f64>) -> PyResult<()> {
        self.with(py, now, |s, t| s.disconnect(t, CmId(id)))
    }

    /// join(id, group, join_state="FullMember", now=None): rdma_join_multicast (an SA Set
    /// and an IGMP/MLD report; MULTICAST_JOIN or MULTICAST_ERROR follows).
    #[pyo3(signature = (id, group, join_state = None, now = None))]
    fn join(
        &mut self,
        py: Python<'_>,
        id: u32,
        group: &str,
        join_state: Option<&Bound<'_, PyAny>>,
        now: Option<f64>,
    ) -> PyResult<()> {
        let g = parse_ip(group, "group")?;
        let js = join_state.map(self::join_state).transpose()?.unwrap_or(JoinState::FULL_MEMBER);
        self.with(py, now, |s, t| s.join_multicast(t, CmId(id), g, js))
    }

    /// leave(id, group, now=None): rdma_leave_multicast (an SA Delete of the bits no other
    /// member holds, an IGMP/MLD leave; never blocks: MULTICAST_LEFT or an error follows).
    #[pyo3(signature = (id, group, now = None))]
    fn leave(&mut self, py: Python<'_>, id: u32, group: &str, now: Option<f64>) -> PyResult<()> {
        let g = parse_ip(group, "group")?;
        self.with(py, now, |s, t| s.leave_multicast(t, CmId(id), g))
    }

    /// destroy_id(id, now=None): rdma_destroy_id (leaves its groups, disconnects).
    #[pyo3(signature = (id, now = None))]
    fn destroy_id(&mut self, py: Python<'_>, id: u32, now: Option<f64>) -> PyResult<()> {
        self.with(py, now, |s, t| s.destroy_id(t, CmId(id)))
    }

    /// post_send(qp, dest: UdDestination, payload: bytes, imm_data=None): a UD send.
    #[pyo3(signature = (qp, dest, payload, imm_data = None))]
    fn post_send(
        &mut self,
        py: Python<'_>,
        qp: u32,
        dest: &UdDestination,
        payload: &Bound<'_, PyAny>,
        imm_data: Option<u32>,
    ) -> PyResult<()> {
        let p = bytes_of(payload, "payload")?;
        let d = dest.dest;
        self.with(py, None, |s, _| s.post_send(qp, &d, &p, imm_data))
    }

    /// poll_recv(qp) -> dict | None: the next datagram received on a UD QP (src, src_qp,
    /// dst, qkey, imm_data, payload).
    fn poll_recv<'py>(&mut self, py: Python<'py>, qp: u32) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(dg) = self.with(py, None, |s, _| Ok(s.poll_recv(qp)))? else { return Ok(None) };
        let d = PyDict::new(py);
        d.set_item("src", dg.src.to_string())?;
        d.set_item("src_qp", dg.src_qp)?;
        d.set_item("dst", dg.dst.to_string())?;
        d.set_item("qkey", dg.qkey)?;
        d.set_item("imm_data", dg.imm_data)?;
        d.set_item("payload", PyBytes::new(py, &dg.payload))?;
        Ok(Some(d))
    }

    /// The multicast groups this stack is in (IP addresses).
    fn groups(&mut self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.with(py, None, |s, _| Ok(s.ip_multicast_groups().map(|g| g.to_string()).collect()))
    }

    /// SA transactions still open.
    fn sa_transactions(&mut self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, None, |s, _| Ok(s.sa_transactions()))
    }

    /// counters() -> dict: the engine's frame counters, `{"rx_frames": n, "rx_accepted": n,
    /// "tx_frames": n, "dropped": {reason: n}}`, each dropped frame under its named reason
    /// (`not_for_us`, `bad_icrc`, `malformed_udp` …, as the engine counts them).
    fn counters<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = self.with(py, None, |s, _| Ok(s.counters().clone()))?;
        let d = PyDict::new(py);
        d.set_item("rx_frames", c.rx_frames)?;
        d.set_item("rx_accepted", c.rx_accepted)?;
        d.set_item("tx_frames", c.tx_frames)?;
        let dropped = PyDict::new(py);
        for (reason, n) in &c.dropped {
            dropped.set_item(reason.name(), n)?;
        }
        d.set_item("dropped", dropped)?;
        Ok(d)
    }

    /// counters_text() -> str: the same counters as the engine's Debug text.
    fn counters_text(&mut self, py: Python<'_>) -> PyResult<String> {
        self.with(py, None, |s, _| Ok(format!("{:?}", s.counters())))
    }

    fn __repr__(&mut self, py: Python<'_>) -> PyResult<String> {
        let c = self.with(py, None, |s, _| Ok((s.config().mac, s.config().ipv4)))?;
        let m = c.0;
        Ok(format!(
            "Stack(mac={:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}, ipv4={:?})",
            m[0], m[1], m[2], m[3], m[4], m[5], c.1
        ))
    }
}

fn conn_param(private_data: Option<&Bound<'_, PyAny>>) -> PyResult<ConnectParam> {
    let pd = private_data.map(|p| bytes_of(p, "private_data").map(|b| b.to_vec())).transpose()?.unwrap_or_default();
    Ok(ConnectParam {
        private_data: pd,
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        qp_num: 0,
    })
}

/// SimNet(seed=1)
///
/// The simulated link of `roce demo`: hosts (Stacks) and an SA on one virtual wire, with a
/// virtual clock (float seconds from 0), per-host latency and loss, and a capture of every
/// frame. add_host(...) returns a Stack driven by the network; run_for / step / run_until
/// move time; frames() gives what crossed the wire (decode it with roce.decode).
#[pyclass(unsendable, module = "roce")]
pub struct SimNet {
    net: Net,
}

#[pymethods]
impl SimNet {
    #[new]
    #[pyo3(signature = (seed = 1))]
    fn new(seed: u64) -> Self {
        SimNet { net: Net::new(seed) }
    }

    /// add_host(mac, ipv4, ipv6=None, sa=None, latency=50e-6, loss=0.0, seed=None) -> Stack
    #[pyo3(signature = (mac, ipv4, ipv6 = None, sa = None, latency = 50e-6, loss = 0.0, seed = None))]
    #[allow(clippy::too_many_arguments)]
    fn add_host(
        slf: &Bound<'_, Self>,
        mac: &str,
        ipv4: &str,
        ipv6: Option<&str>,
        sa: Option<&str>,
        latency: f64,
        loss: f64,
        seed: Option<u64>,
    ) -> PyResult<PyStack> {
        let link = link(latency, loss)?;
        let mut me = slf.borrow_mut();
        let c = config(mac, ipv4, ipv6, sa, seed.unwrap_or(me.net.seed() ^ me.net.len() as u64))?;
        let node = me.net.add(roce_cm::Stack::new(c), link);
        Ok(PyStack { home: Home::Net { net: slf.clone().unbind(), node } })
    }

    /// add_sa(mac, ipv4, ipv6=None, latency=50e-6) -> int: an SA (the MCMemberRecord part of
    /// a subnet manager) as a host; returns its node index.
    #[pyo3(signature = (mac, ipv4, ipv6 = None, latency = 50e-6))]
    fn add_sa(&mut self, mac: &str, ipv4: &str, ipv6: Option<&str>, latency: f64) -> PyResult<usize> {
        let c = config(mac, ipv4, ipv6, None, self.net.seed() ^ 2)?;
        Ok(self.net.add(SaHost::with_defaults(c), link(latency, 0.0)?).index())
    }

    /// The simulated time, float seconds.
    #[getter]
    fn now(&self) -> f64 {
        seconds(self.net.now())
    }

    /// step() -> bool: deliver the next frame or timer; False when nothing is pending.
    fn step(&mut self) -> bool {
        self.net.step()
    }

    /// run_for(seconds): run the network for this much simulated time.
    fn run_for(&mut self, seconds: f64) -> PyResult<()> {
        let d = duration(seconds, "seconds")?;
        self.net.run_for(d);
        Ok(())
    }

    /// run_until(t): run the network until simulated time t (seconds).
    fn run_until(&mut self, t: f64) -> PyResult<()> {
        let t = instant(t)?;
        self.net.run_until(t);
        Ok(())
    }

    /// next_event() -> float | None: when the next frame arrives or timer fires.
    fn next_event(&self) -> Option<f64> {
        self.net.next_event().map(seconds)
    }

    /// frames(start=0) -> list[tuple[float, int, bytes]]: (time, node index, frame) of every
    /// frame sent since the start (or since frame number `start`).
    #[pyo3(signature = (start = 0))]
    fn frames<'py>(&self, py: Python<'py>, start: usize) -> Vec<(f64, usize, Bound<'py, PyBytes>)> {
        let cap = self.net.captured();
        cap.get(start..)
            .unwrap_or(&[])
            .iter()
            .map(|c| (seconds(c.time), c.from.index(), PyBytes::new(py, &c.data)))
            .collect()
    }

    /// write_pcap(path): every frame so far as a pcap file.
    fn write_pcap(&self, path: std::path::PathBuf) -> PyResult<()> {
        self.net
            .write_pcap(&path)
            .map_err(|e| PyOSError::new_err((e.raw_os_error().unwrap_or(0), format!("{}: {e}", path.display()))))
    }

    /// inject(node, frame): put a frame on the wire as if node sent it.
    fn inject(&mut self, node: usize, frame: &Bound<'_, PyAny>) -> PyResult<()> {
        let b = bytes_of(frame, "frame")?;
        let id = self
            .net
            .node_ids()
            .find(|n| n.index() == node)
            .ok_or_else(|| PyValueError::new_err(format!("node: no node {node}")))?;
        self.net.inject(id, &b);
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!("SimNet(nodes={}, now={:.6}, frames={})", self.net.len(), self.now(), self.net.captured().len())
    }
}

fn link(latency: f64, loss: f64) -> PyResult<LinkConfig> {
    if !(0.0..=1.0).contains(&loss) {
        return Err(PyValueError::new_err(format!("loss: {loss} is not a probability from 0 to 1")));
    }
    Ok(LinkConfig { latency: duration(latency, "latency")?, loss, ..LinkConfig::default() })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyStack>()?;
    m.add_class::<SimNet>()?;
    m.add_class::<UdDestination>()?;
    Ok(())
}
