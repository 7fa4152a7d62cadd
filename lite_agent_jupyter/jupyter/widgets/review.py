"""``%agent review``'s widget: every file a prompt changed, Keep or Revert per file, each
diff folded until opened.

Owns :class:`ReviewPanel` and :func:`show_review`. Revert calls the facade's
``revert_file`` (the agent's conflict check, journal and undo: ``%agent undo`` takes a
revert back); Keep only marks the file reviewed. Every path, summary, diff and error is
untrusted and reaches the page only escaped by ``render`` (``static_html``). Must not know
how a revert is done.
"""

from __future__ import annotations

from typing import Any, Protocol

import ipywidgets as w

from ...agent import PromptChanges, RestoreResult
from ...errors import LiteAgentError
from .. import render
from .parts import Look
from .show import display


class ReviewControls(Protocol):
    """What the panel needs of the kernel's facade."""

    def revert_file(
        self, session_id: str, path: str, *, checkpoint: int | None = None, force: bool = False
    ) -> RestoreResult: ...


class ReviewPanel:
    """One row per changed file (its path and summary, Keep, Revert, a one-line result) and
    its diff in a folded accordion under it."""

    def __init__(self, controls: ReviewControls, changes: PromptChanges) -> None:
        self.controls = controls
        self.changes = changes
        look = Look()
        self.results: dict[str, w.HTML] = {}
        self.buttons: dict[str, tuple[w.Button, w.Button]] = {}
        rows: list[w.Widget] = [
            look.html(render.static_html(render.changes_text(_headline(changes))), "review-head")
        ]
        for change in changes.files:
            keep = look.button("Keep", "keep")
            revert = look.button("Revert", "revert", button_style="warning")
            result = look.html("", "review-result")
            label = look.html(render.static_html(f"{change.path}  {change.summary}"), "review-path")
            keep.on_click(lambda _b, path=change.path: self.keep(path))
            revert.on_click(lambda _b, path=change.path: self.revert(path))
            self.results[change.path] = result
            self.buttons[change.path] = (keep, revert)
            rows.append(look.hbox([label, keep, revert, result]))
            if change.diff:
                diff = w.Accordion(
                    children=[look.html(render.static_html(change.diff), "review-diff")],
                    selected_index=None,
                )
                diff.set_title(0, "diff")
                rows.append(diff)
        self.widget = w.VBox(rows, _dom_classes=("lite-agent-review",))

    def keep(self, path: str) -> None:
        for button in self.buttons[path]:
            button.disabled = True
        self.results[path].value = render.static_html("kept")

    def revert(self, path: str) -> None:
        try:
            result = self.controls.revert_file(
                self.changes.session_id, path, checkpoint=self.changes.checkpoint
            )
        except LiteAgentError as exc:  # a conflict, busy: said inline, nothing changed
            self.results[path].value = render.static_html(f"not reverted: {exc}")
            return
        for button in self.buttons[path]:
            button.disabled = True
        text = render.revert_text(result, path, self.changes.number)
        self.results[path].value = render.static_html(text.splitlines()[0])


def _headline(changes: PromptChanges) -> PromptChanges:
    """The changes without files: the panel's first line ("Prompt N: ...")."""
    return PromptChanges(changes.session_id, changes.checkpoint, changes.number, changes.prompt, ())


def show_review(controls: ReviewControls, changes: PromptChanges) -> ReviewPanel:
    """Display the panel with its plain-text twin (what a saved notebook keeps), and print
    the twin under it."""
    panel = ReviewPanel(controls, changes)
    summary = render.changes_text(changes)
    view: dict[str, Any] = panel.widget._repr_mimebundle_()
    view["text/plain"] = summary
    view["text/html"] = render.static_html(summary)
    display(view, raw=True)
    print(summary)
    return panel
