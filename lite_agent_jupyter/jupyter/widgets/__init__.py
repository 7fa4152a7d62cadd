"""The session browser and the checkpoint slider, built from ipywidgets 8 built-ins only.

No front-end code of our own, so they render wherever ipywidgets does. They talk to the agent
through one small *blocking* interface (:class:`SessionControls`; :class:`CheckpointControls`
is the same): the kernel's :class:`~..runner.AgentFacade`, whose ``call`` / ``call_idle`` run
any of the agent's coroutine methods on the agent's own event-loop thread. A widget callback
may run on the kernel's main thread when the kernel is idle or, with comms over subshells, on
another thread while a cell runs; either way it only calls the facade, which serialises access
to the agent. A click while a turn runs on the same session answers "busy" and changes
nothing.

A callback's exception would otherwise vanish into the browser's log console, so every action
reports its result or error inline. Widget state is not saved in notebooks: each ``show_*``
also prints a static text summary under the widget.

What a widget costs on screen is mostly how many widget models the front end has to create
(each is a message, a model and a view): the widgets share their ``Layout`` and ``Style``
models (:class:`.parts.Look`), show and hide buttons by changing their box's children rather than
by a layout of their own, and send one page of sessions, never the whole list.
"""

from .checkpoint_slider import (
    NOT_REWOUND,
    SUMMARY_CHECKPOINTS,
    CheckpointSlider,
    first_words,
    stop_label,
)
from .controls import CheckpointControls, SessionControls
from .parts import relative_time
from .review import ReviewPanel, show_review
from .session_browser import SessionBrowser, session_row
from .show import show_checkpoints, show_sessions, show_ui

__all__ = [
    "NOT_REWOUND",
    "SUMMARY_CHECKPOINTS",
    "CheckpointControls",
    "CheckpointSlider",
    "ReviewPanel",
    "SessionBrowser",
    "SessionControls",
    "first_words",
    "relative_time",
    "session_row",
    "show_checkpoints",
    "show_review",
    "show_sessions",
    "show_ui",
    "stop_label",
]
