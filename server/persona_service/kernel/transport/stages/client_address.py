"""Client-address trust: whose address a call counts as (limits, allowlists, audit)."""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable


class ClientAddress:
    """The client address: the peer, or, when the call comes from the edge
    (a trusted peer that also proves the edge secret), the downstream
    address Envoy reports (`x-envoy-client-address`). Any other local
    process sending that header is ignored."""

    def __init__(self, trusted_proxies: Iterable[str], edge_secret: str) -> None:
        self._trusted = [ipaddress.ip_network(n.strip(), strict=False) for n in trusted_proxies if n.strip()]
        self._trusted_cache: dict[str, bool] = {}
        self._edge_secret = edge_secret

    def __call__(self, peer: str, metadata: dict[str, str]) -> str | None:
        address = _peer_address(peer)
        edge_address = metadata.get("x-envoy-client-address")
        if (edge_address and address is not None and self._edge_secret
                and hmac.compare_digest(metadata.get("x-persona-edge-secret", ""), self._edge_secret)
                and self._is_trusted(address)):
            return _host_of(edge_address)
        return address

    def _is_trusted(self, address: str) -> bool:
        # Peers are few (the edge, local services): remember each verdict.
        trusted = self._trusted_cache.get(address)
        if trusted is None:
            try:
                trusted = any(ipaddress.ip_address(address) in net for net in self._trusted)
            except ValueError:
                trusted = False
            if len(self._trusted_cache) < 1024:
                self._trusted_cache[address] = trusted
        return trusted


def _host_of(address: str) -> str:
    """"1.2.3.4:5", "[::1]:5" or a bare address → the host part."""
    if address.startswith("["):
        return address[1:].split("]", 1)[0]
    if address.count(":") == 1:
        return address.split(":", 1)[0]
    return address


def _peer_address(peer: str) -> str | None:
    # "ipv4:127.0.0.1:5555", "ipv6:[::1]:5555", "unix:/path"
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rsplit(":", 1)[0]
    if kind == "ipv6":
        return rest.rsplit(":", 1)[0].strip("[]")
    return None
