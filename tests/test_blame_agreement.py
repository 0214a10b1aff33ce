"""Blame and credit need real agreement: a failure weighs against a procedure only when the failed task
followed it beyond the way into the app, on steps that name what they acted on; a procedure the agent
followed and got stuck on (a step retried without effect) is blamed; a success renews a procedure only by
taking all its steps; an app profile shown to a failed task counts the failure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from task_runs import record_task as run

from memory_plane import MemoryPlane
from memory_plane.device_memory import AppProfile, Procedure
from memory_plane.lifecycle import read_jsonl

LAUNCHER = {"app": "Launcher", "page": "Home", "package": "com.android.launcher3"}




def procedures(plane: MemoryPlane) -> list[Procedure]:
    found = [plane.device.get(e["id"]) for e in plane.device.entries("procedure")]
    return [p for p in found if isinstance(p, Procedure)]


def conflict_rules(plane: MemoryPlane, item_id: str) -> list[str]:
    return [c["rule"] for c in read_jsonl(plane.root / "lifecycle" / "conflicts.jsonl").records
            if item_id in c.get("ids", [])]


def gmail(page: str, **extra: Any) -> dict[str, Any]:
    return {"app": "Gmail", "page": page, "package": "com.google.android.gm", **extra}


# The compose path: the launcher's Gmail icon, then an unlabelled compose button and an unlabelled tap on
# the To field, then labelled steps.
COMPOSE = [("home", {}, None, LAUNCHER),
           ("tap", {"x": 300, "y": 1500}, "Gmail", gmail("Inbox")),
           ("tap", {"x": 980, "y": 2000}, None, gmail("Compose")),
           ("tap", {"x": 100, "y": 400}, None, gmail("Compose", focus="to")),
           ("keyboard_text", {"text": "bob@example.com"}, None, gmail("Compose", visible_text=["bob@example.com"])),
           ("tap", {"x": 900, "y": 150}, "Attach file", gmail("Picker")),
           ("tap", {"x": 300, "y": 500}, "report.pdf", gmail("Draft")),
           ("tap", {"x": 1000, "y": 150}, "Send", gmail("Sent"))]
# A search that shares the way into the app and, by chance, an unlabelled tap at the same point.
SEARCH = [("home", {}, None, LAUNCHER),
          ("tap", {"x": 300, "y": 1500}, "Gmail", gmail("Inbox")),
          ("tap", {"x": 540, "y": 150}, None, gmail("Search")),
          ("keyboard_text", {"text": "Project"}, None, gmail("Search", visible_text=["Project"])),
          ("tap", {"x": 100, "y": 400}, None, gmail("Message"))]


def test_a_path_sharing_only_the_way_in_and_unlabelled_taps_does_not_blame_a_procedure(tmp_path: Path) -> None:
    with MemoryPlane.open(tmp_path / "m") as plane:
        run(plane, "Compose an e-mail to bob@example.com in Gmail and attach report.pdf", COMPOSE)
        (compose,) = procedures(plane)
        for _ in range(2):
            _, ctx = run(plane, "Search e-mails in Gmail for 'Project' and flag them", SEARCH, success=False,
                         failure_phase="state_mismatch", failure_reason="no flag button")
            assert compose.id in ctx.refs()  # shown: the outcome update weighed it
        cur = plane.device.get(compose.id)
        assert isinstance(cur, Procedure) and cur.status == "active" and cur.failure_count == 0
        assert conflict_rules(plane, compose.id) == []


def notes(page: str, **extra: Any) -> dict[str, Any]:
    return {"app": "Keep Notes", "page": page, "package": "com.google.android.keep", **extra}


WRITE = [("launch_app", {"app": "Keep Notes"}, None, notes("List")),
         ("tap", {"x": 950, "y": 2200}, "New note", notes("Editor")),
         ("keyboard_text", {"text": "Buy milk"}, None, notes("Editor", visible_text=["Buy milk"])),
         ("tap", {"x": 1000, "y": 150}, "Save", notes("Saved")),
         ("tap", {"x": 540, "y": 2200}, "Done", notes("Done"))]


def test_a_declared_procedure_whose_step_was_retried_without_effect_is_blamed(tmp_path: Path) -> None:
    goal = "Write a note 'Buy milk' in Keep Notes and save it"
    with MemoryPlane.open(tmp_path / "m") as plane:
        run(plane, goal, WRITE)
        (proc,) = procedures(plane)
        stuck = WRITE[:3] + [("tap", {"x": 1000, "y": 150}, "Save", notes("Editor", visible_text=["Buy milk"]))] * 3

        def declare(rec: Any, ctx: Any) -> None:
            assert proc.id in ctx.refs()
            rec.memory_used(proc.id)

        ep, _ = run(plane, goal, stuck, success=False, before=declare, failure_phase="state_mismatch",
                    failure_reason="the note was not saved")
        cur = plane.device.get(proc.id)
        assert isinstance(cur, Procedure) and cur.failure_count == 1
        assert any(r.type == "outcome" and r.id == ep.id for r in cur.evidence_refs)


def phone(page: str, **extra: Any) -> dict[str, Any]:
    return {"app": "Phone", "page": page, "package": "com.android.dialer", **extra}


SEARCH_CONTACT = [("launch_app", {"app": "Phone"}, None, phone("Home")),
                  ("tap", {"x": 540, "y": 150}, "Search contacts", phone("Search")),
                  ("keyboard_text", {"text": "Alice"}, None, phone("Search", visible_text=["Alice"])),
                  ("tap", {"x": 300, "y": 400}, "Alice", phone("Contact"))]
VIA_TAB = [("launch_app", {"app": "Phone"}, None, phone("Home")),
           ("tap", {"x": 900, "y": 2300}, "Contacts", phone("Contacts")),
           ("tap", {"x": 300, "y": 400}, "Alice", phone("Contact"))]


def test_a_success_through_another_path_does_not_renew_a_procedure(tmp_path: Path) -> None:
    goal = "Find Alice in the Phone app"
    with MemoryPlane.open(tmp_path / "m") as plane:
        run(plane, goal, SEARCH_CONTACT)
        (search,) = procedures(plane)
        ep, ctx = run(plane, goal, VIA_TAB)
        assert search.id in ctx.refs()
        cur = plane.device.get(search.id)
        assert isinstance(cur, Procedure) and cur.success_count == 1
        assert not any(r.id == ep.id for r in cur.evidence_refs)
        # The other path is a procedure of its own, with this success as its evidence.
        (tab,) = [p for p in procedures(plane) if p.id != search.id]
        assert [s.target_label for s in tab.steps][-2:] == ["Contacts", "Alice"]
        # The same path again does renew it.
        run(plane, goal, SEARCH_CONTACT)
        cur = plane.device.get(search.id)
        assert isinstance(cur, Procedure) and cur.success_count == 2


def test_an_app_profile_shown_to_a_failed_task_counts_the_failure(tmp_path: Path) -> None:
    goal = "Find Alice in the Phone app"
    with MemoryPlane.open(tmp_path / "m") as plane:
        run(plane, goal, SEARCH_CONTACT)
        _, ctx = run(plane, goal, SEARCH_CONTACT[:2], success=False, failure_phase="state_mismatch",
                     failure_reason="no contact called Alice")
        assert "app_phone" in ctx.refs()
        prof = plane.device.get("app_phone")
        assert isinstance(prof, AppProfile) and prof.failure_count == 1 and prof.success_count == 1
        assert "no contact called Alice" in prof.known_issues


def deck(page: str, **extra: Any) -> dict[str, Any]:
    return {"app": "CardDeck", "page": page, "package": "org.example.carddeck", **extra}


NEW_DECK = [("launch_app", {"app": "CardDeck"}, None, deck("Decks")),
            ("tap", {"x": 980, "y": 2200}, "Create deck", deck("New deck")),
            ("tap", {"x": 540, "y": 600}, "Deck name", deck("New deck", focus="name")),
            ("keyboard_text", {"text": "Spanish"}, "Deck name", deck("New deck", visible_text=["Spanish"])),
            ("tap", {"x": 900, "y": 900}, "OK", deck("Decks", visible_text=["Spanish"]))]
# Renaming reaches the same form another way (the deck's menu), types into the same field, and fails at OK.
RENAME = [("launch_app", {"app": "CardDeck"}, None, deck("Decks", visible_text=["French"])),
          ("long_press", {"x": 300, "y": 500}, "French", deck("Deck menu")),
          ("tap", {"x": 300, "y": 700}, "Rename", deck("New deck")),
          ("tap", {"x": 540, "y": 600}, "Deck name", deck("New deck", focus="name")),
          ("keyboard_text", {"text": "Italian"}, "Deck name", deck("New deck", visible_text=["Italian"])),
          ("tap", {"x": 900, "y": 900}, "OK", deck("New deck", visible_text=["Italian"],
                                                   dialogs=["A deck with this name already exists"]))]


def test_a_run_that_took_a_later_step_of_a_procedure_on_its_own_way_did_not_follow_it(tmp_path: Path) -> None:
    """Renaming a deck types into the form that creating one uses and fails there; it never started the create
    procedure (its first step past the way in), so the failure does not weigh against it."""
    with MemoryPlane.open(tmp_path / "m") as plane:
        run(plane, "Create a new deck named Spanish in CardDeck", NEW_DECK)
        (create,) = procedures(plane)
        for _ in range(2):
            run(plane, "Rename the deck French to Italian in CardDeck", RENAME, success=False,
                before=lambda rec, ctx: rec.memory_used(create.id),
                failure_phase="execution", failure_reason="the name was refused")
        cur = plane.device.get(create.id)
        assert isinstance(cur, Procedure) and cur.status == "active" and cur.failure_count == 0


def dialer(page: str, **extra: Any) -> dict[str, Any]:
    return {"app": "Dialer", "page": page, "package": "org.example.dialer", **extra}


FIRST_CALL = [("launch_app", {"app": "Dialer"}, None, dialer("Permission")),
              ("tap", {"x": 800, "y": 1400}, "Allow", dialer("Home")),
              ("tap", {"x": 540, "y": 2200}, "Contacts", dialer("Contacts")),
              ("tap", {"x": 300, "y": 500}, "Alice", dialer("Contact card")),
              ("tap", {"x": 540, "y": 900}, "Call", dialer("Calling"))]
# The permission was granted the first time: the dialog never shows again, and Alice's row does nothing.
STUCK = [("launch_app", {"app": "Dialer"}, None, dialer("Home")),
         ("tap", {"x": 540, "y": 2200}, "Contacts", dialer("Contacts")),
         ("tap", {"x": 300, "y": 500}, "Alice", dialer("Contacts")),
         ("tap", {"x": 300, "y": 500}, "Alice", dialer("Contacts"))]


def test_a_run_that_skipped_a_screen_which_never_appeared_still_followed_the_procedure(tmp_path: Path) -> None:
    """A procedure learned the first time holds the one-off permission dialog; a later run that never saw that
    screen and got stuck on the procedure's own step did follow it, and the failure weighs against it."""
    with MemoryPlane.open(tmp_path / "m") as plane:
        run(plane, "Call Alice with the Dialer", FIRST_CALL)
        (call,) = procedures(plane)
        run(plane, "Call Alice with the Dialer", STUCK, success=False,
            before=lambda rec, ctx: rec.memory_used(call.id), failure_phase="execution",
            failure_reason="the contact row does nothing")
        cur = plane.device.get(call.id)
        assert isinstance(cur, Procedure) and cur.failure_count == 1


def trip(page: str, **extra: Any) -> dict[str, Any]:
    return {"app": "Tripnest", "page": page, "package": "org.example.tripnest", **extra}


PHONE_SEARCH = {"app": "Launcher", "page": "Search", "package": "com.android.launcher3"}
ROOM = [("tap", {"x": 300, "y": 1500}, "Tripnest", trip("Home")),
        ("keyboard_text", {"text": "Lisbon"}, None, trip("Home", visible_text=["Lisbon"])),
        ("tap", {"x": 540, "y": 400}, "Search", trip("Results")),
        ("tap", {"x": 540, "y": 600}, "Hotel Lisbon Centre", trip("Hotel")),
        ("tap", {"x": 540, "y": 2200}, "Reserve", trip("Checkout")),
        ("tap", {"x": 540, "y": 580}, "Pay now", trip("Paid"))]
# The same task, the app found through the phone's search (typing its name there), stuck at Pay now.
ROOM_STUCK = [("tap", {"x": 540, "y": 100}, "Search", PHONE_SEARCH),
              ("keyboard_text", {"text": "Tripnest"}, None, PHONE_SEARCH),
              ("tap", {"x": 300, "y": 300}, "Tripnest", trip("Home")),
              ("keyboard_text", {"text": "Krakow"}, None, trip("Home", visible_text=["Krakow"])),
              ("tap", {"x": 540, "y": 400}, "Search", trip("Results")),
              ("tap", {"x": 540, "y": 600}, "Hotel Krakow Centre", trip("Hotel")),
              ("tap", {"x": 540, "y": 2200}, "Reserve", trip("Checkout")),
              ("tap", {"x": 540, "y": 580}, "Pay now", trip("Checkout")),
              ("tap", {"x": 540, "y": 580}, "Pay now", trip("Checkout"))]
# Another task: a car, typed into the car form, stuck at the same Pay now.
CAR_STUCK = [("tap", {"x": 300, "y": 1500}, "Tripnest", trip("Home")),
             ("tap", {"x": 200, "y": 300}, "Cars", trip("Cars")),
             ("keyboard_text", {"text": "Seville"}, None, trip("Cars", visible_text=["Seville"])),
             ("tap", {"x": 540, "y": 400}, "Search cars", trip("Car results")),
             ("tap", {"x": 540, "y": 600}, "Compact", trip("Checkout")),
             ("tap", {"x": 540, "y": 580}, "Pay now", trip("Checkout")),
             ("tap", {"x": 540, "y": 580}, "Pay now", trip("Checkout"))]


def test_a_slot_is_followed_only_on_the_page_the_procedure_fills_it(tmp_path: Path) -> None:
    """The same task found through the phone's search followed the room procedure (its city typed on the app's
    form) and is blamed; a car rental that typed its city into the car form and met the same Pay now did not."""
    with MemoryPlane.open(tmp_path / "m") as plane:
        run(plane, "Book a room in Lisbon on Tripnest", ROOM)
        (room,) = procedures(plane)
        run(plane, "Book a rental car for Seville on Tripnest", CAR_STUCK, success=False,
            before=lambda rec, ctx: rec.memory_used(room.id), failure_phase="execution", failure_reason="stuck")
        cur = plane.device.get(room.id)
        assert isinstance(cur, Procedure) and cur.failure_count == 0
        run(plane, "Book a room in Krakow on Tripnest", ROOM_STUCK, success=False,
            before=lambda rec, ctx: rec.memory_used(room.id), failure_phase="execution", failure_reason="stuck")
        cur = plane.device.get(room.id)
        assert isinstance(cur, Procedure) and cur.failure_count == 1
