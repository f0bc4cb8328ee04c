r"""Passage corpus files: parse their lines into :class:`Passage` records and read them back by row.

The corpus is a JSONL file in the wiki-18 / Search-R1 format, one passage a line::

    {"id": "0", "contents": "\"Evan Morris\"\nEvan Morris Evan L. Morris (January 26, 1977 – …"}

(``{"id", "title", "text"}`` lines and DPR/KILT-style TSV files ``id<TAB>"Title: … Text: …"`` work too).
Passages are not copied into an index: :class:`CorpusFile` reads a hit back from the corpus file itself
through the byte offset of every line.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Passage:
    """One retrieved passage."""

    id: str
    """The corpus id (``"0"``, ``"1234"``…)."""
    title: str
    """Article title, without quotes; may be empty."""
    text: str
    """Passage text (in wiki-18 it starts by repeating the title)."""
    score: float = 0.0
    """Retrieval score (BM25 or cosine); 0.0 when the passage was not retrieved."""
    index: int = -1
    """Row of the passage in the corpus file (0-based, blank lines not counted)."""

    @property
    def contents(self) -> str:
        r"""The wiki-18 ``contents`` form: ``"Title"\ntext``."""
        return f'"{self.title}"\n{self.text}' if self.title else self.text


_TSV_TITLE = re.compile(r"^\s*Title:\s*(?P<title>.*?)\s+Text:\s*(?P<text>.*)$", re.DOTALL)


def parse_passage_json(record: Any, index: int = -1) -> Passage:
    r"""Build a :class:`Passage` from one JSONL record (``contents`` or ``title``/``text`` form).

    >>> parse_passage_json({"id": "7", "contents": '"Paris"\nParis is the capital of France.'}).title
    'Paris'

    Raises:
        ValueError: when the record is not an object with ``contents`` or ``text``.

    """
    if not isinstance(record, dict):
        raise ValueError(f"a passage must be a JSON object, got {type(record).__name__}")
    pid = str(record.get("id", record.get("_id", index)))
    if "contents" in record:
        contents = str(record["contents"])
        head, sep, tail = contents.partition("\n")
        if not sep:
            return Passage(pid, "", contents, index=index)
        return Passage(pid, head.strip().strip('"'), tail, index=index)
    if "text" in record:
        return Passage(pid, str(record.get("title") or ""), str(record["text"]), index=index)
    raise ValueError(f"a passage needs a 'contents' or 'text' field; this one has {sorted(record)}")


def parse_passage_tsv(line: str, index: int = -1) -> Passage:
    """Build a :class:`Passage` from one TSV line: ``id<TAB>text[<TAB>title]`` (DPR) or ``Title: … Text: …``.

    Raises:
        ValueError: when the line has fewer than two fields.

    """
    fields = next(csv.reader([line.lstrip("\ufeff")], delimiter="\t"))
    if len(fields) < 2:
        raise ValueError("a TSV passage needs at least two tab-separated fields: id and text")
    pid, text = fields[0], fields[1]
    if len(fields) >= 3:
        return Passage(pid, fields[2], text, index=index)
    match = _TSV_TITLE.match(text)
    if match:
        return Passage(pid, match["title"].strip(), match["text"].strip(), index=index)
    return Passage(pid, "", text, index=index)


def _is_tsv(path: Path) -> bool:
    return path.suffix.lower() in (".tsv", ".tab")


def iter_corpus_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, int, bytes]]:
    """Yield ``(byte offset, 1-based line number, raw line)`` for every passage line of a corpus file.

    Blank lines and a TSV header line are skipped.
    """
    path = Path(path)
    tsv, offset = _is_tsv(path), 0
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            start, offset = offset, offset + len(raw)
            if not raw.strip() or (tsv and lineno == 1 and _is_tsv_header(raw)):
                continue
            yield start, lineno, raw


def parse_corpus_line(path: Path, raw: bytes, index: int, lineno: int | None = None) -> Passage:
    """Parse one raw corpus line (JSONL, or TSV when ``path`` ends in ``.tsv``) into a :class:`Passage`.

    Raises:
        ValueError: naming the file and line when the line is corrupt.

    """
    try:
        text = raw.decode("utf-8").rstrip("\r\n")
        if _is_tsv(path):
            return parse_passage_tsv(text, index)
        return parse_passage_json(json.loads(text), index)
    except RecursionError:
        raise ValueError(
            f"{path}: passage {index}: JSON nested too deeply; fix or remove that line"
        ) from None
    except (UnicodeDecodeError, ValueError) as exc:
        where = f"line {lineno}" if lineno is not None else f"passage {index}"
        raise ValueError(f"{path}:{where}: corrupt corpus passage ({exc}); fix or remove that line") from exc


def iter_corpus(path: str | os.PathLike[str]) -> Iterator[tuple[int, Passage]]:
    """Yield ``(byte offset, passage)`` in file order.

    Raises:
        ValueError: on the first corrupt line, with path and line number.

    """
    path = Path(path)
    for index, (start, lineno, raw) in enumerate(iter_corpus_lines(path)):
        yield start, parse_corpus_line(path, raw, index, lineno)


class CorpusFile:
    """Random access to the passages of a corpus file through byte offsets (no passage kept in memory).

    Reads use ``os.pread``, so one instance may serve several threads.
    """

    def __init__(self, path: str | os.PathLike[str], offsets: np.ndarray | None = None) -> None:
        """Open ``path``; scan it for line offsets unless ``offsets`` (n + 1 int64 values) is given.

        Raises:
            FileNotFoundError: when the corpus file does not exist.

        """
        self._fd = -1
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"corpus file not found: {self.path} (pass --corpus PATH to a .jsonl)")
        if offsets is None:
            starts = [start for start, _, _ in iter_corpus_lines(self.path)]
            offsets = np.asarray([*starts, self.path.stat().st_size], dtype=np.int64)
        self.offsets = offsets
        self._fd = os.open(self.path, os.O_RDONLY)

    def __len__(self) -> int:
        """Return the number of passages."""
        return len(self.offsets) - 1

    def __getitem__(self, index: int) -> Passage:
        """Read the passage at row ``index``."""
        if not 0 <= index < len(self):
            raise IndexError(f"passage {index} out of range (corpus has {len(self)})")
        start, end = int(self.offsets[index]), int(self.offsets[index + 1])
        return parse_corpus_line(self.path, os.pread(self._fd, end - start, start), index)

    def close(self) -> None:
        """Close the file descriptor."""
        if getattr(self, "_fd", -1) >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        self.close()


def _is_tsv_header(raw: bytes) -> bool:
    first = raw.decode("utf-8", "replace").lstrip("\ufeff").split("\t", 1)[0].strip().lower()
    return first in ("id", "_id", "docid")
