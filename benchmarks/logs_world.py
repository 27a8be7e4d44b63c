"""The names a generated conversation of ``logs_gen`` uses and the pieces its tool
outputs are built of (vocabularies, an output and its gold lines, filling to a size)."""

from __future__ import annotations

import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare import ENC

__all__ = ["AREAS", "ENC", "NOUNS", "VERBS", "Output", "World", "camel", "fill", "snake", "stamp"]

AREAS = [
    "orders",
    "billing",
    "payouts",
    "inventory",
    "checkout",
    "catalog",
    "shipping",
    "ledger",
    "search",
    "accounts",
    "notify",
    "pricing",
    "refunds",
    "invoices",
    "sessions",
    "reports",
    "tax",
    "fraud",
    "loyalty",
    "webhooks",
]
NOUNS = [
    "order",
    "refund",
    "payout",
    "token",
    "invoice",
    "cart",
    "item",
    "batch",
    "user",
    "rate",
    "webhook",
    "entry",
    "discount",
    "address",
    "shipment",
    "coupon",
    "quote",
    "balance",
    "receipt",
    "merchant",
    "tenant",
    "export",
    "schedule",
    "limit",
]
VERBS = [
    "create",
    "update",
    "list",
    "fetch",
    "sync",
    "cancel",
    "retry",
    "apply",
    "compute",
    "export",
    "validate",
    "merge",
    "load",
    "parse",
    "render",
    "resolve",
    "settle",
    "split",
    "close",
    "reopen",
]
ORGS = ["acme", "globex", "initech", "umbrella", "hooli", "vandelay", "wonka", "tyrell"]


@dataclass
class Output:
    """One tool call and its result, the result's gold lines by their index."""

    plan: str
    command: str
    lines: list[str]
    gold: dict[int, list[tuple[str, str]]] = field(default_factory=dict)

    def put(
        self, rng: random.Random, line: str, ids: list[tuple[str, str]] | None, at: int = -1
    ) -> None:
        """Insert ``line`` at ``at`` (a random place when -1): a gold line with its
        ``ids`` (maybe none), or with ``ids=None`` a line that does not matter."""
        at = rng.randint(0, len(self.lines)) if at < 0 else at
        self.lines.insert(at, line)
        self.gold = {(k + 1 if k >= at else k): v for k, v in self.gold.items()}
        if ids is not None:
            self.gold[at] = ids


def fill(make: Callable[[], str], tokens: int) -> list[str]:
    """Lines from ``make`` until they hold about ``tokens`` tokens."""
    out: list[str] = []
    used = 0
    while used < tokens:
        line = make()
        out.append(line)
        used += ENC.count_text(line) + 1
    return out


def snake(rng: random.Random) -> str:
    return f"{rng.choice(VERBS)}_{rng.choice(NOUNS)}"


def camel(snake: str) -> str:
    return "".join(p.title() for p in snake.split("_"))


def stamp(rng: random.Random, base: int) -> str:
    s = base + rng.randint(0, 3599)
    day, ms = 11 + base // 86400 % 9, rng.randint(0, 999)
    return f"2025-03-{day:02d}T{s // 3600 % 24:02d}:{s // 60 % 60:02d}:{s % 60:02d}.{ms:03d}Z"


@dataclass
class World:
    """A seed's names: the project, its areas and source files."""

    rng: random.Random
    org: str
    project: str
    areas: list[str]
    files: list[str]  # source paths, no extension
    hour: int

    @classmethod
    def make(cls, rng: random.Random) -> World:
        areas = rng.sample(AREAS, rng.randint(5, 9))
        files = [f"{a}/{n}" for a in areas for n in rng.sample(NOUNS, rng.randint(3, 6))]
        return cls(
            rng,
            rng.choice(ORGS),
            f"{rng.choice(AREAS)}-service",
            areas,
            files,
            rng.randint(0, 20) * 3600,
        )
