"""The prose of the reproductions' reports, kept in templates shipped with the package.

Each reproduction's ``summary.md`` and the notes of its ``summary.json`` are rendered from
``templates/<name>.md`` (package data). A template file is cut into named blocks by lines
``<!-- block-name -->`` (text before the first one describes the file and is not rendered);
a block is a :class:`string.Template` (``$name`` or ``${name}`` placeholders, ``$$`` for a
dollar sign) whose surrounding blank lines are dropped.

Two ways to render a block:

* :meth:`ReportTemplate.render` keeps the block's lines. A line holding nothing but a
  placeholder whose value is a list becomes one line per item (none for an empty list), so
  a table is written as its header followed by a line ``$rows``.
* :meth:`ReportTemplate.paragraph` joins the block's lines with single spaces: a note,
  written wrapped in the template, becomes the one line it is in ``summary.json``.

:func:`summary_markdown` assembles a ``summary.md``: the reproduction's sections separated by
blank lines, then the notes and the files (``templates/summary.md``).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from string import Template
from typing import Any

__all__ = ["ReportTemplate", "fmt", "summary_markdown"]

_MARKER = re.compile(r"<!-- ([a-z][a-z0-9_-]*) -->")
_LIST_LINE = re.compile(r"\$(?:([_a-z][_a-z0-9]*)|\{([_a-z][_a-z0-9]*)\})", re.IGNORECASE)


def _parse(text: str, name: str) -> dict[str, Template]:
    """The blocks of a template file's ``text``."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        marker = _MARKER.fullmatch(line)
        if marker is not None:
            if marker.group(1) in blocks:
                raise ValueError(f"template {name!r} has two blocks {marker.group(1)!r}.")
            current = blocks[marker.group(1)] = []
        elif current is not None:
            current.append(line)
    return {key: Template("\n".join(lines).strip("\n")) for key, lines in blocks.items()}


@functools.cache
def _packaged(name: str) -> dict[str, Template]:
    """The blocks of ``templates/<name>`` in this package, read once."""
    text = resources.files(__package__).joinpath("templates", name).read_text(encoding="utf-8")
    return _parse(text, name)


class ReportTemplate:
    """The blocks of one template file, ``templates/<name>`` in this package.

    Parameters
    ----------
    name : str
        File name inside ``templates/``, e.g. ``"consensus.md"``.
    text : str or None, default None
        The template's text instead of the packaged file's (for tests and drafts).

    Raises
    ------
    FileNotFoundError
        If the package holds no such template.
    ValueError
        If the file has two blocks of one name.
    """

    def __init__(self, name: str, *, text: str | None = None) -> None:
        self.name = name
        self._blocks = _packaged(name) if text is None else _parse(text, name)

    @property
    def blocks(self) -> tuple[str, ...]:
        """The block names, in file order."""
        return tuple(self._blocks)

    def placeholders(self, block: str) -> tuple[str, ...]:
        """The placeholder names of ``block``, in order of first appearance."""
        return tuple(self._template(block).get_identifiers())

    def render(self, block: str, /, **values: Any) -> str:
        """``block`` with its placeholders replaced, line for line.

        Parameters
        ----------
        block : str
            Block name.
        **values
            One value per placeholder (``str()`` is applied). A list stands for lines: its
            placeholder must be alone on its line, which becomes one line per item.

        Returns
        -------
        str
            The text, without a final newline.

        Raises
        ------
        KeyError
            If the block does not exist or a placeholder has no value.
        ValueError
            If a value is given that no placeholder uses, or a list's placeholder shares its
            line with other text.
        """
        template = self._template(block)
        unused = set(values) - set(template.get_identifiers())
        if unused:
            raise ValueError(
                f"block {block!r} of {self.name!r} has no placeholder {sorted(unused)}."
            )
        lists = {k: v for k, v in values.items() if isinstance(v, list)}
        if not lists:
            return template.substitute(values)
        out: list[str] = []
        for line in template.template.split("\n"):
            whole = _LIST_LINE.fullmatch(line)
            key = (whole.group(1) or whole.group(2)) if whole else None
            if key in lists:
                out += [str(item) for item in lists[key]]
                continue
            if set(Template(line).get_identifiers()) & set(lists):
                raise ValueError(
                    f"block {block!r} of {self.name!r}: a list placeholder must "
                    f"be alone on its line. Found {line!r}."
                )
            out.append(Template(line).substitute(values))
        return "\n".join(out)

    def paragraph(self, block: str, /, **values: Any) -> str:
        """``block`` rendered (:meth:`render`) as one line: its lines joined by single spaces.

        Raises
        ------
        KeyError, ValueError
            As :meth:`render`.
        """
        return " ".join(line.strip() for line in self.render(block, **values).split("\n"))

    def _template(self, block: str) -> Template:
        try:
            return self._blocks[block]
        except KeyError:
            raise KeyError(
                f"template {self.name!r} has no block {block!r}; it has {list(self._blocks)}."
            ) from None


def summary_markdown(sections: Sequence[str], summary: Mapping[str, Any]) -> str:
    """The text of a ``summary.md``.

    Parameters
    ----------
    sections : sequence of str
        The reproduction's own sections (rendered blocks), separated by one blank line.
    summary : mapping
        The completed summary: its ``notes`` (a section ``## Notes`` if there are any) and
        its ``files`` (the section ``## Files``) end the text.

    Returns
    -------
    str
        The text, ending with a newline.
    """
    common = ReportTemplate("summary.md")
    parts = list(sections)
    if summary["notes"]:
        parts.append(common.render("notes", notes=[f"- {n}" for n in summary["notes"]]))
    parts.append(common.render("files", files=[f"- `{f}`" for f in summary["files"]]))
    return "\n\n".join(parts) + "\n"


def fmt(value: Any, digits: int = 4) -> str:
    """A value for a markdown table: ``n/a`` for None, ``yes``/``no`` for a bool, ``inf`` for a
    non-finite float, a float to ``digits`` significant digits, anything else as ``str``."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "inf"
        return f"{value:.{digits}g}"
    return str(value)
