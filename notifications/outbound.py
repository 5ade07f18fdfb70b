"""May the portal send to this user-given URL? The one home for that question, asked when
a user sets a webhook URL (its form and its API) and again at every send, because the
answer of DNS may change in between.

The portal runs inside the site's network; a URL a researcher chose must not turn it into
a probe of that network (server-side request forgery). The rule:

1. Only ``http://`` and ``https://`` URLs.
2. The host name is resolved (every address ``getaddrinfo`` gives) and the URL is refused
   when ANY address is internal: loopback, private, link-local, shared (100.64/10),
   multicast, reserved, unspecified, not globally routable, an IPv6 form that carries
   such an IPv4 address (IPv4-mapped, IPv4-compatible, 6to4, Teredo, NAT64), or one of
   the portal's own addresses (those of ``ALLOWED_HOSTS``, ``PORTAL_URL`` and this
   machine's host name).
3. The site allow-list ``NOTIFY_WEBHOOK_ALLOWED_HOSTS`` opens what an administrator
   names: a host name (every address it resolves to) or an IP network.
4. The POST goes to an address that was checked, never to a second lookup's answer (no DNS
   rebinding between check and connect): the request's URL carries the vetted address,
   while its ``Host`` header and TLS server name (SNI, and so certificate checking) keep
   the host name. It goes direct, never through an ``HTTP(S)_PROXY``, and redirects are
   not followed: a 3xx is the receiver's answer, reported as such.
5. Nothing a sender sees tells a closed port from an open one: a refused, reset or silent
   connection, or a peer that is not HTTP, all read the same (``Unreachable``).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import httpx
from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

SCHEMES = ("http", "https")
INTERNAL = (
    "it points to an internal address (loopback, private, link-local or the portal's own); "
    "an administrator can allow a host in NOTIFY_WEBHOOK_ALLOWED_HOSTS"
)
# IPv6 ranges whose last 32 bits are an IPv4 address the packet reaches in the end.
_CARRY_IPV4 = (ipaddress.IPv6Network("::/96"), ipaddress.IPv6Network("64:ff9b::/96"))


class Refused(Exception):
    """The portal will not send to this URL; ``str()`` completes "not allowed: ..."
    and is fit to show the URL's owner (it says nothing of ports)."""


class Unreachable(Exception):
    """Nothing usable answered. Deliberately the same words whatever happened (refused,
    reset, timed out, not HTTP, a bad certificate), so a sender learns no port state."""

    def __init__(self, message: str = "could not be reached") -> None:
        super().__init__(message)


class Unresolved(Unreachable):
    """The host name has no address now (DNS says so, not the host)."""

    def __init__(self) -> None:
        super().__init__("host name could not be resolved")


@dataclass(frozen=True)
class Target:
    """A URL that passed the rule, and the addresses it may be sent to (in the resolver's
    order, none internal unless the site allows it)."""

    url: httpx.URL
    addresses: tuple[str, ...]


def refusal(url: str) -> str | None:
    """Why the portal will not send to ``url``, as a sentence for the person who typed
    it (a form's or the API's error), or ``None`` when it may. A name that does not
    resolve now is not refused here: the send checks again."""
    try:
        vet(url)
    except Refused as exc:
        return f"This URL is not allowed: {exc}."
    except Unresolved:
        pass
    return None


def vet(url: str) -> Target:
    """The rule (module docstring), as one resolution of the host.

    Returns the ``Target`` to connect to. Raises ``Refused``, or ``Unresolved`` when the
    host name has no address now."""
    parsed = _parse(url)
    host = parsed.raw_host.decode("ascii").lower().rstrip(".")
    addresses = _resolve(host, parsed.port or (443 if parsed.scheme == "https" else 80))
    names, networks = _site_allowed()
    if host not in names:
        unlisted = [ip for ip in addresses if not any(ip in network for network in networks)]
        if any(_is_internal(ip) for ip in unlisted) or _own_addresses().intersection(unlisted):
            raise Refused(INTERNAL)
    return Target(parsed, tuple(str(ip) for ip in addresses))


def post(url: str, *, content: bytes, headers: dict[str, str], timeout: float) -> int:
    """POST ``content`` to ``url`` once, after ``vet``; returns the status code it
    answered (a redirect is an answer too: it is not followed), without reading its body.

    Tries each vetted address in turn while connecting to one fails. Raises ``Refused``,
    ``Unresolved`` or ``Unreachable``."""
    target = vet(url)
    host_header = target.url.netloc.decode("ascii")
    server_name = target.url.raw_host.decode("ascii")
    # trust_env=False: no proxy (it would look the name up again); certificates as httpx
    # would find them (SSL_CERT_FILE still counts).
    verify = httpx.create_ssl_context(trust_env=True)
    with httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False, verify=verify) as client:
        for address in target.addresses:
            request = client.build_request(
                "POST",
                target.url.copy_with(host=address),
                content=content,
                headers={**headers, "Host": host_header},
                extensions={"sni_hostname": server_name},
            )
            try:
                response = client.send(request, stream=True)
            except httpx.ConnectError:
                continue
            except httpx.HTTPError as exc:
                raise Unreachable() from exc
            response.close()
            return response.status_code
    raise Unreachable()


def _parse(url: str) -> httpx.URL:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        raise Refused("it is not a valid URL") from None
    if parsed.scheme not in SCHEMES:
        raise Refused("only http:// and https:// URLs are sent to")
    if not parsed.raw_host:
        raise Refused("it names no host")
    return parsed


def _resolve(host: str, port: int | None = None) -> list[IPAddress]:
    """Every address ``host`` resolves to, once each, in the resolver's order; an IP
    literal is itself. Raises ``Unresolved``."""
    try:
        answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise Unresolved() from None
    addresses: list[IPAddress] = []
    for family, _, _, _, sockaddr in answers:
        if family not in (socket.AF_INET, socket.AF_INET6):
            continue
        ip = ipaddress.ip_address(str(sockaddr[0]).partition("%")[0])  # no IPv6 zone
        if ip not in addresses:
            addresses.append(ip)
    if not addresses:
        raise Unresolved()
    return addresses


def _is_internal(ip: IPAddress) -> bool:
    """Not a public, unicast address the internet routes (or an IPv6 wrapper of one
    that is not)."""
    if isinstance(ip, ipaddress.IPv6Address) and any(_is_internal(inner) for inner in _carried_ipv4(ip)):
        return True
    return (
        not ip.is_global
        or ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
    )


def _carried_ipv4(ip: ipaddress.IPv6Address) -> Iterator[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address stands for: mapped, 6to4, Teredo (server and
    client), IPv4-compatible and NAT64."""
    yield from (inner for inner in (ip.ipv4_mapped, ip.sixtofour, *(ip.teredo or ())) if inner is not None)
    if any(ip in network for network in _CARRY_IPV4):
        yield ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)


def _site_allowed() -> tuple[set[str], list[IPNetwork]]:
    """``NOTIFY_WEBHOOK_ALLOWED_HOSTS`` as (host names, networks); the settings reader
    (``quartermaster.env.env_hosts_and_networks``) has checked each entry is one or the other."""
    names: set[str] = set()
    networks: list[IPNetwork] = []
    for entry in settings.NOTIFY_WEBHOOK_ALLOWED_HOSTS:
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]")))
        except ValueError:
            names.add(entry.lower().rstrip("."))
    return names, networks


def _own_addresses() -> set[IPAddress]:
    """The addresses the portal answers on, as far as they are cheaply known: those of
    its ``ALLOWED_HOSTS`` (``*`` aside), its ``PORTAL_URL`` and this machine's name.
    Resolved at each use (the resolver caches), so a change of address counts at once."""
    own: set[IPAddress] = set()
    for name in _own_names():
        try:
            own.update(_resolve(name))
        except Unresolved:
            continue
    return own


def _own_names() -> Iterable[str]:
    for entry in settings.ALLOWED_HOSTS:
        name = entry.lstrip(".").strip("[]")
        if name and "*" not in name:
            yield name
    portal_host = httpx.URL(settings.PORTAL_URL).host
    if portal_host:
        yield portal_host
    yield socket.gethostname()
