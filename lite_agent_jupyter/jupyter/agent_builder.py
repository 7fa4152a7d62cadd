"""Building the kernel's agent from the magics' settings (#31: one object per concept).

:class:`AgentBuilder` is held by :class:`~.magics.LiteAgentMagics` as ``magics.builder``.
It owns what the agent is built from and the state of building it: the model (``use_model``'s
stand-in, the server of ``base_url``, Claude with the key of ``%agent key`` or the
environment, teaching mode's recorder or replay), its cached client, the settings key (a
change of it rebuilds the agent, keeping the session) with its cache, the storage of the
notebook (the file pinned when first seen) and the once-per-folder network file system note,
the workdir, the tools and the rewind participants. The settings stay traits of the magics
(``%config``), read through :class:`AgentSettings`, so this module stays below the magics
(no import circle). Must not know any subcommand, nor the ``%%agent`` cell.

Loaded by ``%load_ext``: what only building an agent needs (the SDK, the tools, the
checkpointers) is imported in the method that needs it (#32).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from IPython.core.error import UsageError

from ..providers.servers import is_anthropic
from . import teach
from .context import guard_notebook, variable_tools
from .kernel_state import KernelParticipant
from .notebook_cells import notebook_tools
from .notebook_file import NotebookIdentity, claim, notebook_storage
from .notebook_rewind import NotebookParticipant
from .outputs import cell_output_tool
from .shared_storage import LockingNotes, backend_folder

if TYPE_CHECKING:
    from ..abort import AbortSignal
    from ..agent import ApprovalRequest, LiteAgent
    from ..providers.base import Provider
    from ..storage import Storage
    from ..tools import Tool
    from .context import NotebookLocation
    from .notebook_cells import NotebookChannel
    from .outputs import CellOutputs
    from .plan_cells import PlanCells


@dataclass
class _Model:
    provider: Provider | None = None
    """Set by :func:`use_model`: used instead of ``anthropic()``."""


MODEL = _Model()


def use_model(provider: Provider | None) -> None:
    """Make ``%%agent`` use ``provider`` (e.g. ``scripted([...])`` offline) instead of Claude;
    ``None`` goes back to ``anthropic()``. Applies at the next cell."""
    MODEL.provider = provider


class AgentSettings(teach.TeachSettings, Protocol):
    """What building the agent reads of the magics (``LiteAgentMagics`` is one): the settings
    (traits, read-only here) and the kernel's parts the agent is given."""

    shell: Any
    outputs: CellOutputs
    outputs_hooks: Any
    notebook: NotebookChannel
    plans: PlanCells

    @property
    def model_name(self) -> str: ...

    @property
    def base_url(self) -> str: ...

    @property
    def workdir(self) -> str: ...

    @property
    def sessions(self) -> bool: ...

    @property
    def checkpointer_url(self) -> str: ...

    @property
    def storage_root(self) -> str: ...

    @property
    def refuse_network_fs(self) -> bool: ...

    @property
    def approvals(self) -> Any: ...

    @property
    def expose_variables(self) -> Any: ...

    @property
    def share_outputs(self) -> bool: ...

    @property
    def kernel_tools(self) -> bool: ...

    @property
    def kernel_snapshot_limit(self) -> int: ...

    @property
    def kernel_snapshot_value_limit(self) -> int: ...

    @property
    def notebook_tools(self) -> bool: ...

    @property
    def allow_notebook_edits(self) -> bool: ...

    @property
    def mcp_servers(self) -> Any: ...

    @property
    def hooks(self) -> dict[Any, Any]: ...


def _key_part(value: object) -> object:
    """A setting as part of the settings key: a dict or list as its JSON (hashable,
    compared by content; an empty one without a run of the encoder)."""
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True) if value else "{}"
    if isinstance(value, list):
        return json.dumps(value, sort_keys=True) if value else "[]"
    return value


class AgentBuilder:
    """The kernel's agent, (re)built from the settings when they change."""

    def __init__(self, settings: AgentSettings, locate: Callable[[], NotebookLocation]) -> None:
        """``settings`` are the magics; ``locate`` finds the notebook (the magics'), asked
        at every :meth:`agent` and written to ``settings.location``."""
        self.settings = settings
        self.locate = locate
        self._api_key: str | None = None
        self._key_version = 0
        self._claude: tuple[tuple[int, str | None], Provider] | None = None
        self.notebook_ids = NotebookIdentity()
        """The notebook file this kernel serves, pinned when first seen (see notebook_file)."""
        self.locking = LockingNotes()
        """The once-per-folder note about a network file system (``shared_storage.py``)."""
        self._generation = 0
        """Bumped by every change of a setting (any trait): see :meth:`_settings_key`."""
        self._traits_read: tuple[int, tuple[object, ...], tuple[object, ...]] | None = None
        """The settings key's part read from the traits: (generation, the parts, the dicts
        and lists among the values, encoded again each time)."""

    def settings_changed(self, change: Any = None) -> None:
        """A setting changed (the magics observe their traits and call this)."""
        self._generation += 1

    # -- the model ---------------------------------------------------------------------

    def key_source(self) -> str | None:
        if self._api_key:
            return "%agent key (this kernel's memory only)"
        if os.environ.get("ANTHROPIC_API_KEY"):
            return "ANTHROPIC_API_KEY"
        if os.environ.get("ANTHROPIC_AUTH_TOKEN"):
            return "ANTHROPIC_AUTH_TOKEN"
        return None

    def set_api_key(self, key: str) -> None:
        """Use ``key`` for Claude in this kernel, in memory only (``%agent key``): the next
        turn builds its client with it."""
        self._api_key = key
        self._key_version += 1

    def build_model(self) -> Provider | None:
        """The provider for the next agent: a replayed cassette, else the live model (recorded
        while ``%agent record`` is on), else ``None``."""
        return teach.choose_model(self.settings, self.live_model())

    def live_model(self) -> Provider | None:
        """``use_model``'s provider, else the server of ``base_url`` (``%agent model``), else
        Claude if a key is known, else ``None``.

        A server other than Anthropic's gets the ``%agent key`` key if one was typed, else no
        key at all: the Anthropic key of the environment is never sent to it."""
        from ..providers import anthropic

        if MODEL.provider is not None:
            return MODEL.provider
        server = self.settings.base_url or None
        if server is None and self.key_source() is None:
            return None
        version = (self._key_version, server)
        cached = self._claude
        if cached is None or cached[0] != version:
            key = self._api_key
            if server is not None and key is None and not is_anthropic(server):
                key = "no-key"
            cached = self._claude = (version, anthropic(api_key=key, base_url=server))
        return cached[1]

    # -- where it keeps and touches files ----------------------------------------------

    def storage(self) -> Storage:
        from ..storage import Storage

        settings = self.settings
        location = settings.location
        storage = Storage.for_notebook(
            location.notebook, folder=location.folder, root=settings.storage_root or None
        )
        if location.notebook is None:
            return storage
        identity = self.notebook_ids.of(location.notebook)
        return notebook_storage(storage, location.notebook, identity)

    def note_network_fs(self) -> None:
        """Say (once per folder) that the backend's folder is on a network file system;
        raise ``NetworkFilesystemError`` there instead with ``refuse_network_fs``."""
        from ..storage import Storage

        settings = self.settings
        location = settings.location
        root = Storage.for_notebook(  # the root only: no namespace record is read
            location.notebook, folder=location.folder, root=settings.storage_root or None
        ).root
        folder = backend_folder(settings.sessions, settings.checkpointer_url, root)
        note = self.locking.check(folder, refuse=settings.refuse_network_fs)
        if note is not None:
            print(note)

    def workdir_path(self) -> Path:
        """The folder the agent's tools may touch: the ``workdir`` setting, or the kernel's
        current folder (the notebook's, in JupyterLab) when it is empty."""
        workdir = self.settings.workdir
        return Path(workdir).expanduser() if workdir else Path.cwd()

    def exposed(self) -> list[str]:
        """The notebook variables the agent may inspect (``expose_variables``)."""
        value = self.settings.expose_variables
        return [value] if isinstance(value, str) and value else list(value or [])

    # -- the agent ---------------------------------------------------------------------

    def _settings_key(self, model: Provider) -> object:
        """What the agent is built from: another key rebuilds it (keeping the session).

        The settings are read once per change of any of them (the magics' trait observer
        calls :meth:`settings_changed`; #32: reading twenty traits and encoding four dicts
        was most of a cell's ~0.07 ms here); a dict or list is still encoded each time when
        not empty, so one changed in place rebuilds the agent as before."""
        settings = self.settings
        read = self._traits_read
        if read is None or read[0] != self._generation:
            values = tuple(getattr(settings, name) for name in _KEY_TRAITS)
            read = self._traits_read = (
                self._generation,
                tuple(_key_part(value) for value in values),
                tuple(value for value in values if isinstance(value, dict | list)),
            )
        workdir = settings.workdir
        return (
            id(model),
            self._key_version,
            *read[1],
            *(_key_part(value) for value in read[2]),  # as they are now
            str(Path(workdir).expanduser()) if workdir else os.getcwd(),  # workdir_path()
            tuple(self.exposed()),
            # the notebook tools are offered only while a page answers: a page that answers
            # later (or a new one) rebuilds the agent, the session kept
            settings.notebook_tools and settings.notebook.client,
            settings.location,
        )

    def _trait_options(self) -> dict[str, Any]:
        """The agent options the settings give (:data:`OPTION_TRAITS`)."""
        settings = self.settings
        return {
            name: getattr(settings, name) if make is None else make(settings)
            for name, make in OPTION_TRAITS.items()
        }

    def agent(self) -> LiteAgent | None:
        """The kernel's agent, (re)built for the current settings; ``None`` without a model."""
        settings = self.settings
        settings.location = self.locate()
        model = self.build_model()
        if model is None:
            return None
        return settings.runner.agent(
            self._settings_key(model), lambda approve: self._create(model, approve)
        )

    def _create(
        self,
        model: Provider,
        approve: Callable[[ApprovalRequest, AbortSignal], Any],
    ) -> LiteAgent:
        from ..agent import create_lite_agent
        from ..checkpoint.url import checkpointer_from_url
        from ..tools import default_tools
        from .kernel_tools import kernel_tools

        settings = self.settings
        shell = settings.shell
        tools: list[Tool] = []
        exposed = self.exposed()
        if exposed and shell is not None:
            tools += variable_tools(lambda: shell.user_ns, self.exposed)
        if settings.share_outputs and settings.outputs_hooks is not None:
            tools.append(cell_output_tool(settings.outputs))
        if settings.kernel_tools and hasattr(shell, "set_next_input"):
            tools += kernel_tools(
                shell,
                settings.runner,
                settings.plans.variables_changed,
                lambda: (settings.kernel_snapshot_limit, settings.kernel_snapshot_value_limit),
            )
        if settings.notebook_tools and settings.notebook.connected:
            tools += notebook_tools(
                settings.notebook,
                shell,
                settings.runner,
                settings.plans.variables_changed,
                lambda: (settings.kernel_snapshot_limit, settings.kernel_snapshot_value_limit),
            )
        notebook = settings.location.notebook
        identity = self.notebook_ids.of(notebook)
        if notebook is not None and not settings.allow_notebook_edits:
            tools += guard_notebook(default_tools(), notebook, identity)
        storage = self.storage()
        self.note_network_fs()
        if notebook is not None and settings.sessions and not settings.checkpointer_url:
            claim(storage, notebook, identity)  # the namespace is this file's, under any name
        checkpointer = None
        if settings.sessions and settings.checkpointer_url:
            checkpointer = checkpointer_from_url(settings.checkpointer_url)
        agent = create_lite_agent(
            model=model,
            workdir=self.workdir_path(),
            checkpointer=checkpointer,
            storage=storage,
            tools=tools,
            on_approval=approve,
            **self._trait_options(),
        )
        if shell is not None:  # restore, undo and switches put the variables back
            agent.add_rewind_participant(KernelParticipant(lambda: shell.user_ns))
            # the cells, via the page
            agent.add_rewind_participant(NotebookParticipant(settings.notebook))
        if settings.notebook_tools and settings.notebook.connected:  # cells edited: told
            agent.add_outside_watch(settings.notebook)
        return agent


# ------------------------------------------------- the settings that are agent options


def approval_policy(value: Any) -> Any:
    """The ``approvals`` setting as the agent's ``approvals`` option."""
    from ..tools import default_tools

    if isinstance(value, dict):
        return dict(value)
    if value == "ask":
        return None
    if value == "allow":
        return "allow"
    if value == "deny":
        return {"*": "deny", **{t.name: "allow" for t in default_tools() if t.kind == "read"}}
    raise UsageError(f"LiteAgentMagics.approvals: {value!r} is not ask, allow or deny")


def _capped(name: str) -> Callable[[AgentSettings], float | None]:
    """A cost cap setting, no higher than its lock in the kernel's configuration."""

    def value(settings: AgentSettings) -> float | None:
        from . import budgets

        return budgets.capped(name, getattr(settings, name), settings.shell)

    return value


def _hooks(settings: AgentSettings) -> Any:
    from .hook_paths import resolve_hooks

    return resolve_hooks(settings.hooks, settings.shell.user_ns if settings.shell else {})


OPTION_TRAITS: dict[str, Callable[[AgentSettings], object] | None] = {
    "model_name": None,
    "sessions": None,
    "system_prompt": None,
    "max_turns": None,
    "max_turn_tokens": None,
    "max_turn_cost": _capped("max_turn_cost"),
    "max_session_cost": _capped("max_session_cost"),
    "prices": teach.prices,
    "approvals": lambda settings: approval_policy(settings.approvals),
    "mcp_servers": lambda settings: settings.mcp_servers or None,
    "hooks": _hooks,
    "refuse_network_fs": None,
    "require_same_user_approval": None,
}
"""The settings that are agent options (``create_lite_agent``'s keyword of the same name),
each with how the option's value is made from the setting (``None``: the trait's value as
it is). The one table ``_create`` builds the agent from and the settings key (a change
rebuilds the agent) is read from: a new option the notebook sets is a trait of the magics
and a row here. ``workdir``, ``storage``, ``checkpointer`` and ``tools`` are made from
several settings and the notebook's state (``_create``)."""

_KEY_TRAITS = (
    *OPTION_TRAITS,
    "checkpointer_url",
    "storage_root",
    "allow_notebook_edits",
    "share_outputs",
    "kernel_tools",
)
"""The settings read as they are into the settings key (``_settings_key``)."""
