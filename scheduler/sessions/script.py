"""The bash a session's job runs, on whichever backend: pick a free port on its node,
start the app's server, wait until it answers, then say so in the job's log.

The one home of the session's side of the contract with the portal:

1. A port is picked at random in ``SESSION_PORTS`` among those nothing listens on (bash's
   ``/dev/tcp``: no Python or curl needed on the node); two sessions on one node get two
   ports, and one that loses a race for its port (the server exits before it answers)
   tries another, up to :data:`PORT_TRIES` times.
2. The app's command runs with ``{port}`` and ``{base_url}`` filled in and the launch
   form's values as ``{name}``, each shell-quoted. The session's secret is never on a
   command line (every user of a node may read ``/proc/*/cmdline``): it reaches the job's
   environment at dispatch as :data:`SECRET_ENV` and is never stored in the job's script.
3. Once ``{base_url}{ready_path}`` answers over HTTP (any status), the script prints one
   :data:`READY_MARKER` line with the port to the job's log; the portal reads the port
   from it and the host from the workload manager, never from the job
   (``scheduler.models.InteractiveSession``).
4. The server stays the script's foreground: when it exits, the job ends with its status.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping

from scheduler.backends.job_env import SESSION_SECRET_ENV

#: The line a session's job prints once its server answers: ``QM-SESSION-READY port=N``.
READY_MARKER = "QM-SESSION-READY"
#: The environment variable that holds the session's secret in its job.
SECRET_ENV = SESSION_SECRET_ENV
#: How many ports a session tries before it gives up.
PORT_TRIES = 5
#: How long a session's server may take to answer, in seconds, before the job fails.
READY_SECONDS = 300
#: How often the script asks the server whether it answers, in seconds: often, since
#: every moment between the server's first answer and the ready line is the user's wait
#: (a refused connection to loopback costs next to nothing).
PROBE_SECONDS = 0.1

_PLACEHOLDER = re.compile(r"(?<!\$)\{([a-z_][a-z0-9_]*)\}")
_READY_LINE = re.compile(rf"^{READY_MARKER} port=(\d+)\s*$", re.M)


class UnknownPlaceholder(ValueError):
    """The app's command names a ``{placeholder}`` that is neither built in nor a form field."""


def fill_command(command: str, values: Mapping[str, str], *, port: str, base_url: str) -> str:
    """``command`` with ``{port}``, ``{base_url}`` and each form field's ``{name}`` filled
    in, shell-quoted; ``${VAR}`` is bash's and left alone. Raises :class:`UnknownPlaceholder`."""
    known = {**{name: shlex.quote(str(value)) for name, value in values.items()}, "base_url": shlex.quote(base_url)}
    known["port"] = port

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in known:
            raise UnknownPlaceholder(f"the command names {{{name}}}, which is not a field of the app")
        return known[name]

    return _PLACEHOLDER.sub(fill, command)


def session_script(
    *, command: str, values: Mapping[str, str], base_url: str, ready_path: str, ports: tuple[int, int]
) -> str:
    """The session job's bash script (see the module's steps). Raises :class:`UnknownPlaceholder`."""
    server = fill_command(command, values, port='"$port"', base_url=base_url)
    probe = base_url + ready_path.lstrip("/")
    low, high = ports
    return f"""#!/bin/bash
# Interactive session: {READY_MARKER} is printed once the server answers.
export QM_SESSION_BASE_URL={shlex.quote(base_url)}
free_port() {{
  local port
  for _ in $(seq 200); do
    port=$(( {low} + (RANDOM * 32768 + RANDOM) % ({high} - {low} + 1) ))
    {{ (exec 3<>"/dev/tcp/127.0.0.1/$port"); }} 2>/dev/null || {{ echo "$port"; return 0; }}
  done
  return 1
}}
answers() {{
  {{ exec 3<>"/dev/tcp/127.0.0.1/$1"; }} 2>/dev/null || return 1
  printf 'GET %s HTTP/1.0\\r\\nHost: 127.0.0.1:%s\\r\\nAuthorization: token %s\\r\\n\\r\\n' \\
    {shlex.quote(probe)} "$1" "${SECRET_ENV}" >&3
  local status
  IFS= read -r -t 5 status <&3
  exec 3>&-
  [[ $status == HTTP/* ]]
}}
for try in $(seq {PORT_TRIES}); do
  port=$(free_port) || {{ echo "no free port in {low}-{high} on $(hostname)" >&2; exit 1; }}
  export QM_SESSION_PORT=$port
  ( {server} ) &
  server=$!
  trap 'kill -TERM "$server" 2>/dev/null' TERM INT
  for _ in $(seq {round(READY_SECONDS / PROBE_SECONDS)}); do
    kill -0 "$server" 2>/dev/null || break
    if answers "$port"; then
      echo "{READY_MARKER} port=$port"
      wait "$server"
      exit $?
    fi
    sleep {PROBE_SECONDS}
  done
  if kill -0 "$server" 2>/dev/null; then
    echo "the session's server did not answer on port $port within {READY_SECONDS} s" >&2
    kill -TERM "$server"; wait "$server"; exit 1
  fi
  wait "$server"; status=$?
  echo "the session's server exited ($status) before it answered on port $port; trying another port" >&2
done
exit 1
"""


def reported_port(log: str, ports: tuple[int, int]) -> int | None:
    """The port a session's job reported ready in ``log`` (its first :data:`READY_MARKER`
    line), or None: none yet, or one outside ``ports`` (the proxy reaches no other)."""
    match = _READY_LINE.search(log)
    if match is None:
        return None
    port = int(match.group(1))
    return port if ports[0] <= port <= ports[1] else None
