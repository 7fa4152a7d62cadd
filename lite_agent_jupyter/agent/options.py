"""``AgentOptions``: every option of an agent, typed, checked in one place.

``create_lite_agent(**options)`` and ``LiteAgent(options)`` both go through it, so mypy, IDEs
and configuration layers (``%config`` traits) see one list of names and types, and a bad
value is refused before anything is written. Two declarations side by side, because the types
differ: :class:`AgentOptions`, the checked options (``workdir`` a resolved ``Path``, ``tools`` a
tuple; each field's default and doc), and :class:`AgentOptionsDict`, the keywords
``create_lite_agent`` takes (``workdir`` any path, ``tools`` any iterable), which
``create_lite_agent`` passes on as they are. ``tests/agent/test_options.py`` keeps the two
the same names.

To add an option: a field of ``AgentOptions`` (its default and a line of doc), its check in
``__post_init__``, its key in ``AgentOptionsDict``; for the notebook, a trait and a row of
``jupyter/agent_builder.py``'s ``OPTION_TRAITS``. What ``send``/``run`` may set for one turn
(``None``: the agent's option) is resolved in :meth:`AgentOptions.for_turn`, only there.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypedDict, get_args

from ..checkpoint.protocol import Checkpointer, validate_session_id
from ..providers.base import DEFAULT_MODEL_NAME as DEFAULT_MODEL_NAME
from ..providers.base import Provider
from ..storage import Blobs, Storage
from ..tools import Tool
from ..tools.mcp.config import ServerConfig, load_servers
from ..tools.scan import DEFAULT_MAX_FILE_SIZE
from ..tools.tasks import validate_task_list
from .approvals import ApprovalHandler, Decision, InputHandler
from .budget import Budget, check_cost_cap
from .hooks import DEFAULT_HOOK_TIMEOUT, HooksOption, check_hooks
from .prices import merged_prices
from .results import LiteAgentResult
from .usage import Price

BackgroundHandler = Callable[[LiteAgentResult], object]
_DECISIONS: tuple[str, ...] = get_args(Decision)


DEFAULT_BLOB_GRACE = 3600.0
"""Seconds: see ``AgentOptions.blob_grace``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentOptions:
    """The options of one agent; see the ``create_lite_agent`` table in docs/sdk.md for each.

    Frozen: derive a variant with :meth:`replace`. After construction ``workdir`` is an
    absolute, existing folder, ``tools`` a tuple and ``approvals`` a read-only mapping or a
    single decision.
    """

    model: Provider
    model_name: str = DEFAULT_MODEL_NAME
    workdir: Path = field(default_factory=lambda: Path("."))
    sessions: bool = True
    checkpointer: Checkpointer | None = None
    storage: Storage | str | os.PathLike[str] | None = None
    blobs: Blobs | None = None
    tools: tuple[Tool, ...] = ()
    builtin_tools: bool = True
    system_prompt: str | None = None
    max_turns: int = 50
    max_tokens: int = 8192
    max_turn_tokens: int | None = None
    """Cap on the tokens (input, cached input and output) of one turn's model calls; the
    turn stops with ``stop_reason="budget"`` (``None``: no cap)."""
    max_turn_cost: float | None = None
    """Cap, in dollars, on one turn's model calls (from ``prices``); the turn stops between
    two calls with ``stop_reason="budget"`` (see ``agent/budget.py``)."""
    max_session_cost: float | None = None
    """Cap, in dollars, on a session's model calls, every turn in its log included."""
    prices: Mapping[str, Price] | None = None
    """Model id (or prefix) -> :class:`Price`, on top of the bundled, dated table of
    Anthropic's prices (``agent/prices.py``)."""
    context_window: int = 200_000
    auto_compact: bool = True
    max_tracked_file_size: int = DEFAULT_MAX_FILE_SIZE
    """Bytes: larger files are not tracked by the shell scans (listed in bash's result)."""
    blob_grace: float = DEFAULT_BLOB_GRACE
    """Seconds a snapshot blob stored or reused without a reference (by code other than the
    agent's) is kept from collection; blobs a session refers to are kept regardless."""
    task_list: str | None = None
    """A name: the todo tool uses the shared list of that name instead of the session's own."""
    approvals: Mapping[str, Decision] | Decision | None = None
    on_approval: ApprovalHandler | None = None
    on_input: InputHandler | None = None
    on_background: BackgroundHandler | None = None
    session_id: str | None = None
    secret_env: tuple[str, ...] = ()
    """Names of environment variables whose values are secrets: redacted (with the API key)
    from every event, tool output and error message before it is stored or sent."""
    mcp_servers: Mapping[str, Any] | str | os.PathLike[str] | tuple[ServerConfig, ...] | None = None
    """MCP servers whose tools the model may call (``<server>__<tool>``): the JSON form of
    Claude Desktop / Claude Code / VS Code, or a path to such a file (``docs/mcp.md``).
    After construction: a tuple of checked :class:`ServerConfig`."""
    hooks: HooksOption | None = None
    """Functions called around each step of a turn (``docs/hooks.md``): hook point -> a
    callable or a list of them. After construction: a read-only mapping to tuples."""
    hook_timeout: float = DEFAULT_HOOK_TIMEOUT
    """Seconds a hook may take before the turn stops with ``HookError``."""
    user: str | Callable[[], str] | None = None
    """Who prompts and approves through this agent, as recorded in the log: a name, or a
    function read at each prompt; ``None``: ``JUPYTERHUB_USER``, else the OS user."""
    require_same_user_approval: bool = False
    """Only a prompt's author may allow its tool calls (``agent/approvals.py``)."""
    refuse_network_fs: bool = False
    """Refuse (``NetworkFilesystemError``) rather than warn when the default file backend's
    storage is on a network file system (NFS, SMB, sshfs...: ``storage/netfs.py``)."""

    def __post_init__(self) -> None:
        if not isinstance(self.model, Provider):
            raise TypeError(
                f"model= takes a provider such as anthropic() or scripted([...]), not "
                f"{type(self.model).__name__}; the model id goes in model_name="
            )
        _check_type("model_name", self.model_name, str)
        if not self.model_name:
            raise ValueError("model_name is empty")
        workdir = Path(self.workdir).expanduser().resolve()
        if not workdir.is_dir():
            raise NotADirectoryError(f"workdir {str(workdir)!r} is not a folder")
        object.__setattr__(self, "workdir", workdir)
        for name in (
            "sessions",
            "builtin_tools",
            "auto_compact",
            "refuse_network_fs",
            "require_same_user_approval",
        ):
            _check_type(name, getattr(self, name), bool)
        if self.checkpointer is not None and not isinstance(self.checkpointer, Checkpointer):
            raise TypeError(
                f"checkpointer= takes a Checkpointer, not {type(self.checkpointer).__name__}"
            )
        if self.storage is not None:
            _check_type("storage", self.storage, (Storage, str, os.PathLike))
        _check_type("tools", self.tools, Iterable)
        tools = tuple(self.tools)
        for item in tools:
            if not isinstance(item, Tool):
                raise TypeError(f"tools= takes Tool objects (see @tool), not {item!r}")
        object.__setattr__(self, "tools", tools)
        if self.system_prompt is not None:
            _check_type("system_prompt", self.system_prompt, str)
        grace = self.blob_grace
        if isinstance(grace, bool) or not isinstance(grace, (int, float)):
            raise TypeError(f"blob_grace must be a number of seconds, not {type(grace).__name__}")
        if not grace >= 0:
            raise ValueError(f"blob_grace must be at least 0 seconds, not {grace}")
        for name in ("max_turns", "max_tokens", "context_window", "max_tracked_file_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
            if value < 1:
                raise ValueError(f"{name} must be at least 1, not {value}")
        check_max_turn_tokens(self.max_turn_tokens)
        for name in ("max_turn_cost", "max_session_cost"):
            object.__setattr__(self, name, check_cost_cap(name, getattr(self, name)))
        if self.prices is not None:
            _check_type("prices", self.prices, Mapping)
            object.__setattr__(self, "prices", MappingProxyType(merged_prices(self.prices)))
        object.__setattr__(self, "approvals", _check_approvals(self.approvals))
        for name in ("on_approval", "on_input", "on_background"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise TypeError(f"{name} must be callable, not {type(value).__name__}")
        if self.session_id is not None:
            validate_session_id(self.session_id)
        if self.user is not None and not (
            (isinstance(self.user, str) and self.user.strip()) or callable(self.user)
        ):
            raise TypeError("user= takes a non-empty name or a function returning one")
        if self.task_list is not None:
            validate_task_list(self.task_list)
        object.__setattr__(self, "secret_env", _check_secret_env(self.secret_env))
        servers = self.mcp_servers
        if not (isinstance(servers, tuple) and all(isinstance(s, ServerConfig) for s in servers)):
            object.__setattr__(self, "mcp_servers", load_servers(servers))
        object.__setattr__(self, "hooks", MappingProxyType(dict(check_hooks(self.hooks))))
        timeout = self.hook_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"hook_timeout must be a positive number of seconds, not {timeout!r}")

    def replace(self, **changes: Any) -> AgentOptions:
        """A copy with ``changes`` applied (checked like the constructor's)."""
        check_option_names(changes)
        return replace(self, **changes)

    def for_turn(
        self,
        *,
        task_list: str | None = None,
        max_turn_tokens: int | None = None,
        max_turn_cost: float | None = None,
        max_session_cost: float | None = None,
    ) -> TurnChoices:
        """One turn's shared task list and budget: each value given for the turn, checked,
        and for each ``None`` this agent's option. The one place a per-call ``None`` means
        the agent's option (``send``/``run``; a background completion turn asks with none)."""
        check_max_turn_tokens(max_turn_tokens)
        return TurnChoices(
            task_list=self.task_list if task_list is None else validate_task_list(task_list),
            budget=Budget(
                self.max_turn_tokens if max_turn_tokens is None else max_turn_tokens,
                _or(check_cost_cap("max_turn_cost", max_turn_cost), self.max_turn_cost),
                _or(check_cost_cap("max_session_cost", max_session_cost), self.max_session_cost),
            ),
        )


@dataclass(frozen=True, slots=True)
class TurnChoices:
    """What one turn runs with (:meth:`AgentOptions.for_turn`)."""

    task_list: str | None
    """The shared task list the todo tools use (``None``: the session's own)."""
    budget: Budget


def _or(given: float | None, option: float | None) -> float | None:
    return option if given is None else given


class _RequiredOption(TypedDict):
    model: Provider


class AgentOptionsDict(_RequiredOption, total=False):
    """The keywords of ``create_lite_agent(**options)``: each option of :class:`AgentOptions`
    (its doc and default are there) with the types it accepts; ``model`` (the base class,
    so that ``__required_keys__`` says so at run time too) is required.

    Typed as openai-agents types its run options: mypy checks a call's names and types
    against this (an unknown keyword is an error), IDEs complete them, and the function takes
    no keyword of its own to write again."""

    model_name: str
    workdir: str | os.PathLike[str]
    sessions: bool
    checkpointer: Checkpointer | None
    storage: Storage | str | os.PathLike[str] | None
    blobs: Blobs | None
    tools: Iterable[Tool]
    builtin_tools: bool
    system_prompt: str | None
    max_turns: int
    max_tokens: int
    max_turn_tokens: int | None
    max_turn_cost: float | None
    max_session_cost: float | None
    prices: Mapping[str, Price] | None
    context_window: int
    auto_compact: bool
    max_tracked_file_size: int
    blob_grace: float
    task_list: str | None
    approvals: Mapping[str, Decision] | Decision | None
    on_approval: ApprovalHandler | None
    on_input: InputHandler | None
    on_background: BackgroundHandler | None
    session_id: str | None
    secret_env: Sequence[str]
    mcp_servers: Mapping[str, Any] | str | os.PathLike[str] | None
    hooks: HooksOption | None
    hook_timeout: float
    user: str | Callable[[], str] | None
    require_same_user_approval: bool
    refuse_network_fs: bool


def options_from(keywords: AgentOptionsDict) -> AgentOptions:
    """:class:`AgentOptions` from ``create_lite_agent``'s keywords: an unknown name is a
    ``TypeError`` naming the closest option; every value is checked (and ``workdir``,
    ``tools``, ``secret_env`` made their checked form) by ``AgentOptions`` itself."""
    check_option_names(keywords)
    values: dict[str, Any] = dict(keywords)
    return AgentOptions(**values)


OPTION_NAMES: tuple[str, ...] = tuple(f.name for f in fields(AgentOptions))


def check_option_names(names: Iterable[str]) -> None:
    """Raise ``TypeError`` for the first name that is not an option, naming the closest."""
    for name in names:
        if name not in OPTION_NAMES:
            close = difflib.get_close_matches(name, OPTION_NAMES, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(f"unknown agent option {name!r}{hint}")


def check_max_turn_tokens(value: object) -> None:
    """``max_turn_tokens`` is ``None`` or an int >= 1 (``TypeError``/``ValueError``)."""
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"max_turn_tokens must be an int or None, not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"max_turn_tokens must be at least 1, not {value}")


def _check_type(name: str, value: object, kind: type | tuple[type, ...]) -> None:
    if not isinstance(value, kind):
        raise TypeError(f"{name} has the wrong type: {type(value).__name__}")


def _check_secret_env(names: object) -> tuple[str, ...]:
    if isinstance(names, str) or not isinstance(names, Iterable):
        raise TypeError("secret_env= takes a sequence of environment variable names")
    checked = tuple(names)
    for name in checked:
        if not isinstance(name, str) or not name or "=" in name or "\0" in name:
            raise ValueError(f"secret_env: {name!r} is not an environment variable name")
    return checked


def _check_approvals(
    approvals: Mapping[str, Decision] | Decision | None,
) -> Mapping[str, Decision] | Decision:
    if approvals is None:
        return MappingProxyType({})
    if isinstance(approvals, str):
        if approvals not in _DECISIONS:
            raise ValueError(f"approvals={approvals!r}: use one of {', '.join(_DECISIONS)}")
        return approvals
    if not isinstance(approvals, Mapping):
        raise TypeError("approvals= takes a decision or a mapping of tool name to decision")
    for tool_name, decision in approvals.items():
        if decision not in _DECISIONS:
            raise ValueError(
                f"approvals[{tool_name!r}]={decision!r}: use one of {', '.join(_DECISIONS)}"
            )
    return MappingProxyType(dict(approvals))
