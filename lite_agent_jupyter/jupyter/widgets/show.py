"""Showing the widgets in a cell: ``%agent sessions`` / ``checkpoints`` / ``ui``.

Displays the empty frames first (the front end draws them while the kernel reads), fills them,
then prints a static text summary under them (widget state is not saved in notebooks; the text
is what a saved notebook keeps). With ``text=True`` only the table is printed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import ipywidgets as w
from IPython import display as _ipython_display

from .. import render
from .checkpoint_slider import CheckpointSlider
from .controls import CheckpointControls, SessionControls
from .session_browser import SessionBrowser

display: Callable[..., Any] = _ipython_display.display  # untyped in IPython
update_display: Callable[..., Any] = _ipython_display.update_display


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _bundle(widget: w.Widget, summary: str) -> dict[str, Any]:
    """The widget's view with a readable static twin instead of its ``repr``: a front end
    that cannot draw the widget (an untrusted or reopened notebook, nbviewer, GitHub, a
    terminal) shows the summary, escaped, in place of ``VBox(children=(...``."""
    view = widget._repr_mimebundle_()[WIDGET_VIEW]
    return {WIDGET_VIEW: view, "text/plain": summary, "text/html": render.static_html(summary)}


def _show(*views: SessionBrowser | CheckpointSlider) -> None:
    """Display the empty frames first (the front end draws them while the kernel reads),
    fill them, then put the static summary in the widget's output (its twin where the widget
    cannot be drawn) and print it under it (what a reopened JupyterLab notebook shows, where
    the widget's model is gone)."""
    frames: list[w.Widget] = []
    for view in views:
        frames += [w.HTML("<hr>"), view.widget] if frames else [view.widget]
    root = frames[0] if len(frames) == 1 else w.VBox(frames)
    display_id = f"lite-agent-widget-{uuid.uuid4().hex}"
    display(_bundle(root, "(reading…)"), raw=True, display_id=display_id)
    for view in views:
        view.fill()
    summary = "\n\n".join(view.summary() for view in views)
    update_display(_bundle(root, summary), raw=True, display_id=display_id)
    print(summary)


_View = TypeVar("_View", bound=SessionBrowser | CheckpointSlider)


def _show_one(text: bool, table: Callable[[], str], view: Callable[[], _View]) -> _View | None:
    """With ``text``, print ``table()`` only and return None; else :func:`_show` the widget
    ``view()`` makes and return it."""
    if text:
        print(table())
        return None
    shown = view()
    _show(shown)
    return shown


def show_sessions(controls: SessionControls, *, text: bool = False) -> SessionBrowser | None:
    """``%agent sessions``: the browser with its static summary printed under it; with
    ``text=True`` (no widget front end, or ``--text``) the whole table only."""
    return _show_one(
        text,
        lambda: render.sessions_text(controls.list_sessions(), controls.session_id),
        lambda: SessionBrowser(controls, load=False),
    )


def show_checkpoints(
    controls: CheckpointControls, *, text: bool = False
) -> CheckpointSlider | None:
    """``%agent checkpoints``: the slider of the current session with its static summary
    printed under it; with ``text=True`` every checkpoint as a table only."""
    return _show_one(
        text,
        lambda: render.checkpoints_text(controls.list_checkpoints(controls.session_id)),
        lambda: CheckpointSlider(controls, load=False),
    )


def show_ui(
    controls: CheckpointControls, *, text: bool = False
) -> tuple[SessionBrowser, CheckpointSlider] | None:
    """``%agent ui``: the session browser over the checkpoint slider of the current session,
    one summary for both printed under them."""
    if text:
        show_sessions(controls, text=True)
        show_checkpoints(controls, text=True)
        return None
    browser = SessionBrowser(controls, load=False)
    slider = CheckpointSlider(controls, load=False)
    _show(browser, slider)
    return browser, slider
