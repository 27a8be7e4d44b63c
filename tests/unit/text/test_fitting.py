"""A text within a token count: ``ctxfold.text.fitting.fit_text`` is the one search every
writer that misses its room uses (a render as a transcript, a summary shortened to its
allowance, a tool output's selection)."""

from __future__ import annotations

import ctxfold
from ctxfold.models.summarizers import fit_summary
from ctxfold.text.fitting import fit_text

COUNTER = ctxfold.TiktokenCounter("o200k_base")


def test_a_writer_that_follows_its_room_fits_on_the_second_write() -> None:
    """A transcript counts over the room it was rendered for by its framing: the second
    write, in a room scaled by what the first measured, is within the count."""
    rooms: list[int] = []

    def write(room: int) -> str:
        rooms.append(room)
        return "speaker: " + "word " * int(room * 1.2)  # 20% framing over its room

    fitted = fit_text(write, 200, COUNTER)
    assert fitted.fits and COUNTER.count_text(fitted.text) <= 200
    assert len(rooms) == 2 and rooms[1] < rooms[0] == 200


def test_a_writer_that_moves_in_steps_still_gets_there() -> None:
    """A writer that keeps whole sentences gives the same text for a range of rooms: each
    try is smaller by a share of the room, so the search does not stall on one text."""

    def write(room: int) -> str:
        sentences = room // 40  # one sentence per 40 tokens of room, whole
        return " ".join(
            f"Sentence {k} says something about the parcel." for k in range(sentences + 3)
        )

    fitted = fit_text(write, 400, COUNTER, tries=20)
    assert fitted.fits and COUNTER.count_text(fitted.text) <= 400


def test_a_text_that_cannot_fit_says_so() -> None:
    fitted = fit_text(lambda room: "frame " * 50, 20, COUNTER)
    assert not fitted.fits and fitted.text == "frame " * 50


def test_a_summary_too_long_is_shortened_not_dropped() -> None:
    """A summary that came back over its allowance is shortened extractively to fit,
    whole sentences kept; it is dropped only when no sentence fits (the search once
    stalled on sentence-sized steps and dropped summaries that a shorter one fit)."""
    text = " ".join(
        f"On day {k} Ana moved the parcel {k} from depot {k * 3} to the harbour office."
        for k in range(60)
    )
    for allowance in (30, 75, 160, 400):
        short = fit_summary(text, allowance, COUNTER)
        assert short and COUNTER.count_text(short) <= allowance
        assert short.count("On day") >= allowance // 40  # near its allowance, not far under
    assert fit_summary(text, 3, COUNTER) == ""
