"""What to say about a name that names nothing: the close match, the standard-library
part it is (and the import that brings it), or the candidates of the kind expected;
and for a bare word where a value was expected, what that word is."""

from __future__ import annotations

import difflib
import functools
from typing import Iterable

from ..dsl.library import find_part, std_parts
from ..dsl import codes
from . import schema as sc
from ..dsl.units import UNITS

MAX_LISTED = 8


def unknown_name_notes(name: str, candidates: Iterable[str], kinds: tuple[str, ...] | None, what: str) -> list[str]:
    """Notes for `unknown name` where a name of `kinds` (None: any) was expected."""
    candidates = sorted(set(candidates))
    part = find_part(name)
    if part is not None and (kinds is None or part.kind in kinds):
        return [f'help: `{name}` is a {part.kind} in the standard library: add `import "{part.library}"`']
    close = nearest(name, candidates)
    if close:
        others = [c for c in difflib.get_close_matches(name, candidates, n=4, cutoff=0.75) if c != close][:3]
        return [f"help: did you mean `{close}`?"] + ([f"also close: {_listing(others)}"] if others else [])
    library = [p for p in std_parts() if kinds is None or p.kind in kinds]
    near = nearest(name, [p.name for p in library])
    if near:
        found = next(p for p in library if p.name == near)
        return [f'help: did you mean `{found.name}`? it is in the standard library: add `import "{found.library}"`']
    if candidates:
        return [f"known {what}: {_listing(candidates)}"]
    if library:
        return [f"no {what} is declared or imported; the standard library has {_listing([p.name for p in library])}"]
    return []


def word_notes(word: str) -> list[str]:
    """Why a bare word is not a value here: it is a keyword of another field, or a unit."""
    if word in UNITS:
        return [f"help: a unit needs a number before it, as in `1 {word}`"]
    owners = _keyword_owners().get(word)
    if owners:
        field, choice = owners[0]
        return [f"help: `{word}` is {choice.what or 'a keyword'}; it belongs in a field such as `{field} = {word}`"]
    return []


@functools.cache
def _keyword_owners() -> dict[str, list[tuple[str, sc.Choice]]]:
    """Each keyword of the language, with the fields that take it."""
    owners: dict[str, list[tuple[str, sc.Choice]]] = {}
    blocks = list(sc.KINDS.values())
    while blocks:
        block = blocks.pop()
        for name, ftype in block.fields.items():
            if isinstance(ftype, sc.Choice):
                for option in ftype.options:
                    owners.setdefault(option, []).append((name, ftype))
        blocks += list(block.blocks.values()) + list(block.labelled.values())
    return owners


def nearest(name: str, candidates: list[str]) -> str | None:
    """A candidate that `name` begins (`H200` -> `H200_SXM`), else the closest spelling."""
    extended = sorted((c for c in candidates if c.lower().startswith(name.lower()) and c != name), key=len)
    if extended:
        return extended[0]
    close = codes.suggest(name, candidates)
    return close.split("`")[1] if close else None


def _listing(names: list[str]) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:MAX_LISTED])
    return shown + (f" and {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED else "")
