"""Screenshots as files: format detection, size, sha256 and a perceptual hash (dHash)."""

from __future__ import annotations

import hashlib
import io
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_plane.lifecycle import atomic_write

from ._sanitize import image_format

if TYPE_CHECKING:
    from PIL import Image

MAX_ARTIFACTS = 2000          # per episode; beyond it screenshots are described, not stored
MAX_ARTIFACT_BYTES = 8 << 20  # one screenshot larger than this is not stored


@dataclass
class ImageInfo:
    """What an event keeps about a screenshot: ref, size, hashes."""

    ref: str
    width: int
    height: int
    format: str
    size: int
    sha256: str
    dhash: str | None

    def to_dict(self) -> dict[str, Any]:
        """Event form of the screenshot metadata."""
        return {"screenshot_ref": self.ref, "width": self.width, "height": self.height, "format": self.format,
                "size": self.size, "sha256": self.sha256, "dhash": self.dhash}


def dhash(img: Image.Image, size: int = 8) -> str:
    """Difference hash: 64 bits of left/right brightness gradients, as 16 hex chars."""
    from PIL import Image  # imported on first screenshot: a process that only retrieves never needs it

    small = img.convert("L").resize((size + 1, size), Image.Resampling.BILINEAR)
    px = small.tobytes()
    bits = 0
    for row in range(size):
        base = row * (size + 1)
        for col in range(size):
            bits = (bits << 1) | (1 if px[base + col] > px[base + col + 1] else 0)
    return f"{bits:0{size * size // 4}x}"


def hamming(a: str, b: str) -> int:
    """Bit distance between two hex dHashes."""
    return bin(int(a, 16) ^ int(b, 16)).count("1")


def encode_image(image: Any) -> tuple[bytes, str]:
    """Return (bytes, format) for screenshot input: encoded bytes as given, or a PIL image as JPEG."""
    if isinstance(image, (bytes, bytearray, memoryview)):
        raw = bytes(image)
        fmt = image_format(raw)
        if fmt is None:
            raise ValueError("screenshot bytes are not PNG, JPEG, WEBP or GIF")
        return raw, fmt
    pil = sys.modules.get("PIL.Image")  # a PIL image exists only if its caller imported PIL
    if pil is not None and isinstance(image, pil.Image):
        buf = io.BytesIO()
        img = image.convert("RGB") if image.mode not in ("RGB", "L") else image
        img.save(buf, format="JPEG", quality=80)
        return buf.getvalue(), "jpg"
    raise ValueError(f"unsupported screenshot type {type(image).__name__}")


def inspect_image(raw: bytes) -> tuple[int, int, str | None]:
    """Width, height and dHash of encoded image bytes (dHash None if undecodable)."""
    from PIL import Image

    with Image.open(io.BytesIO(raw)) as img:
        width, height = img.size
        try:
            # JPEG draft mode decodes at 1/8 scale: the hash needs 9x8 pixels, not 640x1200.
            img.draft("L", (max(16, width // 8), max(16, height // 8)))
            return width, height, dhash(img)
        except (OSError, ValueError):
            return width, height, None


def store_image(artifacts_dir: Path, name: str, raw: bytes, fmt: str, *, root: Path | None = None) -> ImageInfo:
    """Write a screenshot into artifacts/ atomically and return its metadata (never through a link below
    ``root``, the memory root, when given)."""
    width, height, dh = inspect_image(raw)
    ref = f"artifacts/{name}.{fmt}"
    atomic_write(artifacts_dir / f"{name}.{fmt}", raw, root=root)
    return ImageInfo(ref, width, height, fmt, len(raw), hashlib.sha256(raw).hexdigest(), dh)
