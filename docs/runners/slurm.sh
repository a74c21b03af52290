#!/bin/sh
# A Slurm job array: one task per shard of a plan; the index reaches scanledger as
# SLURM_ARRAY_TASK_ID. The shard stores go to a shared file system beside the plan.
#
#   scanledger plan --contract contract.json --source postgres:pg.json --shards 8 --out "$PWD/plan"
#   jid=$(sbatch --parsable --array=0-7 docs/runners/slurm.sh "$PWD/plan/plan.json")
#   sbatch --dependency=afterany:"$jid" --wrap \
#     "scanledger --store $PWD/plan/merged.redb merge --plan $PWD/plan/plan.json --out $PWD/plan/merged.redb $PWD/plan/shard-*.redb"
#
# `afterany`, not `afterok`: a task's exit code decides nothing, the merge reads every shard's
# receipt (a missing or failed shard shows in the merged status). Requeueing a task
# (`scontrol requeue`) continues the shard's own run.
#
# With `plan --hold-snapshot` (run the plan command on a host that stays up, e.g.
# `nohup scanledger plan ... --hold-snapshot 2>plan.log &`; it ignores SIGHUP), only a verified
# merge releases the snapshot: a merge after a failed task leaves it held and names the shards
# to scan again, so requeue those tasks (`scontrol requeue JOBID_K`) and submit the merge again.
# `scanledger plan --release "$PWD/plan"` releases it without a merge; `scancel` of the
# coordinator's job (SIGTERM) does too.
#SBATCH --job-name=scanledger-shard
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=1
#SBATCH --time=24:00:00
set -eu
plan=${1:?usage: sbatch --array=0-N-1 slurm.sh PLAN.json}
dir=$(dirname "$plan")
exec scanledger --store "$dir/shard-${SLURM_ARRAY_TASK_ID}.redb" \
    scan --plan "$plan" --shard-from-env --no-progress
