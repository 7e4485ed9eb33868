"""The documentation site's strict build (make check) and the README's links into it.

mkdocs --strict turns every warning into a failure; with `validation.anchors: warn` in mkdocs.yml
that covers a link to a heading that does not exist, which a plain strict build lets through.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# A relative Markdown link: [text](target), target without a scheme.
LINK = re.compile(r"\]\((?![a-z]+:)([^)\s]+)\)")


def build(project: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=project,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def copy_of_the_docs(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", project / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", project / "docs")
    return project


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The repository's docs, built strictly."""
    site = tmp_path_factory.mktemp("site")
    result = build(ROOT, site)
    assert result.returncode == 0, result.stderr
    return site


def test_the_docs_build_strictly(site):
    assert (site / "index.html").exists()
    assert (site / "reference/configuration/index.html").exists()


def test_a_broken_anchor_fails_the_strict_build(tmp_path):
    project = copy_of_the_docs(tmp_path)
    page = project / "docs/getting-started.md"
    page.write_text(page.read_text() + "\nSee [the cluster page](cluster.md#no-such-section).\n")
    result = build(project, tmp_path / "site")
    assert result.returncode != 0
    assert "does not contain an anchor '#no-such-section'" in result.stderr


def test_a_link_to_a_missing_page_fails_the_strict_build(tmp_path):
    project = copy_of_the_docs(tmp_path)
    page = project / "docs/index.md"
    page.write_text(page.read_text() + "\nSee [tuning](tuning.md).\n")
    result = build(project, tmp_path / "site")
    assert result.returncode != 0
    assert "tuning.md" in result.stderr


def readme_links() -> list[str]:
    text = re.sub(r"```.*?```", "", (ROOT / "README.md").read_text(), flags=re.DOTALL)
    return LINK.findall(text)


def test_every_link_of_the_readme_resolves(site):
    links = readme_links()
    assert links, "the README links into the docs"
    for link in links:
        target, _, anchor = link.partition("#")
        assert (ROOT / target).exists(), link
        if anchor:
            assert target.startswith("docs/") and target.endswith(".md"), link
            page = site / target.removeprefix("docs/").removesuffix(".md")
            html = (page / "index.html" if page.name != "index" else page.with_suffix(".html")).read_text()
            assert f'id="{anchor}"' in html, link
