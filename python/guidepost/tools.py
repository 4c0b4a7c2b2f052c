"""Serves the tools of Python modules over HTTP, for agents to call.

    python -m guidepost.tools my_tools.py [more.py | package.module ...] [--port 8089]

(`guidepost tools serve my_tools.py` runs the same.) Every function decorated with
`@guidepost.tool` in the given files or modules is served, in definition order. The server
speaks the Parlant plugin tool-service protocol, so an agent definition names it as a service
of kind `parlant`:

    services:
      - {name: shop, kind: parlant, url: http://127.0.0.1:8089}

and refers to its tools as `shop:track_order`. Prints `listening on http://HOST:PORT` once it
accepts connections (`--port 0` picks a free port); stops on Ctrl-C or SIGTERM after the calls
under way.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import logging
import os
import signal
import sys
from types import ModuleType
from typing import List, Optional, Sequence

from ._server import ToolServer, served
from ._tool import Tool


class LoadError(Exception):
    """A module that cannot be loaded or serves no tools."""


def load_module(spec: str) -> ModuleType:
    """A module from a file path (`tools/shop.py`) or a dotted name (`shop.tools`)."""
    if spec.endswith(".py") or os.sep in spec or os.path.exists(spec):
        path = os.path.abspath(spec)
        if not os.path.isfile(path):
            raise LoadError(f"no file {spec}")
        folder = os.path.dirname(path)
        if folder not in sys.path:
            sys.path.insert(0, folder)  # so the module imports its neighbours
        name = os.path.splitext(os.path.basename(path))[0]
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise LoadError(f"{spec} is not a Python module")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        module_spec.loader.exec_module(module)
        return module
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return importlib.import_module(spec)


def tools_of(modules: Sequence[ModuleType]) -> List[Tool]:
    """The tools the modules define, in definition order; an error when two share a name or
    there are none."""
    found: List[Tool] = []
    seen = {}
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, Tool) and all(value is not t for t in found):
                if value.name in seen:
                    raise LoadError(f"two tools are named `{value.name}` ({seen[value.name]} and {module.__name__})")
                seen[value.name] = module.__name__
                found.append(value)
    if not found:
        names = ", ".join(m.__name__ for m in modules)
        raise LoadError(f"no function decorated with @guidepost.tool in {names}")
    return found


async def serve(tools: List[Tool], host: str, port: int, timeout: Optional[float]) -> None:
    server = ToolServer(tools, host=host, port=port, timeout=timeout)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - Windows
            pass
    print(f"listening on {server.address}", flush=True)
    print(f"serving {len(tools)} tool(s):", *served(tools), sep="\n", file=sys.stderr, flush=True)
    await stop.wait()
    await server.close()


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m guidepost.tools",
        description="Serve the @guidepost.tool functions of Python modules to agents (the Parlant plugin protocol).",
    )
    parser.add_argument("modules", nargs="+", metavar="MODULE", help="a .py file or a dotted module name")
    parser.add_argument("--host", default=os.environ.get("GUIDEPOST_TOOLS_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("GUIDEPOST_TOOLS_PORT", "8089")),
                        help="0 picks a free port (default 8089)")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds after which a call fails, for tools without a timeout of their own")
    parser.add_argument("--quiet", action="store_true", help="log only failed calls")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(name)s: %(message)s")
    try:
        tools = tools_of([load_module(m) for m in args.modules])
    except LoadError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # the module itself failed to import
        logging.getLogger("guidepost.tools").exception("loading the tools failed")
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(tools, args.host, args.port, args.timeout))
    except OSError as e:
        print(f"error: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
