"""The checkpoint layer composes its objects instead of stacking mixins (issue #31).

A class built from several of the package's own classes spreads its state over them: each
part reads attributes that another defines, and a newcomer cannot see where state lives.
So no class of ``checkpoint/`` has more than one of the package's classes among its bases
(direct or inherited), except Protocols (interfaces, no state) and exceptions.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Any

import lite_agent_jupyter.checkpoint as checkpoint_package
from lite_agent_jupyter.checkpoint.file import FileCheckpointer
from lite_agent_jupyter.checkpoint.file._folder import _Folder
from lite_agent_jupyter.checkpoint.file._index import _SessionIndex
from lite_agent_jupyter.checkpoint.file._marks import _MarkIndex
from lite_agent_jupyter.checkpoint.file._sessions import _Sessions

PACKAGE = "lite_agent_jupyter"


def _ours(cls: type) -> bool:
    return cls.__module__.split(".")[0] == PACKAGE


def _exempt(cls: type) -> bool:
    return bool(getattr(cls, "_is_protocol", False)) or issubclass(cls, BaseException)


def _checkpoint_classes() -> dict[str, type]:
    found: dict[str, type] = {}
    prefix = checkpoint_package.__name__ + "."
    for info in pkgutil.walk_packages(checkpoint_package.__path__, prefix):
        module = importlib.import_module(info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if _ours(cls) and not _exempt(cls):
                found[f"{info.name}.{name}"] = cls
    return found


def test_every_checkpoint_module_was_seen() -> None:
    """The walk reaches the backends (a guard that checked nothing would pass too)."""
    names = {cls.__name__ for cls in _checkpoint_classes().values()}
    assert {"FileCheckpointer", "SQLiteCheckpointer", "PostgresCheckpointer"} <= names
    assert {"_Folder", "_SessionIndex", "_MarkIndex", "_Sessions"} <= names


def test_no_checkpoint_class_has_more_than_one_package_base() -> None:
    stacked = {
        where: [base.__qualname__ for base in bases]
        for where, cls in _checkpoint_classes().items()
        if len(bases := [b for b in cls.__mro__[1:] if _ours(b) and not _exempt(b)]) > 1
    }
    assert stacked == {}


def _collaborators(obj: Any) -> dict[str, object]:
    return {slot: getattr(obj, slot) for slot in type(obj).__slots__}


def test_the_file_checkpointer_hands_one_folder_to_its_parts(tmp_path: Any) -> None:
    """One folder object, made once and handed to each part as a constructor argument: the
    parts share no state but that folder and each other."""
    store = FileCheckpointer(tmp_path)
    folder = store._folder
    assert type(folder) is _Folder and folder.directory == store.directory
    index, marks, sessions = store._index, store._marks, store._sessions
    assert type(index) is _SessionIndex and _collaborators(index) == {"_folder": folder}
    assert type(marks) is _MarkIndex and _collaborators(marks) == {"_folder": folder}
    assert type(sessions) is _Sessions
    assert _collaborators(sessions) == {"_folder": folder, "_index": index, "_marks": marks}
