from __future__ import annotations

from contrib.analysis.tree import DictTree
from contrib.validate.syntax import check_conditionals, check_files, check_python


def test_python_syntax_error_names_the_line():
    (finding,) = check_python("pkg/m.py", "x = 1\ndef f(:\n    pass\n")
    assert finding.location == "pkg/m.py:2" and finding.severity == "error"
    assert check_python("ok.py", "def f():\n    return 1\n") == []
    assert check_python("nul.py", "x = 1\0")[0].line == 1


def test_unbalanced_conditionals():
    findings = check_conditionals("k.cuh", "#if A\nx\n#else\ny\n#else\n#endif\n#endif\n")
    assert [(f.line, f.message) for f in findings] == [
        (5, "#else after #else (#if at line 1)"),
        (7, "#endif without #if"),
    ]
    assert check_conditionals("k.cuh", "#ifdef A\n#if B\n#endif\n#elif C\n#endif\n") == []


def test_check_files_skips_deleted_and_other_files():
    tree = DictTree({"a.py": "x = (\n", "b.cu": "#if X\n", "README.md": "#if\n"})
    findings, checked = check_files(tree, ["a.py", "b.cu", "README.md", "deleted.py"])
    assert checked == ["a.py", "b.cu"]
    assert sorted(f.location for f in findings) == ["a.py:1", "b.cu:1"]
