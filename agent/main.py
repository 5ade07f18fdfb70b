"""The node agent: read this node's GPUs and post them to the portal in batches.

    qm-agent --portal https://portal.example.org --token "$QM_NODE_TOKEN"
    python -m agent --once --print      # one batch as JSON, nothing posted

It needs only the standard library, ``nvidia-ml-py`` (``--collector nvml``, the default)
or ``prometheus-client`` (``--collector dcgm``), not Django. While the portal cannot be
reached, batches wait in a bounded buffer (``--buffer``, oldest dropped first) and go
out with the next successful post; samples are idempotent on (GPU, time), so a batch
sent twice after a lost answer is stored once.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from agent.collectors.base import Collector, CollectorError
from agent.collectors.dcgm import DcgmCollector
from agent.collectors.nvml import NvmlCollector

log = logging.getLogger("qm-agent")

INGEST_PATH = "/api/v1/monitoring/samples/"
MAX_PER_REQUEST = 5000


class Sender:
    """Buffers samples and posts them; ``flush`` returns how many the portal took."""

    def __init__(
        self,
        url: str,
        token: str,
        node: str,
        *,
        buffer: int = 100_000,
        timeout: float = 30,
        post: Callable[[urllib.request.Request, float], Any] | None = None,
    ) -> None:
        self.url = url.rstrip("/") + INGEST_PATH
        self.token = token
        self.node = node
        self.pending: deque[dict[str, Any]] = deque(maxlen=buffer)
        self.timeout = timeout
        self._post = post or (lambda request, timeout: urllib.request.urlopen(request, timeout=timeout))

    def add(self, samples: Sequence[dict[str, Any]]) -> None:
        dropped = max(0, len(self.pending) + len(samples) - (self.pending.maxlen or 0))
        if dropped:
            log.warning("buffer full: dropping the %d oldest samples", dropped)
        self.pending.extend(samples)

    def flush(self) -> int:
        """Post everything buffered, oldest first, in requests of at most ``MAX_PER_REQUEST``.

        Stops at the first failure and keeps what was not sent. A batch the portal
        answers 400 (every sample invalid) is dropped and logged: resending it cannot help.
        """
        accepted = 0
        while self.pending:
            chunk = [self.pending[i] for i in range(min(MAX_PER_REQUEST, len(self.pending)))]
            body = json.dumps({"node": self.node, "samples": chunk}).encode()
            request = urllib.request.Request(
                self.url,
                data=body,
                method="POST",
                headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
            )
            try:
                with self._post(request, self.timeout) as response:
                    result = json.loads(response.read() or b"{}")
            except urllib.error.HTTPError as exc:
                if exc.code == 400:
                    log.error(
                        "portal rejected a batch of %d: %s", len(chunk), exc.read()[:500].decode(errors="replace")
                    )
                    self._drop(len(chunk))
                    continue
                log.error("portal answered %s; keeping %d samples for later", exc.code, len(self.pending))
                return accepted
            except (OSError, ValueError) as exc:
                log.warning("portal unreachable (%s); keeping %d samples for later", exc, len(self.pending))
                return accepted
            for rejected in result.get("rejected", [])[:5]:
                log.warning("sample rejected: %s", rejected)
            accepted += int(result.get("accepted", 0))
            self._drop(len(chunk))
        return accepted

    def _drop(self, n: int) -> None:
        for _ in range(n):
            self.pending.popleft()


def make_collector(args: argparse.Namespace) -> Collector:
    if args.collector == "dcgm":
        return DcgmCollector(args.dcgm_url)
    return NvmlCollector()


def batch(collector: Collector, now: datetime | None = None) -> list[dict[str, Any]]:
    """One reading of every GPU, as ingest payloads with one shared timestamp."""
    at = (now or datetime.now(UTC)).replace(microsecond=0)
    return [reading.to_payload(at) for reading in collector.collect()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="qm-agent", description=__doc__.split("\n\n")[0])
    parser.add_argument("--portal", default=os.environ.get("QM_PORTAL_URL", ""), help="Portal base URL.")
    parser.add_argument("--token", default=os.environ.get("QM_NODE_TOKEN", ""), help="This node's token.")
    parser.add_argument("--node", default=os.environ.get("QM_NODE_NAME", socket.gethostname().split(".")[0]))
    parser.add_argument("--collector", choices=["nvml", "dcgm"], default=os.environ.get("QM_COLLECTOR", "nvml"))
    parser.add_argument("--dcgm-url", default=os.environ.get("QM_DCGM_URL", "http://127.0.0.1:9400/metrics"))
    parser.add_argument("--interval", type=float, default=10.0, help="Seconds between samples (default 10).")
    parser.add_argument("--post-every", type=int, default=1, help="Post every N samples (default 1).")
    parser.add_argument("--buffer", type=int, default=100_000, help="Most samples kept while the portal is away.")
    parser.add_argument("--once", action="store_true", help="Sample once, post (or print), exit.")
    parser.add_argument("--print", action="store_true", help="Print the batch as JSON instead of posting it.")
    args = parser.parse_args(argv)
    if not args.print and not (args.portal and args.token):
        parser.error("--portal and --token (or QM_PORTAL_URL and QM_NODE_TOKEN) are required unless --print")
    if args.interval <= 0 or args.post_every < 1:
        parser.error("--interval must be > 0 and --post-every >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    args = parse_args(argv)
    try:
        collector = make_collector(args)
        if args.print:
            print(json.dumps({"node": args.node, "samples": batch(collector)}, indent=2))
            return 0
    except CollectorError as exc:
        log.error("%s", exc)
        return 1
    sender = Sender(args.portal, args.token, args.node, buffer=args.buffer)
    rounds = 0
    while True:
        began = time.monotonic()
        try:
            sender.add(batch(collector))
        except CollectorError as exc:
            log.error("collect failed: %s", exc)
        rounds += 1
        if args.once or rounds % args.post_every == 0:
            sender.flush()
        if args.once:
            return 0 if not sender.pending else 1
        time.sleep(max(0.0, args.interval - (time.monotonic() - began)))


if __name__ == "__main__":
    sys.exit(main())
