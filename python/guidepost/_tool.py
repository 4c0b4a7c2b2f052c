"""The `@tool` decorator, the context a call runs in, and what a call returns."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import functools
import inspect
import typing
from typing import Any, Callable, Dict, List, Mapping, Optional, Union

from ._schema import ArgumentError, Parameter, ToolDefinitionError, convert, parse_docstring, value_type

OVERLAP = {"none": 1, "auto": 2, "always": 3}


class ToolError(Exception):
    """Raise it from a tool to fail the call with this message. The engine records the call as
    failed, with the message, and the reply goes on. Any other exception fails the call too,
    and its message then starts with the exception's type."""


@dataclasses.dataclass
class ToolResult:
    """A tool's full answer. A tool may also return plain data (a dict, a list, text, a
    number, a dataclass), which becomes `data`.

    - `data`: what the model sees.
    - `metadata`: for front ends only; the model does not see it.
    - `control`: `{"lifespan": "response"}` keeps the result to this reply only (`"session"`,
      the default, keeps it in the session); `{"mode": "manual"}` hands the session to a human.
    - `canned_responses`: extra reply templates for this reply.
    - `canned_response_fields`: values for the templates' fields, e.g. `{"balance": 120}`.
    - `guidelines`: instructions for this reply only, `[{"action": ..., "condition": ...}]`.
    """

    data: Any = None
    metadata: Dict[str, Any] = dataclasses.field(default_factory=dict)
    control: Dict[str, Any] = dataclasses.field(default_factory=dict)
    canned_responses: List[str] = dataclasses.field(default_factory=list)
    canned_response_fields: Dict[str, Any] = dataclasses.field(default_factory=dict)
    guidelines: List[Dict[str, Any]] = dataclasses.field(default_factory=list)

    def to_wire(self) -> Dict[str, Any]:
        """The `result` object of the protocol."""
        return {
            "data": self.data,
            "metadata": dict(self.metadata),
            "control": dict(self.control),
            "canned_responses": list(self.canned_responses),
            "canned_response_fields": dict(self.canned_response_fields),
            "guidelines": list(self.guidelines),
        }


class _Emitted:
    """What `emit_*` return: awaiting it is optional (the emission is already on its way), so
    sync tools call them plainly and async tools may `await` them."""

    def __await__(self) -> Any:
        return iter(())


class ToolContext:
    """Who a call is for, and a way to tell the customer something while the tool runs.

    - `agent_id`, `session_id`, `customer_id`: the conversation the call belongs to.
    - `idempotency_key`: the key Guidepost sends with a consequential tool's call, the same
      each time the same decision is made again (a retried turn, a resumed session), so a
      payment or a booking is made once; None when the caller sent none.
    - `tool_name`: the tool being called.

    Outside a server (in a unit test), emissions are collected in `emitted`.
    """

    def __init__(
        self,
        agent_id: str = "",
        session_id: str = "",
        customer_id: str = "",
        idempotency_key: Optional[str] = None,
        tool_name: str = "",
        emit: Optional[Callable[[Dict[str, Any]], None]] = None,
    ) -> None:
        self.agent_id = agent_id
        self.session_id = session_id
        self.customer_id = customer_id
        self.idempotency_key = idempotency_key
        self.tool_name = tool_name
        self.emitted: List[Dict[str, Any]] = []
        self._emit = emit

    def __repr__(self) -> str:
        return (
            f"ToolContext(agent_id={self.agent_id!r}, session_id={self.session_id!r}, "
            f"customer_id={self.customer_id!r}, idempotency_key={self.idempotency_key!r})"
        )

    def _send(self, item: Dict[str, Any]) -> _Emitted:
        if self._emit is None:
            self.emitted.append(item)
        else:
            self._emit(item)
        return _Emitted()

    def emit_message(self, text: str) -> _Emitted:
        """Sends the customer a message now, before the tool's result."""
        return self._send({"message": str(text)})

    def emit_status(self, status: str, data: Any = None) -> _Emitted:
        """Updates the session's status, e.g. `emit_status("typing", {"stage": "Looking up"})`."""
        return self._send({"status": status, "data": data})

    def emit_custom(self, data: Any) -> _Emitted:
        """Adds a custom event to the session."""
        return self._send({"custom": data})


def _json_ready(value: Any) -> Any:
    """`value` with dates, enums, dataclasses, sets and tuples made JSON."""
    if isinstance(value, ToolResult):
        return _json_ready(value.to_wire())
    if isinstance(value, (datetime.date, datetime.datetime, datetime.time)):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return _json_ready(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _json_ready(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_json_ready(v) for v in value]
    if hasattr(value, "model_dump") and callable(value.model_dump):  # pydantic models
        return _json_ready(value.model_dump(mode="json"))
    return value


def result_object(returned: Any) -> Dict[str, Any]:
    """The protocol's `result` object for what a tool function returned."""
    result = returned if isinstance(returned, ToolResult) else ToolResult(data=returned)
    return _json_ready(result.to_wire())


def _is_context_hint(hint: Any) -> bool:
    if hint is ToolContext:
        return True
    if typing.get_origin(hint) is typing.Union:
        return ToolContext in typing.get_args(hint)
    return False


class Tool:
    """A Python function served as a tool. Calling it calls the function."""

    def __init__(
        self,
        function: Callable[..., Any],
        name: Optional[str] = None,
        description: Optional[str] = None,
        consequential: bool = False,
        overlap: str = "auto",
        metadata: Optional[Mapping[str, Any]] = None,
        timeout: Optional[float] = None,
    ) -> None:
        self.function = function
        self.name = name or function.__name__
        where = f"tool `{self.name}`"
        if overlap not in OVERLAP:
            raise ToolDefinitionError(f"{where}: overlap must be 'none', 'auto' or 'always', not {overlap!r}")
        if timeout is not None and timeout <= 0:
            raise ToolDefinitionError(f"{where}: timeout must be a positive number of seconds")
        summary, documented = parse_docstring(function.__doc__)
        self.description = summary if description is None else description
        self.consequential = consequential
        self.overlap = overlap
        self.metadata = dict(metadata or {})
        self.timeout = timeout
        self.is_async = inspect.iscoroutinefunction(function)
        self.created = datetime.datetime.now(datetime.timezone.utc)
        try:
            hints = typing.get_type_hints(function, include_extras=True)
        except Exception as e:  # a forward reference that does not resolve, `X | None` on 3.9
            raise ToolDefinitionError(f"{where}: its type hints cannot be read: {e}") from e
        self.context_parameter: Optional[str] = None
        self.parameters: List[Parameter] = []
        for p in inspect.signature(function).parameters.values():
            at = f"{where}, parameter `{p.name}`"
            hint = hints.get(p.name, inspect.Parameter.empty)
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
                raise ToolDefinitionError(f"{at}: *args, **kwargs and positional-only parameters are not supported")
            if _is_context_hint(hint) or (hint is inspect.Parameter.empty and p.name in ("context", "ctx")):
                if self.context_parameter is not None:
                    raise ToolDefinitionError(f"{at}: a tool takes at most one ToolContext")
                self.context_parameter = p.name
                continue
            t, optional, param = value_type(hint, at)
            has_default = p.default is not inspect.Parameter.empty
            if has_default and p.default is not None:
                try:
                    convert(_json_ready(p.default), t, p.name)
                except ArgumentError as e:
                    raise ToolDefinitionError(f"{at}: its default does not fit its type: {e}") from None
            self.parameters.append(
                Parameter(
                    name=p.name,
                    value_type=t,
                    required=not has_default and not optional,
                    optional=optional or p.default is None,
                    default=p.default,
                    description=param.description or documented.get(p.name),
                    param=param,
                )
            )
        functools.update_wrapper(self, function)  # type: ignore[arg-type]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<guidepost tool {self.name}>"

    def describe(self, choices: Optional[Mapping[str, List[str]]] = None) -> Dict[str, Any]:
        """The tool as the Parlant plugin protocol describes it (`GET /tools/{name}`)."""
        choices = choices or {}
        return {
            "name": self.name,
            "creation_utc": self.created.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "description": self.description,
            "metadata": self.metadata,
            "parameters": {p.name: p.descriptor(choices.get(p.name)) for p in self.parameters},
            "required": [p.name for p in self.parameters if p.required],
            "consequential": self.consequential,
            "overlap": OVERLAP[self.overlap],
        }

    async def resolve(self, context: ToolContext) -> Dict[str, Any]:
        """The description for this context: each parameter with `Param(choices=...)` gets
        the values its function returns now."""
        choices: Dict[str, List[str]] = {}
        for p in self.parameters:
            provider = p.param.choices
            if provider is None:
                continue
            takes_context = bool(inspect.signature(provider).parameters)
            if inspect.iscoroutinefunction(provider):
                values = await (provider(context) if takes_context else provider())
            else:
                loop = asyncio.get_running_loop()
                call = functools.partial(provider, context) if takes_context else provider
                values = await loop.run_in_executor(None, call)
            choices[p.name] = [str(_json_ready(v)) for v in values]
        return self.describe(choices)

    def read_arguments(self, arguments: Mapping[str, Any]) -> Dict[str, Any]:
        """The keyword arguments for the function, from a call's `arguments`. An explicit
        null leaves a parameter its default (Parlant's engine sends null for every optional
        parameter the model did not fill)."""
        known = {p.name: p for p in self.parameters}
        unknown = [k for k in arguments if k not in known]
        if unknown:
            names = ", ".join(f"`{k}`" for k in unknown)
            raise ArgumentError(f"unknown argument {names} (parameters: {', '.join(known) or 'none'})")
        kwargs: Dict[str, Any] = {}
        for p in self.parameters:
            value = arguments.get(p.name)
            if value is None:
                if p.default is not inspect.Parameter.empty:
                    continue
                if p.optional:
                    kwargs[p.name] = None
                    continue
                raise ArgumentError(f"argument `{p.name}` is required")
            kwargs[p.name] = convert(value, p.value_type, p.name)
        return kwargs

    async def invoke(self, context: ToolContext, kwargs: Dict[str, Any]) -> Any:
        """Runs the function (a sync one in a worker thread) and returns what it returned."""
        if self.context_parameter is not None:
            kwargs = {**kwargs, self.context_parameter: context}
        if self.is_async:
            return await self.function(**kwargs)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, functools.partial(self.function, **kwargs))


def tool(
    function: Optional[Callable[..., Any]] = None,
    *,
    name: Optional[str] = None,
    description: Optional[str] = None,
    consequential: bool = False,
    overlap: str = "auto",
    metadata: Optional[Mapping[str, Any]] = None,
    timeout: Optional[float] = None,
) -> Union[Tool, Callable[[Callable[..., Any]], Tool]]:
    """Makes a function (async or not) a tool: `@tool` or `@tool(consequential=True, ...)`.

    The tool's description is the docstring's text before its sections; each parameter's, its
    entry under `Args:` (or `:param name:`, or a NumPy `Parameters` section), unless
    `Annotated[T, Param(description=...)]` gives one. A parameter annotated `ToolContext` (or
    named `context` or `ctx`, unannotated) receives the call's context. Parameters without a
    default that are not `Optional` are required.

    - `name`: the tool's name (default: the function's).
    - `consequential`: a tool with effects that are hard to undo (payments, bookings): the
      engine decides its calls most carefully, and sends each call an idempotency key.
    - `overlap`: `"none"` (decided alone), `"auto"` or `"always"` (decided with all tools).
    - `metadata`: free-form data listed with the tool.
    - `timeout`: seconds after which the call fails (an async function is cancelled; a sync
      one is left to finish in its thread, its result dropped).
    """

    def make(f: Callable[..., Any]) -> Tool:
        return Tool(f, name, description, consequential, overlap, metadata, timeout)

    return make(function) if function is not None else make


__all__ = ["Tool", "ToolContext", "ToolError", "ToolResult", "tool"]
