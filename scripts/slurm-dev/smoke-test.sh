#!/usr/bin/env bash
# Origin: the team recipe shared/slurm-dev (copied into the project unchanged in behaviour).
# smoke-test.sh - check that a cluster from start-cluster.sh really schedules
# GPU jobs, and print a few timings.
#
# Usage:  bash smoke-test.sh [DIR] [--bench]     (DIR default: /tmp/slurm-dev)
#   --bench  also time 200 back-to-back `sbatch` calls
# Exit status 0 when every check passed; the last line is "N passed, N failed".
set -uo pipefail

DIR=""
BENCH=0
for arg in "$@"; do
    case "$arg" in
        --bench) BENCH=1 ;;
        *) DIR="$arg" ;;
    esac
done
DIR="${DIR:-${SLURM_DEV_DIR:-/tmp/slurm-dev}}"
export SLURM_CONF="$DIR/etc/slurm.conf"
cd "$DIR/jobs" || exit 1

passed=0
failed=0
check() {   # check NAME CMD...: run CMD, count and print the result
    local name=$1; shift
    if "$@" >/dev/null 2>&1; then
        passed=$((passed + 1)); echo "ok   $name"
    else
        failed=$((failed + 1)); echo "FAIL $name"
    fi
}
ms() { echo $(( $(date +%s%N) / 1000000 )); }
state() { scontrol show job -o "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
wait_state() {   # wait_state JOBID STATE SECONDS
    local i
    for ((i = 0; i < $3 * 20; i++)); do
        [ "$(state "$1")" = "$2" ] && return 0
        sleep 0.05
    done
    return 1
}

nodes=$(sinfo -h -o '%D')
check "sinfo: all $nodes nodes idle" test "$(sinfo -h -t idle -o '%D')" = "$nodes"

# 1. The job from the brief: 2 GPUs on a named node, sleep 5, echo hi.
cat > smoke-job.sh <<'EOF'
#!/bin/bash
echo "node=$SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES"
sleep 5
echo hi
EOF
t0=$(ms)
jid=$(sbatch --parsable --gres=gpu:2 --nodelist=node2 -J smoke --comment=smoke:1 \
      -o "$DIR/jobs/smoke-%j.out" smoke-job.sh)
check "sbatch --gres=gpu:2 --nodelist=node2 -> job $jid" test -n "$jid"
check "job $jid reaches RUNNING" wait_state "$jid" RUNNING 10
t_run=$(( $(ms) - t0 ))
check "job $jid runs on node2 with 2 GPUs" \
    bash -c "scontrol show job -d $jid | grep -q 'Nodes=node2 .*GRES=gpu:[a-z0-9]*:2(IDX:0-1)'"
check "job $jid reaches COMPLETED" wait_state "$jid" COMPLETED 20
t_done=$(( $(ms) - t0 ))
check "job $jid output has 'hi' and CUDA_VISIBLE_DEVICES=0,1" \
    bash -c "grep -q '^hi$' smoke-$jid.out && grep -q 'gpus=0,1' smoke-$jid.out"
echo "     sbatch -> RUNNING ${t_run} ms, sbatch -> COMPLETED ${t_done} ms"

# 2. Cancel, hold/release, drain/resume.
jid=$(sbatch --parsable --gres=gpu:1 -o /dev/null --wrap 'sleep 60')
wait_state "$jid" RUNNING 10
scancel "$jid"
check "scancel -> CANCELLED" wait_state "$jid" CANCELLED 15
jid=$(sbatch --parsable --hold -o /dev/null --wrap 'true')
check "sbatch --hold -> PENDING/JobHeldUser" \
    bash -c "squeue -h -j $jid -o '%T %r' | grep -q 'PENDING JobHeldUser'"
scontrol release "$jid"
check "release -> COMPLETED" wait_state "$jid" COMPLETED 15
scontrol update nodename=node4 state=drain reason=smoke
check "drain node4" bash -c "sinfo -h -n node4 -o '%T' | grep -q drain"
scontrol update nodename=node4 state=resume
check "resume node4" bash -c "sinfo -h -n node4 -o '%T' | grep -q idle"

# 3. Machine-readable state.
if command -v python3 >/dev/null; then
    check "squeue --json parses" bash -c "squeue --json | python3 -c 'import json,sys; json.load(sys.stdin)[\"jobs\"]'"
    check "sinfo --json parses" bash -c "sinfo --json | python3 -c 'import json,sys; json.load(sys.stdin)[\"nodes\"]'"
fi
if grep -q '^AccountingStorageType=accounting_storage/slurmdbd' "$SLURM_CONF"; then
    check "sacct shows the smoke job" bash -c "sacct -X -P -n -o JobName,State -S now-1hour | grep -q '^smoke|COMPLETED'"
else
    check "sacct -c shows the smoke job" bash -c "sacct -c -P -n | grep -q '|smoke|'"
fi
if [ -S "$DIR/restd/slurmrestd.sock" ] && command -v curl >/dev/null; then
    check "slurmrestd GET /slurm/v0.0.38/jobs" bash -c \
        "curl -sf --unix-socket $DIR/restd/slurmrestd.sock http://localhost/slurm/v0.0.38/jobs | grep -q '\"jobs\"'"
fi

# 4. Optional: sbatch throughput.
if [ "$BENCH" = 1 ]; then
    t0=$(ms)
    for ((i = 0; i < 200; i++)); do
        sbatch --parsable -o /dev/null --wrap true >/dev/null || failed=$((failed + 1))
    done
    t_sub=$(( $(ms) - t0 ))
    while [ -n "$(squeue -h -o %i)" ]; do sleep 0.2; done
    echo "     200 x sbatch: ${t_sub} ms ($(( 200000 / (t_sub > 0 ? t_sub : 1) )) jobs/s); all finished after $(( $(ms) - t0 )) ms"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
