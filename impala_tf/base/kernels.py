"""Which CPU kernels TensorFlow runs: oneDNN's, chosen by measurement (issue 36).

The learner's update (paper section 3: the agent re-run over T+1 steps, V-trace, the gradients;
section 3.1: time folded into batch for the convolutions) and the actors' inference are
convolution-bound on CPU. TensorFlow turns its oneDNN kernels on by default only on CPUs with
AVX-512 VNNI/BF16 or AMX; on the AVX2 machine of BENCHMARKS.md (AMD EPYC, family 25 model 1)
they were off, and turning them on made the learner's update 2.5x cheaper per frame for the deep
agent and 1.9x for the shallow one (CPU time, A B A B in one run; BENCHMARKS.md, "Where a
frame's time goes"). The results are equal to float tolerance (oneDNN sums in another order;
`tests/test_kernels.py` compares one update's loss and weights).

`prefer_onednn` sets `TF_ENABLE_ONEDNN_OPTS=1` unless the environment already says otherwise
(`TF_ENABLE_ONEDNN_OPTS=0` keeps TensorFlow's Eigen kernels). TensorFlow reads the variable when
it is imported, so the entry points call it before importing TensorFlow; the processes they start
inherit it.
"""

from __future__ import annotations

import os

ONEDNN_ENV = "TF_ENABLE_ONEDNN_OPTS"


def prefer_onednn(environ: dict[str, str] | None = None) -> str:
    """Turns TensorFlow's oneDNN kernels on in `environ` (default `os.environ`) unless it already
    names a choice; returns the value in force."""
    target = os.environ if environ is None else environ
    return target.setdefault(ONEDNN_ENV, "1")
