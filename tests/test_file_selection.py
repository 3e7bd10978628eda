"""Which files a scan reads, by what they are rather than by their names alone: a `test_*.py` file is a test only
where it imports pytest or unittest (or sits in a test folder), and `build/` or `dist/` is left out only where it
is build output, not a Python package."""

from __future__ import annotations

from pathlib import Path

from portcheck.config import Layer, resolve
from portcheck.static.discover import discover


def _found(root: Path, files: dict[str, str]) -> set[str]:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    settings = resolve([Layer()], root, None)
    return {c.display for c in discover(["."], settings, root)}


def test_a_file_named_like_a_test_is_scanned_unless_its_code_is_a_test(tmp_path):
    found = _found(tmp_path, {
        "model/test_time_augmentation.py": "import torch\n",  # a model file: test-time augmentation
        "model/test_model.py": "import pytest\n\ndef test_x():\n    pass\n",
        "model/checks_test.py": "from unittest import TestCase\n",
        "tests/helpers.py": "import torch\n",  # a test folder: left out whatever it imports
        "model/conftest.py": "x = 1\n",
    })
    assert found == {"model/test_time_augmentation.py"}


def test_build_and_dist_are_left_out_only_as_build_output(tmp_path):
    found = _found(tmp_path, {
        "dist/__init__.py": "", "dist/sampler.py": "import torch\n",  # a package called dist
        "build/lib/pkg/mod.py": "import torch\n",  # setuptools' build output
        "pkg/dist.py": "import torch\n",
    })
    assert found == {"dist/__init__.py", "dist/sampler.py", "pkg/dist.py"}


def test_a_packages_test_support_that_imports_a_test_framework_is_a_test(tmp_path):
    """`torch_geometric/testing/decorators.py`, `accelerate/test_utils/testing.py`, `diffusers/utils/testing_utils.py`
    skip tests without CUDA and hold test cases: test code. In the same places, a file that imports no test framework
    (a script a test launches, a helper models use) is scanned."""
    found = _found(tmp_path, {
        "pkg/testing/decorators.py": "import torch\n\ndef onlyCUDA(func):\n    import pytest\n    return func\n",
        "pkg/test_utils/testing.py": "import unittest\nimport torch\n",
        "pkg/utils/testing_utils.py": "import unittest\nimport torch\n",
        "pkg/test_utils/scripts/test_zero3.py": "import torch\n",
        "pkg/utils/testing_utils_extra.py": "import unittest\n",  # not a test-support name
        "pkg/testing/compare.py": "import torch\n",
        "pkg/utils/checks.py": "from unittest.mock import Mock\n",  # a library module that mocks
    })
    assert found == {"pkg/test_utils/scripts/test_zero3.py", "pkg/utils/testing_utils_extra.py",
                     "pkg/testing/compare.py", "pkg/utils/checks.py"}
