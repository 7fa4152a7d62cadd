"""fold(): the one pure function turning a session log into the model's message list."""

from __future__ import annotations

from typing import Any

from lite_agent_jupyter.checkpoint.events import (
    AssistantEvent,
    BackgroundCompletedEvent,
    CompactionEvent,
    Event,
    FileSnapshotEvent,
    HookEvent,
    InterruptedEvent,
    ToolResultEvent,
    UnknownEvent,
    UserEvent,
)
from lite_agent_jupyter.checkpoint.fold import INTERRUPTED_RESULT, SUMMARY_PREFIX, fold


def numbered(*events: Event) -> list[Event]:
    for seq, event in enumerate(events, 1):
        event.seq = seq
    return list(events)


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def tool_use(tool_id: str, name: str = "read_file") -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {"path": "a"}}


def said(t: str) -> AssistantEvent:
    return AssistantEvent(content=[text(t)])


def calls(*ids: str, lead: str | None = None) -> AssistantEvent:
    blocks = ([text(lead)] if lead else []) + [tool_use(i) for i in ids]
    return AssistantEvent(content=blocks, stop_reason="tool_use")


def result(tool_id: str, content: str = "r", *, error: bool = False) -> ToolResultEvent:
    return ToolResultEvent(tool_use_id=tool_id, content=content, is_error=error)


def answer(tool_id: str, content: str = "r", *, error: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id, "content": content}
    if error:
        block["is_error"] = True
    return block


def interrupted(tool_id: str) -> dict[str, Any]:
    return answer(tool_id, INTERRUPTED_RESULT, error=True)


def test_empty_log() -> None:
    assert fold([]) == []


def test_user_assistant_tool_result() -> None:
    log = numbered(
        UserEvent(content="read a", checkpoint=True),
        calls("t1", lead="reading"),
        result("t1", "contents of a"),
        said("a says hi"),
    )
    assert fold(log) == [
        {"role": "user", "content": [text("read a")]},
        {"role": "assistant", "content": [text("reading"), tool_use("t1")]},
        {"role": "user", "content": [answer("t1", "contents of a")]},
        {"role": "assistant", "content": [text("a says hi")]},
    ]


def test_content_blocks_and_error_results() -> None:
    blocks = [text("look"), {"type": "image", "source": {"type": "base64", "data": "AA=="}}]
    log = numbered(UserEvent(content=blocks), calls("t1"), result("t1", "boom", error=True))
    messages = fold(log)
    assert messages[0] == {"role": "user", "content": blocks}
    assert messages[2] == {"role": "user", "content": [answer("t1", "boom", error=True)]}


def test_consecutive_roles_merge_with_tool_results_first() -> None:
    log = numbered(
        UserEvent(content="one"),
        UserEvent(content="two", origin="internal"),
        calls("t1", "t2"),
        result("t2", "second"),
        result("t1", "first"),
        UserEvent(content="and now?", checkpoint=True),
        said("part 1"),
        said("part 2"),
    )
    assert fold(log) == [
        {"role": "user", "content": [text("one"), text("two")]},
        {"role": "assistant", "content": [tool_use("t1"), tool_use("t2")]},
        {
            "role": "user",
            "content": [answer("t2", "second"), answer("t1", "first"), text("and now?")],
        },
        {"role": "assistant", "content": [text("part 1"), text("part 2")]},
    ]


def test_roles_alternate_whatever_the_log() -> None:
    log = numbered(
        UserEvent(content="a"),
        UserEvent(content="b", origin="background"),
        said("x"),
        AssistantEvent(content=[]),  # empty: dropped
        said("y"),
        UserEvent(content="c"),
    )
    roles = [m["role"] for m in fold(log)]
    assert roles == ["user", "assistant", "user"]


def test_dangling_tool_use_gets_a_synthetic_result_when_the_conversation_moves_on() -> None:
    log = numbered(
        UserEvent(content="go", checkpoint=True),
        calls("t1", "t2"),
        result("t1", "done"),
        InterruptedEvent(reason="kernel interrupted"),
        UserEvent(content="what happened?", checkpoint=True),
    )
    assert fold(log)[2] == {
        "role": "user",
        "content": [answer("t1", "done"), interrupted("t2"), text("what happened?")],
    }


def test_dangling_tool_use_before_another_assistant_message() -> None:
    log = numbered(UserEvent(content="go"), calls("t1"), said("never mind"))
    assert fold(log) == [
        {"role": "user", "content": [text("go")]},
        {"role": "assistant", "content": [tool_use("t1")]},
        {"role": "user", "content": [interrupted("t1")]},
        {"role": "assistant", "content": [text("never mind")]},
    ]


def test_unanswered_tool_use_at_the_end_is_left_alone() -> None:
    """Tools may still be running: the agent, not the fold, decides they were interrupted."""
    log = numbered(UserEvent(content="go"), calls("t1"))
    assert fold(log)[-1] == {"role": "assistant", "content": [tool_use("t1")]}


def test_results_answering_no_open_call_are_dropped() -> None:
    log = numbered(UserEvent(content="go"), result("ghost"), said("hi"), result("t9"))
    assert fold(log) == [
        {"role": "user", "content": [text("go")]},
        {"role": "assistant", "content": [text("hi")]},
    ]


def test_records_for_people_are_invisible_to_the_model() -> None:
    log = numbered(
        UserEvent(content="edit a", checkpoint=True),
        FileSnapshotEvent(path="a.py", before=None, after="0" * 64),
        InterruptedEvent(reason="x"),
        BackgroundCompletedEvent(job_id="j", summary="ok", exit_code=0),
        UnknownEvent(unknown_type="future", extra={"k": 1}),
        said("edited"),
    )
    assert fold(log) == [
        {"role": "user", "content": [text("edit a")]},
        {"role": "assistant", "content": [text("edited")]},
    ]


def test_hook_context_joins_its_prompt_and_decisions_stay_records() -> None:
    log = numbered(
        HookEvent(hook="session_start", decision="context", context="a demo project"),
        UserEvent(content="run it", checkpoint=True),
        HookEvent(hook="prompt_submit", decision="context", context="today is Tuesday"),
        calls("t1"),
        HookEvent(hook="pre_tool", decision="deny", reason="no", tool_use_id="t1"),
        result("t1", "no", error=True),
        HookEvent(hook="pre_tool", decision="rewrite", input={"path": "b"}),
        said("ok"),
    )
    assert fold(log) == [
        {
            "role": "user",
            "content": [text("a demo project"), text("run it"), text("today is Tuesday")],
        },
        {"role": "assistant", "content": [tool_use("t1")]},
        {"role": "user", "content": [answer("t1", "no", error=True)]},
        {"role": "assistant", "content": [text("ok")]},
    ]


def test_origin_does_not_hide_input() -> None:
    """Background completions and internal notices are input the model must see."""
    log = numbered(
        UserEvent(content="start the build", checkpoint=True),
        said("started in the background"),
        UserEvent(content="build finished: exit 0", origin="background"),
        said("the build passed"),
        UserEvent(content="files were rewound to checkpoint 1", origin="internal"),
    )
    user_texts = [m["content"][0]["text"] for m in fold(log) if m["role"] == "user"]
    assert user_texts == [
        "start the build",
        "build finished: exit 0",
        "files were rewound to checkpoint 1",
    ]


def test_compaction_replaces_what_it_summarises() -> None:
    log = numbered(
        UserEvent(content="old 1", checkpoint=True),  # 1
        said("old answer"),  # 2
        UserEvent(content="old 2", checkpoint=True),  # 3
        said("kept answer"),  # 4
        CompactionEvent(summary="we talked", through_seq=3, before=100, after=10),  # 5
        UserEvent(content="new", checkpoint=True),  # 6
    )
    assert fold(log) == [
        {"role": "user", "content": [text(SUMMARY_PREFIX + "we talked")]},
        {"role": "assistant", "content": [text("kept answer")]},
        {"role": "user", "content": [text("new")]},
    ]


def test_events_logged_during_compaction_are_kept() -> None:
    log = numbered(
        UserEvent(content="q"),  # 1
        said("a"),  # 2 (summarised)
        UserEvent(content="background result", origin="background"),  # 3 (after through_seq)
        CompactionEvent(summary="s", through_seq=2),  # 4
    )
    assert fold(log) == [
        {"role": "user", "content": [text(SUMMARY_PREFIX + "s"), text("background result")]},
    ]


def test_latest_compaction_wins() -> None:
    log = numbered(
        UserEvent(content="a"),  # 1
        CompactionEvent(summary="first", through_seq=1),  # 2
        said("b"),  # 3
        UserEvent(content="c"),  # 4
        CompactionEvent(summary="second", through_seq=4),  # 5
        said("d"),  # 6
    )
    assert fold(log) == [
        {"role": "user", "content": [text(SUMMARY_PREFIX + "second")]},
        {"role": "assistant", "content": [text("d")]},
    ]


def test_compacted_tool_use_drops_its_late_result() -> None:
    log = numbered(
        UserEvent(content="go"),  # 1
        calls("t1"),  # 2 (summarised)
        result("t1"),  # 3: answers a call the model no longer sees
        CompactionEvent(summary="s", through_seq=2),  # 4
        UserEvent(content="next"),  # 5
    )
    assert fold(log) == [
        {"role": "user", "content": [text(SUMMARY_PREFIX + "s"), text("next")]},
    ]


def test_fold_is_pure() -> None:
    log = numbered(UserEvent(content=[text("hi")]), calls("t1"), result("t1"))
    snapshot = [repr(e) for e in log]
    first = fold(log)
    first[0]["content"][0]["text"] = "mutated"
    assert [repr(e) for e in log] == snapshot
    assert fold(log)[0]["content"][0]["text"] == "hi"


# -- the incremental fold equals the pure one ------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from lite_agent_jupyter.checkpoint.fold import Folder  # noqa: E402


@st.composite
def _logs(draw: st.DrawFn) -> list[Event]:
    """Random but plausible logs: prompts, answers with tool calls, results (some missing,
    some late), compactions, and records the model never sees."""
    events: list[Event] = []
    open_calls: list[str] = []
    for seq in range(1, draw(st.integers(0, 40)) + 1):
        kind = draw(st.sampled_from(["user", "assistant", "result", "compaction", "other"]))
        if kind == "user":
            events.append(UserEvent(seq=seq, content=draw(st.sampled_from(["hi", "", "go on"]))))
        elif kind == "assistant":
            calls = [f"t{seq}_{i}" for i in range(draw(st.integers(0, 2)))]
            blocks: list[dict[str, Any]] = [{"type": "text", "text": f"a{seq}"}]
            blocks += [{"type": "tool_use", "id": c, "name": "x", "input": {}} for c in calls]
            events.append(AssistantEvent(seq=seq, content=blocks))
            open_calls = calls
        elif kind == "result" and open_calls:
            call = open_calls.pop(draw(st.integers(0, len(open_calls) - 1)))
            events.append(ToolResultEvent(seq=seq, tool_use_id=call, content="r"))
        elif kind == "compaction":
            through = draw(st.integers(0, seq - 1))
            events.append(CompactionEvent(seq=seq, summary=f"s{seq}", through_seq=through))
        elif draw(st.booleans()):
            events.append(HookEvent(seq=seq, hook="prompt_submit", context=f"c{seq}"))
        else:
            events.append(InterruptedEvent(seq=seq, reason="x"))
    return events


@settings(max_examples=300, deadline=None)
@given(_logs(), st.data())
def test_incremental_fold_equals_the_pure_fold(events: list[Event], data: st.DataObject) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(events)), max_size=6)))
    folder = Folder.of(events[: cuts[0]] if cuts else [])
    snapshots = []
    start = cuts[0] if cuts else 0
    for end in [*cuts[1:], len(events)]:
        snapshots.append((end, folder.snapshot(), fold(events[:start])))
        if not folder.extend(events[start:end]):
            folder = Folder.of(events[:end])
        start = end
    assert folder.messages == fold(events)
    for _, snapshot, expected in snapshots:  # earlier snapshots were not changed afterwards
        assert snapshot == expected


def test_folder_tracks_cache_control_of_the_users_blocks() -> None:
    plain = Folder.of([UserEvent(seq=1, content="hi"), AssistantEvent(seq=2, content=[])])
    assert not plain.has_cache_control
    marked = {"type": "text", "text": "big doc", "cache_control": {"type": "ephemeral"}}
    plain.extend([UserEvent(seq=3, content=[marked])])
    assert plain.has_cache_control
    assert Folder.of([UserEvent(seq=1, content=[marked])]).has_cache_control
