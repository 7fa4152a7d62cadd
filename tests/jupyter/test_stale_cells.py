"""Which cells read a changed variable (``jupyter/stale.py``), on sources as IPython keeps
them in ``In``."""

from __future__ import annotations

from lite_agent_jupyter.jupyter import stale


def test_a_cell_reads_what_it_uses_before_binding_it() -> None:
    assert stale.reads("total = sum(df)", ["df", "total"]) == ["df"]
    assert stale.reads("df = load()\ndf.head()", ["df"]) == []  # its own df
    assert stale.reads("df = df.dropna()", ["df"]) == ["df"]
    assert stale.reads("df += 1", ["df"]) == ["df"]
    assert stale.reads("def f():\n    return df.shape\nf()", ["df"]) == ["df"]
    assert stale.reads("[x for x in df]", ["df"]) == ["df"]
    assert stale.reads("import df", ["df"]) == []
    assert stale.reads("this is not python(", ["df"]) == []
    assert stale.reads("print('df')", ["df"]) == []  # in a string only


def test_stale_cells_are_the_latest_runs_before_the_change() -> None:
    history = [
        "",
        "df = [1, 2]",  # 1: defines it: re-running would undo the change
        "total = sum(df)",  # 2
        "print(len(df))",  # 3
        "x = 1",  # 4
        "get_ipython().run_cell_magic('agent', '', 'change df')",  # 5: the prompt
        "print(len(df))",  # 6: cell 3 run again after the change: not stale any more
    ]
    assert stale.stale_cells(history, {"df"}, 5) == [(2, ["df"])]
    assert stale.stale_cells(history[:6], {"df"}, 5) == [(2, ["df"]), (3, ["df"])]
    assert stale.stale_cells(history, set(), 5) == []


def test_changes_name_the_prompt_and_word_it_for_user_and_model() -> None:
    changes = stale.Changes()
    history = ["", "a = 1", "b = a + 1", "c = b * 2", "agent"]
    changes.note(["a", "b"], 4)
    found = changes.stale(history, 4)
    assert found == [(2, ["a"]), (3, ["b"])]
    assert stale.user_line(found) == (
        "cells [2], [3] read `a`, `b`, changed by this prompt: re-run them"
    )
    assert stale.user_line(found[:1]) == "cell [2] reads `a`, changed by this prompt: re-run it"
    assert "notebook cells [2], [3] read `a`, `b`" in str(stale.model_note(found))
    assert stale.user_line([]) is None and changes.stale(history, 9) == []
