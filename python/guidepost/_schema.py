"""From a Python function's signature, type hints and docstring to a tool's parameters, and from
the arguments a call brings back to Python values.

Parameter types: `str`, `int`, `float`, `bool`, `datetime.date`, `datetime.datetime`, an `Enum`
or `Literal` of strings or integers, a `list` (or `List`, `Sequence`, `tuple[T, ...]`) of
those, and `Optional[...]` of any of them. `Annotated[T, Param(...)]` adds what the engine needs
to know beyond the type (where the value may come from, examples, a name to ask for it by,
choices computed per customer).
"""

from __future__ import annotations

import ast
import collections.abc
import datetime
import enum
import inspect
import json
import re
import typing
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Dict, List, Optional, Sequence, Tuple

try:  # Python 3.10+
    from types import UnionType  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.9
    UnionType = None  # type: ignore[assignment,misc]

#: The largest precedence, which the protocol uses for "no precedence" (as Parlant does).
NO_PRECEDENCE = 9223372036854775807

SCALARS: Dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
SUPPORTED = "str, int, float, bool, date, datetime, an Enum or Literal, a list of those, or Optional[...] of any"


class ToolDefinitionError(TypeError):
    """A tool function the protocol cannot describe; the message names the function and the
    parameter."""


@dataclass(frozen=True)
class Param:
    """What the engine should know about a parameter beyond its type, given as
    `Annotated[str, Param(...)]`.

    - `description`: what the value is (wins over the docstring's).
    - `source`: `"any"` (default), `"customer"` (only what the customer said) or `"context"`
      (only from the conversation's context, never asked for).
    - `examples`: example values.
    - `hidden`: never ask the customer for it nor report it missing.
    - `display_name`: the name to ask the customer for it by.
    - `significance`: why the value is needed, said when asking for it.
    - `precedence`: missing parameters with the lowest precedence are asked for first.
    - `choices`: a function of the `ToolContext` (sync or async) that returns the allowed
      values for this customer and session; the engine asks for them before every decision.
    """

    description: Optional[str] = None
    source: str = "any"
    examples: Sequence[Any] = ()
    hidden: bool = False
    display_name: Optional[str] = None
    significance: Optional[str] = None
    precedence: Optional[int] = None
    choices: Optional[Callable[..., Any]] = None

    def __post_init__(self) -> None:
        if self.source not in ("any", "customer", "context"):
            raise ValueError(f"Param source must be 'any', 'customer' or 'context', not {self.source!r}")


@dataclass
class ValueType:
    """A parameter's type as the protocol describes it, and how to read values back."""

    kind: str  # string, integer, number, boolean, date, datetime, array
    python: Any  # the Python type values are converted to (the item type for arrays)
    allowed: Optional[List[Any]] = None  # enum values (of the items, for arrays)
    enum_type: Optional[type] = None
    item: Optional["ValueType"] = None


@dataclass
class Parameter:
    """One parameter of a tool function."""

    name: str
    value_type: ValueType
    required: bool
    optional: bool  # None is an accepted value
    default: Any = inspect.Parameter.empty
    description: Optional[str] = None
    param: Param = field(default_factory=Param)

    def descriptor(self, choices: Optional[List[str]] = None) -> Dict[str, Any]:
        """The `[descriptor, options]` pair of the Parlant plugin protocol."""
        t = self.value_type
        descriptor: Dict[str, Any] = {"type": t.kind}
        allowed = choices if choices is not None else (t.item.allowed if t.item else t.allowed)
        if t.item is not None:
            descriptor["item_type"] = t.item.kind
        if allowed is not None:
            descriptor["enum"] = list(allowed)
        if self.description:
            descriptor["description"] = self.description
        if self.param.examples:
            descriptor["examples"] = list(self.param.examples)
        options = {
            "hidden": self.param.hidden,
            "source": self.param.source,
            "description": self.description,
            "significance": self.param.significance,
            "examples": list(self.param.examples),
            "precedence": NO_PRECEDENCE if self.param.precedence is None else self.param.precedence,
            "display_name": self.param.display_name,
        }
        return [descriptor, options]  # type: ignore[return-value]


# ------------------------------------------------------------------ types


def _is_union(origin: Any) -> bool:
    return origin is typing.Union or (UnionType is not None and origin is UnionType)


def _literal_type(values: Tuple[Any, ...], where: str) -> ValueType:
    kinds = {type(v) for v in values}
    if kinds <= {str}:
        return ValueType("string", str, allowed=list(values))
    if kinds <= {int}:
        return ValueType("integer", int, allowed=list(values))
    raise ToolDefinitionError(f"{where}: Literal values must be all strings or all integers, not {values!r}")


def _enum_type(enum_class: type, where: str) -> ValueType:
    values = tuple(member.value for member in enum_class)  # type: ignore[attr-defined]
    if not values:
        raise ToolDefinitionError(f"{where}: {enum_class.__name__} has no members")
    t = _literal_type(values, f"{where} ({enum_class.__name__})")
    t.enum_type = enum_class
    return t


def value_type(hint: Any, where: str) -> Tuple[ValueType, bool, Param]:
    """The protocol type of `hint`, whether None is allowed, and its `Param`."""
    param = Param()
    optional = False
    while True:
        origin = typing.get_origin(hint)
        if origin is Annotated:
            hint, *extras = typing.get_args(hint)
            for extra in extras:
                if isinstance(extra, Param):
                    param = extra
                elif isinstance(extra, str):
                    param = Param(**{**param.__dict__, "description": extra})
            continue
        if _is_union(origin):
            members = [a for a in typing.get_args(hint) if a is not type(None)]
            if len(members) != 1:
                raise ToolDefinitionError(f"{where}: a union of several types is not supported ({SUPPORTED})")
            optional = True
            hint = members[0]
            continue
        break
    return _plain_type(hint, where), optional, param


def _plain_type(hint: Any, where: str) -> ValueType:
    origin = typing.get_origin(hint)
    if hint in SCALARS:
        return ValueType(SCALARS[hint], hint)
    if hint is datetime.datetime:
        return ValueType("datetime", datetime.datetime)
    if hint is datetime.date:
        return ValueType("date", datetime.date)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum_type(hint, where)
    if origin is typing.Literal:
        return _literal_type(typing.get_args(hint), where)
    if hint in (list, tuple) or origin in (list, tuple, collections.abc.Sequence, typing.List):
        args = [a for a in typing.get_args(hint) if a is not Ellipsis]
        if origin is tuple and len(typing.get_args(hint)) != 2:
            raise ToolDefinitionError(f"{where}: a tuple parameter must be tuple[T, ...]")
        item = _plain_type(args[0], where) if args else ValueType("string", str)
        if item.kind == "array":
            raise ToolDefinitionError(f"{where}: lists of lists are not supported ({SUPPORTED})")
        return ValueType("array", list if origin is not tuple else tuple, item=item)
    if hint is inspect.Parameter.empty:
        raise ToolDefinitionError(f"{where}: needs a type annotation ({SUPPORTED})")
    name = getattr(hint, "__name__", repr(hint))
    raise ToolDefinitionError(f"{where}: type {name} is not supported ({SUPPORTED})")


# ------------------------------------------------------------------ docstrings

_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Returns|Return|Yields|Raises|Examples?|Notes?)\s*:?\s*$",
    re.IGNORECASE,
)
_PARAM_SECTIONS = {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"}
_REST = re.compile(r"^\s*:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")
_GOOGLE = re.compile(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_NUMPY = re.compile(r"^(\w+)\s*(?::\s*.*)?$")


def parse_docstring(doc: Optional[str]) -> Tuple[str, Dict[str, str]]:
    """The description (the text before any section) and each parameter's text, from a
    Google-style (`Args:`), reST (`:param x:`) or NumPy-style (`Parameters` underlined)
    docstring."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: List[str] = []
    params: Dict[str, List[str]] = {}
    section: Optional[str] = None
    current: Optional[str] = None
    indent = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        rest = _REST.match(line)
        numpy_header = i + 1 < len(lines) and re.fullmatch(r"-{3,}", lines[i + 1].strip() or "x")
        header = _SECTION.match(line)
        if rest:
            section, current = "rest", rest.group(1)
            params[current] = [rest.group(2)] if rest.group(2) else []
        elif header and (stripped.endswith(":") or numpy_header):
            section = header.group(1).lower()
            current = None
            if numpy_header:
                section = "numpy:" + section
                i += 1
        elif stripped.startswith(":") and section in (None, "rest"):
            section, current = "rest-other", None
        elif section is None:
            description.append(line)
        elif section in _PARAM_SECTIONS and stripped:
            level = len(line) - len(line.lstrip())
            match = _GOOGLE.match(stripped)
            if match and (current is None or level <= indent):
                current, indent = match.group(1), level
                params[current] = [match.group(2)] if match.group(2) else []
            elif current is not None:
                params[current].append(stripped)
        elif section.startswith("numpy:") and section[6:] in _PARAM_SECTIONS and stripped:
            level = len(line) - len(line.lstrip())
            match = _NUMPY.match(stripped)
            if level == 0 and match:
                current = match.group(1)
                params[current] = []
            elif current is not None:
                params[current].append(stripped)
        elif section == "rest" and current is not None and stripped:
            params[current].append(stripped)
        i += 1
    text = "\n".join(description).strip()
    return text, {name: " ".join(words).strip() for name, words in params.items() if " ".join(words).strip()}


# ------------------------------------------------------------------ reading arguments


class ArgumentError(ValueError):
    """An argument that cannot be read as its parameter's type."""


_TRUE = {"true", "yes", "y", "on", "1", "t"}
_FALSE = {"false", "no", "n", "off", "0", "f", ""}


def _number_text(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ArgumentError(f"expected a number, got {json.dumps(value)}")
    return str(value).strip()


def convert(value: Any, t: ValueType, name: str) -> Any:
    """`value` (as the engine sent it: Guidepost and Parlant send scalars as strings) as a
    Python value of type `t`."""
    try:
        return _convert(value, t)
    except ArgumentError as e:
        raise ArgumentError(f"argument `{name}`: {e}") from None


def _convert(value: Any, t: ValueType) -> Any:
    if t.kind == "array":
        items = _as_list(value)
        assert t.item is not None
        converted = [_convert(item, t.item) for item in items]
        return tuple(converted) if t.python is tuple else converted
    if t.allowed is not None:
        return _choice(value, t)
    if t.kind == "string":
        if isinstance(value, (dict, list)):
            raise ArgumentError(f"expected text, got {json.dumps(value)}")
        return value if isinstance(value, str) else json.dumps(value)
    if t.kind == "integer":
        text = _number_text(value)
        try:
            return int(text)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                raise ArgumentError(f"expected a whole number, got {json.dumps(value)}") from None
            if not number.is_integer():
                raise ArgumentError(f"expected a whole number, got {json.dumps(value)}") from None
            return int(number)
    if t.kind == "number":
        try:
            return float(_number_text(value))
        except ValueError:
            raise ArgumentError(f"expected a number, got {json.dumps(value)}") from None
    if t.kind == "boolean":
        if isinstance(value, bool):
            return value
        # Guidepost sends false as "" (the only false value Parlant's own servers read).
        text = str(value).strip().lower() if isinstance(value, (str, int)) else None
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ArgumentError(f"expected true or false, got {json.dumps(value)}")
    if t.kind in ("date", "datetime"):
        if not isinstance(value, str):
            raise ArgumentError(f"expected an ISO 8601 {t.kind}, got {json.dumps(value)}")
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            if t.kind == "datetime":
                return datetime.datetime.fromisoformat(text)
            if len(text) > 10 and text[10] in "T ":
                return datetime.datetime.fromisoformat(text).date()
            return datetime.date.fromisoformat(text)
        except ValueError:
            raise ArgumentError(f"expected an ISO 8601 {t.kind}, got {json.dumps(value)}") from None
    raise ArgumentError(f"unsupported type {t.kind}")  # pragma: no cover - types are checked at definition


def _choice(value: Any, t: ValueType) -> Any:
    assert t.allowed is not None
    picked: Any = None
    for allowed in t.allowed:
        if value == allowed or (isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip() == str(allowed)):
            picked = allowed
            break
    if picked is None and isinstance(value, str):
        folded = [a for a in t.allowed if str(a).lower() == value.strip().lower()]
        picked = folded[0] if len(folded) == 1 else None
    if picked is None:
        shown = ", ".join(json.dumps(a) for a in t.allowed)
        raise ArgumentError(f"expected one of {shown}, got {json.dumps(value)}")
    return t.enum_type(picked) if t.enum_type is not None else picked


def _as_list(value: Any) -> List[Any]:
    if isinstance(value, list):
        return value
    if not isinstance(value, str):
        raise ArgumentError(f"expected a list, got {json.dumps(value)}")
    text = value.strip()
    if not text:
        return []
    for parse in (json.loads, ast.literal_eval):
        try:
            parsed = parse(text)
        except (ValueError, SyntaxError):
            continue
        if isinstance(parsed, (list, tuple)):
            return list(parsed)
    inner = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    return [part.strip().strip("'\"") for part in inner.split(",") if part.strip()]
