"""The DMLab-30 report moved: `python -m impala_tf.reports.dmlab30 RESULTS.json [...]`.

`python -m dmlab30.report` prints where it went and exits with status 2; this package stays a data
leaf that imports nothing of `impala_tf`.
"""

from __future__ import annotations

import sys

MOVED_TO = "python -m impala_tf.reports.dmlab30"


def main(argv: list[str] | None = None) -> int:
    """Prints the report's new command (with the arguments given) to stderr; returns 2."""
    args = sys.argv[1:] if argv is None else argv
    print(f"error: the DMLab-30 report moved; run: {' '.join([MOVED_TO, *args])}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
