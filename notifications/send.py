"""Sending one delivery: an e-mail through Django's mail framework (``EMAIL_*``
settings; any SMTP server, or a provider through django-anymail), or a webhook: a POST
whose JSON body is signed with the user's secret, so the receiver can check it came from
this portal and was not changed::

    X-Quartermaster-Signature: sha256=<hex HMAC-SHA256 of the raw body>
    X-Quartermaster-Delivery: <idempotency key>   (a receiver may see a key twice: at least once)

``slack`` format sends Slack's incoming-webhook shape (``{"text": ...}``), signed as well.

Whether a webhook URL may be sent to at all is ``notifications.outbound``'s question,
asked again at each send (DNS may have changed since the URL was set); what a failed
send records says nothing of ports (refused, reset and timed out read the same).
"""

from __future__ import annotations

import hashlib
import hmac
import json

from django.conf import settings
from django.core.mail import send_mail

from notifications import outbound
from notifications.models import Channel, Delivery, Preference, WebhookFormat


class Undeliverable(Exception):
    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


#: Django's mail backends that send to no inbox, and what becomes of their mail.
MAIL_KEPT_ELSEWHERE = {
    "django.core.mail.backends.console.EmailBackend": "is printed on the portal's console",
    "django.core.mail.backends.filebased.EmailBackend": "is written to files in {EMAIL_FILE_PATH}",
    "django.core.mail.backends.locmem.EmailBackend": "is kept in the portal's memory (a test setting)",
    "django.core.mail.backends.dummy.EmailBackend": "is thrown away (Django's dummy backend)",
}


def mail_kept_elsewhere() -> str | None:
    """What becomes of this site's e-mail when it goes to no inbox ("is written to files
    in /srv/qm/var/mail"), for the pages to tell users; None when it is sent (SMTP, or a
    provider's backend). A mail server that is down shows in each delivery's last error."""
    fate = MAIL_KEPT_ELSEWHERE.get(settings.EMAIL_BACKEND)
    return fate.format(EMAIL_FILE_PATH=getattr(settings, "EMAIL_FILE_PATH", "")) if fate else None


def deliver(delivery: Delivery, pref: Preference | None) -> None:
    """Send ``delivery`` once; raises ``Undeliverable`` saying why not."""
    if delivery.channel == Channel.EMAIL:
        address = delivery.user.email
        if not address:
            raise Undeliverable("the user has no e-mail address", permanent=True)
        try:
            send_mail(delivery.subject, delivery.body, settings.DEFAULT_FROM_EMAIL, [address])
        except OSError as exc:  # smtplib's errors are OSErrors too
            raise Undeliverable(f"SMTP: {exc}") from exc
        return
    if pref is None or not pref.webhook_url:
        raise Undeliverable("no webhook URL is set any more", permanent=True)
    if pref.webhook_format == WebhookFormat.SLACK:
        document: dict[str, object] = {"text": f"*{delivery.subject}*\n{delivery.body}"}
    else:
        document = {"subject": delivery.subject, "text": delivery.body, **delivery.payload}
    body = json.dumps(document, sort_keys=True).encode()
    headers = {
        "Content-Type": "application/json",
        "X-Quartermaster-Signature": signature(pref.webhook_secret, body),
        "X-Quartermaster-Delivery": delivery.key,
    }
    try:
        code = outbound.post(pref.webhook_url, content=body, headers=headers, timeout=settings.NOTIFY_WEBHOOK_TIMEOUT)
    except outbound.Refused as exc:
        raise Undeliverable(f"webhook URL not allowed: {exc}", permanent=True) from exc
    except outbound.Unreachable as exc:
        raise Undeliverable(f"webhook {exc}") from exc
    _check_answer(code)


def _check_answer(code: int) -> None:
    """Raises ``Undeliverable`` unless ``code`` is a success. A 4xx (but 408 and 429) will
    not change by trying again; nor will a redirect, which is never followed."""
    if 200 <= code < 300:
        return
    if 300 <= code < 400:
        raise Undeliverable(f"webhook answered {code} (redirects are not followed)", permanent=True)
    raise Undeliverable(f"webhook answered {code}", permanent=400 <= code < 500 and code not in (408, 429))
