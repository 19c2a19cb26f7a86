"""The documents and the files the Snakemake workflow catalog and citation tools read.

Truths: `.snakemake-workflow-catalog.yml` has the catalog's usage keys with booleans; the
catalog renders `config/README.md`, which has no level-1 heading; `workflow/Snakefile` and
`workflow/rules/*.smk` are real files and none is a symbolic link; `CITATION.cff` has CFF 1.2.0's
required keys and cites the five papers; the README stays a first page (at most 200 lines,
`.ci/run`'s two commands); and every relative link of the documents reaches an existing file and,
into a Markdown file, an existing heading (GitHub's anchors).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]

#: The documents whose links are checked (paths as a reader of the repository sees them).
DOCUMENTS = sorted({"README.md", "config/README.md", "profiles/README.md", "workflow/OUTPUTS.md",
                    *(str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*.md"))})
#: The papers' identifiers, by the project's number (002 has no arXiv version known here).
PAPERS = {"000": "arXiv:2510.05554", "001": "arXiv:2312.10794", "002": "OpenReview:AuAj4vRPkv",
          "003": "arXiv:2411.04990", "004": "arXiv:2305.05465"}
FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^()\s]+)\)|!\[[^\]]*\]\(([^()\s]+)\)")


def prose(text: str) -> list[str]:
    """The lines of a Markdown text outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def anchors(text: str) -> set[str]:
    """GitHub's anchors of a Markdown text's headings: lower case, inline markup and punctuation
    other than '-' and '_' dropped, spaces as '-'; a repeated anchor gets '-1', '-2', ..."""
    seen: dict[str, int] = {}
    out = set()
    for line in prose(text):
        m = re.match(r"#{1,6} +(.*?) *#* *$", line)
        if not m:
            continue
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m[1])  # a link: its text
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(document: str) -> list[str]:
    """Every link target of a document's prose (inline code spans left out)."""
    text = re.sub(r"`[^`]*`", "", "\n".join(prose((REPO / document).read_text())))
    return [a or b for a, b in LINK.findall(text)]


def broken_links(document: str) -> list[str]:
    """The relative links of a document that reach no file, or no heading of a Markdown file.
    A target starting with '/' is relative to the repository root (as GitHub reads it)."""
    broken = []
    for target in links(document):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        path, _, anchor = target.partition("#")
        if not path:
            file = REPO / document
        elif path.startswith("/"):
            file = REPO / path.lstrip("/")
        else:
            file = REPO / Path(document).parent / path
        if not file.exists():
            broken.append(f"{document}: {target} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text()):
            broken.append(f"{document}: {target} (no such heading)")
    return broken


def test_catalog_file_states_usage() -> None:
    usage = yaml.safe_load((REPO / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    flags = usage["mandatory-flags"]
    assert isinstance(flags["desc"], str) and flags["desc"].strip()
    assert isinstance(flags["flags"], str)
    deployment = usage["software-stack-deployment"]
    assert set(deployment) == {"conda", "apptainer", "apptainer+conda"}
    assert all(isinstance(value, bool) for value in deployment.values()), deployment
    assert isinstance(usage["report"], bool)


def test_config_readme_has_no_level_one_heading() -> None:
    text = (REPO / "config/README.md").read_text()
    assert [line for line in prose(text) if re.match(r"# ", line)] == []
    assert "## " in text



def test_config_readme_names_every_key() -> None:
    """Its tables name exactly the global keys of the schema, and per experiment exactly the
    options of the experiment's config.schema.yaml."""
    text = (REPO / "config/README.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    documented = {m[1] for line in rows if (m := re.match(r"\| `(\w+)` \|", line))}
    assert set(schema["properties"]) <= documented, set(schema["properties"]) - documented
    for package in sorted((REPO / "src/attnsweep/experiments").glob("*/config.schema.yaml")):
        name = package.parent.name
        found = [line for line in rows if line.startswith(f"| [`{name}`]")]
        assert len(found) == 1, (f"config/README.md needs one row `| [`{name}`](...) | its options, in "
                                 f"config.schema.yaml's order | ...` in its experiments' table; it has {len(found)}")
        named = re.findall(r"`(\w+)`", found[0].split(" | ")[1])
        assert named == list(yaml.safe_load(package.read_text())["options"]), name

def test_the_catalog_layout_in_real_files() -> None:
    """workflow/Snakefile includes workflow/rules/*.smk, every one a real file; the repository
    holds no symbolic link (a clone without them, Windows' default, would break)."""
    snakefile = REPO / "workflow/Snakefile"
    included = re.findall(r'^include: "(rules/\w+\.smk)"$', snakefile.read_text(), flags=re.M)
    assert sorted(included) == sorted(f"rules/{p.name}" for p in (REPO / "workflow/rules").glob("*.smk"))
    for path in (snakefile, *(REPO / "workflow" / name for name in included)):
        assert path.is_file() and not path.is_symlink(), path
    listed = subprocess.run(["git", "ls-files", "-s"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert [line for line in listed.splitlines() if line.startswith("120000 ")] == []


def test_citation_cff_cites_the_project_and_the_papers() -> None:
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors"):
        assert cff[key], key
    assert {"name": "attnsweep developers"} in cff["authors"]
    references = cff["references"]
    assert len(references) == 5
    for ref in references:
        assert ref["type"] and ref["title"] and ref["authors"], ref.get("title")
    held = {ident["value"] for ref in references for ident in ref.get("identifiers", [])}
    assert set(PAPERS.values()) <= held, set(PAPERS.values()) - held


def test_readme_is_a_first_page() -> None:
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    two = text[text.index("\n## Two commands\n"):]
    two = two[:two.find("\n## ", 1)]
    assert len(re.findall(r"^```bash$", two, re.M)) == 2  # what .ci/run reads and runs
    references = text[text.index("\n## References\n"):]
    for number, ident in PAPERS.items():
        assert f"[{number}]" in references and ident.split(":")[1] in references, number


@pytest.mark.parametrize("document", DOCUMENTS)
def test_relative_links_reach_a_file_and_heading(document: str) -> None:
    assert links(document), f"{document} links nowhere"
    assert broken_links(document) == []


def test_anchors_follow_github() -> None:
    """The slug rule on headings these documents use."""
    text = "# A\n## Local: `profiles/default`\n## Real data (Fig. 8, App. A.5)\n## Sweeps of 10^4 jobs\n## A\n"
    assert anchors(text) == {"a", "local-profilesdefault", "real-data-fig-8-app-a5", "sweeps-of-104-jobs", "a-1"}
