"""Every finding code: the records of the family modules, in the order docs/findings.md and `explain` list them."""

from __future__ import annotations

from .acc import RECORDS as ACC
from .cap import RECORDS as CAP
from .cfg import RECORDS as CFG
from .cmd import RECORDS as CMD
from .dfl import RECORDS as DFL
from .dgn import RECORDS as DGN
from .drf import RECORDS as DRF
from .eng import RECORDS as ENG
from .fix import RECORDS as FIX
from .fpr import RECORDS as FPR
from .fwd import RECORDS as FWD
from .gate import RECORDS as GATE
from .hlt import RECORDS as HLT
from .mtp import RECORDS as MTP
from .num import RECORDS as NUM
from .pea import RECORDS as PEA
from .qnt import RECORDS as QNT
from .record import Code
from .rtf import RECORDS as RTF
from .srv import RECORDS as SRV
from .tpl import RECORDS as TPL

FAMILIES: dict[str, tuple[Code, ...]] = {
    "CAP": CAP,
    "NUM": NUM,
    "DRF": DRF,
    "CFG": CFG,
    "FWD": FWD,
    "MTP": MTP,
    "DFL": DFL,
    "PEA": PEA,
    "QNT": QNT,
    "ACC": ACC,
    "HLT": HLT,
    "GATE": GATE,
    "SRV": SRV,
    "RTF": RTF,
    "FPR": FPR,
    "ENG": ENG,
    "CMD": CMD,
    "DGN": DGN,
    "FIX": FIX,
    "TPL": TPL,
}
# The listed order, by topic: a family's codes in its module's order, or one code where a family spans two
# topics (the gate's regression sits with acceptance, its own evidence after the serving evidence).
ORDER = (
    "CAP",
    "NUM",
    "DRF",
    "CFG",
    "FWD",
    "MTP",
    "DFL",
    "PEA",
    "QNT",
    "ACC",
    "HLT",
    "GATE001",
    "SRV",
    "RTF",
    "GATE002",
    "FPR",
    "ENG",
    "CMD",
    "DGN",
    "FIX",
    "TPL",
)


def _family(code: str) -> str:
    return code.rstrip("0123456789")


def _registry() -> dict[str, Code]:
    """Code -> record in ORDER; each record in the module of its family, each code once, each placed once."""
    every: dict[str, Code] = {}
    for family, records in FAMILIES.items():
        for r in records:
            if _family(r.code) != family or r.code in every:
                raise ValueError(f"{r.code} is defined twice or outside the {_family(r.code)} family's module")
            every[r.code] = r
    placed = [c for item in ORDER for c in every if item in (c, _family(c))]
    if sorted(placed) != sorted(every):
        raise ValueError(f"ORDER places {sorted(set(every) ^ set(placed)) or 'a code'} other than exactly once")
    return {c: every[c] for c in placed}


REGISTRY: dict[str, Code] = _registry()
CODES: dict[str, tuple[str, str]] = {c: (r.severity, r.summary) for c, r in REGISTRY.items()}  # code: (severity, summary)
