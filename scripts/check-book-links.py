#!/usr/bin/env python3
"""Checks the links of the built book (mdbook's HTML) and of README.md.

Every href and src that points inside the book must name a file that
exists, and every #fragment must be an id in the page it names (or in the
page itself). Links to other sites are not followed. README.md's relative
links must name files of the repository (the README links into the book's
Markdown). Prints each broken link and exits 1 if there is one.

Usage: scripts/check-book-links.py BOOK_HTML_DIR [README.md]
"""
import html.parser
import pathlib
import re
import sys
import urllib.parse


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.links = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("id", "name") and value:
                self.ids.add(value)
            if name in ("href", "src") and value is not None:
                self.links.append(value)


def external(link):
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", link)) or link.startswith("//")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    root = pathlib.Path(sys.argv[1]).resolve()
    pages = {}
    for path in root.rglob("*.html"):
        page = Page()
        page.feed(path.read_text(encoding="utf-8"))
        pages[path] = page
    if not pages:
        sys.exit(f"no HTML under {root}: build the book first")
    broken = []
    checked = 0
    for path, page in sorted(pages.items()):
        # print.html repeats every chapter with its links rewritten; mdbook's
        # 404 page links from wherever it is served. Both are mdbook's own.
        if path.name in ("print.html", "404.html"):
            continue
        for link in page.links:
            if external(link):
                continue
            checked += 1
            url = urllib.parse.urlsplit(link)
            target = path
            if url.path:
                target = (path.parent / urllib.parse.unquote(url.path)).resolve()
                if target.is_dir():
                    target = target / "index.html"
                if not target.exists():
                    broken.append(f"{path.relative_to(root)}: {link}: no such file")
                    continue
            if url.fragment:
                ids = pages.get(target)
                frag = urllib.parse.unquote(url.fragment)
                if ids is None:
                    broken.append(f"{path.relative_to(root)}: {link}: a fragment into a file that is not a page")
                elif frag not in ids.ids:
                    broken.append(f"{path.relative_to(root)}: {link}: no id `{frag}` in {target.name}")
    if len(sys.argv) == 3:
        readme = pathlib.Path(sys.argv[2]).resolve()
        text = re.sub(r"```.*?```", "", readme.read_text(encoding="utf-8"), flags=re.S)
        for link in re.findall(r"\]\(([^)\s]+)\)", text):
            if external(link) or link.startswith("#"):
                continue
            checked += 1
            target = readme.parent / urllib.parse.unquote(link.split("#")[0])
            if not target.exists():
                broken.append(f"{readme.name}: {link}: no such file")
    for b in broken:
        print(f"broken link: {b}")
    print(f"links checked: {checked} in {len(pages)} pages, broken: {len(broken)}")
    sys.exit(1 if broken else 0)


main()
