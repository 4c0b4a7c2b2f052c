"""The tools of the Pine Street Books agent (agent.yaml), written as Python functions.

Serve them with

    guidepost tools serve examples/python-tools/shop_tools.py      # or: python -m guidepost.tools ...

and the agent reaches them as the service `shop` (http://127.0.0.1:8089).
"""

import datetime
from typing import Annotated, Dict, Literal

from guidepost import Param, ToolContext, ToolError, ToolResult, tool

# Stands in for the shop's order database.
ORDERS = {
    "12345": {"title": "The Left Hand of Darkness", "status": "shipped", "carrier": "Parcelforce",
              "arrives": datetime.date(2026, 12, 4)},
    "23456": {"title": "Middlemarch", "status": "packing", "carrier": None, "arrives": datetime.date(2026, 12, 8)},
    "34567": {"title": "Dune", "status": "delivered", "carrier": "Royal Mail", "arrives": datetime.date(2026, 11, 20)},
}

# Returns arranged so far, by the idempotency key of the call that arranged them: the same
# decision made again (a retried turn) gets the same return, not a second one.
RETURNS: Dict[str, dict] = {}


@tool
async def track_order(
    context: ToolContext,
    order_number: Annotated[str, Param(source="customer", examples=["12345"], display_name="order number")],
) -> ToolResult:
    """Where an order stands: its status, its carrier and the day it arrives.

    Args:
        order_number: The order number the customer gave (five digits, from the confirmation email).
    """
    await context.emit_status("typing", {"stage": "Looking up the order"})
    order = ORDERS.get(order_number.strip().lstrip("#"))
    if order is None:
        raise ToolError(f"there is no order {order_number}; order numbers have five digits")
    return ToolResult(
        data={"order_number": order_number, **order},
        canned_response_fields={"arrives": order["arrives"].strftime("%A %d %B")},
    )


@tool(consequential=True, timeout=10)
def arrange_return(
    context: ToolContext,
    order_number: Annotated[str, Param(source="customer")],
    reason: Literal["damaged", "wrong book", "changed my mind"],
    refund_to: Literal["card", "store credit"] = "card",
) -> dict:
    """Arranges the return of a delivered order and emails the customer a prepaid label.

    Args:
        order_number: The order to return.
        reason: Why the customer returns it.
        refund_to: Where the refund goes.
    """
    order = ORDERS.get(order_number.strip().lstrip("#"))
    if order is None:
        raise ToolError(f"there is no order {order_number}")
    if order["status"] != "delivered":
        raise ToolError(f"order {order_number} has not been delivered yet ({order['status']}); it can be cancelled instead")
    key = context.idempotency_key or f"{context.session_id}:{order_number}"
    if key not in RETURNS:
        RETURNS[key] = {"return_number": f"R-{len(RETURNS) + 1:04d}", "order_number": order_number,
                        "reason": reason, "refund_to": refund_to, "label_sent_to": "the email on the order"}
    return RETURNS[key]
