"""The user's rules and preferences that apply to a goal, asked whether they say the opposite of an automatic memory.

Every automatic memory that makes its section is asked against every rule that applies: a store may hold thousands
of rules, and the blocks of most goals hold a few dozen memories. A rule can only overrule a memory that holds
every word of its action, so the rules are kept by one of their words (the first in order) and a memory asks only
those filed under a word it holds. The plan's rules (the ones no word of the goal reaches) are worked out once per
plan, not on every retrieve.
"""

from __future__ import annotations

from .._contradiction import MIN_RULE_WORDS, Stance, overrules


class RulesSaid:
    """The stances of the rules that apply to a goal, in the order they are asked (the ones judged now, then the
    plan's), found by the words a memory holds."""

    def __init__(self, rules: list[tuple[str, Stance]], planned: RulesSaid | None = None,
                 apart: frozenset[str] = frozenset()) -> None:
        self.rules = rules  # (rule id, its stance)
        self.planned = planned  # the plan's rules (shared by every retrieve of the plan)
        self.apart = apart  # ids of the plan's rules this retrieve judged itself (asked among ``rules``)
        self._by_word: dict[str, list[int]] | None = None

    def __bool__(self) -> bool:
        return bool(self.rules) or (self.planned is not None and bool(self.planned.rules))

    def _filed(self) -> dict[str, list[int]]:
        if self._by_word is None:
            by: dict[str, list[int]] = {}
            for n, (_, rule) in enumerate(self.rules):
                if len(rule.words) >= MIN_RULE_WORDS:
                    by.setdefault(min(rule.words), []).append(n)
            self._by_word = by
        return self._by_word

    def _first(self, memory: Stance, skip: frozenset[str]) -> str | None:
        filed = self._filed()
        hits = [n for w in memory.words for n in filed.get(w, ())
                if self.rules[n][0] not in skip and overrules(self.rules[n][1], memory)]
        return self.rules[min(hits)][0] if hits else None

    def overruling(self, memory: Stance) -> str | None:
        """The id of the first rule that says the opposite of ``memory`` (None: none does)."""
        rid = self._first(memory, frozenset())
        if rid is None and self.planned is not None:
            rid = self.planned._first(memory, self.apart)
        return rid
