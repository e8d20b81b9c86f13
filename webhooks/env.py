"""Settings come from the environment: a variable under a process's prefix that no
setting reads is refused by name, as the API server refuses an unknown field, instead of
being ignored while its default is used."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

from pydantic import AliasChoices
from pydantic_settings import BaseSettings


def variables(settings: type[BaseSettings]) -> list[str]:
    """The environment variables ``settings`` reads: each field's prefixed name, and the
    names of its aliases (e.g. the monitor's ``NODE_NAME`` from the downward API)."""
    prefix = str(settings.model_config.get("env_prefix", ""))
    names = []
    for name, field in settings.model_fields.items():
        names.append(f"{prefix}{name}".upper())
        alias = field.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
        names += [c.upper() for c in choices if isinstance(c, str)]
    return names


def unknown_variable(
    environ: Mapping[str, str],
    settings: type[BaseSettings],
    process: str,
    others: Iterable[str] = (),
) -> str | None:
    """The first variable under ``settings``' prefix (and under none of ``others``, the
    prefixes of other processes' variables that may share its pod's environment) that
    is not one of its settings, as one line with the closest setting; None if none."""
    prefix = str(settings.model_config.get("env_prefix", ""))
    known = variables(settings)
    skip = tuple(others)
    for name in sorted(environ):
        if name.startswith(prefix) and name not in known and not (skip and name.startswith(skip)):
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            return f"{name}: not a setting of {process} ({hint}they are listed in chart/README.md)"
    return None
