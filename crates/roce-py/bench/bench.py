#!/usr/bin/env python3
"""roce vs scapy, side by side in one run (a benchmark, not a test).

    python bench/bench.py [--frames 20000] [--capture-frames 1000000] [--scapy-read 20000]
                          [--kind-frames 2000] [--kinds-only]

1. dissect: roce.decode(b) vs scapy's Ether(b) on the same frames (a mix of RC SEND, RDMA
   WRITE, ACK, UD SEND and SA MCMemberRecord frames, as a RoCE capture holds), the results kept
   in a list and, on a second row, each dropped at once; then dissect
   and read two fields, as scripts do: roce.Frame(b).bth.psn and .opcode vs scapy's
   Ether(b)[BTH].psn and .opcode (and roce.decode(b)["bth"] for the same two);
2. build: RDMA WRITE frames with their ICRC, roce's layers (and roce.encode of a record) vs
   scapy's Ether()/IP()/UDP()/BTH()/Raw(RETH + payload) (scapy.contrib.roce has no RETH);
3. read: roce.dataframe of a capture of --capture-frames frames vs scapy's rdpcap; scapy reads
   only the first --scapy-read frames and its time is scaled to the whole capture;
4. per kind (issue 36): for each kind of frame of workloads.py (IPv4/IPv6 x payload 0-64 B /
   ~1 KiB x good/bad ICRC, SA MCMemberRecord MADs) and issue 36's 20,000-frame data mix,
   --kind-frames frames each (the mix: --frames): roce.Frame(b).bth.psn vs Ether(b)[BTH].psn,
   roce.decode(b) vs Ether(b) (each result dropped at once, as a script that looks at each
   frame and moves on), and the same frame built from its layers and bytes() (scapy: Ether /
   IP or IPv6 / UDP / BTH / Raw(extension headers + payload + pad), its ICRC given by hand for
   a bad one; scapy.contrib.roce has no extension headers). --kinds-only runs this part alone.

Run it with a release build of the package (pip install ./crates/roce-py builds one). Times
are this process's CPU time (time.process_time), so other programs on the machine do not
skew one side.
"""

import argparse
import json
import logging
import os
import struct
import sys
import tempfile
import time

logging.getLogger("scapy.runtime").setLevel(logging.ERROR)

import roce  # noqa: E402
from roce import BTH, DETH, MAD, RETH, SA, UDP, AETH, Ether, IPv4, IPv6, MCMemberRecord  # noqa: E402
from scapy.contrib.roce import BTH as SBTH  # noqa: E402
from scapy.layers.inet import IP as SIP  # noqa: E402
from scapy.layers.inet import UDP as SUDP  # noqa: E402
from scapy.layers.inet6 import IPv6 as SIPv6  # noqa: E402
from scapy.layers.l2 import Ether as SEther  # noqa: E402
from scapy.packet import Raw  # noqa: E402
from scapy.utils import rdpcap  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402

L2 = Ether(src="02:00:00:00:00:01", dst="52:54:00:12:34:56")
V4 = IPv4(src="198.18.0.1", dst="198.18.0.2")


def mix(n):
    """n frames of a typical RoCE capture."""
    kinds = [
        lambda i: L2 / V4 / UDP() / BTH(opcode=0x04, dest_qp=0x11, psn=i & 0xFFFFFF) / (b"s" * 64),
        lambda i: L2 / V4 / UDP() / BTH(opcode=0x0A, dest_qp=0x11, psn=i & 0xFFFFFF) / RETH(va=0x7F0000001000 + i, r_key=0x1234, dma_len=256) / (b"w" * 256),
        lambda i: L2 / V4 / UDP() / BTH(opcode=0x11, dest_qp=0x12, psn=i & 0xFFFFFF) / AETH(syndrome=0x1F, msn=i & 0xFFFFFF),
        lambda i: L2 / V4 / UDP() / BTH(opcode=0x64, dest_qp=0x20) / DETH(q_key=0x11111111, src_qp=0x21) / (b"u" * 100),
        lambda i: L2 / V4 / UDP() / BTH(dest_qp=1, ack_req=True) / DETH(q_key=0x80010000, src_qp=1) / MAD(method=2, tid=i)
        / SA(component_mask=0x130C7) / MCMemberRecord(mgid="ff12:401b:ffff::ef01:203", port_gid="::ffff:198.18.0.1", join_state=1),
    ]
    return [bytes(kinds[i % len(kinds)](i)) for i in range(n)]


def timed(f):
    # CPU time of this process: the machine is shared, and wall time would charge one side
    # for the other programs' turns.
    t = time.process_time()
    f()
    return time.process_time() - t


def row(what, n_roce, t_roce, n_scapy, t_scapy, note=""):
    r_rate, s_rate = n_roce / t_roce, n_scapy / t_scapy
    print(f"{what:<44} {r_rate:>14,.0f}/s {s_rate:>12,.0f}/s {r_rate / s_rate:>8.0f}x  {note}")
    return r_rate / s_rate


EXT_LAYERS = {"deth": DETH, "reth": RETH, "aeth": AETH, "atomic_eth": roce.AtomicETH, "atomic_ack_eth": roce.AtomicAckETH,
              "immdt": roce.ImmDt, "ieth": roce.IETH}


def build_args(b):
    """What a script would give to build frame `b` again, for roce's layers and for scapy's: (roce
    layer constructors and the payload, scapy's)."""
    r = roce.decode(b)
    eth = (Ether, {"src": r["eth"]["src"], "dst": r["eth"]["dst"]})
    v6 = r["ip"]["version"] == 6
    ip = (IPv6 if v6 else IPv4, {"src": r["ip"]["src"], "dst": r["ip"]["dst"]})
    udp = (UDP, {"src_port": r["udp"]["src_port"]})
    bth = r["bth"]
    bth_kw = {"opcode": bth["opcode"], "dest_qp": bth["dest_qp"], "psn": bth["psn"], "ack_req": bth["ack_req"]}
    s_bth = {"opcode": bth["opcode"], "dqpn": bth["dest_qp"], "psn": bth["psn"], "ackreq": int(bth["ack_req"]),
             "padcount": bth["pad_count"]}
    if r["icrc"] == "bad":
        bth_kw["icrc"] = r["icrc_value"]
        # scapy's icrc field is the 4 bytes read big-endian; roce's value the ICRC (little-endian on the wire).
        s_bth["icrc"] = int.from_bytes(struct.pack("<I", r["icrc_value"]), "big")
    layers = [eth, ip, udp, (BTH, bth_kw)]
    if "mcmember" in r:
        m, mc = r["mad"], r["mcmember"]
        layers += [(DETH, {"q_key": r["deth"]["q_key"], "src_qp": r["deth"]["src_qp"]}),
                   (MAD, {"method": m["method"], "tid": m["tid"]}),
                   (SA, {"component_mask": r["sa"]["component_mask"]}),
                   (MCMemberRecord, {k: mc[k] for k in ("mgid", "port_gid", "join_state", "q_key", "mlid")})]
        payload = b""
    else:
        layers += [(cls, r[m]) for m, cls in EXT_LAYERS.items() if m in r]
        payload = bytes.fromhex(r.get("payload", ""))
    # scapy: its BTH, then the bytes it has no layers for (extension headers, MAD, payload, pad).
    ip_len = 40 if v6 else 20
    rest = b[14 + ip_len + 8 + 12:14 + ip_len + r["udp"]["length"] - 4]
    s_ip = {"src": r["ip"]["src"], "dst": r["ip"]["dst"]}
    if not v6:
        s_ip.update(flags="DF", id=0)
    return layers, payload, (v6, s_ip, r["udp"]["src_port"], s_bth, rest)


def roce_build(args):
    layers, payload = args[0], args[1]
    p = None
    for cls, kw in layers:
        p = cls(**kw) if p is None else p / cls(**kw)
    return bytes(p / payload) if payload else bytes(p)


def scapy_build(args):
    v6, ip, sport, bth, rest = args[2]
    return bytes(SEther(src="02:00:00:00:00:01", dst="52:54:00:12:34:56") / (SIPv6(**ip) if v6 else SIP(**ip))
                 / SUDP(sport=sport, dport=4791, chksum=0) / SBTH(**bth) / Raw(rest))


def per_kind(kind_frames, mix_frames):
    """Section 4: per kind of frame, us/frame of roce and scapy and their ratio (CPU time)."""
    print()
    print(f"per kind (issue 36), CPU us/frame: {kind_frames} frames a kind, the mix {mix_frames}; load {os.getloadavg()[0]:.1f}")
    print(f"{'kind':<24} {'Frame(b).bth.psn':>26} {'decode(b) vs Ether(b)':>26} {'layers -> bytes':>26}")
    print(f"{'':<24}" + f" {'roce':>7} {'scapy':>8} {'ratio':>8}" * 3)
    kinds = [(k, workloads.kind_frames(k, kind_frames)) for k in workloads.KINDS]
    kinds.append(("issue 36 mix", workloads.data_mix(mix_frames)))
    out = {}
    for name, frames in kinds:
        n = len(frames)
        args = [build_args(b) for b in frames]
        for a, b in zip(args[:50], frames):
            assert roce_build(a) == b and scapy_build(a) == b, (name, b.hex())

        def each(f):
            for b in frames:
                f(b)

        cols = []
        # Each pair timed twice, the better of the two kept (the machine is shared).
        for r_f, s_f in ((lambda: [roce.Frame(b).bth.psn for b in frames], lambda: [SEther(b)[SBTH].psn for b in frames]),
                         (lambda: each(roce.decode), lambda: each(SEther)),
                         (lambda: [roce_build(a) for a in args], lambda: [scapy_build(a) for a in args])):
            tr = min(timed(r_f), timed(r_f)) / n * 1e6
            ts = min(timed(s_f), timed(s_f)) / n * 1e6
            cols.append((tr, ts, ts / tr))
        out[name] = cols
        print(f"{name:<24}" + "".join(f" {tr:>7.2f} {ts:>8.1f} {x:>7.0f}x" for tr, ts, x in cols))
    return out


def write_capture(path, frames, n):
    """A pcap of n frames cycling through `frames` (1 us apart)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        recs = []
        for fr in frames:
            recs.append((struct.pack("<IIII", 0, 0, len(fr), len(fr)), fr))
        buf = bytearray()
        for i in range(n):
            h, fr = recs[i % len(recs)]
            buf += struct.pack("<II", 1_700_000_000 + i // 1_000_000, i % 1_000_000) + h[8:] + fr
            if len(buf) > 1 << 22:
                f.write(buf)
                buf.clear()
        f.write(buf)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=20_000)
    ap.add_argument("--capture-frames", type=int, default=1_000_000)
    ap.add_argument("--scapy-read", type=int, default=20_000)
    ap.add_argument("--kind-frames", type=int, default=2_000, help="frames of each kind in the per-kind section")
    ap.add_argument("--kinds-only", action="store_true", help="run the per-kind section only")
    a = ap.parse_args()
    n = a.frames
    print(f"python {sys.version.split()[0]}, roce {roce.__version__}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    if a.kinds_only:
        per_kind(a.kind_frames, n)
        return
    print(f"{'':<44} {'roce':>16} {'scapy':>14} {'ratio':>9}")

    frames = mix(n)
    t_roce = timed(lambda: [roce.decode(b) for b in frames])
    t_scapy = timed(lambda: [SEther(b) for b in frames])
    row(f"dissect {n} frames (decode vs Ether(b))", n, t_roce, n, t_scapy)

    # The same, each result dropped at once (a script that looks at each frame and moves on):
    # what keeping 20,000 results alive costs (memory, the cycle collector) is left out.
    def each(f):
        for b in frames:
            f(b)

    row("  (the same, each result dropped at once)", n, timed(lambda: each(roce.decode)), n, timed(lambda: each(SEther)))

    # Dissect and read two fields, as scripts do: scapy's pkt[BTH].psn and .opcode.
    def scapy_read():
        for b in frames:
            p = SEther(b)
            p[SBTH].psn
            p[SBTH].opcode

    def frame_read():
        for b in frames:
            f = roce.Frame(b)
            f.bth.psn
            f.bth.opcode

    def decode_read():
        for b in frames:
            d = roce.decode(b)["bth"]
            d["psn"]
            d["opcode"]

    def frame_only():
        for b in frames:
            roce.Frame(b)

    t_scapy_read = timed(scapy_read)
    row("dissect + read bth.psn, opcode: roce.Frame(b)", n, timed(frame_read), n, t_scapy_read)
    row("  (roce.decode(b)['bth'] and the same two)", n, timed(decode_read), n, t_scapy_read)
    row("  (roce.Frame(b) alone: checked, nothing read)", n, timed(frame_only), n, t_scapy)
    data_frames = [b for i, b in enumerate(frames) if i % 5 != 4]
    t_scapy_data = timed(lambda: [SEther(b)[SBTH].psn for b in data_frames])
    row("  (no MAD frames: Frame(b).bth.psn vs Ether(b)[BTH].psn)", len(data_frames),
        timed(lambda: [roce.Frame(b).bth.psn for b in data_frames]), len(data_frames), t_scapy_data)
    # The floor of any dict-returning dissector: json.loads of the CLI's own lines.
    lines = [json.dumps(roce.decode(b)) for b in frames]
    row("  (json.loads of the same records, for scale)", n, timed(lambda: [json.loads(x) for x in lines]), n, t_scapy)
    t_sum = timed(lambda: [roce.summary(b) for b in frames])
    row("  (roce.summary: the one-line text only)", n, t_sum, n, t_scapy)

    payload = b"w" * 256

    def roce_layers():
        for i in range(n):
            bytes(L2 / V4 / UDP() / BTH(opcode=0x0A, dest_qp=0x11, psn=i, ack_req=True)
                  / RETH(va=0x7F0000001000, r_key=0x1234, dma_len=256) / payload)

    def roce_records():
        for i in range(n):
            roce.encode({"kind": "rocev2", "eth": {"src": "02:00:00:00:00:01", "dst": "52:54:00:12:34:56"},
                         "ip": {"src": "198.18.0.1", "dst": "198.18.0.2"},
                         "bth": {"opcode": 0x0A, "dest_qp": 0x11, "psn": i, "ack_req": True},
                         "reth": {"va": 0x7F0000001000, "r_key": 0x1234, "dma_len": 256}, "payload": payload})

    reth = struct.pack(">QII", 0x7F0000001000, 0x1234, 256)

    def scapy_build():
        for i in range(n):
            bytes(SEther(src="02:00:00:00:00:01", dst="52:54:00:12:34:56") / SIP(src="198.18.0.1", dst="198.18.0.2", flags="DF", id=0)
                  / SUDP(sport=0xC000, dport=4791, chksum=0) / SBTH(opcode=0x0A, dqpn=0x11, psn=i, ackreq=1) / Raw(reth + payload))

    # The same frame from both (scapy's BTH computes the ICRC): checked before timing.
    a1 = bytes(L2 / V4 / UDP() / BTH(opcode=0x0A, dest_qp=0x11, psn=0, ack_req=True) / RETH(va=0x7F0000001000, r_key=0x1234, dma_len=256) / payload)
    b1 = bytes(SEther(src="02:00:00:00:00:01", dst="52:54:00:12:34:56") / SIP(src="198.18.0.1", dst="198.18.0.2", flags="DF", id=0)
               / SUDP(sport=0xC000, dport=4791, chksum=0) / SBTH(opcode=0x0A, dqpn=0x11, psn=0, ackreq=1) / Raw(reth + payload))
    assert a1 == b1, (a1.hex(), b1.hex())
    t_scapy = timed(scapy_build)
    row(f"build {n} RDMA WRITE frames + ICRC (layers)", n, timed(roce_layers), n, t_scapy)
    row("  (roce.encode of a dict, no layer objects)", n, timed(roce_records), n, t_scapy)

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "big.pcap")
        write_capture(path, frames[:50], a.capture_frames)
        small = os.path.join(d, "small.pcap")
        write_capture(small, frames[:50], min(a.scapy_read, a.capture_frames))
        t_df = timed(lambda: roce.dataframe(path))
        df = roce.dataframe(small)
        t_rd = timed(lambda: rdpcap(small))
        scaled = t_rd * a.capture_frames / min(a.scapy_read, a.capture_frames)
        row(f"read {a.capture_frames} frames into a DataFrame", a.capture_frames, t_df, a.capture_frames, scaled,
            f"(rdpcap of {min(a.scapy_read, a.capture_frames)} frames, scaled; {len(df.columns)} columns)")
        t_it = timed(lambda: sum(1 for _ in roce.read(path)))
        row("  (roce.read: the dicts, no DataFrame)", a.capture_frames, t_it, a.capture_frames, scaled)
        t_fr = timed(lambda: [f.bth.psn for f in roce.frames(path)])
        row("  (roce.frames: a Frame each, bth.psn read)", a.capture_frames, t_fr, a.capture_frames, scaled)
        print(f"CPU time: roce.dataframe {a.capture_frames} frames {t_df:.1f} s; rdpcap {min(a.scapy_read, a.capture_frames)} frames {t_rd:.1f} s")
    per_kind(a.kind_frames, n)


if __name__ == "__main__":
    main()
