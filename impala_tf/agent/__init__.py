"""The agent: its networks, how it acts and how it learns (paper sections 3 and 4, appendix D).

- `networks`: the Sonnet 2 agents, deep ResNet and shallow torsos, instruction encoder, LSTM core.
- `actor`: E environments, batched inference, overlapping T+1-step unrolls.
- `learner`: the update, re-run, align, V-trace, losses, one optimiser step; tf.distribute.
- `replay`: experience replay of whole trajectories (section 5.2.2).
- `frame_stacks`: each stacked Atari frame sent once, the stacks rebuilt in the learner.

Floor 3 of `tests/test_imports.py`: these import the maths, the foundation and the data; never a
run's processes (addresses, the wire, the run directory) or the studies above them.
"""
