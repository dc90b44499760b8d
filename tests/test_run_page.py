"""Tests of `impala_tf.reports.run_page`: one self-contained HTML page per run.

The structure is checked without a browser; a screenshot in headless Chromium (Debian's `chromium`)
checks that the page renders, and is skipped where Chromium is not installed.
Runtime: about 20 s on 2 CPU cores (matplotlib figures; Chromium's start).
"""

from __future__ import annotations

import base64
import csv
import json
import os
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest
from PIL import Image

from impala_tf.reports import run_page

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class _Page(HTMLParser):
    """Collects the tags, attributes and text of a page."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def all(self, tag):
        return [attrs for t, attrs in self.tags if t == tag]


def _run(tmp_path, evaluated: bool = True) -> str:
    """A run directory as training and `--mode=test --record_video` leave it."""
    logdir = tmp_path / "catch"
    os.makedirs(logdir / "videos")
    with open(logdir / "episodes.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            ["environment_frames", "level_name", "episode_return", "episode_frames", "actor_id"]
            + ["wall_time"]
        )
        for k in range(1, 301):
            writer.writerow([k * 200, "toy/catch", 1.0 if k % 3 else -1.0, 11, 0, 0.0])
    config = {
        "env": {"level_name": "toy/catch", "num_action_repeats": 1},
        "agent": {"agent": "shallow", "use_lstm": True},
        "learner": {"total_environment_frames": 60000, "learning_rate": 0.00048},
    }
    (logdir / "config.json").write_text(json.dumps(config))
    (logdir / "heartbeat.json").write_text(
        json.dumps({"updates": 375, "environment_frames": 60000, "wall_time": 1.7e9, "pid": 1})
    )
    if evaluated:
        gif = logdir / "videos" / "toy_catch.gif"
        frames = [Image.fromarray(np.full((40, 30, 3), c, np.uint8)) for c in (0, 255)]
        frames[0].save(gif, save_all=True, append_images=frames[1:], duration=66, loop=0)
        (logdir / "videos" / "toy_catch.mp4").write_bytes(b"not decoded here")
        results = {
            "levels": {
                "toy/catch": {
                    "returns": [1.0, 1.0, -1.0, 1.0],
                    "episode_frames": [11, 11, 11, 11],
                    "mean_return": 0.5,
                    "human_normalized_score": None,
                    # Absolute paths as recorded; the page links them relative to itself.
                    "video": str(logdir / "videos" / "toy_catch.mp4"),
                    "videos": [str(logdir / "videos" / "toy_catch.mp4"), str(gif)],
                }
            },
            "summary": {"dmlab30": None, "atari57": None},
            "num_episodes_per_level": 4,
            "policy": "sampled",
            "seed": 1,
        }
        (logdir / "test_results.json").write_text(json.dumps(results))
    return str(logdir)


def test_page_is_self_contained_with_curves_table_videos_and_config(tmp_path):
    logdir = _run(tmp_path)
    assert run_page.main([logdir]) == 0
    path = os.path.join(logdir, "report.html")
    page = _Page()
    with open(path, encoding="utf-8") as f:
        page.feed(f.read())
    text = " ".join(page.text)

    curves = [a for a in page.all("img") if a["src"].startswith("data:image/png;base64,")]
    assert len(curves) == 1  # returns.png (no TensorBoard events in this run).
    png = base64.b64decode(curves[0]["src"].split(",", 1)[1])
    assert png[:8] == PNG_SIGNATURE
    # No resource from elsewhere: every other source is a file of the run, relative to the page.
    others = [a["src"] for a in page.all("img") if a not in curves] + [
        a["href"] for a in page.all("a")
    ]
    assert sorted(others) == [
        "videos/toy_catch.gif",
        "videos/toy_catch.gif",
        "videos/toy_catch.mp4",
    ]
    assert all(os.path.exists(os.path.join(logdir, o)) for o in others)
    assert not page.all("script") and not page.all("link")

    cells = [d.strip() for d in page.text if d.strip()]
    row = cells[cells.index("toy/catch", cells.index("human-normalised %")) :][:6]
    assert row == ["toy/catch", "4", "0.500", "0.866", "11", "n/a"]
    assert "60,000 frames of 60,000" in text and "level toy/catch" in text
    assert "learning_rate" in text and "0.00048" in text  # Every setting of config.json.


def test_page_of_a_run_not_yet_evaluated_says_how(tmp_path):
    logdir = _run(tmp_path, evaluated=False)
    html = run_page.render(logdir)
    assert "Not evaluated yet" in html and "--mode=test" in html and "--record_video" in html
    assert run_page.main([str(tmp_path / "missing")]) == 1


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
@pytest.mark.timeout(180)
def test_page_renders_in_headless_chromium(tmp_path):
    logdir = _run(tmp_path)
    path = run_page.write_page(logdir)
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1200,1600",
            f"--screenshot={shot}",
            "file://" + os.path.abspath(path),
        ],
        check=True,
        timeout=150,
        capture_output=True,
    )
    image = np.asarray(Image.open(shot).convert("RGB"))
    assert image.shape == (1600, 1200, 3)
    # The returns curve is drawn in matplotlib's tab:blue (31, 119, 180): the inline PNG rendered.
    blue = np.all(np.abs(image.astype(int) - (31, 119, 180)) < 30, axis=-1)
    assert blue.sum() > 2000, blue.sum()
    # The GIF (first frame black, 40 x 30 px) is shown below the curves.
    black = np.all(image < 10, axis=-1)
    assert black.sum() >= 30 * 40


def test_readmes_quick_start_names_the_run_page():
    """The run page is the best output of a first run: README's quick start says how to write it
    (issue 35 item 8)."""
    readme = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")
    with open(readme) as f:
        text = f.read()
    quick_start = text[text.index("## Quick start") : text.index("\n## ", text.index("## Quick"))]
    assert "-m impala_tf.reports.run_page runs/" in quick_start
    assert "report.html" in quick_start
