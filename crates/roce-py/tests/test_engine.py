"""The engine from Python: a standalone sans-IO Stack, and hosts and an SA on a SimNet."""

import pytest
import roce


def run_until(net, done, limit=30.0):
    end = net.now + limit
    while not done():
        t = net.next_event()
        if t is None or t > end:
            return done()
        net.step()
    return True


def drain(stack, into):
    while (e := stack.poll_event()) is not None:
        into.append(e)


def test_simnet_join_send_leave_as_roce_demo_does():
    net = roce.SimNet(seed=1)
    sa_ip = "198.18.0.2"
    a = net.add_host("02:00:00:00:00:01", "198.18.0.1/24", sa=sa_ip)
    b = net.add_host("02:00:00:00:00:03", "198.18.0.3/24", sa=sa_ip)
    net.add_sa("52:54:00:12:34:02", sa_ip)
    ev_a, ev_b = [], []
    ida, idb = a.create_id("udp", "ud"), b.create_id()
    a.bind_addr(ida, "198.18.0.1")
    b.bind_addr(idb, "198.18.0.3")
    qa, qb = a.create_qp(ida), b.create_qp(idb)
    group = "239.1.2.3"
    a.join(ida, group, "FullMember")
    assert run_until(net, lambda: (drain(a, ev_a), any(e["kind"] == "MULTICAST_JOIN" for e in ev_a))[1])
    joined = next(e for e in ev_a if e["kind"] == "MULTICAST_JOIN")
    assert joined["group"] == group and joined["status"] == 0 and joined["dest"].qp_num == 0xFFFFFF
    b.join(idb, group)
    assert run_until(net, lambda: (drain(b, ev_b), any(e["kind"] == "MULTICAST_JOIN" for e in ev_b))[1])
    for i in range(3):
        a.post_send(qa, joined["dest"], f"datagram {i}".encode())
    net.run_for(0.2)
    got = []
    while (dg := b.poll_recv(qb)) is not None:
        got.append(dg)
    assert [g["payload"] for g in got if g["src"] == "198.18.0.1"] == [b"datagram 0", b"datagram 1", b"datagram 2"]
    mark = len(net.frames())
    a.leave(ida, group)
    assert run_until(net, lambda: (drain(a, ev_a), any(e["kind"] == "MULTICAST_LEFT" for e in ev_a))[1])
    # The SA Delete carried the kernel's leave mask, decoded as the CLI decodes it.
    decoded = [roce.decode(f) for _, _, f in net.frames(mark)]
    deletes = [d for d in decoded if d.get("mad", {}).get("method_name") == "SubnAdmDelete"]
    assert deletes and deletes[0]["sa"]["component_mask"] == "0x0000000000010003"
    assert group not in a.groups()
    b.leave(idb, group)
    assert run_until(net, lambda: (drain(b, ev_b), any(e["kind"] == "MULTICAST_LEFT" for e in ev_b))[1])
    assert a.sa_transactions() == 0 and b.sa_transactions() == 0


def test_simnet_pcap_reads_back(tmp_path):
    net = roce.SimNet()
    a = net.add_host("02:00:00:00:00:01", "198.18.0.1", sa="198.18.0.2")
    net.add_sa("52:54:00:12:34:02", "198.18.0.2")
    i = a.create_id()
    a.bind_addr(i, "198.18.0.1")
    a.join(i, "239.9.9.9")
    net.run_for(1.0)
    p = tmp_path / "sim.pcap"
    net.write_pcap(p)
    frames = list(roce.read(p))
    assert len(frames) == len(net.frames()) > 0
    assert any(f.get("mcmember") for f in frames)


def test_standalone_stack_is_sans_io():
    s = roce.Stack(mac="02:00:00:00:00:01", ipv4="198.18.0.1/24", sa="198.18.0.2")
    i = s.create_id()
    s.bind_addr(i, "198.18.0.1")
    s.join(i, "239.1.2.3", now=0.0)
    out = []
    while (f := s.poll_transmit(0.0)) is not None:
        out.append(roce.decode(f))
    # The SA is not known yet: the stack asks ARP for it first (and reports the group).
    assert any(d["kind"] == "arp" for d in out), [d["kind"] for d in out]
    t = s.poll_timeout()
    assert t is None or t >= 0.0
    s.handle_frame(b"\x00" * 20, 0.001)  # garbage is counted, never raised
    assert "Counters" in s.counters() or s.counters()


def test_engine_errors_are_oserrors_with_the_kernel_errno():
    s = roce.Stack()
    with pytest.raises(OSError) as e:
        s.join(12345, "239.1.2.3")
    assert e.value.errno in (2, 22, 19)  # ENOENT/EINVAL/ENODEV for an unknown id
    with pytest.raises(ValueError, match="group"):
        s.join(0, "not an address")
    with pytest.raises(ValueError, match="mac"):
        roce.Stack(mac="zz")
    with pytest.raises(ValueError, match="probability"):
        roce.SimNet().add_host("02:00:00:00:00:01", "198.18.0.1", loss=2.0)
    net = roce.SimNet()
    h = net.add_host("02:00:00:00:00:01", "198.18.0.1")
    with pytest.raises(RuntimeError, match="SimNet"):
        h.poll_transmit(0.0)
