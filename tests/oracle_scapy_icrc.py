#!/usr/bin/env python3
"""Independent ICRC oracle: scapy.contrib.roce computes the ICRC of each frame.

Reads frames as hex, one per line, on stdin; prints, per frame, the ICRC scapy computes
(as the 4 wire bytes in hex) and the 4 ICRC bytes it parsed, separated by a space.
The Rust test compares scapy's value with ours.
"""
import sys
import logging

logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402


def main() -> int:
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        pkt = Ether(bytes.fromhex(line))
        if BTH not in pkt:
            print("nobth nobth")
            continue
        # Rebuild with the ICRC left for scapy to compute; every other field keeps its value,
        # so the last four bytes of the rebuilt frame are scapy's ICRC.
        pkt[BTH].icrc = None
        rebuilt = bytes(pkt)
        print(rebuilt[-4:].hex(), line[-8:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
