"""The benchmark children's entry point (`impala_tf.benchmark.child`): every role names a module
and an entry point that exist (the child imports them by name, out of `tests/test_imports.py`'s
sight)."""

import importlib

import pytest

from impala_tf.benchmark import child


@pytest.mark.parametrize("role", sorted(child.ROLES))
def test_every_role_names_an_entry_point_that_exists(role):
    module, entry_point = child.ROLES[role]
    assert callable(getattr(importlib.import_module(f"impala_tf.benchmark.{module}"), entry_point))
