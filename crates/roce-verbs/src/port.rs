//! The port as the configuration and the interface describe it: its MAC, address, MTU and
//! rxe's GID table (GID 0 the link-local address made from the MAC, GID 1 the port's address,
//! IPv4-mapped for IPv4; both RoCEv2), read without opening a socket.

use core::ffi::c_int;
use std::net::IpAddr;
use std::sync::OnceLock;

use roce_wire::Gid;

/// What the port looks like, from the configuration and the interface.
#[derive(Debug, Clone)]
pub struct PortInfo {
    /// The interface.
    pub iface: String,
    /// Its index.
    pub ifindex: u32,
    /// The stack's MAC.
    pub mac: [u8; 6],
    /// The stack's address.
    pub addr: IpAddr,
    /// The active MTU (`IBV_MTU_*`).
    pub active_mtu: u32,
    /// The GID table (index ▶ GID).
    pub gids: Vec<Gid>,
}

/// How many GID entries the port reports (rxe has 1024; entries past [`PortInfo::gids`] are
/// empty).
pub const GID_TABLE_LEN: c_int = 16;

static PORT: OnceLock<Result<PortInfo, String>> = OnceLock::new();

/// The port, or why there is none (said once on stderr unless the configuration is simply
/// absent, as on a host without RDMA devices).
pub fn port() -> Option<&'static PortInfo> {
    match PORT.get_or_init(port_info) {
        Ok(p) => Some(p),
        Err(msg) => {
            if !msg.is_empty() {
                crate::ffi::say_once("port", msg);
            }
            None
        }
    }
}

fn port_info() -> Result<PortInfo, String> {
    let o = match crate::config::from_env() {
        Ok(o) => o,
        Err(e) if e.absent => return Err(String::new()),
        Err(e) => return Err(format!("roce: {}", e.message)),
    };
    let info = roce_net::raw::interface(&o.iface).map_err(|e| format!("roce: {e}"))?;
    let mac = o.mac.or(info.mac).ok_or_else(|| format!("roce: {} has no MAC address", o.iface))?;
    let netdev_mtu = roce::plumbing::port::iface_mtu(&o.iface).unwrap_or(1500);
    let active_mtu = u32::from(roce::plumbing::port::iboe_mtu_code(netdev_mtu));
    Ok(PortInfo {
        iface: o.iface.clone(),
        ifindex: info.index,
        mac,
        addr: o.local,
        active_mtu,
        gids: vec![link_local_gid(mac), Gid::from_ip(o.local)],
    })
}

/// fe80::/64 with the EUI-64 of `mac` (rxe's GID 0).
pub fn link_local_gid(mac: [u8; 6]) -> Gid {
    let mut g = [0u8; 16];
    g[0] = 0xfe;
    g[1] = 0x80;
    g[8..11].copy_from_slice(&[mac[0] ^ 0x02, mac[1], mac[2]]);
    g[11] = 0xff;
    g[12] = 0xfe;
    g[13..16].copy_from_slice(&mac[3..6]);
    Gid(g)
}

impl PortInfo {
    /// The node GUID (EUI-64 of the MAC), in network order as `ibv_device_attr` carries it.
    pub fn node_guid_be(&self) -> u64 {
        let g = link_local_gid(self.mac).0;
        u64::from_ne_bytes(g[8..16].try_into().unwrap_or([0; 8]))
    }

    /// The index of `gid` in the table.
    pub fn gid_index(&self, gid: &Gid) -> Option<u8> {
        self.gids.iter().position(|g| g == gid).map(|i| i as u8)
    }
}
