"""Small numpy environments and picklable factories for the worker-process tests, and the tests'
process helpers.

The environments subclass `impala_tf.envs.base.Environment` (the interface of the release's
`environments.PyProcessDmLab`) and are built in child processes by `impala_tf.envs.workers`, so they
live in an importable module, not in a test file. The EnvPool suites' tests share how they play a
batch, describe, refuse and train a level. The process helpers (start a command in a session
of its own, wait, check that nothing is left behind, SIGKILL a tree) are the one copy every test file
that starts processes uses; the library's own stopping is `impala_tf.run.supervision`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import psutil

from impala_tf.base import structures
from impala_tf.envs.base import Environment

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FRAME_SHAPE = (4, 5, 1)
NUM_ACTIONS = 4
SLEEP_ACTION = 3  # `CountingEnv` sleeps for `sleep_seconds` inside `step` on this action.
RAISE_ACTION = 2  # `CountingEnv` raises `ValueError` on this action when `raise_on_action`.


class CountingEnv(Environment):
    """A seeded random environment: random frames, rewards and episode lengths of 2..6 steps.

    Everything it returns is a deterministic function of the seed and the actions, so a worker and
    an in-process copy with the same seed must agree exactly.
    """

    def __init__(
        self,
        seed: int,
        sleep_seconds: float = 0.0,
        raise_on_action: bool = False,
        marker_dir: str = "",
    ):
        self.observation_spec = structures.observation_specs(FRAME_SHAPE)
        self.num_actions = NUM_ACTIONS
        self.num_action_repeats = 1
        self._seed = seed
        self._rng = np.random.RandomState(seed)
        self._sleep_seconds = sleep_seconds
        self._raise_on_action = raise_on_action
        self._marker_dir = marker_dir
        self._episode = 0
        self._remaining = 0

    def _observation(self) -> structures.Observation:
        frame = self._rng.randint(0, 256, size=FRAME_SHAPE).astype(np.uint8)
        instruction = f"seed {self._seed} episode {self._episode}".encode()
        return structures.Observation(frame, instruction)

    def reset(self) -> structures.Observation:
        self._episode += 1
        self._remaining = int(self._rng.randint(2, 7))
        return self._observation()

    def step(self, action: int) -> tuple[float, bool, structures.Observation]:
        if action == SLEEP_ACTION and self._sleep_seconds > 0:
            if self._marker_dir:
                path = os.path.join(self._marker_dir, f"sleeping-{os.getpid()}")
                with open(path, "w") as f:
                    f.write("x")
            time.sleep(self._sleep_seconds)
        if action == RAISE_ACTION and self._raise_on_action:
            _explode(action)
        self._remaining -= 1
        reward = float(self._rng.uniform(-1, 1)) + action
        return reward, self._remaining <= 0, self._observation()


# What the real-Slurm test (tests/test_slurm_real.py) needs on PATH.
SLURM_TOOLS = (
    "munged",
    "slurmctld",
    "slurmd",
    "sbatch",
    "srun",
    "scontrol",
    "sinfo",
    "squeue",
    "scancel",
)


def real_slurm_missing() -> str:
    """Why the real-Slurm test cannot run here ('' when it can)."""
    if sys.platform != "linux":
        return "real Slurm is tested on Linux only"
    missing = [tool for tool in SLURM_TOOLS if shutil.which(tool) is None]
    if missing:
        return (
            f"Slurm/munge not installed (no {', '.join(missing)}): "
            "apt-get install -y --no-install-recommends slurm-wlm munge"
        )
    if os.geteuid() != 0:
        return "scripts/slurm_local.sh runs Slurm as root (SlurmUser=root); run the test as root"
    return ""


def _explode(action: int) -> None:
    raise ValueError(f"boom on action {action}")


@dataclasses.dataclass(frozen=True)
class CountingFactory:
    """Picklable factory of `CountingEnv`; `for_restart` offsets the seed like `EnvFactory`."""

    seed: int
    sleep_seconds: float = 0.0
    raise_on_action: bool = False
    marker_dir: str = ""

    def __call__(self) -> CountingEnv:
        return CountingEnv(self.seed, self.sleep_seconds, self.raise_on_action, self.marker_dir)

    def for_restart(self, restart_index: int) -> CountingFactory:
        return dataclasses.replace(self, seed=self.seed + 1000 * restart_index)


@dataclasses.dataclass(frozen=True)
class FailingFactory:
    """A factory that records each attempt as a file in `attempts_dir` and then always raises."""

    attempts_dir: str

    def __call__(self) -> Environment:
        count = len(os.listdir(self.attempts_dir))
        with open(os.path.join(self.attempts_dir, f"attempt-{count}-{os.getpid()}"), "w") as f:
            f.write("x")
        raise RuntimeError("cannot build this environment")


class _ExitingEnv(CountingEnv):
    """Writes `message` to stderr and exits the process at `reset`, from below Python's exception
    handling, like DeepMind Lab's engine on a missing map (`perror`, then `exit(1)`)."""

    def __init__(self, seed: int, message: str, noise_lines: int):
        super().__init__(seed)
        self._message = message
        self._noise_lines = noise_lines

    def reset(self) -> structures.Observation:
        noise = "".join(f"engine log line {i}\n" for i in range(self._noise_lines))
        os.write(2, (noise + self._message).encode())
        os._exit(1)


@dataclasses.dataclass(frozen=True)
class ExitingFactory:
    """Picklable factory of an environment whose process dies at `reset` after writing `message`
    (after `noise_lines` lines of ordinary log output) to stderr."""

    message: str
    noise_lines: int = 0
    seed: int = 0

    def __call__(self) -> Environment:
        return _ExitingEnv(self.seed, self.message, self.noise_lines)


class ModuleProbe(Environment):
    """Wraps an environment; its instruction lists which of `module_names` the process imported."""

    def __init__(self, env: Environment, module_names: tuple[str, ...]):
        self._env = env
        self._module_names = module_names
        self.observation_spec = env.observation_spec
        self.num_actions = env.num_actions
        self.num_action_repeats = env.num_action_repeats

    def _probe(self, observation: structures.Observation) -> structures.Observation:
        loaded = [name for name in self._module_names if name in sys.modules]
        return observation._replace(instruction=",".join(loaded).encode())

    def reset(self) -> structures.Observation:
        return self._probe(self._env.reset())

    def step(self, action: int) -> tuple[float, bool, structures.Observation]:
        reward, done, observation = self._env.step(action)
        return reward, done, self._probe(observation)


@dataclasses.dataclass(frozen=True)
class ProbeFactory:
    """Builds `inner()` wrapped in a `ModuleProbe` for `module_names`."""

    inner: object
    module_names: tuple[str, ...] = ("tensorflow",)

    def __call__(self) -> Environment:
        return ModuleProbe(self.inner(), self.module_names)


class InProcessBatch:
    """E `StepStream`s stepped in this process, stacked like `BatchedEnvironment`'s outputs."""

    def __init__(self, envs: list[Environment]):
        from impala_tf.envs.base import StepStream

        self._streams = [StepStream(env) for env in envs]
        self.num_actions = envs[0].num_actions

    def initial(self) -> structures.StepOutput:
        return structures.stack([s.initial() for s in self._streams])

    def step(self, actions) -> structures.StepOutput:
        return structures.stack([s.step(a) for s, a in zip(self._streams, actions, strict=True)])


def train_in_process(actor, learner, updates: int):
    """Yields each of `updates` unrolls of `actor` (a list of trajectories) after `learner` trained
    on it, built on the first."""
    import tensorflow as tf
    import tree

    for update in range(updates):
        trajectories = actor.unroll()
        batch = tree.map_structure(tf.convert_to_tensor, structures.stack(trajectories))
        if update == 0:
            learner.build(batch)
        learner.train_step(batch)
        yield trajectories


def run_python(args, cwd, env, timeout: float) -> subprocess.CompletedProcess:
    """Runs `python args...` in `cwd` with the environment `env` and returns it finished, its
    output captured as text."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_tf_script(tmp_path, name: str, text: str, timeout: float = 170) -> None:
    """Runs `text` as a fresh Python process (its own TF runtime, e.g. two virtual CPUs) from the
    repository root and asserts that it exits 0 and prints "OK"."""
    script = tmp_path / name
    script.write_text(text)
    env = {**os.environ, "PYTHONPATH": REPO, "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = run_python([str(script)], REPO, env, timeout)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK" in result.stdout


def run_module(module: str, *args: str, timeout: float = 170) -> subprocess.CompletedProcess:
    """Runs `python -m module args...` from the repository root (the repository on PYTHONPATH,
    TensorFlow's C++ logs quiet) and returns it finished, its output captured as text."""
    env = {**os.environ, "PYTHONPATH": REPO, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return run_python(["-m", module, *args], REPO, env, timeout)


# --- Levels played on EnvPool (tests/test_procgen.py, tests/test_vizdoom.py). ---------------------


def play_batch_randomly(level: str, config, seeds: list[int], steps: int):
    """The actor's batch of `level` (`builders.batched_environment`, one slot per seed) played for
    `steps` steps of seeded random actions, then closed: `(the batch, its first output, the outputs
    of the steps)`."""
    from impala_tf.run import builders

    batch = builders.batched_environment([level] * len(seeds), config, seeds)
    try:
        first = batch.initial()
        rng = np.random.default_rng(0)
        outputs = [batch.step(rng.integers(0, batch.num_actions, len(seeds))) for _ in range(steps)]
    finally:
        batch.close()
    return batch, first, outputs


def describe_level(level: str) -> str:
    """The output of `--mode=describe` for `level`, asserting that it succeeded."""
    result = run_module(
        "impala_tf.experiment", "--mode=describe", f"--level_name={level}", timeout=170
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def refusal_line(level: str) -> str:
    """The one `error:` line of a run of `level` that exits with status 2 (asserted)."""
    result = run_module("impala_tf.experiment", f"--level_name={level}", timeout=120)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr[-1000:]
    return lines[0]


def train_briefly(level: str, logdir, envs: int, frames: int, *flags: str) -> None:
    """Trains on `level` for `frames` frames (one actor of `envs` environments, batches of `envs`
    unrolls of 10 steps, then `flags`) into `logdir`, asserting that it ends with
    `done: <frames> frames`."""
    train = run_module(
        "impala_tf.experiment",
        f"--level_name={level}",
        *flags,
        "--num_actors=1",
        f"--envs_per_actor={envs}",
        f"--batch_size={envs}",
        "--unroll_length=10",
        f"--total_environment_frames={frames}",
        f"--logdir={logdir}",
        timeout=300,
    )
    assert train.returncode == 0, train.stderr[-2000:]
    assert f"done: {frames} frames" in train.stdout + train.stderr


# --- Processes. --------------------------------------------------------------------------------------


def repo_env(**extra: str) -> dict[str, str]:
    """This process's environment with the repository first on PYTHONPATH, TensorFlow's C++ logs
    quiet, and `extra` on top."""
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env.update(extra)
    return env


def start_in_session(argv, log_path=None, env=None) -> subprocess.Popen:
    """Starts `argv` from the repository root in a session of its own (so `assert_no_leftovers`
    finds everything it started), its output to `log_path` (or a pipe)."""
    options = {
        "cwd": REPO,
        "env": repo_env() if env is None else env,
        "stderr": subprocess.STDOUT,
        "stdin": subprocess.DEVNULL,
        "start_new_session": True,
    }
    if log_path is None:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, **options)
    with open(log_path, "wb") as out:
        return subprocess.Popen(argv, stdout=out, **options)


def read_text(path) -> str:
    """A log's text ('' when it does not exist), undecodable bytes replaced."""
    if not os.path.exists(path):
        return ""
    with open(path, "rb") as f:
        return f.read().decode(errors="replace")


def wait_for(predicate, timeout: float, what: str):
    """Polls `predicate` until it returns something true (returned) or fails after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def session_processes(process) -> list[psutil.Process]:
    """The live (not zombie) processes of the session `process` leads, other than `process`."""
    alive = []
    for p in psutil.process_iter(["pid"]):
        try:
            if (
                os.getsid(p.pid) == process.pid
                and p.pid != process.pid
                and p.status() != psutil.STATUS_ZOMBIE
            ):
                alive.append(p)
        except (ProcessLookupError, PermissionError, psutil.NoSuchProcess):
            continue
    return alive


def assert_no_leftovers(process, timeout: float = 15.0) -> None:
    """Fails unless every process of the session `process` leads has exited within `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        alive = session_processes(process)
        if not alive:
            return
        if time.monotonic() > deadline:
            names = []
            for p in alive:
                try:
                    names.append(f"{p.pid} {' '.join(p.cmdline()[-3:])}")
                except psutil.Error:
                    names.append(str(p.pid))
            raise AssertionError(f"processes left behind: {names}")
        time.sleep(0.2)


def process_alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_processes_gone(pids, timeout: float) -> list[int]:
    """Waits up to `timeout` seconds for `pids` to exit; returns those still alive."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not [p for p in pids if process_alive(p)]:
            return []
        time.sleep(0.05)
    return [p for p in pids if process_alive(p)]


def kill_processes(processes: list[psutil.Process]) -> None:
    """Test cleanup: SIGKILLs `processes` and waits up to 10 s for them (the one SIGKILL of the
    tests' helpers; the others call it)."""
    for p in processes:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(processes, timeout=10)


def output_of_session(process, timeout: float) -> str:
    """The output of `start_in_session`'s `process` (piped) once it exits within `timeout` s; then
    its session is SIGKILLed and checked to leave nothing behind."""
    try:
        output, _ = process.communicate(timeout=timeout)
    finally:
        kill_tree(process)
    assert_no_leftovers(process)
    return output.decode(errors="replace")


def finish_in_session(process, timeout: float, log_path) -> str:
    """Asserts that `start_in_session`'s `process` exits 0 within `timeout` s (showing its log at
    `log_path` if not); then SIGKILLs its session, checks nothing is left and returns the log."""
    try:
        assert process.wait(timeout=timeout) == 0, read_text(log_path)
    finally:
        kill_tree(process)
    assert_no_leftovers(process)
    return read_text(log_path)


def kill_tree(process) -> None:
    """Test cleanup: SIGKILLs the Popen `process` and its descendants, and reaps it."""
    try:
        parent = psutil.Process(process.pid)
        tree = [parent, *parent.children(recursive=True)]
    except psutil.NoSuchProcess:
        tree = []
    kill_processes(tree)
    if process.poll() is None:
        process.wait(timeout=10)


def kill_parent_and_children(parent, pids) -> None:
    """Test cleanup: SIGKILLs the still-alive `pids` and the `parent` Popen, and reaps the parent."""
    alive = []
    for pid in pids:
        try:
            alive.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    kill_processes(alive)
    kill_tree(parent)


@contextlib.contextmanager
def parent_of_workers(tmp_path, script: str, env=None):
    """Runs `script` as a parent process of environment workers; yields `(parent, report)`.

    `script` is Python with `{repo!r}` and `{tests!r}` placeholders (the repository and this folder,
    for its `sys.path`); it starts its workers, prints one JSON line holding at least their "pids"
    and then waits. On exit the workers and the parent are SIGKILLed and the parent reaped.
    """
    path = tmp_path / "parent.py"
    path.write_text(script.format(repo=REPO, tests=os.path.join(REPO, "tests")))
    pids = []
    with open(tmp_path / "stderr.txt", "w") as log:
        parent = subprocess.Popen(
            [sys.executable, str(path)], stdout=subprocess.PIPE, stderr=log, text=True, env=env
        )
        try:
            line = parent.stdout.readline()
            assert line, (tmp_path / "stderr.txt").read_text()[-2000:]
            report = json.loads(line)
            pids = report["pids"]
            yield parent, report
        finally:
            kill_parent_and_children(parent, pids)


@contextlib.contextmanager
def no_leaked_children(timeout: float = 5.0):
    """Fails unless every child process started inside the block (at any depth) has exited within
    `timeout` seconds of its end; those left are SIGKILLed first."""
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    new = [p.pid for p in psutil.Process().children(recursive=True) if p.pid not in before]
    left = wait_processes_gone(new, timeout)
    kill_processes([p for p in map(_process_or_none, left) if p is not None])
    assert not left, f"leaked child processes {left}"


def _process_or_none(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None
