#!/usr/bin/env bash
# Origin: the team recipe shared/slurm-dev (copied into the project unchanged in behaviour).
# stop-cluster.sh - stop the dev cluster that start-cluster.sh started in DIR.
#
# Usage:  bash stop-cluster.sh [DIR]      (default: $SLURM_DEV_DIR, else /tmp/slurm-dev)
#
# Only processes named by the pid files in DIR are signalled, and only when the
# process's command name is the expected daemon (guards against a reused pid).
# Never pkill/killall. Order:
#   1. cancel every job through Slurm, so slurmstepd and job processes end
#      the normal way (KillWait=5 s in our slurm.conf)
#   2. slurmrestd, 3. each slurmd (+ any slurmstepd of ours left behind),
#   4. slurmctld, 5. slurmdbd, 6. mariadbd, 7. munged
# State, logs and config stay in DIR; `rm -rf DIR` afterwards for a clean slate.
set -uo pipefail
export PATH="$PATH:/usr/sbin:/sbin"

DIR="${1:-${SLURM_DEV_DIR:-/tmp/slurm-dev}}"
if [ ! -d "$DIR" ]; then
    echo "[slurm-dev] nothing to stop: $DIR does not exist"
    exit 0
fi
DIR="$(cd "$DIR" && pwd)"
export SLURM_CONF="$DIR/etc/slurm.conf"

T0=$(date +%s%N)
log() { printf '[slurm-dev] %s (+%d ms)\n' "$*" $(( ($(date +%s%N) - T0) / 1000000 )); }

# live_pid PIDFILE COMM: print the pid when PIDFILE names a live (non-zombie)
# process whose command name is COMM.
live_pid() {
    local pidfile=$1 comm=$2 pid state
    [ -s "$pidfile" ] || return 1
    pid=$(tr -dc '0-9' < "$pidfile")
    [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$comm" ] || return 1
    state=$(sed 's/^.*) //' "/proc/$pid/stat" | cut -d' ' -f1)
    [ "$state" != Z ] && [ "$state" != X ] || return 1
    echo "$pid"
}

gone() {    # gone PID COMM: the pid is dead, a zombie, or another program now
    local pid=$1 comm=$2 state
    [ -r "/proc/$pid/stat" ] || return 0
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$comm" ] || return 0
    state=$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)
    [ "$state" = Z ] || [ "$state" = X ]
}

# stop_pid PID COMM [SECONDS]: SIGTERM, wait, then SIGKILL.
stop_pid() {
    local pid=$1 comm=$2 secs=${3:-20} i
    kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < secs * 5; i++)); do
        gone "$pid" "$comm" && return 0
        sleep 0.2
    done
    log "$comm (pid $pid) ignored SIGTERM for ${secs}s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null
    sleep 0.2
}

# stop_one PIDFILE COMM [SECONDS]
stop_one() {
    local pid
    if pid=$(live_pid "$1" "$2"); then
        stop_pid "$pid" "$2" "${3:-20}"
        log "stopped $2 (pid $pid)"
    fi
    rm -f "$1"
}

# 1. Cancel all jobs while slurmctld is still there to do it cleanly.
if live_pid "$DIR/run/slurmctld.pid" slurmctld >/dev/null; then
    jobs=$(squeue -h -o '%A' 2>/dev/null | tr '\n' ' ')
    if [ -n "${jobs// /}" ]; then
        # shellcheck disable=SC2086
        scancel $jobs 2>/dev/null
        for ((i = 0; i < 100; i++)); do     # up to 20 s (KillWait is 5 s)
            [ -z "$(squeue -h -t R,CG,S -o '%A' 2>/dev/null)" ] && break
            sleep 0.2
        done
        log "cancelled jobs: $jobs"
    fi
fi

# 2. slurmrestd
stop_one "$DIR/run/slurmrestd.pid" slurmrestd

# 3. every slurmd (send all the signals first: each takes a few seconds)
slurmd_pids=()
for f in "$DIR"/run/slurmd-*.pid; do
    [ -e "$f" ] || continue
    if pid=$(live_pid "$f" slurmd); then
        kill -TERM "$pid" 2>/dev/null && slurmd_pids+=("$pid")
    fi
done
for pid in "${slurmd_pids[@]}"; do
    stop_pid "$pid" slurmd 30
done
[ "${#slurmd_pids[@]}" -gt 0 ] && log "stopped slurmd pids ${slurmd_pids[*]}"
rm -f "$DIR"/run/slurmd-*.pid
# A slurmstepd outlives its slurmd when a job could not be cancelled (e.g.
# slurmctld was already dead). Ours are recognisable: slurmd chdir()s to the
# log directory, and slurmstepd keeps that cwd. Its descendants (the job's
# processes) are signalled first, then the slurmstepd itself.
descendants() {     # descendants PID: all pids below PID, children first
    local parent=$1 p ppid
    for p in /proc/[0-9]*; do
        ppid=$(sed 's/^.*) //' "$p/stat" 2>/dev/null | cut -d' ' -f2)
        if [ "$ppid" = "$parent" ]; then
            descendants "${p#/proc/}"
            echo "${p#/proc/}"
        fi
    done
}
for p in /proc/[0-9]*; do
    [ "$(cat "$p/comm" 2>/dev/null)" = slurmstepd ] || continue
    [ "$(readlink "$p/cwd" 2>/dev/null)" = "$DIR/log" ] || continue
    pid=${p#/proc/}
    log "stopping leftover slurmstepd pid $pid and its job processes"
    for child in $(descendants "$pid"); do
        kill -KILL "$child" 2>/dev/null
    done
    stop_pid "$pid" slurmstepd 2      # it ignores SIGTERM: SIGKILL after 2 s
done

# 4.-7. the rest, in reverse order of start
stop_one "$DIR/run/slurmctld.pid" slurmctld 30
stop_one "$DIR/run/slurmdbd.pid" slurmdbd 30
stop_one "$DIR/mysql/mysqld.pid" mariadbd 60
stop_one "$DIR/munge/munged.pid" munged
log "cluster in $DIR stopped"
