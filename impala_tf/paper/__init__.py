"""The paper's published numbers, as pure data (standard library only, nothing else of `impala_tf`).

- `atari57`: the 57 games, their random and human reference scores, Table 4 and Table C.1
  (section 5.3.2, appendix C).
- `table2`: Table 2, off-policy corrections with and without experience replay (section 5.2.2).
- `throughput`: Table 1, the paper's throughput figures (section 5.1).
- `popart`: the PopArt follow-up's (Hessel et al. 2019) aggregate scores.

The DMLab-30 data (levels, reference scores, Table 3 and Table B.1) is the `dmlab30` package beside
this one. Both are floor 0 of `tests/test_imports.py`: everything may import them, they import
nothing of ours.
"""
