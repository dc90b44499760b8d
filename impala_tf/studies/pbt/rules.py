"""The rules of the paper's population-based training, as pure functions (paper appendix F).

- `sample_initial`: a member's starting hyperparameters, from the distributions of Table D.1
  (`impala_tf.paper.table_d1`: entropy cost and learning rate log-uniform, RMSProp epsilon from
  four values) and, for the gradient-clipping threshold that Table G.1
  evolves for Atari-57, log-uniform in [20, 80] (our choice: see `SAMPLING` and docs/pbt.md).
- `ready`: after a burn-in of 20 million frames without evolution, a member takes a step each time
  it has collected 5,000 episode returns since its last step.
- `exploit`: the member compares itself with one other member chosen at random and copies it
  (weights, optimiser state, hyperparameters) only if the other's fitness is higher by more than an
  absolute 5 %.
- `explore`: in any case each evolved hyperparameter is multiplied by 1.2 or 1/1.2 (with equal
  probability: unbiased, unlike the 1.2 / 0.8 of the original PBT) with probability 33 %.

Appendix F's numbers are the defaults of the `--pbt_*` settings (`impala_tf.base.configs.PBTConfig`),
read here once; perturbed values stay inside the bounds of the settings they become (`BOUNDS`).
Randomness comes from the `random.Random` passed in, so that a controller can replay its decisions
(`decision_rng`). See docs/pbt.md.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Mapping, Sequence

from impala_tf.base import configs
from impala_tf.paper import table_d1

# Appendix F, as the settings' defaults.
_APPENDIX_F = configs.PBTConfig()
POPULATION = _APPENDIX_F.pbt_population
BURN_IN_FRAMES = _APPENDIX_F.pbt_burn_in_frames
READY_EPISODES = _APPENDIX_F.pbt_ready_episodes
THRESHOLD = _APPENDIX_F.pbt_threshold
PERTURB_PROB = _APPENDIX_F.pbt_perturb_prob
PERTURB_FACTOR = _APPENDIX_F.pbt_perturb_factor


@dataclasses.dataclass(frozen=True)
class LogUniform:
    """`exp(uniform(log low, log high))`."""

    low: float
    high: float

    def sample(self, rng: random.Random) -> float:
        return math.exp(rng.uniform(math.log(self.low), math.log(self.high)))


@dataclasses.dataclass(frozen=True)
class Choice:
    """One of `values`, uniformly."""

    values: tuple[float, ...]

    def sample(self, rng: random.Random) -> float:
        return rng.choice(self.values)


# Table D.1, and for the gradient-clipping threshold (evolved for Atari-57, Table G.1, whose fixed
# value is 40) our choice: log-uniform over a factor 2 either side of 40. The paper gives no range;
# a factor 2 is about four perturbation steps of 1.2 (1.2^4 = 2.07), so the population starts as
# spread as a few steps of evolution would make it, and every member still clips (UNVERIFIED:
# docs/faithfulness.md).
SAMPLING: dict[str, LogUniform | Choice] = {
    "entropy_cost": LogUniform(*table_d1.ENTROPY_COST),
    "learning_rate": LogUniform(*table_d1.LEARNING_RATE),
    "epsilon": Choice(table_d1.RMSPROP_EPSILONS),
    "grad_norm_clipping": LogUniform(20.0, 80.0),
}


def setting_bounds(name: str) -> tuple[float, float]:
    """`(lower, upper)` of the learner setting `name` (`impala_tf.base.configs`), infinite where the
    setting has no bound: the values a member's flag may take."""
    (found,) = [s for s in configs.settings() if s.section == "learner" and s.name == name]
    lower = -math.inf if found.lower is None else float(found.lower)
    upper = math.inf if found.upper is None else float(found.upper)
    return lower, math.nextafter(upper, -math.inf) if found.open_upper else upper


# Perturbations stay inside the settings' own bounds: (lower, upper).
BOUNDS: dict[str, tuple[float, float]] = {
    name: setting_bounds(name) for name in configs.PBT_HYPERPARAMETERS
}


def decision_rng(seed: int, *keys: object) -> random.Random:
    """A generator determined by the run's seed and the decision's keys (member, step): replaying a
    decision after a restart draws the same numbers."""
    return random.Random(":".join(str(k) for k in ("pbt", seed, *keys)))


def sample_initial(names: Sequence[str], rng: random.Random) -> dict[str, float]:
    """A member's starting values of the evolved hyperparameters (Table D.1; `SAMPLING`).

    Args:
      names: the evolved hyperparameters, keys of `SAMPLING`.
      rng: the generator (e.g. `decision_rng(seed, "init", member)`).

    Returns:
      name -> value, in the order of `names`.

    Raises:
      KeyError: a name without a sampling distribution.
    """
    return {name: float(SAMPLING[name].sample(rng)) for name in names}


def ready(
    frames: int,
    episodes_since_step: int,
    burn_in_frames: int = BURN_IN_FRAMES,
    ready_episodes: int = READY_EPISODES,
) -> bool:
    """Whether a member takes an evolution step now (appendix F).

    Args:
      frames: the member's environment frames.
      episodes_since_step: episode returns it collected since its last step (or its start).
      burn_in_frames: no step before this many frames (20 million in the paper).
      ready_episodes: episode returns between steps (5,000 in the paper).
    """
    return frames >= burn_in_frames and episodes_since_step >= ready_episodes


@dataclasses.dataclass(frozen=True)
class Exploit:
    """The outcome of `exploit`.

    Attributes:
      other: the member compared with, or None when there is no other member.
      copy: whether to copy it (its fitness is higher by more than the threshold).
    """

    other: int | None
    copy: bool


def exploit(
    member: int,
    fitness: float | None,
    others: Mapping[int, float | None],
    rng: random.Random,
    threshold: float = THRESHOLD,
) -> Exploit:
    """Compares `member` with one other member chosen uniformly at random (appendix F).

    Args:
      member: the member taking the step (never chosen).
      fitness: its fitness (None: unknown; then it never copies).
      others: every other member -> its fitness (None when it has none yet, e.g. right after it
        copied someone: it is then not copied).
      rng: the generator.
      threshold: copy only if the other's fitness exceeds `fitness + threshold` (absolute).

    Returns:
      The member chosen and whether to copy it.
    """
    candidates = sorted(m for m in others if m != member)
    if not candidates:
        return Exploit(None, False)
    other = rng.choice(candidates)
    theirs = others[other]
    copy = fitness is not None and theirs is not None and theirs > fitness + threshold
    return Exploit(other, copy)


def explore(
    hyperparameters: Mapping[str, float],
    names: Sequence[str],
    rng: random.Random,
    probability: float = PERTURB_PROB,
    factor: float = PERTURB_FACTOR,
) -> dict[str, float]:
    """Perturbs each evolved hyperparameter with `probability`, by `factor` or `1 / factor`.

    Args:
      hyperparameters: the current values (after a copy: the copied member's).
      names: the evolved ones; other entries are returned unchanged.
      rng: the generator; per name, one draw decides whether to perturb and one the direction.
      probability: 0.33 in the paper.
      factor: 1.2 in the paper (up or down with equal probability).

    Returns:
      The new values, clipped to the settings' bounds (`BOUNDS`).
    """
    new = dict(hyperparameters)
    for name in names:
        perturb = rng.random() < probability
        up = rng.random() < 0.5
        if perturb:
            value = new[name] * (factor if up else 1.0 / factor)
            low, high = BOUNDS.get(name, (-math.inf, math.inf))
            new[name] = min(max(value, low), high)
    return new
