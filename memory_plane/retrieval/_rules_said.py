"""The user's rules and preferences that apply to a goal, asked whether they say the opposite of an automatic memory.

Every automatic memory that makes its section is asked against every rule that applies: a store may hold thousands
of rules, and the blocks of most goals hold a few dozen memories. A rule can only overrule a memory that holds
every word of its action, so the rules are kept by one of their words (the first in order) and a memory asks only
those filed under a word it holds. The plan's rules (the ones no word of the goal reaches) are worked out once per
plan, not on every retrieve.
"""

from __future__ import annotations

from collections.abc import Callable

from .._contradiction import MIN_RULE_WORDS, Stance, overrules


class RulesSaid:
    """The stances of the rules that apply to a goal, in the order they are asked (the ones judged now, then the
    plan's), found by the words a memory holds. Nothing is worked out until a memory is asked about: a block of the
    user's own memories alone asks nothing, however many rules apply."""

    def __init__(self, count: int, make: Callable[[], list[tuple[str, Stance]]], planned: RulesSaid | None = None,
                 apart: Callable[[], frozenset[str]] | None = None) -> None:
        self.count = count  # how many rules ``make`` gives
        self._make = make
        self._rules: list[tuple[str, Stance]] | None = None  # (rule id, its stance)
        self.planned = planned  # the plan's rules (shared by every retrieve of the plan)
        self._apart = apart  # ids of the plan's rules this retrieve judged itself (asked among its own)
        self._by_word: dict[str, list[int]] | None = None

    @classmethod
    def of(cls, rules: list[tuple[str, Stance]], planned: RulesSaid | None = None,
           apart: frozenset[str] = frozenset()) -> RulesSaid:
        """Rules whose stances are known already."""
        return cls(len(rules), lambda: rules, planned, lambda: apart)

    def __bool__(self) -> bool:
        return self.count > 0 or (self.planned is not None and self.planned.count > 0)

    @property
    def rules(self) -> list[tuple[str, Stance]]:
        """(rule id, stance) of each rule, in order (worked out on first use)."""
        if self._rules is None:
            self._rules = self._make()
        return self._rules

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
        rules = self.rules
        hits = [n for w in memory.words for n in filed.get(w, ())
                if rules[n][0] not in skip and overrules(rules[n][1], memory)]
        return rules[min(hits)][0] if hits else None

    def overruling(self, memory: Stance) -> str | None:
        """The id of the first rule that says the opposite of ``memory`` (None: none does)."""
        rid = self._first(memory, frozenset()) if self.count else None
        if rid is None and self.planned is not None and self.planned.count:
            rid = self.planned._first(memory, self._apart() if self._apart is not None else frozenset())
        return rid
