"""Model output (Markdown) to the HTML subset QTextDocument understands.

The text comes from a model and is untrusted: raw HTML is escaped (markdown-it with
``html=False`` shows ``<script>`` as text), links are limited to what markdown-it's
link validation allows (no ``javascript:``), and Markdown images are shown as links
instead of being loaded, so a reply can neither fetch a URL nor read a local file just by
being displayed.

Code blocks are highlighted with Pygments using inline styles (QTextDocument has no class
selectors worth relying on) and get a header with the language and a ``copy:<index>``
link that the view turns into "copy this block to the clipboard".
"""

from __future__ import annotations

import contextlib
import html
import io
import re
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.styles import get_style_by_name
from pygments.util import ClassNotFound

COPY_SCHEME = "copy"
"""Anchors ``copy:<n>`` copy the n-th code block of the message they are in."""

# Highlighting a huge block costs more than it helps (and the block is still shown, plain).
MAX_HIGHLIGHT_CHARS = 60_000
# Lexers built while the window is idle after it starts: a lexer's first use compiles its
# rules (~0.1 s for Python), which would otherwise land in the middle of the first reply
# with code, on the thread that competes with decode.
WARM_LANGUAGES = ("python", "bash", "javascript", "json")
HIGHLIGHT_CACHE_SIZE = 256


@dataclass(frozen=True)
class MarkdownStyle:
    """Colours the HTML needs (hex strings). Hashable: part of the render cache key, so
    a palette change (light <-> dark) renders again instead of reusing stale colours."""

    dark: bool = False
    code_background: str = "#f6f8fa"
    code_header: str = "#eaeef2"
    code_border: str = "#d0d7de"
    inline_code_background: str = "#eff1f3"
    muted: str = "#6e7781"
    link: str = "#0969da"
    monospace_family: str = "monospace"

    @property
    def pygments_style(self) -> str:
        # Both styles were drawn for backgrounds close to the ones above.
        return "github-dark" if self.dark else "default"


LexedToken = tuple[int, Any, str]  # (offset, Pygments token type, text)


@dataclass(frozen=True)
class RenderedMarkdown:
    html: str
    code_blocks: tuple[str, ...]  # raw code, indexed by the n in ``copy:<n>``


def code_block_index(href: str) -> int | None:
    """The code block a ``copy:<n>`` anchor points at, or None for any other link."""
    scheme, _, rest = href.partition(":")
    if scheme != COPY_SCHEME or not rest.isdigit():
        return None
    return int(rest)


class MarkdownRenderer:
    """Renders Markdown to HTML for one ``MarkdownStyle``. Stateless between calls apart
    from parser setup, so one instance serves every message."""

    def __init__(self, style: MarkdownStyle | None = None) -> None:
        self.style = style or MarkdownStyle()
        self._formatter = HtmlFormatter(noclasses=True, nowrap=True, style=self.style.pygments_style)
        pyg_style = get_style_by_name(self.style.pygments_style)
        self._code_fg = _style_foreground(pyg_style)
        self._highlighted: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._lexers: dict[str, Lexer] = {}
        self.lexed_chars = 0  # characters Pygments has lexed: what highlighting has cost
        # "breaks": models put single newlines where they mean one (poems, addresses,
        # step lists without blank lines); CommonMark would join those lines.
        self._md = MarkdownIt("commonmark", {"html": False, "breaks": True})
        self._md.enable(["table", "strikethrough"])
        rules: dict[str, Any] = {
            "fence": self._render_fence,
            "code_block": self._render_fence,
            "code_inline": self._render_code_inline,
            "image": self._render_image,
            "table_open": self._render_table_open,
            "th_open": self._render_cell_open,
            "td_open": self._render_cell_open,
        }
        for name, rule in rules.items():
            self._md.add_render_rule(name, _unbound(rule))

    def render(self, text: str, code_index_start: int = 0) -> RenderedMarkdown:
        """HTML for ``text``; its code blocks get ``copy:<n>`` links numbered from
        ``code_index_start`` (a reply rendered in pieces numbers them across pieces)."""
        env: dict[str, Any] = {"code_blocks": [], "code_index_start": code_index_start}
        # A trailing newline after the last tag becomes a trailing space in QTextDocument.
        body = self._md.render(text, env).rstrip()
        return RenderedMarkdown(html=body, code_blocks=tuple(env["code_blocks"]))

    # -- render rules, called as (tokens, idx, options, env) -------------------------

    def _render_fence(self, tokens: Sequence[Token], idx: int, _options: Any, env: dict[str, Any]) -> str:
        token = tokens[idx]
        code = token.content
        if code.endswith("\n"):
            code = code[:-1]
        language = fence_language(token.info)
        index = env["code_index_start"] + len(env["code_blocks"])
        env["code_blocks"].append(code)
        return self.code_block(self._highlight(code, language), language, index) + "\n"

    def code_block(self, body: str, language: str, index: int, first: bool = True, last: bool = True) -> str:
        """A code block around ``body`` (highlighted HTML): a header with the language and
        a ``copy:<index>`` link, the code in a box. A block streamed in pieces is drawn as
        its ``first`` piece (with the header), middle ones, and the ``last`` (closing the
        box): stacked, they look as the whole block does, to the pixel."""
        s = self.style
        # HTML drops a newline just inside <pre> at either end: an empty first or last line
        # (a piece may well begin or end with one) keeps its height with another.
        if body.startswith("\n"):
            body = "\n" + body
        if body.endswith("\n"):
            body += "\n"
        border = f"1px solid {s.code_border}"
        header = ""
        if first:
            label = html.escape(language) if language else "code"
            header = (
                f'<tr><td bgcolor="{s.code_header}" style="border: {border}; padding: 6px;">'
                f'<table width="100%" cellspacing="0" cellpadding="0" border="0"><tr>'
                f'<td><span style="color: {s.muted}; font-size: small;">{label}</span></td>'
                f'<td align="right"><a href="{COPY_SCHEME}:{index}" style="color: {s.link}; '
                f'text-decoration: none; font-size: small;">Copy</a></td></tr></table></td></tr>'
            )
        # A one-column table is the only box with padding and a background that
        # QTextDocument draws around a block. Each cell draws its own borders (collapsed
        # ones are shared half and half, so a piece's edge would be a pixel off), and the
        # box is open where the next piece goes on.
        sides = f"border-left: {border}; border-right: {border};"
        if last:
            sides += f" border-bottom: {border};"
        padding = (
            f"padding-left: 6px; padding-right: 6px; padding-top: {6 if first else 0}px; "
            f"padding-bottom: {6 if last else 0}px;"
        )
        return (
            f'<table width="100%" cellspacing="0" cellpadding="0" border="0" '
            f'style="margin-top: {4 if first else 0}px; margin-bottom: {10 if last else 0}px;">'
            f'{header}<tr><td bgcolor="{s.code_background}" style="{sides} {padding}">'
            f'<pre style="margin: 0; white-space: pre-wrap; font-family: {s.monospace_family}; '
            f'color: {self._code_fg};">{body}</pre></td></tr></table>'
        )

    # -- highlighting ------------------------------------------------------------------

    def lex(self, lines: str, language: str) -> list[LexedToken]:
        """Pygments tokens of ``lines`` (whole lines, each ending in a newline), lexed from
        the lexer's initial state. Unlike ``pygments.highlight`` nothing is stripped (blank
        lines at either end), so any run of a block's lines lexes as it does in the block."""
        self.lexed_chars += len(lines)
        return list(self._lexer(language).get_tokens_unprocessed(lines))

    def tokens_html(self, tokens: Iterable[LexedToken]) -> str:
        """The HTML of lexed lines, for inside a code block's ``<pre>``. Pygments closes its
        spans at each line's end, so lines highlighted apart read as highlighted together."""
        out = io.StringIO()
        self._formatter.format(((kind, value) for _pos, kind, value in tokens), out)
        text = out.getvalue()
        # Pygments ends with a newline that would add an empty line inside <pre>.
        return text[:-1] if text.endswith("\n") else text

    def _highlight(self, code: str, language: str) -> str:
        if len(code) > MAX_HIGHLIGHT_CHARS:
            return html.escape(code)
        # Pygments is most of the cost of a render; while a reply streams its finished code
        # blocks come back unchanged on every update, so they are highlighted only once.
        key = (language, code)
        cached = self._highlighted.get(key)
        if cached is not None:
            self._highlighted.move_to_end(key)
            return cached
        out = self.tokens_html(self.lex(code_lines(code), language))
        self._highlighted[key] = out
        while len(self._highlighted) > HIGHLIGHT_CACHE_SIZE:
            self._highlighted.popitem(last=False)
        return out

    def _lexer(self, language: str) -> Lexer:
        lexer = self._lexers.get(language)
        if lexer is None:
            try:
                lexer = get_lexer_by_name(language) if language else TextLexer()
            except ClassNotFound:
                lexer = TextLexer()
            self._lexers[language] = lexer
        return lexer

    def _render_code_inline(self, tokens: Sequence[Token], idx: int, _options: Any, _env: Any) -> str:
        s = self.style
        return (
            f'<code style="background-color: {s.inline_code_background}; '
            f'font-family: {s.monospace_family};">&nbsp;{html.escape(tokens[idx].content)}&nbsp;</code>'
        )

    def _render_image(self, tokens: Sequence[Token], idx: int, _options: Any, _env: Any) -> str:
        token = tokens[idx]
        src = str(token.attrGet("src") or "")
        alt = html.escape(token.content or "image")
        # Never an <img>: QTextDocument would load a local path (or ask for the URL).
        return f'<a href="{html.escape(src, quote=True)}">[image: {alt}]</a>'

    def _render_table_open(self, *_args: Any) -> str:
        return (
            f'<table cellspacing="0" cellpadding="5" border="1" '
            f'style="border-collapse: collapse; border-color: {self.style.code_border}; '
            f'border-style: solid; margin-bottom: 10px;">\n'
        )

    def _render_cell_open(self, tokens: Sequence[Token], idx: int, _options: Any, _env: Any) -> str:
        token = tokens[idx]
        tag = token.tag
        align = ""
        style = str(token.attrGet("style") or "")
        if "text-align:" in style:
            align = f' align="{style.split("text-align:", 1)[1].strip().rstrip(";")}"'
        return f"<{tag}{align}>"


_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_LIST_ITEM = re.compile(r"(?:[-+*]|[0-9]{1,9}[.)])(?:[ \t]|$)")


@dataclass(frozen=True)
class OpenFence:
    """A fenced code block that has begun and not ended, its opening line unindented."""

    start: int  # where its opening line begins
    code_start: int  # where its first line of code begins
    marker: str  # the fence: ``` or ~~~ (or longer)
    language: str


def fence_language(info: str) -> str:
    """The language a fence's info string names ("" for none)."""
    words = info.split(maxsplit=1)
    return words[0] if words else ""


def code_lines(code: str) -> str:
    """A code block's code as the whole lines a lexer takes, each ending in a newline
    (a block's code ending in a newline ends with an empty line)."""
    return code + "\n"


def closes_fence(line: str, marker: str) -> bool:
    """Whether ``line`` ends a code block opened with ``marker`` (CommonMark: the same
    character, at least as many, indented at most three spaces, nothing after but spaces)."""
    stripped = line.strip()
    return (
        len(line) - len(line.lstrip(" ")) <= 3
        and stripped.startswith(marker)
        and not stripped.strip(marker[0])
    )


def scan_blocks(text: str, start: int = 0) -> tuple[int, OpenFence | None]:
    """Where the finished top-level blocks of ``text`` end, scanning from ``start`` (which
    must itself be such a boundary): just after the last blank line that is outside a code
    fence and followed by an unindented line. Blocks before it no longer change as more
    text streams in, so they can be rendered once; ``start`` when there is none. And the
    code block still open at the end of ``text``, if its fence is unindented (it ends the
    blocks before it, whatever they are) and its opening line is whole.

    Unindented, because an indented line after a blank one may continue a list item; and
    not another item of a list, which would make the list above loose.
    """
    end = start
    fence = ""
    opened: OpenFence | None = None
    blank = False
    in_list = False  # the last unindented block was a list
    pos = start
    while pos < len(text):
        newline = text.find("\n", pos)
        line = text[pos:] if newline < 0 else text[pos:newline]
        if fence:
            if closes_fence(line, fence):
                fence = ""
                opened = None
        else:
            marker = _LIST_ITEM.match(line) is not None
            # After a blank line, an item of the list above goes on with it (which becomes a
            # loose list): not a boundary.
            if blank and line and not line[0].isspace() and not (in_list and marker):
                end = pos
            if line and not line[0].isspace() and (marker or blank):
                in_list = marker
            match = _FENCE.match(line)
            info = line[match.end() :] if match else ""
            # A backtick fence's info string has no backtick: "```x```" is inline code.
            if match and not (match.group(1)[0] == "`" and "`" in info):
                fence = match.group(1)
                if match.start(1) == 0 and newline >= 0:
                    opened = OpenFence(pos, newline + 1, fence, fence_language(info))
        blank = not line.strip() and not fence
        if newline < 0:
            break
        pos = newline + 1
    return end, opened


def stable_prefix_end(text: str, start: int = 0) -> int:
    """The end of the finished top-level blocks of ``text`` (see ``scan_blocks``)."""
    return scan_blocks(text, start)[0]


def _unbound(method: Any) -> Any:
    """markdown-it binds each rule to its renderer with ``__get__`` (which rebinds even a
    bound method); a plain function taking that renderer and ignoring it keeps ours."""

    def rule(_renderer: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        return str(method(tokens, idx, options, env))

    return rule


def _style_foreground(style: Any) -> str:
    """The default text colour of a Pygments style (its Token style), as ``#rrggbb``."""
    from pygments.token import Token as PygToken

    color = style.style_for_token(PygToken.Text).get("color") or ""
    if color:
        return f"#{color}"
    return "#e6edf3" if _is_dark_hex(style.background_color) else "#1f2328"


def _is_dark_hex(color: str) -> bool:
    value = color.lstrip("#")
    if len(value) == 3:
        value = "".join(c * 2 for c in value)
    try:
        r, g, b = (int(value[i : i + 2], 16) for i in (0, 2, 4))
    except ValueError:
        return False
    return (0.299 * r + 0.587 * g + 0.114 * b) < 128


def default_stylesheet(style: MarkdownStyle) -> str:
    """CSS for QTextDocument.setDefaultStyleSheet: tighter margins and smaller headings than
    Qt's defaults, which are sized for documents, not chat replies."""
    return (
        "p { margin-top: 0px; margin-bottom: 8px; }"
        "ul, ol { margin-top: 0px; margin-bottom: 8px; }"
        "li { margin-bottom: 2px; }"
        "h1 { font-size: x-large; margin-top: 6px; margin-bottom: 8px; }"
        "h2 { font-size: large; margin-top: 6px; margin-bottom: 6px; }"
        "h3, h4, h5, h6 { font-size: medium; margin-top: 4px; margin-bottom: 4px; }"
        "blockquote { margin-left: 12px; margin-top: 0px; margin-bottom: 8px; "
        f"color: {style.muted}; }}"
        f"a {{ color: {style.link}; }}"
        f"pre, code {{ font-family: {style.monospace_family}; }}"
    )


def warm_lexer(language: str) -> None:
    """Compile ``language``'s lexer rules now (Pygments keeps them on the class, process-wide)."""
    with contextlib.suppress(ClassNotFound):
        get_lexer_by_name(language)
