"""Test order for `scripts/test.sh`: the longest files first, so two xdist workers end together.

`scripts/test.sh` hands out whole files (`--dist loadfile`) in collection order
(`--no-loadscope-reorder`; xdist's own order, most tests first, started the few-test multi-process
files last, and one of them ran alone at the end while the other worker idled). Longest first is the
classic greedy schedule: whatever file starts last is a short one.
"""

# The slowest files by their tests' `--durations` in CI (2 CPU cores), longest first. A file that
# comes to take more than a minute belongs here; the others keep their collection order after these.
LONGEST_FIRST = (
    "test_cores_training.py",
    "test_runtime.py",
    "test_pbt_supervisor.py",
    "test_sweep.py",
    "test_gym.py",
    "test_learning_benchmark.py",
    "test_slurm_real.py",
    "test_cluster.py",
    "test_benchmark.py",
)


def _rank(item) -> int:
    name = item.path.name
    return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)


def pytest_collection_modifyitems(items):
    items.sort(key=_rank)  # Stable: each file's tests keep their order.
