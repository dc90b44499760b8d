"""One self-contained HTML page per run: learning curves, evaluation table, videos, configuration.

Usage::

    python -m impala_tf.reports.run_page LOGDIR [--output PATH] [--window N]

Writes `LOGDIR/report.html` (or PATH): the curves of `impala_tf.reports.curves` as inline PNG
(base64, nothing to fetch), the per-level table of `LOGDIR/test_results.json` when `--mode=test` has
written one, its videos (`--record_video`) linked by paths relative to the page, and every setting of
`LOGDIR/config.json`. Not from the paper: a page to open in a browser or send to a colleague.

See docs/reports.md ("Run page").
"""

from __future__ import annotations

import argparse
import base64
import html
import io
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from impala_tf.reports import curves
from impala_tf.run import rundir

PAGE = "report.html"
_CORE_LABELS = {"lstm": " + LSTM", "none": "", "gtrxl": " + GTrXL"}  # The agent's core (fact line).
FIGURE_TITLES = {
    "returns.png": "Episode returns",
    "dmlab30_score.png": "DMLab-30 training score",
    "atari57_median.png": "Atari-57 median training score",
    "training.png": "Learner statistics",
}
CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto;
  max-width: 1100px; padding: 0 16px; color: #1c1c1c; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; border-bottom: 1px solid #ddd; padding-bottom: 4px; margin-top: 1.6em; }
.facts { color: #444; margin: 0 0 1em 0; }
.facts span { margin-right: 1.6em; white-space: nowrap; }
figure { margin: 0 0 1.2em 0; }
figure img { width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.9em; }
table { border-collapse: collapse; margin: 0.5em 0 1em 0; font-size: 0.95em; }
th, td { padding: 3px 10px; border-bottom: 1px solid #e4e4e4; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f4f4f4; }
.config td { text-align: left; font-family: ui-monospace, monospace; font-size: 0.9em; }
.config td:first-child { color: #555; }
.videos { display: flex; flex-wrap: wrap; gap: 16px; }
.videos figure img { width: auto; max-width: 100%; }
.note { color: #666; font-size: 0.9em; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _png_data_uri(figure: Any) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=curves.DPI)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _read_json(path: str) -> Any | None:
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def _number(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{value:,.{digits}f}"


def facts(config: Mapping[str, Any] | None, heartbeat: Mapping[str, Any] | None) -> list[str]:
    """The header line's facts: level, frames reached of the total, agent, last activity."""
    out = []
    env = (config or {}).get("env", {})
    learner = (config or {}).get("learner", {})
    agent = (config or {}).get("agent", {})
    if env.get("level_name"):
        out.append(f"level {env['level_name']}")
    total = learner.get("total_environment_frames")
    if heartbeat is not None:
        frames = int(heartbeat.get("environment_frames", 0))
        out.append(f"{frames:,} frames" + (f" of {int(total):,}" if total else ""))
        out.append(f"{int(heartbeat.get('updates', 0)):,} updates")
        wall = heartbeat.get("wall_time")
        if wall:
            out.append("last heartbeat " + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(wall)))
    elif total:
        out.append(f"{int(total):,} frames planned")
    if agent.get("agent"):
        core = agent.get("core") or ("lstm" if agent.get("use_lstm") else "none")
        out.append(f"agent {agent['agent']}" + _CORE_LABELS.get(core, f" + {core}"))
    return out


def curves_section(logdir: str, window: int) -> str:
    """The learning curves as inline PNGs, or a note saying why there are none."""
    try:
        drawn = curves.figures(logdir, window)
    except (FileNotFoundError, ValueError) as error:
        return f'<p class="note">No learning curves: {_e(error)}</p>'
    parts = []
    for name, figure in drawn.items():
        title = FIGURE_TITLES.get(name, name)
        parts.append(
            f'<figure><img alt="{_e(title)}" src="{_png_data_uri(figure)}">'
            f"<figcaption>{_e(title)} ({_e(name)} of "
            f"<code>python -m impala_tf.reports.curves</code>)</figcaption></figure>"
        )
    return "\n".join(parts)


def _video_href(path: str, logdir: str, page_dir: str) -> str | None:
    """A video's path relative to the page: as recorded, else under `<logdir>/videos`."""
    for candidate in (path, os.path.join(rundir.RunDir(logdir).videos, os.path.basename(path))):
        if os.path.exists(candidate):
            return os.path.relpath(os.path.abspath(candidate), os.path.abspath(page_dir))
    return None


def evaluation_section(results: Mapping[str, Any] | None, logdir: str, page_dir: str) -> str:
    """The `--mode=test` table (episodes, mean and std of returns, mean frames, HNS), the suite
    summary and the videos; a note if the run has not been evaluated."""
    if not results or not results.get("levels"):
        return (
            '<p class="note">Not evaluated yet: <code>./run_experiment.sh --mode=test '
            f"--logdir={_e(logdir)} --record_video</code> writes test_results.json and videos.</p>"
        )
    rows = [
        "<tr><th>level</th><th>episodes</th><th>mean return</th><th>std</th>"
        "<th>mean frames</th><th>human-normalised %</th></tr>"
    ]
    videos = []
    for level, entry in results["levels"].items():
        if isinstance(entry, list):  # A bare list of returns (reports' schema).
            entry = {"returns": entry}
        returns = [float(r) for r in entry.get("returns", [])]
        frames = entry.get("episode_frames") or []
        mean = sum(returns) / len(returns) if returns else None
        std = statistics.pstdev(returns) if len(returns) > 1 else 0.0
        rows.append(
            f"<tr><td>{_e(level)}</td><td>{len(returns)}</td><td>{_number(mean)}</td>"
            f"<td>{_number(std)}</td>"
            f"<td>{_number(sum(frames) / len(frames) if frames else None, 0)}</td>"
            f"<td>{_number(entry.get('human_normalized_score'), 2)}</td></tr>"
        )
        paths = entry.get("videos") or ([entry["video"]] if entry.get("video") else [])
        links = {os.path.splitext(p)[1]: _video_href(p, logdir, page_dir) for p in paths}
        if links.get(".gif") or links.get(".mp4"):
            shown = (
                f'<img alt="{_e(level)}" src="{_e(links[".gif"])}">' if links.get(".gif") else ""
            )
            mp4 = f' <a href="{_e(links[".mp4"])}">MP4</a>' if links.get(".mp4") else ""
            gif = f' <a href="{_e(links[".gif"])}">GIF</a>' if links.get(".gif") else ""
            videos.append(
                f"<figure>{shown}<figcaption>{_e(level)}, first test episode:{mp4}{gif}"
                "</figcaption></figure>"
            )
    summary = []
    for suite, key, label in (
        ("dmlab30", "mean_capped_human_normalized_score", "DMLab-30 mean capped HNS"),
        ("dmlab30", "mean_uncapped_human_normalized_score", "DMLab-30 mean uncapped HNS"),
        ("atari57", "median_human_normalized_score", "Atari-57 median HNS"),
        ("atari57", "mean_human_normalized_score", "Atari-57 mean HNS"),
    ):
        value = ((results.get("summary") or {}).get(suite) or {}).get(key)
        if value is not None:
            summary.append(f"<li>{_e(label)}: {_number(value, 2)} %</li>")
    meta = []
    for key in ("num_episodes_per_level", "policy", "seed", "checkpoint"):
        if key in results:
            meta.append(f"<span>{_e(key)}: {_e(results[key])}</span>")
    parts = [f'<p class="facts">{"".join(meta)}</p>', f"<table>{''.join(rows)}</table>"]
    if summary:
        parts.append(f"<ul>{''.join(summary)}</ul>")
    if videos:
        parts.append(f'<div class="videos">{"".join(videos)}</div>')
    return "\n".join(parts)


def config_section(config: Mapping[str, Any] | None) -> str:
    """Every setting of `config.json`, one table row each, grouped by section."""
    if not config:
        return '<p class="note">No config.json in this directory.</p>'
    rows = []
    for section, values in config.items():
        if isinstance(values, Mapping):
            rows.append(f'<tr><th colspan="2">{_e(section)}</th></tr>')
            for name, value in values.items():
                rows.append(f"<tr><td>{_e(name)}</td><td>{_e(json.dumps(value))}</td></tr>")
        else:
            rows.append(f"<tr><td>{_e(section)}</td><td>{_e(json.dumps(values))}</td></tr>")
    return f'<table class="config">{"".join(rows)}</table>'


def render(logdir: str, output: str | None = None, window: int = 100) -> str:
    """The page of the run in `logdir` (see the module docstring), as HTML text.

    Args:
      logdir: the run's directory.
      output: where the page will be written (video links are relative to its directory);
        default `<logdir>/report.html`.
      window: rolling-mean window of the returns curve, in episodes.
    """
    run = rundir.RunDir(logdir)
    page_dir = os.path.dirname(os.path.abspath(output or os.path.join(logdir, PAGE)))
    config = _read_json(run.config)
    heartbeat = _read_json(run.heartbeat)
    results = _read_json(run.test_results)
    name = os.path.basename(os.path.abspath(logdir))
    header = "".join(f"<span>{_e(fact)}</span>" for fact in facts(config, heartbeat))
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>impala-tf run {_e(name)}</title>
<style>{CSS}</style>
</head>
<body>
<h1>impala-tf run <code>{_e(name)}</code></h1>
<p class="facts">{header}</p>
<p class="note">{_e(os.path.abspath(logdir))}</p>
<h2>Learning curves</h2>
{curves_section(logdir, window)}
<h2>Evaluation</h2>
{evaluation_section(results, logdir, page_dir)}
<h2>Configuration</h2>
{config_section(config)}
</body>
</html>
"""


def write_page(logdir: str, output: str | None = None, window: int = 100) -> str:
    """Writes the page (`render`) to `output` (default `<logdir>/report.html`); returns the path.

    Raises:
      FileNotFoundError: `logdir` is not a directory.
    """
    if not os.path.isdir(logdir):
        raise FileNotFoundError(f"no run directory {logdir!r}")
    output = output or os.path.join(logdir, PAGE)
    text = render(logdir, output, window)
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    with open(output, "w", encoding="utf-8") as f:
        f.write(text)
    return output


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 ok, 1 bad input)."""
    parser = argparse.ArgumentParser(
        prog="python -m impala_tf.reports.run_page",
        description="Write one self-contained HTML page for a run: curves, evaluation, videos, "
        "configuration.",
    )
    parser.add_argument("logdir")
    parser.add_argument("--output", default=None, help=f"default: LOGDIR/{PAGE}")
    parser.add_argument("--window", type=int, default=100, help="rolling-mean window (episodes)")
    args = parser.parse_args(argv)
    try:
        path = write_page(args.logdir, args.output, args.window)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
