#!/usr/bin/env bash
# Trains IMPALA on this machine: one learner and --num_actors actor processes on loopback.
# Installs the pinned requirements into ./.venv on first use. All flags go to impala_tf.experiment:
#   ./run_experiment.sh                                   # default: a toy task, learns in minutes on a laptop
#   ./run_experiment.sh --preset=atari --level_name=atari/pong
#   ./run_experiment.sh --preset=dmlab30 --level_name=dmlab30 --dataset_path=/path/to/brady_konkle_oliva2008
#   ./run_experiment.sh --mode=describe --agent=deep      # print the resolved configuration and the network
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
source scripts/bootstrap.sh requirements.txt
exec "${PYTHON}" -m impala_tf.experiment "$@"
