"""Persisted postings of the retriever's large indexes (derived, rebuildable, never the truth).

Tokenising ten thousand goals is most of a fresh process's first retrieve. An index's postings are a
function of its entries' texts and the tokenizer only, so they are kept in
``<root>/.cache/retrieve/<source>.json.gz`` together with a digest of the texts they were made from
and the tokenizer's fingerprint. A process that finds the same texts, or the same texts followed by
new ones (episodes appended since), loads them and tokenises only the rest. Anything else (another
tokenizer, an edited or rewritten index, a damaged file) makes the file unused and it is rewritten;
deleting the folder loses nothing. It is gzip, so a ``grep`` over the tree does not match it.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import threading
import time
import zlib
from bisect import bisect_left
from collections.abc import Sequence
from itertools import chain
from pathlib import Path
from typing import Any

from lifecycle import atomic_write, has_symlink, read_bytes_nofollow

from .._inverted_index import GramStats, InvertedIndex
from .._tokens import grams, token_set, tokenizer_fingerprint

log = logging.getLogger(__name__)

CACHE_DIR = ".cache/retrieve"
FORMAT = 2  # 2: the episodes' file also holds their character trigram frequencies ("grams")
MIN_ENTRIES = 512  # below this a source is tokenised in a few milliseconds: no file for it
REFRESH_AFTER = 256  # documents tokenised beyond the cached ones before the file is rewritten
MAX_BYTES = 64 << 20  # a cache file (or its decompressed text) larger than this is not read
SAMPLES = 16  # documents re-tokenised on load to check the postings against this tokenizer


def texts_digest(texts: Sequence[str]) -> str:
    """A digest of a list of texts (order and boundaries included)."""
    return hashlib.sha1(json.dumps(list(texts), ensure_ascii=False).encode("utf-8")).hexdigest()


def _samples(count: int) -> list[int]:
    return sorted({(k * (count - 1)) // max(1, SAMPLES - 1) for k in range(SAMPLES)}) if count else []


class TokenCache:
    """The persisted postings of one retrieval source."""

    def __init__(self, root: Path, name: str) -> None:
        self.root = Path(root)
        self.path = self.root / CACHE_DIR / f"{name}.json.gz"
        self.disabled = False  # set after a write failed (read-only tree, full disk): not retried

    def load(self, texts: Sequence[str]) -> InvertedIndex | None:
        """An index of the longest cached prefix of ``texts``; None when there is no usable cache."""
        if len(texts) < MIN_ENTRIES or has_symlink(self.root, self.path.parent):
            return None
        try:
            raw = read_bytes_nofollow(self.path, MAX_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.debug("retrieve cache %s unreadable: %s", self.path, exc)
            return None
        try:
            inv = self._parse(raw, texts)
        except (ValueError, TypeError, KeyError, IndexError, zlib.error, EOFError, OSError) as exc:
            log.warning("retrieve cache %s not used (rebuilt from the index): %s", self.path, exc)
            return None
        return inv

    def _parse(self, raw: bytes, texts: Sequence[str]) -> InvertedIndex | None:
        if len(raw) > MAX_BYTES:
            raise ValueError("file too large")
        d = zlib.decompressobj(wbits=31)  # gzip; its CRC catches a damaged file
        body = d.decompress(raw, MAX_BYTES)
        if d.unconsumed_tail or not d.eof:
            raise ValueError("truncated or too large once decompressed")
        data = json.loads(body)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError("another format")
        if data.get("tokenizer") != tokenizer_fingerprint():
            return None  # made by another version of the tokenizer: quietly rebuilt
        count = data.get("count")
        if not isinstance(count, int) or not 0 < count <= len(texts):
            return None  # the index shrank (GC, a rewrite): rebuilt
        prefix = texts[:count]
        if data.get("digest") != texts_digest(prefix):
            return None  # the texts changed (an edit, a rewrite): rebuilt
        postings = data.get("postings")
        if not isinstance(postings, dict):
            raise ValueError("postings is not a mapping")
        numbers = list(chain.from_iterable(postings.values()))
        if not all(isinstance(p, list) for p in postings.values()) or set(map(type, numbers)) - {int}:
            raise ValueError("postings are not lists of document numbers")
        if numbers and (min(numbers) < 0 or max(numbers) >= count):
            raise ValueError("a document number is out of range")
        inv = InvertedIndex.from_postings(postings, prefix)
        # A few documents are tokenised now and looked up: the postings must say the same.
        for i in _samples(count):
            for t in token_set(prefix[i]):
                plist = postings.get(t)
                if plist is None or bisect_left(plist, i) >= len(plist) or plist[bisect_left(plist, i)] != i:
                    raise ValueError(f"document {i} does not match its postings")
        inv.grams = _gram_stats(data.get("grams"), prefix)
        return inv

    def due(self, indexed: int, persisted: int) -> bool:
        """Whether a source with this many documents, of which the file holds ``persisted``, should write it."""
        return not self.disabled and indexed >= MIN_ENTRIES and indexed - persisted >= REFRESH_AFTER

    def save(self, inv: InvertedIndex, texts: Sequence[str], gram_stats: GramStats | None = None) -> None:
        """Write the postings of the first ``len(texts)`` documents of ``inv`` (atomic; raises OSError), and the
        trigram frequencies of the same documents when given."""
        count = len(texts)
        if has_symlink(self.root, self.path.parent):
            raise OSError(f"{self.path.parent} is a symlink: not written")
        # Each slice is taken whole (documents are numbered in order, so a later append only adds past
        # ``count``): a retrieve adding documents meanwhile does not change what is written.
        postings: dict[str, Any] = {}
        for t, plist in list(inv.postings.items()):
            cut = plist[:bisect_left(plist, count)]
            if cut:
                postings[t] = cut
        payload = {"format": FORMAT, "tokenizer": tokenizer_fingerprint(), "count": count,
                   "digest": texts_digest(texts), "postings": postings}
        if gram_stats is not None and gram_stats.n == count:
            payload["grams"] = {"n": gram_stats.n, "length": gram_stats.length, "df": gram_stats.df}
        body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        atomic_write(self.path, gzip.compress(body, compresslevel=1, mtime=0))


def _gram_stats(raw: Any, texts: Sequence[str]) -> GramStats | None:
    """The trigram frequencies a file holds for ``texts`` (None when it has none: they are counted again)."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or raw.get("n") != len(texts) or not isinstance(raw.get("length"), int):
        raise ValueError("grams is not the frequencies of these documents")
    df = raw.get("df")
    if not isinstance(df, dict) or set(map(type, df.values())) - {int}:
        raise ValueError("grams.df is not a mapping of counts")
    # As for the postings: a few documents' trigrams must all be counted.
    for i in _samples(len(texts)):
        if any(df.get(g, 0) < 1 for g in grams(texts[i])):
            raise ValueError(f"document {i} does not match the trigram counts")
    return GramStats(df, len(texts), raw["length"])


class PostingsWriter:
    """Writes postings files off the caller's thread, one thread per batch."""

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []

    def submit(self, jobs: Sequence[tuple[TokenCache, InvertedIndex, Sequence[str], GramStats | None]]) -> None:
        """Write each (cache, index, texts, trigram frequencies) in a background thread; a failure disables that
        cache (logged)."""
        if not jobs:
            return

        def write() -> None:
            for cache, inv, texts, gram_stats in jobs:
                try:
                    cache.save(inv, texts, gram_stats)
                except OSError as exc:
                    cache.disabled = True  # a read-only tree or a full disk: retrieval goes on without it
                    log.info("retrieve cache %s not written: %s", cache.path, exc)
                except Exception:  # a derived file must never take the process down
                    cache.disabled = True
                    log.exception("retrieve cache %s not written", cache.path)

        # Not a daemon: a short-lived process (the CLI) still finishes the files before it exits.
        t = threading.Thread(target=write, name="memplane-postings")
        self._threads = [w for w in self._threads if w.is_alive()]
        self._threads.append(t)
        t.start()

    def wait(self, timeout: float = 10.0) -> bool:
        """Wait for the writes under way; False if the timeout passed first."""
        deadline = time.monotonic() + timeout
        for t in list(self._threads):
            t.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)
