"""The documentation site (docs/, mkdocs.yml; issue 26): it builds in strict mode, every page
is in the nav, and the README's links into docs/ reach a page (and an anchor on it).

``mkdocs build --strict`` with mkdocs.yml's ``validation:`` settings turns each of these into a
failure: a page left out of the nav, a link to a missing page, an absolute link, a link to an
anchor the target page does not have. The unit tests say the same offline, faster, for the nav
and for README.md (which is not one of the site's pages, so mkdocs does not check its links).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from markdown.extensions.toc import slugify

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
MKDOCS_YML = REPO / "mkdocs.yml"
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")


def _nav_pages(nav) -> list[str]:
    """The page files the nav lists, nested sections included."""
    found = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        if isinstance(value, list):
            found += _nav_pages(value)
        elif isinstance(value, str) and not re.match(r"\w+://", value):
            found.append(value)
    return found


def _config() -> dict:
    return yaml.safe_load(MKDOCS_YML.read_text(encoding="utf-8"))


def anchors(markdown: str) -> set[str]:
    """The anchors a page offers: its headings' ids as the toc extension makes them (code spans
    and punctuation dropped), and ids given by attribute lists (``{ #name }``). A heading repeated
    gets ``_1``, ``_2``... as in toc; fenced blocks are skipped."""
    found: set[str] = set()
    in_fence = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        found.update(re.findall(r"\{:?\s*#([\w-]+)\s*\}", line))
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            text = re.sub(r"\{[^}]*\}\s*$", "", heading.group(1))
            slug = slugify(re.sub(r"[`*_]", "", text).replace("\\", ""), "-")
            unique, k = slug, 0
            while unique in found:
                k += 1
                unique = f"{slug}_{k}"
            found.add(unique)
    return found


def test_anchors_of_a_page() -> None:
    page = "# Title\n```sh\n# not a heading\n```\n### `python -m pipelines.x` — the job\n" \
           "**Para.** text\n{ #para }\n## Title\n"
    assert anchors(page) == {"title", "python-m-pipelinesx-the-job", "para", "title_1"}


def test_every_page_is_in_the_nav() -> None:
    config = _config()
    assert config["docs_dir"] == "docs" and config["theme"]["name"] == "material"
    listed = _nav_pages(config["nav"])
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(listed) == pages, (f"not in mkdocs.yml's nav: {sorted(set(pages) - set(listed))}; "
                                     f"in the nav, no such page: {sorted(set(listed) - set(pages))}")
    assert len(listed) == len(set(listed)), "a page is in the nav twice"
    # strict mode fails on what mkdocs only warns about, with these set to warn
    checks = config["validation"]
    assert config.get("strict") is True
    assert checks["nav"]["omitted_files"] == checks["nav"]["not_found"] == "warn"
    assert checks["links"]["anchors"] == checks["links"]["not_found"] == "warn"
    assert checks["links"]["absolute_links"] == checks["links"]["unrecognized_links"] == "warn"


def readme_doc_links(readme: str) -> list[str]:
    """The README's links into docs/ (``docs/usage.md``, ``docs/spark.md#anchor``)."""
    return [target for target in _LINK.findall(readme)
            if target.startswith("docs/") or target.startswith("./docs/")]


def broken_links(readme: str) -> list[str]:
    problems = []
    for target in readme_doc_links(readme):
        path, _, anchor = target.partition("#")
        page = REPO / path
        if not page.is_file():
            problems.append(f"{target}: no such page")
        elif anchor and anchor not in anchors(page.read_text(encoding="utf-8")):
            problems.append(f"{target}: {path} has no anchor #{anchor}")
    return problems


def test_readme_links_into_docs_reach_a_page_and_anchor() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert readme_doc_links(readme), "the README links to no docs/ page"
    assert not broken_links(readme)
    assert broken_links("[a](docs/nope.md) [b](docs/spark.md#nope) [c](docs/usage.md)") == [
        "docs/nope.md: no such page", "docs/spark.md#nope: docs/spark.md has no anchor #nope"]


def test_readme_is_a_quick_start() -> None:
    """Issue 26: at most ~150 lines; the rest is in docs/."""
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 150, f"README.md has {lines} lines; move the detail into docs/"


@pytest.mark.slow
def test_site_builds_strict(tmp_path: Path) -> None:
    """No broken link, anchor or page: ``mkdocs build --strict`` exits 0 with no warning
    (not ``--quiet``: it hides the warnings from the count that strict mode fails on)."""
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "--config-file", str(MKDOCS_YML), "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "WARNING" not in output, output[-4000:]
    built = {p.relative_to(tmp_path / "site").as_posix() for p in (tmp_path / "site").rglob("*.html")}
    for page in _nav_pages(_config()["nav"]):
        name = "index.html" if page == "index.md" else page[:-len(".md")] + "/index.html"
        assert name in built, f"{page}: not built ({name})"


@pytest.mark.slow
def test_strict_build_fails_on_a_broken_anchor(tmp_path: Path) -> None:
    """The strict build is a real check: a copy of the site with a link to a missing anchor,
    a missing page and a page left out of the nav fails, naming each."""
    import shutil

    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(MKDOCS_YML, tmp_path / "mkdocs.yml")
    with open(tmp_path / "docs" / "index.md", "a", encoding="utf-8") as index:
        index.write("\nSee [x](spark.md#no-such-anchor) and [y](no-such-page.md).\n")
    (tmp_path / "docs" / "orphan.md").write_text("# Orphan\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=tmp_path,
                          env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
                          capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output[-4000:]
    for what in ("#no-such-anchor", "no-such-page.md", "orphan.md"):
        assert what in output, output[-4000:]


# --- each page reads on its own (issue 26: the pages were README sections) ----------------------

_DANGLING = re.compile(r'"[^"\n]+"\s+(?:above|below)\b|\bthis section\b')


def page_problems(name: str, markdown: str) -> list[str]:
    """What makes a docs page read as a fragment of a longer README: no title of its own (the
    first heading is not the page's one ``#`` heading), or a cross-reference in quotes to a
    section "above" or "below" (or "this section") where a link would reach it."""
    problems, in_fence, levels = [], False, []
    for line in markdown.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        heading = re.match(r"^(#{1,6})\s", line)
        if heading:
            levels.append(len(heading.group(1)))
        for found in _DANGLING.findall(line):
            problems.append(f"{name}: {found!r}: link to the section instead")
    if not levels or levels[0] != 1 or levels.count(1) != 1:
        problems.insert(0, f"{name}: the page's title must be its first heading and its only "
                           f"`#` heading (headings: {levels or 'none'})")
    return problems


def test_page_problems() -> None:
    assert page_problems("a.md", "# A\n\ntext, see [B](#b).\n\n## B\n") == []
    assert page_problems("a.md", "## A\n\nas \"Shard names\" above says; in this section\n") == [
        "a.md: the page's title must be its first heading and its only `#` heading "
        "(headings: [2])",
        "a.md: '\"Shard names\" above': link to the section instead",
        "a.md: 'this section': link to the section instead"]
    assert page_problems("a.md", "# A\n```sh\n# a comment, \"x\" below\n```\n") == []


def test_every_page_reads_on_its_own() -> None:
    problems = [p for page in sorted(DOCS.rglob("*.md"))
                for p in page_problems(page.relative_to(REPO).as_posix(),
                                       page.read_text(encoding="utf-8"))]
    assert not problems, "\n".join(problems)


# Where the code, configs and tests name a README section ('README "Shard names"', 'README,
# Memory'): since issue 26 most sections live in docs/, so each such name must still be one of
# the README's headings.
_README_REF = re.compile(r"""README(?:\.md)?(?:'s)?[,:]?\s+(?:section\s+)?(?:"([^"\n]+)"|"""
                         r"""([A-Z][\w ]*?|[a-z][\w ]*?section)(?=[),:;.]))""")


def readme_section_refs(text: str) -> list[str]:
    return [quoted or bare for quoted, bare in _README_REF.findall(text)]


def test_readme_section_refs() -> None:
    assert readme_section_refs('x (README: "Shard names") y README, Memory), README "A b"') == [
        "Shard names", "Memory", "A b"]
    assert readme_section_refs("(README, sentence section): README.md, section \"N e\"") == [
        "sentence section", "N e"]
    assert readme_section_refs("the README's test command; README.md there: commands") == []


def test_references_to_readme_sections_exist() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    headings = {m.strip() for m in re.findall(r"^#{1,6}\s+(.*)$", readme, re.M)}
    files = subprocess.run(["git", "ls-files", "*.py", "*.sh", "*.yaml", "*.yml", "*.md"],
                           cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    problems = []
    for name in files:
        if name in ("tests/test_docs_site.py", "README.md") or not (REPO / name).is_file():
            continue
        for section in readme_section_refs((REPO / name).read_text(encoding="utf-8")):
            if section not in headings:
                problems.append(f"{name}: README section {section!r} is not in README.md "
                                f"(it moved to docs/: name the page)")
    assert not problems, "\n".join(problems)
