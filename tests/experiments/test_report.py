"""The reports' prose: template blocks, rendering, the summary's markdown, table values."""

from __future__ import annotations

import ast
import math
from importlib import resources
from pathlib import Path

import pytest

import dpfed.experiments
from dpfed.experiments.report import ReportTemplate, fmt, summary_markdown

DRAFT = """\
Text before the first block describes the file.

<!-- table -->

| a | b |
|---|---|
$rows
Total: $total

<!-- note -->
A note written
  on three lines, $value
at the end.
<!-- dollar -->
$$5 for ${what}s
"""


def test_blocks_are_named_and_stripped():
    template = ReportTemplate("draft.md", text=DRAFT)
    assert template.blocks == ("table", "note", "dollar")
    assert template.placeholders("table") == ("rows", "total")
    assert template.render("dollar", what="apple") == "$5 for apples"


def test_a_list_becomes_one_line_per_item_and_an_empty_list_none():
    template = ReportTemplate("draft.md", text=DRAFT)
    text = template.render("table", rows=["| 1 | 2 |", "| 3 | 4 |"], total=10)
    assert text == "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\nTotal: 10"
    assert template.render("table", rows=[], total=0) == "| a | b |\n|---|---|\nTotal: 0"
    assert template.render("table", rows="| x |", total=(1, 2)).endswith("| x |\nTotal: (1, 2)")


def test_paragraph_joins_the_lines_with_single_spaces():
    template = ReportTemplate("draft.md", text=DRAFT)
    assert template.paragraph("note", value=0.5) == "A note written on three lines, 0.5 at the end."


def test_render_refuses_missing_unused_and_misplaced_values():
    template = ReportTemplate("draft.md", text=DRAFT)
    with pytest.raises(KeyError, match="total"):
        template.render("table", rows=[])
    with pytest.raises(ValueError, match=r"no placeholder \['extra'\]"):
        template.render("table", rows=[], total=1, extra=2)
    with pytest.raises(ValueError, match="alone on its line"):
        template.render("table", rows=[], total=[1])
    with pytest.raises(KeyError, match="no block 'nope'"):
        template.render("nope")
    with pytest.raises(ValueError, match="two blocks 'a'"):
        ReportTemplate("bad.md", text="<!-- a -->\nx\n<!-- a -->\ny\n")


def test_summary_markdown_ends_with_the_notes_and_the_files():
    text = summary_markdown(
        ["# Title", "Para"], {"notes": ["a note"], "files": ["figure.png", "summary.md"]}
    )
    assert text == (
        "# Title\n\nPara\n\n## Notes\n\n- a note\n\n## Files\n\n- `figure.png`\n- `summary.md`\n"
    )
    assert summary_markdown(["# T"], {"notes": [], "files": ["a"]}) == "# T\n\n## Files\n\n- `a`\n"


def test_fmt():
    assert fmt(None) == "n/a"
    assert fmt(True) == "yes" and fmt(False) == "no"
    assert fmt(math.inf) == "inf"
    assert fmt(0.123456) == "0.1235" and fmt(0.123456, 2) == "0.12"
    assert fmt(7) == "7"


def _templates() -> list[str]:
    folder = resources.files("dpfed.experiments").joinpath("templates")
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".md"))


def test_the_package_ships_a_template_per_reproduction():
    assert _templates() == [
        "bayes_linreg.md",
        "consensus.md",
        "dca_scaling.md",
        "decentralized.md",
        "summary.md",
        "vertical.md",
    ]


@pytest.mark.parametrize("name", [n for n in _templates() if n != "summary.md"])
def test_every_block_of_a_template_is_rendered_by_its_module(name):
    """A block its module never names is dead prose; the module's literals name each block."""
    source = Path(dpfed.experiments.__file__).with_name(name.replace(".md", ".py")).read_text()
    literals = {
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    template = ReportTemplate(name)
    assert [b for b in template.blocks if b not in literals] == []
    assert template.blocks[0] == "head"
