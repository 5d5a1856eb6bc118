"""Reading order of a page's lines: the order a person reads them, whatever order the file draws
them in (docs/api/processing.md "Reading order"; FIELD-NOTES.md "Reading order": real invoices
draw a right column first, addresses bottom-up, tables column by column).

Used by the PDF text reader (pdf.py) and the OCR reader (ocr.py) on one page at a time:

1. **Lines** are the reader's own lines (pdfium's runs between its line breaks, Tesseract's
   block/paragraph/line), cut where a word jumps back left or off the line's baseline
   (``runs``): a line is words on one baseline, left to right.
2. **Orientation and skew**: the way the text runs (most lines' first word to last word: a
   scan read upside down or sideways by Tesseract keeps its boxes in the image as uploaded)
   turns the boxes upright; the page's skew is the median slope of its lines' baselines (lines
   of 2 words or more, at most ``MAX_SKEW``); every box is looked at in coordinates turned by
   that slope (y - x * slope), so a scan's rows stay rows. Nodes keep the boxes as read.
3. **Blocks** by recursive whitespace cuts (XY-cut): a region is cut into bands at the empty
   bands across it when the widest is ``_BAND`` line heights or more (a blank line: header,
   table, totals, footer apart), else into columns at the gutters down its whole height, else
   into bands at any gap; in a direction, at every cut at least ``_SAME_CUT`` as wide as the
   widest; each part is cut again; top to bottom, left to right. Parts cut by gutters must
   stand beside each other (over half the height of the shorter: a closing brace below an
   indented block is no column). Parts whose
   lines share baselines (``_ALIGNED`` of the lines of the side with fewer lines have a line
   of the other side whose middle is within ``_BASELINE`` of a line height of theirs) are a
   table or label/value pairs, cut into rows instead (each row left to right), unless both
   sides are prose (their lines' median width at least ``_PROSE_WIDTH`` line heights: a
   two-column page set on a baseline grid), read one column after the other. A region that no
   band cuts is read row by row (lines whose middles share a height), each row left to right.

Line and word ids are positions in this order: ``p2.l5`` the fifth line read on page 2,
``p2.l5.w3`` its third word; the same bytes give the same ids.

Why our own code: the maintained Python layout tools analyse characters from their own parse
(pdfminer.six, pdfplumber) or need a layout model's labelled regions (xycutppy, 0.1.x, a native
wheel sorting detected regions); none reads a table row by row out of lines we already have.

Bounded: every level sorts its region's lines (O(n log n)); a cut always leaves smaller
regions and at most ``MAX_DEPTH`` levels are cut, past which a region is read row by row;
the lines of a page are bounded by the reader's text budget (``Limits.max_text_chars``).
"""
from __future__ import annotations

from statistics import median

Box = tuple[float, float, float, float] | list[float]   # x0, y0, x1, y1: points from the page's top-left

_SUFFIXES = [f'.w{number}' for number in range(1, 257)]
MAX_SKEW = 0.09          # tan(~5 degrees): a steeper median baseline is not a skew but a layout
MAX_DEPTH = 48           # levels of cuts, past which a region is read top to bottom
_BAND = 1.0             # a horizontal gap of this many line heights cuts before any gutter
_SAME_CUT = 0.6          # cuts at least this fraction of the widest one are made at once
_BESIDE = 0.5           # columns overlap over this share of the shorter one's height
_BASELINE = 0.3         # lines share a baseline: middles this share of a line height apart
_ALIGNED = 0.8           # share of lines with a partner on the same baseline: rows (chance alignments of
                         # two blocks of other leadings stay under it; a table row has a cell in most columns)
_PROSE_WIDTH = 10.0      # median line width, in line heights, of a column of prose


def runs(boxes: list[Box], way: tuple[int, int] = (1, 0), *, backwards: bool = False) -> list[int]:
    """Where a reader's line of words (``boxes`` in its order) starts a new line: the indexes of
    the words that jump back left of the previous one or whose middle leaves its height, seen
    the way the page's text runs (``way``, from ``direction``); ``backwards``: the words run
    right to left (a right-to-left script), only leaving the height cuts."""
    if way != (1, 0):
        boxes = [_upright(box, way) for box in boxes]
    starts = [0]
    for index in range(1, len(boxes)):
        x0, y0, _, y1 = boxes[index]
        px0, py0, _, py1 = boxes[index - 1]
        mid = (y0 + y1) / 2
        if (x0 < px0 - 0.5 and not backwards) or not py0 - 0.5 <= mid <= py1 + 0.5:
            starts.append(index)
    return starts


def skew(lines: list[list[Box]]) -> float:
    """The page's slope: the median of its lines' baseline slopes (dy/dx of the bottoms of the
    first and last word; 0 when fewer than 3 lines have 2 words or more)."""
    slopes = []
    for words in lines:
        if len(words) < 2:
            continue
        first, last = words[0], words[-1]
        run = (last[0] + last[2]) / 2 - (first[0] + first[2]) / 2
        if run > 2 * (first[3] - first[1]):
            slopes.append((last[3] - first[3]) / run)
    if len(slopes) < 3:
        return 0.0
    slope = median(slopes)
    return slope if abs(slope) <= MAX_SKEW else 0.0


def direction(lines: list[list[Box]]) -> tuple[int, int]:
    """Which way the page's text runs in its boxes: (1, 0) left to right; (-1, 0) upside down,
    (0, 1) or (0, -1) sideways (Tesseract reads a turned scan the right way up, its boxes in the
    image as uploaded): the way most lines of 2 words or more go from first to last word."""
    votes = {(1, 0): 0, (-1, 0): 0, (0, 1): 0, (0, -1): 0}
    for words in lines:
        if len(words) < 2:
            continue
        dx = (words[-1][0] + words[-1][2] - words[0][0] - words[0][2]) / 2
        dy = (words[-1][1] + words[-1][3] - words[0][1] - words[0][3]) / 2
        if abs(dx) >= abs(dy):
            votes[(1 if dx >= 0 else -1, 0)] += 1
        else:
            votes[(0, 1 if dy > 0 else -1)] += 1
    return max(votes, key=lambda key: (votes[key], key == (1, 0)))


def _upright(box: Box, way: tuple[int, int]) -> Box:
    """``box`` in the coordinates of the page turned the way its text reads: u along the text,
    v down its lines (v = the along-text direction turned a quarter clockwise)."""
    dx, dy = way
    x0, y0, x1, y1 = box
    if dx == 1:
        return box
    if dx == -1:
        return (-x1, -y1, -x0, -y0)
    if dy == 1:          # text runs down the image, lines stack leftwards
        return (y0, -x1, y1, -x0)
    return (-y1, x0, -y0, x1)   # text runs up the image, lines stack rightwards


def order(lines: list[list[Box]], way: tuple[int, int] | None = None) -> list[int]:
    """The indexes of ``lines`` (each its words' boxes) in reading order (module docstring);
    ``way``: the way the text runs when known (else ``direction``)."""
    if len(lines) < 2:
        return list(range(len(lines)))
    if way is None:
        way = direction(lines)
    if way != (1, 0):
        lines = [[_upright(w, way) for w in words] for words in lines]
    slope = skew(lines)
    if slope:
        boxes = [extent([(w[0], w[1] - slope * (w[0] + w[2]) / 2, w[2], w[3] - slope * (w[0] + w[2]) / 2)
                         for w in words]) for words in lines]
    else:
        boxes = [extent(words) for words in lines]
    out: list[int] = []
    _cut(boxes, list(range(len(boxes))), out, 0)
    return out


def extent(words) -> list[float]:
    """The union of boxes: [x0, y0, x1, y1] (a loop: the hot path of every text page)."""
    x0, y0, x1, y1 = words[0]
    for a, b, c, d in words:
        if a < x0:
            x0 = a
        if b < y0:
            y0 = b
        if c > x1:
            x1 = c
        if d > y1:
            y1 = d
    return [x0, y0, x1, y1]


def _gaps(boxes: list[Box], region: list[int], lo: int, hi: int) -> tuple[list[int], list[tuple[float, int]]]:
    """The region sorted along one axis (``lo``/``hi``: 0/2 for x, 1/3 for y) and the empty bands
    across it: (width, position in the sorted list where the next part starts)."""
    ranked = sorted(region, key=lambda i: (boxes[i][lo], boxes[i][hi]))
    gaps: list[tuple[float, int]] = []
    reach = boxes[ranked[0]][hi]
    for position in range(1, len(ranked)):
        box = boxes[ranked[position]]
        if box[lo] > reach:
            gaps.append((box[lo] - reach, position))
        if box[hi] > reach:
            reach = box[hi]
    return ranked, gaps


def _parts(ranked: list[int], gaps: list[tuple[float, int]]) -> list[list[int]]:
    widest = max(width for width, _ in gaps)
    cuts = [position for width, position in gaps if width >= widest * _SAME_CUT]
    return [ranked[a:b] for a, b in zip([0] + cuts, cuts + [len(ranked)], strict=True)]


def _side_by_side(boxes: list[Box], parts: list[list[int]]) -> bool:
    """Whether parts cut by gutters stand beside each other: each next to the other over at least
    half the height of the shorter (not a closing brace below an indented block)."""
    extents = [(min(boxes[i][1] for i in part), max(boxes[i][3] for i in part)) for part in parts]
    for (a0, a1), (b0, b1) in zip(extents, extents[1:], strict=False):
        if min(a1, b1) - max(a0, b0) < _BESIDE * min(a1 - a0, b1 - b0):
            return False
    return True


def _rows(boxes: list[Box], parts: list[list[int]]) -> bool:
    """Whether side-by-side parts are a table's columns (or label/value pairs) rather than
    columns of text: their lines share baselines, and they are not both prose."""
    heights = [boxes[i][3] - boxes[i][1] for part in parts for i in part]
    height = max(median(heights), 1.0)
    if all(median(boxes[i][2] - boxes[i][0] for i in part) >= _PROSE_WIDTH * height for part in parts):
        return False
    for left, right in zip(parts, parts[1:], strict=False):
        fewer, other = (left, right) if len(left) <= len(right) else (right, left)
        middles = sorted((boxes[i][1] + boxes[i][3]) / 2 for i in other)
        partnered = 0
        for i in fewer:
            y0, y1 = boxes[i][1], boxes[i][3]
            middle, reach = (y0 + y1) / 2, _BASELINE * (y1 - y0)
            # the first middle of the other side at or past middle - reach (binary search)
            lo, hi = 0, len(middles)
            while lo < hi:
                mid = (lo + hi) // 2
                if middles[mid] < middle - reach:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < len(middles) and middles[lo] <= middle + reach:
                partnered += 1
        if partnered >= _ALIGNED * len(fewer):
            return True
    return False


def _cut(boxes: list[Box], region: list[int], out: list[int], depth: int) -> None:
    if len(region) == 1:
        out.append(region[0])
        return
    if depth < MAX_DEPTH:
        by_y, across = _gaps(boxes, region, 1, 3)
        if across and max(w for w, _ in across) >= _BAND * median(boxes[i][3] - boxes[i][1] for i in region):
            parts = _parts(by_y, across)   # bands apart by a blank line or more: top to bottom first
        else:
            by_x, down = _gaps(boxes, region, 0, 2)
            parts = _parts(by_x, down) if down else None
            if parts is not None and not _side_by_side(boxes, parts):
                parts = None   # an indented line below the rest: not a column
            if parts is not None and _rows(boxes, parts):
                parts = None   # a table, label/value pairs: cut into rows, read left to right along them
            if parts is None and across:
                parts = _parts(by_y, across)
        if parts is not None:
            for part in parts:
                _cut(boxes, part, out, depth + 1)
            return
    _by_rows(boxes, region, out)


def _by_rows(boxes: list[Box], region: list[int], out: list[int]) -> None:
    """A region no band cuts (lines overlapping, or too deep): rows top to bottom (a line whose
    middle lies within the row's first line's height joins it), each left to right."""
    ranked = sorted(region, key=lambda i: ((boxes[i][1] + boxes[i][3]) / 2, boxes[i][0]))
    row: list[int] = []
    top = bottom = 0.0
    for i in ranked:
        middle = (boxes[i][1] + boxes[i][3]) / 2
        if row and not top <= middle <= bottom:
            out.extend(sorted(row, key=lambda j: boxes[j][0]))
            row = []
        if not row:
            top, bottom = boxes[i][1], boxes[i][3]
        row.append(i)
    out.extend(sorted(row, key=lambda j: boxes[j][0]))


def _word_suffixes(count: int) -> list[str]:
    """``['.w1', '.w2', ...]``, at least ``count`` of them: a word's id is its line's id plus one."""
    global _SUFFIXES  # noqa: PLW0603 - a cache grown for a line longer than any before
    if count > len(_SUFFIXES):
        _SUFFIXES = [f'.w{number}' for number in range(1, max(count, 2 * len(_SUFFIXES)) + 1)]
    return _SUFFIXES


def emit_lines(lines: list[tuple[list[str], list[list[float]]]], page: int,
               confidences: list[list[float]] | None = None,
               way: tuple[int, int] | None = None) -> tuple[list[dict], int]:
    """The line and word nodes of one page's lines (each its words' texts and boxes, points from
    the top-left), in reading order (``layout.order``) -> (nodes, characters of text). Ids are
    positions in that order: ``p{page}.l{n}`` the n-th line read, ``.w{k}`` its k-th word."""
    page_id = f'p{page}'
    suffixes = _SUFFIXES
    out: list[dict] = []
    append = out.append
    chars = 0
    for line_number, position in enumerate(order([boxes for _, boxes in lines], way), 1):
        contents, boxes = lines[position]
        if len(contents) > len(suffixes):
            suffixes = _word_suffixes(len(contents))
        joined = ' '.join(contents)
        chars += len(joined)
        line_id = f'{page_id}.l{line_number}'
        append({'id': line_id, 'parentId': page_id, 'nodeType': 'line', 'content': joined,
                'index': line_number - 1, 'features': {'page': page, 'bbox': extent(boxes)}})
        scores = confidences[position] if confidences is not None else None
        for index, word in enumerate(contents):
            features = {'page': page, 'bbox': boxes[index]}
            if scores is not None:
                features['confidence'] = scores[index]
            append({'id': line_id + suffixes[index], 'parentId': line_id, 'nodeType': 'word',
                    'content': word, 'index': index, 'features': features})
    return out, chars
