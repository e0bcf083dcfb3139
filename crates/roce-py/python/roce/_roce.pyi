"""Type stubs of the native module roce._roce (re-exported by ``roce``)."""

import os
from typing import IO, Any, Dict, Iterator, List, Literal, Mapping, Optional, Tuple, Union, overload

_Bytes = Union[bytes, bytearray, memoryview]
_Source = Union[str, os.PathLike, IO[bytes]]

class DecodeError(ValueError):
    """A frame that is not even Ethernet (or its link type's header)."""

    layer: str
    offset: int
    reason: str

class CaptureError(ValueError):
    """A capture file that cannot be read (further)."""

class EncodeWarning(UserWarning):
    """encode: a structured member overrode ``payload``, or a member was not applied."""

def decode(frame: _Bytes, link_type: int = 1) -> Dict[str, Any]:
    """The object of one ``roce decode --json`` line, without frame/time/time_epoch/interface."""

def summary(frame: _Bytes, link_type: int = 1) -> str:
    """The one-line summary ``roce decode`` prints."""

def encode(record: Dict[str, Any]) -> bytes:
    """The frame of a record, as ``roce encode`` writes it (byte-identical for decode's records)."""

def encode_l2(record: Dict[str, Any]) -> bytes:
    """The frame of an arp, igmp, mld or ndisc record, built from its fields (the layers ARP,
    IGMP, MLD and NDisc use it)."""

def icrc(frame: _Bytes) -> int:
    """rxe's ICRC of a RoCEv2 Ethernet frame."""

def opcode_headers(opcode: int) -> List[str]:
    """The extension headers a BTH opcode carries (JSON member names, wire order)."""

class CaptureReader(Iterator[Dict[str, Any]]):
    """An iterator of the ``roce decode --json`` objects of a capture."""

    @property
    def frames_read(self) -> int: ...
    def __iter__(self) -> "CaptureReader": ...
    def __next__(self) -> Dict[str, Any]: ...

@overload
def read(source: _Source, lazy: Literal[False] = False) -> CaptureReader:
    """Every frame of a pcap/pcapng capture as the CLI's JSON object, streaming."""

@overload
def read(source: _Source, lazy: Literal[True]) -> Iterator["Frame"]:
    """Every frame of a capture as a Frame (checked at once, values made when read)."""

def frames(source: _Source) -> Iterator["Frame"]:
    """``read(source, lazy=True)``: every frame of a capture as a Frame."""

class LayerView(Mapping[str, Any]):
    """A member of a frame that is an object (``bth``, ``reth``, ``mcmember``, ``error`` …):
    a read-only mapping of its fields, also read as attributes (``f.bth.psn``; a field named
    like a method is the field). Objects inside come as LayerViews. Equal to decode's dict."""

    def __getattr__(self, name: str) -> Any: ...
    def __getitem__(self, key: str) -> Any: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[str]: ...
    def to_dict(self) -> Dict[str, Any]:
        """The fields as a new dict (nested objects as dicts)."""

class Frame(Mapping[str, Any]):
    """One frame, checked at once (decode's verdict and ``error``), values made when read.

    ``f.bth.psn``, ``f["bth"]["psn"]``, ``"reth" in f``, ``f.layers``, ``f.summary()``;
    ``f.to_dict() == roce.decode(frame)`` and ``f == roce.decode(frame)``. Members that are
    objects come as LayerViews. Raises DecodeError when the frame is not even Ethernet."""

    def __init__(self, frame: _Bytes, link_type: int = 1) -> None: ...
    def __getattr__(self, name: str) -> Any: ...
    def __getitem__(self, key: str) -> Any: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[str]: ...
    def __bytes__(self) -> bytes: ...
    @property
    def layers(self) -> List[str]:
        """The members that are objects (``error``, ``mad_error`` aside), in wire order."""
    @property
    def data(self) -> bytes:
        """The frame's bytes."""
    def summary(self) -> str:
        """The one-line summary ``roce decode`` prints."""
    def to_dict(self) -> Dict[str, Any]:
        """The whole object as a new dict, equal to ``roce.decode(frame)``."""

def read_columns(source: _Source) -> Dict[str, Tuple[str, Any, Optional[bytes]]]:
    """Every frame's flat fields as typed columns (roce.dataframe builds on it)."""

class UdDestination:
    """Where a UD datagram goes (from a MULTICAST_JOIN or ESTABLISHED event's ``dest``)."""

    @property
    def qp_num(self) -> int: ...
    @property
    def qkey(self) -> int: ...
    @property
    def dgid(self) -> str: ...
    @property
    def dmac(self) -> str: ...

class Stack:
    """The sans-IO RoCEv2 CM and multicast engine; times are float seconds."""

    def __init__(
        self,
        mac: str = "02:00:00:00:00:01",
        ipv4: str = "198.18.0.1/24",
        ipv6: Optional[str] = None,
        sa: Optional[str] = None,
        seed: int = 1,
    ) -> None: ...
    def handle_frame(self, frame: _Bytes, now: float) -> None: ...
    def poll_transmit(self, now: float) -> Optional[bytes]: ...
    def handle_timeout(self, now: float) -> None: ...
    def poll_timeout(self) -> Optional[float]: ...
    def poll_event(self) -> Optional[Dict[str, Any]]: ...
    def create_id(self, port_space: str = "udp", qp_type: str = "ud") -> int: ...
    def bind_addr(self, id: int, ip: str, port: int = 0) -> None: ...
    def resolve_addr(
        self, id: int, dst: str, port: int = 0, src: Optional[str] = None, timeout: float = 2.0, now: Optional[float] = None
    ) -> None: ...
    def resolve_route(self, id: int, timeout: float = 2.0, now: Optional[float] = None) -> None: ...
    def create_qp(self, id: int) -> int: ...
    def listen(self, id: int, backlog: int = 16) -> None: ...
    def connect(self, id: int, private_data: Optional[_Bytes] = None, now: Optional[float] = None) -> None: ...
    def accept(self, id: int, private_data: Optional[_Bytes] = None, now: Optional[float] = None) -> None: ...
    def establish(self, id: int, now: Optional[float] = None) -> None: ...
    def disconnect(self, id: int, now: Optional[float] = None) -> None: ...
    def join(self, id: int, group: str, join_state: Union[int, str, None] = None, now: Optional[float] = None) -> None: ...
    def leave(self, id: int, group: str, now: Optional[float] = None) -> None: ...
    def destroy_id(self, id: int, now: Optional[float] = None) -> None: ...
    def post_send(self, qp: int, dest: UdDestination, payload: _Bytes, imm_data: Optional[int] = None) -> None: ...
    def poll_recv(self, qp: int) -> Optional[Dict[str, Any]]: ...
    def groups(self) -> List[str]: ...
    def sa_transactions(self) -> int: ...
    def counters(self) -> Dict[str, Any]:
        """{"rx_frames", "rx_accepted", "tx_frames": int, "dropped": {reason: int}}."""
    def counters_text(self) -> str:
        """The same counters as the engine's Debug text."""

class SimNet:
    """Hosts and an SA on a simulated link with a virtual clock (float seconds)."""

    def __init__(self, seed: int = 1) -> None: ...
    def add_host(
        self,
        mac: str,
        ipv4: str,
        ipv6: Optional[str] = None,
        sa: Optional[str] = None,
        latency: float = 50e-6,
        loss: float = 0.0,
        seed: Optional[int] = None,
    ) -> Stack: ...
    def add_sa(self, mac: str, ipv4: str, ipv6: Optional[str] = None, latency: float = 50e-6) -> int: ...
    @property
    def now(self) -> float: ...
    def step(self) -> bool: ...
    def run_for(self, seconds: float) -> None: ...
    def run_until(self, t: float) -> None: ...
    def next_event(self) -> Optional[float]: ...
    def frames(self, start: int = 0) -> List[Tuple[float, int, bytes]]: ...
    def write_pcap(self, path: Union[str, os.PathLike]) -> None: ...
    def inject(self, node: int, frame: _Bytes) -> None: ...
