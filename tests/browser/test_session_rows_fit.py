"""The session browser's rows fit their box in a real JupyterLab (#19 item 9: a session
with a long first prompt ran past the right edge of the list, cut mid-word with no sign)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fake_anthropic import FakeAnthropicServer
from lab_browser import SETUP_ALLOW, JupyterLabServer, LabNotebook, no_widget_errors, write_notebook

LONG = (
    "Please read every CSV file under data/raw, merge them on the customer id column, "
    "drop the duplicate rows and write the merged table to data/clean/customers.csv"
)


def test_session_rows_fit_the_list_in_chromium(
    lab: JupyterLabServer, lab_root: Path, page: Any, fake_anthropic: FakeAnthropicServer
) -> None:
    fake_anthropic.script("Done.", "Done again.")
    write_notebook(
        lab_root / "rows.ipynb",
        [SETUP_ALLOW, f"%%agent\n{LONG}", f"%%agent --new\nshort {LONG}", "%agent sessions"],
    )
    nb = LabNotebook(page, lab, "rows.ipynb").open()
    for index in range(4):
        nb.run_cell(index)
    select = nb.cell(3).locator(".lite-agent-session-rows select")
    select.locator("option").nth(1).wait_for(state="attached")
    no_widget_errors(page)
    width = select.evaluate("s => ({scroll: s.scrollWidth, client: s.clientWidth})")
    assert width["scroll"] <= width["client"], width  # nothing runs past the right edge
    cut = select.evaluate(
        "s => [...s.options].filter(o => o.scrollWidth > o.clientWidth)"
        ".map(o => getComputedStyle(o).textOverflow)"
    )
    assert cut and set(cut) == {"ellipsis"}, cut  # the long row ends in "…", visibly cut
