"""roce.Frame: checked at once, values made when read, equal to decode's dict in every way."""

import collections.abc
import warnings

import pytest
import roce
from roce import AETH, BTH, DETH, MAD, RETH, SA, UDP, Ether, IPv4, MCMemberRecord, ServiceRecord

from conftest import CAPTURES
from test_decode_read import raw_frames

L3 = Ether() / IPv4(src="198.18.0.1", dst="198.18.0.2") / UDP()
WRITE = bytes(L3 / BTH(opcode=0x0A, dest_qp=0x11, psn=7) / RETH(va=0x7F00, r_key=0x1234, dma_len=4) / b"abcd")
SA_SET = bytes(L3 / BTH(dest_qp=1, ack_req=True) / DETH(q_key=0x80010000, src_qp=1) / MAD(method=2, tid=9)
               / SA(component_mask=0x130C7) / MCMemberRecord(mgid="ff12:401b:ffff::1", port_gid="::ffff:198.18.0.1", join_state=1))


def test_fields_as_items_and_attributes():
    f = roce.Frame(WRITE)
    assert f.bth.psn == f["bth"]["psn"] == 7
    assert f.bth.opcode == f.opcode == 0x0A
    assert f.reth.r_key == 0x1234 and f.reth.va == "0x0000000000007f00"
    assert "reth" in f and "deth" not in f and "error" not in f and 5 not in f
    assert f.layers == ["eth", "ip", "udp", "bth", "reth"]
    assert f.summary() == roce.summary(WRITE)
    assert bytes(f) == f.data == WRITE
    assert f.get("deth") is None and f.get("deth", 3) == 3 and f.bth.get("nope", 1) == 1
    with pytest.raises(AttributeError):
        f.deth
    with pytest.raises(KeyError):
        f["deth"]
    with pytest.raises(AttributeError):
        f.bth.nope


def test_equal_to_decode_as_a_mapping():
    for b in (WRITE, SA_SET, bytes(L3 / BTH(opcode=0x11, dest_qp=3) / AETH(syndrome=0x1F, msn=4))):
        f, d = roce.Frame(b), roce.decode(b)
        assert f.to_dict() == d and f == d and f == roce.Frame(b)
        assert isinstance(f, collections.abc.Mapping) and isinstance(f.bth, collections.abc.Mapping)
        assert list(f) == list(d) == f.keys() and len(f) == len(d)
        assert dict(f.items()) == d and dict(f) == d
        for k, v in d.items():
            assert f[k] == v, k
            if isinstance(v, dict):
                assert f[k].to_dict() == v and dict(f[k]) == v and list(f[k].keys()) == list(v)


def test_mad_members_and_a_bad_frame_are_the_decoders():
    f = roce.Frame(SA_SET)
    assert f.mcmember.join_state == 1 and f.sa.component_mask == roce.decode(SA_SET)["sa"]["component_mask"]
    bad = bytearray(WRITE)
    bad[-1] ^= 1  # the ICRC
    g = roce.Frame(bad)
    assert g.error == roce.decode(bytes(bad))["error"] and g.error.reason == roce.decode(bytes(bad))["error"]["reason"]
    assert g.to_dict() == roce.decode(bytes(bad))
    with pytest.raises(roce.DecodeError) as e:
        roce.Frame(b"\x01\x02")
    assert e.value.layer and e.value.offset == 0


def test_every_frame_of_every_capture(capture):
    """Frame(bytes) == decode(bytes), and frames(capture) == read(capture), member by member."""
    for data, lt in raw_frames(capture):
        d = roce.decode(data, lt) if len(data) >= 14 or lt not in (1, 113, 276) else None
        if d is None:
            continue
        f = roce.Frame(data, lt)
        assert f == d
        for k in d:  # each member read on its own, before the whole
            g = roce.Frame(data, lt)
            assert g[k] == d[k] and k in g, k
    lazy = list(roce.frames(capture))
    assert [f.to_dict() for f in lazy] == list(roce.read(capture))
    assert [f.frame for f in lazy] == list(range(1, len(lazy) + 1))
    assert all(f.summary() for f in roce.read(capture, lazy=True))


def test_counters_are_a_dict_by_reason():
    s = roce.Stack()
    s.handle_frame(b"\x00" * 20, 0.0)
    s.handle_frame(b"\x01" * 60, 0.0)
    c = s.counters()
    assert c["rx_frames"] == 2 and c["tx_frames"] == 0
    assert sum(c["dropped"].values()) + c["rx_accepted"] == 2
    assert all(isinstance(k, str) and isinstance(n, int) for k, n in c["dropped"].items())
    assert "rx_frames" in s.counters_text()


def test_service_name_text_alone_names_the_service():
    def frame(**sr):
        return bytes(L3 / BTH(dest_qp=1) / DETH(q_key=0x80010000, src_qp=1) / MAD(method=2, attribute_id=0x31)
                     / SA() / ServiceRecord(**sr))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d = roce.decode(frame(service_name_text="roce-svc"))
    assert d["service_record"]["service_name_text"] == "roce-svc"
    assert d["service_record"]["service_name"] == (b"roce-svc" + bytes(56)).hex()
    # Both, disagreeing, nothing in the record telling which was edited: the bytes (the field
    # the text restates) win, with a warning (spec/decode.md, "Members that restate others").
    with pytest.warns(roce.EncodeWarning, match="service_name_text follows service_record.service_name"):
        b = frame(service_name_text="other", service_name=(b"roce-svc" + bytes(56)).hex())
    assert roce.decode(b)["service_record"]["service_name_text"] == "roce-svc"


def _layer_args(cls, values):
    return {k: v for k, v in values.items() if k in cls.fields}


def rebuild_non_roce(capture):
    """ARP, IGMP, MLD and NS/NA records of a capture, rebuilt from their members with `/`,
    give the captured bytes; returns how many."""
    kinds = {"arp": roce.ARP, "igmp": roce.IGMP, "mld": roce.MLD, "ndisc": roce.NDisc}
    rebuilt = 0
    for d in roce.read(capture):
        cls = kinds.get(d["kind"])
        if cls is None or "error" in d:
            continue
        # A capture without Ethernet header (Linux cooked) has `raw` from the network layer on.
        ethernet = "eth" in d
        pkt = Ether(**_layer_args(Ether, d["eth"] if ethernet else {}))
        if "vlan" in d:
            pkt = pkt / roce.Dot1Q(**_layer_args(roce.Dot1Q, d["vlan"]))
        if "ip" in d:
            ip_cls = IPv4 if d["ip"]["version"] == 4 else roce.IPv6
            pkt = pkt / ip_cls(**_layer_args(ip_cls, {k: v for k, v in d["ip"].items() if k not in ("total_len", "payload_len", "checksum")}))
        msg = dict(d[d["kind"]])
        if "hop_by_hop" in d:
            msg["hop_by_hop"] = d["hop_by_hop"]
        pkt = pkt / cls(**{k: v for k, v in msg.items() if k in cls.fields or k in cls.top_level})
        built = bytes(pkt) if ethernet else bytes(pkt)[14:]
        assert built.hex() == d["raw"], (capture.name, d["frame"], d)
        rebuilt += 1
    return rebuilt


def test_every_non_roce_record_is_rebuilt_with_layers():
    assert sum(rebuild_non_roce(c) for c in CAPTURES) >= 20


def test_non_roce_layers_build_what_the_decoder_reads():
    arp = roce.decode(bytes(Ether() / roce.ARP(sender_ip="198.18.0.1", target_ip="198.18.0.2")))
    assert arp["kind"] == "arp" and arp["arp"]["operation"] == "request" and arp["eth"]["dst"] == "ff:ff:ff:ff:ff:ff"
    igmp = roce.decode(bytes(Ether() / IPv4(src="198.18.0.1") / roce.IGMP(version=3, records=[
        {"record_type": 4, "group": "239.1.2.3", "sources": ["198.18.0.9"]}])))
    assert "error" not in igmp and igmp["igmp"]["records"][0]["sources"] == ["198.18.0.9"]
    leave = roce.decode(bytes(Ether() / IPv4(src="198.18.0.1") / roce.IGMP(type="LeaveGroup", group="239.1.2.3")))
    assert leave["igmp"]["type"] == "LeaveGroup" and leave["ip"]["dst"] == "224.0.0.2"
    mld = roce.decode(bytes(Ether() / roce.IPv6(src="fe80::1") / roce.MLD(records=[{"record_type": 3, "group": "ff0e::1"}])))
    assert mld["kind"] == "mld" and "error" not in mld and mld["mld"]["records"][0]["group"] == "ff0e::1"
    na = roce.decode(bytes(Ether() / roce.IPv6(src="fd00::2") / roce.NDisc(type="NeighborAdvert", target="fd00::2",
                                                                          target_lladdr="02:00:00:00:00:02", flags=0x60000000)))
    assert na["kind"] == "ndisc" and na["ndisc"]["flags"] == 0x60000000 and "error" not in na
    with pytest.raises(ValueError, match="carries no"):
        bytes(Ether() / roce.ARP() / BTH())
    with pytest.raises(ValueError, match="igmp.group"):
        bytes(Ether() / IPv4(src="198.18.0.1") / roce.IGMP(group="nope"))
