"""Who is at the keyboard: the name a prompt and an approval are recorded under.

``JUPYTERHUB_USER`` when set (JupyterHub starts each single-user server with it: the hub's
name for the person, which the OS account often is not: every container may run as
``jovyan``), else the OS user. Read at each call, not at import: a test or a launcher may set
it per kernel. What a kernel cannot know (who clicked in a notebook several people share) is
the front end's to say: see ``jupyter/approval.py`` and docs/jupyterhub.md.
"""

from __future__ import annotations

import functools
import os

__all__ = ["current_user"]


def current_user() -> str:
    """``JUPYTERHUB_USER``, else the OS user's name, else ``"unknown"``."""
    hub = os.environ.get("JUPYTERHUB_USER", "").strip()
    if hub:
        return hub
    environ = os.environ
    for name in _LOGIN_VARIABLES:  # what getpass.getuser reads, in its order
        user = environ.get(name)
        if user:
            return user
    getuid = getattr(os, "getuid", None)  # none on Windows: getpass found no name either
    return _account_name(getuid()) if getuid is not None else "unknown"


_LOGIN_VARIABLES = ("LOGNAME", "USER", "LNAME", "USERNAME")


@functools.cache
def _account_name(uid: int) -> str:
    """The name of ``uid``'s account, as ``getpass.getuser`` finds it without a login
    variable, looked up once per uid (#32: a kernel started without one, in a container or
    by a service, read the password database at every prompt)."""
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except Exception:  # no name for this uid (a container): still a value to record
        return "unknown"
