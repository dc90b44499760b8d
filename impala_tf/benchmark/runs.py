"""What an end-to-end run description means: its preset, overrides and completed configuration.

Shared by `end_to_end` (the runs) and `bound` (the stage costs measured for each run's bound), so
that neither imports the other. A run description is a dict with `level`, `agent`, `batch`,
`unroll`, `actors`, `envs` and optionally `actor_nice`, `tf_threads`, `actor_jit`,
`send_frames_once`, `malloc_keep_mb`.
"""

from __future__ import annotations

from typing import Any

from impala_tf import envs
from impala_tf.base import configs, presets


def e2e_config(run: dict[str, Any]) -> tuple[str, dict[str, dict[str, Any]]]:
    """The preset and overrides (`presets.from_preset`) of an end-to-end run description."""
    overrides = {
        "env": {"level_name": run["level"]},
        "agent": {
            "agent": run["agent"],
            "use_lstm": run.get("use_lstm", envs.environment_kind(run["level"]) != "atari"),
        },
        "learner": {"batch_size": run["batch"], "unroll_length": run["unroll"]},
        "runtime": {"num_actors": run["actors"], "envs_per_actor": run["envs"]},
    }
    # Unless the run sets them, the actors use the defaults of `configs.RuntimeConfig`.
    if "actor_nice" in run:
        overrides["runtime"]["actor_nice"] = run["actor_nice"]
    if "tf_threads" in run:  # 0 = TF's default.
        overrides["runtime"]["actor_tf_threads"] = run["tf_threads"]
    if run.get("actor_jit"):
        overrides["runtime"]["actor_jit_compile"] = True
    if "malloc_keep_mb" in run:
        overrides["runtime"]["malloc_keep_mb"] = int(run["malloc_keep_mb"])
    if "send_frames_once" in run:
        overrides["runtime"]["send_frames_once"] = bool(run["send_frames_once"])
    if "torso_dtype" in run:  # The opt-in bfloat16 torso (`networks`), measured apart.
        overrides["agent"]["torso_dtype"] = run["torso_dtype"]
    return envs.preset_for_level(run["level"]), overrides


def completed_config(preset: str, overrides: dict[str, dict[str, Any]]) -> configs.Config:
    """The run's configuration, completed with what its environment decides (actions, repeats)."""
    return envs.complete_config(presets.from_preset(preset, overrides))


def needs_fake_dmlab(level: str) -> bool:
    """Whether a DMLab level must run on `impala_tf.testing`'s fake `deepmind_lab`."""
    if envs.environment_kind(level) != "dmlab":
        return False
    try:
        # Imported here: an optional module (built from source, not on PyPI), probed only.
        import deepmind_lab  # noqa: F401
    except ImportError:
        return True
    return False


def malloc_keep_mb(spec: dict[str, Any]) -> int:
    """`--malloc_keep_mb` of a benchmark child: its run's (`run` or `overrides` in the spec), else
    the runtime's default."""
    overrides = e2e_config(spec["run"])[1] if "run" in spec else spec.get("overrides") or {}
    default = configs.RuntimeConfig.malloc_keep_mb
    return int(overrides.get("runtime", {}).get("malloc_keep_mb", default))
