"""Provider-neutral messages (role + text/image/tool parts) and the adapter to google-genai Content."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from .._sanitize import image_format

Role = Literal["system", "user", "model", "tool"]


@dataclass(frozen=True)
class Part:
    """One piece of a message: text, an image reference, a tool call or a tool result."""

    kind: Literal["text", "image", "call", "result"]
    text: str = ""
    ref: str | None = None  # image: path relative to the episode folder
    mime: str | None = None
    name: str | None = None  # call/result: tool name
    args: dict[str, Any] | None = None  # call: arguments; result: response
    call_id: str | None = None
    signature: str | None = None  # call: the model's thought signature (base64), returned with its turn

    def key(self) -> str:
        """A stable serialisation (what prefix hashes are computed over)."""
        return json.dumps({"k": self.kind, "t": self.text, "r": self.ref, "n": self.name, "a": self.args,
                           "c": self.call_id}, ensure_ascii=False, sort_keys=True, default=str)


@dataclass(frozen=True)
class Message:
    """A message of the transcript."""

    role: Role
    parts: tuple[Part, ...] = field(default_factory=tuple)
    step: int | None = None
    zone: Literal["S", "F", "A", "T"] = "A"

    def key(self) -> str:
        """A stable serialisation."""
        return f"{self.role}|{self.zone}|{self.step}|" + "|".join(p.key() for p in self.parts)

    def text(self) -> str:
        """All text of the message."""
        return "\n".join(p.text for p in self.parts if p.kind == "text")

    def images(self) -> list[str]:
        """Image references in the message."""
        return [p.ref for p in self.parts if p.kind == "image" and p.ref]


def text(t: str) -> Part:
    """A text part."""
    return Part("text", text=t)


def image(ref: str, mime: str = "image/jpeg") -> Part:
    """An image part referring to a file of the episode."""
    return Part("image", ref=ref, mime=mime)


def to_genai(messages: Iterable[Message], load_image: Callable[[str], bytes]) -> tuple[str | None, list[Any]]:
    """Convert to (system_instruction, contents) of google-genai; images are read through load_image."""
    from google.genai import types  # imported lazily: 0.4 s that retrieval and recording never pay

    system: list[str] = []
    contents: list[Any] = []
    for m in messages:
        if m.role == "system":
            system.append(m.text())
            continue
        parts = []
        for p in m.parts:
            if p.kind == "text":
                parts.append(types.Part.from_text(text=p.text))
            elif p.kind == "image" and p.ref:
                data = load_image(p.ref)
                # The type the bytes really have (a PNG labelled image/jpeg is refused or misread).
                fmt = image_format(data)
                parts.append(types.Part.from_bytes(data=data, mime_type=f"image/{'jpeg' if fmt == 'jpg' else fmt}"
                                                   if fmt else p.mime or "image/jpeg"))
            elif p.kind == "call":
                fc = types.FunctionCall(name=p.name or "tool", args=p.args or {}, id=p.call_id)
                sig = _signature_bytes(p.signature)
                part = types.Part(function_call=fc, thought_signature=sig) if sig else types.Part(function_call=fc)
                parts.append(part)
            elif p.kind == "result":
                parts.append(types.Part(function_response=types.FunctionResponse(
                    name=p.name or "tool", response=p.args or {}, id=p.call_id)))
        role = "model" if m.role == "model" else "user"
        if contents and contents[-1].role == role:
            # One turn per role change: a function response and the next step's text go in one user turn.
            contents[-1] = types.Content(role=role, parts=[*(contents[-1].parts or []), *parts])
        else:
            contents.append(types.Content(role=role, parts=parts))
    return ("\n\n".join(system) if system else None), contents


def _signature_bytes(sig: str | None) -> bytes | None:
    """A stored thought signature (base64 text) as the bytes the SDK sends back."""
    if not sig:
        return None
    import base64
    import binascii

    try:
        return base64.b64decode(sig, validate=True)
    except (binascii.Error, ValueError):
        return None
