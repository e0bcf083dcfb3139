"""roce: read, build and drive RoCEv2 from Python.

The decoder, encoder and engine of the ``roce`` tool (Rust), with scapy-style layers:

>>> import roce
>>> pkt = (roce.Ether() / roce.IPv4(src="198.18.0.1", dst="198.18.0.2") / roce.UDP()
...        / roce.BTH(opcode=0x0a, dest_qp=0x11, psn=5, ack_req=True)
...        / roce.RETH(va=0x1000, r_key=0x1234, dma_len=4) / b"abcd")
>>> frame = bytes(pkt)                      # lengths, checksum, pad and ICRC filled in
>>> roce.decode(frame)["icrc"]
'ok'

- ``decode(frame, link_type=1) -> dict``: one ``roce decode --json`` object.
- ``read(path_or_file)``: an iterator of those objects for a pcap/pcapng capture.
- ``Frame(frame, link_type=1)``: a frame checked at once whose values are made when read
  (``f.bth.psn``, ``f["reth"]``, ``f.to_dict() == decode(frame)``); ``frames(path_or_file)``
  (or ``read(path_or_file, lazy=True)``) yields them for a capture.
- ``encode(record) -> bytes``: the way back, byte-identical.
- ``icrc(frame) -> int``; ``summary(frame) -> str``.
- layers (``Ether``, ``IPv4``, ``BTH``, ``RETH``, ``MAD``, ``MCMemberRecord``, ``CM_REQ`` …,
  and ``ARP``, ``IGMP``, ``MLD``, ``NDisc``) composed with ``/``.
- ``Stack`` (the sans-IO engine) and ``SimNet`` (hosts and an SA on a simulated link).
- ``dataframe(path)``: a pandas DataFrame of every frame's flat fields.
"""

from ._roce import (  # noqa: F401
    CaptureError,
    CaptureReader,
    DecodeError,
    EncodeWarning,
    Frame,
    LayerView,
    SimNet,
    Stack,
    UdDestination,
    decode,
    encode,
    frames,
    icrc,
    opcode_headers,
    read,
    read_columns,
    summary,
)
from .layers import *  # noqa: F401,F403
from .layers import __all__ as _layer_names
from .frame import dataframe

import collections.abc as _abc

# A Frame and its LayerViews are read-only mappings: code written for decode's dicts works.
_abc.Mapping.register(Frame)
_abc.Mapping.register(LayerView)

__all__ = [
    "CaptureError",
    "CaptureReader",
    "DecodeError",
    "EncodeWarning",
    "Frame",
    "LayerView",
    "SimNet",
    "Stack",
    "UdDestination",
    "dataframe",
    "decode",
    "encode",
    "frames",
    "icrc",
    "opcode_headers",
    "read",
    "read_columns",
    "summary",
    *_layer_names,
]
__version__ = "0.1.0"
