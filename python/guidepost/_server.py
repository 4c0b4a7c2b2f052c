"""A small asyncio HTTP/1.1 server speaking the Parlant plugin tool-service protocol, which
Guidepost (and Parlant) call tool services with:

- `GET /tools`: `{"tools": [Tool, ...]}`
- `GET /tools/{name}`: `{"tool": Tool}`
- `GET /tools/{name}/resolve?agent_id=&session_id=&customer_id=`: the tool, its choices
  computed for that customer
- `POST /tools/{name}/calls` with `{"agent_id", "session_id", "customer_id", "arguments"}`:
  `200`, a chunked `text/plain` body of JSON objects, one per chunk and flushed as they come
  (`{"message"}`, `{"status"}`, `{"custom"}`), ending with `{"result": {...}}` or
  `{"error": "..."}`. The `Idempotency-Key` request header becomes `context.idempotency_key`.

Arguments that do not fit the tool answer `422` before the tool runs, an unknown tool `404`.
A call whose client goes away runs to its end, as with Parlant's own servers, since the
engine never retries a call.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import traceback
from typing import Any, Dict, List, Optional, Sequence, Tuple
from urllib.parse import parse_qs, unquote, urlsplit

from ._schema import ArgumentError
from ._tool import Tool, ToolContext, ToolError, result_object

log = logging.getLogger("guidepost.tools")

REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 413: "Payload Too Large",
           422: "Unprocessable Content", 500: "Internal Server Error"}


class BadRequest(Exception):
    """A request that is not HTTP this server reads."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status


class Request:
    def __init__(self, method: str, target: str, headers: Dict[str, str], body: bytes) -> None:
        self.method = method
        parts = urlsplit(target)
        self.segments = [unquote(s) for s in parts.path.split("/") if s]
        self.query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        self.headers = headers
        self.body = body

    @property
    def keep_alive(self) -> bool:
        return self.headers.get("connection", "").lower() != "close"


async def read_request(reader: asyncio.StreamReader, max_body: int) -> Optional[Request]:
    """The next request on the connection; None when the client closed it."""
    line = await reader.readline()
    if not line:
        return None
    try:
        method, target, version = line.decode("latin-1").strip().split(" ")
    except ValueError:
        raise BadRequest(400, f"malformed request line {line[:100]!r}") from None
    if not version.startswith("HTTP/1."):
        raise BadRequest(400, f"unsupported protocol {version}")
    headers: Dict[str, str] = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, sep, value = line.decode("latin-1").partition(":")
        if not sep:
            raise BadRequest(400, f"malformed header line {line[:100]!r}")
        headers[name.strip().lower()] = value.strip()
    body = b""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size_line = await reader.readline()
            try:
                size = int(size_line.split(b";")[0].strip(), 16)
            except ValueError:
                raise BadRequest(400, "malformed chunk size") from None
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                break
            if len(body) + size > max_body:
                raise BadRequest(413, f"the body is larger than {max_body} bytes")
            body += await reader.readexactly(size)
            await reader.readline()
    elif "content-length" in headers:
        try:
            length = int(headers["content-length"])
        except ValueError:
            raise BadRequest(400, "malformed Content-Length") from None
        if length > max_body:
            raise BadRequest(413, f"the body is larger than {max_body} bytes")
        body = await reader.readexactly(length)
    return Request(method, target, headers, body)


def _head(status: int, headers: Sequence[Tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}"] + [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def send_json(writer: asyncio.StreamWriter, status: int, body: Any, keep_alive: bool) -> None:
    data = json.dumps(body).encode()
    headers = [("content-type", "application/json"), ("content-length", str(len(data))),
               ("connection", "keep-alive" if keep_alive else "close")]
    writer.write(_head(status, headers) + data)
    await writer.drain()


class ToolServer:
    """Serves `tools` on `host:port` (port 0: a free one, see `address` once started)."""

    def __init__(
        self,
        tools: Sequence[Tool],
        host: str = "127.0.0.1",
        port: int = 0,
        timeout: Optional[float] = None,
        max_body: int = 1 << 20,
    ) -> None:
        self.tools: Dict[str, Tool] = {}
        for t in tools:
            if t.name in self.tools:
                raise ValueError(f"two tools are named `{t.name}`")
            self.tools[t.name] = t
        self.host, self.port = host, port
        self.timeout = timeout
        self.max_body = max_body
        self._server: Optional[asyncio.base_events.Server] = None
        self._calls: set = set()

    @property
    def address(self) -> str:
        """`http://host:port` once started."""
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._connection, self.host, self.port, limit=1 << 16)
        sockets = self._server.sockets or []
        if sockets:
            self.port = sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stops accepting connections and waits for the calls under way."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        if self._calls:
            await asyncio.gather(*self._calls, return_exceptions=True)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    request = await read_request(reader, self.max_body)
                except BadRequest as e:
                    await send_json(writer, e.status, {"detail": str(e)}, keep_alive=False)
                    break
                except ValueError:  # a line over the reader's limit
                    await send_json(writer, 400, {"detail": "request line or header too long"}, keep_alive=False)
                    break
                if request is None:
                    break
                await self._respond(request, writer)
                if not request.keep_alive:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _respond(self, request: Request, writer: asyncio.StreamWriter) -> None:
        keep = request.keep_alive
        segments = request.segments
        if not segments or segments[0] != "tools" or len(segments) > 4:
            return await send_json(writer, 404, {"detail": "Not Found"}, keep)
        allowed = "POST" if len(segments) == 3 and segments[2] == "calls" else "GET"
        if len(segments) == 3 and segments[2] not in ("calls", "resolve") or len(segments) == 4:
            return await send_json(writer, 404, {"detail": "Not Found"}, keep)
        if request.method != allowed:
            return await send_json(writer, 405, {"detail": "Method Not Allowed"}, keep)
        if len(segments) == 1:
            return await send_json(writer, 200, {"tools": [t.describe() for t in self.tools.values()]}, keep)
        found = self.tools.get(segments[1])
        if found is None:
            return await send_json(writer, 404, {"detail": f"Tool: '{segments[1]}' does not exist"}, keep)
        if len(segments) == 2:
            return await send_json(writer, 200, {"tool": found.describe()}, keep)
        if segments[2] == "resolve":
            return await self._resolve(found, request, writer)
        await self._call(found, request, writer)

    async def _resolve(self, found: Tool, request: Request, writer: asyncio.StreamWriter) -> None:
        keep = request.keep_alive
        missing = [k for k in ("agent_id", "session_id", "customer_id") if k not in request.query]
        if missing:
            detail = [{"type": "missing", "loc": ["query", k], "msg": "Field required"} for k in missing]
            return await send_json(writer, 422, {"detail": detail}, keep)
        context = ToolContext(request.query["agent_id"], request.query["session_id"], request.query["customer_id"],
                              tool_name=found.name)
        try:
            described = await found.resolve(context)
        except Exception as e:
            log.error("choices of %s failed:\n%s", found.name, traceback.format_exc())
            return await send_json(writer, 500, {"detail": f"the choices of a parameter failed: {type(e).__name__}: {e}"}, keep)
        await send_json(writer, 200, {"tool": described}, keep)

    async def _call(self, found: Tool, request: Request, writer: asyncio.StreamWriter) -> None:
        keep = request.keep_alive
        try:
            body = json.loads(request.body or b"null")
        except ValueError as e:
            return await send_json(writer, 422, {"detail": f"the body is not JSON: {e}"}, keep)
        if not isinstance(body, dict):
            return await send_json(writer, 422, {"detail": "the body must be a JSON object"}, keep)
        problems = [f"`{k}` must be a string" for k in ("agent_id", "session_id", "customer_id")
                    if not isinstance(body.get(k), str)]
        arguments = body.get("arguments", {})
        if not isinstance(arguments, dict):
            problems.append("`arguments` must be an object")
        if problems:
            return await send_json(writer, 422, {"detail": "; ".join(problems)}, keep)
        try:
            kwargs = found.read_arguments(arguments)
        except ArgumentError as e:
            return await send_json(writer, 422, {"detail": f"tool `{found.name}`: {e}"}, keep)

        loop = asyncio.get_running_loop()
        queue: "asyncio.Queue[Dict[str, Any]]" = asyncio.Queue()

        def emit(item: Dict[str, Any]) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, item)

        context = ToolContext(body["agent_id"], body["session_id"], body["customer_id"],
                              idempotency_key=request.headers.get("idempotency-key"), tool_name=found.name, emit=emit)
        started = time.monotonic()
        task = asyncio.ensure_future(found.invoke(context, kwargs))
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)
        stream = _Stream(writer, keep)
        await stream.start()
        timeout = found.timeout if found.timeout is not None else self.timeout
        deadline = None if timeout is None else loop.time() + timeout
        getter: Optional[asyncio.Future] = None
        timed_out = False
        while True:
            if getter is None:
                getter = asyncio.ensure_future(queue.get())
            remaining = None if deadline is None else max(0.0, deadline - loop.time())
            done, _ = await asyncio.wait({getter, task}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            if getter in done:
                await stream.send(getter.result())
                getter = None
                continue
            if task in done:
                break
            timed_out = True
            break
        if getter is not None:
            getter.cancel()
        while not queue.empty():
            await stream.send(queue.get_nowait())
        elapsed = (time.monotonic() - started) * 1000
        if timed_out:
            if found.is_async:
                task.cancel()
            final: Dict[str, Any] = {"error": f"timed out after {timeout:g} s"}
            log.warning("call %s: timed out after %g s", found.name, timeout)
        else:
            final = self._final(found, task, elapsed)
        await stream.send(final)
        await stream.end()

    def _final(self, found: Tool, task: "asyncio.Future[Any]", elapsed: float) -> Dict[str, Any]:
        error = task.exception()
        if isinstance(error, ToolError):
            log.info("call %s: error in %.0f ms: %s", found.name, elapsed, error)
            return {"error": str(error)}
        if error is not None:
            trace = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            log.error("call %s: failed in %.0f ms:\n%s", found.name, elapsed, trace)
            return {"error": f"{type(error).__name__}: {error}"}
        try:
            result = result_object(task.result())
            json.dumps(result)
        except (TypeError, ValueError) as e:
            log.error("call %s: its result is not JSON: %s", found.name, e)
            return {"error": f"the result is not JSON: {e}"}
        log.info("call %s: ok in %.0f ms", found.name, elapsed)
        return {"result": result}


class _Stream:
    """A chunked `text/plain` body of JSON objects, one per chunk. A client that went away
    stops the writing, not the call."""

    def __init__(self, writer: asyncio.StreamWriter, keep_alive: bool) -> None:
        self.writer = writer
        self.keep_alive = keep_alive
        self.gone = False

    async def _write(self, data: bytes) -> None:
        if self.gone:
            return
        try:
            self.writer.write(data)
            await self.writer.drain()
        except (ConnectionError, RuntimeError):
            self.gone = True
            log.warning("the client went away before the call ended; the call runs on")

    async def start(self) -> None:
        headers = [("content-type", "text/plain; charset=utf-8"), ("transfer-encoding", "chunked"),
                   ("connection", "keep-alive" if self.keep_alive else "close")]
        await self._write(_head(200, headers))

    async def send(self, item: Dict[str, Any]) -> None:
        data = json.dumps(item).encode()
        await self._write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    async def end(self) -> None:
        await self._write(b"0\r\n\r\n")


def served(tools: List[Tool]) -> List[str]:
    """One line per tool, for the console."""
    lines = []
    for t in tools:
        params = ", ".join(p.name + ("" if p.required else "?") for p in t.parameters)
        flags = " (consequential)" if t.consequential else ""
        lines.append(f"  {t.name}({params}){flags}")
    return lines
