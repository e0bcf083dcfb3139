//! Debian's connected-mode programs, unmodified, program against program with both ends over
//! roce (issue 35): `rping` (SEND, RDMA READ and WRITE, `-V` verifying every byte; and `-q`,
//! its own QP with `rdma_establish`), `ucmatose`,
//! and libibverbs' pingpong examples (`ibv_rc_pingpong`, with `-e` and `-N` too, `ibv_uc_pingpong`,
//! `ibv_srq_pingpong` with and without `-e`, `ibv_ud_pingpong`, and XRC's `ibv_xsrq_pingpong`:
//! an XRC domain, an XRC SRQ and XRC target and initiator QPs, with and without `-e`, and one
//! server with two clients on the one SRQ), `rdma_server`/`rdma_client` and
//! `rdma_xserver`/`rdma_xclient` (librdmacm's synchronous mode; the pair in RC and in XRC mode,
//! `-c x`: XRC through the CM), on raw sockets and, as nobody,
//! on the udp transport. What is asserted is what the peers saw: each program's own success
//! (rping's verification, the pingpongs' iteration reports), and in a capture of one end the
//! RC opcodes each program puts on the wire.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use crate::common;
use crate::common::netns::Netns;
use crate::debian;
use crate::library::exec;
use crate::veth::{as_nobody, finish_within, spawn, text, three_hosts};

/// One program in both roles: the server started first, the client after it listens.
struct Case {
    program: &'static str,
    server: Vec<String>,
    client: Vec<String>,
    /// What the server's and the client's outputs must hold.
    want: (&'static str, &'static str),
}

fn cases(server_addr: &str, pingpong_server: &str) -> Vec<Case> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let pp = |program: &'static str, extra: &[&str]| {
        let mut server = s(&["-g", "1", "-n", "200"]);
        server.extend(s(extra));
        let mut client = server.clone();
        client.push(pingpong_server.to_string());
        Case { program, server, client, want: ("200 iters in", "200 iters in") }
    };
    // XRC (issue 37): each side's initiator sends to the other's target QP, each message to the
    // XRC SRQ it names; the program prints "success" once every message arrived.
    let xsrq = |extra: &[&str]| {
        let mut server = s(&["-g", "1", "-n", "50"]);
        server.extend(s(extra));
        let mut client = server.clone();
        client.push(pingpong_server.to_string());
        Case { program: "ibv_xsrq_pingpong", server, client, want: ("success", "success") }
    };
    vec![
        Case {
            program: "rping",
            server: s(&["-s", "-a", server_addr, "-C", "20", "-V", "-S", "3000"]),
            client: s(&["-c", "-a", server_addr, "-C", "20", "-V", "-S", "3000"]),
            // The server's main thread waits for its DISCONNECT EVENT; the client may exit
            // (0: -V found no "data mismatch") before its CM thread prints it.
            want: ("server DISCONNECT EVENT", ""),
        },
        // -q: each side creates and moves its own QP (ibv_create_qp, rdma_init_qp_attr,
        // ibv_modify_qp) and hands its number to the CM in the connection parameters; the
        // client's REP comes as CONNECT_RESPONSE and it sends the RTU with rdma_establish.
        Case {
            program: "rping",
            server: s(&["-s", "-q", "-a", server_addr, "-C", "20", "-V", "-S", "3000"]),
            client: s(&["-c", "-q", "-a", server_addr, "-C", "20", "-V", "-S", "3000"]),
            want: ("server DISCONNECT EVENT", ""),
        },
        Case {
            program: "ucmatose",
            server: vec![],
            client: s(&["-s", server_addr]),
            want: ("return status 0", "return status 0"),
        },
        // librdmacm's synchronous mode: rdma_getaddrinfo, rdma_create_ep, rdma_get_request and
        // rdma_verbs.h's helpers on the CQs rdma_create_qp made for the id.
        Case {
            program: "rdma_server",
            server: s(&["-s", server_addr]),
            client: s(&["-s", server_addr]),
            want: ("rdma_server: end 0", "rdma_client: end 0"),
        },
        // The RC mode (its default) of the pair, then its XRC mode (-c x, issue 37): the
        // server's XRC_RECV id on RDMA_PS_IB gets its target QP and an XRC SRQ
        // (rdma_create_srq) and accepts with the SRQ's number as private data; the client's
        // XRC_SEND id sends one inline SEND naming it.
        Case { program: "rdma_xserver", server: vec![], client: s(&["-s", server_addr]), want: ("end 0", "end 0") },
        Case {
            program: "rdma_xserver",
            server: s(&["-c", "x"]),
            client: s(&["-c", "x", "-s", server_addr]),
            want: ("end 0", "end 0"),
        },
        pp("ibv_rc_pingpong", &[]),
        pp("ibv_rc_pingpong", &["-e"]),
        // -N: the SENDs through the work-request builder (ibv_create_qp_ex with send-ops
        // flags, ibv_qp_to_qp_ex, ibv_wr_start/ibv_wr_send/ibv_wr_set_sge/ibv_wr_complete).
        pp("ibv_rc_pingpong", &["-N"]),
        pp("ibv_uc_pingpong", &[]),
        pp("ibv_srq_pingpong", &[]),
        pp("ibv_srq_pingpong", &["-e"]),
        pp("ibv_ud_pingpong", &[]),
        xsrq(&[]),
        xsrq(&["-e"]),
    ]
}

/// Builds a server's command: the program, its arguments, where its capture goes.
type ServerCmd<'a> = &'a dyn Fn(&Path, &[String], Option<&Path>) -> Command;

/// Run every case; `server`/`client` build the commands.
fn run_cases(cases: &[Case], dir: &Path, server: ServerCmd<'_>, client: &dyn Fn(&Path, &[String]) -> Command) {
    let mut log = String::new();
    for (i, c) in cases.iter().enumerate() {
        let bin = debian::bin(c.program);
        let client_bin = match c.program {
            "rdma_server" => debian::bin("rdma_client"),
            "rdma_xserver" => debian::bin("rdma_xclient"),
            _ => bin.clone(),
        };
        let pcap = dir.join(format!("{i}-{}.pcap", c.program));
        let srv = spawn(server(&bin, &c.server, Some(&pcap)));
        std::thread::sleep(Duration::from_millis(1000));
        let cli = finish_within(spawn(client(&client_bin, &c.client)), Duration::from_secs(60));
        let srv: Output = finish_within(srv, Duration::from_secs(30));
        let (ts, tc) = (text(&srv), text(&cli));
        log.push_str(&format!("== {} {:?}\nserver:\n{ts}\nclient:\n{tc}\n", c.program, c.client));
        std::fs::write(dir.join("outputs.txt"), &log).unwrap();
        assert!(srv.status.success() && ts.contains(c.want.0), "{} server {:?}:\n{ts}", c.program, c.server);
        assert!(cli.status.success() && tc.contains(c.want.1), "{} client {:?}:\n{tc}", c.program, c.client);
        let wire = opcodes(&pcap);
        let xrc = c.program == "ibv_xsrq_pingpong" || c.server.iter().any(|a| a == "x");
        let expect: &[&str] = match c.program {
            _ if xrc => &["XRC_SEND_", "XRC_ACKNOWLEDGE"],
            "rping" => &["RC_SEND_ONLY", "RC_RDMA_READ_REQUEST", "RC_RDMA_READ_RESPONSE", "RC_RDMA_WRITE", "RC_ACK"],
            "ucmatose" | "ibv_rc_pingpong" | "ibv_srq_pingpong" | "rdma_server" | "rdma_xserver" => {
                &["RC_SEND_", "RC_ACK"]
            }
            "ibv_uc_pingpong" => &["UC_SEND_"],
            _ => &["UD_SEND_ONLY"],
        };
        for op in expect {
            assert!(wire.iter().any(|l| l.contains(op)), "{}: no {op} in the capture:\n{}", c.program, wire.join("\n"));
        }
        if c.program != "ibv_ud_pingpong" && c.program != "ibv_uc_pingpong" {
            // A reliable connection loses nothing on a veth: no NAK, no retransmission.
            assert!(!wire.iter().any(|l| l.contains("NAK")), "{}: NAKs:\n{}", c.program, wire.join("\n"));
        }
    }
}

/// The capture's transport lines, as `roce decode` prints them.
fn opcodes(pcap: &Path) -> Vec<String> {
    let dec = Command::new(env!("CARGO_BIN_EXE_roce")).arg("decode").arg(pcap).output().unwrap();
    String::from_utf8_lossy(&dec.stdout).lines().map(str::to_string).collect()
}

#[test]
fn debian_connected_programs_against_themselves_on_raw_sockets() {
    let ns = Netns::bridge("capirc", 2);
    let dir = common::artefact_dir("capi_rc_raw");
    let server = |bin: &Path, args: &[String], pcap: Option<&Path>| {
        let mut roce = vec!["-I", "198.18.1.3", "--iface", "veth1", "--transport", "raw"];
        let p = pcap.map(|p| p.display().to_string()).unwrap_or_default();
        if pcap.is_some() {
            roce.extend(["--pcap", p.as_str()]);
        }
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        exec(&ns, &roce, bin, &a)
    };
    let client = |bin: &Path, args: &[String]| {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        exec(&ns, &["-I", "198.18.1.1", "--iface", "veth0", "--transport", "raw"], bin, &a)
    };
    // The pingpongs' TCP exchange goes to the server host's kernel address (veth1's).
    run_cases(&cases("198.18.1.3", "198.18.1.11"), &dir, &server, &client);
}

#[test]
fn debian_connected_programs_against_themselves_as_nobody_on_udp() {
    let (a, b, _c) = three_hosts("capircu");
    let dir = common::artefact_dir("capi_rc_udp");
    let server = |bin: &Path, args: &[String], pcap: Option<&Path>| {
        let mut roce = vec!["-I", "198.18.7.2", "--transport", "udp"];
        let p = pcap.map(|p| p.display().to_string()).unwrap_or_default();
        if pcap.is_some() {
            roce.extend(["--pcap", p.as_str()]);
        }
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        as_nobody(&b, &roce, bin, &a)
    };
    let client = |bin: &Path, args: &[String]| {
        let x: Vec<&str> = args.iter().map(String::as_str).collect();
        as_nobody(&a, &["-I", "198.18.7.1", "--transport", "udp"], bin, &x)
    };
    // The capture is written by nobody: a directory it may write to.
    let _ = Command::new("chmod").arg("777").arg(&dir).status();
    run_cases(&cases("198.18.7.2", "198.18.7.2"), &dir, &server, &client);
}

/// `ibv_xsrq_pingpong -c 2`: one server, one XRC SRQ, two clients (raw): each client's XRC
/// SENDs reach the server's target QP for it, and every one names the server's one SRQ; the
/// server answers each client through its own initiator.
#[test]
fn debian_xsrq_pingpong_one_server_two_clients_share_its_srq() {
    let ns = Netns::bridge("capixrc", 3);
    let dir = common::artefact_dir("capi_xsrq_two_clients");
    let bin = debian::bin("ibv_xsrq_pingpong");
    let pcap = dir.join("server.pcap");
    let roce = |ip: &'static str, iface: &'static str| vec!["-I", ip, "--iface", iface, "--transport", "raw"];
    let mut srv_opts = roce("198.18.1.3", "veth1");
    let p = pcap.display().to_string();
    srv_opts.extend(["--pcap", p.as_str()]);
    let args = ["-g", "1", "-n", "50"];
    let srv = spawn(exec(&ns, &srv_opts, &bin, &[&args[..], &["-c", "2"]].concat()));
    std::thread::sleep(Duration::from_millis(1000));
    let clients: Vec<_> = [("198.18.1.1", "veth0"), ("198.18.1.2", "veth2")]
        .into_iter()
        .map(|(ip, iface)| spawn(exec(&ns, &roce(ip, iface), &bin, &[&args[..], &["198.18.1.11"]].concat())))
        .collect();
    let outs: Vec<Output> = clients.into_iter().map(|c| finish_within(c, Duration::from_secs(60))).collect();
    let srv = finish_within(srv, Duration::from_secs(30));
    let ts = text(&srv);
    let mut log = format!("server:\n{ts}\n");
    for (i, o) in outs.iter().enumerate() {
        log.push_str(&format!("client {i}:\n{}\n", text(o)));
    }
    std::fs::write(dir.join("outputs.txt"), &log).unwrap();
    assert!(srv.status.success() && ts.contains("success"), "{log}");
    assert!(outs.iter().all(|o| o.status.success() && text(o).contains("success")), "{log}");
    // The server's own lines: "local: ... QPN RECV 000011 SEND 000012, PSN ..., SRQN 000001".
    let field = |line: &str, key: &str| -> String {
        line.split(key).nth(1).map(|r| r.trim_start().chars().take(6).collect()).unwrap_or_default()
    };
    let locals: Vec<&str> = ts.lines().filter(|l| l.trim_start().starts_with("local:")).collect();
    assert_eq!(locals.len(), 2, "{ts}");
    let recv_qps: Vec<u32> =
        locals.iter().map(|l| u32::from_str_radix(&field(l, "QPN RECV"), 16).unwrap_or(0)).collect();
    let srqn = u32::from_str_radix(&field(locals[0], "SRQN"), 16).unwrap_or(0);
    assert!(locals.iter().all(|l| field(l, "SRQN") == field(locals[0], "SRQN")), "one SRQ: {ts}");
    // In the server's capture: XRC SENDs into both of its target QPs, all naming its SRQ.
    let wire = opcodes(&pcap);
    for qpn in &recv_qps {
        let to_qp = format!("QP={qpn:#08x}");
        let sends: Vec<&String> =
            wire.iter().filter(|l| l.contains("→ 198.18.1.3 RoCEv2 XRC_SEND_") && l.contains(&to_qp)).collect();
        assert!(!sends.is_empty(), "no XRC SEND into target QP {qpn:#x}:\n{}", wire.join("\n"));
        let srq = format!("XRCSRQ={srqn:#08x}");
        assert!(sends.iter().all(|l| l.contains(&srq)), "each names SRQ {srqn:#x}:\n{sends:#?}");
    }
    assert!(!wire.iter().any(|l| l.contains("NAK")), "NAKs:\n{}", wire.join("\n"));
}
