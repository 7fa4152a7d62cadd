"""Showing the widgets in a cell: ``%agent sessions`` / ``checkpoints`` / ``ui``.

Displays the empty frames first (the front end draws them while the kernel reads), fills them,
then prints a static text summary under them (widget state is not saved in notebooks; the text
is what a saved notebook keeps). With ``text=True`` only the table is printed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import ipywidgets as w
from IPython import display as _ipython_display

from .. import render
from .checkpoint_slider import CheckpointSlider
from .controls import CheckpointControls, SessionControls
from .session_browser import SessionBrowser

display: Callable[..., Any] = _ipython_display.display  # untyped in IPython


def _show(*views: SessionBrowser | CheckpointSlider) -> None:
    """Display the empty frames first (the front end draws them while the kernel reads),
    fill them, then print one static summary under them (what a saved notebook keeps)."""
    frames: list[w.Widget] = []
    for view in views:
        frames += [w.HTML("<hr>"), view.widget] if frames else [view.widget]
    display(frames[0] if len(frames) == 1 else w.VBox(frames))
    for view in views:
        view.fill()
    print("\n\n".join(view.summary() for view in views))


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
