#!/usr/bin/env bash
# slurm-dev-cluster.sh - a real Slurm 22.05 cluster on this machine, for tests and benchmarks.
#
# Usage:  bash scripts/slurm-dev-cluster.sh start|wait|status|stop|env      (start/stop as root)
#   start   install Debian's slurmctld/slurmd/munge (+ slurmdbd, MariaDB) when missing, start a
#           fresh cluster in $SLURM_DEV_DIR and wait until every node is idle
#   wait    wait until every node is idle again (e.g. after tests drained one)
#   status  print sinfo; exit 1 when no cluster runs in $SLURM_DEV_DIR
#   stop    stop exactly the daemons started in $SLURM_DEV_DIR, by their pid files
#   env     print "export SLURM_CONF=..." for eval
#
# The cluster: nodes node1..node4, 16 CPUs, 64000 MB, 8 fake GPUs each (GRES types
# a100 and h100, alternating), partition "gpu", accounting through slurmdbd + MariaDB so
# that finished jobs stay visible to `sacct`. The tests find it through SLURM_CONF.
# Users, the portal's service user, the sudo rule and Slurm accounts: slurm-dev-users.sh.
#
# Origin: scripts/slurm-dev/{start,stop}-cluster.sh are the team's slurm-dev recipe
# (written for this project's Slurm work), copied unchanged so the project is
# self-sufficient; this wrapper only chooses our defaults and adds wait/status.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

export SLURM_DEV_DIR="${SLURM_DEV_DIR:-/tmp/qm-slurm-dev}"
export SLURM_DEV_GPU_TYPES="${SLURM_DEV_GPU_TYPES:-a100,h100}"
export SLURM_DEV_RESTD="${SLURM_DEV_RESTD:-0}"   # the adapter uses the CLI, not REST
export SLURM_CONF="$SLURM_DEV_DIR/etc/slurm.conf"

all_idle() {
    local total idle
    total=$(sinfo -h -N -o '%N' 2>/dev/null | sort -u | wc -l)
    idle=$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)
    [ "$total" -gt 0 ] && [ "$total" = "$idle" ]
}

wait_idle() {
    local deadline=$(($(date +%s) + ${1:-60}))
    until all_idle; do
        if [ "$(date +%s)" -ge "$deadline" ]; then
            echo "[slurm-dev] nodes not idle after ${1:-60}s:" >&2
            sinfo -N -o '%N %T %E' >&2 || true
            return 1
        fi
        sleep 0.2
    done
}

case "${1:-}" in
    start)
        t0=$(date +%s%N)
        bash "$HERE/slurm-dev/start-cluster.sh" --fresh "$SLURM_DEV_DIR"
        bash "$HERE/slurm-dev-users.sh"
        wait_idle 60
        echo "[slurm-dev] ready in $((($(date +%s%N) - t0) / 1000000)) ms: export SLURM_CONF=$SLURM_CONF"
        ;;
    wait) wait_idle "${2:-60}" ;;
    status)
        [ -f "$SLURM_CONF" ] && scontrol ping >/dev/null 2>&1 || { echo "no Slurm dev cluster in $SLURM_DEV_DIR"; exit 1; }
        sinfo -N -o '%N %T %G %E'
        ;;
    stop) bash "$HERE/slurm-dev/stop-cluster.sh" "$SLURM_DEV_DIR" ;;
    env) echo "export SLURM_CONF=$SLURM_CONF" ;;
    *)
        sed -n '2,18p' "${BASH_SOURCE[0]}"
        exit 2
        ;;
esac
