"""The rules that decide each notebook's lesson claims: one module per notebook (`query_skipping` for
`03-query-skipping`), each rule a `@claims.rule` with numbers where its effect is absent and present.

Importing this package imports every module in it, so `claims.RULES` holds every rule the lab uses.
"""

from __future__ import annotations

import importlib
import pkgutil

MODULES = tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")))

for _name in MODULES:
    importlib.import_module(f"{__name__}.{_name}")


def module_for(notebook: str) -> str:
    """`03-query-skipping` -> `query_skipping`: where that notebook's rules live."""
    return notebook.split("-", 1)[1].replace("-", "_")
