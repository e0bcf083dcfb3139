"""bench/workloads.py, the frames of the per-kind benchmark and of the tshark comparison, is
what spec/benchmarks.md says it is (a benchmark's input, checked so that it cannot rot; no
time is measured here)."""

import sys

import roce

from conftest import ROOT, cli_json

sys.path.insert(0, str(ROOT / "crates" / "roce-py" / "bench"))
import workloads  # noqa: E402


def test_every_kind_is_what_its_name_says():
    for name in workloads.KINDS:
        for b in workloads.kind_frames(name, 12):
            d = roce.decode(b)
            assert d["kind"] == "rocev2", name
            if "MAD" in name:
                assert "mcmember" in d and d["icrc"] == "ok", name
                continue
            assert d["ip"]["version"] == (6 if name.startswith("IPv6") else 4), name
            assert d["icrc"] == ("bad" if "bad ICRC" in name else "ok"), name
            assert "mad" not in d and "raw" not in d, name
            if "bad ICRC" in name:
                assert d["error"]["reason"] == "bad_icrc", name
            else:
                assert "error" not in d, name
            if "KiB" in name:
                assert 960 <= d["payload_len"] <= 1023, name
            else:
                assert d["payload_len"] <= 64, name


def test_the_mix_and_the_captures(tmp_path):
    mix = [roce.decode(b) for b in workloads.data_mix(300)]
    bad = sum(d["icrc"] == "bad" for d in mix)
    v6 = sum(d["ip"]["version"] == 6 for d in mix)
    assert 60 < bad < 140 and 60 < v6 < 150 and {d["opcode"] >> 5 for d in mix} == {0, 1, 3}
    caps = workloads.captures(40)
    assert set(caps) == {"data-mix", "mad-heavy", "bad-icrc", "ipv6"}
    path = tmp_path / "mad-heavy.pcap"
    workloads.write_pcap(path, caps["mad-heavy"])
    records = cli_json(path)
    assert len(records) == 40 and sum("mad" in r for r in records) == 36
    assert all(roce.decode(b)["icrc"] == "bad" for b in caps["bad-icrc"])
    assert all(roce.decode(b)["ip"]["version"] == 6 for b in caps["ipv6"])
