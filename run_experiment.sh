#!/usr/bin/env bash
# Trains IMPALA on this machine: one learner and --num_actors actor processes, reachable only from
# each other (a private network namespace where Linux allows it; README, Security).
# Installs the pinned requirements into ./.venv on first use. All flags go to impala_tf.experiment;
# without --preset the level chooses the paper's settings:
#   ./run_experiment.sh                                   # default: a toy task, learns in minutes on a laptop
#   ./run_experiment.sh --level_name=atari/pong           # the paper's Atari settings (Table G.1)
#   ./run_experiment.sh --level_name=dmlab30 --dataset_path=/path/to/brady_konkle_oliva2008
#   ./run_experiment.sh --mode=describe --agent=deep      # print the resolved configuration and the network
# Without --logdir each training run gets a new runs/<level>-<UTC time>; the run prints the commands
# that resume and evaluate it, written as you invoked this script.
set -euo pipefail
export IMPALA_TF_COMMAND="$0" IMPALA_TF_CALLER_DIR="$PWD"
cd "$(dirname "${BASH_SOURCE[0]}")"
source scripts/bootstrap.sh requirements.txt
exec "${PYTHON}" -m impala_tf.experiment "$@"
