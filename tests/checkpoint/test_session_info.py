"""SessionInfo: what a listing returns per session, cheap to build and still a value."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime, timedelta, timezone

import pytest

from lite_agent_jupyter.checkpoint import SessionInfo
from lite_agent_jupyter.checkpoint.protocol import page, page_key

WHEN = datetime(2026, 12, 1, 9, 30, 0, 123456, tzinfo=UTC)


def test_fields_keywords_and_defaults() -> None:
    info = SessionInfo("abc", WHEN, title="Load data", turns=3, head=12)
    assert (info.id, info.mtime, info.title, info.turns, info.head) == (
        "abc",
        WHEN,
        "Load data",
        3,
        12,
    )
    bare = SessionInfo("abc", WHEN)
    assert (bare.title, bare.turns, bare.head) == (None, None, None)
    assert bare.timestamp == WHEN.timestamp()


def test_mtime_is_utc_to_the_microsecond_whatever_it_was_given() -> None:
    """A backend hands POSIX seconds (built in C, no datetime per row); a user hands a
    datetime in any zone: either way ``mtime`` is the same instant, in UTC."""
    paris = WHEN.astimezone(timezone(timedelta(hours=1)))
    for given in (WHEN, paris, WHEN.timestamp()):
        info = SessionInfo("abc", given)
        assert info.mtime == WHEN and info.mtime.tzinfo is UTC
    from_row = tuple.__new__(SessionInfo, ("abc", WHEN.timestamp(), None, 0, 1))
    assert from_row == SessionInfo("abc", WHEN, turns=0, head=1)
    assert from_row.mtime == WHEN


def test_a_value_immutable_hashable_picklable() -> None:
    info = SessionInfo("abc", WHEN, title="t", turns=1, head=2)
    assert info == SessionInfo("abc", WHEN, title="t", turns=1, head=2)
    assert info != SessionInfo("abc", WHEN, title="t", turns=2, head=2)
    assert len({info, SessionInfo("abc", WHEN, title="t", turns=1, head=2)}) == 1
    with pytest.raises(AttributeError):
        info.title = "other"  # type: ignore[misc]
    back = pickle.loads(pickle.dumps(info))
    assert back == info and type(back) is SessionInfo and back.mtime == WHEN
    assert repr(info) == (f"SessionInfo(id='abc', mtime={WHEN!r}, title='t', turns=1, head=2)")


def test_page_orders_newest_first_ties_by_id() -> None:
    """The helper for backends holding every session in memory: the protocol's order
    (mtime, then id, both descending) and its cursor."""
    a, b, c = (SessionInfo(sid, WHEN) for sid in "abc")
    older = SessionInfo("z", WHEN - timedelta(seconds=1))
    everything = page([older, a, c, b], None, None)
    assert everything == [c, b, a, older]
    assert [page_key(i) for i in everything] == sorted(map(page_key, everything), reverse=True)
    assert page([older, a, c, b], 2, None) == [c, b]
    assert page([older, a, c, b], 2, b) == [a, older]
    assert page([older, a, c, b], None, older) == []
