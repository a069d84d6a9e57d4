"""The README, the reference documents and the docstrings say what is: no commit hashes or dates,
and no link to a file that does not exist (the history of runs lives in docs/measurements.md)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
#: Where history belongs, and so where hashes and dates may appear.
HISTORY = {ROOT / "docs" / "measurements.md"}
REFERENCES = sorted(
    {
        ROOT / "README.md",
        ROOT / "neli" / "README.md",
        ROOT / "bench" / "README.md",
        *(ROOT / "docs").glob("*.md"),
    }
    - HISTORY
)
CODE_ROOTS = ("neli", "pricing_ha", "bench", "tests", "scripts", "examples")

DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
# 7 to 40 hex digits with at least one letter and one digit, not part of a longer word.
COMMIT = re.compile(r"(?<![\w.-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![\w])")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
ANCHORED = re.compile(r"\]\(([^)#\s]*)#([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
#: A repository path quoted as code (`tests/unit/neli/test_x.py`, `tests/unit/x/test_*.py`),
#: without a pytest node id's ``::test`` part.
CODE_PATH = re.compile(
    r"`((?:tests|neli|pricing_ha|bench|scripts|examples|deploy|docs|config)/[\w/.*-]+?)"
    r"(?:::[^`]*)?`"
)


def history_marks(text: str) -> list[str]:
    """The commit hashes and dates in ``text``."""
    return [m.group() for rx in (DATE, COMMIT) for m in rx.finditer(text)]


def anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of ``markdown`` (code blocks left out)."""
    found: set[str] = set()
    for title in HEADING.findall(FENCE.sub("", markdown)):
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        n, unique = 0, slug
        while unique in found:
            n += 1
            unique = f"{slug}-{n}"
        found.add(unique)
    return found


def _docstrings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    return [d for n in nodes if (d := ast.get_docstring(n))]


def test_the_checks_see_a_hash_and_a_date_and_pass_ordinary_words() -> None:
    """A commit hash and a date are found; words, figures and hex-free names are not."""
    assert history_marks("fixed at `889ec21` on 2026-11-28") == ["2026-11-28", "889ec21"]
    assert history_marks("deadbeef 1234567 cafe 0.70 s, 15,258/s, prices-c3c2281d") == []


@pytest.mark.parametrize("doc", REFERENCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_reference_documents_carry_no_hashes_or_dates(doc: Path) -> None:
    """README.md, neli/README.md and docs/*.md (but the measurement history) name no commit
    and no day."""
    assert history_marks(doc.read_text(encoding="utf-8")) == []


def test_docstrings_carry_no_hashes_or_dates() -> None:
    """No module, class or function docstring of the code names a commit or a day."""
    found = {
        str(path.relative_to(ROOT)): marks
        for root in CODE_ROOTS
        for path in sorted((ROOT / root).rglob("*.py"))
        if (marks := [m for d in _docstrings(path) for m in history_marks(d)])
    }
    assert found == {}


@pytest.mark.parametrize("doc", REFERENCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_at_files_that_exist(doc: Path) -> None:
    """Every relative link of a reference document names a file or folder of the repository."""
    text = doc.read_text(encoding="utf-8")
    broken = [
        target
        for target in LINK.findall(text)
        if "://" not in target
        and not target.startswith("mailto:")
        and not (doc.parent / target).exists()
    ]
    assert broken == []


def test_anchors_follow_githubs_rules() -> None:
    """Punctuation and code marks drop out, spaces become hyphens, a repeated title is numbered."""
    text = (
        "# 4.3 Relay, the `dedupe` stage\n## Hand-over: why?\n"
        "```\n# not a heading\n```\n## Hand-over: why?\n"
    )
    assert anchors(text) == {"43-relay-the-dedupe-stage", "hand-over-why", "hand-over-why-1"}


@pytest.mark.parametrize("doc", REFERENCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_to_a_section_name_one_that_exists(doc: Path) -> None:
    """Every link to a section (``file.md#anchor`` or ``#anchor``) names a heading of that file."""
    text = doc.read_text(encoding="utf-8")
    broken = [
        f"{target}#{anchor}"
        for target, anchor in ANCHORED.findall(text)
        if "://" not in target
        and (target == "" or target.endswith(".md"))
        and (target == "" or (doc.parent / target).is_file())
        and anchor
        not in anchors((doc.parent / target).read_text(encoding="utf-8") if target else text)
    ]
    assert broken == []


def test_code_names_document_sections_not_their_numbers() -> None:
    """Code cites a document's section by its title, never by a number that moves (§N)."""
    numbered = [
        f"{path.relative_to(ROOT)}:{n}"
        for root in CODE_ROOTS
        for path in sorted((ROOT / root).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "§" in line and path != Path(__file__).resolve()
    ]
    assert numbered == []


def quoted_paths_missing(text: str) -> list[str]:
    """The repository paths quoted as code in ``text`` that name no file (a glob: none)."""
    return [
        path
        for path in CODE_PATH.findall(text)
        if not (any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists())
    ]


def test_the_path_check_sees_a_moved_test_file() -> None:
    """A quoted path that moved is found; a current one, a glob that matches and a node id pass."""
    text = (
        "`tests/unit/test_config.py` `tests/unit/config/test_config.py` "
        "`tests/unit/project/test_*.py` `tests/unit/config/test_config.py::test_x`"
    )
    assert quoted_paths_missing(text) == ["tests/unit/test_config.py"]


@pytest.mark.parametrize("doc", REFERENCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_quoted_repository_paths_exist(doc: Path) -> None:
    """Every path a reference document quotes as code (`tests/...py`, `pricing_ha/...`) exists,
    so a moved test or module is not left behind in the prose."""
    assert quoted_paths_missing(doc.read_text(encoding="utf-8")) == []
