"""The magics' settings that are agent options go through one table (``OPTION_TRAITS``): each
row is a configurable trait and an agent option, reaches the agent built from the settings,
and a change of it rebuilds the agent (#31 item 5). In process, no kernel."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from traitlets import TraitError

from lite_agent_jupyter.agent.options import OPTION_NAMES
from lite_agent_jupyter.agent.usage import Price
from lite_agent_jupyter.jupyter.agent_builder import OPTION_TRAITS
from lite_agent_jupyter.jupyter.magics import LiteAgentMagics, use_model
from lite_agent_jupyter.providers import scripted

SETTINGS: dict[str, Any] = {
    "model_name": "my-model",
    "sessions": False,
    "system_prompt": "Be brief.",
    "max_turns": 7,
    "max_turn_tokens": 1234,
    "max_turn_cost": 0.5,
    "max_session_cost": 2.0,
    "prices": {"my-model": {"input": 1.0, "output": 2.0}},
    "approvals": "allow",
    "mcp_servers": {"mcpServers": {"files": {"command": "true"}}},
    "hooks": {"turn_end": "os.path:basename"},
    "refuse_network_fs": True,
    "require_same_user_approval": True,
}
"""A value other than the default for every row of the table."""


@pytest.fixture
def magics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiteAgentMagics]:
    monkeypatch.chdir(tmp_path)
    magics = LiteAgentMagics(shell=None)
    magics.storage_root = str(tmp_path / "store")
    use_model(scripted([]))
    yield magics
    use_model(None)
    magics.close()


def test_every_row_is_a_setting_and_an_option() -> None:
    for name in OPTION_TRAITS:
        assert name in OPTION_NAMES, name
        assert LiteAgentMagics.class_traits()[name].metadata.get("config"), name
    assert set(SETTINGS) == set(OPTION_TRAITS)


def test_each_setting_reaches_the_agent(magics: LiteAgentMagics) -> None:
    for name, value in SETTINGS.items():
        setattr(magics, name, value)
    agent = magics.builder.agent()
    assert agent is not None
    options = agent.options
    assert options.model_name == "my-model" and options.sessions is False
    assert options.system_prompt == "Be brief." and options.max_turns == 7
    assert options.max_turn_tokens == 1234
    assert (options.max_turn_cost, options.max_session_cost) == (0.5, 2.0)
    assert options.prices is not None
    assert options.prices["my-model"] == Price(input=1.0, output=2.0)
    assert options.approvals == "allow"
    assert [server.name for server in options.mcp_servers] == ["files"]  # type: ignore[union-attr]
    assert options.hooks is not None and "turn_end" in options.hooks
    assert options.refuse_network_fs is True and options.require_same_user_approval is True


def test_a_change_of_any_row_rebuilds_the_agent(magics: LiteAgentMagics) -> None:
    model = magics.builder.build_model()
    assert model is not None
    for name, value in SETTINGS.items():
        before = magics.builder._settings_key(model)
        setattr(magics, name, value)
        assert magics.builder._settings_key(model) != before, name


def test_a_bad_setting_is_still_refused_by_its_trait(magics: LiteAgentMagics) -> None:
    with pytest.raises(TraitError):
        magics.max_turns = "many"


def test_the_settings_are_read_again_only_after_a_change(magics: LiteAgentMagics) -> None:
    """#32: each cell computes the settings key; the traits are read once per change of a
    setting, not each cell, and a dict changed in place still rebuilds the agent."""
    model = magics.builder.build_model()
    assert model is not None
    key = magics.builder._settings_key(model)
    read = magics.builder._traits_read
    assert magics.builder._settings_key(model) == key and magics.builder._traits_read is read
    magics.max_turns = 9
    assert magics.builder._settings_key(model) != key and magics.builder._traits_read is not read
    key = magics.builder._settings_key(model)
    magics.hooks["turn_end"] = "os.path:basename"  # in place: no trait event
    assert magics.builder._settings_key(model) != key


def test_the_key_follows_the_folder_and_the_notebook(
    magics: LiteAgentMagics, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The notebook's location is kept between cells (#32), but moving to another folder
    or naming another notebook gives a new one, and a new key."""
    model = magics.builder.build_model()
    assert model is not None
    magics.builder.agent()
    key, location = magics.builder._settings_key(model), magics.location
    magics.builder.agent()
    assert magics.location is location and magics.builder._settings_key(model) == key
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path / "other")
    magics.builder.agent()
    assert magics.location.folder == tmp_path / "other"
    assert magics.builder._settings_key(model) != key
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "analysis.ipynb"))
    magics.builder.agent()
    assert magics.location.notebook == tmp_path / "analysis.ipynb"


def test_the_magics_agent_is_the_builders(magics: LiteAgentMagics) -> None:
    """#31: building the agent is ``magics.builder``'s; ``magics.agent()`` (an alias for
    one release) and ``use_model`` / ``MODEL`` of the magics module are the builder's."""
    from lite_agent_jupyter.jupyter import agent_builder
    from lite_agent_jupyter.jupyter import magics as module

    agent = magics.agent()
    assert agent is not None and agent is magics.builder.agent()
    assert module.use_model is agent_builder.use_model and module.MODEL is agent_builder.MODEL
    assert agent.model is agent_builder.MODEL.provider


def test_a_cell_without_options_gets_the_parsers_defaults() -> None:
    """#32: most cells have no options; they skip ``shlex`` and the parser, with the same
    answer, a fresh one each time."""
    from lite_agent_jupyter.jupyter.magics import _cell_parser, cell_options

    first = cell_options("  ")
    assert first == _cell_parser().parse_args([])
    first.quiet = True
    assert cell_options("").quiet is False
    assert cell_options("--quiet --session abc").session == "abc"
