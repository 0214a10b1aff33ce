"""What retrieval reads of an index line is the same on its quick path (a line of none of the fields that change a
memory's features beyond status and confidence, most of a large store's, read by a fresh process's first retrieve)
as when every field is asked, whatever a person wrote in those fields.

It reaches inside `retrieval/_features` for the general path, asked directly.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_plane.retrieval._features import APP_BOUND, general_features, memory_features

_ANY = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True, allow_infinity=True),
                 st.text(max_size=8), st.sampled_from(["active", " Active ", "", "  ", "replaced", "fleet", "user"]),
                 st.lists(st.text(max_size=4), max_size=3), st.dictionaries(st.text(max_size=4), st.text(max_size=4),
                                                                            max_size=2))
_PLAIN = ["id", "type", "status", "title", "summary", "source", "priority", "confidence", "tags", "entities",
          "created_at", "path"]
_OTHER = ["success_count", "failure_count", "traceability", "conflicts_with", "verified", "last_validated_at",
          "updated_at", "expires_at", "applicability", "device_id", "language", "screen", "app"]


@settings(max_examples=400, deadline=None)
@given(line=st.dictionaries(st.sampled_from(_PLAIN), _ANY, max_size=len(_PLAIN)),
       extra=st.dictionaries(st.sampled_from(_OTHER), _ANY, max_size=3),
       item_type=st.sampled_from(["long_term", "fact", "rule", *APP_BOUND]), evidence=st.booleans())
def test_the_quick_path_reads_a_line_as_every_field_asked_does(line: dict[str, Any], extra: dict[str, Any],
                                                               item_type: str, evidence: bool) -> None:
    for e in (line, {**line, **extra}):
        assert memory_features(e, item_type, evidence) == general_features(e, item_type, evidence)
