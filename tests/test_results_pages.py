"""Every published figure has its data committed beside it (issue 34: results pages and BENCHMARKS.md).

Walks the pages of `docs/results/` and the sections of BENCHMARKS.md (a section runs from a `#` or
`##` heading to the next; `###` subsections belong to it). A page or section with figures (numbers
such as 0.53, 2,065 or 12 %) must name at least one committed data file (a `.json`, `.csv` or
`.csv.gz` that exists: a Markdown link, or a path in backticks, alone or in a command), and every image it shows must sit
in a directory that holds such a file (the curves' `episodes.csv`). Figures quoted from papers or
pages whose data are still to come are on `ALLOWED_WITHOUT_DATA` with the reason; an entry whose
page has its data by now fails the test, so that it is deleted.
"""

from __future__ import annotations

import os
import re
import shlex

import pytest

from impala_tf.reports import compare_runs

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "docs", "results")
BENCHMARKS = os.path.join(REPO, "BENCHMARKS.md")
DATA_SUFFIXES = (".json", ".csv", ".csv.gz")

# (page relative to the repository, section heading or None for the whole page) -> why it has no
# data file.
ALLOWED_WITHOUT_DATA: dict[tuple[str, str | None], str] = {}

_FIGURE = re.compile(r"(?<![\w.])(\d{1,3}(,\d{3})+|\d+\.\d+|\d+ ?%)(?!\.?\w)")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s#]+)(#[^)]*)?\)")
_IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s#]+)\)")
_BACKTICKS = re.compile(r"`([^`]+)`")
# A page's embedded `impala_tf.reports.compare_runs` output, with the arguments that printed it.
_COMPARE_BLOCK = re.compile(r"<!-- compare_runs (.*?) -->\n(.*?)\n<!-- end compare_runs -->", re.S)


def _without_code(text: str) -> str:
    """The text without fenced code blocks (commands, not figures)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def _sections(text: str, split: bool) -> list[tuple[str | None, str]]:
    """`(heading, text)` per `#` / `##` section (one `(None, text)` when not `split`)."""
    if not split:
        return [(None, text)]
    sections, heading, lines, fenced = [], "", [], False
    for line in text.split("\n"):
        fenced ^= line.startswith("```")
        if not fenced and re.match(r"^#{1,2} ", line):
            if lines:
                sections.append((heading, "\n".join(lines)))
            heading, lines = line.strip(), []
        lines.append(line)
    sections.append((heading, "\n".join(lines)))
    return sections


def _resolves(path: str, page_dir: str) -> str | None:
    for base in (page_dir, REPO):
        candidate = os.path.normpath(os.path.join(base, path))
        if os.path.isfile(candidate):
            return candidate
    return None


def _data_files(text: str, page_dir: str) -> set[str]:
    """The committed data files the text links or names in backticks (alone or in a command)."""
    named = [m.group(1) for m in _LINK.finditer(text)]
    named += [word for quoted in _BACKTICKS.findall(text) for word in quoted.split()]
    found = set()
    for path in named:
        if path.endswith(DATA_SUFFIXES):
            resolved = _resolves(path, page_dir)
            if resolved:
                found.add(resolved)
    return found


def _images_without_data(text: str, page_dir: str) -> list[str]:
    missing = []
    for path in _IMAGE.findall(text):
        directory = os.path.dirname(os.path.normpath(os.path.join(page_dir, path)))
        if not any(name.endswith(DATA_SUFFIXES) for name in os.listdir(directory)):
            missing.append(path)
    return missing


def _pages() -> list[tuple[str, bool]]:
    """`(path, split into sections)` of every page the test walks."""
    pages = [(os.path.join(RESULTS, name), False) for name in sorted(os.listdir(RESULTS))]
    return [(p, s) for p, s in pages if p.endswith(".md")] + [(BENCHMARKS, True)]


def _checked_units():
    for path, split in _pages():
        text = open(path).read()
        page = os.path.relpath(path, REPO)
        for heading, section in _sections(text, split):
            yield page, heading, section, os.path.dirname(path)


def test_every_figure_page_and_section_has_its_data_committed_beside_it():
    lacking = []
    for page, heading, section, page_dir in _checked_units():
        if (page, heading) in ALLOWED_WITHOUT_DATA:
            continue
        prose = _without_code(section)
        if _FIGURE.search(prose) and not _data_files(section, page_dir):
            lacking.append(f"{page} {heading or ''}: figures without a committed data file")
        for image in _images_without_data(section, page_dir):
            lacking.append(f"{page} {heading or ''}: image {image} without data in its directory")
    assert not lacking, "\n".join(lacking)


def test_every_data_link_of_the_pages_resolves():
    dangling = []
    for page, _, section, page_dir in _checked_units():
        for match in _LINK.finditer(section):
            path = match.group(1)
            if "://" not in path and not _resolves(path, page_dir):
                dangling.append(f"{page}: {path}")
    assert not dangling, "\n".join(dangling)


def test_the_allow_list_names_sections_that_exist_and_still_lack_data():
    """An entry is deleted once its page has its data (the check above then covers it)."""
    units = {(page, heading): (section, d) for page, heading, section, d in _checked_units()}
    for (page, heading), reason in ALLOWED_WITHOUT_DATA.items():
        assert reason, (page, heading)
        assert (page, heading) in units, f"{page} {heading}: no such page or section"
        section, page_dir = units[(page, heading)]
        has_data = _data_files(section, page_dir) and not _images_without_data(section, page_dir)
        assert not has_data, f"{page} {heading or ''} has its data now: delete its allow-list entry"


def _without_heading_marks(text: str) -> str:
    """Markdown without its headings' `#` marks (a page nests a report's headings under its own)."""
    return re.sub(r"^#+ ", "", text.strip(), flags=re.M)


def test_every_embedded_runs_report_is_what_compare_runs_prints(capsys, monkeypatch):
    """Tables between `<!-- compare_runs ARGS -->` and `<!-- end compare_runs -->` are the report's
    output for ARGS, recomputed here from the committed episode logs."""
    monkeypatch.chdir(REPO)  # The arguments name committed files relative to the repository.
    checked = 0
    for path, _ in _pages():
        with open(path) as f:
            blocks = _COMPARE_BLOCK.findall(f.read())
        for args, embedded in blocks:
            assert "--output_dir" not in args, path  # Checking writes nothing.
            assert compare_runs.main(shlex.split(args)) == 0, (path, args)
            printed = capsys.readouterr().out
            assert _without_heading_marks(embedded) == _without_heading_marks(printed), (path, args)
            checked += 1
    assert checked >= 2  # docs/results/dmlab.md (seeds) and cores.md (cores), at least.


@pytest.mark.parametrize(
    ("text", "figures"),
    [
        ("mean 0.60, standard error 0.15", True),
        ("2,065 frames/s", True),
        ("12 % of it", True),
        ("Table D.3, section 5.2.2, commit `c65242d`, 2026-12-01, 96x72, seed 2", False),
    ],
)
def test_what_counts_as_a_figure(text, figures):
    """Decimals, thousands and percentages are figures; table, section and commit names, dates and
    small integers are not."""
    assert bool(_FIGURE.search(text)) == figures
