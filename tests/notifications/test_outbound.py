"""Webhooks never make the portal a probe of its own network (server-side request
forgery): a URL that reaches an internal address is refused when it is set and again
when it is sent to, the POST goes to the address that was checked, redirects are not
followed, and what a failed delivery records says nothing of which ports are open. The
site's allow-list (``NOTIFY_WEBHOOK_ALLOWED_HOSTS``) opens what an administrator names."""

from __future__ import annotations

import hashlib
import hmac
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import datetime, timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from django.utils import timezone
from django.utils.html import escape

from notifications import outbound
from notifications.models import Delivery, Event, Preference, Status
from notifications.outbox import pump
from quartermaster.env import env_hosts_and_networks
from scheduler.choices import EventKind, JobState
from scheduler.jobs.transitions import transition
from tests.builders import submit
from tests.notifications.conftest import free_port, serving

pytestmark = pytest.mark.django_db

PUBLIC = "93.184.216.34"  # example.org's address: global unicast
NOT_ALLOWED = "This URL is not allowed: it points to an internal address"
#: The whole answer: what is wrong and who can change it, nothing of ports.
REFUSED = (
    f"{NOT_ALLOWED} (loopback, private, link-local or the portal's own); "
    "an administrator can allow a host in NOTIFY_WEBHOOK_ALLOWED_HOSTS."
)
UNREACHABLE = "webhook could not be reached"


def later(seconds: float = 10) -> datetime:
    return timezone.now() + timedelta(seconds=seconds)


def webhook(user, url: str) -> Preference:
    """A stored URL, as a row saved before this rule existed would be (no set-time check)."""
    return Preference.objects.create(user=user, events=[e.value for e in Event], email=False, webhook_url=url)


def start_a_job(world) -> None:
    job = submit(world.alice, world.lab)
    transition(job.id, [JobState.PENDING], JobState.RUNNING, event=EventKind.DISPATCHED, message="running")


def set_url(client_for, user, url: str):
    body = {"webhook_url": url, "email": False}
    return client_for(user).patch("/api/v1/notifications/preferences/", body, format="json")


# --- the rule ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("http://127.0.0.1:8000/hook", id="loopback"),
        pytest.param("http://127.8.9.10/", id="anywhere in 127/8"),
        pytest.param("http://localhost:5432/", id="localhost"),
        pytest.param("http://[::1]:6379/", id="IPv6 loopback"),
        pytest.param("http://169.254.169.254/latest/meta-data/", id="cloud metadata (link-local)"),
        pytest.param("http://10.0.0.5/", id="private 10/8"),
        pytest.param("http://192.168.1.10/", id="private 192.168/16"),
        pytest.param("http://172.16.0.1/", id="private 172.16/12"),
        pytest.param("http://100.64.0.1/", id="shared address space (carrier NAT)"),
        pytest.param("http://0.0.0.0:22/", id="unspecified (reaches this machine)"),
        pytest.param("http://[::]/", id="IPv6 unspecified"),
        pytest.param("http://[::ffff:127.0.0.1]/", id="IPv4-mapped loopback"),
        pytest.param("http://[::ffff:a9fe:a9fe]/", id="IPv4-mapped metadata, in hex"),
        pytest.param("http://[2002:7f00:1::1]/", id="6to4 of loopback"),
        pytest.param("http://[64:ff9b::a00:1]/", id="NAT64 of 10.0.0.1"),
        pytest.param("http://[fe80::1]/", id="IPv6 link-local"),
        pytest.param("http://[fd00::1]/", id="IPv6 unique local"),
        pytest.param("http://224.0.0.1/", id="multicast"),
        pytest.param("http://240.0.0.1/", id="reserved"),
        pytest.param("http://2130706433/", id="loopback as one decimal number"),
        pytest.param("http://loopback.example.org/", id="a name that resolves to loopback"),
        pytest.param("http://mixed.example.org/", id="a name with one internal address among public ones"),
    ],
)
def test_internal_addresses_are_refused(dns, url):
    dns.serve("loopback.example.org", "127.0.0.1")
    dns.serve("mixed.example.org", PUBLIC, "10.0.0.1")
    assert (outbound.refusal(url) or "").startswith(NOT_ALLOWED)


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("https://hooks.example.org/qm", id="a name with public addresses"),
        pytest.param(f"http://{PUBLIC}:8080/hook", id="a public IPv4 address, any port"),
        pytest.param("https://[2606:4700:4700::1111]/", id="a public IPv6 address"),
        pytest.param("https://nowhere.invalid/", id="a name that does not resolve now (the send checks again)"),
    ],
)
def test_public_addresses_are_allowed(dns, url):
    dns.serve("hooks.example.org", PUBLIC, "2606:2800:220:1:248:1893:25c8:1946")
    assert outbound.refusal(url) is None


@pytest.mark.parametrize("url", ["ftp://hooks.example.org/", "file:///etc/passwd", "gopher://hooks.example.org/"])
def test_only_http_and_https_are_sent_to(url):
    assert outbound.refusal(url) == "This URL is not allowed: only http:// and https:// URLs are sent to."


def test_the_portals_own_addresses_are_refused_even_when_public(dns, settings):
    settings.ALLOWED_HOSTS = ["portal.example.org"]
    dns.serve("portal.example.org", PUBLIC)
    dns.serve("alias.example.org", PUBLIC)
    dns.serve("elsewhere.example.org", "93.184.216.35")
    assert (outbound.refusal("https://alias.example.org/hook") or "").startswith(NOT_ALLOWED)
    assert outbound.refusal("https://elsewhere.example.org/hook") is None


def test_the_allow_list_opens_named_hosts_and_networks_only(dns, settings):
    settings.NOTIFY_WEBHOOK_ALLOWED_HOSTS = ["hooks.lab.internal", "10.1.2.0/24"]
    dns.serve("hooks.lab.internal", "10.9.9.9")
    dns.serve("other.lab.internal", "10.9.9.9")
    assert outbound.refusal("http://hooks.lab.internal/") is None
    assert outbound.refusal("http://10.1.2.3/") is None
    assert outbound.refusal("http://other.lab.internal/") is not None
    assert outbound.refusal("http://10.1.3.1/") is not None


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ("", []),
        ("Hooks.Lab.Internal, 10.1.2.0/24", ["hooks.lab.internal", "10.1.2.0/24"]),
        ("127.0.0.1,[::1],fd00::/8", ["127.0.0.1/32", "::1/128", "fd00::/8"]),
    ],
)
def test_the_allow_list_setting_reads_host_names_and_networks(monkeypatch, raw, parsed):
    monkeypatch.setenv("NOTIFY_WEBHOOK_ALLOWED_HOSTS", raw)
    assert env_hosts_and_networks("NOTIFY_WEBHOOK_ALLOWED_HOSTS") == parsed


@pytest.mark.parametrize("raw", ["10.1.2.3/24", "http://hooks.lab.internal", "hooks lab", "10.0.0.0/33"])
def test_an_allow_list_entry_that_is_neither_stops_the_portal(monkeypatch, raw):
    monkeypatch.setenv("NOTIFY_WEBHOOK_ALLOWED_HOSTS", raw)
    with pytest.raises(ImproperlyConfigured, match="NOTIFY_WEBHOOK_ALLOWED_HOSTS"):
        env_hosts_and_networks("NOTIFY_WEBHOOK_ALLOWED_HOSTS")


# --- when the URL is set -------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:22/",
        "http://localhost:8000/",
        "http://[::1]/",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.5/",
        "http://192.168.1.10/",
        "http://172.16.0.1/",
        "http://0.0.0.0/",
        "http://[::ffff:127.0.0.1]/",
        "http://loopback.example.org/",
    ],
)
def test_the_api_refuses_an_internal_webhook_url_with_a_400_naming_the_field(world, client_for, dns, url):
    dns.serve("loopback.example.org", "127.0.0.1")
    response = set_url(client_for, world.alice, url)
    assert response.status_code == 400
    assert response.json()["webhook_url"] == [REFUSED]
    assert not Preference.objects.exists()


def test_the_profile_form_refuses_an_internal_webhook_url(world):
    client = Client()
    client.force_login(world.alice)
    form = {"form": "notify", "events": ["ended"], "webhook_url": "http://169.254.169.254/", "webhook_format": "json"}

    page = client.post("/profile/", form).content.decode()

    assert escape(REFUSED) in page
    assert not Preference.objects.exists()


def test_a_public_webhook_url_is_accepted(world, client_for, dns):
    dns.serve("hooks.example.org", PUBLIC)
    assert set_url(client_for, world.alice, "https://hooks.example.org/qm").status_code == 200


# --- when it is sent to --------------------------------------------------------------------


def test_a_stored_internal_url_is_not_posted_to_and_is_given_up(world, internal_receiver):
    webhook(world.alice, internal_receiver.url)
    start_a_job(world)

    assert pump(later())["failed"] == 1

    assert internal_receiver.received == []
    assert Delivery.objects.get().last_error.startswith("webhook URL not allowed: it points to an internal address")


def test_a_name_that_resolves_elsewhere_after_it_was_set_is_checked_again(world, client_for, dns, internal_receiver):
    url = internal_receiver.url.replace("127.0.0.2", "hooks.example.org")
    dns.serve("hooks.example.org", PUBLIC)
    assert set_url(client_for, world.alice, url).status_code == 200
    dns.serve("hooks.example.org", "127.0.0.2")  # rebound by its owner
    start_a_job(world)

    assert pump(later())["failed"] == 1

    assert internal_receiver.received == []


def test_the_post_goes_to_the_address_that_was_checked_not_to_a_second_lookup(world, receiver, dns):
    """The first answer is allowed; a rebinding resolver answers an internal address to
    any later lookup, which must never be made (or never used)."""
    port = int(receiver.url.rsplit(":", 1)[1].split("/")[0])
    dns.serve("hooks.example.org", "127.0.0.1", then=["127.0.0.2"])
    with serving("127.0.0.2", port) as internal:
        webhook(world.alice, f"http://hooks.example.org:{port}/hook")
        start_a_job(world)

        assert pump(later())["sent"] == 1

    assert internal.received == []
    [(headers, _)] = receiver.received
    assert headers["Host"] == f"hooks.example.org:{port}"


def test_a_redirect_to_an_internal_address_is_not_followed(world, receiver, internal_receiver):
    receiver.answers = [302]
    receiver.headers = {"Location": internal_receiver.url}
    webhook(world.alice, receiver.url)
    start_a_job(world)

    assert pump(later())["failed"] == 1

    assert len(receiver.received) == 1 and internal_receiver.received == []
    assert Delivery.objects.get().last_error == "webhook answered 302 (redirects are not followed)"


@contextmanager
def listener(behave: Callable[[socket.socket], None] | None) -> Iterator[int]:
    """A TCP port on 127.0.0.1 whose every connection gets ``behave``; ``None``: a port
    nothing listens on."""
    if behave is None:
        yield free_port()
        return
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except OSError:
                return
            with connection:
                behave(connection)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        server.close()


def hang_up(connection: socket.socket) -> None:
    connection.recv(65536)


def say_nothing(connection: socket.socket) -> None:
    connection.settimeout(5)
    with suppress(OSError):
        while connection.recv(65536):  # until the client gives up and closes
            pass


def speak_ssh(connection: socket.socket) -> None:
    connection.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")
    connection.recv(65536)


def reset(connection: socket.socket) -> None:
    connection.recv(65536)
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST


@pytest.mark.parametrize(
    "behave",
    [
        pytest.param(None, id="closed port"),
        pytest.param(hang_up, id="open port that hangs up"),
        pytest.param(reset, id="open port that resets"),
        pytest.param(say_nothing, id="open port that says nothing (timeout)"),
        pytest.param(speak_ssh, id="open port that is not HTTP"),
    ],
)
def test_a_failed_send_reads_the_same_whatever_the_port_did(world, settings, behave):
    settings.NOTIFY_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.NOTIFY_WEBHOOK_TIMEOUT = 0.5
    with listener(behave) as port:
        webhook(world.alice, f"http://127.0.0.1:{port}/hook")
        start_a_job(world)
        assert pump(later())["retry"] == 1

    assert Delivery.objects.get().last_error == UNREACHABLE


# --- the allow-list ------------------------------------------------------------------------


def test_the_allow_list_lets_a_local_receiver_get_the_signed_post(world, client_for, settings, receiver):
    settings.NOTIFY_WEBHOOK_ALLOWED_HOSTS = []
    assert set_url(client_for, world.alice, receiver.url).status_code == 400

    settings.NOTIFY_WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    assert set_url(client_for, world.alice, receiver.url).status_code == 200
    start_a_job(world)
    assert pump(later())["sent"] == 1

    [(headers, body)] = receiver.received
    secret = Preference.objects.get(user=world.alice).webhook_secret.encode()
    assert headers["X-Quartermaster-Signature"] == "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    assert Delivery.objects.get().status == Status.SENT


def test_an_allowed_host_name_is_sent_to_with_its_name_in_the_host_header(world, settings, receiver, dns):
    settings.NOTIFY_WEBHOOK_ALLOWED_HOSTS = ["hooks.lab.internal"]
    dns.serve("hooks.lab.internal", "127.0.0.1")
    webhook(world.alice, receiver.url.replace("127.0.0.1", "hooks.lab.internal"))
    start_a_job(world)

    assert pump(later())["sent"] == 1

    [(headers, _)] = receiver.received
    assert headers["Host"].startswith("hooks.lab.internal:")
