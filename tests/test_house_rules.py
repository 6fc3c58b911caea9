"""The pack's size budgets hold (seacache_testing/house_rules.py): no product function over 60 lines."""

from __future__ import annotations

from seacache_testing import house_rules


def test_no_product_function_is_longer_than_60_lines():
    assert house_rules.long_functions() == []


def test_the_check_finds_a_long_function_and_measures_documentation(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(59))
    (package / "mod.py").write_text(f'def long():\n    """Doc."""\n{body}\n\ndef short():\n    return 1  # why\n')
    assert house_rules.long_functions(["pkg"], root=tmp_path) == [("pkg/mod.py", "long", 61)]
    assert house_rules.long_functions(["pkg"], limit=61, root=tmp_path) == []
    assert house_rules._doc_lines((package / "mod.py").read_text()) == {2, 65}  # the docstring and the trailing comment
