"""The command `python -m impala_tf.sweep`; an entry point, no code.

The hyperparameter sweeps of Table D.1 and the Table 2 study (paper section 5.2.2) live in
`impala_tf/studies/sweep.py`. See docs/table2.md.
"""

import sys

if __name__ == "__main__":
    from impala_tf.studies import sweep

    sys.exit(sweep.main())
