"""The collection's docsite (docs/docsite/rst/, rendered by antsibull-docs) from the stage guides
in docs/*.md, which stay the pages people edit: each guide becomes one RST page.

  python scripts/docsite.py           write docs/docsite/rst/<guide>.rst
  python scripts/docsite.py --check   exit 1 when a page differs from its guide (scripts/test.sh docs)

Covers the Markdown the guides use: headings, paragraphs, bullet and numbered lists, fenced code,
tables, block quotes, inline code, emphasis and links (links to other guides become :ref: links)."""

import os
import re
import sys

import yaml
from markdown_it import MarkdownIt

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
# Guide (docs/<name>.md) -> page title in the docsite's extra-docs.yml; the order is the stage order.
GUIDES = ("example_host", "preview", "boot", "sriov_vfio", "tenants", "rdma_nccl", "gpu_sharing", "fleet", "CONTRACTS")
UNDERLINES = "=-~^"
LANGUAGES = {"sh": "shell", "": "text", "console": "console"}


def label(name):
    return "ansible_collections.gpuvirt.tenancy.docsite.%s" % name.lower()


BEFORE_MARKUP = set(" \n\t-:/'\"<([{")
AFTER_MARKUP = set(" \n\t-.,:;!?/'\")]}>")


def join(pieces):
    """Text and inline markup pieces; RST wants markup set off from words: a\\ ``b``."""
    out = ""
    previous = None
    for kind, text in pieces:
        if out and (kind == "markup" and out[-1] not in BEFORE_MARKUP
                    or previous == "markup" and text and text[0] not in AFTER_MARKUP):
            out += "\\ "
        out += text
        previous = kind
    return out


def inline(children):
    pieces = []
    stack = []  # open strong/em/link: (kind, data, pieces inside)
    for token in children:
        target = stack[-1][2] if stack else pieces
        if token.type == "text":
            target.append(("text", re.sub(r"([\\*`|_])", r"\\\1", token.content)))
        elif token.type == "code_inline":
            target.append(("markup", "``%s``" % token.content) if token.content.strip() else ("text", token.content))
        elif token.type in ("softbreak", "hardbreak"):
            target.append(("text", "\n"))
        elif token.type in ("strong_open", "em_open", "link_open"):
            stack.append((token.type, token.attrs.get("href"), []))
        elif token.type in ("strong_close", "em_close", "link_close"):
            kind, href, inside = stack.pop()
            target = stack[-1][2] if stack else pieces
            if kind == "strong_open":
                target.append(("markup", "**%s**" % "".join(t for _k, t in inside)))
            elif kind == "em_open":
                target.append(("markup", "*%s*" % "".join(t for _k, t in inside)))
            else:
                text = "".join(t for _k, t in inside)
                guide = re.match(r"^(?:\.\./|docs/)?(\w+)\.md$", href)
                if guide and guide.group(1) in GUIDES:
                    target.append(("markup", ":ref:`%s <%s>`" % (text.replace("``", ""), label(guide.group(1)))))
                elif href.startswith(("http://", "https://")):
                    target.append(("markup", "`%s <%s>`__" % (text.replace("``", ""), href)))
                else:
                    target.extend(inside)
        else:
            target.append(("text", token.content))
    return join(pieces)


def table(tokens, start):
    rows, row, cell = [], None, None
    i = start
    while tokens[i].type != "table_close":
        token = tokens[i]
        if token.type == "tr_open":
            row = []
        elif token.type == "tr_close":
            rows.append(row)
        elif token.type == "inline":
            row.append(inline(token.children).replace("\n", " "))
        i += 1
    out = [".. list-table::", "   :header-rows: 1", ""]
    for row in rows:
        for n, cell in enumerate(row):
            out.append(("   * - " if n == 0 else "     - ") + (cell or "\\ "))
    return out + [""], i


def parses_as_yaml(text):
    try:
        yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    return True


def convert(text, name):
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    out = [".. _%s:" % label(name), ""]
    indent = []  # one entry per open list item: its text indent
    prefix = []  # list kinds
    numbers = []
    pending = None
    quote = 0
    i = 0
    while i < len(tokens):
        token = tokens[i]
        pad = " " * (sum(indent) + 4 * quote)
        if token.type == "heading_open":
            title = inline(tokens[i + 1].children)
            level = int(token.tag[1]) - 1
            out += [title, UNDERLINES[level] * len(title), ""]
            i += 3
            continue
        if token.type == "bullet_list_open":
            prefix.append("-")
        elif token.type == "ordered_list_open":
            prefix.append("#.")
        elif token.type in ("bullet_list_close", "ordered_list_close"):
            prefix.pop()
            if out and out[-1] != "":
                out.append("")
        elif token.type == "list_item_open":
            pending = prefix[-1] + " "
        elif token.type == "list_item_close":
            indent.pop()
        elif token.type == "blockquote_open":
            quote += 1
        elif token.type == "blockquote_close":
            quote -= 1
        elif token.type == "inline":
            lines = inline(token.children).split("\n")
            if pending is not None:
                out.append(pad + pending + lines[0])
                indent.append(len(pending))
                pad = " " * (sum(indent) + 4 * quote)
                pending = None
                lines = lines[1:]
            out += [pad + line for line in lines]
        elif token.type == "paragraph_close":
            if not (tokens[i + 1].type == "list_item_close" if i + 1 < len(tokens) else False) or not indent:
                out.append("")
            elif tokens[i + 1].type == "list_item_close":
                pass
        elif token.type in ("fence", "code_block"):
            if pending is not None:
                out.append(pad + pending.rstrip())
                indent.append(len(pending))
                pad = " " * (sum(indent) + 4 * quote)
                pending = None
            language = LANGUAGES.get(token.info.strip(), token.info.strip())
            if language == "yaml" and not parses_as_yaml(token.content):
                language = "text"  # a sketch mixing files: rstcheck would refuse it as YAML
            out += ["", pad + ".. code-block:: %s" % language, ""]
            out += [(pad + "   " + line).rstrip() for line in token.content.rstrip("\n").split("\n")]
            out.append("")
        elif token.type == "table_open":
            rows, i = table(tokens, i)
            out += [(pad + line).rstrip() for line in rows]
        elif token.type == "hr":
            out += ["", "----", ""]
        i += 1
    text = "\n".join(out)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip("\n") + "\n"


def pages():
    for name in GUIDES:
        with open(os.path.join(REPO, "docs", name + ".md"), encoding="utf-8") as handle:
            yield os.path.join(REPO, "docs", "docsite", "rst", name.lower() + ".rst"), convert(handle.read(), name)


def main(argv):
    stale = []
    for path, text in pages():
        current = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if current == text:
            continue
        if "--check" in argv:
            stale.append(os.path.relpath(path, REPO))
        else:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
    if stale:
        print("docsite: out of date with docs/*.md (run python scripts/docsite.py): %s" % ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
