"""decode and read give exactly what `roce decode --json` prints; encode goes back byte for byte."""

import io
import json
import warnings

import pytest
import roce
from scapy.utils import RawPcapNgReader, RawPcapReader

from conftest import CAPTURES, DATA, cli_json

CAPTURE_MEMBERS = ("frame", "time", "time_epoch", "interface")


def raw_frames(path):
    """Every frame's bytes and link type, read by scapy (not by roce)."""
    with open(path, "rb") as f:
        magic = f.read(4)
    reader = RawPcapNgReader if magic == b"\x0a\x0d\x0d\x0a" else RawPcapReader
    out = []
    with reader(str(path)) as r:
        for data, meta in r:
            lt = getattr(meta, "linktype", None)
            if lt is None:
                lt = r.linktype
            out.append((data, lt))
    return out


def test_there_are_captures():
    assert len(CAPTURES) >= 3, CAPTURES


def test_read_is_the_cli(capture):
    cli = cli_json(capture)
    assert cli, capture
    assert list(roce.read(capture)) == cli


def test_read_and_decode_keep_the_cli_order_and_types(capture):
    """Not only equal (dict == ignores the order, 0 == 0.0): the same members in the same
    order with the same types, as json.dumps shows them."""
    cli = cli_json(capture)
    assert [json.dumps(x) for x in roce.read(capture)] == [json.dumps(x) for x in cli]
    for (data, lt), line in zip(raw_frames(capture), cli):
        if lt == 1 and len(data) >= 14 and not any(k.startswith("rmpp") or k == "sa_table" for k in line):
            want = {k: v for k, v in line.items() if k not in CAPTURE_MEMBERS}
            assert json.dumps(roce.decode(data)) == json.dumps(want), (capture.name, line["frame"])


def test_values_kept_between_frames_are_never_stale_or_shared_mutably():
    """decode keeps the strings and ints it made for the next frame of the same shape: frames
    with other values decoded in between (in another order), and edits to the dicts it
    returned, change nothing of the next dicts."""
    frames = [data for data, lt in raw_frames(DATA / "sample.pcap") if lt == 1 and len(data) >= 14]
    first = [roce.decode(b) for b in frames]
    texts = [json.dumps(d) for d in first]
    for d in first:
        for v in d.values():
            if isinstance(v, dict):
                v.clear()
        d.clear()
    for _ in range(2):
        assert [json.dumps(roce.decode(b)) for b in frames] == texts
        assert [json.dumps(roce.decode(b)) for b in reversed(frames)] == texts[::-1]


def test_frames_of_one_shape_with_other_values():
    """decode copies the dicts kept for a frame's shape (its members, in order) and sets only
    the values that differ from the first frame of that shape: every value of every frame is
    its own (the decoder's text read back says the same), and edits to a dict it returned
    change nothing after."""
    from roce import BTH, DETH, MAD, RETH, SA, UDP, Ether, IPv4, IPv6, MCMemberRecord

    frames = []
    for ip in (IPv4(src="198.18.0.1", dst="198.18.0.2"), IPv6(src="fd00::1", dst="fd00::2")):
        for q, p, payload in ((0x11, 1, b"abcd"), (0x12, 1, b"abcd"), (0x11, 2, b"abce"), (0x11, 1, b"abcd")):
            w = Ether() / ip / UDP() / BTH(opcode=0x0A, dest_qp=q, psn=p) / RETH(va=p, r_key=q, dma_len=4) / payload
            frames.append(bytes(w))
            frames.append(bytes(w)[:-1] + bytes([bytes(w)[-1] ^ 1]))  # a bad ICRC: an error member
    for mgid, state in (("ff12:401b:ffff::1", 1), ("ff12:401b:ffff::2", 1), ("ff12:401b:ffff::1", 2)):
        frames.append(bytes(Ether() / IPv4(src="198.18.0.1", dst="198.18.0.2") / UDP() / BTH(dest_qp=1)
                            / DETH(q_key=0x80010000, src_qp=1) / MAD(method=2, tid=7) / SA(component_mask=0x130C7)
                            / MCMemberRecord(mgid=mgid, port_gid="::ffff:198.18.0.1", join_state=state)))
    for _ in range(2):
        for b in frames:
            d = roce.decode(b)
            assert json.dumps(d) == json.dumps(roce.Frame(b).to_dict())
            for v in d.values():
                if isinstance(v, dict):
                    for k in list(v):
                        v[k] = None
            d["kind"] = None


def test_read_from_a_binary_file_and_a_str_path(capture):
    with open(capture, "rb") as f:
        from_file = list(roce.read(f))
    assert from_file == list(roce.read(str(capture)))
    assert from_file == list(roce.read(io.BytesIO(capture.read_bytes())))


def test_decode_is_the_cli_without_the_capture_members(capture):
    cli = cli_json(capture)
    frames = raw_frames(capture)
    assert len(frames) == len(cli)
    for (data, lt), line in zip(frames, cli):
        want = {k: v for k, v in line.items() if k not in CAPTURE_MEMBERS}
        if any(k in want for k in ("rmpp_table", "rmpp_reassembly", "sa_table")):
            continue  # a table put back together across frames: only a capture has it
        got = roce.decode(data, lt)
        if "rmpp_segment" in want:
            # What a segment says of its table (total_segments, continues) needs the frames
            # before it; a lone frame has only its own fields.
            seg, lone = want.pop("rmpp_segment"), got.pop("rmpp_segment")
            assert (seg["type"], seg["segment"]) == (lone["type"], lone["segment"])
        assert got == want, (capture.name, line["frame"])


def test_encode_round_trip_is_byte_identical(capture):
    cli = cli_json(capture)
    frames = raw_frames(capture)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", roce.EncodeWarning)
        for (data, _), line in zip(frames, cli):
            assert roce.encode(line) == data, (capture.name, line["frame"])
    # Notes (an RMPP segment's data area from its payload) are fine; an override is not.
    assert not [w for w in said if "override" in str(w.message)]


@pytest.mark.filterwarnings("ignore::roce.EncodeWarning")
def test_decode_then_encode_of_every_record(capture):
    for data, lt in raw_frames(capture):
        if lt != 1:
            continue
        assert roce.encode(roce.decode(data)) == data


def test_an_edit_is_applied_and_the_icrc_follows():
    for line in roce.read(DATA / "sample.pcap"):
        if line.get("mcmember"):
            break
    line["mcmember"]["port_gid"] = "fd00::7"
    with pytest.warns(roce.EncodeWarning, match="mcmember.port_gid"):
        frame = roce.encode(line)
    got = roce.decode(frame)
    assert got["mcmember"]["port_gid"] == "fd00::7"
    assert got["icrc"] == "ok"


def test_tids_are_the_same_strings():
    for line in roce.read(DATA / "sample.pcap"):
        if "mad" in line:
            assert isinstance(line["mad"]["tid"], str) and line["mad"]["tid"].startswith("0x")
            return
    pytest.fail("no MAD in sample.pcap")


def test_dataframe():
    df = roce.dataframe(DATA / "sample.pcap")
    cli = cli_json(DATA / "sample.pcap")
    assert len(df) == len(cli)
    assert list(df["frame"]) == [x["frame"] for x in cli]
    assert "bth.psn" in df.columns and "ip.src" in df.columns
    psn = [x["bth"]["psn"] for x in cli if "bth" in x]
    assert [int(v) for v in df["bth.psn"].dropna()] == psn
    assert str(df["frame"].dtype) == "int64"


def flat(obj, prefix=""):
    out = {}
    for k, v in obj.items():
        name = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out.update(flat(v, name))
        else:
            out[name] = v
    return out


def test_dataframe_holds_every_flat_field_of_the_cli(capture):
    import math

    rows = [flat(x) for x in cli_json(capture)]
    df = roce.dataframe(capture)
    names = list(dict.fromkeys(k for r in rows for k in r))
    assert list(df.columns) == names
    for name in names:
        got = df[name].tolist()
        for i, r in enumerate(rows):
            want, have = r.get(name), got[i]
            missing = have is None or (isinstance(have, float) and math.isnan(have)) or have is getattr(__import__("pandas"), "NA")
            if want is None:
                assert missing, (capture.name, name, i, have)
            else:
                assert not missing and have == want, (capture.name, name, i, have, want)
