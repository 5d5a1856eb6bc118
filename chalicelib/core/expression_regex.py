"""The regular expressions of JSONata expressions, run on RE2 (google-re2): core/expressions.py
hands ``compile`` to the library as its regex engine, and its $match, $contains, $replace and
$split (and a regex called as a function) work on the ``Pattern`` made here
(docs/api/limits.md, "Expressions").

Why: jsonata-python compiles a regex literal with Python's ``re``, a backtracking engine that
holds the interpreter lock for the whole match. ``$match(text, /(a+)+$/)`` over 10,000 ``a`` and
a ``b`` would run for longer than the universe and stop every other request of the process, and
no check between two nodes of the expression can interrupt it. RE2 runs in time linear in the
text whatever the pattern, releases the interpreter lock while it matches, and refuses the
syntax that needs backtracking (backreferences such as ``\\1``, lookarounds ``(?=``, ``(?!``,
``(?<=``, ``(?<!``). No maintained JSONata implementation for Python uses RE2: the library's
regex-engine hook (``jsonata.regex_engine``) is the seam, and this module is the engine.

What holds of JSONata's regexes (the JavaScript syntax JSONata documents):

* flags ``i`` (case-insensitive) and ``m`` (``^``/``$`` at line breaks); without ``m``, ``$``
  matches only at the end of the text, as in JavaScript (Python's ``re`` also matched before a
  final newline);
* ``\\uXXXX`` escapes are rewritten to RE2's ``\\x{XXXX}``; named groups ``(?<name>...)`` work;
* a refused pattern raises ``RegexRefused`` with RE2's reason; callers make it a 400 at write
  or an evaluation error at run.

Every match found costs a time check (``check``): one search is linear, but a pattern that
matches often can make all the matches of a long text quadratic (``/a.*b|a/`` over ``aaaa...``),
and that stops at the expression's time box instead.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

REGEX_MAX_MEMORY = 1 << 20   # bytes RE2 may take for one compiled pattern (as extraction's regex rules)
MAX_PATTERN_LENGTH = 1_000   # characters of one regex literal


_HEX = frozenset('0123456789abcdefABCDEF')


class RegexRefused(ValueError):
    """RE2 does not run this pattern; the message says why and is safe to show its author."""


def _translate(pattern: str) -> str:
    """JavaScript's ``\\uXXXX`` as RE2's ``\\x{XXXX}``; everything else as written."""
    if '\\u' not in pattern:
        return pattern
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == '\\' and i + 1 < n:
            hex_digits = pattern[i + 2:i + 6]
            if pattern[i + 1] == 'u' and len(hex_digits) == 4 and all(h in _HEX for h in hex_digits):
                out.append('\\x{' + hex_digits + '}')
                i += 6
                continue
            out.append(pattern[i:i + 2])
            i += 2
            continue
        out.append(c)
        i += 1
    return ''.join(out)


def compile_pattern(pattern: str, *, case_insensitive: bool = False, multiline: bool = False,
                    check: Callable[[], None] | None = None) -> Pattern:
    """``pattern`` compiled by RE2, or ``RegexRefused``."""
    import re2  # noqa: PLC0415 - lazy: paid by the first expression with a regex
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise RegexRefused(f'the regular expression /{pattern[:40]}.../ is longer than {MAX_PATTERN_LENGTH} characters')
    options = re2.Options()
    options.max_mem = REGEX_MAX_MEMORY
    options.log_errors = False
    options.case_sensitive = not case_insensitive
    source = _translate(pattern)
    if multiline:
        source = '(?m)' + source
    try:
        compiled = re2.compile(source, options)
    except re2.error as exc:
        reason = exc.args[0].decode(errors='replace') if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise RegexRefused(f'the regular expression /{pattern}/ is not one the linear-time engine (RE2) runs: '
                           f'{reason} (no backreferences or lookarounds)') from None
    return Pattern(pattern, compiled, check)


class Pattern:
    """A compiled regex with the interface the library's builtins use (``re.Pattern``'s
    ``search``, ``finditer``, ``sub``, ``split``); matches are RE2's match objects
    (``group``, ``groups``, ``start``, ``end``, ``span``, as ``re.Match``)."""

    __slots__ = ('pattern', '_re2', '_check')

    def __init__(self, pattern: str, compiled: Any, check: Callable[[], None] | None) -> None:
        self.pattern = pattern
        self._re2 = compiled
        self._check = check

    @property
    def groups(self) -> int:
        return self._re2.groups

    def __repr__(self) -> str:
        return f'/{self.pattern}/'

    def finditer(self, string: str) -> Iterator[Any]:
        check = self._check
        for m in self._re2.finditer(string):
            if check is not None:
                check()
            yield m

    def search(self, string: str) -> Any:
        return next(self.finditer(string), None)

    def sub(self, repl: Any, string: str, count: int = 0) -> str:
        """Every match (at most ``count``, 0 for all) replaced: ``repl`` is a callable of the
        match, or a text taken as written (the library's JSONata replacement is replace())."""
        pieces: list[str] = []
        end = 0
        for k, m in enumerate(self.finditer(string)):
            if count and k >= count:
                break
            pieces.append(string[end:m.start()])
            pieces.append(repl(m) if callable(repl) else repl)
            end = m.end()
        pieces.append(string[end:])
        return ''.join(pieces)

    def split(self, string: str, maxsplit: int = 0) -> list[str]:
        """JSONata's $split: the pieces between matches, capture groups not included."""
        pieces: list[str] = []
        end = 0
        for m in self.finditer(string):
            if maxsplit and len(pieces) >= maxsplit:
                break
            pieces.append(string[end:m.start()])
            end = m.end()
        pieces.append(string[end:])
        return pieces


def match_object(m: Any) -> dict[str, Any]:
    """A match as JSONata's $match answers it, and as $replace passes it to a function."""
    return {'match': m.group(), 'index': m.start(), 'groups': list(m.groups())}


def expand(replacement: str, m: Any) -> str:
    """JSONata's replacement text for one match: ``$0`` the match, ``$n`` group n (the longest
    number of digits that names a group; a group that did not take part is empty), ``$$`` a
    ``$``, a ``$`` before anything else kept as written (jsonata-js ``replace``)."""
    if '$' not in replacement:
        return replacement
    groups = m.groups()
    out: list[str] = []
    position = 0
    n = len(replacement)
    while position < n:
        index = replacement.find('$', position)
        if index < 0:
            break
        out.append(replacement[position:index])
        position = index + 1
        following = replacement[position:position + 1]
        if following == '$':
            out.append('$')
            position += 1
        elif following == '0':
            out.append(m.group())
            position += 1
        else:
            max_digits = len(str(len(groups))) if groups else 1
            digits = replacement[position:position + max_digits]
            if max_digits > 1 and digits.isdigit() and int(digits) > len(groups):
                digits = digits[:-1]
            if digits.isdigit():
                number = int(digits)
                if 0 < number <= len(groups) and groups[number - 1] is not None:
                    out.append(groups[number - 1])
                position += len(str(number))
            else:
                out.append('$')
    out.append(replacement[position:])
    return ''.join(out)


class DateTimeRe:
    """What jsonata's datetime module uses of ``re`` (``compile``, ``split``, ``sub``,
    ``IGNORECASE``), on RE2: ``$toMillis(text, picture)`` builds a regex from the picture, its
    literal parts unescaped, so a picture is a pattern too."""

    def __init__(self, check: Callable[[], None] | None) -> None:
        import re  # noqa: PLC0415
        self.IGNORECASE = re.IGNORECASE
        self._check = check

    def compile(self, pattern: str, flags: int = 0) -> Pattern:
        try:
            return compile_pattern(pattern, case_insensitive=bool(flags & self.IGNORECASE), check=self._check)
        except RegexRefused:
            raise ValueError('the picture is not one the linear-time regex engine (RE2) reads') from None

    def split(self, pattern: str, string: str) -> list[str]:
        return self.compile(pattern).split(string)

    def sub(self, pattern: Any, repl: str, string: str) -> str:
        compiled = pattern if isinstance(pattern, Pattern) else self.compile(pattern)
        if repl == r'\g<0>':
            return compiled.sub(lambda m: m.group(), string)
        return compiled.sub(repl, string)
