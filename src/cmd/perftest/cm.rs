//! perftest's rdma_cm mode (`-R`): the out-of-band channel is an RC connection set up through
//! the CM on the test's port (`rdma_client_connect` / `rdma_server_connect`), every exchange one
//! signalled SEND of exactly the message's bytes into the peer's one posted 56-byte receive
//! (`rdma_write_data` / `rdma_read_data`, reposted after each read); the key messages are the
//! raw `struct pingpong_dest` ([`super::oob::Dest::to_struct`]). The test QP then gets its own
//! CM connection on the same port ([`connect_test_qps`], `create_rdma_cm_connection`).

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant as WallInstant};

use roce_cm::rc::{Access, MrInfo, RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion};
use roce_cm::{CmId, ConnectParam, EventKind, PortSpace};
use roce_net::driver::Driver;

use super::oob::{Channel, Dest, DEST_LEN};
use crate::plumbing::cm_steps::{first_connect_request, listen, resolve_id, wait_for_event};
use crate::plumbing::port::CliDevice;

/// `SYNC_SPEC_ID`: the wr_id of every exchange.
const SYNC_SPEC_ID: u64 = 5;
/// The test QP's connect attempts (`rdma_cm_client_connection`: 10, 100 ms apart).
const CONNECT_TRIES: u32 = 10;

/// The control connection.
pub struct CmChannel {
    id: CmId,
    qpn: u32,
    recv: MrInfo,
    send: MrInfo,
    client: bool,
    timeout: Duration,
    /// Completions of the control QP not yet taken.
    mine: VecDeque<WorkCompletion>,
    /// Completions of other QPs met while waiting, for the test to take.
    others: Vec<WorkCompletion>,
}

/// The conn_param perftest passes: retry and RNR retry 7; responder resources and initiator
/// depth `out_reads` for READ/atomic tests, else 0.
pub fn param(out_reads: u8) -> ConnectParam {
    ConnectParam {
        responder_resources: out_reads,
        initiator_depth: out_reads,
        retry_count: 7,
        rnr_retry_count: 7,
        ..Default::default()
    }
}

fn sge(m: &MrInfo, len: usize) -> Vec<Sge> {
    vec![Sge { addr: m.addr, length: len as u32, lkey: m.lkey }]
}

impl CmChannel {
    fn with_qp(d: &mut Driver<CliDevice>, id: CmId, client: bool, timeout: Duration) -> Result<CmChannel, String> {
        let qpn = d.stack.create_qp_for_id(id).map_err(|e| format!("rdma_create_qp: {e}"))?;
        let rc = d.stack.rc_mut();
        let recv = rc.reg_mr(DEST_LEN, Access::LOCAL_WRITE).map_err(|e| format!("ibv_reg_mr: {e}"))?;
        let send = rc.reg_mr(DEST_LEN, Access::NONE).map_err(|e| format!("ibv_reg_mr: {e}"))?;
        // post_one_recv_wqe before connecting.
        rc.post_recv(qpn, RecvWr { wr_id: SYNC_SPEC_ID, sg_list: sge(&recv, DEST_LEN) })
            .map_err(|e| format!("Function ibv_post_recv failed for RDMA_CM QP: {e}"))?;
        Ok(CmChannel { id, qpn, recv, send, client, timeout, mine: VecDeque::new(), others: Vec::new() })
    }

    /// The client's control connection: resolve, QP, connect once (no retry, as perftest).
    pub fn connect(
        d: &mut Driver<CliDevice>,
        local: IpAddr,
        server: IpAddr,
        port: u16,
        timeout: Duration,
    ) -> Result<CmChannel, String> {
        let (id, _) = resolve_id(d, PortSpace::Tcp, local, SocketAddr::new(server, port), timeout, false)?;
        let ch = CmChannel::with_qp(d, id, true, timeout)?;
        let now = d.now();
        d.stack.connect(now, id, &param(0)).map_err(|e| format!("Function rdma_connect failed: {e}"))?;
        wait_for_event(d, id, &[EventKind::Established], timeout, " Unable to perform rdma_client function", false)?;
        Ok(ch)
    }

    /// The server's control connection: listen on the port, accept the first request, then
    /// destroy the listener (the test QP's listener takes the port next).
    pub fn accept(
        d: &mut Driver<CliDevice>,
        local: IpAddr,
        port: u16,
        timeout: Duration,
        accept_timeout: Duration,
    ) -> Result<CmChannel, String> {
        let l = listen(d, PortSpace::Tcp, SocketAddr::new(local, port))
            .map_err(|e| format!(" rdma_bind_addr failed: {e}"))?;
        let r = (|| {
            let req = first_connect_request(d, accept_timeout)
                .ok_or_else(|| format!(" no client within {:.1} s", accept_timeout.as_secs_f64()))?;
            let ch = CmChannel::with_qp(d, req.id, false, timeout)?;
            let now = d.now();
            d.stack.accept(now, req.id, &param(0)).map_err(|e| format!("Function rdma_accept failed: {e}"))?;
            wait_for_event(
                d,
                req.id,
                &[EventKind::Established],
                timeout,
                " Unable to perform rdma_server function",
                false,
            )?;
            Ok::<CmChannel, String>(ch)
        })();
        let now = d.now();
        let _ = d.stack.destroy_id(now, l);
        r
    }

    /// Turn until a completion of the control QP with `opcode` (an error completion ends it).
    fn wait(&mut self, d: &mut Driver<CliDevice>, recv: bool) -> Result<WorkCompletion, String> {
        let end = WallInstant::now() + self.timeout;
        loop {
            if let Some(pos) =
                self.mine.iter().position(|w| (w.opcode == WcOpcode::Recv) == recv || w.status != WcStatus::Success)
            {
                let wc = self.mine.remove(pos).ok_or("completion gone")?;
                if wc.status != WcStatus::Success {
                    return Err(format!(
                        "Bad wc status -- {} ({}) -- {}",
                        super::report::wc_status_code(wc.status),
                        wc.status.as_str(),
                        wc.wr_id
                    ));
                }
                return Ok(wc);
            }
            // Look again only if this round brought one of ours: a completion of the other
            // kind already kept (the peer's next message before our SEND's completion) must
            // not keep the loop from turning the driver, or from its timeout.
            let mut polled_mine = false;
            while let Some(wc) = d.stack.rc_mut().poll_cq() {
                if wc.qp_num == self.qpn {
                    self.mine.push_back(wc);
                    polled_mine = true;
                } else {
                    self.others.push(wc);
                }
            }
            if polled_mine {
                continue;
            }
            if d.events.iter().any(|e| e.id == self.id && e.kind == EventKind::Disconnected) {
                return Err("the peer disconnected the rdma_cm control connection".into());
            }
            if crate::plumbing::shutdown::requested().is_some() || d.stopped() {
                return Err("stopped".into());
            }
            if WallInstant::now() >= end {
                return Err(format!("no message from the peer within {:.1} s", self.timeout.as_secs_f64()));
            }
            d.turn(Duration::from_millis(1)).map_err(|e| format!("{e}"))?;
        }
    }

    /// rdma_write_data: one signalled SEND of `bytes`, waited for.
    fn write(&mut self, d: &mut Driver<CliDevice>, bytes: &[u8]) -> Result<(), String> {
        let n = bytes.len().min(DEST_LEN);
        let rc = d.stack.rc_mut();
        rc.mr_mut(self.send.lkey).ok_or("send buffer gone")?[..n].copy_from_slice(&bytes[..n]);
        let wr = SendWr {
            wr_id: SYNC_SPEC_ID,
            op: SendOp::Send,
            sg_list: sge(&self.send, n),
            signaled: true,
            solicited: false,
            inline: None,
        };
        let now = d.now();
        d.stack.rc_mut().post_send(now, self.qpn, wr).map_err(|e| format!("Function ibv_post_send failed: {e}"))?;
        self.wait(d, false).map(|_| ())
    }

    /// rdma_read_data: the next receive's first `n` bytes; the receive posted again.
    fn read(&mut self, d: &mut Driver<CliDevice>, n: usize) -> Result<Vec<u8>, String> {
        self.wait(d, true)?;
        let b = d.stack.rc().mr(self.recv.lkey).ok_or("receive buffer gone")?;
        let out = b[..n.min(DEST_LEN)].to_vec();
        d.stack
            .rc_mut()
            .post_recv(self.qpn, RecvWr { wr_id: SYNC_SPEC_ID, sg_list: sge(&self.recv, DEST_LEN) })
            .map_err(|e| format!("Couldn't post recv: {e}"))?;
        Ok(out)
    }
}

impl Channel for CmChannel {
    fn is_client(&self) -> bool {
        self.client
    }

    fn send_msg(&mut self, d: &mut Driver<CliDevice>, bytes: &[u8]) -> Result<(), String> {
        self.write(d, bytes)
    }

    fn recv_msg(&mut self, d: &mut Driver<CliDevice>, n: usize) -> Result<Vec<u8>, String> {
        self.read(d, n)
    }

    /// Nothing follows the last handshake in rdma_cm mode.
    fn write_only(&mut self, _d: &mut Driver<CliDevice>, _bytes: &[u8]) -> Result<(), String> {
        Ok(())
    }

    fn hand_shake(&mut self, d: &mut Driver<CliDevice>, my: &Dest) -> Result<Dest, String> {
        let r = self.xchg(d, &my.to_struct())?;
        Dest::from_struct(&r).map_err(|e| format!("{e}"))
    }

    fn claim(&mut self, wc: WorkCompletion) -> Option<WorkCompletion> {
        if wc.qp_num == self.qpn {
            self.mine.push_back(wc);
            None
        } else {
            Some(wc)
        }
    }

    fn take_others(&mut self) -> Vec<WorkCompletion> {
        std::mem::take(&mut self.others)
    }
}

/// `create_rdma_cm_connection`: a handshake, each test QP's own CM connection on the same port,
/// a handshake. The server accepts `n` requests in the order they come (perftest's
/// `connection_index`); the client resolves and connects its `n` ids one after the other, so
/// its requests arrive in its QPs' order, and retries the whole set 10 times, 100 ms apart
/// (`rdma_cm_client_connection`). Returns each test QP's id and number, in QP order.
#[allow(clippy::too_many_arguments)]
pub fn connect_test_qps(
    d: &mut Driver<CliDevice>,
    ch: &mut dyn Channel,
    local: IpAddr,
    server: Option<IpAddr>,
    port: u16,
    out_reads: u8,
    timeout: Duration,
    n: usize,
) -> Result<Vec<(CmId, u32)>, String> {
    let zero = Dest::default();
    let sync = |d: &mut Driver<CliDevice>, ch: &mut dyn Channel, when: &str| {
        ch.hand_shake(d, &zero)
            .map(|_| ())
            .map_err(|e| format!("Failed to sync between client and server {when} creating RDMA CM connection: {e}"))
    };
    let established = |d: &mut Driver<CliDevice>, got: &[(CmId, u32)], what: &str| {
        got.iter()
            .try_for_each(|&(id, _)| wait_for_event(d, id, &[EventKind::Established], timeout, what, false).map(|_| ()))
    };
    match server {
        None => {
            // Listening before the first sync: the client connects right after it.
            let l = listen(d, PortSpace::Tcp, SocketAddr::new(local, port))
                .map_err(|e| format!("Failed to bind RDMA CM address on the server: {e}"))?;
            let mut got = Vec::with_capacity(n);
            let r = (|| {
                sync(d, ch, "before")?;
                for _ in 0..n {
                    let req =
                        first_connect_request(d, timeout).ok_or("Failed to create RDMA CM connection: no request")?;
                    let qpn = d.stack.create_qp_for_id(req.id).map_err(|e| format!("Failed to create QP: {e}"))?;
                    got.push((req.id, qpn));
                    let now = d.now();
                    d.stack
                        .accept(now, req.id, &param(out_reads))
                        .map_err(|e| format!("Failed to accept RDMA CM connection: {e}"))?;
                }
                established(d, &got, "Failed to create RDMA CM connection")
            })();
            let now = d.now();
            let _ = d.stack.destroy_id(now, l);
            r?;
            sync(d, ch, "after")?;
            Ok(got)
        }
        Some(server) => {
            sync(d, ch, "before")?;
            // perftest's server listens only after this sync (rdma_cm_server_connection), its
            // client connects at once and, when one of its requests is rejected for want of a
            // listener (REJ 8), tears the whole set down, REJ (timeout) for the others
            // included: a slow server that accepted one of those then fails to create its QP
            // (EINVAL) and exits (seen against a TCG guest, 1 run in about 10). Waiting
            // perftest's retry delay first gives the server the time to listen.
            let _ = d.run_for(Duration::from_millis(100));
            let mut last = String::new();
            for _ in 0..CONNECT_TRIES {
                let mut got: Vec<(CmId, u32)> = Vec::with_capacity(n);
                let attempt = (|| {
                    for _ in 0..n {
                        let (id, _) =
                            resolve_id(d, PortSpace::Tcp, local, SocketAddr::new(server, port), timeout, false)?;
                        // Pushed before anything can fail, so a failed attempt destroys it.
                        let slot = got.len();
                        got.push((id, 0));
                        let qpn = d.stack.create_qp_for_id(id).map_err(|e| format!("Failed to create QP: {e}"))?;
                        got[slot].1 = qpn;
                        let now = d.now();
                        d.stack
                            .connect(now, id, &param(out_reads))
                            .map_err(|e| format!("Failed to connect through RDMA CM: {e}"))?;
                    }
                    established(d, &got, "RDMA CM event error")
                })();
                match attempt {
                    Ok(()) => {
                        sync(d, ch, "after")?;
                        return Ok(got);
                    }
                    Err(e) => {
                        last = e;
                        let now = d.now();
                        for (id, _) in got {
                            let _ = d.stack.destroy_id(now, id);
                        }
                        let _ = d.run_for(Duration::from_millis(100));
                    }
                }
            }
            Err(format!("Failed to connect RDMA CM client, tried {CONNECT_TRIES} times: {last}"))
        }
    }
}
