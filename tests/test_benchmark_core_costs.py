"""impala_tf.benchmark.core_costs on tiny cores: what it records (no timing is asserted)."""

from impala_tf.agent import core_specs
from impala_tf.benchmark import core_costs

TINY = core_specs.GTrXLSizes(num_layers=1, num_heads=2, model_size=8, memory_size=4)


def test_each_core_is_measured_in_turn_with_its_bytes_and_flops():
    variants = {"lstm": ("lstm", None), "gtrxl_tiny": ("gtrxl", TINY)}
    results = core_costs.measure(2, 3, 2, rounds=2, actor_steps=1, variants=variants)
    assert list(results) == ["lstm", "gtrxl_tiny"]
    frames = 4 * 72 * 96 * 3
    for name, (core, sizes) in variants.items():
        row = results[name]
        assert row["state_bytes"] == core_specs.state_bytes(core, sizes)
        assert row["frame_bytes_per_trajectory"] == frames
        # A trajectory: its frames, its core state and the small per-step records.
        assert (
            frames + row["state_bytes"]
            < row["trajectory_bytes"]
            < frames + row["state_bytes"] + 500
        )
        for what in ("update", "actor_step"):
            assert len(row[f"{what}_cpu_seconds"]) == len(row[f"{what}_wall_seconds"]) == 2
    assert "recompute_cpu_seconds" not in results["lstm"]
    assert len(results["gtrxl_tiny"]["recompute_cpu_seconds"]) == 2
    assert results["gtrxl_tiny"]["core_parameters"] < results["lstm"]["core_parameters"]
    lines = core_costs.format_results(results)
    assert len(lines) == 2 and "x1.00 the LSTM's" in lines[0]
