//! The library's configuration: environment variables, so that the library works under
//! `roce exec` (which sets them from its options) and without it (spec/capi.md,
//! "Configuration"). Read once, at the first call that needs the device.
//!
//! | variable | meaning |
//! |---|---|
//! | `ROCE_ADDR` | the stack's own address (required: without it the library lists no device) |
//! | `ROCE_IFACE` | the interface (default: the one whose subnet holds `ROCE_ADDR`) |
//! | `ROCE_SA` | the SA's address: joins and leaves go to it (SubnAdmSet/Delete) beside IGMP/MLD |
//! | `ROCE_TRANSPORT` | `raw` or `udp` (default: raw with CAP_NET_RAW, else udp) |
//! | `ROCE_MAC` | the stack's own MAC (raw transport only) |
//! | `ROCE_PCAP` | capture every frame of the stack to this pcap file |
//! | `ROCE_VERBOSE` | `1`: print every frame on stderr |
//! | `ROCE_CC` | congestion control of the connected QPs: `off` (the default, as rxe) or `dcqcn` |

use std::net::IpAddr;
use std::path::PathBuf;

use roce::plumbing::port::{PortOptions, Transport};
use roce_cm::MulticastPaths;

/// The environment variables the library reads, with what each means (for messages and docs).
pub const VARIABLES: [(&str, &str); 8] = [
    ("ROCE_ADDR", "the stack's own address"),
    ("ROCE_IFACE", "the interface"),
    ("ROCE_SA", "the SA's address"),
    ("ROCE_TRANSPORT", "raw or udp"),
    ("ROCE_MAC", "the stack's own MAC (raw transport)"),
    ("ROCE_PCAP", "a pcap file for every frame"),
    ("ROCE_VERBOSE", "1: every frame on stderr"),
    ("ROCE_CC", "off or dcqcn: congestion control of the connected QPs"),
];

/// Why the configuration cannot give a device.
#[derive(Debug, Clone)]
pub struct ConfigError {
    /// One line for stderr.
    pub message: String,
    /// Whether the configuration was simply absent (no device, as on a host without RDMA).
    pub absent: bool,
}

/// The port as the environment describes it.
pub fn from_env() -> Result<PortOptions, ConfigError> {
    from_lookup(|k| std::env::var(k).ok())
}

/// [`from_env`] over any lookup (the tests give a map).
pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<PortOptions, ConfigError> {
    let bad = |message: String| ConfigError { message, absent: false };
    let Some(addr) = get("ROCE_ADDR").filter(|s| !s.is_empty()) else {
        return Err(ConfigError {
            message: "no device: ROCE_ADDR is not set (run the program with `roce exec -I ADDR -- PROGRAM`)".into(),
            absent: true,
        });
    };
    let local: IpAddr = addr.parse().map_err(|_| bad(format!("ROCE_ADDR={addr}: not an IP address")))?;
    let sa = match get("ROCE_SA").filter(|s| !s.is_empty()) {
        Some(s) => Some(s.parse::<IpAddr>().map_err(|_| bad(format!("ROCE_SA={s}: not an IP address")))?),
        None => None,
    };
    if let Some(sa) = sa {
        if sa.is_ipv4() != local.is_ipv4() {
            return Err(bad(format!("ROCE_SA={sa} and ROCE_ADDR={local} are of different families")));
        }
    }
    let transport = match get("ROCE_TRANSPORT").as_deref() {
        None | Some("") => None,
        Some("raw") => Some(Transport::Raw),
        Some("udp") => Some(Transport::Udp),
        Some(t) => return Err(bad(format!("ROCE_TRANSPORT={t}: expected raw or udp"))),
    };
    let mac = match get("ROCE_MAC").filter(|s| !s.is_empty()) {
        Some(m) => {
            Some(parse_mac(&m).ok_or_else(|| bad(format!("ROCE_MAC={m}: expected a unicast MAC aa:bb:cc:dd:ee:ff")))?)
        }
        None => None,
    };
    let iface = match get("ROCE_IFACE").filter(|s| !s.is_empty()) {
        Some(i) => i,
        None => iface_for(local).ok_or_else(|| {
            bad(format!("ROCE_ADDR={local}: no interface has this address or its subnet; set ROCE_IFACE"))
        })?,
    };
    let verbose = get("ROCE_VERBOSE").is_some_and(|v| v == "1");
    let congestion = match get("ROCE_CC").as_deref() {
        None | Some("") | Some("off") => roce_cm::rc::Congestion::Off,
        Some("dcqcn") => roce_cm::rc::Congestion::dcqcn(),
        Some(c) => return Err(bad(format!("ROCE_CC={c}: expected off or dcqcn"))),
    };
    Ok(PortOptions {
        iface,
        ibsim: None,
        local,
        prefix: None,
        mac,
        sa,
        pcap: get("ROCE_PCAP").filter(|s| !s.is_empty()).map(PathBuf::from),
        verbose,
        // With an SA, both paths, as `roce mckey --sa`; without, a Linux RoCE port's IGMP/MLD.
        paths: if sa.is_some() { MulticastPaths::BOTH } else { MulticastPaths::IGMP_MLD_ONLY },
        transport,
        fault: Vec::new(),
        rx_queues: 1,
        // Programs on this library have RC data paths (rping, perftest, the pingpongs): their
        // runs of packets go out as GSO frames on the raw transport, as the roce tools' do.
        gso: true,
        congestion,
        rxe_flush_icrc: match get("ROCE_RXE_FLUSH_ICRC").as_deref() {
            None | Some("") | Some("0") => false,
            Some("1") => true,
            Some(v) => return Err(bad(format!("ROCE_RXE_FLUSH_ICRC={v}: expected 0 or 1"))),
        },
    })
}

/// A unicast MAC `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return None;
    }
    let mut m = [0u8; 6];
    for (o, p) in m.iter_mut().zip(&parts) {
        if p.len() != 2 {
            return None;
        }
        *o = u8::from_str_radix(p, 16).ok()?;
    }
    (m[0] & 1 == 0 && m != [0; 6]).then_some(m)
}

/// The interface that holds `addr`, else the one whose subnet holds it.
fn iface_for(addr: IpAddr) -> Option<String> {
    let all = roce_net::raw::interfaces().ok()?;
    roce::plumbing::port::interface_for(&all, addr).map(|i| i.name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(pairs: &[(&str, &str)]) -> Result<PortOptions, ConfigError> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn no_address_is_no_device() {
        let e = cfg(&[]).unwrap_err();
        assert!(e.absent, "{}", e.message);
    }

    #[test]
    fn bad_values_name_the_variable() {
        for (pairs, var) in [
            (vec![("ROCE_ADDR", "nope")], "ROCE_ADDR=nope"),
            (vec![("ROCE_ADDR", "198.18.0.1"), ("ROCE_IFACE", "lo"), ("ROCE_SA", "fd00::1")], "ROCE_SA=fd00::1"),
            (vec![("ROCE_ADDR", "198.18.0.1"), ("ROCE_IFACE", "lo"), ("ROCE_TRANSPORT", "tcp")], "ROCE_TRANSPORT=tcp"),
            (vec![("ROCE_ADDR", "198.18.0.1"), ("ROCE_IFACE", "lo"), ("ROCE_MAC", "01:00:5e:00:00:01")], "ROCE_MAC="),
            (vec![("ROCE_ADDR", "198.18.0.1"), ("ROCE_IFACE", "lo"), ("ROCE_CC", "dctcp")], "ROCE_CC=dctcp"),
        ] {
            let e = cfg(&pairs).unwrap_err();
            assert!(!e.absent && e.message.contains(var), "{}", e.message);
        }
    }

    #[test]
    fn an_sa_means_both_paths() {
        let o = cfg(&[("ROCE_ADDR", "198.18.0.1"), ("ROCE_IFACE", "lo"), ("ROCE_SA", "198.18.0.2")]).unwrap();
        assert_eq!(o.paths, MulticastPaths::BOTH);
        let o = cfg(&[("ROCE_ADDR", "198.18.0.1"), ("ROCE_IFACE", "lo")]).unwrap();
        assert_eq!(o.paths, MulticastPaths::IGMP_MLD_ONLY);
    }

    #[test]
    fn roce_cc_turns_dcqcn_on() {
        let o = cfg(&[("ROCE_ADDR", "198.18.0.1"), ("ROCE_IFACE", "lo")]).unwrap();
        assert_eq!(o.congestion, roce_cm::rc::Congestion::Off);
        let o = cfg(&[("ROCE_ADDR", "198.18.0.1"), ("ROCE_IFACE", "lo"), ("ROCE_CC", "dcqcn")]).unwrap();
        assert_eq!(o.congestion, roce_cm::rc::Congestion::dcqcn());
    }
}
