"""Module names of a project's files, as imports spell them."""

from __future__ import annotations

from collections.abc import Iterable


def module_of(path: str) -> tuple[str, bool]:
    """`pkg/sub/mod.py` -> ("pkg.sub.mod", False); `pkg/__init__.py` -> ("pkg", True)."""
    stem = path.replace("\\", "/").removesuffix(".pyi").removesuffix(".py").strip("/")
    parts = [p for p in stem.split("/") if p not in ("", ".")]
    package = bool(parts) and parts[-1] == "__init__"
    if package:
        parts = parts[:-1]
    return ".".join(parts), package


def suffixes(full: str, module: str) -> Iterable[str]:
    """`a.b.c.f` with module `a.b.c` -> a.b.c.f, b.c.f, c.f: how an absolute import may name it."""
    parts = module.split(".") if module else []
    rest = full[len(module) + 1:] if module else full
    for start in range(len(parts)):
        yield ".".join(parts[start:]) + "." + rest


__all__ = ["module_of", "suffixes"]
