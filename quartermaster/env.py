"""Strict readers for settings that come from the environment.

Each helper fails loudly (``ImproperlyConfigured`` naming the variable) on a value it
cannot parse, instead of silently falling back: a typo in production configuration
should stop the process at start-up, not change behaviour at run time.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable
from typing import TypeVar

from django.core.exceptions import ImproperlyConfigured

from people.choices import Role

N = TypeVar("N", int, float)

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be one of 1/0/true/false/yes/no/on/off, got {raw!r}")


def _env_number(
    name: str, default: N, parse: Callable[[str], N], kind: str, minimum: N | None, maximum: N | None = None
) -> N:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = parse(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be {kind}, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name} must be <= {maximum}, got {value}")
    return value


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    return _env_number(name, default, int, "an integer", minimum)


def env_float(name: str, default: float, *, minimum: float | None = None, maximum: float | None = None) -> float:
    return _env_number(name, default, float, "a number", minimum, maximum)


def env_choice(name: str, default: str, choices: list[str]) -> str:
    value = os.environ.get(name, "").strip() or default
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_port_range(name: str, default: tuple[int, int]) -> tuple[int, int]:
    """``"20000-29999"`` -> ``(20000, 29999)``: both ends between 1024 and 65535, low <= high."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    match = re.fullmatch(r"(\d+)\s*-\s*(\d+)", raw)
    low, high = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
    if not match or not 1024 <= low <= high <= 65535:
        raise ImproperlyConfigured(f"{name} must be a port range LOW-HIGH within 1024-65535, got {raw!r}")
    return low, high


_HOST_NAME = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*\.?", re.I)


def env_hosts_and_networks(name: str) -> list[str]:
    """``"hooks.lab.internal, 10.1.2.0/24, 127.0.0.1"`` -> host names (lower case) and IP
    networks (a bare address is a network of one), comma-separated. A network with host
    bits set (``10.1.2.3/24``) or an item that is neither fails loudly: an allow-list
    that silently opened more, or less, than written is worse than none."""
    items: list[str] = []
    for item in env_list(name, []):
        try:
            items.append(str(ipaddress.ip_network(item.strip("[]"))))
        except ValueError:
            if not _HOST_NAME.fullmatch(item) or len(item) > 253:
                raise ImproperlyConfigured(
                    f"{name} must list host names and IP networks like 'hooks.lab.internal, 10.1.2.0/24', got {item!r}"
                ) from None
            items.append(item.lower().rstrip("."))
    return items


def env_weights(name: str) -> dict[str, float]:
    """``"H100-80GB=2, L4=0.5"`` -> ``{"H100-80GB": 2.0, "L4": 0.5}``: a finite weight >= 0
    per name (a GPU model, say)."""
    weights: dict[str, float] = {}
    for item in env_list(name, []):
        key, sep, raw = item.partition("=")
        try:
            value = float(raw)
        except ValueError:
            value = float("nan")
        if not sep or not key.strip() or not value >= 0 or value == float("inf"):
            raise ImproperlyConfigured(f"{name} must look like 'MODEL=2.0, OTHER=0.5' with weights >= 0, got {item!r}")
        weights[key.strip()] = value
    return weights


def env_levels(name: str) -> tuple[int, ...]:
    """``"1800, 86400"`` -> ``(1800, 86400)``: whole numbers > 0, strictly ascending
    (service-level thresholds); unset or empty: ``()``."""
    levels: list[int] = []
    for item in env_list(name, []):
        try:
            value = int(item)
        except ValueError:
            value = 0
        if value < 1 or (levels and value <= levels[-1]):
            raise ImproperlyConfigured(f"{name} must be ascending whole numbers > 0 like '1800, 86400', got {item!r}")
        levels.append(value)
    return tuple(levels)


def env_sharing_overheads(name: str, default: dict[str, float]) -> dict[str, float]:
    """Overheads by GPU sharing mode (``time-slicing``, ``mps``) or ``MODEL/mode``, as
    ``"time-slicing=0.1, mps=0.05, T4/mps=0.03"``; a plain number applies to every mode."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return dict(default)
    try:
        value = float(raw)
    except ValueError:
        table = env_weights(name)
    else:
        if not value >= 0 or value == float("inf"):
            raise ImproperlyConfigured(f"{name} must be a number >= 0 or 'mode=0.1, MODEL/mode=0.05', got {raw!r}")
        return dict.fromkeys(default, value)
    modes = set(default)
    for key in table:
        if key.rpartition("/")[2] not in modes:
            raise ImproperlyConfigured(f"{name}: {key!r} names no sharing mode ({', '.join(sorted(modes))})")
    return {**default, **table}


def env_secret(name: str, *, debug: bool, debug_default: str) -> str:
    """A secret that must be set outside DEBUG; DEBUG gets a fixed, clearly unsafe value."""
    value = os.environ.get(name, "")
    if value:
        return value
    if debug:
        return debug_default
    raise ImproperlyConfigured(
        f"{name} must be set when DEBUG is off; the embedded demo runs with DEBUG=1 (as make demo does): "
        "DEBUG=1 .venv/bin/python manage.py ..."
    )


def env_int_list(name: str, default: list[int]) -> list[int]:
    """Comma-separated integers (``"48, 79"``); a non-integer item fails loudly."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return [int(item) for item in raw.split(",") if item.strip()]
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be comma-separated integers, got {raw!r}") from None


_RATE_PERIODS = {"s": "second", "m": "minute", "h": "hour", "d": "day"}


def env_rate(name: str, default: str) -> str:
    """A request rate as DRF's throttles read it: ``<count>/<second|minute|hour|day>``
    (DRF looks only at the period's first letter, so ``30/min`` works too)."""
    raw = os.environ.get(name, "").strip() or default
    count, _, period = raw.partition("/")
    if not (count.isdigit() and int(count) > 0 and period[:1] in _RATE_PERIODS):
        raise ImproperlyConfigured(f"{name} must look like 30/minute (a positive count per s/m/h/d), got {raw!r}")
    return raw


def env_group_map(name: str) -> dict[str, tuple[str, str]]:
    """Directory groups to accounts: ``<group DN>=<account>:<member|coordinator>`` entries
    separated by ``;`` (a DN has its own ``=`` and ``,``, so the last ``=`` splits; the
    role defaults to member). DNs compare in lower case, as django-auth-ldap gives them."""
    mapping: dict[str, tuple[str, str]] = {}
    for entry in filter(None, (part.strip() for part in os.environ.get(name, "").split(";"))):
        dn, sep, target = entry.rpartition("=")
        account, colon, role = target.partition(":")
        if not sep or not dn.strip() or not account.strip() or (colon and role not in Role.values):
            raise ImproperlyConfigured(f"{name}: {entry!r}: write <group DN>=<account>:<{'|'.join(Role.values)}>")
        mapping[dn.strip().lower()] = (account.strip(), role or Role.MEMBER.value)
    return mapping


def env_proxy_ssl_header(name: str) -> tuple[str, str] | None:
    """``"HTTP_X_FORWARDED_PROTO,https"`` -> ``("HTTP_X_FORWARDED_PROTO", "https")``, Django's
    ``SECURE_PROXY_SSL_HEADER``: the header (as WSGI names it) and the value a TLS-terminating
    proxy sets in it. Unset or empty: ``None`` (the portal trusts no header). A header not in
    its ``HTTP_`` form would never match a request, so it fails here rather than silently."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    header, sep, value = (part.strip() for part in raw.partition(","))
    if not sep or not value or "," in value or not header.startswith("HTTP_") or header != header.upper():
        raise ImproperlyConfigured(f"{name} must look like HTTP_X_FORWARDED_PROTO,https, got {raw!r}")
    return header, value
