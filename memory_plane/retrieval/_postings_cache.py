"""Persisted postings of the retriever's large indexes (derived, rebuildable, never the truth).

Tokenising ten thousand goals is most of a fresh process's first retrieve. An index's postings are a
function of its entries' texts and the tokenizer only, so they are kept in
``<root>/.cache/retrieve/<source>.json.gz`` together with a digest of the texts they were made from
and the tokenizer's fingerprint. A process that finds the same texts, or the same texts followed by
new ones (episodes appended since), loads them and tokenises only the rest. A file of postings alone (not the
episodes') also holds each document's own digest: when the index lost lines (GC), was rebuilt in another order
or had a line edited, the documents whose text it holds keep their postings, renumbered, and the others are
tokenised (the file is then written again). Anything else (another tokenizer, most texts new, a damaged file)
makes the file unused and it is rewritten; deleting the folder loses nothing. It is gzip, so a ``grep`` over
the tree does not match it.

The episodes' file also holds what their app prior counted from those postings, keyed as well on the
canonical app of each episode (a catalog that learned a name since makes the counts unused, not the
postings). Document numbers are packed (little-endian uint32, base64) rather than JSON numbers: reading
ninety thousand of them as JSON was most of a fresh process's load.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import struct
import sys
import threading
import time
import zlib
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from itertools import accumulate, chain
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from memory_plane.lifecycle import UnsafePathError, atomic_write, has_symlink, read_bytes_nofollow

from .._inverted_index import GramStats, InvertedIndex
from .._tokens import grams, token_set, tokenizer_fingerprint
from ._app_prior import AppPrior

log = logging.getLogger(__name__)

CACHE_DIR = ".cache/retrieve"
# 2: the episodes' file also holds their character trigram frequencies ("grams"); 3: packed document
# numbers, the digest over the texts' lengths and characters, the episodes' app prior counts ("prior")
FORMAT = 3
# Below this a source is tokenised in a millisecond or two: no file for it. (Above, loading costs about a
# third of tokenising: the device's failures, UI anchors and app profiles and the long-term memories, a few
# hundred each, took 30 ms of a fresh process's first retrieve to tokenise.)
MIN_ENTRIES = 64
REFRESH_AFTER = 256  # documents tokenised beyond the cached ones before the file is rewritten (at most)
MAX_BYTES = 64 << 20  # a cache file (or its decompressed text) larger than this is not read
SAMPLES = 16  # documents re-tokenised on load to check the postings against this tokenizer


_U32 = next(code for code in "IL" if array(code).itemsize == 4)


def texts_digest(texts: Sequence[str]) -> str:
    """A digest of a list of texts (order and boundaries included)."""
    # The count and the lengths fix the boundaries, so the characters are hashed as they are (no separator,
    # no escaping: a third of the time of hashing the texts' JSON).
    lengths = array("q", map(len, texts))
    if sys.byteorder == "big":
        lengths.byteswap()
    h = hashlib.sha1(struct.pack("<Q", len(texts)))
    h.update(lengths.tobytes())
    h.update("".join(texts).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


EACH = 8  # bytes of each document's own digest (``doc_digests``)


def doc_digests(texts: Sequence[str]) -> bytes:
    """Each text's own short digest, one after another: which documents of a file are still in the index, in
    order, when some were removed since it was written (a forget, GC)."""
    return b"".join(map(_own_digest, texts))


def _own_digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=EACH).digest()


def _pack(numbers: Sequence[int]) -> str:
    """Non-negative integers below 2**32 as base64 of little-endian uint32."""
    packed = array(_U32, numbers)
    if sys.byteorder == "big":
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def _unpack(text: Any) -> list[int]:
    """What ``_pack`` wrote; ValueError when it is not that."""
    if not isinstance(text, str):
        raise ValueError("packed numbers are not a string")
    raw = base64.b64decode(text, validate=True)
    if len(raw) % 4:
        raise ValueError("packed numbers are not whole uint32s")
    numbers = array(_U32)
    numbers.frombytes(raw)
    if sys.byteorder == "big":
        numbers.byteswap()
    return numbers.tolist()


def _samples(count: int) -> list[int]:
    return sorted({(k * (count - 1)) // max(1, SAMPLES - 1) for k in range(SAMPLES)}) if count else []


class Persisted(NamedTuple):
    """What a file gave: the index of the longest cached prefix, and its app prior counts (None: count them);
    ``renumbered`` when documents were taken out of the file's numbering (it is written again)."""

    inv: InvertedIndex
    counts: dict[str, dict[str, int]] | None
    renumbered: bool = False


class PersistJob(NamedTuple):
    """One file to write: the postings of the first ``len(texts)`` documents of ``inv``, with their trigram
    frequencies and, for the episodes, each document's canonical app ("": none)."""

    cache: TokenCache
    inv: InvertedIndex
    texts: Sequence[str]
    grams: GramStats | None
    apps: Sequence[str] | None


class TokenCache:
    """The persisted postings of one retrieval source."""

    def __init__(self, root: Path, name: str) -> None:
        self.root = Path(root)
        self.path = self.root / CACHE_DIR / f"{name}.json.gz"
        self.disabled = False  # set after a write failed (read-only tree, full disk): not retried

    def load(self, texts: Sequence[str], apps: Sequence[str] | None = None) -> Persisted | None:
        """An index of the longest cached prefix of ``texts`` (with the app prior counts of those documents when
        ``apps``, each document's canonical app, are those they were counted with); None when there is no
        usable cache."""
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
            return self._parse(raw, texts, apps)
        except (ValueError, TypeError, KeyError, IndexError, zlib.error, EOFError, OSError) as exc:
            log.warning("retrieve cache %s not used (rebuilt from the index): %s", self.path, exc)
            return None

    def _parse(self, raw: bytes, texts: Sequence[str], apps: Sequence[str] | None) -> Persisted | None:
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
        if not isinstance(count, int) or count <= 0:
            return None
        renumbered = False
        if count <= len(texts) and data.get("digest") == texts_digest(texts[:count]):
            postings = _postings(data, count)
        else:
            # The index changed other than by appends (GC, a rebuild in another order, an edit): the documents
            # still there keep their postings, renumbered, and only the others are tokenised; or, when most
            # are new, it is rebuilt.
            found = _renumbered(data, count, texts)
            if found is None:
                return None
            postings, count, renumbered = found, len(texts), True
        prefix = texts[:count]
        inv = InvertedIndex.from_postings(postings, prefix)
        # A few documents are tokenised now and looked up: the postings must say the same.
        sampled: set[str] = set()
        for i in _samples(count):
            for t in token_set(prefix[i]):
                plist = postings.get(t)
                if plist is None or bisect_left(plist, i) >= len(plist) or plist[bisect_left(plist, i)] != i:
                    raise ValueError(f"document {i} does not match its postings")
                sampled.add(t)
        inv.grams = _gram_stats(data.get("grams"), prefix)
        counts = None
        if apps is not None and len(apps) >= count:
            counts = _prior_counts(data.get("prior"), apps[:count], postings, sampled)
        return Persisted(inv, counts, renumbered)

    def due(self, indexed: int, persisted: int) -> bool:
        """Whether a source with this many documents, of which the file holds ``persisted``, should write it."""
        # A small source is written once half of it is not in the file (a source of 100 never lags 256).
        lag = min(REFRESH_AFTER, indexed // 2)
        return not self.disabled and indexed >= MIN_ENTRIES and indexed - persisted >= lag

    def save(self, inv: InvertedIndex, texts: Sequence[str], gram_stats: GramStats | None = None,
             apps: Sequence[str] | None = None) -> None:
        """Write the postings of the first ``len(texts)`` documents of ``inv`` (atomic; raises OSError), the
        trigram frequencies of the same documents when given, and their app prior counts when ``apps`` gives
        each one's canonical app."""
        count = len(texts)
        if has_symlink(self.root, self.path.parent):
            raise OSError(f"{self.path.parent} is a symlink: not written")
        # Each slice is taken whole (documents are numbered in order, so a later append only adds past
        # ``count``): a retrieve adding documents meanwhile does not change what is written.
        postings: dict[str, list[int]] = {}
        for t, plist in list(inv.postings.items()):
            cut = plist[:bisect_left(plist, count)]
            if cut:
                postings[t] = cut
        payload: dict[str, Any] = {
            "format": FORMAT, "tokenizer": tokenizer_fingerprint(), "count": count, "digest": texts_digest(texts),
            "tokens": list(postings), "lengths": _pack(list(map(len, postings.values()))),
            "docs": _pack(list(chain.from_iterable(postings.values())))}
        if gram_stats is not None and gram_stats.n == count:
            payload["grams"] = {"n": gram_stats.n, "length": gram_stats.length, "df": gram_stats.df}
        elif apps is None:
            # Postings alone can lose documents (not trigram or app counts): each document's digest says which.
            payload["each"] = base64.b64encode(doc_digests(texts)).decode("ascii")
        if apps is not None and len(apps) == count:
            # Counted here, off the caller's thread, exactly as a loader without them would count.
            prior = AppPrior()
            prior.add_postings(postings, apps)
            payload["prior"] = {"apps": texts_digest(apps), "counts": prior.counts}
        body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        try:
            import gzip  # a write only: reads inflate with zlib, loaded anyway

            atomic_write(self.path, gzip.compress(body, compresslevel=1, mtime=0), root=self.root)
        except UnsafePathError as exc:  # a folder swapped for a link since the check above
            raise OSError(f"{self.path.parent}: not written ({exc})") from exc


def _postings(data: dict[str, Any], count: int) -> dict[str, list[int]]:
    """The postings a file holds (token -> document numbers below ``count``); ValueError when malformed."""
    tokens = data.get("tokens")
    if not isinstance(tokens, list) or set(map(type, tokens)) - {str}:
        raise ValueError("tokens is not a list of words")
    lengths, docs = _unpack(data.get("lengths")), _unpack(data.get("docs"))
    if len(lengths) != len(tokens) or sum(lengths) != len(docs) or (lengths and min(lengths) < 1):
        raise ValueError("the postings' lengths do not add up")
    if docs and max(docs) >= count:
        raise ValueError("a document number is out of range")
    offsets = list(accumulate(lengths, initial=0))
    postings = dict(zip(tokens, map(docs.__getitem__, map(slice, offsets, offsets[1:]))))
    if len(postings) != len(tokens):
        raise ValueError("a token has two postings")
    return postings


def _renumbered(data: dict[str, Any], count: int, texts: Sequence[str]) -> dict[str, list[int]] | None:
    """The postings of ``texts`` from a file of ``count`` other documents: a document whose text the file holds
    (by its digest) takes that one's postings under its own number, the others are tokenised; None when the
    file has no digests or holds fewer than half of the texts."""
    raw = data.get("each")
    if not isinstance(raw, str):
        return None
    each = base64.b64decode(raw, validate=True)
    if len(each) != count * EACH:
        raise ValueError("the documents' digests are not one per document")
    where: dict[bytes, list[int]] = {}
    for k in range(count - 1, -1, -1):  # popped from the end: the same texts keep their order
        where.setdefault(each[k * EACH:(k + 1) * EACH], []).append(k)
    number = [-1] * count
    new: list[int] = []
    for j, text in enumerate(texts):
        found = where.get(_own_digest(text))
        if found:
            number[found.pop()] = j
        else:
            new.append(j)
    if 2 * len(new) > len(texts):
        return None
    out: dict[str, list[int]] = {}
    for t, plist in _postings(data, count).items():
        docs = [number[k] for k in plist if number[k] >= 0]
        if docs:
            out[t] = docs
    for j in new:
        for t in token_set(texts[j]):
            out.setdefault(t, []).append(j)
    for docs in out.values():
        docs.sort()
    return out


def _prior_counts(raw: Any, apps: Sequence[str], postings: dict[str, list[int]],
                  sampled: set[str]) -> dict[str, dict[str, int]] | None:
    """The app prior counts a file holds for documents of these ``apps`` (None when it has none for them:
    they are counted again); ValueError when they are malformed or a sampled token's do not match."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError("prior is not a mapping")
    if raw.get("apps") != texts_digest(apps):
        return None  # another canonical app for some episode (the catalog learned a name): counted again
    counts = raw.get("counts")
    if not isinstance(counts, dict) or not all(isinstance(per, dict) for per in counts.values()):
        raise ValueError("prior.counts is not a mapping of mappings")
    values = list(chain.from_iterable(per.values() for per in counts.values()))
    if set(map(type, values)) - {int} or (values and min(values) < 1):
        raise ValueError("prior.counts holds other than positive counts")
    if not counts.keys() <= postings.keys() or not set(chain.from_iterable(counts.values())) <= set(apps) - {""}:
        raise ValueError("prior.counts names a token or an app the documents do not have")
    # As for the postings: the counts of the sampled documents' tokens are counted again.
    for t in sampled:
        per = Counter(map(apps.__getitem__, postings[t]))
        per.pop("", None)
        if per != counts.get(t, {}):
            raise ValueError(f"the prior counts of {t!r} do not match the postings")
    return counts


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


class SnapshotJob(Protocol):
    """A snapshot to write (``_snapshot_source.SnapJob``)."""

    file: Any  # its SnapshotFile: ``disabled`` once a write failed

    def run(self) -> bool:
        """Write it; raises when it cannot."""
        ...


class PostingsWriter:
    """Writes postings files off the caller's thread, one thread per batch."""

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []

    def submit(self, jobs: Sequence[PersistJob], snapshots: Sequence[SnapshotJob] = ()) -> None:
        """Write each file in a background thread (the postings, then the snapshots); a failure disables that
        file (logged)."""
        if not jobs and not snapshots:
            return

        def write() -> None:
            for job in jobs:
                cache = job.cache
                try:
                    cache.save(job.inv, job.texts, job.grams, job.apps)
                except OSError as exc:
                    cache.disabled = True  # a read-only tree or a full disk: retrieval goes on without it
                    log.info("retrieve cache %s not written: %s", cache.path, exc)
                except Exception:  # a derived file must never take the process down
                    cache.disabled = True
                    log.exception("retrieve cache %s not written", cache.path)
            for snap in snapshots:
                try:
                    snap.run()
                except Exception as exc:  # a read-only tree, a full disk, anything: retrieval goes on without it
                    snap.file.disabled = True
                    log.info("retrieve snapshot %s not written: %s", snap.file.path, exc)

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
