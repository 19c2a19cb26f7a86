"""The repository stands on its own: what its tracked files cite is in it.

Truths: no tracked text file names a location outside the checkout (the build machine's absolute
paths, the parent folder's paper copies, notes and design documents); every citation
``docs/papers/NNN.md §K`` names an existing page and a ``## K.`` section in it, and ``item N``
an item ``N.`` numbered at the start of a line in that section; every link to a page's anchor
(``docs/papers/NNN.md#anchor``) resolves to a heading of the page, by GitHub's anchor rule.
``/tmp/`` is not flagged: scripts and benchmarks create temporary files there.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from helpers import processes

REPO = Path(__file__).resolve().parents[2]
PAGES = REPO / "docs" / "papers"

#: Locations outside the repository. Written so that no pattern contains what it matches, so this
#: file can be scanned like any other.
OUTSIDE = {
    "an absolute path of the build machine": re.compile(r"(?<![\w.~-])/(?:work|root|home)/"),
    "the parent folder's shared directory": re.compile(r"\.\./+shared\b"),
    "the papers' private copies or notes": re.compile(r"\bshared/+(?:papers|notes)\b"),
    "a design or style document of the parent folder": re.compile(r"\b(?:DESIGN|STYLE)\.md\b"),
}
#: ``docs/papers/NNN.md`` followed by one or more ``§K`` (each with an optional ``item N``),
#: joined by commas or "and"; whitespace may break lines (Markdown link text, wrapped comments).
CITATION = re.compile(r"docs/papers/(?P<page>\d{3})\.md(?P<tail>(?:(?:\s*,|\s+and)?\s+§\d+(?:\s+item\s+\d+)?)*)")
SECTION = re.compile(r"§(?P<section>\d+)(?:\s+item\s+(?P<item>\d+))?")
TEST_REFERENCE = re.compile(r"\btests/(?P<file>(?:\w+/)*test_\w+\.py)(?:::(?P<name>\w+))?")
ANCHOR_LINK = re.compile(r"\]\((?P<path>[^)#\s]*docs/papers/\d{3}\.md)#(?P<anchor>[^)\s]+)\)")


def tracked_text() -> dict[str, str]:
    """Every tracked file that decodes as UTF-8 without NUL bytes, by path relative to the root."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: no tracked files to enumerate")
    listing = processes.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True)
    out = {}
    for name in listing.stdout.decode().split("\0"):
        path = REPO / name
        if not name or not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            out[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return out


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lowercase, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def page_structure(text: str) -> tuple[dict[int, set[int]], set[str]]:
    """Sections ``## K.`` of a page with the item numbers ``N.`` that start a line in each, and
    the anchors of all its headings."""
    sections: dict[int, set[int]] = {}
    anchors: set[str] = set()
    current = None
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if fenced:
            continue
        heading = re.match(r"#{1,6}\s+(.*)", line)
        if heading:
            anchors.add(slug(heading.group(1)))
            numbered = re.match(r"##\s+(\d+)\.\s", line)
            current = int(numbered.group(1)) if numbered else None
            if current is not None:
                sections[current] = set()
            continue
        item = re.match(r"(\d+)\.\s", line)
        if item and current is not None:
            sections[current].add(int(item.group(1)))
    return sections, anchors


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def outside_references(files: dict[str, str]) -> list[str]:
    found = []
    for name, text in files.items():
        for what, pattern in OUTSIDE.items():
            for m in pattern.finditer(text):
                found.append(f"{name}:{line_of(text, m.start())}: {what}: {m.group(0)!r}")
    return found


def bad_citations(files: dict[str, str]) -> list[str]:
    pages: dict[str, tuple[dict[int, set[int]], set[str]]] = {}
    for path in PAGES.glob("*.md"):
        pages[path.stem] = page_structure(path.read_text())
    bad = []
    for name, text in files.items():
        for m in CITATION.finditer(text):
            where = f"{name}:{line_of(text, m.start())}: {' '.join(m.group(0).split())!r}"
            if m.group("page") not in pages:
                bad.append(f"{where}: no page docs/papers/{m.group('page')}.md")
                continue
            sections = pages[m.group("page")][0]
            for cited in SECTION.finditer(m.group("tail")):
                k = int(cited.group("section"))
                if k not in sections:
                    bad.append(f"{where}: the page has no section '## {k}.'")
                elif cited.group("item") and int(cited.group("item")) not in sections[k]:
                    bad.append(f"{where}: section {k} has no item {cited.group('item')}")
        for m in ANCHOR_LINK.finditer(text):
            target = (REPO / name).parent / m.group("path")
            where = f"{name}:{line_of(text, m.start())}: {m.group(0)!r}"
            if not target.resolve().is_file():
                bad.append(f"{where}: the link's page does not exist from {name}")
            elif target.resolve().parent == PAGES.resolve() and m.group("anchor") not in pages[target.stem][1]:
                bad.append(f"{where}: no heading with anchor #{m.group('anchor')}")
    return bad


def bad_test_references(files: dict[str, str]) -> list[str]:
    """``tests/FILE.py`` and ``tests/FILE.py::NAME`` named in ``files`` whose file, or whose
    function or class ``NAME`` in it, does not exist (a test renamed without its citations)."""
    bad = []
    for name, text in files.items():
        for m in TEST_REFERENCE.finditer(text):
            where = f"{name}:{line_of(text, m.start())}"
            path = REPO / "tests" / m.group("file")
            if not path.is_file():
                bad.append(f"{where}: no tests/{m.group('file')}")
            elif m.group("name") and not re.search(rf"^(?:def|class) {m.group('name')}\b", path.read_text(), re.M):
                bad.append(f"{where}: tests/{m.group('file')} has no {m.group('name')}")
    return bad


def test_every_test_a_file_names_exists() -> None:
    files = tracked_text()
    assert any(TEST_REFERENCE.search(text) for text in files.values())  # the check has something to check
    bad = bad_test_references(files)
    assert not bad, "references to tests that do not exist:\n" + "\n".join(bad)
    planted = {"x.md": "tests/" + "test_nothing_here.py and tests/" + "package/test_repository.py::no_such_test"}
    assert len(bad_test_references(planted)) == 2


def test_no_tracked_file_names_a_path_outside_the_repository() -> None:
    found = outside_references(tracked_text())
    assert not found, "tracked files point outside the repository:\n" + "\n".join(found)


def test_every_paper_citation_names_a_page_a_section_and_an_item_that_exist() -> None:
    files = tracked_text()
    assert any(CITATION.search(text) for text in files.values())  # the check has something to check
    bad = bad_citations(files)
    assert not bad, "citations of docs/papers that do not resolve:\n" + "\n".join(bad)


def test_every_paper_has_its_page_with_numbered_sections() -> None:
    for number, last in {"000": 6, "001": 6, "002": 8, "003": 6, "004": 7}.items():
        sections, _ = page_structure((PAGES / f"{number}.md").read_text())
        assert sorted(sections) == list(range(1, last + 1)), number


def test_the_checks_catch_what_they_are_for() -> None:
    """Each pattern and each kind of bad citation, planted in made-up files (the strings are split
    so that this file itself holds none of them)."""
    planted = {
        "a.py": "# see /" + "work/data/x.txt",
        "b.md": "[x](../" + "shared/" + "papers/000.md)",  # two: the shared directory and the papers
        "c.yaml": "# shared/" + "notes/000.md",
        "d.md": "as DESIGN" + ".md says",
    }
    assert len(outside_references(planted)) == 5
    assert not outside_references({"e.sh": "mktemp -d /tmp/x; cd /tmp/x", "f.py": "https://example.org/home/x"})
    p = "docs/" + "papers/"
    wrong = {
        "g.py": f"# {p}009.md §1",
        "h.py": f"# {p}000.md §9",
        "i.py": f"# {p}001.md §5 item 99 and §7",  # two
        "j.md": f"[{p}002.md §6]({p}002.md#6-closed-form)",
        "k.md": f"[{p}002.md §6](../{p}002.md#6-closed-forms)",  # no such page from the root
    }
    assert len(bad_citations(wrong)) == 6
    right = {"l.py": f"# {p}001.md §5 item 4 and §6; {p}000.md §1, §5",
             "m.md": f"[{p}003.md §5 item\n1]({p}003.md#5-errata-and-ambiguities)",
             "workflow/n.md": f"[{p}002.md §6](../{p}002.md#6-closed-forms)"}
    assert not bad_citations(right)
