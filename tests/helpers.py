"""Small builders shared by tests: screenshots and scripted episodes."""

from __future__ import annotations

import io

from PIL import Image, ImageDraw


def screenshot(label: str = "home", size: tuple[int, int] = (640, 1200), fmt: str = "JPEG") -> bytes:
    """A real encoded image whose content depends on label."""
    img = Image.new("RGB", size, (240, 240, 240))
    d = ImageDraw.Draw(img)
    seed = sum(label.encode())
    for i in range(12):
        x = (seed * (i + 3) * 37) % size[0]
        y = (seed * (i + 7) * 53) % size[1]
        d.rectangle([x, y, x + 120, y + 60], fill=((seed * i) % 255, (seed * 3 + i * 40) % 255, 120))
    d.text((20, 20), label, fill=(0, 0, 0))
    buf = io.BytesIO()
    img.save(buf, format=fmt, quality=70) if fmt == "JPEG" else img.save(buf, format=fmt)
    return buf.getvalue()
