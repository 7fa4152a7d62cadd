"""What a turn looks like in a cell: Markdown for notebooks and a plain-text twin of it.

:class:`TurnView` folds the agent's stream events into the cell's content: the answer's text,
each tool call on one line (tool, its key argument, the result collapsed; file changes as a
short diff summary), and a footer (tokens, model, short session id, the checkpoint of this
prompt and the command that rewinds to it). The same content renders as safe HTML (the
answer's Markdown rendered in the kernel, everything else escaped: ``safe.py``, the one door to
a page) for JupyterLab, Notebook 7, VS Code, GitHub and nbviewer, and as plain text (terminal
IPython, nbconvert to text). Also the text tables of ``%agent sessions`` / ``checkpoints`` /
``info``, with control characters shown as escapes (``controls.terminal_safe``): they are
printed, and a terminal (or a notebook's stream output) obeys ``\\r`` and ``ESC``.
The texts of review, revert and branches are ``history_text.py``'s (built with
:func:`clip`, :func:`table` and :func:`printable` from here).

Pure string building: no IPython, no agent; the magic decides where the strings go.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..agent import ApprovalDecided, TextDelta, ToolCallFinished, ToolCallInput, ToolCallStarted
from ..controls import terminal_safe
from ..redact import redact_urls
from .progress import Progress, checklist_html, checklist_plain, seconds, tasks_from
from .safe import MarkdownStream, escape

if TYPE_CHECKING:
    from ..agent import Checkpoint, CompactResult, LiteAgentResult, RestorePlan, RestoreResult
    from ..agent.timetravel.participants import StatePlan, StateResult
    from ..checkpoint.protocol import SessionInfo

_now = time.monotonic

RESULT_PREVIEW = 1500
"""Characters of a tool result shown (collapsed) in the cell."""

_KEY_ARGUMENT = {
    "read_file": "path",
    "write_file": "path",
    "edit_file": "path",
    "delete_file": "path",
    "list_files": "pattern",
    "grep": "pattern",
    "bash": "command",
    "inspect_variable": "name",
}


def short_id(session_id: str) -> str:
    return session_id[:8]


def clip(text: str, limit: int) -> str:
    """``text`` stripped and cut at ``limit`` characters with "…"."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clip_block(text: str, limit: int) -> str:
    """``_clip`` for a block shown as is: blank lines around it go, but the first line keeps
    its leading spaces (``read_file`` right-aligns its line numbers; code is indented)."""
    lines = text.rstrip().split("\n")
    while len(lines) > 1 and not lines[0].strip():
        del lines[0]
    text = "\n".join(lines)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def plural(count: int, word: str) -> str:
    """``1 prompt``, ``2 prompts``, ``0 prompts``."""
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def key_field(name: str, arguments: Mapping[str, Any]) -> object | None:
    """The one argument that says what a call is about (path, command...), or ``None``."""
    key = _KEY_ARGUMENT.get(name)
    if key is not None and key in arguments:
        found: object = arguments[key]
        return found
    for value in arguments.values():
        if isinstance(value, str | int | float):
            return value
    return None


def key_argument(name: str, arguments: Mapping[str, Any]) -> str:
    """:func:`key_field` on one line, cut at 80 characters (the approvals show it whole);
    what a reader could not see shown as escapes (a tool line is a record of the call)."""
    value = key_field(name, arguments)
    if value is None:
        return ""
    return clip(terminal_safe(str(value), invisible=True).replace("\n", " "), 80)


def _lines(text: object) -> int:
    if not isinstance(text, str) or not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def change_summary(name: str, arguments: Mapping[str, Any]) -> str | None:
    """A short diff summary of a file tool's call, or ``None`` for other tools."""
    if name == "edit_file":
        return f"-{_lines(arguments.get('old_string'))} +{_lines(arguments.get('new_string'))}"
    if name == "write_file":
        if arguments.get("encoding") == "base64":
            return "binary"
        return f"+{plural(_lines(arguments.get('content')), 'line')}"
    if name == "delete_file":
        return "deleted"
    return None


@dataclass(slots=True)
class ToolLine:
    id: str
    name: str
    argument: str
    change: str | None
    output: str | None = None
    is_error: bool = False
    denied: bool = False
    took: float | None = None
    """Seconds the call ran (from its input to its result, as the cell saw them)."""


@dataclass
class TurnView:
    """The content of one ``%%agent`` cell, built from stream events."""

    notes: list[str] = field(default_factory=list)
    parts: list[str | ToolLine] = field(default_factory=list)
    footer: str | None = None
    status: str | None = None
    tasks: list[dict[str, str]] | None = None
    """The task list as the model's last ``todo_write`` of this turn left it."""
    progress: Progress = field(default_factory=Progress)
    clock: str | None = None
    """The elapsed times while a tool call runs (``progress.py``)."""
    stale: str | None = None
    """The cells left stale by kernel variables this turn changed (``stale.py``)."""
    _todo: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    _tools: dict[str, ToolLine] = field(default_factory=dict)
    _rendered: dict[int, MarkdownStream] = field(default_factory=dict)
    """Text part index -> its incremental renderer: an update renders only what changed
    since the last one (the part that grows, from its last settled block on)."""

    def add_text(self, text: str) -> None:
        if self.parts and isinstance(self.parts[-1], str):
            self.parts[-1] += text
        else:
            self.parts.append(text)

    def tool_started(self, event: ToolCallStarted) -> None:
        line = ToolLine(event.id, event.name, "", None)
        self._tools[event.id] = line
        self.parts.append(line)

    def tool_input(self, event: ToolCallInput) -> None:
        line = self._tools.get(event.id)
        if line is None:
            line = self._tools[event.id] = ToolLine(event.id, event.name, "", None)
            self.parts.append(line)
        line.argument = key_argument(event.name, event.input)
        line.change = change_summary(event.name, event.input)
        if event.name == "todo_write":
            tasks = tasks_from(event.input)
            if tasks is not None:
                self._todo[event.id] = tasks
        self.progress.call_started(event.id, event.name, line.argument, _now())

    def tool_denied(self, call_id: str) -> None:
        """A person, a policy or a planning turn said no to the call."""
        line = self._tools.get(call_id)
        if line is not None:
            line.denied = True

    def tool_finished(self, event: ToolCallFinished) -> bool:
        """Fold a finished call in; ``True`` if it changed the task list."""
        line = self._tools.get(event.id)
        if line is None:
            line = ToolLine(event.id, event.name, "", None)
            self.parts.append(line)
        line.output = event.output
        line.is_error = event.is_error
        line.took = self.progress.call_ended(event.id, _now())
        tasks = self._todo.pop(event.id, None)
        if tasks is not None and not event.is_error:
            self.tasks = tasks
            return True
        return False

    def finish(
        self,
        result: LiteAgentResult,
        model: str,
        *,
        tokens: bool = True,
        background: bool = False,
        checkpoint: Checkpoint | None = None,
        local: bool = False,
    ) -> None:
        """Set the footer: ``model`` names who answered (``jupyter/answering.py``); ``tokens``
        whether to show token counts (only a live model's are real); ``checkpoint`` the
        prompt's checkpoint (its number and the command that rewinds to it); ``local`` a
        server other than Anthropic's answered (no price: ``local (no price)``)."""
        self.footer = footer_text(
            result,
            model,
            tokens=tokens,
            background=background,
            checkpoint=checkpoint,
            local=local,
        )
        self.clock = None
        if not background:
            self.footer += f" · {self.progress.wall(_now())}"

    def apply(self, event: object) -> bool:
        """Fold a stream event in; ``True`` if the content changed (text or a tool line)."""
        if isinstance(event, TextDelta):
            self.add_text(event.text)
        elif isinstance(event, ToolCallStarted):
            self.tool_started(event)
        elif isinstance(event, ToolCallInput):
            self.tool_input(event)
        elif isinstance(event, ToolCallFinished):
            self.tool_finished(event)
        elif isinstance(event, ApprovalDecided):
            if event.allowed:
                self.progress.call_approved(event.id, _now())
                return False
            self.tool_denied(event.id)
        else:
            return False
        return True

    # -- output ------------------------------------------------------------------------

    def html(self) -> str:
        """The cell as safe HTML: the answer's Markdown rendered (raw HTML off, see
        ``safe.py``), every other string escaped."""
        out = ['<div class="lite-agent-turn">']
        out += [f"<p><em>{escape(note)}</em></p>" for note in self.notes]
        if self.tasks:
            out.append(checklist_html(self.tasks))
        for index, part in enumerate(self.parts):
            out.append(self._text_html(index, part) if isinstance(part, str) else _tool_html(part))
        if self.clock:
            out.append(f'<p class="lite-agent-clock"><code>{escape(self.clock)}</code></p>')
        if self.status:
            out.append(f"<p><em>{escape(self.status)}</em></p>")
        if self.stale:
            out.append(f'<p class="lite-agent-stale"><b>{escape(self.stale)}</b></p>')
        if self.footer:
            out.append(f"<hr><p><sub>{escape(self.footer)}</sub></p>")
        out.append("</div>")
        return "".join(out)

    def _text_html(self, index: int, text: str) -> str:
        stream = self._rendered.get(index)
        if stream is None:
            stream = self._rendered[index] = MarkdownStream()
        return stream.render(text)

    def plain(self) -> str:
        """The cell as plain text (control characters still raw: a sink shows it through
        ``terminal_safe``, as ``safe.bundle`` does)."""
        out = [f"{note}\n" for note in self.notes]
        if self.tasks:
            out.append(checklist_plain(self.tasks) + "\n")
        out += [part if isinstance(part, str) else tool_plain(part) for part in self.parts]
        if self.clock:
            out.append(f"\n({self.clock})")
        if self.status:
            out.append(f"\n[{self.status}]")
        if self.stale:
            out.append(f"\n{self.stale}")
        if self.footer:
            out.append(f"\n-- {self.footer}")
        return "".join(out)


def static_html(text: str) -> str:
    """A plain-text summary as HTML, escaped: the static twin a saved notebook keeps of a
    widget (shown where the widget's model is gone)."""
    return f"<pre class='lite-agent-static'>{escape(text)}</pre>"


_STATE = {(False, False): "✓", (True, False): "✗", (True, True): "⊘", (False, True): "⊘"}
"""A finished tool line's mark by (failed, denied): done, failed, denied."""


def _tool_head(line: ToolLine) -> str:
    state = "…" if line.output is None else _STATE[line.is_error, line.denied]
    head = f"{state} {line.name}"
    if line.argument:
        head += f" {line.argument}"
    if line.change and line.output is not None and not line.is_error:
        head += f" ({line.change})"
    return head


def _first_line(text: str | None) -> str:
    return clip(text.strip().splitlines()[0], 100) if text and text.strip() else ""


def tool_outcome(line: ToolLine) -> str:
    """How the call ended: ``done (0.3 s)``, ``failed (0.1 s): <the error's first line>``,
    ``denied: <why>``; empty while it runs."""
    if line.output is None:
        return ""
    took = "" if line.took is None else f" ({seconds(line.took)})"
    if line.denied:
        why = _first_line(line.output)
        return f"denied: {why}" if why else "denied"
    if line.is_error:
        return f"failed{took}: {_first_line(line.output)}"
    return f"done{took}"


def _tool_html(line: ToolLine) -> str:
    head = escape(_tool_head(line))
    if line.output is None:
        return f"<p><code>{head}</code></p>"
    outcome = escape(tool_outcome(line))
    body = escape(_clip_block(line.output, RESULT_PREVIEW))
    return (
        f"<details><summary><code>{head}</code> <small>{outcome}</small></summary>"
        f"<pre>{body}</pre></details>"
    )


def tool_plain(line: ToolLine) -> str:
    text = f"\n[{_tool_head(line)}]"
    if line.output is not None:
        text += f" {tool_outcome(line)}"
        first = _first_line(line.output)
        if first and not (line.is_error or line.denied):
            text += f": {first}"
    return text + "\n"


def footer_text(
    result: LiteAgentResult,
    model: str,
    *,
    tokens: bool = True,
    background: bool = False,
    checkpoint: Checkpoint | None = None,
    local: bool = False,
) -> str:
    """``tokens in 1,234 · out 56 · cache read 0 / write 0 · $0.0123 this cell, $0.0456 this
    session · claude-… · session 3f2a1b9c · prompt 3: %agent restore 3-k7f2``. Without
    ``tokens`` (a stand-in or a replay answered: its counts are estimates or were paid at
    recording time) it starts with the model: no tokens, no cost. The restore command names
    the prompt by its stable id, so in a saved notebook it keeps meaning this prompt (or is
    refused once a restore has cut it); without ``checkpoint`` (memory-only sessions) there
    is nothing to rewind to."""
    u = result.usage
    parts: list[str] = []
    if tokens:
        parts.append(
            f"tokens in {u.input_tokens:,} · out {u.output_tokens:,} · cache read "
            f"{u.cache_read_input_tokens:,} / write {u.cache_creation_input_tokens:,}"
        )
        parts.append(cost_text(result.cost, result.session_cost, local=local))
    parts += [model, f"session {short_id(result.session_id)}"]
    if background:  # a background completion turn is never a checkpoint to rewind to (§7)
        parts.append("background turn")
    elif checkpoint is not None:
        parts.append(f"prompt {checkpoint.number}: %agent restore {checkpoint.id}")
    if result.stop_reason not in (None, "end_turn", "tool_use"):
        parts.append(f"stopped: {result.stop_reason}")
    return " · ".join(parts)


LOCAL_NO_PRICE = "local (no price)"


def cost_text(cost: float | None, session_cost: float | None, *, local: bool = False) -> str:
    """``$0.0123 this cell, $0.4567 this session``: in dollars from the agent's price table;
    ``no price for this model`` for a model it does not price, ``local (no price)`` when that
    model answers from a server other than Anthropic's (Ollama and the like)."""
    unpriced = LOCAL_NO_PRICE if local else "no price for this model"
    text = unpriced if cost is None else f"${cost:.4f} this cell"
    if session_cost is not None and (cost is not None or session_cost > 0):
        text += f", ${session_cost:.4f} this session"
    return text


def _when(ts: datetime) -> str:
    return ts.astimezone().strftime("%Y-%m-%d %H:%M")


def sessions_text(
    sessions: Sequence[SessionInfo],
    current: str | None = None,
    *,
    limit: int | None = None,
    more: bool = False,
) -> str:
    """The ``%agent sessions`` table, newest first; ``*`` marks the current session. With
    ``limit``, only the newest ``limit`` rows; ``more``: ``sessions`` is one page of a
    longer listing (the summary under the session browser)."""
    if not sessions:
        return "No sessions yet in this notebook's storage."
    shown = sessions if limit is None else sessions[:limit]
    rows = [("", "id", "modified", "prompts", "first prompt")]
    for info in shown:
        rows.append(
            (
                "*" if info.id == current else "",
                short_id(info.id),
                _when(info.mtime),
                "" if info.turns is None else str(info.turns),
                clip((info.title or "").replace("\n", " "), 60),
            )
        )
    lines = [table(rows)]
    if len(shown) < len(sessions):
        lines.append(
            f"… and {len(sessions) - len(shown)} older (`%agent sessions --text` lists all)"
        )
    elif more:
        lines.append("… and others (`%agent sessions --text` lists all)")
    if current is not None and not any(info.id == current for info in sessions):
        where = "not among these" if more else "nothing sent yet"
        lines.append(f"current: {short_id(current)} ({where})")
    lines.append("(* current; `%agent resume ID` switches, `%agent new` starts one)")
    return "\n".join(lines)


def table(rows: Iterable[Sequence[str]]) -> str:
    """Aligned columns; each cell shown through ``terminal_safe`` (titles, prompts and paths
    come from the model or a file, and the table is printed)."""
    rows = [[terminal_safe(cell) for cell in r] for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows
    )


def key_value_text(pairs: Iterable[tuple[str, object]]) -> str:
    """``name  value`` lines (``%agent info`` / ``config``): every URL in a value redacted
    (a ``checkpointer_url``'s password would otherwise be saved with the notebook), control
    characters shown."""
    pairs = list(pairs)
    width = max((len(k) for k, _ in pairs), default=0)
    return "\n".join(f"{k.ljust(width)}  {terminal_safe(redact_urls(str(v)))}" for k, v in pairs)


COMPACT_STAGES = ("start", "measure", "summarize", "persist", "done")


def progress_text(stage: str, before: int | None, after: int | None, width: int = 20) -> str:
    """``[##########----------] summarize (12,345 tokens before)``."""
    done = COMPACT_STAGES.index(stage) + 1 if stage in COMPACT_STAGES else 0
    filled = width * done // len(COMPACT_STAGES)
    text = f"[{'#' * filled}{'-' * (width - filled)}] {stage}"
    if before is not None:
        text += f" ({before:,} tokens before"
        text += f", {after:,} after)" if after is not None else ")"
    return text


def compact_text(result: CompactResult) -> str:
    if not result.compacted:
        return "Nothing to compact yet (the session is empty)."
    text = (
        f"Compacted session {short_id(result.session_id)}…: {result.before:,} -> "
        f"{result.after:,} tokens; events up to seq {result.through_seq} are now a summary "
        "(the raw events stay: a restore to an earlier checkpoint undoes this)."
    )
    if result.estimated:
        text += (
            f" Token counts estimated ({result.estimated}): the server has no count_tokens "
            "endpoint."
        )
    return text


def who_text(checkpoint: Checkpoint) -> str:
    """``alice; write_file approved by bob``: who wrote a prompt and who approved the tools
    that changed files in its turn (empty for a log from before authors were recorded)."""
    parts = [checkpoint.by] if checkpoint.by else []
    parts += [f"{tool} approved by {person}" for tool, person in checkpoint.approvals]
    return "; ".join(parts)


def prompt_who(checkpoint: Checkpoint) -> str:
    """``prompt 3 by alice; write_file approved by bob`` (``prompt 3`` alone when no one was
    recorded)."""
    who = who_text(checkpoint)
    if not checkpoint.by:
        return f"prompt {checkpoint.number}" + (f"; {who}" if who else "")
    return f"prompt {checkpoint.number} by {who}"


def checkpoints_text(checkpoints: Sequence[Checkpoint], *, limit: int | None = None) -> str:
    """The ``%agent checkpoints`` table, oldest first, with the command for each. With
    ``limit``, only the newest ``limit`` rows (the summary under the slider)."""
    if not checkpoints:
        return "No checkpoints yet: each %%agent prompt makes one."
    shown = checkpoints if limit is None else checkpoints[-limit:]
    rows = [("#", "when", "prompt", "who", "files changed after it", "rewind to before it")]
    for cp in shown:
        files = ", ".join(cp.files[:4]) + (f" (+{len(cp.files) - 4})" if len(cp.files) > 4 else "")
        rows.append(
            (
                str(cp.number),
                _when(cp.ts),
                clip(cp.prompt.replace("\n", " "), 50),
                clip(who_text(cp), 60) or "-",
                files or "-",
                f"%agent restore {cp.id}",
            )
        )
    older = len(checkpoints) - len(shown)
    head = f"… {older} older (`%agent checkpoints --text` lists all)\n" if older else ""
    return head + table(rows)


def plan_text(plan: RestorePlan, checkpoint: Checkpoint) -> str:
    """What ``%agent restore N`` would do, per file, with diffs."""
    lines = [
        f"Restore of session {short_id(plan.session_id)}… to before prompt "
        f"{checkpoint.number} ({checkpoint.id}: {clip(checkpoint.prompt.strip(), 50)!r}): "
        f"{plural(plan.events_cut, 'event')} would be cut from the conversation."
    ]
    return terminal_safe("\n".join(lines + _plan_files(plan, "restore")))


def switch_plan_text(plan: RestorePlan, name: str) -> str:
    """What ``%agent switch NAME`` would do, per file, with diffs."""
    head = (
        f"Switch of session {short_id(plan.session_id)}… to branch {name}: the "
        f"{plural(plan.events_cut, 'event')} after its fork would be kept as a new branch."
    )
    return printable("\n".join([head, *_plan_files(plan, "switch")]))


def _plan_files(plan: RestorePlan, what: str) -> list[str]:
    lines = []
    if not plan.files:
        lines.append("No file would change.")
    for action in plan.files:
        lines.append(f"  {action.action:<9} {action.path}  {action.summary}")
        if action.diff:
            lines.extend("      " + line for line in action.diff.rstrip().splitlines()[:40])
    if plan.conflicts:
        lines.append(
            f"Changed outside the agent since ({what} refuses unless --force): "
            + ", ".join(plan.conflicts)
        )
    lines.extend(state_plan_lines(plan.state, what))
    lines.append("Nothing was changed (preview).")
    return lines


_LABELS = {"kernel": "Kernel variables", "notebook": "Notebook cells"}
"""How a participant's items are headed in previews and results."""


def state_plan_lines(plans: Sequence[StatePlan], what: str) -> list[str]:
    """The kernel's variables (and any other participant's items) in a preview: what
    happens to each, the conflicts, and what cannot be rewound."""
    lines = []
    for plan in plans:
        if not plan.actions:
            continue
        lines.append(f"{_LABELS.get(plan.participant, plan.participant)}:")
        for action in plan.actions:
            shown = "cannot" if action.action == "cannot" else action.action
            lines.append(f"  {shown:<9} {action.name}  {action.summary}")
        if plan.conflicts:
            lines.append(
                f"Changed by hand since the agent's call ({what} refuses unless --force): "
                + ", ".join(plan.conflicts)
            )
        if plan.cannot:
            lines.append("Cannot be rewound: " + ", ".join(plan.cannot))
        if plan.blocked:
            lines.append(
                f"Cannot be put back now ({what} refuses, even with --force): "
                + ", ".join(plan.blocked)
            )
    return lines


def state_result_lines(results: Sequence[StateResult]) -> list[str]:
    """What the participants did, after a restore, undo or switch."""
    lines = []
    for result in results:
        label = _LABELS.get(result.participant, result.participant)
        if result.restored:
            lines.append(f"{label} restored: " + ", ".join(result.restored))
        if result.deleted:
            lines.append(f"{label} deleted: " + ", ".join(result.deleted))
        if result.forced:
            lines.append(
                "Overwritten although changed by hand (--force): " + ", ".join(result.forced)
            )
        if result.cannot:
            lines.append("Cannot be rewound: " + "; ".join(result.cannot))
        lines.extend(result.notes)
    return lines


def undone_noun(result: RestoreResult) -> str:
    """What an undo took back, in one word: ``revert`` or ``restore``."""
    return "revert" if (result.undid or "").startswith("the revert of ") else "restore"


def restore_text(result: RestoreResult, checkpoint: Checkpoint | None) -> str:
    """What a restore to before ``checkpoint`` (``None``: an undo) did, in words that tell a
    rewind from an undo: only a restore rewinds the conversation; an undo puts it back as it
    was before that restore (the prompts it cut come back, or, after a files-only restore,
    the note that told the model its files were rewound is withdrawn)."""
    if checkpoint is None:
        what = f"Undid {result.undid or 'the last restore'}"
        said = (
            f"conversation as it was before that {undone_noun(result)}"
            if result.conversation_restored
            else "conversation unchanged"
        )
    else:
        what = (
            f"Restored to just after tool call {checkpoint.id} (in prompt {checkpoint.number})"
            if "." in checkpoint.id  # a rewind point inside a turn (%agent checkpoints --all)
            else f"Restored to before prompt {checkpoint.number} ({checkpoint.id})"
        )
        said = (
            "conversation rewound to before that prompt"
            if result.conversation_restored
            else "conversation kept (the model is told its files were rewound)"
        )
    parts = [
        f"{len(result.restored)} file(s) rewritten" if result.restored else "",
        f"{len(result.deleted)} deleted" if result.deleted else "",
        f"{len(result.skipped)} skipped" if result.skipped else "",
        said,
    ]
    text = f"{what}: " + ", ".join(p for p in parts if p) + "."
    for path in (*result.restored, *result.deleted):
        text += f"\n  {path}"
    if result.conflicts:
        text += "\nOverwritten although changed outside the agent (--force): " + ", ".join(
            result.conflicts
        )
    for line in state_result_lines(result.state):
        text += "\n" + line
    if checkpoint is not None:
        text += "\n`%agent undo` puts everything back as it was before this restore."
    return terminal_safe(text)


def mcp_text(servers: Sequence[Mapping[str, Any]]) -> str:
    """``%agent mcp``: each server's state, where it runs (no secret), its tools, its error.
    Server text (errors, stderr) is untrusted: control characters are shown as escapes and
    URLs redacted (``_printable``)."""
    if not servers:
        return "no MCP servers (%config LiteAgentMagics.mcp_servers = {'mcpServers': {...}})"
    lines = []
    for server in servers:
        lines.append(
            f"{server['name']}  {server['state']}  {printable(str(server['where']))}"
            f"  ({server['calls']} calls)"
        )
        tools = ", ".join(server["tools"]) or "(not listed yet: %agent mcp --start)"
        lines.append(f"  tools: {printable(tools)}")
        if server["error"]:
            lines.append(f"  error: {printable(str(server['error']))}")
        for why in server.get("refused", ()):
            lines.append(f"  refused: {printable(str(why))}")
    return "\n".join(lines)


def printable(text: str) -> str:
    """``text`` fit for a terminal and a stream output: control characters as escapes, the
    secrets in URLs redacted."""
    return terminal_safe(redact_urls(text))
