"""Shared fixtures: the repository's captures and the `roce` CLI the package is checked against."""

import json
import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data"
CAPTURES = sorted(p for p in DATA.iterdir() if p.suffix in (".pcap", ".pcapng"))


def roce_cli() -> pathlib.Path:
    """The CLI to compare with: $ROCE_BIN, else the workspace's debug build (tests/python.sh builds it)."""
    p = pathlib.Path(os.environ.get("ROCE_BIN", ROOT / "target" / "debug" / "roce"))
    if not p.exists():
        pytest.fail(f"the roce CLI is needed at {p}: cargo build --bin roce (or set ROCE_BIN)")
    return p


def cli_json(path: pathlib.Path) -> list:
    """`roce decode --json` of a capture, one object per line."""
    out = subprocess.run([str(roce_cli()), "decode", "--json", "-q", str(path)], capture_output=True, check=False)
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def tshark() -> str:
    t = shutil.which("tshark")
    if t is None:
        pytest.fail("tshark is needed (tests/setup.sh installs it)")
    return t


@pytest.fixture(params=CAPTURES, ids=[p.name for p in CAPTURES])
def capture(request) -> pathlib.Path:
    return request.param
