"""What importing the package loads, checked in fresh processes (#32): the guard that keeps
the import cost from creeping back. No timing here (that is ``benchmarks/import_bench.py``):
the heavy third-party packages are named, and a fresh interpreter must not have loaded them.

* ``import lite_agent_jupyter`` loads no model SDK or HTTP client (``anthropic``, ``httpx``,
  the ``httpx2`` fork the SDK may use), no Pillow, no Markdown renderer (``markdown_it``), no
  MCP client (``mcp``), no widgets (``ipywidgets``): its public names load on first use
  (``lite_agent_jupyter/_lazy.py``).
* ``%load_ext lite_agent_jupyter`` (``import lite_agent_jupyter.jupyter`` and registering
  the magics) loads what registering needs, not the model SDK, Pillow, MCP or the Markdown
  renderer: a first ``%%agent`` cell loads those it uses.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("anthropic", "httpx", "httpx2", "PIL", "markdown_it", "mcp", "ipywidgets")


def _loaded_after(code: str) -> set[str]:
    """The top-level modules of ``HEAVY`` a fresh interpreter holds after running ``code``."""
    probe = (
        f"{code}\nimport json, sys\n"
        "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout.strip().splitlines()[-1]))
    return loaded & set(HEAVY)


def test_importing_the_package_loads_none_of_the_heavy_dependencies() -> None:
    assert _loaded_after("import lite_agent_jupyter") == set()


def test_the_public_names_are_all_there_on_first_use() -> None:
    """Lazy names are still every name of ``__all__``, resolved from a fresh process."""
    code = (
        "import lite_agent_jupyter as pkg\n"
        "missing = [n for n in pkg.__all__ if n != 'PostgresBlobStore' "
        "and n != 'postgres_checkpointer' and getattr(pkg, n, None) is None]\n"
        "assert not missing, missing\n"
        "assert set(pkg.__all__) <= set(dir(pkg))\n"
        "from lite_agent_jupyter import create_lite_agent, hooks, LiteAgent\n"
        "assert create_lite_agent.__module__ == 'lite_agent_jupyter.agent.core'\n"
        "assert hooks.__name__ == 'lite_agent_jupyter.agent.hooks'\n"
        "try:\n"
        "    pkg.no_such_name\n"
        "except AttributeError as exc:\n"
        "    assert 'no_such_name' in str(exc)\n"
        "else:\n"
        "    raise AssertionError('an unknown name resolved')\n"
    )
    _loaded_after(code)


def test_load_ext_loads_no_model_sdk_pillow_mcp_or_markdown_renderer() -> None:
    code = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        "shell.run_line_magic('load_ext', 'lite_agent_jupyter')\n"
        "assert 'agent' in shell.magics_manager.magics['cell']\n"
    )
    assert _loaded_after(code) - {"ipywidgets"} == set()


def test_a_name_shared_with_its_submodule_stays_the_name() -> None:
    """``providers.scripted`` is a function in ``providers/scripted.py``; loading that
    submodule first (by any import) must not leave the package's name bound to the module."""
    code = (
        "import types\n"
        "import lite_agent_jupyter.providers.scripted\n"
        "import lite_agent_jupyter.checkpoint.fold\n"
        "from lite_agent_jupyter.providers import anthropic, scripted\n"
        "from lite_agent_jupyter.checkpoint import fold\n"
        "import lite_agent_jupyter.providers.anthropic\n"
        "import lite_agent_jupyter.providers as providers\n"
        "for value in (scripted, fold, anthropic, providers.anthropic, providers.scripted):\n"
        "    assert callable(value) and not isinstance(value, types.ModuleType), value\n"
    )
    _loaded_after(code)
