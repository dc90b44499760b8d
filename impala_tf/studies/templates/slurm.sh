#!/bin/bash
# @@SBATCH@@
# @@ABOUT@@
#
# Rendered from impala-tf's template impala_tf/studies/templates/slurm.sh (which shellcheck reads,
# tests/test_cluster.py) by `python -m impala_tf.cluster render --target=slurm`.

set -euo pipefail
: "${SLURM_JOB_NODELIST:?run this script with sbatch}"
mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
NODES_NEEDED=@@NODES_NEEDED@@
if ((${#NODES[@]} < NODES_NEEDED)); then
  echo "error: the run needs $NODES_NEEDED nodes, the allocation has ${#NODES[@]}" >&2
  exit 2
fi

PYTHON=@@PYTHON@@
GRACE_SECONDS=@@GRACE_SECONDS@@
TRAINING_FLAGS=(@@TRAINING_FLAGS@@)
CLUSTER_FLAGS=(@@CLUSTER_FLAGS@@)
ACTOR_FLAGS=(@@ACTOR_FLAGS@@)
LEARNER_SRUN=(@@LEARNER_SRUN@@)
ACTOR_SRUN=(@@ACTOR_SRUN@@)
# One process a line: its job, the index of its node in NODES, its task.
PROCESSES=(@@PROCESSES@@)
learner_pids=()
actor_pids=()

# launch ROLE NODE TASK SRUN_OPTIONS... -- EXTRA_FLAGS...: one srun step, one process.
launch() {
  local role=$1 node=$2 task=$3 options=()
  shift 3
  while (($#)) && [[ $1 != -- ]]; do options+=("$1"); shift; done
  shift
  srun --nodes=1 --ntasks=1 --exact --nodelist="$node" --job-name="$role-$task" \
    "${options[@]}" "$PYTHON" -m impala_tf.experiment "${TRAINING_FLAGS[@]}" \
    "${CLUSTER_FLAGS[@]}" --job_name="$role" --task="$task" "$@" &
}

for process in "${PROCESSES[@]}"; do
  read -r role node task <<<"$process"
  if [[ $role == learner ]]; then
    launch learner "${NODES[node]}" "$task" "${LEARNER_SRUN[@]}" --
    learner_pids+=("$!")
  else
    launch actor "${NODES[node]}" "$task" "${ACTOR_SRUN[@]}" -- "${ACTOR_FLAGS[@]}"
    actor_pids+=("$!")
  fi
done

status=0
for pid in "${learner_pids[@]}"; do
  wait "$pid" || status=$?
done
echo "learners finished (status $status); actors get ${GRACE_SECONDS}s to exit" >&2
deadline=$((SECONDS + GRACE_SECONDS))
for pid in "${actor_pids[@]}"; do
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 1; done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
done
exit "$status"
