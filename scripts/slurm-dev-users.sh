#!/usr/bin/env bash
# slurm-dev-users.sh - the dev cluster's people, as a site has them (run as root, after
# the cluster is up; scripts/slurm-dev-cluster.sh start calls it).
#
#   Unix users alice, bob, charlie, dora (group qm-users, homes under /home) and the
#   portal's unprivileged service user qmportal; Debian's sudo with the project's rule
#   (deploy/sudoers.d/quartermaster) so that qmportal may run Slurm's commands as a
#   member of qm-users and nothing else; Slurm accounts lab, other, nlp and vision with
#   associations for the users (sacctmgr), as the test personas belong to them.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RULE="$HERE/../deploy/sudoers.d/quartermaster"

if ! command -v sudo >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sudo >/dev/null
fi
getent group qm-users >/dev/null || groupadd qm-users
for user in alice bob charlie dora; do
    id -u "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash --groups qm-users "$user"
    usermod -a -G qm-users "$user"
    chmod 0750 "/home/$user"
done
id -u qmportal >/dev/null 2>&1 || useradd --system --create-home --home-dir /var/lib/qmportal --shell /bin/bash qmportal
visudo -cqf "$RULE"
install -m 0440 "$RULE" /etc/sudoers.d/quartermaster

# Accounts and associations (sacctmgr answers "Nothing new added" on a second run).
add() { sacctmgr -i "$@" >/dev/null 2>&1 || true; }
add add account lab,other,nlp,vision Description=qm-dev Organization=qm-dev
add add user alice Account=lab,nlp DefaultAccount=lab
add add user bob Account=lab,vision DefaultAccount=lab
add add user charlie Account=other DefaultAccount=other
add add user dora Account=lab DefaultAccount=lab
for user in alice bob charlie dora; do
    sacctmgr -n -P list associations user="$user" format=account | grep -q . \
        || { echo "[slurm-dev] no Slurm association for $user" >&2; exit 1; }
done
echo "[slurm-dev] users alice bob charlie dora (qm-users), service user qmportal, sudo rule, accounts ready"
