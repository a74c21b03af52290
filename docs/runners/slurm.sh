#!/bin/sh
# A sharded scan on Slurm, in one snapshot: the coordinator, a job array of shards, the merge.
#
#   sh slurm.sh submit DIR CONTRACT SOURCE SHARDS    on a login node: submits the three jobs
#   sh slurm.sh retry DIR K...                       scans shards K again, then merges again
#   scanledger plan --release DIR                    gives the snapshot up without a merge
#
# DIR is a new folder on a file system every node sees; it gets the plan, one store per shard
# (DIR/shard-K.redb), the merged run (DIR/merged.redb) and the jobs' output (DIR/slurm-*.out).
# `submit` sends three jobs:
#
# - scanledger-plan: `scanledger plan --hold-snapshot`, a job of its own, so it outlives the
#   login session. It exports a PostgreSQL snapshot, writes DIR/plan.json and holds the
#   snapshot until a verified merge, `plan --release DIR`, `scancel` (SIGTERM) or its timeout
#   (SCANLEDGER_HOLD_SECONDS, default 86400, which is also the job's time limit).
# - scanledger-shard, an array of SHARDS tasks (SLURM_ARRAY_TASK_ID is the shard): each waits
#   for DIR/plan.json (at most SCANLEDGER_PLAN_WAIT seconds, default 3600) and scans its shard
#   into DIR/shard-K.redb, inside the held snapshot.
# - scanledger-merge, after every task of the array whatever its outcome (`afterany`: with
#   `afterok` a task that failed and was requeued leaves the merge pending for ever,
#   DependencyNeverSatisfied). It merges the shard stores that exist (a shard with none is
#   `shard_missing`); its exit code is the merged run's status (0 verified, 3 unknown,
#   4 failed). A verified merge releases the snapshot and the coordinator's job ends; a merge
#   that is not verified leaves the snapshot held and names the shards to scan again.
#
# A task that fails while the array still runs can be requeued (`scontrol requeue
# ARRAYJOB_K`): it continues its shard's run from its store, and the merge still waits for it.
# When the merge names shards to scan again (a task failed, was cancelled or never ran):
#   sh slurm.sh retry DIR K...
# submits those shards again as an array of their own indices (`--array=K,...`; a task that
# never started cannot be requeued) and the merge again after it, in the snapshot still held.
# An interrupted shard continues its run from DIR/shard-K.redb; a shard whose run finished but
# is not verified is scanned into a new store: move DIR/shard-K.redb aside first.
#
# Credentials never pass through the submit environment (sbatch keeps a job's environment in
# the controller's state directory): the jobs get only PATH and HOME from it
# (`--export=PATH,HOME`). Give the DSN in a file of mode 0600 named by SCANLEDGER_DSN_FILE, and
# `"dsn_env": "SCANLEDGER_DSN"` in the source config: each job reads the file and exports the
# variable to scanledger only. Or keep the password in ~/.pgpass (mode 0600) and no secret in
# the DSN at all.
#
# SCANLEDGER_BIN names the binary (default: scanledger on PATH); sbatch's own variables
# (SBATCH_PARTITION, SBATCH_ACCOUNT, SBATCH_QOS...) choose where the jobs run.
set -eu

usage() {
    echo "usage: sh slurm.sh submit DIR CONTRACT SOURCE SHARDS | retry DIR K... | ROLE DIR" >&2
    exit 2
}

# Absolute path of $1 (which exists).
absolute() {
    (cd "$(dirname "$1")" && printf '%s/%s\n' "$(pwd -P)" "$(basename "$1")")
}

# $1 quoted for sh.
quote() {
    printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}

# Exports SCANLEDGER_DSN from the 0600 file SCANLEDGER_DSN_FILE names, if any.
load_dsn() {
    [ -n "$dsn_file" ] || return 0
    mode=$(stat -c %a "$dsn_file") || exit 2
    case "$mode" in
    600 | 400) ;;
    *)
        echo "slurm.sh: $dsn_file has mode $mode: make it 0600 (chmod 600)" >&2
        exit 2
        ;;
    esac
    SCANLEDGER_DSN=$(cat "$dsn_file")
    export SCANLEDGER_DSN
}

# Submits the merge after the jobs $1 (a Slurm dependency list); prints its job ID.
submit_merge() {
    sbatch --parsable --export=PATH,HOME --job-name=scanledger-merge --ntasks=1 \
        --dependency="afterany:$1" --output="$dir/slurm-%x-%j.out" "$script" merge "$dir"
}

role=${1:-}
[ $# -ge 2 ] || usage
dir=$2
case "$role" in
submit)
    [ $# -eq 5 ] || usage
    script=$(absolute "$0")
    contract=$(absolute "$3")
    source_spec=$4
    shards=$5
    bin=${SCANLEDGER_BIN:-$(command -v scanledger || echo scanledger)}
    dsn_file=${SCANLEDGER_DSN_FILE:-}
    if [ -n "$dsn_file" ]; then
        dsn_file=$(absolute "$dsn_file")
        load_dsn
        unset SCANLEDGER_DSN
    fi
    if [ -e "$dir/plan.json" ] || [ -e "$dir/run.env" ]; then
        echo "slurm.sh: $dir already holds a plan: give each sharded scan a new folder" >&2
        exit 2
    fi
    mkdir -p "$dir"
    dir=$(absolute "$dir")
    hold=${SCANLEDGER_HOLD_SECONDS:-86400}
    {
        echo "bin=$(quote "$bin")"
        echo "dsn_file=$(quote "$dsn_file")"
        echo "shards=$(quote "$shards")"
        echo "plan_wait=$(quote "${SCANLEDGER_PLAN_WAIT:-3600}")"
        echo "script=$(quote "$script")"
    } >"$dir/run.env"
    plan_job=$(sbatch --parsable --export=PATH,HOME --job-name=scanledger-plan --ntasks=1 \
        --time=$(((hold + 119) / 60)) --output="$dir/slurm-%x-%j.out" \
        "$script" coordinator "$dir" "$contract" "$source_spec" "$hold")
    array_job=$(sbatch --parsable --export=PATH,HOME --job-name=scanledger-shard --ntasks=1 \
        --array="0-$((shards - 1))" --output="$dir/slurm-%x-%A_%a.out" \
        "$script" shard "$dir")
    merge_job=$(submit_merge "$array_job")
    {
        echo "plan_job=$plan_job"
        echo "array_job=$array_job"
    } >>"$dir/run.env"
    echo "plan_job=$plan_job array_job=$array_job merge_job=$merge_job"
    ;;
retry)
    [ $# -ge 3 ] || usage
    dir=$(absolute "$dir")
    . "$dir/run.env"
    shift 2
    list=""
    for k in "$@"; do
        case "$k" in
        *[!0-9]* | "") usage ;;
        esac
        task=$(scontrol show job -o "${array_job}_$k" 2>/dev/null | tr ' ' '\n' | sed -n 's/^JobState=//p')
        case "$task" in
        PENDING | RUNNING | CONFIGURING | COMPLETING | SUSPENDED | REQUEUED*)
            echo "slurm.sh: task ${array_job}_$k is $task: retry it once it has ended" >&2
            exit 2
            ;;
        esac
        list="${list:+$list,}$k"
    done
    retry_job=$(sbatch --parsable --export=PATH,HOME --job-name=scanledger-shard --ntasks=1 \
        --array="$list" --output="$dir/slurm-%x-%A_%a.out" "$script" shard "$dir")
    merge_job=$(submit_merge "$retry_job")
    echo "retry_job=$retry_job merge_job=$merge_job"
    ;;
coordinator)
    . "$dir/run.env"
    load_dsn
    exec "$bin" --json plan --contract "$3" --source "$4" --shards "$shards" --out "$dir" \
        --hold-snapshot --hold-timeout-seconds "$5" >"$dir/plan.out"
    ;;
shard)
    . "$dir/run.env"
    waited=0
    while [ ! -f "$dir/plan.json" ]; do
        if [ "$waited" -ge "$plan_wait" ]; then
            echo "slurm.sh: no $dir/plan.json after $plan_wait s (see $dir/slurm-scanledger-plan-*.out)" >&2
            exit 1
        fi
        sleep 1
        waited=$((waited + 1))
    done
    load_dsn
    exec "$bin" --store "$dir/shard-$SLURM_ARRAY_TASK_ID.redb" \
        scan --plan "$dir/plan.json" --shard-from-env --no-progress
    ;;
merge)
    . "$dir/run.env"
    if [ ! -f "$dir/plan.json" ]; then
        echo "slurm.sh: no $dir/plan.json: the coordinator did not make the plan" >&2
        exit 2
    fi
    set --
    k=0
    while [ "$k" -lt "$shards" ]; do
        # A shard that never began has no store: leave it out, the merge names it missing.
        [ -f "$dir/shard-$k.redb" ] && set -- "$@" "$dir/shard-$k.redb"
        k=$((k + 1))
    done
    code=0
    "$bin" --store "$dir/merged.redb" merge --plan "$dir/plan.json" \
        --out "$dir/merged.redb" "$@" || code=$?
    if [ "$code" -ne 0 ]; then
        echo "slurm.sh: the merge is not verified (exit $code); scan the shards it names again:" >&2
        echo "  sh $script retry $dir K..." >&2
    fi
    exit "$code"
    ;;
*)
    usage
    ;;
esac
