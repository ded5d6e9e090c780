"""The documentation a newcomer reads: README.md short, every relative link of README.md and
docs/*.md resolving to a file (and a heading, for a #fragment), every docs/ page linked from
README, and every `prism` subcommand in README's commands table.

Usage: /usr/bin/python3 tests/cli/check_docs.py SOURCE_DIR PRISM_BINARY
"""
import pathlib
import re
import subprocess
import sys

MAX_README_LINES = 300


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(path):
    out, fence = set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            out.add(slug(line.lstrip("#")))
    return out


def links(path):
    text, fence_free = path.read_text(), []
    fence = False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence:
            fence_free.append(line)
    return re.findall(r"\]\(([^)\s]+)\)", "\n".join(fence_free))


def main():
    root, prism = pathlib.Path(sys.argv[1]), sys.argv[2]
    readme = root / "README.md"
    problems = []
    lines = len(readme.read_text().splitlines())
    if lines > MAX_README_LINES:
        problems.append(f"README.md has {lines} lines (at most {MAX_README_LINES}: details go to docs/)")
    pages = sorted((root / "docs").glob("*.md"))
    for page in [readme] + pages:
        for target in links(page):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            file_part, _, fragment = target.partition("#")
            dest = (page.parent / file_part).resolve() if file_part else page
            if not dest.exists():
                problems.append(f"{page.relative_to(root)}: link to missing {target}")
            elif fragment and dest.suffix == ".md" and fragment not in headings(dest):
                problems.append(f"{page.relative_to(root)}: no heading #{fragment} in {file_part or page.name}")
    linked = {pathlib.Path(t.partition("#")[0]).as_posix() for t in links(readme)}
    for page in pages:
        if f"docs/{page.name}" not in linked:
            problems.append(f"README.md does not link docs/{page.name}")
    text = readme.read_text()
    for command in ("make demo", "make test"):
        if command not in text:
            problems.append(f"README.md does not show `{command}`")
    helptext = subprocess.run([prism, "--help"], capture_output=True, text=True, check=True).stdout
    section = helptext.split("Subcommands:", 1)[1]
    subcommands = re.findall(r"^\s{2}([a-z][a-z-]*)\s", section, flags=re.M)
    if len(subcommands) < 5:
        problems.append(f"could not read the subcommands from `prism --help`: {subcommands}")
    for sub in subcommands:
        if f"`prism {sub}" not in text:
            problems.append(f"README.md's commands do not show `prism {sub}`")
    for p in problems:
        print("docs:", p)
    print(f"checked README.md ({lines} lines) and {len(pages)} docs pages, {len(subcommands)} subcommands")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
