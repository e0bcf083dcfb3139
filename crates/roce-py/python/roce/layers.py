"""Layers composed with ``/``, as scapy users expect; ``bytes(pkt)`` builds the frame.

Each layer holds the fields of one member of the ``roce decode --json`` object (keyword
arguments named as spec/decode.schema.json names them); ``/`` stacks layers and appends the
payload (``/ b"..."``); ``bytes(pkt)`` makes the record and hands it to :func:`roce.encode`,
which fills what was left unset as ``roce encode`` does: the IP and UDP lengths, the IPv4
header checksum, PadCnt and the pad, and rxe's ICRC. A length, checksum, PadCnt, pad or
ICRC given by hand is kept as given (so a wrong one can be sent on purpose).

>>> from roce import Ether, IPv4, UDP, BTH, RETH
>>> pkt = Ether() / IPv4(src="198.18.0.1", dst="198.18.0.2") / UDP() / BTH(opcode=0x0a, dest_qp=0x11, psn=5) / RETH(va=0x1000, r_key=7, dma_len=4) / b"abcd"
>>> len(bytes(pkt))
78
"""

from __future__ import annotations

from typing import Any, ClassVar, Dict, List, Optional, Tuple, Type, Union

from ._roce import encode as _encode
from ._roce import encode_l2 as _encode_l2
from ._roce import opcode_headers as _opcode_headers

__all__ = [
    "Layer",
    "Packet",
    "Ether",
    "Dot1Q",
    "IPv4",
    "IPv6",
    "UDP",
    "BTH",
    "DETH",
    "XRCETH",
    "RETH",
    "AETH",
    "AtomicETH",
    "AtomicAckETH",
    "ImmDt",
    "IETH",
    "FETH",
    "MAD",
    "RMPP",
    "SA",
    "MCMemberRecord",
    "ClassPortInfo",
    "ServiceRecord",
    "CM",
    "CM_REQ",
    "CM_MRA",
    "CM_REJ",
    "CM_REP",
    "CM_RTU",
    "CM_DREQ",
    "CM_DREP",
    "CM_SIDR_REQ",
    "CM_SIDR_REP",
    "CM_LAP",
    "CM_APR",
    "ARP",
    "IGMP",
    "MLD",
    "NDisc",
]

# The default BTH opcode of `roce encode`: UD SEND Only.
_DEFAULT_OPCODE = 0x64
_EXT_CACHE: Dict[int, Tuple[str, ...]] = {}

_MAD_MEMBERS = frozenset(["mad", "rmpp", "sa", "mcmember", "class_port_info", "service_record", "cm"])
_EXT_MEMBERS = {
    "deth": "DETH", "reth": "RETH", "aeth": "AETH", "atomic_eth": "AtomicETH",
    "atomic_ack_eth": "AtomicAckETH", "immdt": "ImmDt", "ieth": "IETH", "feth": "FETH", "xrceth": "XRCETH",
}
# The frames the decoder reads besides RoCEv2 (ARP, IGMP, MLD, NS/NA): built by encode_l2.
_L2_MEMBERS = frozenset(["arp", "igmp", "mld", "ndisc"])

# A layer's role in record().
_ROLE_OTHER, _ROLE_BTH, _ROLE_EXT, _ROLE_MAD, _ROLE_L2 = range(5)


def _role_of(member: str) -> int:
    if member == "bth":
        return _ROLE_BTH
    if member in _EXT_MEMBERS:
        return _ROLE_EXT
    if member in _MAD_MEMBERS:
        return _ROLE_MAD
    if member in _L2_MEMBERS:
        return _ROLE_L2
    return _ROLE_OTHER


def _ext_headers(opcode: int) -> Tuple[str, ...]:
    h = _EXT_CACHE.get(opcode)
    if h is None:
        h = _EXT_CACHE[opcode] = tuple(_opcode_headers(opcode))
    return h


class Layer:
    """One header: the fields of one member of the decoder's JSON object."""

    #: The JSON member this layer fills (``"bth"``, ``"reth"``, ``"mcmember"`` …).
    member: ClassVar[str] = ""
    #: Field name ▶ what it is. Only these keyword arguments are accepted.
    fields: ClassVar[Dict[str, str]] = {}
    #: Fields that, given by hand, replace a computed value (kept as given even when wrong).
    by_hand: ClassVar[Tuple[str, ...]] = ()
    #: The lengths among `by_hand` (given by hand, the record needs `payload_len` to keep them).
    length_fields: ClassVar[frozenset] = frozenset()
    #: Fields that go to the record's top level instead of the member.
    top_level: ClassVar[Dict[str, str]] = {}

    # What record() does with the layer, set per class (below, and by _layer / _cm): its role
    # (_ROLE_*), and whether its fields go into the record as they are (no _apply of its own,
    # no top-level fields), so the common layers cost a dict store there, not a call.
    _role: ClassVar[int] = 0
    _plain: ClassVar[bool] = True

    __slots__ = ("values",)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._role = _role_of(cls.member)
        cls._plain = cls._plain and "_apply" not in cls.__dict__ and not cls.top_level

    def __init__(self, **values: Any) -> None:
        fields = self.fields
        # The common case, every name a field, builds no set.
        if values.keys() <= fields.keys():
            _set_values(self, values)
            return
        for k in values.keys() - fields.keys():
            if k not in self.top_level:
                raise TypeError(
                    f"{type(self).__name__}: no field {k!r}; its fields: {', '.join(fields)}"
                    + (f", {', '.join(self.top_level)}" if self.top_level else "")
                )
        _set_values(self, values)

    def __getattr__(self, name: str) -> Any:
        if name in type(self).fields or name in type(self).top_level:
            # Unset fields are None: bytes() computes them or uses `roce encode`'s default.
            return self.values.get(name)
        raise AttributeError(f"{type(self).__name__} has no field {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in type(self).fields or name in type(self).top_level:
            self.values[name] = value
        else:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}")

    def _apply(self, record: Dict[str, Any]) -> None:
        """Put this layer's fields into a record."""
        tl = self.top_level
        if tl:
            member = {}
            for k, v in self.values.items():
                if k in tl:
                    record[tl[k]] = v
                else:
                    member[k] = v
            record[self.member] = member
        else:
            record[self.member] = self.values

    def __truediv__(self, other: Union["Layer", "Packet", bytes, bytearray]) -> "Packet":
        if isinstance(other, Layer):
            p = _new_packet(Packet)
            p.layers = [self, other]
            p.payload = b""
            return p
        return Packet([self]) / other

    def __bytes__(self) -> bytes:
        return bytes(Packet([self]))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={_show(v)}" for k, v in self.values.items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.values == other.values  # type: ignore[attr-defined]


# The slot's own setter: Layer.__setattr__ admits only field names.
_set_values = Layer.__dict__["values"].__set__


def _show(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, int):
        return repr(v)
    return hex(v) if v > 9 else str(v)


class Packet:
    """Layers stacked with ``/`` and a payload; ``bytes(pkt)`` builds the frame."""

    __slots__ = ("layers", "payload")

    def __init__(self, layers: Optional[List[Layer]] = None, payload: bytes = b"") -> None:
        self.layers: List[Layer] = list(layers or [])
        self.payload: bytes = payload

    def __truediv__(self, other: Union[Layer, "Packet", bytes, bytearray, memoryview]) -> "Packet":
        if isinstance(other, Layer):
            if self.payload:
                raise ValueError(f"{type(other).__name__}: a layer cannot follow the payload bytes")
            # Built in place (`/` runs once per layer of every frame): the new list is the copy.
            p = _new_packet(Packet)
            p.layers = self.layers + [other]
            p.payload = b""
            return p
        if isinstance(other, bytes):
            return _packet(self.layers, self.payload + other)
        if isinstance(other, Packet):
            if self.payload and other.layers:
                raise ValueError("a layer cannot follow the payload bytes")
            return _packet(self.layers + other.layers, self.payload + other.payload)
        if isinstance(other, (bytearray, memoryview)):
            return _packet(self.layers, self.payload + bytes(other))
        return NotImplemented

    def __getitem__(self, cls: Type[Layer]) -> Layer:
        for layer in self.layers:
            if isinstance(layer, cls):
                return layer
        raise KeyError(f"no {cls.__name__} layer in {self!r}")

    def __contains__(self, cls: Type[Layer]) -> bool:
        return any(isinstance(layer, cls) for layer in self.layers)

    def record(self) -> Dict[str, Any]:
        """The JSON record (what ``roce encode`` reads) that these layers describe."""
        record: Dict[str, Any] = {"kind": "rocev2"}
        opcode = _DEFAULT_OPCODE
        has_bth = has_mad = hand_lengths = False
        ext = None
        try:
            for layer in self.layers:
                m = layer.member
                role = layer._role
                if role == _ROLE_L2:
                    # The first ARP, IGMP, MLD or NS/NA layer makes the frame that kind.
                    return self._l2_record(m)
                if m in record and m != "cm":
                    raise ValueError(f"{type(layer).__name__}: two layers for the same header ({m})")
                if layer._plain:
                    record[m] = layer.values
                else:
                    layer._apply(record)
                if role == _ROLE_BTH:
                    has_bth = True
                    opcode = layer.values.get("opcode", _DEFAULT_OPCODE)
                elif role == _ROLE_EXT:
                    if ext is None:
                        ext = [m]
                    else:
                        ext.append(m)
                elif role == _ROLE_MAD:
                    has_mad = True
                if layer.length_fields and not hand_lengths:
                    hand_lengths = not layer.length_fields.isdisjoint(layer.values)
        except Exception:
            # A layer that fails here before a later ARP/IGMP/MLD/NS layer: that frame's
            # checks (and message) come first, as when the kind is looked for up front.
            for layer in self.layers:
                if layer._role == _ROLE_L2:
                    return self._l2_record(layer.member)
            raise
        if not has_bth:
            raise ValueError("roce builds RoCEv2 frames: add a BTH layer")
        if "ip" not in record:
            raise ValueError("an IPv4 or IPv6 layer is needed (its src and dst)")
        if ext:
            carried = _ext_headers(opcode)
            for m in ext:
                if m not in carried:
                    raise ValueError(
                        f"{_EXT_MEMBERS[m]}: BTH opcode 0x{opcode:02x} carries no {_EXT_MEMBERS[m]}"
                        + (f" (it carries {', '.join(_EXT_MEMBERS[c] for c in carried)})" if carried else " (no extension header)")
                    )
        if self.payload:
            record["payload"] = self.payload
        if hand_lengths:
            # A length given by hand is kept when it disagrees with the payload's length.
            record["payload_len"] = max(256, len(self.payload)) if has_mad else len(self.payload)
        return record

    def _l2_record(self, kind: str) -> Dict[str, Any]:
        """The record of an ARP, IGMP, MLD or NS/NA frame (no RoCE layer in it)."""
        record: Dict[str, Any] = {"kind": kind}
        allowed = ("eth", "vlan", kind) if kind == "arp" else ("eth", "vlan", "ip", kind)
        for layer in self.layers:
            m = layer.member
            if m not in allowed:
                raise ValueError(f"{type(layer).__name__}: an {kind} frame carries no {m} (only {', '.join(allowed)})")
            if m in record:
                raise ValueError(f"{type(layer).__name__}: two layers for the same header ({m})")
            layer._apply(record)
        if self.payload:
            raise ValueError(f"an {kind} frame carries no payload bytes")
        return record

    def __bytes__(self) -> bytes:
        record = self.record()
        if record["kind"] in _L2_MEMBERS:
            return _encode_l2(record)
        return _encode(record)

    def __len__(self) -> int:
        return len(bytes(self))

    def __repr__(self) -> str:
        parts = [repr(layer) for layer in self.layers]
        if self.payload:
            parts.append(repr(self.payload))
        return " / ".join(parts)


_new_packet = object.__new__


def _packet(layers: List[Layer], payload: bytes) -> Packet:
    """A Packet that takes `layers` as is (every `/` makes a new list): no copy."""
    p = _new_packet(Packet)
    p.layers = layers
    p.payload = payload
    return p


def _layer(name: str, member: str, fields: Dict[str, str], doc: str, by_hand: Tuple[str, ...] = (),
           top_level: Optional[Dict[str, str]] = None) -> Type[Layer]:
    lines = [doc, "", "Fields (keyword arguments; unset ones take `roce encode`'s default or are computed):"]
    for k, d in fields.items():
        lines.append(f"    {k}: {d}")
    for k, d in (top_level or {}).items():
        lines.append(f"    {k}: (record's `{d}`) given by hand, kept as given")
    cls = type(name, (Layer,), {
        "__slots__": (),
        "__doc__": "\n".join(lines),
        "member": member,
        "fields": fields,
        "by_hand": by_hand,
        "length_fields": frozenset(k for k in by_hand if k.endswith("len") or k == "length"),
        "top_level": top_level or {},
        "__module__": __name__,
    })
    return cls


Ether = _layer("Ether", "eth", {
    "dst": "destination MAC, 'aa:bb:cc:dd:ee:ff' (default 02:00:00:00:00:02)",
    "src": "source MAC (default 02:00:00:00:00:01)",
}, "Ethernet II header (the EtherType follows the next layer).")

Dot1Q = _layer("Dot1Q", "vlan", {
    "pcp": "priority code point, 0-7",
    "dei": "drop eligible indicator, bool",
    "vid": "VLAN ID, 0-4095",
}, "IEEE 802.1Q VLAN tag.")

IPv4 = _layer("IPv4", "ip", {
    "src": "source address, '198.18.0.1' (required)",
    "dst": "destination address (required)",
    "dscp": "DSCP, 0-63",
    "ecn": "ECN, 0-3",
    "id": "identification",
    "df": "don't fragment (default True)",
    "mf": "more fragments",
    "frag_offset": "fragment offset, 8-byte units",
    "ttl": "time to live (default 64)",
    "options": "options, bytes (a multiple of 4, up to 40)",
    "total_len": "total length: computed unless given by hand",
    "checksum": "header checksum: computed unless given by hand",
}, "IPv4 header.", by_hand=("total_len", "checksum"))

IPv6 = _layer("IPv6", "ip", {
    "src": "source address, 'fd00::1' (required)",
    "dst": "destination address (required)",
    "traffic_class": "traffic class, 0-255",
    "flow_label": "flow label, 20 bits",
    "hop_limit": "hop limit (default 64)",
    "payload_len": "payload length: computed unless given by hand",
}, "IPv6 header.", by_hand=("payload_len",))

UDP = _layer("UDP", "udp", {
    "src_port": "source port (default 0xc000)",
    "dst_port": "destination port (default 4791, RoCEv2)",
    "length": "length: computed unless given by hand",
    "checksum": "checksum (default 0: none, as rxe sends)",
}, "UDP header.", by_hand=("length",))

BTH = _layer("BTH", "bth", {
    "opcode": "opcode, e.g. 0x04 RC SEND Only, 0x0a RC RDMA WRITE Only, 0x64 UD SEND Only (default)",
    "se": "solicited event",
    "mig_req": "migration request",
    "pad_count": "PadCnt: computed from the payload unless given by hand",
    "tver": "transport header version (0)",
    "p_key": "partition key (default 0xffff)",
    "fecn": "forward ECN",
    "becn": "backward ECN",
    "resv6a": "reserved bits after BECN",
    "dest_qp": "destination QP, 24 bits",
    "ack_req": "acknowledge request",
    "resv7": "reserved bits before the PSN",
    "psn": "packet sequence number, 24 bits",
}, "InfiniBand Base Transport Header.", by_hand=("pad_count",),
    top_level={"pad": "pad", "icrc": "icrc_value"})


def _bth_apply(self: Layer, record: Dict[str, Any]) -> None:
    values = self.values
    if "pad" not in values and "icrc" not in values:
        # Nothing for the top level (the usual case): the fields are the member as they are.
        record["bth"] = values
        return
    member = {}
    for k, v in values.items():
        if k == "pad":
            record["pad"] = v
        elif k == "icrc":
            # An ICRC given by hand is kept: the encoder keeps a value it is told is bad.
            record["icrc"] = "bad"
            record["icrc_value"] = v
        else:
            member[k] = v
    record["bth"] = member


BTH._apply = _bth_apply  # type: ignore[method-assign]
BTH._plain = False


def _ipv4_apply(self: Layer, record: Dict[str, Any]) -> None:
    v = self.values
    if "checksum" in v:
        v = dict(v)
        v["checksum_ok"] = False
    src = v.get("src")
    if isinstance(src, str) and ":" in src:
        raise ValueError(f"IPv4: src {src!r} is an IPv6 address: use IPv6()")
    record["ip"] = v


IPv4._apply = _ipv4_apply  # type: ignore[method-assign]
IPv4._plain = False

DETH = _layer("DETH", "deth", {
    "q_key": "queue key, 32 bits",
    "reserved": "reserved byte",
    "src_qp": "source QP, 24 bits",
}, "Datagram Extended Transport Header (UD).")

XRCETH = _layer("XRCETH", "xrceth", {
    "reserved": "reserved byte",
    "xrc_srq": "the destination XRC SRQ number, 24 bits",
}, "XRC Extended Transport Header (every XRC request, opcodes 0xA0-0xB7 but the responses).")

RETH = _layer("RETH", "reth", {
    "va": "virtual address, 64 bits",
    "r_key": "remote key, 32 bits",
    "dma_len": "DMA length, 32 bits",
}, "RDMA Extended Transport Header (RDMA WRITE/READ).")

AETH = _layer("AETH", "aeth", {
    "syndrome": "syndrome (ACK/RNR NAK/NAK and its code)",
    "msn": "message sequence number, 24 bits",
}, "ACK Extended Transport Header.")

AtomicETH = _layer("AtomicETH", "atomic_eth", {
    "va": "virtual address, 64 bits",
    "r_key": "remote key, 32 bits",
    "swap_add": "swap or add data, 64 bits",
    "compare": "compare data, 64 bits",
}, "Atomic Extended Transport Header (Compare&Swap, Fetch&Add).")

AtomicAckETH = _layer("AtomicAckETH", "atomic_ack_eth", {
    "orig": "original remote data, 64 bits",
}, "Atomic Acknowledge Extended Transport Header.")

ImmDt = _layer("ImmDt", "immdt", {"imm_data": "immediate data, 32 bits"}, "Immediate Data header.")

IETH = _layer("IETH", "ieth", {"r_key": "the R_Key to invalidate"}, "Invalidate Extended Transport Header.")

FETH = _layer("FETH", "feth", {"bits": "the FETH's 32 bits (placement type, selectivity level)"},
              "Flush Extended Transport Header.")


def _named(names: str, what: str) -> Dict[str, str]:
    return {n: f"{what} {n} (as `roce decode --json` names it)" for n in names.split()}


MAD = _layer("MAD", "mad", {
    **_named("base_version mgmt_class class_version", "MAD header"),
    "method": "method (0x01 Get, 0x02 Set, 0x03 Send, 0x81 GetResp, 0x15 Delete …)",
    "response": "the method's R bit",
    **_named("status class_specific", "MAD header"),
    "tid": "transaction ID, 64 bits (int or '0x…')",
    **_named("attribute_id reserved attribute_modifier", "MAD header"),
}, "Management Datagram common header (over the payload, or a zeroed 256-byte MAD whose header "
   "fits the members present: SubnAdm Get, or CM Send).")

RMPP = _layer("RMPP", "rmpp", _named("version rmpp_type resp_time flags status data1 data2", "RMPP header"),
              "RMPP header (SA MADs).")

SA = _layer("SA", "sa", {
    "sm_key": "SM key, 64 bits",
    "attribute_offset": "attribute offset, 8-byte units",
    "reserved": "reserved",
    "component_mask": "component mask, 64 bits (int or '0x…')",
}, "Subnet Administration header.")

MCMemberRecord = _layer("MCMemberRecord", "mcmember", {
    "mgid": "multicast GID, an IPv6 text ('ff12:401b::…', or '::ffff:239.1.2.3')",
    "port_gid": "port GID",
    "q_key": "queue key",
    "mlid": "multicast LID",
    **_named("mtu_selector mtu traffic_class", "MCMemberRecord"),
    "p_key": "partition key",
    **_named("rate_selector rate packet_life_time_selector packet_life_time sl flow_label hop_limit scope",
             "MCMemberRecord"),
    "join_state": "JoinState bits: 1 FullMember, 2 NonMember, 4 SendOnlyNonMember, 8 SendOnlyFullMember",
    "proxy_join": "ProxyJoin",
    "reserved": "reserved",
}, "SA MCMemberRecord (multicast join and leave).")

ClassPortInfo = _layer("ClassPortInfo", "class_port_info", _named(
    "base_version class_version capability_mask cap_mask2_resp_time redirect_gid redirect_tc_sl_fl "
    "redirect_lid redirect_pkey redirect_qp redirect_qkey trap_gid trap_tc_sl_fl trap_lid trap_pkey "
    "trap_hl_qp trap_qkey", "ClassPortInfo"), "ClassPortInfo attribute.")

ServiceRecord = _layer("ServiceRecord", "service_record", {
    **_named("service_id service_gid service_p_key reserved service_lease service_key service_name "
             "service_data8 service_data16 service_data32 service_data64", "ServiceRecord"),
    "service_name_text": "the service name as text (instead of service_name's bytes)",
}, "SA ServiceRecord.")


class CM(Layer):
    """A CM message (the MAD's body): message name and its fields as ``cm.fields`` names
    them. Use the per-message classes (``CM_REQ``, ``CM_REP`` …); ``cma_header`` (a dict of
    src, dst, src_port) sets the RDMA-CM header in the private data."""

    member = "cm"
    message: ClassVar[str] = ""
    __slots__ = ()

    def __init__(self, **values: Any) -> None:
        super().__init__(**values)

    def _apply(self, record: Dict[str, Any]) -> None:
        fields = {k: v for k, v in self.values.items() if k != "cma_header"}
        cm: Dict[str, Any] = {"message": self.message, "fields": fields}
        if "cma_header" in self.values:
            cm["cma_header"] = self.values["cma_header"]
        record["cm"] = cm


def _cm(message: str, names: str) -> Type[CM]:
    fields = _named(names, f"CM {message}")
    fields["cma_header"] = "the RDMA-CM header in the private data: {'src': ip, 'dst': ip, 'src_port': n}"
    lines = [f"CM {message} message.", "", "Fields (unset ones are zero):"]
    lines += [f"    {k}: {d}" for k, d in fields.items()]
    return type(f"CM_{message}", (CM,), {"__slots__": (), "__doc__": "\n".join(lines), "message": message,
                                         "fields": fields, "__module__": __name__})


CM_REQ = _cm("REQ", "local_comm_id reserved_4 service_id local_ca_guid reserved_24 local_qkey local_qpn "
                    "responder_resources local_eecn initiator_depth remote_eecn remote_cm_response_timeout "
                    "transport_service_type end_to_end_flow_control starting_psn local_cm_response_timeout "
                    "retry_count partition_key path_mtu rdc_exists rnr_retry_count max_cm_retries srq "
                    "extended_transport_type primary_path alternate_path sap_supported private_data")
CM_MRA = _cm("MRA", "local_comm_id remote_comm_id message_mraed reserved_8 service_timeout reserved_9 private_data")
CM_REJ = _cm("REJ", "local_comm_id remote_comm_id message_rejected reserved_8 reject_info_length reserved_9 "
                    "reason ari private_data")
CM_REP = _cm("REP", "local_comm_id remote_comm_id local_qkey local_qpn reserved_15 local_eecn reserved_19 "
                    "starting_psn reserved_23 responder_resources initiator_depth target_ack_delay "
                    "failover_accepted end_to_end_flow_control rnr_retry_count srq reserved_27 local_ca_guid "
                    "private_data")
CM_RTU = _cm("RTU", "local_comm_id remote_comm_id private_data")
CM_DREQ = _cm("DREQ", "local_comm_id remote_comm_id remote_qpn_eecn reserved_11 private_data")
CM_DREP = _cm("DREP", "local_comm_id remote_comm_id private_data")
CM_SIDR_REQ = _cm("SIDR_REQ", "request_id partition_key reserved_6 service_id private_data")
CM_SIDR_REP = _cm("SIDR_REP", "request_id status additional_info_length reserved_6 qpn reserved_11 service_id "
                              "q_key additional_info private_data")
CM_LAP = _cm("LAP", "attribute_id data")
CM_APR = _cm("APR", "attribute_id data")


# The frames the decoder reads besides RoCEv2: built by the native encode_l2 from the same
# fields the decoder writes (so any decoded arp/igmp/mld/ndisc record is rebuilt with `/`).
ARP = _layer("ARP", "arp", {
    "operation": "'request' (default) or 'reply' (or the number)",
    "sender_mac": "sender hardware address (default 02:00:00:00:00:01; also the frame's source MAC)",
    "sender_ip": "sender protocol address",
    "target_mac": "target hardware address (default 00:00:00:00:00:00)",
    "target_ip": "target protocol address",
}, "ARP packet (Ethernet/IPv4); the frame goes to the broadcast MAC, a reply to its target MAC.")

IGMP = _layer("IGMP", "igmp", {
    "version": "2 (default; v1/v2 messages) or 3",
    "type": "v2: 'V2MembershipReport' (default), 'LeaveGroup', 'MembershipQuery', 'V1MembershipReport'; "
            "v3: 'Report' (default) or 'Query'",
    "max_resp_code": "max response code (queries)",
    "group": "group address",
    "s_flag": "v3 query: suppress router-side processing",
    "qrv": "v3 query: querier's robustness variable",
    "qqic": "v3 query: querier's query interval code",
    "sources": "v3 query: source addresses",
    "records": "v3 report: [{'record_type': 4, 'group': '239.1.2.3', 'sources': []}, ...]",
}, "IGMP message; the IPv4 header defaults as Linux sends it (TTL 1, DSCP CS6, Router Alert, "
   "to the message's destination group).")

MLD = _layer("MLD", "mld", {
    "version": "1 or 2 (default)",
    "type": "v1: 'V1Report', 'V1Done', 'Query'; v2: 'Report' (default) or 'Query'",
    "max_resp_delay": "v1: maximum response delay",
    "max_resp_code": "v2 query: maximum response code",
    "group": "multicast address",
    "s_flag": "v2 query: suppress router-side processing",
    "qrv": "v2 query: querier's robustness variable",
    "qqic": "v2 query: querier's query interval code",
    "sources": "v2 query: source addresses",
    "records": "v2 report: [{'record_type': 4, 'group': 'ff0e::1', 'sources': []}, ...]",
}, "MLD message (ICMPv6, checksum computed); the IPv6 header defaults as Linux sends it "
   "(hop limit 1, a Hop-by-Hop Router Alert, to the message's destination).",
   top_level={"hop_by_hop": "hop_by_hop"})

NDisc = _layer("NDisc", "ndisc", {
    "type": "'NeighborSolicit' (default) or 'NeighborAdvert'",
    "target": "target address",
    "source_lladdr": "NS: Source Link-Layer Address option (None: no option)",
    "target_lladdr": "NA: Target Link-Layer Address option (None: no option)",
    "flags": "NA: flags as a 32-bit word (0x40000000 Solicited, 0x20000000 Override)",
}, "IPv6 Neighbor Solicitation or Advertisement (ICMPv6, checksum computed; hop limit 255).",
   top_level={"hop_by_hop": "hop_by_hop"})
