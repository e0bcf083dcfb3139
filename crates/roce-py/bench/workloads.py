#!/usr/bin/env python3
"""The frames of the per-kind benchmark (bench.py) and the captures of the decode benchmark
against tshark (spec/benchmarks.md), built with roce's own layers. Deterministic for a seed.

    python crates/roce-py/bench/workloads.py --out target/bench-captures [--frames 20000]

writes four pcaps there (Ethernet, microsecond timestamps, 1 us apart):

- data-mix.pcap   issue 36's mix: RC, UC and UD data frames with their extension headers,
                  35 % IPv6, payloads of 0-1,023 bytes, a third with a corrupted ICRC;
- mad-heavy.pcap  SA MCMemberRecord Set/Delete and their GetResp, SA ServiceRecord Get and
                  CM REQ/REP/RTU/DREQ/DREP over QP1, one in ten a data frame;
- bad-icrc.pcap   the data frames of the mix, every one with a corrupted ICRC;
- ipv6.pcap       the data frames of the mix, every one over IPv6.

The capture of the README's first figures is `roce bench decode`'s own (`--keep PATH`):
roce_decode::samples_mixed, two data frames in three and the sample frames (MADs, CM, ARP,
IGMP, MLD, ND) in turn, one frame in 16 with a bad ICRC.
"""

import argparse
import os
import random
import struct
import sys

import roce
from roce import (AETH, BTH, CM_DREP, CM_DREQ, CM_REP, CM_REQ, CM_RTU, DETH, IETH, MAD, RETH, SA, UDP,
                  AtomicAckETH, AtomicETH, Ether, ImmDt, IPv4, IPv6, MCMemberRecord, ServiceRecord)

L2 = dict(src="02:00:00:00:00:01", dst="52:54:00:12:34:56")

# (opcode, carries a payload): RC, UC and UD opcodes and, through roce.opcode_headers, their
# extension headers.
OPCODES = [
    (0x00, True), (0x04, True), (0x05, True), (0x06, True), (0x0A, True), (0x0B, True), (0x0C, False),
    (0x10, True), (0x11, False), (0x12, False), (0x13, False), (0x14, False), (0x17, True),
    (0x24, True), (0x25, True), (0x2A, True), (0x2B, True),
    (0x64, True), (0x65, True),
]


def _ext(name, r):
    """An extension header with random fields."""
    if name == "deth":
        return DETH(q_key=r.getrandbits(32), src_qp=r.randrange(2, 1 << 24))
    if name == "reth":
        return RETH(va=r.getrandbits(64), r_key=r.getrandbits(32), dma_len=r.getrandbits(16))
    if name == "aeth":
        return AETH(syndrome=r.choice([0x00, 0x1F, 0x60, 0x20]), msn=r.getrandbits(24))
    if name == "atomic_eth":
        return AtomicETH(va=r.getrandbits(64) & ~7, r_key=r.getrandbits(32), swap_add=r.getrandbits(64),
                         compare=r.getrandbits(64))
    if name == "atomic_ack_eth":
        return AtomicAckETH(orig=r.getrandbits(64))
    if name == "immdt":
        return ImmDt(imm_data=r.getrandbits(32))
    if name == "ieth":
        return IETH(r_key=r.getrandbits(32))
    raise ValueError(name)


def corrupt_icrc(b):
    """The frame with its ICRC's last byte flipped (where the UDP length says it ends)."""
    ip = 14
    if b[12:14] == b"\x86\xdd":
        udp = ip + 40
    else:
        udp = ip + (b[ip] & 15) * 4
    end = udp + struct.unpack_from(">H", b, udp + 4)[0]
    return b[:end - 1] + bytes([b[end - 1] ^ 0x5A]) + b[end:]


def data_frame(r, v6, payload_len, bad, opcodes=OPCODES):
    """One RoCEv2 data frame: a random opcode of `opcodes` with its extension headers, a
    payload of `payload_len` bytes if the opcode carries one."""
    op, carries = r.choice(opcodes)
    if v6:
        ip = IPv6(src="fd00::1", dst=f"fd00::{r.randrange(2, 10):x}")
    else:
        ip = IPv4(src="198.18.0.1", dst=f"198.18.0.{r.randrange(2, 10)}")
    p = Ether(**L2) / ip / UDP(src_port=r.randrange(0xC000, 0x10000)) / BTH(
        opcode=op, dest_qp=r.randrange(2, 1 << 24), psn=r.getrandbits(24), ack_req=r.random() < 0.5)
    for h in roce.opcode_headers(op):
        p = p / _ext(h, r)
    if carries and payload_len:
        p = p / r.randbytes(payload_len)
    b = bytes(p)
    return corrupt_icrc(b) if bad else b


def mad_frame(r, i):
    """One MAD over QP1: SA MCMemberRecord Set/Delete and GetResp, SA ServiceRecord Get, CM
    REQ/REP/RTU/DREQ/DREP, in turn."""
    base = Ether(**L2) / IPv4(src="198.18.0.1", dst="198.18.0.2") / UDP() / BTH(dest_qp=1, ack_req=True) / DETH(
        q_key=0x80010000, src_qp=1)
    k = i % 8
    tid = r.getrandbits(48)
    mgid = f"ff12:401b:ffff::{r.getrandbits(16):x}:{r.getrandbits(16):x}"
    if k in (0, 1, 2):
        method = (0x02, 0x15, 0x81)[k]
        p = base / MAD(method=method, tid=tid) / SA(component_mask=0x130C7) / MCMemberRecord(
            mgid=mgid, port_gid="::ffff:198.18.0.1", join_state=1, q_key=0x80010000, mlid=0xC000 + (i & 0xFF))
    elif k == 3:
        p = base / MAD(method=0x01, tid=tid) / SA(component_mask=0x02) / ServiceRecord(
            service_id=0x0106_0000_0000_0000 | r.getrandbits(16))
    elif k == 4:
        p = base / MAD(tid=tid) / CM_REQ(local_comm_id=r.getrandbits(32), service_id=0x0106_0000_0000_4853,
                                         local_qpn=r.getrandbits(24), starting_psn=r.getrandbits(24),
                                         partition_key=0xFFFF, path_mtu=3)
    elif k == 5:
        p = base / MAD(tid=tid) / CM_REP(local_comm_id=r.getrandbits(32), remote_comm_id=r.getrandbits(32),
                                         local_qpn=r.getrandbits(24), starting_psn=r.getrandbits(24))
    elif k == 6:
        p = base / MAD(tid=tid) / CM_RTU(local_comm_id=r.getrandbits(32), remote_comm_id=r.getrandbits(32))
    else:
        msg = CM_DREQ if r.random() < 0.5 else CM_DREP
        p = base / MAD(tid=tid) / msg(local_comm_id=r.getrandbits(32), remote_comm_id=r.getrandbits(32))
    return bytes(p)


def data_mix(n, seed=36):
    """Issue 36's mix: 35 % IPv6, payloads of 0-1,023 bytes, a third with a corrupted ICRC."""
    r = random.Random(seed)
    return [data_frame(r, r.random() < 0.35, r.randrange(1024), r.random() < 1 / 3) for _ in range(n)]


# The per-kind benchmark's kinds: name ▶ a function of (random, index) giving one frame.
SMALL, LARGE = (0, 64), (960, 1023)
CARRYING = [o for o in OPCODES if o[1]]


def _kind(v6, size, bad):
    lo, hi = size
    ops = OPCODES if size == SMALL else CARRYING
    return lambda r, i: data_frame(r, v6, r.randint(lo, hi), bad, ops)


KINDS = {}
for _v6 in (False, True):
    for _size, _sname in ((SMALL, "0-64 B"), (LARGE, "~1 KiB")):
        for _bad in (False, True):
            KINDS[f"IPv{6 if _v6 else 4} {_sname} {'bad' if _bad else 'good'} ICRC"] = _kind(_v6, _size, _bad)
KINDS["SA MCMemberRecord MADs"] = lambda r, i: mad_frame(r, i % 3)


def kind_frames(name, n, seed=36):
    r = random.Random(seed)
    return [KINDS[name](r, i) for i in range(n)]


def write_pcap(path, frames):
    """A pcap (Ethernet, microsecond timestamps) of `frames`, 1 us apart."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        buf = bytearray()
        for i, fr in enumerate(frames):
            buf += struct.pack("<IIII", 1_764_460_800 + i // 1_000_000, i % 1_000_000, len(fr), len(fr)) + fr
        f.write(buf)


def captures(n, seed=36):
    """The four captures: name ▶ frames."""
    r = random.Random(seed)
    mad = [mad_frame(r, i) if i % 10 else data_frame(r, False, r.randrange(1024), False) for i in range(n)]
    bad = [data_frame(r, r.random() < 0.35, r.randrange(1024), True) for _ in range(n)]
    v6 = [data_frame(r, True, r.randrange(1024), r.random() < 1 / 3) for _ in range(n)]
    return {"data-mix": data_mix(n, seed), "mad-heavy": mad, "bad-icrc": bad, "ipv6": v6}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for the pcaps")
    ap.add_argument("--frames", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=36)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name, frames in captures(a.frames, a.seed).items():
        path = os.path.join(a.out, f"{name}.pcap")
        write_pcap(path, frames)
        print(f"{path}: {len(frames)} frames, {sum(map(len, frames))} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
