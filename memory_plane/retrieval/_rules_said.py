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
    user's own memories alone asks nothing, however many rules apply. With ``filed`` (each rule's filing word, known
    without its stance: a snapshot keeps them), only the rules filed under a word the memory holds are worked out."""

    def __init__(self, count: int, make: Callable[[], list[tuple[str, Stance]]], planned: RulesSaid | None = None,
                 apart: Callable[[], frozenset[str]] | None = None,
                 filed: Callable[[], list[str | None]] | None = None,
                 one: Callable[[int], tuple[str, Stance]] | None = None) -> None:
        self.count = count  # how many rules ``make`` gives
        self._make = make
        self._rules: list[tuple[str, Stance]] | None = None  # (rule id, its stance)
        self.planned = planned  # the plan's rules (shared by every retrieve of the plan)
        self._apart = apart  # ids of the plan's rules this retrieve judged itself (asked among its own)
        self._by_word: dict[str, list[int]] | None = None
        self._keys = filed  # rule n's filing word (None: too few words to overrule anything)
        self._one = one  # rule n's (id, stance), worked out alone
        self._known: dict[int, tuple[str, Stance]] = {}

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

    def _rule(self, n: int) -> tuple[str, Stance]:
        if self._rules is not None or self._one is None:
            return self.rules[n]
        known = self._known.get(n)
        if known is None:
            known = self._known[n] = self._one(n)
        return known

    def _filed(self) -> dict[str, list[int]]:
        if self._by_word is None:
            by: dict[str, list[int]] = {}
            if self._keys is not None:
                for n, key in enumerate(self._keys()):
                    if key is not None:
                        by.setdefault(key, []).append(n)
            else:
                for n, (_, rule) in enumerate(self.rules):
                    key = filing_word(rule)
                    if key is not None:
                        by.setdefault(key, []).append(n)
            self._by_word = by
        return self._by_word

    def _first(self, memory: Stance, skip: frozenset[str]) -> str | None:
        filed = self._filed()
        rule = self._rule
        hits = [n for w in memory.words for n in filed.get(w, ())
                if rule(n)[0] not in skip and overrules(rule(n)[1], memory)]
        return rule(min(hits))[0] if hits else None

    def overruling(self, memory: Stance) -> str | None:
        """The id of the first rule that says the opposite of ``memory`` (None: none does)."""
        rid = self._first(memory, frozenset()) if self.count else None
        if rid is None and self.planned is not None and self.planned.count:
            rid = self.planned._first(memory, self._apart() if self._apart is not None else frozenset())
        return rid


def filing_word(rule: Stance) -> str | None:
    """The word a rule is filed under: the first of its words in order (a memory it can overrule holds every one),
    None for a rule of too few words to overrule anything."""
    return min(rule.words) if len(rule.words) >= MIN_RULE_WORDS else None
