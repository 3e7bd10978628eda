"""`portcheck rule CODE_OR_NAME`: which rule was meant."""

from __future__ import annotations

from typing import TYPE_CHECKING

from portcheck.config import ConfigError

if TYPE_CHECKING:
    from portcheck.knowledge import RuleInfo


def find_rule(wanted: str) -> RuleInfo:
    """`portcheck rule CODE_OR_NAME`: the rule's catalog entry; a retired or unknown one is a message, with the
    codes or names nearest to what was typed."""
    import difflib

    from portcheck.knowledge import load

    knowledge = load()
    wanted = wanted.strip()
    info = knowledge.rules.get(wanted.upper()) or knowledge.rule_by_name(wanted)
    if info is None:
        if wanted.upper() in knowledge.retired:
            raise ConfigError(f"{wanted.upper()} is retired: {knowledge.retired[wanted.upper()]}")
        # Something code-like (PC10, PC11O) means the codes that share its longest beginning, not look-alikes from
        # other families (PC310, PC210); anything else, the nearest codes and names.
        hint: list[str] = []
        for end in range(len(wanted), 2, -1) if wanted.upper().startswith("PC") else ():
            hint = [code for code in sorted(knowledge.rules) if code.startswith(wanted.upper()[:end])][:3]
            if hint:
                break
        vocabulary = [*knowledge.rules, *(r.name for r in knowledge.rules.values())]
        hint = hint or difflib.get_close_matches(wanted, vocabulary, n=3)
        raise ConfigError(f"unknown rule '{wanted}'" + (f"; did you mean {' or '.join(hint)}?" if hint else ""))
    return info
