"""The tool server over real HTTP: the Parlant plugin protocol's routes, its streamed call
bodies (one JSON object per chunk), errors, timeouts and the idempotency key."""

import asyncio
import http.client
import json
import logging
import socket
import threading
import time
import unittest
from typing import Any, List, Optional, Tuple

from typing import Annotated

from guidepost import Param, ToolContext, ToolError, ToolResult, tool
from guidepost._server import ToolServer

FINISHED: List[str] = []


def setUpModule() -> None:
    # The server logs failed calls with their tracebacks; these tests fail calls on purpose.
    logging.getLogger("guidepost.tools").setLevel(logging.CRITICAL)


async def restaurants(context: ToolContext) -> List[str]:
    return [f"Chez Toy ({context.customer_id})", "Rust Bistro"]


@tool
async def track_order(context: ToolContext, order_number: str) -> ToolResult:
    """Where an order stands."""
    await context.emit_status("typing", {"stage": "Looking up order"})
    await context.emit_message(f"One moment, checking order {order_number}...")
    await context.emit_custom({"order_lookup": order_number})
    return ToolResult(data={"order_number": order_number, "status": "shipped"}, metadata={"carrier": "toy-post"},
                      control={"lifespan": "session"})


@tool(consequential=True)
def book_table(
    context: ToolContext,
    restaurant: Annotated[str, Param(choices=restaurants, source="context", hidden=True)],
    guests: int,
) -> dict:
    """Books a table."""
    context.emit_message("booking")
    return {"restaurant": restaurant, "guests": guests, "key": context.idempotency_key,
            "who": [context.agent_id, context.session_id, context.customer_id]}


@tool
async def refuse(reason: str) -> None:
    raise ToolError(f"cannot: {reason}")


@tool
def crash() -> None:
    {}["missing"]


@tool(timeout=0.2)
async def sleepy() -> str:
    await asyncio.sleep(30)
    return "late"


@tool
async def slow_to_finish(context: ToolContext) -> str:
    await asyncio.sleep(0.3)
    FINISHED.append(context.session_id)
    return "done"


@tool
def unserializable() -> object:
    return object()


@tool
async def broken_choices(x: Annotated[str, Param(choices=lambda: 1 / 0)]) -> None: ...


class Served:
    """A ToolServer on a free port, on an event loop in a thread of its own."""

    def __init__(self, **kwargs: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self.server = ToolServer([track_order, book_table, refuse, crash, sleepy, slow_to_finish,
                                  unserializable, broken_choices], **kwargs)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(10)
        self.port = self.server.port

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


class ToolServerTest(unittest.TestCase):
    served: Served

    @classmethod
    def setUpClass(cls) -> None:
        cls.served = Served()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.served.close()

    def request(self, method: str, path: str, body: Any = None, headers: Optional[dict] = None) -> Tuple[int, Any, Any]:
        connection = http.client.HTTPConnection("127.0.0.1", self.served.port, timeout=10)
        data = None if body is None else json.dumps(body)
        connection.request(method, path, body=data, headers={"content-type": "application/json", **(headers or {})})
        response = connection.getresponse()
        text = response.read().decode()
        connection.close()
        return response.status, response.getheader("content-type"), text

    def get(self, path: str) -> Tuple[int, Any]:
        status, _, text = self.request("GET", path)
        return status, json.loads(text)

    def call(self, name: str, arguments: dict, headers: Optional[dict] = None) -> Tuple[int, Any]:
        body = {"agent_id": "ag1", "session_id": "se1", "customer_id": "cu1", "arguments": arguments,
                "engine_context_id": None}
        status, content_type, text = self.request("POST", f"/tools/{name}/calls", body, headers)
        if status != 200:
            return status, json.loads(text)
        self.assertEqual(content_type, "text/plain; charset=utf-8")
        decoder, objects, at = json.JSONDecoder(), [], 0
        while at < len(text):
            value, at = decoder.raw_decode(text, at)
            objects.append(value)
        return status, objects

    def test_listing_and_reading_tools(self) -> None:
        status, listed = self.get("/tools")
        self.assertEqual(status, 200)
        self.assertEqual([t["name"] for t in listed["tools"]][:3], ["track_order", "book_table", "refuse"])
        status, read = self.get("/tools/book_table")
        self.assertEqual(status, 200)
        self.assertEqual(read["tool"]["required"], ["restaurant", "guests"])
        self.assertTrue(read["tool"]["consequential"])
        self.assertNotIn("enum", read["tool"]["parameters"]["restaurant"][0])
        self.assertEqual(self.get("/tools/nope")[0], 404)
        self.assertEqual(self.get("/elsewhere")[0], 404)
        self.assertEqual(self.request("DELETE", "/tools")[0], 405)
        self.assertEqual(self.request("GET", "/tools/track_order/calls")[0], 405)

    def test_resolving_computes_choices_for_the_customer(self) -> None:
        status, resolved = self.get("/tools/book_table/resolve?agent_id=a&session_id=s&customer_id=custC")
        self.assertEqual(status, 200)
        self.assertEqual(resolved["tool"]["parameters"]["restaurant"][0]["enum"], ["Chez Toy (custC)", "Rust Bistro"])
        status, missing = self.get("/tools/book_table/resolve?agent_id=a")
        self.assertEqual(status, 422)
        self.assertEqual([d["loc"] for d in missing["detail"]], [["query", "session_id"], ["query", "customer_id"]])
        status, failed = self.get("/tools/broken_choices/resolve?agent_id=a&session_id=s&customer_id=c")
        self.assertEqual(status, 500)
        self.assertIn("ZeroDivisionError", failed["detail"])

    def test_a_call_streams_its_emissions_then_its_result(self) -> None:
        status, objects = self.call("track_order", {"order_number": "12345"})
        self.assertEqual(status, 200)
        self.assertEqual(
            objects,
            [
                {"status": "typing", "data": {"stage": "Looking up order"}},
                {"message": "One moment, checking order 12345..."},
                {"custom": {"order_lookup": "12345"}},
                {"result": {"data": {"order_number": "12345", "status": "shipped"}, "metadata": {"carrier": "toy-post"},
                            "control": {"lifespan": "session"}, "canned_responses": [],
                            "canned_response_fields": {}, "guidelines": []}},
            ],
        )

    def test_each_object_is_one_chunk_as_parlant_reads_them(self) -> None:
        body = json.dumps({"agent_id": "a", "session_id": "s", "customer_id": "c", "arguments": {"order_number": "7"}})
        raw = (f"POST /tools/track_order/calls HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
               f"content-length: {len(body)}\r\nconnection: close\r\n\r\n{body}").encode()
        with socket.create_connection(("127.0.0.1", self.served.port), timeout=10) as s:
            s.sendall(raw)
            received = b""
            while chunk := s.recv(65536):
                received += chunk
        head, _, rest = received.partition(b"\r\n\r\n")
        self.assertIn(b"transfer-encoding: chunked", head.lower())
        chunks = []
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line, 16)
            if size == 0:
                break
            chunks.append(json.loads(rest[:size]))
            rest = rest[size + 2:]
        self.assertEqual([next(iter(c)) for c in chunks], ["status", "message", "custom", "result"])

    def test_the_context_carries_the_ids_and_the_idempotency_key(self) -> None:
        _, objects = self.call("book_table", {"restaurant": "Rust Bistro", "guests": "4"},
                               headers={"Idempotency-Key": "turn-9:book_table:0"})
        self.assertEqual(objects[0], {"message": "booking"})
        self.assertEqual(objects[1]["result"]["data"], {"restaurant": "Rust Bistro", "guests": 4,
                                                        "key": "turn-9:book_table:0", "who": ["ag1", "se1", "cu1"]})
        _, objects = self.call("book_table", {"restaurant": "Rust Bistro", "guests": "4"})
        self.assertIsNone(objects[-1]["result"]["data"]["key"])

    def test_failures_end_the_stream_with_an_error(self) -> None:
        self.assertEqual(self.call("refuse", {"reason": "closed"})[1], [{"error": "cannot: closed"}])
        self.assertEqual(self.call("crash", {})[1], [{"error": "KeyError: 'missing'"}])
        self.assertEqual(self.call("unserializable", {})[1][0]["error"][:23], "the result is not JSON:")
        started = time.monotonic()
        self.assertEqual(self.call("sleepy", {})[1], [{"error": "timed out after 0.2 s"}])
        self.assertLess(time.monotonic() - started, 10)

    def test_bad_calls_are_refused_before_the_tool_runs(self) -> None:
        status, body = self.call("book_table", {"restaurant": "x", "guests": "many"})
        self.assertEqual(status, 422)
        self.assertEqual(body["detail"], "tool `book_table`: argument `guests`: expected a whole number, got \"many\"")
        self.assertEqual(self.call("book_table", {"restaurant": "x"})[0], 422)
        self.assertEqual(self.call("book_table", {"restaurant": "x", "guests": 1, "pets": 2})[0], 422)
        self.assertEqual(self.call("nope", {})[0], 404)
        status, _, text = self.request("POST", "/tools/refuse/calls", {"arguments": {}})
        self.assertEqual(status, 422)
        self.assertIn("`agent_id` must be a string", text)
        status, _, text = self.request("POST", "/tools/refuse/calls", "not an object")
        self.assertEqual(status, 422)

    def test_one_connection_carries_several_requests(self) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.served.port, timeout=10)
        for _ in range(3):
            connection.request("POST", "/tools/refuse/calls", body=json.dumps(
                {"agent_id": "a", "session_id": "s", "customer_id": "c", "arguments": {"reason": "x"}}))
            response = connection.getresponse()
            self.assertEqual(response.read(), b'{"error": "cannot: x"}')
            connection.request("GET", "/tools/refuse")
            self.assertEqual(json.loads(connection.getresponse().read())["tool"]["name"], "refuse")
        connection.close()

    def test_a_call_whose_client_left_runs_to_its_end(self) -> None:
        body = json.dumps({"agent_id": "a", "session_id": "left", "customer_id": "c", "arguments": {}})
        raw = (f"POST /tools/slow_to_finish/calls HTTP/1.1\r\ncontent-length: {len(body)}\r\n\r\n{body}").encode()
        with socket.create_connection(("127.0.0.1", self.served.port), timeout=10) as s:
            s.sendall(raw)
            s.recv(100)
        for _ in range(100):
            if "left" in FINISHED:
                break
            time.sleep(0.05)
        self.assertIn("left", FINISHED)

    def test_malformed_requests_get_400(self) -> None:
        with socket.create_connection(("127.0.0.1", self.served.port), timeout=10) as s:
            s.sendall(b"NONSENSE\r\n\r\n")
            self.assertTrue(s.recv(100).startswith(b"HTTP/1.1 400"))


class ServerDefaultTimeout(unittest.TestCase):
    def test_the_server_timeout_applies_to_tools_without_their_own(self) -> None:
        served = Served(timeout=0.2)
        try:
            connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
            connection.request("POST", "/tools/slow_to_finish/calls", body=json.dumps(
                {"agent_id": "a", "session_id": "t", "customer_id": "c", "arguments": {}}))
            self.assertEqual(connection.getresponse().read(), b'{"error": "timed out after 0.2 s"}')
        finally:
            served.close()


class Emissions(unittest.TestCase):
    def test_outside_a_server_a_context_collects_them(self) -> None:
        context = ToolContext("a", "s", "c")
        result = asyncio.run(track_order.function(context, "1"))
        self.assertEqual([next(iter(e)) for e in context.emitted], ["status", "message", "custom"])
        self.assertEqual(result.data["status"], "shipped")


if __name__ == "__main__":
    unittest.main()
