"""Text in any Unicode form is one text where it is compared, keyed or turned into an id: composed and
decomposed, full-width and ordinary."""

from __future__ import annotations

import unicodedata
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_plane import MemoryPlane
from memory_plane.lifecycle import content_hash, slug_id

FORMS = ("NFC", "NFD", "NFKC", "NFKD")
texts = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60)
_settings = settings(max_examples=200, deadline=None)


@_settings
@given(text=texts)
def test_every_form_of_a_text_has_one_hash_and_one_id(text: str) -> None:
    forms = [unicodedata.normalize(f, text) for f in FORMS]  # type: ignore[arg-type]
    assert len({content_hash("long_term", "fact", f) for f in forms}) == 1
    assert len({slug_id(f, "app_") for f in forms}) == 1


@_settings
@given(text=st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=60))
def test_ascii_ids_are_what_they_were(text: str) -> None:
    # The hash of ASCII text is the plain SHA-1 of its trimmed parts, as before text was normalised.
    import hashlib

    assert content_hash(text) == hashlib.sha1(text.strip().encode() + b"\0").hexdigest()[:12]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30)
       .filter(lambda s: s.strip() != ""))
def test_an_app_name_in_any_form_is_one_app(shared_plane: MemoryPlane, name: str) -> None:
    ids = {shared_plane.device.app_profile_id(unicodedata.normalize(f, name)) for f in FORMS}  # type: ignore[arg-type]
    assert len(ids) == 1


def test_cafe_creme_composed_and_decomposed_is_one_app_profile(shared_plane: MemoryPlane) -> None:
    nfc, nfd = unicodedata.normalize("NFC", "Café Crème"), unicodedata.normalize("NFD", "Café Crème")
    assert nfc != nfd
    assert shared_plane.device.app_profile_id(nfc) == shared_plane.device.app_profile_id(nfd)


def test_full_width_wechat_is_wechat(shared_plane: MemoryPlane) -> None:
    assert (shared_plane.device.catalog.canonical("ＷｅＣｈａｔ")
            == shared_plane.device.catalog.canonical("WeChat") is not None)
    assert shared_plane.device.app_profile_id("ＷｅＣｈａｔ") == shared_plane.device.app_profile_id("WeChat")


def test_after_forgetting_the_composed_text_the_decomposed_one_is_ignored(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        text = "Order a Café Crème at the Zorbix corner"
        nfc, nfd = unicodedata.normalize("NFC", text), unicodedata.normalize("NFD", text)
        mem = plane.long_term.save_memory(type="preference", content=nfc)
        assert plane.long_term.save_memory(type="preference", content=nfd).status == "ignored"  # one memory
        assert plane.forget(mem.id, reason="the user asked")
        assert plane.long_term.save_memory(type="preference", content=nfd).status == "ignored"
        assert plane.long_term.save_memory(type="preference",
                                           content=unicodedata.normalize("NFKD", text)).status == "ignored"
        full_width = "Ｏｒｄｅｒ a Café Crème at the Zorbix corner"
        assert plane.long_term.save_memory(type="preference", content=full_width).status == "ignored"
