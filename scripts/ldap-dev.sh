#!/usr/bin/env bash
# ldap-dev.sh - a real OpenLDAP server (Debian's slapd) for the LDAP login tests.
#
# Usage:  bash scripts/ldap-dev.sh start DIR     start slapd with DIR as its home; prints the URI
#         bash scripts/ldap-dev.sh stop DIR      stop the slapd started in DIR, by its pid file
#
# Installs slapd and ldap-utils when missing (as root). The directory: suffix dc=qm,dc=test,
# admin cn=admin,dc=qm,dc=test with password "admin-pw", people and groups from
# scripts/ldap-dev/people.ldif, listening on 127.0.0.1 on a free port (in DIR/uri).
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cmd="${1:-}"; DIR="${2:-}"
[ -n "$cmd" ] && [ -n "$DIR" ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }

stop() {
    if [ -s "$DIR/slapd.pid" ]; then
        pid=$(cat "$DIR/slapd.pid")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
        kill -9 "$pid" 2>/dev/null || true
        rm -f "$DIR/slapd.pid"
    fi
}

case "$cmd" in
    stop) stop; exit 0 ;;
    start) ;;
    *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac

if ! command -v slapd >/dev/null 2>&1 || ! command -v ldapsearch >/dev/null 2>&1; then
    apt-get update -qq
    # slapd's postinst would configure and start the system's own directory: skip that.
    echo "slapd slapd/no_configuration boolean true" | debconf-set-selections
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slapd ldap-utils >/dev/null
fi

stop
rm -rf "$DIR/db" "$DIR/slapd.conf"
mkdir -p "$DIR/db"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$DIR/slapd.conf" <<CONF
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/nis.schema
include /etc/ldap/schema/inetorgperson.schema
pidfile $DIR/slapd.pid
modulepath /usr/lib/ldap
moduleload back_mdb
database mdb
maxsize 10485760
suffix "dc=qm,dc=test"
rootdn "cn=admin,dc=qm,dc=test"
rootpw admin-pw
directory $DIR/db
access to attrs=userPassword by self write by anonymous auth by * none
access to * by * read
CONF
slapadd -f "$DIR/slapd.conf" -l "$HERE/ldap-dev/people.ldif" >/dev/null
slapd -f "$DIR/slapd.conf" -h "ldap://127.0.0.1:$port/"
uri="ldap://127.0.0.1:$port"
for _ in $(seq 100); do
    ldapsearch -x -H "$uri" -b "dc=qm,dc=test" -s base >/dev/null 2>&1 && break
    sleep 0.05
done
ldapsearch -x -H "$uri" -b "dc=qm,dc=test" -s base >/dev/null
echo "$uri" > "$DIR/uri"
echo "$uri"
