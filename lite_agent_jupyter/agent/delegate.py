"""A public method of ``LiteAgent`` that is a collaborator's method, declared in one line.

``LiteAgent`` holds its parts as objects (``agent.timetravel``, #31) and keeps their public
verbs as its own names: ``restore = delegate("timetravel", TimeTravel.restore)``. Reading
``agent.restore`` gives ``agent.timetravel.restore``, the bound method itself (its signature,
docstring and ``help()`` are the collaborator's; on the class, a function that takes the
agent first, as a method does), and mypy types the call from the collaborator's signature,
so it is written once instead of copied into a wrapper with a body of one forwarding line.
Knows nothing of what it forwards to.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, cast, overload

P = ParamSpec("P")
R = TypeVar("R")


class delegate(Generic[P, R]):
    """``name = delegate(attribute, Owner.name)``: the method ``name`` of the object held in
    ``attribute``. Read on an instance, the collaborator's bound method itself; on the class,
    a function taking the instance first, as a plain method's is (``LiteAgent.restore(agent,
    ...)``, and a test that wraps it keeps working), with the collaborator's name,
    docstring and signature."""

    def __init__(self, attribute: str, method: Callable[Concatenate[Any, P], R]) -> None:
        self.attribute = attribute
        self.method = method
        self.__doc__ = method.__doc__
        self.__wrapped__ = method
        name = method.__name__
        unbound: Callable[..., Any]
        if inspect.iscoroutinefunction(method):

            async def unbound(owner: Any, /, *args: Any, **kwargs: Any) -> Any:
                return await getattr(getattr(owner, attribute), name)(*args, **kwargs)

        else:

            def unbound(owner: Any, /, *args: Any, **kwargs: Any) -> Any:
                return getattr(getattr(owner, attribute), name)(*args, **kwargs)

        self._unbound = cast(Callable[Concatenate[Any, P], R], functools.wraps(method)(unbound))

    def __set_name__(self, owner: type, name: str) -> None:
        if name != self.method.__name__:
            raise TypeError(f"{owner.__name__}.{name} delegates to {self.method.__name__}")

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Callable[Concatenate[Any, P], R]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> Callable[P, R]: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> Callable[..., R]:
        if obj is None:
            return self._unbound
        bound: Callable[P, R] = getattr(getattr(obj, self.attribute), self.method.__name__)
        return bound
