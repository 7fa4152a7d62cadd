"""What the review, revert, branch and rewind-point commands say (#21): ``%agent review``'s
text (the widget's twin), ``%agent revert``, ``%agent branches``, ``%agent switch``,
``%agent checkpoints --all``, and where a branch forks (the slider's title and summary).

Owns these texts; pure string building, as ``render.py`` (whose clipping, tables and
printable filter they share) is. Prompt texts, paths and diffs are untrusted: every text is
made printable before it is returned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from .render import clip, printable, state_result_lines, table, who_text

if TYPE_CHECKING:
    from ..agent import (
        Branch,
        Checkpoint,
        PromptChanges,
        RestorePlan,
        RestoreResult,
        RewindPoint,
        SwitchResult,
    )


def changes_text(changes: PromptChanges, *, diffs: bool = True) -> str:
    """``%agent review``'s plain text: every file a prompt changed, how, by which tools, with
    its diff (``diffs=False``: the files only, and the command that prints the diffs: the
    widget's twin, as the widget makes a diff only when its file is selected). Paths, prompt
    and diffs are untrusted: control characters are shown as ``?``."""
    prompt = clip(changes.prompt.replace("\n", " "), 60)
    by = f" (by {changes.by})" if changes.by else ""
    lines = [f"Prompt {changes.number}{by}: {prompt}"]
    if not changes.files:
        lines.append("It changed no file.")
    for change in changes.files:
        approved = f", approved by {', '.join(change.approved_by)}" if change.approved_by else ""
        lines.append(f"  {change.path}  {change.summary}  by {', '.join(change.tools)}{approved}")
        if change.diff and diffs:
            lines.extend("      " + line for line in numbered_hunks(change.diff)[:40])
    if changes.files and not diffs:
        lines.append(f"`%agent review {changes.number} --text` prints the diffs.")
    if changes.files:
        lines.append(
            f"`%agent revert PATH --prompt {changes.number}` puts one file back to before this "
            "prompt (`--hunk K`: only hunk K of its diff; `%agent undo` takes the revert back)."
        )
    return printable("\n".join(lines))


def hunk_words(hunks: Sequence[int] | None) -> str:
    """``hunk 2`` / ``hunks 1, 3`` (empty for none)."""
    chosen = sorted(set(hunks or ()))
    return f"hunk{'s' * (len(chosen) > 1)} {', '.join(map(str, chosen))}" if chosen else ""


def revert_text(
    result: RestoreResult, path: str, number: int, hunks: Sequence[int] | None = None
) -> str:
    """What ``%agent revert`` did (of a file, or of an item of other state: a cell)."""
    part = f"{hunk_words(hunks)} of " if hunks else ""
    put = [name for state in result.state for name in (*state.restored, *state.forced)]
    removed = [name for state in result.state for name in state.deleted]
    if put or removed:  # a cell (revert_state): its result is its participant's
        how = "removed (the prompt added it)" if removed and not put else "put back"
        forced = " It had been changed after that prompt; overwritten (--force)." * bool(
            any(state.forced for state in result.state)
        )
        notes = "".join(f" {note}." for state in result.state for note in state.notes)
        return printable(
            f"Reverted {path} to before prompt {number}: {how}; the model is told at the next "
            f"prompt.{forced}{notes}\n`%agent undo` takes the revert back."
        )
    cannot = [name for state in result.state for name in state.cannot]
    if cannot or (result.state and not result.restored and not result.deleted):
        # its participant could not put it back (no page, the page refused, a failure)
        why = [*cannot, *(note for state in result.state for note in state.notes)]
        return printable(f"{path} not reverted: {'; '.join(why) or 'nothing to do'}.")
    if not result.restored and not result.deleted:
        return printable(f"{part}{path} already as before prompt {number}: nothing changed.")
    how = "deleted (it did not exist before)" if result.deleted else "put back"
    if hunks:
        how = "those lines put back, the rest of the file kept"
    text = (
        f"Reverted {part}{path} to before prompt {number}: {how}; the model is told at the "
        "next prompt."
    )
    if result.conflicts:
        text += " It had been changed after that prompt; overwritten (--force)."
    return printable(text + "\n`%agent undo` takes the revert back.")


def branches_text(
    branches: Sequence[Branch], checkpoints: Sequence[Checkpoint], current_prompts: int
) -> str:
    """``%agent branches``: the live timeline, then each kept branch with its fork point (the
    prompt of the live timeline it forks before), its prompts and files. Prompt texts are
    untrusted: control characters are shown as ``?``."""
    rows = [("branch", "forks", "prompts", "files", "first prompt", "switch with")]
    rows.append(("(current)", "-", str(current_prompts), "-", "-", "-"))
    for branch in branches:
        rows.append(
            (
                branch.name,
                fork_spot(checkpoints, branch.fork),
                str(branch.prompts),
                str(branch.files),
                clip(branch.first_prompt.replace("\n", " "), 40),
                f"%agent switch {branch.name}",
            )
        )
    text = table(rows)
    if not branches:
        text += "\nNo other branch yet: a restore keeps the future it leaves as one."
    return printable(text)


def fork_spot(checkpoints: Sequence[Checkpoint], fork: int) -> str:
    """Where a branch forks, in prompt numbers: ``before prompt 2``; ``after prompt 1 (the
    end)`` when nothing was asked since the restore; ``a cut prompt`` when a later restore
    cut the prompt it forks from."""
    for cp in checkpoints:
        if cp.seq == fork:
            return f"before prompt {cp.number}"
    if fork == 0:
        return "before prompt 1"
    if not checkpoints or fork > checkpoints[-1].seq:
        return f"after prompt {len(checkpoints)} (the end)"
    return "a cut prompt"


def forks_text(checkpoints: Sequence[Checkpoint], forks: Mapping[int, Sequence[Branch]]) -> str:
    """The checkpoint summary's line of where branches fork (empty when none do)."""
    if not forks:
        return ""
    spots = [
        f"{fork_spot(checkpoints, seq)}: " + ", ".join(b.name for b in branches)
        for seq, branches in sorted(forks.items())
    ]
    return printable("\nBranches fork " + "; ".join(spots) + " (%agent branches lists them).")


def switch_text(switched: SwitchResult) -> str:
    """What ``%agent switch NAME`` did."""
    result = switched.result
    text = (
        f"Switched to branch {switched.branch}: {len(result.restored)} file(s) written, "
        f"{len(result.deleted)} deleted, conversation moved to its tip."
    )
    if switched.kept:
        text += (
            f"\nThe future you left is kept as branch {switched.kept} "
            f"(`%agent switch {switched.kept}` comes back)."
        )
    if result.conflicts:
        text += "\nOverwritten although changed outside the agent (--force): " + ", ".join(
            result.conflicts
        )
    for line in state_result_lines(result.state):
        text += "\n" + line
    return printable(text)


def points_text(checkpoints: Sequence[Checkpoint], points: Sequence[RewindPoint]) -> str:
    """``%agent checkpoints --all``: each prompt, and under it every tool call that changed
    files as a rewind point (``%agent restore 2.3``: just after prompt 2's third such call).
    Prompt texts and paths are untrusted: control characters are shown as ``?``."""
    if not checkpoints:
        return "No checkpoints yet: each %%agent prompt makes one."
    under: dict[int, list[RewindPoint]] = {}
    for point in points:
        under.setdefault(point.prompt, []).append(point)
    lines = []
    for cp in checkpoints:
        prompt = clip(cp.prompt.replace("\n", " "), 50)
        who = who_text(cp)
        who = f"  [{who}]" if who else ""
        lines.append(f"{cp.number}  {prompt}{who}  (before it: %agent restore {cp.id})")
        for point in under.get(cp.number, ()):
            files = ", ".join(point.files[:4]) + (
                f" (+{len(point.files) - 4})" if len(point.files) > 4 else ""
            )
            lines.append(
                f"    {point.name}  after {point.tool}: {files}  (%agent restore {point.name})"
            )
    return printable("\n".join(lines))


def revert_preview_text(plan: RestorePlan, number: int, hunks: Sequence[int] | None) -> str:
    """``%agent revert PATH --preview``: what the revert would do, its diff (from the file
    now to the result), or why it would be refused; nothing was changed."""
    (action,) = plan.files
    part = f"{hunk_words(hunks)} of " if hunks else ""
    lines = [f"Revert of {part}{action.path} to before prompt {number}:"]
    if action.action == "conflict" and action.diff is None:
        lines.append(f"  refused: {action.summary}")
    elif action.action == "unchanged":
        lines.append("  nothing to do: the file already holds that content")
    else:
        lines.append(f"  {action.action}  {action.summary}")
        if action.diff:
            lines.extend("      " + line for line in action.diff.rstrip().splitlines())
    lines.append("Nothing was changed (preview).")
    return printable("\n".join(lines))


def numbered_hunks(diff: str) -> list[str]:
    """A unified diff's lines, each hunk header followed by its number (``@@ -1,2 +1,3 @@
    hunk 1``: what ``%agent revert PATH --hunk 1`` takes)."""
    lines, count = [], 0
    for line in diff.rstrip().splitlines():
        if line.startswith("@@"):
            count += 1
            line = f"{line}  hunk {count}"
        lines.append(line)
    return lines


SDK_FORCE = " (force=True overwrites)"
"""How the SDK's refusals end; the notebook says its own command instead."""


def refusal_text(error: Exception, command: str | None) -> str:
    """A refused restore, undo, revert or switch in the notebook's words (#30): not the
    SDK's ``force=True`` nor the log's seq numbers. ``command``: the ``%agent`` command that
    overwrites the conflicting files (``%agent revert data.csv --force``); ``None`` where
    there is none to offer (a widget offers its button instead)."""
    if getattr(error, "moved_on", False):
        return (
            "Nothing was undone: prompts ran after the restore (or revert) it would take "
            "back, and undoing it now would lose them. What a restore cut is kept as a "
            "branch: `%agent branches` lists it, `%agent switch NAME` goes back to it."
        )
    text = printable(str(error)).removesuffix(SDK_FORCE)
    if getattr(error, "forceable", False) and command is not None:
        text += f". `{printable(command)}` overwrites them"
    return text if text.endswith(".") else text + "."
