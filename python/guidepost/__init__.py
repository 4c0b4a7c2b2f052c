"""Guidepost for Python teams.

Installing this package puts the `guidepost` command on the PATH (`guidepost serve`,
`guidepost check`, `guidepost simulate`, ...; `python -m guidepost` runs it too), and lets you
write an agent's tools as Python functions:

    from guidepost import ToolContext, tool

    @tool
    async def track_order(context: ToolContext, order_number: str) -> dict:
        \"\"\"Where an order stands.

        Args:
            order_number: The order number the customer gave.
        \"\"\"
        return {"order_number": order_number, "status": "shipped"}

`python -m guidepost.tools my_tools.py` (or `guidepost tools serve my_tools.py`) serves them
over HTTP; an agent definition names the server as a service of kind `parlant`.
"""

from ._binary import find_guidepost_bin
from ._schema import Param, ToolDefinitionError
from ._tool import Tool, ToolContext, ToolError, ToolResult, tool

__all__ = [
    "Param",
    "Tool",
    "ToolContext",
    "ToolDefinitionError",
    "ToolError",
    "ToolResult",
    "find_guidepost_bin",
    "tool",
]
