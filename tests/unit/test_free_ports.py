"""Ports the sandbox chooses up front for its servers (kube-apiserver, Ray heads, a pod's
declared container ports) lie below the kernel's ephemeral range, so nothing that asks the
kernel for a port (Ray's own metrics server did) or opens a connection can take one meanwhile."""

from __future__ import annotations

import socket

from nrl_k8s_sandbox import ray_head


def test_ports_are_distinct_free_and_outside_the_ephemeral_range():
    ports = ray_head.free_ports(50)
    assert len(set(ports)) == 50
    assert all(20000 <= port < ray_head._ephemeral_start() for port in ports)
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_in_use_is_never_chosen(monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        # the only port of the range is taken: the kernel's choice, never the taken port
        monkeypatch.setattr(ray_head, "_RAY_WORKER_PORTS_END", port)
        monkeypatch.setattr(ray_head, "_ephemeral_start", lambda: port + 1)
        assert port not in ray_head.free_ports(2)


def _free_pair() -> int:
    """A port ``p`` below the ephemeral range with ``p`` and ``p + 1`` both free."""
    while True:
        low = ray_head.free_ports(1)[0]
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", low))
                b.bind(("127.0.0.1", low + 1))
            return low
        except OSError:
            continue


def test_a_port_handed_out_is_not_handed_out_again_until_its_claim_is_old(monkeypatch, tmp_path):
    low = _free_pair()
    monkeypatch.setattr(ray_head, "_RAY_WORKER_PORTS_END", low)
    monkeypatch.setattr(ray_head, "_ephemeral_start", lambda: low + 2)
    claims = tmp_path / "claims"
    first, second = ray_head.free_ports(1, claims), ray_head.free_ports(1, claims)
    assert {*first, *second} == {low, low + 1}  # both free again, but each claimed once
    assert not {low, low + 1} & set(ray_head.free_ports(1, claims))  # the kernel's choice
    assert claims.stat().st_mode & 0o777 == 0o700
    monkeypatch.setattr(ray_head, "CLAIM_S", 0.0)  # every claim is stale now
    assert set(ray_head.free_ports(2, claims)) == {low, low + 1}
