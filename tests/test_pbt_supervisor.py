"""`--mode=pbt` end to end on this machine: a small population on toy/bandit (appendix F's rules).

Real subprocesses (the controller, and each member's launcher, learner and actor), a hard timeout,
and a check that no process is left behind. Runtime: about 1.5 minutes of CPU (twelve processes
start TensorFlow, counting the restarted member); measured 4 minutes of wall time on 2 cores under
a load average of 18.
"""

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from env_fixtures import assert_no_leftovers, kill_tree, read_text, repo_env

from impala_tf.studies.pbt import ancestry, controller, protocol, supervisor

pytestmark = pytest.mark.integration

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOOD, HOPELESS = 2e-3, 1e-7
FLAGS = (
    "--mode=pbt",
    "--level_name=toy/bandit",  # Optimal return 1, random 1/3; one-step episodes.
    "--agent=shallow",
    "--use_lstm=false",
    "--num_actors=1",
    "--envs_per_actor=2",
    "--total_environment_frames=8000",
    "--summary_seconds=2",
    "--pbt_population=3",
    "--pbt_hyperparameters=learning_rate",
    "--pbt_burn_in_frames=1000",
    "--pbt_ready_episodes=320",
)


def _learner_of(run, logdir):
    """The learner process of the member in `logdir`, under the controller `run`, or None."""
    for p in psutil.Process(run.pid).children(recursive=True):
        try:
            args = p.cmdline()
        except psutil.NoSuchProcess:
            continue
        if "--job_name=learner" in args and f"--logdir={logdir}" in args:
            return p
    return None


@pytest.mark.timeout(600)
def test_population_rescues_hopeless_members_and_restarts_a_killed_one(tmp_path):
    """Member 0 starts with a good learning rate, members 1 and 2 with a hopeless 1e-7. The
    hopeless ones copy a better member's weights and hyperparameters, the population's best fitness
    ends at the optimum, and member 2, killed with SIGKILL, resumes from its checkpoint."""
    pbt_dir = str(tmp_path / "pbt")
    # The population is created here with chosen starting values; `--mode=pbt` resumes it (the
    # controller's state is in the directory).
    settings = controller.Settings(3, ("learning_rate",), 1000, 320, 0.05, 0.33, 1.2, seed=1)
    starting = [{"learning_rate": GOOD}, {"learning_rate": HOPELESS}, {"learning_rate": HOPELESS}]
    controller.Controller(pbt_dir, settings, say=lambda _: None).open(starting)

    log = tmp_path / "pbt.log"
    with open(log, "wb") as out:
        run = subprocess.Popen(
            [sys.executable, "-m", "impala_tf.experiment", *FLAGS, f"--logdir={pbt_dir}"],
            cwd=REPO,
            env=repo_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        killed = False
        deadline = time.time() + 480
        while run.poll() is None and time.time() < deadline:
            status = protocol.read_status(pbt_dir, 2)
            if not killed and status is not None and status.checkpoint and status.frames >= 2000:
                learner = _learner_of(run, protocol.member_dir(pbt_dir, 2))
                if learner is not None:
                    learner.send_signal(signal.SIGKILL)
                    killed = True
            time.sleep(0.5)
        assert run.wait(timeout=max(1.0, deadline - time.time())) == 0, read_text(log)
    finally:
        kill_tree(run)
    assert_no_leftovers(run)
    output = read_text(log)
    assert killed, output

    events = protocol.read_events(pbt_dir)
    statuses = {i: protocol.read_status(pbt_dir, i) for i in range(3)}
    assert all(s is not None and s.finished for s in statuses.values()), statuses
    # The hopeless members copied a member whose fitness was more than 0.05 higher...
    for member in (1, 2):
        copies = [s for s in ancestry.steps(events) if s.member == member and s.copy]
        assert copies, f"member {member} never copied anyone:\n{output}"
        assert all(s.other_fitness > s.fitness + 0.05 for s in copies)
        learner_log = read_text(
            os.path.join(protocol.member_dir(pbt_dir, member), "logs", "learner_0.log")
        )
        assert "copied member" in learner_log
        # ...and their learning rate is no longer hopeless (the copied one, perturbed).
        assert statuses[member].hyperparameters["learning_rate"] > 1e-4, statuses[member]
    best = controller.best_member(statuses, settings.ready_episodes)
    assert statuses[best].fitness >= 0.9, statuses  # Optimal: 1.0; random play: 1/3.
    # Member 2 died by SIGKILL, was restarted and resumed from its checkpoint.
    exits = [e for e in events if e["event"] == ancestry.MEMBER_EXIT and e["member"] == 2]
    assert exits and exits[0]["restart"], events
    member_2_log = read_text(os.path.join(protocol.member_dir(pbt_dir, 2), "logs", "learner_0.log"))
    assert "resumed from" in member_2_log, member_2_log
    assert "member 2 " in output and "restarting it" in output
    # The report reads the same directory.
    assert supervisor.summary_line(statuses, events).startswith("3/3 members reporting")


BROKEN_MEMBER = """#!/bin/sh
echo "starting" >&2
echo "error: this run needs at least 39.7 GiB but this machine has 23.5 GiB" >&2
exit 2
"""


@pytest.mark.timeout(120)
def test_a_study_whose_members_cannot_start_stops_with_their_error(tmp_path):
    """Every member exits at once with the same error: each exit is printed with its error line,
    and the study stops with that cause (status 1) instead of waiting for members that never
    report."""
    from impala_tf import envs
    from impala_tf.base import presets

    python = tmp_path / "python"
    python.write_text(BROKEN_MEMBER)
    python.chmod(0o755)
    pbt_dir = str(tmp_path / "pbt")
    overrides = {
        "env": {"level_name": "toy/bandit"},
        "pbt": {"pbt_population": 3, "pbt_hyperparameters": "learning_rate"},
        "runtime": {"logdir": pbt_dir},
    }
    resolved = presets.resolve(
        None, overrides, pbt=True, implied=envs.preset_for_level("toy/bandit")
    )
    resolved = presets.Resolved(
        envs.complete_config(resolved.config),
        resolved.preset,
        resolved.preset_chosen_by,
        resolved.sources,
    )
    lines = []
    start = time.time()
    status = supervisor.run_population(resolved, python=str(python), say=lines.append)
    assert status == supervisor.EXIT_MEMBER_FAILED == 1, lines
    assert time.time() - start < 60, lines  # Not MAX_FAILURES restarts of every member.
    error = "error: this run needs at least 39.7 GiB but this machine has 23.5 GiB"
    exits = [line for line in lines if line.startswith("member ") and error in line]
    assert {line.split()[1] for line in exits} == {"0", "1", "2"}, lines
    assert any(
        line.startswith("every member failed the same way") and error in line for line in lines
    )
    assert all(e["restart"] for e in protocol.read_events(pbt_dir) if e["event"] == "member_exit")
