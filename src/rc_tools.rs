//! The RC data path of `roce cmatose`, as ucmatose moves data (librdmacm/examples/cmatose.c):
//! each side creates its RC QP, registers one message buffer and posts COUNT receives of
//! SIZE bytes before it connects or accepts; once ESTABLISHED the server sends COUNT
//! messages, waits for their completions, then for COUNT receives; the client waits for
//! COUNT receives, then sends COUNT replies ("sending replies") and here also waits for their
//! completions before it goes on to disconnect.

use std::time::Duration;

use roce_cm::rc::{Access, MrInfo, RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus};
use roce_cm::CmId;
use roce_net::driver::Driver;

use crate::plumbing::tools::CliDevice;

/// The largest message (ucmatose takes any int; the bound keeps the buffer sane).
pub const MAX_SIZE: usize = 1 << 24;
/// The most messages each way.
pub const MAX_COUNT: u32 = 1 << 16;

/// One connection's QP and message buffer.
#[derive(Debug, Clone, Copy)]
pub struct Node {
    qpn: u32,
    mr: Option<MrInfo>,
    count: u32,
    size: usize,
    /// Completions seen so far (a receive may complete while we wait for sends).
    sends_done: u32,
    recvs_done: u32,
}

/// The path MTU RDMA-CM uses on Ethernet: the largest IB MTU under the netdev's MTU
/// (`iboe_get_mtu`), read from sysfs; unchanged when it cannot be read.
pub fn set_port_mtu_from(d: &mut Driver<CliDevice>, iface: &str) {
    let mtu = std::fs::read_to_string(format!("/sys/class/net/{iface}/mtu")).ok();
    if let Some(m) = mtu.and_then(|s| s.trim().parse::<u32>().ok()) {
        d.stack.set_port_mtu(iboe_mtu_code(m));
    }
}

/// init_node + post_recvs: the RC QP of `id`, and with data (`count` and `size` both
/// non-zero, as create_message decides) a buffer and `count` receives. The path MTU comes
/// from `iface` (see [`set_port_mtu_from`]).
pub fn prepare(d: &mut Driver<CliDevice>, iface: &str, id: CmId, count: u32, size: usize) -> Result<Node, String> {
    if count > MAX_COUNT || size > MAX_SIZE {
        return Err(format!("at most {MAX_COUNT} messages of at most {MAX_SIZE} bytes"));
    }
    set_port_mtu_from(d, iface);
    let count = if size == 0 { 0 } else { count };
    let qpn = d.stack.create_qp_for_id(id).map_err(|e| format!("unable to create QP: {e}"))?;
    let mut node = Node { qpn, mr: None, count, size, sends_done: 0, recvs_done: 0 };
    if count == 0 {
        return Ok(node);
    }
    let rc = d.stack.rc_mut();
    let mr = rc.reg_mr(size, Access::LOCAL_WRITE).map_err(|e| format!("failed to reg MR: {e}"))?;
    for i in 0..count {
        let wr = RecvWr { wr_id: u64::from(i), sg_list: vec![sge(&mr, size)] };
        rc.post_recv(qpn, wr).map_err(|e| format!("failed to post receives: {e}"))?;
    }
    node.mr = Some(mr);
    Ok(node)
}

fn sge(m: &MrInfo, size: usize) -> Sge {
    Sge { addr: m.addr, length: size as u32, lkey: m.lkey }
}

fn post_sends(d: &mut Driver<CliDevice>, n: &Node) -> Result<(), String> {
    let Some(mr) = n.mr else { return Ok(()) };
    let now = d.now();
    for i in 0..n.count {
        let wr = SendWr {
            wr_id: u64::from(i),
            op: SendOp::Send,
            sg_list: vec![sge(&mr, n.size)],
            signaled: true,
            solicited: false,
        };
        d.stack.rc_mut().post_send(now, n.qpn, wr).map_err(|e| format!("failed to post sends: {e}"))?;
    }
    Ok(())
}

/// Poll until `count` completions of `want` have been seen (completions of the other kind
/// are counted too, for the next wait).
fn poll(d: &mut Driver<CliDevice>, n: &mut Node, want: WcOpcode, timeout: Duration) -> Result<(), String> {
    let mut err = None;
    let count = n.count;
    let done = d
        .run_until(timeout, |d| {
            while let Some(wc) = d.stack.rc_mut().poll_cq() {
                if wc.status != WcStatus::Success {
                    err = Some(format!("completion {:?} failed: {}", wc.opcode, wc.status.as_str()));
                    return true;
                }
                match wc.opcode {
                    WcOpcode::Send => n.sends_done += 1,
                    WcOpcode::Recv => n.recvs_done += 1,
                    _ => {}
                }
            }
            (if want == WcOpcode::Send { n.sends_done } else { n.recvs_done }) >= count
        })
        .map_err(|e| e.to_string())?;
    match err {
        Some(e) => Err(e),
        None if done => Ok(()),
        None => Err(format!(
            "{want:?} completions missing after {:.1} s: {} sends and {} receives of {count}",
            timeout.as_secs_f64(),
            n.sends_done,
            n.recvs_done
        )),
    }
}

/// The server's transfers after ESTABLISHED.
pub fn server_exchange(d: &mut Driver<CliDevice>, n: &mut Node, timeout: Duration) -> Result<(), String> {
    if n.count == 0 {
        return Ok(());
    }
    crate::out!("initiating data transfers");
    post_sends(d, n)?;
    crate::out!("completing sends");
    poll(d, n, WcOpcode::Send, timeout)?;
    crate::out!("receiving data transfers");
    poll(d, n, WcOpcode::Recv, timeout)?;
    crate::out!("data transfers complete");
    Ok(())
}

/// The client's transfers after ESTABLISHED.
pub fn client_exchange(d: &mut Driver<CliDevice>, n: &mut Node, timeout: Duration) -> Result<(), String> {
    if n.count == 0 {
        return Ok(());
    }
    crate::out!("receiving data transfers");
    poll(d, n, WcOpcode::Recv, timeout)?;
    crate::out!("sending replies");
    post_sends(d, n)?;
    poll(d, n, WcOpcode::Send, timeout)?;
    crate::out!("data transfers complete");
    Ok(())
}

/// iboe_get_mtu: the IB MTU code for a netdev MTU (room for GRH, UDP, BTH, XRCETH,
/// AtomicETH and ICRC: 96 bytes).
pub fn iboe_mtu_code(netdev_mtu: u32) -> u8 {
    let room = netdev_mtu.saturating_sub(40 + 8 + 12 + 4 + 28 + 4);
    match room {
        4096.. => 5,
        2048.. => 4,
        1024.. => 3,
        512.. => 2,
        _ => 1,
    }
}
