"""How a fact summary's picked clauses are laid out in lines, and what each one costs there.

When the summary spans days there is a line per day, each speaker's run in it
named: ``[8 May] Caroline: a; b | Melanie: c``; otherwise a line per speaker
turn, ``Caroline: a; b``. A clause without a speaker (a foreign child
summary's line) is shown bare. The cost of a clause is exact (its prefix and
separators included), so selection fills its room without going over.
Tests: tests/brain/lcm/facts/test_summarizer.py.
"""

from __future__ import annotations

from datetime import date

from brain.lcm.facts.clauses import day_text
from brain.lcm.facts.scoring import Clause
from brain.lcm.summary_contract import units


class Layout:
    """The lines of one summary: day lines (``dated``) or speaker turns."""

    def __init__(self, clauses: list[Clause]) -> None:
        days = {c.day for c in clauses if c.day is not None}
        self.dated = len(days) > 1
        self.with_year = len({d.year for d in days}) > 1
        self._runs: dict[tuple[date | None, str | None], bool] = {}
        self._days: dict[date | None, bool] = {}
        self._any = False

    def joint(self, before: Clause | None, clause: Clause) -> str:
        """What goes between two consecutive picked clauses (``before`` None: the first)."""
        who = f"{clause.speaker}: " if clause.speaker else ""
        if self.dated:
            day = f"[{day_text(clause.day, year=self.with_year)}] " if clause.day else ""
            if before is None:
                return day + who
            if before.day != clause.day:
                return "\n" + day + who
            if before.speaker == clause.speaker:
                return "; "
            return " | " + who
        if before is None:
            return who
        if before.speaker == clause.speaker:
            return "; "
        return "\n" + who

    def size(self, clause: Clause, before: Clause | None, after: Clause | None) -> int:
        """What inserting ``clause`` between picked neighbours adds to the text, exactly."""
        if self.dated:
            # A line per day, a run per speaker within it: "[8 May] A: x; y | B: z".
            if self._runs.get((clause.day, clause.speaker)):
                return clause.size + 2
            who = units(f"{clause.speaker}: ") if clause.speaker else 0
            if self._days.get(clause.day):
                return clause.size + 3 + who
            label = units(f"[{day_text(clause.day, year=self.with_year)}] ") if clause.day else 0
            return clause.size + (1 if self._any else 0) + label + who
        added = units(self.joint(before, clause)) + clause.size
        if after is not None:
            added += units(self.joint(clause, after)) - units(self.joint(before, after))
        return added

    def place(self, clause: Clause) -> None:
        """Note ``clause`` as picked (its day line and speaker run now exist)."""
        clause.picked = True
        self._any = True
        self._runs[(clause.day, clause.speaker)] = True
        self._days[clause.day] = True

    def body(self, picked: list[Clause]) -> str:
        """The picked clauses (in order) as the summary's lines."""
        if self.dated:
            return self._dated_body(picked)
        parts: list[str] = []
        before: Clause | None = None
        for clause in picked:
            parts += (self.joint(before, clause), clause.text)
            before = clause
        return "".join(parts)

    def _dated_body(self, picked: list[Clause]) -> str:
        """The picked clauses as day lines, each speaker's run in order of first pick time."""
        days: dict[date | None, dict[str | None, list[str]]] = {}
        for clause in picked:
            days.setdefault(clause.day, {}).setdefault(clause.speaker, []).append(clause.text)
        lines = []
        for day, runs in days.items():
            label = f"[{day_text(day, year=self.with_year)}] " if day else ""
            turns = [(f"{who}: " if who else "") + "; ".join(texts) for who, texts in runs.items()]
            lines.append(label + " | ".join(turns))
        return "\n".join(lines)
