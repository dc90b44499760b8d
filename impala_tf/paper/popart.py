"""The PopArt paper's published aggregate scores, for putting a `--popart` run beside them.

Hessel, Soyer, Espeholt, Czarnecki, Schmitt, van Hasselt, "Multi-task Deep Reinforcement Learning
with PopArt", AAAI 2019 (arXiv 1809.04474): the IMPALA agent of Espeholt et al. (2018) with PopArt
normalisation of each task's values and policy-gradient advantages (`impala_tf.maths.popart`). Its Table 1
summarises PopArt-IMPALA on three multi-task benchmarks:

- Atari-57: median human-normalised score over the 57 games, rewards clipped to [-1, 1] as in the
  IMPALA paper (our `--preset=atari57_popart`);
- Atari-57 (unclipped): the same with the games' original rewards (ours:
  `--preset=atari57_popart --reward_clipping=none`);
- DmLab-30: mean capped human-normalised score over the 30 levels, test levels here (ours:
  `--preset=dmlab30_popart`).

Where the numbers come from. The PopArt paper's own text could not be read while this was written;
each value is what secondary sources that quote its Table 1 give, and none is marked verified
against the paper (`verified` is False for all three; `status` says what is established):

- Atari-57: 110.7 %, the median with random (no-op) starts, the start condition of our evaluation
  (up to 30 no-ops). One source quotes the table cell; another summary gives "110 %", and the
  abstract says the agent "exceeds median human performance".
- Atari-57 (unclipped): 107.0 %, random starts, from the same source quoting the table. The same
  source notes that the paper's text rounds the unclipped median to about 101 %; the table is
  preferred. (An earlier transcription here used 101.5 %, which is not the unclipped random-starts
  cell; UNVERIFIED which cell it is.)
- DmLab-30: 72.8 % mean capped human-normalised score, quoted by two independent sources. That it
  is the test-level score (Table 1 gives train and test) follows from those sources' comparison
  with IMPALA's test scores; UNVERIFIED against the table itself.
- The paper's own IMPALA baselines in Table 1 (retrained with PBT and the PopArt paper's budgets;
  one source quotes 59.7 % clipped and 0.3 % unclipped, random starts) are not used; reports
  compare with the IMPALA paper's Table 3 / Table 4 rows instead.

Pure data: this module imports only the standard library.
"""

from __future__ import annotations

from typing import NamedTuple

DMLAB30_TEST = "DmLab-30 (test)"
ATARI57 = "Atari-57"
ATARI57_UNCLIPPED = "Atari-57 (unclipped)"


class PopArtResult(NamedTuple):
    """One published PopArt-IMPALA aggregate.

    Attributes:
      benchmark: `DMLAB30_TEST`, `ATARI57` or `ATARI57_UNCLIPPED`.
      metric: what the percentage is ("mean capped human-normalised" or "median human-normalised").
      popart_impala: PopArt-IMPALA's published score in percent.
      source: where in the PopArt paper it is printed.
      verified: True when the value was checked against the paper's own text (see the module
        docstring: no value is, yet).
      status: what establishes the value, and what is uncertain.
    """

    benchmark: str
    metric: str
    popart_impala: float
    source: str
    verified: bool
    status: str


TABLE_1: dict[str, PopArtResult] = {
    DMLAB30_TEST: PopArtResult(
        DMLAB30_TEST,
        "mean capped human-normalised",
        72.8,
        "PopArt paper, Table 1 (DmLab-30, test)",
        False,
        "value quoted by two secondary sources; the test split UNVERIFIED",
    ),
    ATARI57: PopArtResult(
        ATARI57,
        "median human-normalised",
        110.7,
        "PopArt paper, Table 1 (Atari-57, random starts)",
        False,
        "cell quoted by a secondary source (another: 110 %); UNVERIFIED against the paper",
    ),
    ATARI57_UNCLIPPED: PopArtResult(
        ATARI57_UNCLIPPED,
        "median human-normalised",
        107.0,
        "PopArt paper, Table 1 (Atari-57 unclipped, random starts)",
        False,
        "cell quoted by a secondary source (the paper's text: about 101 %); UNVERIFIED",
    ),
}


def atari_benchmark(reward_clipping: str | None) -> str:
    """The Table 1 Atari column for a run's reward clipping (`none` -> unclipped, else clipped)."""
    return ATARI57_UNCLIPPED if reward_clipping == "none" else ATARI57
