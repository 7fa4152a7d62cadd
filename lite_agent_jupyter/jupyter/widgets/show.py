"""Showing the widgets in a cell: ``%agent sessions`` / ``checkpoints`` / ``ui``.

Displays the empty frames first (the front end draws them while the kernel reads), fills them,
then prints a static text summary under them: the one readable copy a saved notebook keeps in
every front end (the widget's own output carries only a one-line pointer, so the summary never
shows twice). With ``text=True`` only the table is printed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import ipywidgets as w
from IPython import display as _ipython_display

from .. import render
from .checkpoint_slider import CheckpointSlider
from .controls import AwaitingControls, CheckpointControls, SessionControls
from .session_browser import SessionBrowser

display: Callable[..., Any] = _ipython_display.display  # untyped in IPython


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


PLACEHOLDER = "(live widget: run %agent ui to rebuild it; its summary is printed below)"
"""The widget output's ``text/plain`` in place of its ``repr`` (``VBox(children=(...``): what a
front end that cannot draw the widget shows (an untrusted notebook, GitHub, a terminal). Only a
pointer: the summary itself is printed once under the widget, where a reopened notebook shows it
whether or not the widget itself can be drawn (saved widget state, docs/widgets.md)."""


ROOT_CLASS = "lite-agent-widget"
"""The class of the outermost view of every widget of ours: what the front-end part
(``labextension/static/remoteEntry.js``) looks for to show a dead widget as inactive."""

METADATA_KEY = "lite_agent_jupyter"
"""The key of a widget output's metadata that says which widget it is and the command that
draws it again (``{"widget": "checkpoints", "rebuild": "%agent checkpoints"}``): read by the
front-end part when the widget is dead (its kernel gone), to say what to run."""


def show_widget(
    widget: w.Widget,
    text: str,
    kind: str,
    rebuild: str | None = None,
    *,
    html: str | None = None,
    display_id: str | None = None,
) -> None:
    """Display ``widget`` as an output of ours: its view with ``text`` as its ``text/plain``
    (in place of its ``repr``, ``VBox(children=(...``), marked :data:`ROOT_CLASS`, with
    :data:`METADATA_KEY` naming ``kind`` and the ``rebuild`` command. A saved notebook
    reopened without the kernel that made the widget shows it as inactive, saying to run
    ``rebuild`` (docs/widgets.md, "Saved notebooks")."""
    widget.add_class(ROOT_CLASS)
    bundle: dict[str, Any] = {WIDGET_VIEW: widget._repr_mimebundle_()[WIDGET_VIEW]}
    bundle["text/plain"] = text
    if html is not None:
        bundle["text/html"] = html
    meta: dict[str, Any] = {"widget": kind}
    if rebuild is not None:
        meta["rebuild"] = rebuild
    options: dict[str, Any] = {} if display_id is None else {"display_id": display_id}
    display(bundle, raw=True, metadata={METADATA_KEY: meta}, **options)


def _show(command: str, *views: SessionBrowser | CheckpointSlider) -> None:
    """Display the empty frames first (the front end draws them while the kernel reads),
    fill them, then print the static summary under them: the one copy a saved notebook shows
    in every front end (the widget's output itself carries only :data:`PLACEHOLDER`)."""
    frames: list[w.Widget] = []
    for view in views:
        frames += [w.HTML("<hr>"), view.widget] if frames else [view.widget]
    root = frames[0] if len(frames) == 1 else w.VBox(frames)
    show_widget(root, PLACEHOLDER, command.split()[-1], command)
    for view in views:
        view.fill()
    print("\n\n".join(view.summary() for view in views))


_View = TypeVar("_View", bound=SessionBrowser | CheckpointSlider)


def _show_one(
    command: str, text: bool, table: Callable[[], str], view: Callable[[], _View]
) -> _View | None:
    """With ``text``, print ``table()`` only and return None; else :func:`_show` the widget
    ``view()`` makes (``command`` draws it again) and return it."""
    if text:
        print(table())
        return None
    shown = view()
    _show(command, shown)
    return shown


def show_sessions(controls: SessionControls, *, text: bool = False) -> SessionBrowser | None:
    """``%agent sessions``: the browser with its static summary printed under it; with
    ``text=True`` (no widget front end, or ``--text``) the whole table only."""
    return _show_one(
        "%agent sessions",
        text,
        lambda: render.sessions_text(
            controls.call(lambda a: a.list_sessions()), controls.session_id
        ),
        lambda: SessionBrowser(controls, load=False),
    )


def show_checkpoints(
    controls: CheckpointControls, *, text: bool = False, aio: AwaitingControls | None = None
) -> CheckpointSlider | None:
    """``%agent checkpoints``: the slider of the current session with its static summary
    printed under it; with ``text=True`` every checkpoint as a table only. ``aio``: the
    same calls awaited (the kernel's), so that its actions hear the page."""
    return _show_one(
        "%agent checkpoints",
        text,
        lambda: render.checkpoints_text(
            controls.call(lambda a: a.list_checkpoints(controls.session_id))
        ),
        lambda: CheckpointSlider(controls, load=False, aio=aio),
    )


def show_ui(
    controls: CheckpointControls, *, text: bool = False, aio: AwaitingControls | None = None
) -> tuple[SessionBrowser, CheckpointSlider] | None:
    """``%agent ui``: the session browser over the checkpoint slider of the current session,
    one summary for both printed under them."""
    if text:
        show_sessions(controls, text=True)
        show_checkpoints(controls, text=True)
        return None
    browser = SessionBrowser(controls, load=False)
    slider = CheckpointSlider(controls, load=False, aio=aio)
    _show("%agent ui", browser, slider)
    return browser, slider
