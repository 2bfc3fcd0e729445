"""Line breaking for every text the doctor writes: only at spaces, with a bracketed group (an interval
``[0.61, 0.74]``, an id list, a JSON value) kept on one line where it fits, and a hanging indent.

In core so that the finding long forms (``explain``), the help and the terminal reports break lines by one rule.
"""

from __future__ import annotations

import re

OPEN, CLOSE = "([{", ")]}"


def _groups(text: str, room: int) -> list[tuple[str, str]]:
    """(leading spaces, unbreakable run) pieces of text: words, with a bracketed or double-quoted group
    joined into one piece where it fits in room (a JSON value stays on one line, so it reads as one)."""
    words = re.findall(r"(\s*)(\S+)", text)
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(words):
        j, depth, quoted = i, 0, False
        while True:
            word = words[j][1]
            depth += sum(word.count(c) for c in OPEN) - sum(word.count(c) for c in CLOSE)
            quoted ^= word.count('"') % 2 == 1
            if (depth <= 0 and not quoted) or j + 1 == len(words) or "\n" in words[j + 1][0]:
                break
            j += 1
        joined = words[i][1] + "".join(sp + w for sp, w in words[i + 1 : j + 1])
        if j > i and len(joined) <= room:
            out.append((words[i][0], joined))
            i = j + 1
        else:
            out.append(words[i])
            i += 1
    return out


def wrap(text: str, width: int, first: str = "", rest: str = "") -> list[str]:
    """text after ``first`` and then after ``rest`` on each further line, no line over width, broken only
    at spaces (a word longer than a line gets a line of its own and overflows it: it is never cut); a
    newline in text starts a new line."""
    lines: list[str] = []
    line = first
    bare = True  # nothing but the prefix on this line yet
    for space, word in _groups(text, max(1, width - len(rest))):
        if bare:
            line += word
            bare = False
        elif "\n" not in space and len(line) + len(space) + len(word) <= width:
            line += space + word
        else:
            lines.append(line)
            line = rest + word
    lines.append(line)
    return lines
