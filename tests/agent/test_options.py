"""The agent's options declared once (#31 item 5): ``AgentOptionsDict`` types the keywords
``create_lite_agent`` passes on as they are, ``AgentOptions`` checks them, and a per-call
``None`` means the agent's option in one place (``AgentOptions.for_turn``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from lite_agent_jupyter import AgentOptions, AgentOptionsDict, create_lite_agent
from lite_agent_jupyter.agent.budget import Budget
from lite_agent_jupyter.providers import scripted


def test_the_keywords_are_the_options() -> None:
    """Both declarations name the same options, and only ``model`` is required."""
    fields = {f.name: f for f in dataclasses.fields(AgentOptions)}
    assert AgentOptionsDict.__required_keys__ | AgentOptionsDict.__optional_keys__ == set(fields)
    assert AgentOptionsDict.__required_keys__ == {"model"}
    no_default = {
        name
        for name, f in fields.items()
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    assert no_default == {"model"}


async def test_keywords_are_passed_on_and_checked_by_the_options(workdir: Path) -> None:
    """Any path, any iterable of tools, any sequence of names: ``AgentOptions`` makes them
    their checked form, as ``create_lite_agent`` did by hand before."""
    relative = workdir.parent / "x" / ".." / workdir.name
    agent = create_lite_agent(
        model=scripted([]),
        workdir=str(relative),
        sessions=False,
        tools=iter(()),
        secret_env=["MY_TOKEN"],
        max_turns=7,
    )
    try:
        options = agent.options
        assert options.workdir == workdir.resolve() and agent.workdir == workdir.resolve()
        assert options.tools == () and options.secret_env == ("MY_TOKEN",)
        assert options.max_turns == 7 and options.max_tokens == 8192  # the field's default
    finally:
        await agent.close()
    with pytest.raises(TypeError, match="secret_env= takes a sequence"):
        create_lite_agent(model=scripted([]), workdir=workdir, secret_env="MY_TOKEN")  # type: ignore[typeddict-item]
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'model'"):
        create_lite_agent()  # type: ignore[call-arg]


def test_a_turn_takes_what_it_is_given_and_the_options_for_the_rest(workdir: Path) -> None:
    options = AgentOptions(
        model=scripted([]),
        workdir=workdir,
        max_turn_tokens=500,
        max_turn_cost=1.0,
        max_session_cost=5.0,
        task_list="team",
    )
    default = options.for_turn()
    assert default.task_list == "team"
    assert default.budget == Budget(500, 1.0, 5.0)
    given = options.for_turn(
        task_list="mine", max_turn_tokens=10, max_turn_cost=0.5, max_session_cost=2
    )
    assert given.task_list == "mine"
    assert given.budget == Budget(10, 0.5, 2.0)
    partly = options.for_turn(max_turn_cost=0.25)
    assert partly.budget == Budget(500, 0.25, 5.0) and partly.task_list == "team"
    bare = AgentOptions(model=scripted([]), workdir=workdir).for_turn()
    assert bare.task_list is None and bare.budget == Budget(None, None, None)


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ({"max_turn_tokens": 0}, ValueError),
        ({"max_turn_tokens": "10"}, TypeError),
        ({"max_turn_cost": -1.0}, ValueError),
        ({"max_session_cost": "1"}, TypeError),
        ({"task_list": "no/such name"}, ValueError),
    ],
)
def test_a_bad_value_for_one_turn_is_refused(
    workdir: Path, given: dict[str, object], error: type[Exception]
) -> None:
    options = AgentOptions(model=scripted([]), workdir=workdir)
    with pytest.raises(error):
        options.for_turn(**given)  # type: ignore[arg-type]
