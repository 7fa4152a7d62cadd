"""Turning a typed Python function into a :class:`~.base.Tool`, and calling a tool safely.

``@tool`` reads a function's signature and docstring and builds the tool's JSON schema:

* ``str``, ``int``, ``float``, ``bool``, ``list[X]``, ``dict`` / ``dict[str, X]``,
  ``Literal[...]``, ``X | None`` / ``Optional[X]``, ``TypedDict`` classes and ``Any``;
* a parameter with a default, or typed ``X | None``, is optional (a missing ``X | None``
  parameter without a default is passed as ``None``);
* a parameter's description comes from ``Annotated[X, "description"]``, else from the
  docstring's ``Args:`` section (Google style) or ``:param name:`` lines;
* the tool's description is the docstring up to its first section (``Args:``, ``Returns:``...);
* a first parameter annotated :class:`~.base.ToolContext` receives the context and is not
  part of the schema.

:func:`invoke_tool` is what the agent calls with the model's raw arguments. It checks them
against the tool's ``input_schema`` (missing, unknown, wrongly typed arguments all become one
:class:`~lite_agent_jupyter.errors.ToolError` that tells the model what to fix), then calls
the tool. It validates the schema, not the Python signature, so hand-built :class:`Tool`
objects get the same checks. Deliberate leniencies, because models do these and the intent
is unambiguous: a ``null`` for an optional non-nullable argument means "use the default"; an
integral float (``3.0``) is accepted for an integer; a JSON *string* holding an array or
object is accepted where an array or object is expected.

Plain ``def`` functions are accepted and run in a worker thread (``asyncio.to_thread``) so
they do not block the event loop. A thread cannot be interrupted: when the turn is aborted the
agent stops waiting but the function runs to its end. Anything long should be ``async`` and
honour ``ctx.signal``.

No pydantic: the supported types are few, the schema must be the small, flat shape models
read best (no ``$defs``/``title`` noise), and the validator is ~100 lines we fully control.

This module knows nothing of the agent loop, providers or the session log.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, get_args, get_origin, overload

from ..errors import ToolError
from .base import Tool, ToolContext, ToolKind, ToolOutput

__all__ = ["invoke_tool", "normalize_output", "schema_for_type", "tool", "validate_arguments"]

TOOL_NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What the Messages API accepts as a tool name."""

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Returns?|Raises|"
    r"Yields?|Examples?|Notes?|See Also|Warnings?|Todo)\s*:\s*$"
)
_ARG_SECTIONS = {"Args", "Arguments", "Parameters", "Params", "Keyword Args", "Keyword Arguments"}
_ARG_LINE = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_REST_PARAM = re.compile(r"^:param\s+(?:[^:\s]+\s+)?(\w+)\s*:\s*(.*)$")
_JSON_SCALARS = (str, int, float, bool, type(None))


# --------------------------------------------------------------------------------- the decorator


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    kind: ToolKind = "other",
) -> Callable[[Callable[..., Any]], Tool]: ...


@overload
def tool(
    fn: Callable[..., Any],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    kind: ToolKind = "other",
) -> Tool: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    kind: ToolKind = "other",
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a :class:`Tool` from a typed function: ``@tool``, ``@tool(kind="read")`` or
    ``tool(fn, name=...)``.

    Raises ``TypeError`` at decoration time for what cannot become a schema (``*args``,
    unsupported annotations, a missing annotation) and ``ValueError`` for a name the
    Messages API would refuse.
    """

    def build(func: Callable[..., Any]) -> Tool:
        return _build_tool(func, name=name, description=description, kind=kind)

    return build if fn is None else build(fn)


def _build_tool(
    fn: Callable[..., Any], *, name: str | None, description: str | None, kind: ToolKind
) -> Tool:
    if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
        raise TypeError(f"{fn!r}: a tool must return its output, not yield it")
    tool_name = name if name is not None else getattr(fn, "__name__", "")
    if TOOL_NAME_PATTERN.fullmatch(tool_name) is None:
        raise ValueError(
            f"invalid tool name {tool_name!r}: expected 1-64 characters of A-Z a-z 0-9 _ -"
        )
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # NameError for an unresolvable forward reference, and others
        raise TypeError(f"tool {tool_name!r}: cannot resolve the annotations: {exc}") from exc
    doc = inspect.getdoc(fn) or ""
    summary, arg_docs = _parse_docstring(doc)

    params = list(inspect.signature(fn).parameters.values())
    takes_context = bool(params) and hints.get(params[0].name) is ToolContext
    if takes_context:
        params = params[1:]

    properties: dict[str, Any] = {}
    required: list[str] = []
    fill_none: list[str] = []
    for param in params:
        where = f"tool {tool_name!r}, parameter {param.name!r}"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise TypeError(
                f"{where}: *args, **kwargs and positional-only parameters are not supported"
            )
        if param.name not in hints:
            raise TypeError(f"{where}: needs a type annotation")
        annotation = hints[param.name]
        if annotation is ToolContext:
            raise TypeError(f"{where}: the ToolContext parameter must be the first one")
        schema = schema_for_type(annotation, where=where)
        if "description" not in schema and param.name in arg_docs:
            schema = {**schema, "description": arg_docs[param.name]}
        if param.default is not inspect.Parameter.empty:
            if _is_json_value(param.default):
                schema["default"] = param.default
        elif _accepts_null(schema):
            fill_none.append(param.name)
        else:
            required.append(param.name)
        properties[param.name] = schema

    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    return Tool(
        name=tool_name,
        description=(description if description is not None else summary).strip(),
        input_schema=input_schema,
        fn=_make_caller(fn, fill_none),
        kind=kind,
        takes_context=takes_context,
    )


def _make_caller(fn: Callable[..., Any], fill_none: list[str]) -> Callable[..., Any]:
    is_async = inspect.iscoroutinefunction(fn)

    async def call(*args: Any, **kwargs: Any) -> ToolOutput:
        for name in fill_none:
            kwargs.setdefault(name, None)
        if is_async:
            result = await fn(*args, **kwargs)
        else:
            result = await asyncio.to_thread(fn, *args, **kwargs)
        if inspect.isawaitable(result):  # a callable object with an async __call__
            result = await result
        return normalize_output(result)

    call.__name__ = getattr(fn, "__name__", "tool")
    call.__doc__ = fn.__doc__
    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a cleaned docstring into (description, {parameter: description})."""
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    entry_indent: int | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        header = _SECTION.match(line)
        if header and indent == 0:
            section, current, entry_indent = header.group(1), None, None
            continue
        rest = _REST_PARAM.match(stripped)
        if rest:
            section, current = ":param", rest.group(1)
            args[current] = rest.group(2).strip()
            continue
        if section is None:
            summary.append(line)
            continue
        if not stripped:
            continue
        if section == ":param":
            if indent > 0 and current is not None:
                args[current] = f"{args[current]} {stripped}".strip()
            else:  # text after reST fields: not part of the description
                section = "other"
            continue
        if section not in _ARG_SECTIONS:
            continue
        entry = _ARG_LINE.match(stripped)
        if entry and (entry_indent is None or indent <= entry_indent):
            entry_indent = indent
            current = entry.group(1)
            args[current] = entry.group(2).strip()
        elif current is not None:
            args[current] = f"{args[current]} {stripped}".strip()
    return "\n".join(summary).strip(), args


# ------------------------------------------------------------------------------- type -> schema


def schema_for_type(tp: Any, *, where: str = "type") -> dict[str, Any]:
    """The JSON schema of a Python annotation (the subset :func:`tool` supports).

    ``TypeError`` names ``where`` and the supported types when ``tp`` is not supported.
    """
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is typing.Annotated:
        schema = schema_for_type(args[0], where=where)
        texts = [meta for meta in args[1:] if isinstance(meta, str)]
        if texts:
            schema["description"] = " ".join(texts)
        return schema
    if tp is Any or tp is object:
        return {}
    if tp is None or tp is type(None):
        return {"type": "null"}
    simple = {str: "string", bool: "boolean", int: "integer", float: "number"}
    if isinstance(tp, type) and tp in simple:
        return {"type": simple[tp]}
    if tp in (list, Sequence):
        return {"type": "array"}
    if origin in (list, Sequence):
        return {"type": "array", "items": schema_for_type(args[0], where=where)}
    if tp in (dict, Mapping):
        return {"type": "object"}
    if origin in (dict, Mapping):
        if args[0] is not str:
            raise TypeError(f"{where}: dict keys must be str (JSON object keys are strings)")
        return {"type": "object", "additionalProperties": schema_for_type(args[1], where=where)}
    if origin is Literal:
        return _literal_schema(args, where)
    if origin in (typing.Union, types.UnionType):
        return _union_schema(args, where)
    if typing.is_typeddict(tp):
        return _typeddict_schema(tp, where)
    raise TypeError(
        f"{where}: unsupported annotation {tp!r}; supported: str, int, float, bool, list[X], "
        "dict[str, X], Literal[...], X | None, TypedDict, Any, Annotated[X, 'description']"
    )


def _literal_schema(values: tuple[Any, ...], where: str) -> dict[str, Any]:
    if not all(isinstance(v, _JSON_SCALARS) for v in values):
        raise TypeError(f"{where}: Literal values must be str, int, float, bool or None")
    schema: dict[str, Any] = {"enum": list(values)}
    kinds = {_json_type_name(v) for v in values}
    if len(kinds) == 1:
        schema["type"] = kinds.pop()
    return schema


def _union_schema(members: tuple[Any, ...], where: str) -> dict[str, Any]:
    options = [schema_for_type(m, where=where) for m in members]
    descriptions = [o.pop("description") for o in options if "description" in o]
    simple = [o for o in options if set(o) == {"type"} and isinstance(o["type"], str)]
    schema: dict[str, Any] = (
        {"type": [o["type"] for o in simple]} if len(simple) == len(options) else {"anyOf": options}
    )
    if descriptions:  # Annotated[X, "..."] | None: the description belongs to the parameter
        schema["description"] = " ".join(descriptions)
    return schema


def _typeddict_schema(tp: Any, where: str) -> dict[str, Any]:
    hints = typing.get_type_hints(tp, include_extras=True)
    total = getattr(tp, "__total__", True)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for key, annotation in hints.items():
        # Decide from the annotation, not __required_keys__: on Python 3.11 the latter is
        # wrong for NotRequired[...] under "from __future__ import annotations".
        is_required = total
        while get_origin(annotation) in (typing.NotRequired, typing.Required):
            is_required = get_origin(annotation) is typing.Required
            annotation = get_args(annotation)[0]
        properties[key] = schema_for_type(annotation, where=f"{where}, key {key!r}")
        if is_required:
            required.append(key)
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _json_type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _is_json_value(value: Any) -> bool:
    if isinstance(value, _JSON_SCALARS):
        return True
    if isinstance(value, list):
        return all(_is_json_value(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json_value(v) for k, v in value.items())
    return False


# --------------------------------------------------------------------------------- validation


def _accepts_null(schema: Mapping[str, Any]) -> bool:
    if not schema or set(schema) <= {"description", "default"}:
        return True
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if "enum" in schema and None in schema["enum"]:
        return True
    return any(_accepts_null(option) for option in schema.get("anyOf", ()))


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."


def _check(schema: Mapping[str, Any], value: Any, where: str, errors: list[str]) -> Any:
    """Check ``value`` against ``schema``; append problems to ``errors``; return the value,
    converted where a leniency applies (integral float -> int, JSON string -> array/object)."""
    if "anyOf" in schema:
        near: list[list[str]] = []  # problems inside options of the right JSON type
        for option in schema["anyOf"]:
            trial: list[str] = []
            converted = _check(option, value, where, trial)
            if not trial:
                return converted
            if _type_fits(option, value):
                near.append(trial)
        if len(near) == 1:  # e.g. "list[str] | None" given a list: report inside the list
            errors.extend(near[0])
            return value
        expected = " or ".join(_describe(o) for o in schema["anyOf"])
        errors.append(f"{where}: expected {expected}, got {_json_type_name(value)} {_short(value)}")
        return value
    if "enum" in schema:
        got = _json_type_name(value)
        if not any(value == e and got == _json_type_name(e) for e in schema["enum"]):
            choices = ", ".join(_short(e) for e in schema["enum"])
            errors.append(f"{where}: must be one of {choices}; got {_short(value)}")
        return value
    kind = schema.get("type")
    if kind is None:
        return value
    kinds = kind if isinstance(kind, list) else [kind]
    for k in kinds:
        ok, converted = _coerce(k, value)
        if ok:
            break
    else:
        expected = " or ".join(kinds)
        errors.append(f"{where}: expected {expected}, got {_json_type_name(value)} {_short(value)}")
        return value
    if isinstance(converted, list) and "items" in schema:
        items = schema["items"]
        converted = [_check(items, v, f"{where}[{i}]", errors) for i, v in enumerate(converted)]
    elif isinstance(converted, dict):
        converted = _check_object(schema, converted, where, errors)
    return converted


def _type_fits(schema: Mapping[str, Any], value: Any) -> bool:
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if isinstance(kind, str) else []
    return any(_coerce(k, value)[0] for k in kinds)


def _coerce(kind: str, value: Any) -> tuple[bool, Any]:
    if kind == "string":
        return isinstance(value, str), value
    if kind == "boolean":
        return isinstance(value, bool), value
    if kind == "null":
        return value is None, value
    if isinstance(value, bool):
        return False, value
    if kind == "integer":
        if isinstance(value, float) and value.is_integer():
            return True, int(value)
        return isinstance(value, int), value
    if kind == "number":
        return isinstance(value, int | float), value
    if kind in ("array", "object"):
        want: type = list if kind == "array" else dict
        if isinstance(value, str):
            try:
                parsed = json.loads(value)
            except ValueError:
                return False, value
            return isinstance(parsed, want), parsed
        return isinstance(value, want), value
    return True, value  # a type keyword we do not know: do not block the call


def _check_object(
    schema: Mapping[str, Any], value: dict[str, Any], where: str, errors: list[str]
) -> dict[str, Any]:
    properties: Mapping[str, Any] = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    result: dict[str, Any] = {}
    prefix = f"{where}." if where else ""
    for key, item in value.items():
        if key in properties:
            result[key] = _check(properties[key], item, f"{prefix}{key}", errors)
        elif extra is False:
            allowed = ", ".join(properties) or "none"
            errors.append(f"unknown argument {prefix}{key!s} (accepted: {allowed})")
        elif isinstance(extra, Mapping):
            result[key] = _check(extra, item, f"{prefix}{key}", errors)
        else:
            result[key] = item
    for key in schema.get("required", ()):
        if key not in value:
            errors.append(f"missing required argument {prefix}{key}")
    return result


def _describe(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return "one of " + ", ".join(_short(e) for e in schema["enum"])
    kind = schema.get("type", "any value")
    return " or ".join(kind) if isinstance(kind, list) else str(kind)


def validate_arguments(
    schema: Mapping[str, Any], arguments: Any, *, tool_name: str = "tool"
) -> dict[str, Any]:
    """Check the model's ``arguments`` against a tool's ``input_schema``.

    Returns the arguments to call with (leniencies applied, ``null`` for optional
    non-nullable arguments dropped so the default applies); raises :class:`ToolError` listing
    every problem.
    """
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ToolError(
            f"invalid arguments for {tool_name}: expected a JSON object, got "
            f"{_json_type_name(arguments)} {_short(arguments)}"
        )
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    cleaned = {
        key: value
        for key, value in arguments.items()
        if not (
            value is None
            and key in properties
            and key not in required
            and not _accepts_null(properties[key])
        )
    }
    errors: list[str] = []
    checked = _check_object(schema, cleaned, "", errors)
    if errors:
        raise ToolError(f"invalid arguments for {tool_name}: " + "; ".join(errors))
    return checked


# ------------------------------------------------------------------------------------ calling


def normalize_output(value: Any) -> ToolOutput:
    """What a tool function returned, as a :data:`ToolOutput`.

    ``str`` stays; a list of content blocks (dicts with a ``type``) stays; ``None`` becomes
    ``"(no output)"``; anything else is JSON-encoded (non-JSON values via ``str``).
    """
    if isinstance(value, str):
        return value
    if value is None:
        return "(no output)"
    if isinstance(value, list) and value and all(_is_block(b) for b in value):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _is_block(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("type"), str)


async def invoke_tool(tool: Tool, arguments: Any, ctx: ToolContext) -> ToolOutput:
    """Validate the model's ``arguments`` for ``tool``, then run it with ``ctx``.

    Raises :class:`ToolError` for invalid arguments (nothing runs) and whatever the tool
    raises; ``asyncio.CancelledError`` if ``ctx.signal`` is already aborted.
    """
    checked = validate_arguments(tool.input_schema, arguments, tool_name=tool.name)
    ctx.signal.raise_if_aborted()
    if tool.takes_context:
        result = await tool.fn(ctx, **checked)
    else:
        result = await tool.fn(**checked)
    return normalize_output(result)
