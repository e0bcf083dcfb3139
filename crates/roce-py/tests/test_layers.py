"""Layers built with `/`: checked against scapy's ICRC and dissection and tshark's."""

import json
import subprocess

import pytest
import roce
from roce import (AETH, BTH, CM_REP, CM_REQ, CM_RTU, DETH, IETH, XRCETH, IPv4, IPv6, MAD, RETH, SA, UDP, AtomicAckETH,
                  AtomicETH, Dot1Q, Ether, ImmDt, MCMemberRecord, ClassPortInfo, ServiceRecord)
from scapy.contrib.roce import BTH as SBTH
from scapy.layers.inet import IP as SIP
from scapy.layers.inet import UDP as SUDP
from scapy.layers.inet6 import IPv6 as SIPv6
from scapy.layers.l2 import Dot1Q as SDot1Q
from scapy.layers.l2 import Ether as SEther
from scapy.packet import Raw

from conftest import tshark

V4 = IPv4(src="198.18.0.1", dst="198.18.0.2")
L2 = Ether(src="02:00:00:00:00:01", dst="52:54:00:12:34:56")
GSI = BTH(dest_qp=1, ack_req=True) / DETH(q_key=0x80010000, src_qp=1)

# One packet of every layer (name, packet).
PACKETS = [
    ("rc_send", L2 / V4 / UDP() / BTH(opcode=0x04, dest_qp=0x11, psn=5, ack_req=True) / b"hello"),
    ("rc_write", L2 / V4 / UDP() / BTH(opcode=0x0a, dest_qp=0x11, psn=6) / RETH(va=0x7f0012345678, r_key=0x1234, dma_len=6) / b"abcdef"),
    ("rc_write_imm", L2 / V4 / UDP() / BTH(opcode=0x0b, dest_qp=0x11, psn=7) / RETH(va=1, r_key=2, dma_len=3) / ImmDt(imm_data=0xdeadbeef) / b"xyz"),
    ("rc_read_req", L2 / V4 / UDP() / BTH(opcode=0x0c, dest_qp=0x12, psn=8) / RETH(va=0x1000, r_key=9, dma_len=4096)),
    ("rc_ack", L2 / V4 / UDP() / BTH(opcode=0x11, dest_qp=0x13, psn=9) / AETH(syndrome=0x1f, msn=3)),
    ("rc_cmp_swap", L2 / V4 / UDP() / BTH(opcode=0x13, dest_qp=0x14, psn=10) / AtomicETH(va=0x2000, r_key=5, swap_add=1, compare=2)),
    ("rc_atomic_ack", L2 / V4 / UDP() / BTH(opcode=0x12, dest_qp=0x15, psn=11) / AETH(syndrome=0, msn=4) / AtomicAckETH(orig=0x1122334455667788)),
    ("rc_send_inv", L2 / V4 / UDP() / BTH(opcode=0x17, dest_qp=0x16, psn=12) / IETH(r_key=0xabcd) / b"1234567"),
    ("xrc_send", L2 / V4 / UDP() / BTH(opcode=0xa4, dest_qp=0x17, psn=13) / XRCETH(xrc_srq=0x2a) / b"to the srq"),
    ("ud_send_v6", Ether() / IPv6(src="fd00::1", dst="fd00::2", flow_label=5) / UDP(src_port=0xd000) / BTH(opcode=0x64, dest_qp=0x20) / DETH(q_key=0x11111111, src_qp=0x21) / b"datagram"),
    ("vlan", L2 / Dot1Q(vid=100, pcp=3) / V4 / UDP() / BTH(opcode=0x04, dest_qp=0x11) / b"tagged"),
    ("sa_set", L2 / V4 / UDP() / GSI / MAD(method=0x02, tid=0x5a17000000000001) / SA(component_mask=0x130C7)
     / MCMemberRecord(mgid="ff12:401b:ffff::ef01:203", port_gid="::ffff:198.18.0.1", q_key=0x1234567, p_key=0xffff, join_state=1)),
    ("sa_class_port_info", L2 / V4 / UDP() / GSI / MAD(method=0x81, tid=2, attribute_id=0x0001) / SA() / ClassPortInfo(base_version=1, class_version=2, capability_mask=0x200)),
    ("sa_service_record", L2 / V4 / UDP() / GSI / MAD(method=0x81, tid=3, attribute_id=0x0031) / SA() / ServiceRecord(service_id=0x1000000001111c06, service_lease=0xffffffff, service_key="00112233445566778899aabbccddeeff")),
    ("cm_req", L2 / V4 / UDP() / GSI / MAD(tid=0xc0de0001) / CM_REQ(local_comm_id=0x01020304, service_id=0x0000000001060000 | 7174, local_qpn=0x11, starting_psn=0x100, partition_key=0xffff, path_mtu=3, responder_resources=1, initiator_depth=1, retry_count=7, rnr_retry_count=7, max_cm_retries=15, remote_cm_response_timeout=20, local_cm_response_timeout=20,
                                                        cma_header={"src": "198.18.0.1", "dst": "198.18.0.2", "src_port": 40000})),
    ("cm_rep", L2 / V4 / UDP() / GSI / MAD(tid=0xc0de0001) / CM_REP(local_comm_id=5, remote_comm_id=0x01020304, local_qpn=0x12, starting_psn=0x200, rnr_retry_count=7)),
    ("cm_rtu", L2 / V4 / UDP() / GSI / MAD(tid=0xc0de0001) / CM_RTU(local_comm_id=0x01020304, remote_comm_id=5)),
]
IDS = [n for n, _ in PACKETS]


@pytest.mark.parametrize("name,pkt", PACKETS, ids=IDS)
def test_built_frames_decode_whole_with_a_good_icrc(name, pkt):
    frame = bytes(pkt)
    d = roce.decode(frame)
    assert d["kind"] == "rocev2" and "error" not in d, (name, d.get("error"))
    assert d["icrc"] == "ok"
    assert roce.icrc(frame) == d["icrc_value"]
    for layer in pkt.layers:
        got = d[layer.member]
        if layer.member == "cm":
            assert got["message"] == layer.message
            got = got["fields"]
        for k, v in layer.values.items():
            if k in ("cma_header", "service_name_text", "pad", "icrc"):
                continue
            want = got[k]
            if isinstance(want, str) and want.startswith("0x"):
                want = int(want, 16)
            if isinstance(v, bytes):
                v = v.hex()
            if k in ("mgid", "port_gid"):
                import ipaddress
                v, want = ipaddress.ip_address(v), ipaddress.ip_address(want)
            assert want == v, (name, layer.member, k)
    assert roce.encode(d) == frame


@pytest.mark.parametrize("name,pkt", PACKETS, ids=IDS)
def test_scapy_computes_the_same_icrc_and_reads_the_same_bth(name, pkt):
    frame = bytes(pkt)
    s = SEther(frame)
    assert SBTH in s, name
    b = s[SBTH]
    bth = pkt[BTH]
    assert b.opcode == (0x64 if bth.opcode is None else bth.opcode)
    assert b.dqpn == bth.dest_qp
    assert b.psn == (bth.psn or 0)
    b.icrc = None
    assert bytes(s)[-4:] == frame[-4:], name


def test_bytes_from_scapy_are_decoded_by_roce():
    frames = [
        SEther() / SIP(src="198.18.0.1", dst="198.18.0.2") / SUDP(sport=0xc000, dport=4791) / SBTH(opcode=0x04, dqpn=0x11, psn=42) / Raw(b"from scapy!!"),
        SEther() / SIPv6(src="fd00::1", dst="fd00::2") / SUDP(sport=0xc000, dport=4791) / SBTH(opcode=0x04, dqpn=0x22, psn=43) / Raw(b"v6 from scapy"),
        SEther() / SDot1Q(vlan=7) / SIP(src="198.18.0.1", dst="198.18.0.2") / SUDP(sport=0xc000, dport=4791) / SBTH(opcode=0x04, dqpn=0x33, psn=44, padcount=0) / Raw(b"abcd"),
    ]
    for p in frames:
        raw = bytes(p)
        d = roce.decode(raw)
        assert d["kind"] == "rocev2", d.get("error")
        assert d["icrc"] == "ok"
        assert d["bth"]["dest_qp"] == p[SBTH].dqpn and d["bth"]["psn"] == p[SBTH].psn
        assert roce.icrc(raw) == int.from_bytes(raw[-4:], "little")
        assert roce.encode(d) == raw


def test_by_hand_fields_are_kept():
    base = L2 / V4 / UDP() / BTH(opcode=0x04, dest_qp=0x11) / b"abcde"
    good = roce.decode(bytes(base))
    assert good["bth"]["pad_count"] == 3 and good["pad"] == "000000"
    bad_icrc = roce.decode(bytes(L2 / V4 / UDP() / BTH(opcode=0x04, dest_qp=0x11, icrc=0x12345678) / b"abcde"))
    assert bad_icrc["icrc"] == "bad" and bad_icrc["icrc_value"] == 0x12345678
    bad_len = roce.decode(bytes(L2 / IPv4(src="198.18.0.1", dst="198.18.0.2", total_len=999) / UDP(length=77) / BTH(opcode=0x04) / b"abcd"))
    assert bad_len["ip"]["total_len"] == 999 and bad_len["udp"]["length"] == 77
    bad_sum = roce.decode(bytes(L2 / IPv4(src="198.18.0.1", dst="198.18.0.2", checksum=0x1111) / UDP() / BTH(opcode=0x04) / b"abcd"))
    assert bad_sum["ip"]["checksum"] == 0x1111 and bad_sum["ip"]["checksum_ok"] is False
    pad = roce.decode(bytes(L2 / V4 / UDP() / BTH(opcode=0x04, pad=b"\x01\x02") / b"ab"))
    assert pad["pad"] == "0102" and pad["bth"]["pad_count"] == 2


def test_defaults_are_those_of_roce_encode():
    d = roce.decode(bytes(V4 / BTH()))
    assert d["opcode"] == 0x64 and d["udp"]["dst_port"] == 4791 and d["udp"]["src_port"] == 0xC000
    assert d["eth"]["src"] == "02:00:00:00:00:01" and d["ip"]["ttl"] == 64 and d["bth"]["p_key"] == 0xFFFF


def test_repr_and_help():
    p = L2 / V4 / UDP() / BTH(opcode=0x0A, dest_qp=0x11, psn=5, ack_req=True) / b"x"
    assert repr(p).startswith("Ether(src='02:00:00:00:00:01'") and "BTH(opcode=0xa, dest_qp=0x11, psn=5, ack_req=True)" in repr(p)
    assert "psn: packet sequence number" in BTH.__doc__
    assert p[BTH].psn == 5 and p[BTH].se is None


def test_tshark_dissects_what_roce_builds(tmp_path):
    from roce._roce import SimNet  # noqa: F401 (the package imports whole)
    pcap = tmp_path / "layers.pcap"
    records = []
    for i, (_, pkt) in enumerate(PACKETS):
        d = roce.decode(bytes(pkt))
        d.update({"time_epoch": f"{1700000000 + i}.000000000"})
        records.append(d)
    # The CLI writes the pcap from these records: one more check that encode is the CLI's.
    from conftest import roce_cli
    lines = "\n".join(json.dumps(r) for r in records) + "\n"
    subprocess.run([str(roce_cli()), "encode", "-q", "-o", str(pcap), "-"], input=lines.encode(), check=True)
    fields = ["infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.reth.va",
              "infiniband.reth.r_key", "infiniband.reth.dmalen", "infiniband.deth.q_key", "infiniband.aeth.msn",
              "infiniband.mad.method", "infiniband.mad.transactionid", "infiniband.mad.attributeid",
              "infiniband.sa.componentmask", "infiniband.mcmemberrecord.mgid", "infiniband.cm.req.localqpn",
              "infiniband.cm.req.startpsn", "ip.checksum.status", "_ws.expert.severity"]
    cmd = [tshark(), "-n", "-r", str(pcap), "-o", "ip.check_checksum:TRUE", "-T", "fields", "-E", "separator=|", "-E", "occurrence=f"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()
    assert len(out) == len(PACKETS)
    for (name, pkt), line, rec in zip(PACKETS, out, records):
        got = dict(zip(fields, line.split("|")))
        bth = rec["bth"]
        assert int(got["infiniband.bth.opcode"]) == bth["opcode"], name
        assert int(got["infiniband.bth.destqp"], 0) == bth["dest_qp"], name
        assert int(got["infiniband.bth.psn"]) == bth["psn"], name
        assert got["ip.checksum.status"] in ("", "1"), (name, got)  # 1: good (IPv6 has none)
        if "reth" in rec:
            assert int(got["infiniband.reth.va"], 0) == int(rec["reth"]["va"], 16), name
            assert int(got["infiniband.reth.r_key"], 0) == rec["reth"]["r_key"], name
            assert int(got["infiniband.reth.dmalen"]) == rec["reth"]["dma_len"], name
        if "deth" in rec:
            assert int(got["infiniband.deth.q_key"], 0) == rec["deth"]["q_key"], name
        if "aeth" in rec:
            assert int(got["infiniband.aeth.msn"]) == rec["aeth"]["msn"], name
        if "mad" in rec:
            assert int(got["infiniband.mad.method"], 0) == rec["mad"]["method"], name
            assert int(got["infiniband.mad.transactionid"], 0) == int(rec["mad"]["tid"], 16), name
            assert int(got["infiniband.mad.attributeid"], 0) == rec["mad"]["attribute_id"], name
        if "mcmember" in rec:
            assert int(got["infiniband.sa.componentmask"], 0) == int(rec["sa"]["component_mask"], 16), name
            assert got["infiniband.mcmemberrecord.mgid"] == rec["mcmember"]["mgid"], name
        if rec.get("cm", {}).get("message") == "REQ":
            assert int(got["infiniband.cm.req.localqpn"], 0) == rec["cm"]["fields"]["local_qpn"], name
            assert int(got["infiniband.cm.req.startpsn"], 0) == rec["cm"]["fields"]["starting_psn"], name
