"""Population-based training of IMPALA agents (paper appendix F, Table D.1, section 5.3.1).

- `rules`: the paper's rules as pure functions (initial sampling, ready, exploit, explore).
- `fitness`: a member's fitness from its recent episode returns.
- `ancestry`: the event log's records and the reconstruction of a lineage through its copies.
- `protocol`: the population directory and the files members and the controller exchange.
- `member`: the learner side of a member (fitness out, instructions in, applied between updates).
- `controller`: the controller's decisions and state (all of it in the population directory).
- `supervisor`: `--mode=pbt`, the controller loop, and the members as local process groups.

See docs/pbt.md.
"""
