"""Bad frames, bad arguments and bad captures raise typed Python errors, never crash."""

import io

import pytest
import roce

from conftest import DATA


def test_not_even_ethernet_is_a_decode_error():
    with pytest.raises(roce.DecodeError) as e:
        roce.decode(b"\x01\x02\x03")
    assert isinstance(e.value, ValueError)
    assert e.value.layer.lower() == "ethernet"
    assert e.value.offset == 0
    assert e.value.reason == "truncated"


def test_a_frame_that_stops_later_is_a_record_with_its_error():
    frame = bytes(roce.Ether() / roce.IPv4(src="198.18.0.1", dst="198.18.0.2") / roce.UDP() / roce.BTH(opcode=4) / b"abcd")
    got = roce.decode(frame[:40])
    assert "eth" in got and "error" in got
    assert {"layer", "offset", "reason", "message"} <= set(got["error"])


def test_bad_arguments():
    with pytest.raises(TypeError, match="frame"):
        roce.decode("not bytes")
    with pytest.raises(TypeError):
        roce.decode(b"\x00" * 60, "one")
    with pytest.raises(TypeError, match="dict"):
        roce.encode([1, 2])
    with pytest.raises(TypeError, match="ip: expected"):
        roce.encode({"kind": "rocev2", "ip": object()})
    with pytest.raises(ValueError, match="ip.src"):
        roce.encode({"kind": "rocev2", "bth": {}})
    with pytest.raises(ValueError, match="64 bits"):
        roce.encode({"kind": "rocev2", "bth": {"psn": 1 << 70}})
    with pytest.raises(TypeError, match="no field 'qkey'"):
        roce.DETH(qkey=1)
    with pytest.raises(ValueError, match="carries no RETH"):
        bytes(roce.IPv4(src="1.1.1.1", dst="1.1.1.2") / roce.BTH(opcode=4) / roce.RETH())
    with pytest.raises(ValueError, match="BTH"):
        bytes(roce.Ether() / roce.IPv4(src="1.1.1.1", dst="1.1.1.2") / roce.UDP())
    with pytest.raises(TypeError):
        roce.read(42)
    with pytest.raises(OSError):
        roce.read(DATA / "no-such-file.pcap")
    with pytest.raises(roce.DecodeError):
        roce.icrc(b"\x00" * 10)


def test_not_a_capture():
    with pytest.raises(roce.CaptureError, match="not a pcap"):
        roce.read(io.BytesIO(b"hello, world"))


def test_a_capture_cut_short_gives_every_whole_frame_then_raises():
    data = (DATA / "sample.pcap").read_bytes()
    whole = list(roce.read(io.BytesIO(data)))
    it = roce.read(io.BytesIO(data[:-10]))
    got = []
    with pytest.raises(roce.CaptureError, match="cut short"):
        for x in it:
            got.append(x)
    assert got == whole[:-1]


def test_a_text_file_is_refused_with_a_message(tmp_path):
    p = tmp_path / "x.pcap"
    p.write_bytes((DATA / "sample.pcap").read_bytes())
    with open(p, "r", encoding="latin-1") as f:
        with pytest.raises(roce.CaptureError, match="binary mode"):
            list(roce.read(f))


def test_random_bytes_never_crash():
    import random

    rng = random.Random(7)
    base = bytes(roce.Ether() / roce.IPv4(src="198.18.0.1", dst="198.18.0.2") / roce.UDP() / roce.BTH(dest_qp=1) / roce.DETH(src_qp=1) / roce.MAD(mgmt_class=3, method=2) / roce.SA() / roce.MCMemberRecord(join_state=1))
    for _ in range(3000):
        f = bytearray(base[: rng.randrange(len(base) + 1)])
        for _ in range(rng.randrange(4)):
            if f:
                f[rng.randrange(len(f))] = rng.randrange(256)
        try:
            d = roce.decode(bytes(f))
        except roce.DecodeError:
            continue
        try:
            roce.encode(d)
        except ValueError:
            pass
