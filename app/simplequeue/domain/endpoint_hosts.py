"""Where HTTP/S subscriptions may point: the allow-list an operator writes (SIMPLEQUEUE_SNS_ENDPOINTS),
parsed. The checks themselves (resolving, refusing metadata and private addresses) are
service.endpoints'; this is only the list, so that a setting with a bad entry is refused as the
service starts, in one line naming the entry."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

HOST_NAME = re.compile(
    r"^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$"
)


def host_name(text: str) -> str:
    """The name as compared: lower case, IDNA, no trailing dot; ValueError if it is none."""
    name = text.strip().lower().rstrip(".")
    try:
        name = name.encode("idna").decode("ascii")
    except UnicodeError:
        raise ValueError(f"not a host name: {text!r}") from None
    if not HOST_NAME.match(name):
        raise ValueError(f"not a host name: {text!r}")
    return name


@dataclass(frozen=True, slots=True)
class AllowList:
    names: frozenset[str]
    suffixes: tuple[str, ...]
    """".example.com" for an entry "*.example.com"."""
    networks: tuple[IPNetwork, ...]
    any_name: bool

    @classmethod
    def parse(cls, entries: Sequence[str]) -> AllowList:
        """Entries: a host name, "*.domain", "*", an IP address or a CIDR network. ValueError
        naming the first entry that is none of them."""
        names: set[str] = set()
        suffixes: set[str] = set()
        networks: list[IPNetwork] = []
        any_name = False
        for raw in entries:
            entry = raw.strip()
            if not entry:
                continue
            if entry == "*":
                any_name = True
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=True))
                continue
            except ValueError:
                if "/" in entry or entry.replace(".", "").isdigit() or ":" in entry:
                    raise ValueError(f"not an IP address or network: {entry!r}") from None
            if entry.startswith("*."):
                suffixes.add("." + host_name(entry[2:]))
            else:
                names.add(host_name(entry))
        return cls(frozenset(names), tuple(sorted(suffixes)), tuple(networks), any_name)

    @classmethod
    def from_setting(cls, text: str) -> AllowList:
        """Entries separated by commas or white space."""
        return cls.parse(re.split(r"[\s,]+", text.strip()) if text.strip() else [])
