#!/usr/bin/env python3
"""Conformance flow for the official Python client of Parlant (parlant-client 3.3.1).

Drives a full REST flow against a Parlant-3.3.2-compatible server (Guidepost, or the
reference Parlant) using ONLY the official client package, and asserts the documented wire
behaviour as it goes. Prints one line per step; on the first failure prints
"FAIL <step>: <reason>" and exits 1.

Install the client into an isolated directory and run:

    python3 -m pip install --target /tmp/parlant-client-3.3.1 parlant-client==3.3.1
    GUIDEPOST_URL=http://127.0.0.1:8800 PYTHONPATH=/tmp/parlant-client-3.3.1 \
        python3 -s crates/guidepost-server/tests/clients/python/flow.py

(`-s` keeps a user site-packages out of the picture; the target directory brings its own
httpx and pydantic. pip may print a dependency-conflict warning about packages installed
elsewhere on the machine; it does not affect the --target directory. Add --no-warn-conflicts
to silence it.)

Environment:
  GUIDEPOST_URL                      base URL of the server (required), e.g. http://127.0.0.1:8800
  FLOW_TOLERATE_REFERENCE_QUIRKS=1   turn the checks that the reference Parlant 3.3.2 is known to
                                     fail (listed in KNOWN_QUIRKS) into warnings. Default: strict,
                                     i.e. the documented/correct behaviour is required.
  FLOW_TURN_TIMEOUT_S                per-turn deadline (default 120)

The agent's replies are not inspected (the test LLM is fake); only the protocol is.
Every wait is bounded. The flow only deletes what it created.
"""
from __future__ import annotations

import os
import sys
import time
import traceback
import uuid
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional, Sequence

try:
    from parlant.client import ParlantClient
    from parlant.client.core.api_error import ApiError
    from parlant.client.errors import (
        GatewayTimeoutError,
        NotFoundError,
        UnprocessableEntityError,
    )
    from parlant.client.types import (
        AgentTagUpdateParams,
        CannedResponseField,
        CannedResponseMetadataUpdateParams,
        CannedResponseTagUpdateParams,
        CapabilityTagUpdateParams,
        ConsumptionOffsetsUpdateParams,
        ContextVariableTagsUpdateParams,
        CustomerMetadataUpdateParams,
        CustomerTagUpdateParams,
        GuidelineLabelsUpdateParams,
        GuidelineMetadataUpdateParams,
        GuidelineTagsUpdateParams,
        JourneyConditionUpdateParams,
        SessionLabelsUpdateParams,
        SessionMetadataUpdateParams,
        TermTagsUpdateParams,
    )
except ImportError as exc:  # pragma: no cover - environment problem
    print(f"FAIL setup: cannot import the official client (parlant-client==3.3.1): {exc}")
    sys.exit(2)

BASE_URL = os.environ.get("GUIDEPOST_URL", "").rstrip("/")
TOLERATE = os.environ.get("FLOW_TOLERATE_REFERENCE_QUIRKS") == "1"
TURN_TIMEOUT_S = float(os.environ.get("FLOW_TURN_TIMEOUT_S", "120"))
RUN = uuid.uuid4().hex[:8]  # makes names unique (tag names must be unique server-wide)

# Checks that Parlant 3.3.2 itself fails, although its documentation (or common sense) says
# otherwise. A correct server passes them; with FLOW_TOLERATE_REFERENCE_QUIRKS=1 they warn.
KNOWN_QUIRKS = {
    "guideline-create-enabled-false": "POST /guidelines ignores enabled=false "
    "(GuidelineModule.create does `enabled or True`)",
    "customers-page-total-count": "GET /customers?limit&cursor: pages after the first report "
    "total_count without the guest customer (and without the items before the cursor)",
    "customers-page-size": "GET /customers?limit&cursor: pages after the first ignore limit "
    "and return every remaining customer",
    "sessions-page-total-count": "GET /sessions?limit&cursor: total_count on later pages is the "
    "number of items from the cursor on, not the total",
    "correlation-id-filter-ignored": "GET /sessions/{id}/events?correlation_id=... is accepted "
    "but ignored (returns every event)",
    "relationships-indirect-duplicates": "GET /relationships?guideline_id=... (indirect=true, "
    "no kind) returns every relationship twice (the kind list is iterated twice)",
}

DEVIATIONS: list[str] = []
_STEP = ["setup"]
# best-effort undo actions, run (newest first) only when the flow fails, so that a failed run
# does not leave agents/guidelines/relationships behind on a shared server
_UNDO: list[Callable[[], Any]] = []


def undo(fn: Callable[[], Any]) -> None:
    _UNDO.append(fn)


def _run_undo() -> None:
    for fn in reversed(_UNDO):
        try:
            fn()
        except Exception:  # noqa: BLE001 - already gone, or the server is broken: ignore
            pass


class FlowFailure(Exception):
    pass


def check(cond: Any, msg: str) -> None:
    if not cond:
        raise FlowFailure(msg)


def eq(actual: Any, expected: Any, what: str) -> None:
    if actual != expected:
        raise FlowFailure(f"{what}: expected {expected!r}, got {actual!r}")


def quirk(cond: Any, key: str, msg: str) -> None:
    """A check the reference is known to fail (see KNOWN_QUIRKS)."""
    if cond:
        return
    if TOLERATE:
        DEVIATIONS.append(f"{_STEP[0]}: {key}: {msg}")
        print(f"      (tolerated known reference deviation '{key}': {msg})")
        return
    raise FlowFailure(
        f"{msg} [this is known Parlant 3.3.2 deviation '{key}': {KNOWN_QUIRKS[key]}; "
        f"set FLOW_TOLERATE_REFERENCE_QUIRKS=1 to tolerate it]"
    )


def expect_status(fn: Callable[[], Any], status: int, exc_type: Optional[type] = None) -> ApiError:
    """Calls fn, which must raise the client's ApiError with `status` (and of exc_type if given)."""
    try:
        got = fn()
    except ApiError as e:
        check(e.status_code == status, f"expected HTTP {status}, got {e.status_code} ({e.body!r})")
        if exc_type is not None:
            check(isinstance(e, exc_type), f"expected {exc_type.__name__}, got {type(e).__name__}")
        return e
    raise FlowFailure(f"expected HTTP {status}, but the call succeeded and returned {got!r}")


_step_notes: list[str] = []


def note(s: str) -> None:
    _step_notes.append(s)


@contextmanager
def step(name: str) -> Iterator[None]:
    _STEP[0] = name
    _step_notes.clear()
    t0 = time.monotonic()
    try:
        yield
    except FlowFailure as e:
        print(f"FAIL {name}: {e}")
        _run_undo()
        sys.exit(1)
    except ApiError as e:
        print(f"FAIL {name}: unexpected HTTP {e.status_code}: {e.body!r}")
        _run_undo()
        sys.exit(1)
    except Exception as e:  # noqa: BLE001 - any other error fails the step, with context
        print(f"FAIL {name}: {type(e).__name__}: {e}")
        traceback.print_exc(limit=6)
        _run_undo()
        sys.exit(1)
    dt = time.monotonic() - t0
    extra = f" ({'; '.join(_step_notes)})" if _step_notes else ""
    print(f"ok   {name} [{dt:.2f}s]{extra}")


def ids(items: Sequence[Any]) -> list[str]:
    return [x.id for x in items]


def unique_ids(items: Sequence[Any]) -> bool:
    xs = ids(items)
    return len(xs) == len(set(xs))


# --------------------------------------------------------------------------------------------


def main() -> None:
    if not BASE_URL:
        print("FAIL setup: set GUIDEPOST_URL to the server's base URL, e.g. http://127.0.0.1:8800")
        sys.exit(2)
    print(f"flow: parlant-client conformance against {BASE_URL} (run {RUN}, "
          f"{'tolerating' if TOLERATE else 'strict about'} known reference quirks)")
    client = ParlantClient(base_url=BASE_URL, timeout=60)
    raw = client._client_wrapper.httpx_client  # the client's own raw request facility

    created: dict[str, Any] = {}

    # ---------------------------------------------------------------- health
    with step("healthz"):
        h = client.health_check_healthz_get()
        check(isinstance(h, dict) and "status" in h, f"healthz body: {h!r}")

    # ---------------------------------------------------------------- tags
    with step("tags: create"):
        t1 = client.tags.create(name=f"flow-{RUN}-a")
        undo(lambda: client.tags.delete(t1.id))
        t2 = client.tags.create(name=f"flow-{RUN}-b")
        undo(lambda: client.tags.delete(t2.id))
        eq(t1.name, f"flow-{RUN}-a", "tag name")
        check(t1.id and t1.id != t2.id, "tags need distinct non-empty ids")
        created["t1"], created["t2"] = t1, t2

    with step("tags: list / list by name / read"):
        all_tags = client.tags.list()
        check({t1.id, t2.id} <= set(ids(all_tags)), "created tags missing from GET /tags")
        by_name = client.tags.list(name=f"flow-{RUN}-a")
        eq(ids(by_name), [t1.id], "GET /tags?name= result")
        eq(client.tags.list(name=f"flow-{RUN}-none"), [], "GET /tags?name=<unknown>")
        r = client.tags.retrieve(t1.id)
        eq((r.id, r.name), (t1.id, t1.name), "read tag")

    with step("tags: update / delete"):
        t3 = client.tags.create(name=f"flow-{RUN}-c")
        undo(lambda: client.tags.delete(t3.id))
        u = client.tags.update(t3.id, name=f"flow-{RUN}-c2")
        eq(u.name, f"flow-{RUN}-c2", "updated tag name")
        eq(client.tags.retrieve(t3.id).name, f"flow-{RUN}-c2", "tag name after update")
        check(client.tags.delete(t3.id) is None, "DELETE /tags/{id} returns no body")
        expect_status(lambda: client.tags.retrieve(t3.id), 404, NotFoundError)

    # ---------------------------------------------------------------- agents
    with step("agents: create (with and without id) / read / list"):
        a1 = client.agents.create(name=f"Flow agent {RUN}", description="conformance")
        undo(lambda: client.agents.delete(a1.id))
        check(a1.id, "agent id")
        eq(a1.name, f"Flow agent {RUN}", "agent name")
        eq(a1.description, "conformance", "agent description")
        eq(a1.max_engine_iterations, 3, "default max_engine_iterations")
        eq(a1.composition_mode, "fluid", "default composition_mode")
        eq(a1.message_output_mode, "block", "default message_output_mode")
        eq(a1.tags, [], "default agent tags")
        a2_id = f"flow-agent-{RUN}"
        a2 = client.agents.create(id=a2_id, name="Flow agent 2", max_engine_iterations=2,
                                  composition_mode="canned_fluid", tags=[t1.id])
        undo(lambda: client.agents.delete(a2_id))
        eq(a2.id, a2_id, "client-chosen agent id")
        eq(a2.composition_mode, "canned_fluid", "agent composition_mode")
        eq(a2.tags, [t1.id], "agent tags")
        r = client.agents.retrieve(a1.id)
        eq((r.id, r.name), (a1.id, a1.name), "read agent")
        check({a1.id, a2_id} <= set(ids(client.agents.list())), "agents missing from GET /agents")
        created["agent"] = a1

    with step("agents: update (fields, tags add/remove) / delete"):
        u = client.agents.update(a2_id, name="Flow agent 2b", description="d2",
                                 tags=AgentTagUpdateParams(add=[t2.id]))
        eq(u.name, "Flow agent 2b", "updated agent name")
        eq(u.description, "d2", "updated agent description")
        eq(sorted(u.tags), sorted([t1.id, t2.id]), "agent tags after add")
        u = client.agents.update(a2_id, tags=AgentTagUpdateParams(remove=[t1.id]))
        eq(u.tags, [t2.id], "agent tags after remove")
        eq(u.name, "Flow agent 2b", "agent name untouched by a tags-only update")
        eq(client.agents.retrieve(a2_id).tags, [t2.id], "agent tags after re-read")
        client.agents.delete(a2_id)
        expect_status(lambda: client.agents.retrieve(a2_id), 404, NotFoundError)
        check(a2_id not in ids(client.agents.list()), "deleted agent still listed")

    # ---------------------------------------------------------------- customers
    with step("customers: create / read / guest exists"):
        c1 = client.customers.create(name="Flow Alice", metadata={"tier": "gold", "x": "1"},
                                     tags=[t1.id])
        undo(lambda: client.customers.delete(c1.id))
        eq(c1.name, "Flow Alice", "customer name")
        eq(c1.metadata, {"tier": "gold", "x": "1"}, "customer metadata")
        eq(c1.tags, [t1.id], "customer tags")
        check(c1.creation_utc is not None, "customer creation_utc")
        c2 = client.customers.create(id=f"flow-cust-{RUN}", name="Flow Bob")
        undo(lambda: client.customers.delete(c2.id))
        eq(c2.id, f"flow-cust-{RUN}", "client-chosen customer id")
        r = client.customers.retrieve(c1.id)
        eq((r.id, r.name, r.metadata), (c1.id, c1.name, c1.metadata), "read customer")
        g = client.customers.retrieve("guest")
        eq(g.id, "guest", "guest customer id")
        created["customer"] = c1

    with step("customers: list (plain)"):
        lst = client.customers.list()
        check(isinstance(lst, list), f"GET /customers without limit must be a plain array, got {type(lst).__name__}")
        check("guest" in ids(lst), "guest missing from GET /customers")
        check({c1.id, c2.id} <= set(ids(lst)), "created customers missing from GET /customers")
        check(unique_ids(lst), "GET /customers repeats a customer")

    with step("customers: list with limit -> cursor pages"):
        extra = [client.customers.create(name=f"Flow page {i} {RUN}") for i in range(5)]
        for c in extra:
            undo(lambda c=c: client.customers.delete(c.id))
        mine = {c1.id, c2.id} | {c.id for c in extra}
        limit = 2
        first = client.customers.list(limit=limit)
        check(not isinstance(first, list), "GET /customers?limit= must return a page object")
        check(hasattr(first, "items") and hasattr(first, "total_count"), "page object fields")
        total = first.total_count
        seen: list[str] = []
        page, n_pages = first, 0
        while True:
            n_pages += 1
            check(n_pages <= 100, "customer pagination did not terminate within 100 pages")
            quirk(len(page.items) <= limit, "customers-page-size",
                  f"page {n_pages} has {len(page.items)} items, more than limit={limit}")
            quirk(page.total_count == total, "customers-page-total-count",
                  f"page {n_pages} total_count={page.total_count}, first page said {total}")
            seen += ids(page.items)
            if page.has_more:
                check(page.next_cursor, f"page {n_pages}: has_more=true but no next_cursor")
                page = client.customers.list(limit=limit, cursor=page.next_cursor)
            else:
                check(page.next_cursor is None, f"page {n_pages}: has_more=false but next_cursor={page.next_cursor!r}")
                break
        check(len(seen) == len(set(seen)), f"a customer was repeated across pages: {seen}")
        check(mine <= set(seen), f"customers missed by the page walk: {sorted(mine - set(seen))}")
        check("guest" in seen, "guest missing from the page walk")
        eq(len(seen), total, "number of customers seen in the walk vs first page total_count")
        note(f"{n_pages} pages, {len(seen)} customers")
        created["extra_customers"] = extra

    with step("customers: update metadata set/unset, tags add/remove; delete"):
        u = client.customers.update(c1.id, name="Flow Alice B",
                                    metadata=CustomerMetadataUpdateParams(set_={"y": "2"}, unset=["x"]),
                                    tags=CustomerTagUpdateParams(add=[t2.id], remove=[t1.id]))
        eq(u.name, "Flow Alice B", "customer name after update")
        eq(u.metadata, {"tier": "gold", "y": "2"}, "customer metadata after set/unset")
        eq(u.tags, [t2.id], "customer tags after add/remove")
        eq(client.customers.retrieve(c1.id).metadata, {"tier": "gold", "y": "2"}, "metadata re-read")
        client.customers.delete(c2.id)
        expect_status(lambda: client.customers.retrieve(c2.id), 404, NotFoundError)
        for c in extra:
            client.customers.delete(c.id)

    # ---------------------------------------------------------------- guidelines
    with step("guidelines: create (tags, criticality, metadata, enabled=false, labels, priority)"):
        g1 = client.guidelines.create(
            condition="The customer asks about refunds",
            action="Explain the refund policy",
            description="refund rule",
            criticality="high",
            metadata={"owner": "ops", "n": 1},
            enabled=False,
            tags=[t1.id],
            labels=["billing", "faq"],
            priority=2,
        )
        undo(lambda: client.guidelines.delete(g1.id))
        eq(g1.condition, "The customer asks about refunds", "guideline condition")
        eq(g1.action, "Explain the refund policy", "guideline action")
        eq(g1.description, "refund rule", "guideline description")
        eq(g1.criticality, "high", "guideline criticality")
        eq(g1.metadata, {"owner": "ops", "n": 1}, "guideline metadata")
        eq(g1.tags, [t1.id], "guideline tags")
        eq(sorted(g1.labels or []), ["billing", "faq"], "guideline labels")
        eq(g1.priority, 2, "guideline priority")
        quirk(g1.enabled is False, "guideline-create-enabled-false",
              f"created with enabled=false but got enabled={g1.enabled!r}")
        g2 = client.guidelines.create(condition="The customer is angry")
        undo(lambda: client.guidelines.delete(g2.id))
        eq(g2.action, None, "observational guideline action")
        eq(g2.criticality, "medium", "default criticality")
        eq(g2.enabled, True, "default enabled")
        eq(g2.priority, 0, "default priority")
        g3 = client.guidelines.create(id=f"flow-g-{RUN}", condition="The customer says hi",
                                      action="Greet back")
        undo(lambda: client.guidelines.delete(g3.id))
        eq(g3.id, f"flow-g-{RUN}", "client-chosen guideline id")
        created["g1"], created["g2"], created["g3"] = g1, g2, g3

    with step("guidelines: read returns {guideline, relationships, tool_associations}"):
        r = client.guidelines.retrieve(g1.id)
        eq(r.guideline.id, g1.id, "read guideline id")
        eq(r.guideline.condition, g1.condition, "read guideline condition")
        eq(r.relationships, [], "relationships of a fresh guideline")
        eq(r.tool_associations, [], "tool_associations of a fresh guideline")

    with step("guidelines: update (metadata set/unset, labels upsert/remove, enabled, fields)"):
        r = client.guidelines.update(
            g1.id,
            condition="The customer asks about refunds or returns",
            criticality="low",
            enabled=True,
            metadata=GuidelineMetadataUpdateParams(set_={"a": "b"}, unset=["n"]),
            labels=GuidelineLabelsUpdateParams(upsert=["vip"], remove=["faq"]),
            tags=GuidelineTagsUpdateParams(add=[t2.id]),
            priority=5,
        )
        gu = r.guideline
        eq(gu.condition, "The customer asks about refunds or returns", "updated condition")
        eq(gu.criticality, "low", "updated criticality")
        eq(gu.enabled, True, "enabled after update")
        eq(gu.metadata, {"owner": "ops", "a": "b"}, "metadata after set/unset")
        eq(sorted(gu.labels or []), ["billing", "vip"], "labels after upsert/remove")
        eq(sorted(gu.tags), sorted([t1.id, t2.id]), "tags after add")
        eq(gu.priority, 5, "updated priority")
        gu = client.guidelines.update(g1.id, enabled=False).guideline
        eq(gu.enabled, False, "enabled after update to false")
        eq(client.guidelines.retrieve(g1.id).guideline.enabled, False, "enabled=false re-read")
        gu = client.guidelines.update(g1.id, enabled=True).guideline
        eq(gu.enabled, True, "enabled after update back to true")

    with step("guidelines: list / list by tag_id"):
        allg = client.guidelines.list()
        check({g1.id, g2.id, g3.id} <= set(ids(allg)), "guidelines missing from GET /guidelines")
        by_tag = client.guidelines.list(tag_id=t2.id)
        eq(ids(by_tag), [g1.id], "GET /guidelines?tag_id= result")

    # ---------------------------------------------------------------- relationships
    with step("relationships: create (guideline->guideline entailment/priority, tag source/target)"):
        r1 = client.relationships.create(kind="entailment", source_guideline=g1.id, target_guideline=g2.id)
        undo(lambda: client.relationships.delete(r1.id))
        eq(r1.kind, "entailment", "relationship kind")
        check(r1.source_guideline is not None and r1.source_guideline.id == g1.id, "r1 source guideline")
        check(r1.target_guideline is not None and r1.target_guideline.id == g2.id, "r1 target guideline")
        check(r1.source_tag is None and r1.target_tag is None, "r1 has no tag ends")
        r2 = client.relationships.create(kind="priority", source_guideline=g2.id, target_guideline=g3.id)
        undo(lambda: client.relationships.delete(r2.id))
        eq(r2.kind, "priority", "relationship kind")
        r3 = client.relationships.create(kind="dependency", source_tag=t2.id, target_guideline=g3.id)
        undo(lambda: client.relationships.delete(r3.id))
        check(r3.source_tag is not None and r3.source_tag.id == t2.id, "r3 source tag")
        check(r3.source_guideline is None, "r3 has no source guideline")
        r4 = client.relationships.create(kind="priority", source_guideline=g3.id, target_tag=t1.id)
        undo(lambda: client.relationships.delete(r4.id))
        check(r4.target_tag is not None and r4.target_tag.id == t1.id, "r4 target tag")
        created["rels"] = [r1, r2, r3, r4]

    with step("relationships: list by guideline_id / kind / tag_id; read"):
        direct = client.relationships.list(guideline_id=g2.id, indirect=False)
        eq(sorted(ids(direct)), sorted([r1.id, r2.id]), "direct relationships of g2")
        ent = client.relationships.list(guideline_id=g2.id, kind="entailment", indirect=False)
        eq(ids(ent), [r1.id], "g2 entailment relationships")
        pri = client.relationships.list(guideline_id=g2.id, kind="priority", indirect=False)
        eq(ids(pri), [r2.id], "g2 priority relationships")
        default = client.relationships.list(guideline_id=g1.id)
        check(r1.id in ids(default), "r1 missing from GET /relationships?guideline_id=g1")
        quirk(unique_ids(default), "relationships-indirect-duplicates",
              f"GET /relationships?guideline_id=g1 repeats ids: {ids(default)}")
        by_tag = client.relationships.list(tag_id=t2.id, indirect=False)
        eq(ids(by_tag), [r3.id], "relationships of tag t2")
        by_tag1 = client.relationships.list(tag_id=t1.id, indirect=False)
        eq(ids(by_tag1), [r4.id], "relationships of tag t1")
        rr = client.relationships.retrieve(r1.id)
        eq((rr.id, rr.kind), (r1.id, "entailment"), "read relationship")
        check(rr.source_guideline is not None and rr.source_guideline.id == g1.id, "read relationship source")
        # GET /guidelines/{id} lists the guideline's relationships; the reference includes the
        # indirect ones too (here r4: g3 -> t1, reached through r2), so only require the direct ones
        gr = client.guidelines.retrieve(g2.id)
        check({r1.id, r2.id} <= set(ids(gr.relationships)),
              f"GET /guidelines/{{g2}} relationships {ids(gr.relationships)} lack r1/r2")

    with step("relationships: delete"):
        client.relationships.delete(r2.id)
        expect_status(lambda: client.relationships.retrieve(r2.id), 404)
        eq(ids(client.relationships.list(guideline_id=g2.id, indirect=False)), [r1.id],
           "g2 relationships after delete")
        for r in (r1, r3, r4):
            client.relationships.delete(r.id)

    with step("guidelines: delete"):
        client.guidelines.delete(g2.id)
        expect_status(lambda: client.guidelines.retrieve(g2.id), 404, NotFoundError)
        check(g2.id not in ids(client.guidelines.list()), "deleted guideline still listed")

    # ---------------------------------------------------------------- journeys
    with step("journeys: create with condition texts -> condition guideline ids"):
        texts = ["The customer wants to check an order", "The customer mentions a tracking number"]
        j = client.journeys.create(title="Order status", description="Check an order",
                                   conditions=texts, tags=[t1.id])
        undo(lambda: client.journeys.delete(j.id))
        eq(j.title, "Order status", "journey title")
        eq(j.tags, [t1.id], "journey tags")
        eq(len(j.conditions), 2, "number of journey conditions")
        check(not (set(j.conditions) & set(texts)), "journey conditions must be guideline ids, not texts")
        by_text = {}
        for gid in j.conditions:
            cg = client.guidelines.retrieve(gid).guideline
            check(cg.condition in texts, f"condition guideline {gid} has condition {cg.condition!r}")
            check(f"journey:{j.id}" in cg.tags, f"condition guideline {gid} tags {cg.tags} lack journey:{j.id}")
            by_text[cg.condition] = gid
        eq(sorted(by_text), sorted(texts), "condition texts of the journey's guidelines")
        created["journey"] = j

    with step("journeys: read / list"):
        r = client.journeys.retrieve(j.id)
        eq((r.id, r.title, r.description), (j.id, j.title, j.description), "read journey")
        eq(sorted(r.conditions), sorted(j.conditions), "journey conditions re-read")
        check(j.id in ids(client.journeys.list()), "journey missing from GET /journeys")
        check(j.id in ids(client.journeys.list(tag_id=t1.id)), "journey missing from GET /journeys?tag_id=")

    with step("journeys: update title and conditions add/remove"):
        extra_g = client.guidelines.create(condition="The customer asks where the parcel is")
        undo(lambda: client.guidelines.delete(extra_g.id))
        removed = by_text[texts[0]]
        u = client.journeys.update(j.id, title="Order status 2",
                                   conditions=JourneyConditionUpdateParams(add=[extra_g.id], remove=[removed]))
        eq(u.title, "Order status 2", "updated journey title")
        eq(sorted(u.conditions), sorted([by_text[texts[1]], extra_g.id]), "journey conditions after add/remove")
        r = client.journeys.retrieve(j.id)
        eq(r.title, "Order status 2", "journey title re-read")
        eq(sorted(r.conditions), sorted([by_text[texts[1]], extra_g.id]), "journey conditions re-read")

    with step("journeys: mermaid"):
        m = client.journeys.mermaid(j.id)
        check(isinstance(m, str) and m.strip(), f"mermaid must be non-empty text, got {m!r}")
        check("stateDiagram" in m, f"mermaid text should be a stateDiagram, got {m[:80]!r}")
        note(f"{len(m)} chars")

    with step("journeys: delete (removes its condition guidelines)"):
        client.journeys.delete(j.id)
        expect_status(lambda: client.journeys.retrieve(j.id), 404, NotFoundError)
        expect_status(lambda: client.guidelines.retrieve(by_text[texts[1]]), 404, NotFoundError)
        check(j.id not in ids(client.journeys.list()), "deleted journey still listed")
        try:
            client.guidelines.delete(extra_g.id)  # may already be gone with the journey
        except NotFoundError:
            pass

    # ---------------------------------------------------------------- terms
    with step("terms: create / read / list (tag filter) / update / delete"):
        tm = client.glossary.create_term(name=f"Bazoo {RUN}", description="A flying goat",
                                         synonyms=["bz"], tags=[t1.id])
        eq((tm.name, tm.description, tm.synonyms, tm.tags),
           (f"Bazoo {RUN}", "A flying goat", ["bz"], [t1.id]), "created term")
        undo(lambda: client.glossary.delete_term(tm.id))
        tm2 = client.glossary.create_term(name=f"Plain {RUN}", description="x")
        undo(lambda: client.glossary.delete_term(tm2.id))
        eq(tm2.synonyms, [], "default synonyms")
        eq(client.glossary.retrieve_term(tm.id).name, tm.name, "read term")
        check({tm.id, tm2.id} <= set(ids(client.glossary.list_terms())), "terms missing from GET /terms")
        eq(ids(client.glossary.list_terms(tag_id=t1.id)), [tm.id], "GET /terms?tag_id= result")
        u = client.glossary.update_term(tm.id, name=f"Bazoo2 {RUN}", description="d2", synonyms=["b2"],
                                        tags=TermTagsUpdateParams(add=[t2.id], remove=[t1.id]))
        eq((u.name, u.description, u.synonyms, u.tags), (f"Bazoo2 {RUN}", "d2", ["b2"], [t2.id]), "updated term")
        for t in (tm, tm2):
            client.glossary.delete_term(t.id)
        expect_status(lambda: client.glossary.retrieve_term(tm.id), 404, NotFoundError)

    # ---------------------------------------------------------------- capabilities
    with step("capabilities: create / read / list (tag filter) / update / delete"):
        cp = client.capabilities.create(title="Refunds", description="Can refund",
                                        signals=["refund please"], tags=[t1.id])
        eq((cp.title, cp.description, cp.signals, cp.tags),
           ("Refunds", "Can refund", ["refund please"], [t1.id]), "created capability")
        undo(lambda: client.capabilities.delete(cp.id))
        eq(client.capabilities.retrieve(cp.id).title, "Refunds", "read capability")
        check(cp.id in ids(client.capabilities.list()), "capability missing from GET /capabilities")
        eq(ids(client.capabilities.list(tag_id=t1.id)), [cp.id], "GET /capabilities?tag_id= result")
        u = client.capabilities.update(cp.id, title="Refunds 2", signals=["s1", "s2"],
                                       tags=CapabilityTagUpdateParams(remove=[t1.id]))
        eq((u.title, u.signals, u.tags), ("Refunds 2", ["s1", "s2"], []), "updated capability")
        eq(client.capabilities.list(tag_id=t1.id), [], "GET /capabilities?tag_id= after tag removal")
        client.capabilities.delete(cp.id)
        expect_status(lambda: client.capabilities.retrieve(cp.id), 404, NotFoundError)

    # ---------------------------------------------------------------- canned responses
    with step("canned responses: create / read / list (tag filter) / update / delete"):
        cr = client.canned_responses.create(value="Hello {{std.customer.name}}", fields=[],
                                            tags=[t1.id], signals=["hi"], metadata={"k": 1})
        eq((cr.value, cr.tags, cr.signals, cr.metadata),
           ("Hello {{std.customer.name}}", [t1.id], ["hi"], {"k": 1}), "created canned response")
        cr2 = client.canned_responses.create(
            value="Your balance is {{balance}}",
            fields=[CannedResponseField(name="balance", description="balance", examples=["$10"])])
        undo(lambda: client.canned_responses.delete(cr.id))
        undo(lambda: client.canned_responses.delete(cr2.id))
        eq([f.name for f in cr2.fields], ["balance"], "canned response fields")
        eq(client.canned_responses.retrieve(cr.id).value, cr.value, "read canned response")
        check({cr.id, cr2.id} <= set(ids(client.canned_responses.list())), "canned responses missing from list")
        eq(ids(client.canned_responses.list(tags=t1.id)), [cr.id], "GET /canned_responses?tags= result")
        u = client.canned_responses.update(cr.id, value="Hi {{std.customer.name}}!",
                                           tags=CannedResponseTagUpdateParams(remove=[t1.id]),
                                           metadata=CannedResponseMetadataUpdateParams(set_={"a": "b"}, unset=["k"]))
        eq((u.value, u.tags, u.metadata), ("Hi {{std.customer.name}}!", [], {"a": "b"}), "updated canned response")
        for x in (cr, cr2):
            client.canned_responses.delete(x.id)
        expect_status(lambda: client.canned_responses.retrieve(cr.id), 404, NotFoundError)

    # ---------------------------------------------------------------- context variables
    with step("context variables: create / list / read (with and without values)"):
        v = client.context_variables.create(name=f"plan_{RUN}", description="Customer plan", tags=[t1.id])
        undo(lambda: client.context_variables.delete(v.id))
        eq((v.name, v.description, v.tags), (f"plan_{RUN}", "Customer plan", [t1.id]), "created variable")
        check(v.id in ids(client.context_variables.list()), "variable missing from GET /context-variables")
        eq(ids(client.context_variables.list(tag_id=t1.id)), [v.id], "GET /context-variables?tag_id=")
        rr = client.context_variables.retrieve(v.id)
        eq(rr.context_variable.id, v.id, "read variable")
        eq(rr.key_value_pairs or {}, {}, "values of a fresh variable")
        created["variable"] = v

    with step("context variables: PUT value for a customer key, read it, delete it"):
        key = c1.id
        val = client.context_variables.set_value(v.id, key, data={"plan": "pro", "seats": 3})
        eq(val.data, {"plan": "pro", "seats": 3}, "value data after PUT")
        check(val.id and val.last_modified is not None, "value id / last_modified")
        got = client.context_variables.get_value(v.id, key)
        eq(got.data, {"plan": "pro", "seats": 3}, "GET value")
        with_vals = client.context_variables.retrieve(v.id, include_values=True)
        check(with_vals.key_value_pairs is not None and key in with_vals.key_value_pairs,
              f"include_values=true lacks key {key}: {with_vals.key_value_pairs!r}")
        eq(with_vals.key_value_pairs[key].data, {"plan": "pro", "seats": 3}, "value via include_values")
        without = client.context_variables.retrieve(v.id, include_values=False)
        check(not without.key_value_pairs, f"include_values=false returned values: {without.key_value_pairs!r}")
        client.context_variables.delete_value(v.id, key)
        expect_status(lambda: client.context_variables.get_value(v.id, key), 404, NotFoundError)

    with step("context variables: update / delete"):
        u = client.context_variables.update(v.id, description="d2",
                                            tags=ContextVariableTagsUpdateParams(remove=[t1.id]))
        eq((u.description, u.tags), ("d2", []), "updated variable")
        client.context_variables.delete(v.id)
        expect_status(lambda: client.context_variables.retrieve(v.id), 404, NotFoundError)

    # ---------------------------------------------------------------- sessions
    agent = created["agent"]
    with step("sessions: create for agent+customer; without customer -> guest"):
        s = client.sessions.create(agent_id=agent.id, customer_id=c1.id, title="Flow session",
                                   metadata={"m": 1}, labels=["l1"])
        undo(lambda: client.sessions.delete(s.id))
        eq((s.agent_id, s.customer_id, s.title), (agent.id, c1.id, "Flow session"), "created session")
        eq(s.mode, "auto", "default session mode")
        eq(s.metadata, {"m": 1}, "session metadata")
        eq(s.labels, ["l1"], "session labels")
        check(s.consumption_offsets is not None, "session consumption_offsets")
        sg = client.sessions.create(agent_id=agent.id)
        undo(lambda: client.sessions.delete(sg.id))
        eq(sg.customer_id, "guest", "customer_id of a session created without customer_id")
        r = client.sessions.retrieve(s.id)
        eq((r.id, r.customer_id), (s.id, c1.id), "read session")
        created["session"], created["guest_session"] = s, sg

    with step("sessions: list (plain and paginated by limit with cursor)"):
        more = [client.sessions.create(agent_id=agent.id, customer_id=c1.id, title=f"p{i}") for i in range(3)]
        for x in more:
            undo(lambda x=x: client.sessions.delete(x.id))
        mine = {s.id, sg.id} | {x.id for x in more}
        plain = client.sessions.list(agent_id=agent.id)
        check(isinstance(plain, list), "GET /sessions without limit must be a plain array")
        eq(set(ids(plain)), mine, "GET /sessions?agent_id= result")
        check(s.id in ids(client.sessions.list(customer_id=c1.id)), "GET /sessions?customer_id= misses the session")
        limit = 2
        page = client.sessions.list(agent_id=agent.id, limit=limit)
        check(not isinstance(page, list), "GET /sessions?limit= must return a page object")
        total = page.total_count
        eq(total, len(mine), "total_count on the first page")
        seen: list[str] = []
        n_pages = 0
        while True:
            n_pages += 1
            check(n_pages <= 50, "session pagination did not terminate")
            check(len(page.items) <= limit, f"page {n_pages} has {len(page.items)} > limit items")
            quirk(page.total_count == total, "sessions-page-total-count",
                  f"page {n_pages} total_count={page.total_count}, first page said {total}")
            seen += ids(page.items)
            if not page.has_more:
                check(page.next_cursor is None, f"page {n_pages}: has_more=false but next_cursor set")
                break
            check(page.next_cursor, f"page {n_pages}: has_more=true without next_cursor")
            page = client.sessions.list(agent_id=agent.id, limit=limit, cursor=page.next_cursor)
        check(len(seen) == len(set(seen)), f"a session was repeated across pages: {seen}")
        eq(set(seen), mine, "sessions seen in the page walk")
        note(f"{n_pages} pages")
        for x in more:
            client.sessions.delete(x.id)

    with step("sessions: update title / metadata / labels / consumption_offsets"):
        u = client.sessions.update(
            s.id, title="Flow session 2",
            metadata=SessionMetadataUpdateParams(set_={"a": 1, "b": "x"}, unset=["m"]),
            labels=SessionLabelsUpdateParams(upsert=["hot"], remove=["l1"]),
            consumption_offsets=ConsumptionOffsetsUpdateParams(client=3),
        )
        eq(u.title, "Flow session 2", "session title after update")
        eq(u.metadata, {"a": 1, "b": "x"}, "session metadata after set/unset")
        eq(u.labels, ["hot"], "session labels after upsert/remove")
        eq(u.consumption_offsets.client, 3, "consumption_offsets.client after update")
        r = client.sessions.retrieve(s.id)
        eq((r.title, r.metadata, r.labels, r.consumption_offsets.client),
           ("Flow session 2", {"a": 1, "b": "x"}, ["hot"], 3), "session re-read")
        check(s.id in ids(client.sessions.list(labels=["hot"], agent_id=agent.id)), "GET /sessions?labels= misses it")

    # ---------------------------------------------------------------- events
    def is_completed(e: Any) -> bool:
        d = e.data if isinstance(e.data, dict) else {}
        inner = d.get("data") if isinstance(d.get("data"), dict) else {}
        return e.kind == "status" and d.get("status") == "ready" and inner.get("stage") == "completed"

    def run_turn(sid: str, text: str, label: str) -> tuple[Any, list[Any], Any]:
        """Posts a customer message and long-polls until the turn's ready/completed status."""
        ev = client.sessions.create_event(sid, kind="message", source="customer", message=text)
        eq((ev.kind, ev.source), ("message", "customer"), f"{label}: create_event result kind/source")
        check(isinstance(ev.data, dict) and ev.data.get("message") == text, f"{label}: created event data {ev.data!r}")
        eq(ev.correlation_id, ev.trace_id, f"{label}: created event correlation_id == trace_id")
        check(ev.deleted is False, f"{label}: created event deleted flag")
        events: list[Any] = []
        next_off = ev.offset
        turn_trace: Optional[str] = None
        done = None
        polls = 0
        deadline = time.monotonic() + TURN_TIMEOUT_S
        while done is None:
            check(time.monotonic() < deadline, f"{label}: no ready/completed status within {TURN_TIMEOUT_S:.0f}s "
                                               f"(saw {[(e.offset, e.kind) for e in events]})")
            polls += 1
            try:
                batch = client.sessions.list_events(sid, min_offset=next_off, wait_for_data=10,
                                                    request_options={"timeout_in_seconds": 30})
            except GatewayTimeoutError:
                continue
            check(batch, f"{label}: a long poll with wait_for_data>0 returned 200 [] (must be 504 or events)")
            for e in batch:
                eq(e.offset, next_off, f"{label}: event offsets must be dense")
                next_off += 1
                events.append(e)
                if turn_trace is None and e.source == "ai_agent":
                    turn_trace = e.trace_id
                if turn_trace is not None and e.trace_id == turn_trace and is_completed(e):
                    done = e
                    break
        eq(events[0].id, ev.id, f"{label}: the customer message must echo back first")
        for e in events:
            eq(e.correlation_id, e.trace_id, f"{label}: event {e.offset} correlation_id == trace_id")
        turn = [e for e in events if e.trace_id == turn_trace]
        msgs = [e for e in turn if e.kind == "message" and e.source == "ai_agent"]
        check(msgs, f"{label}: no ai_agent message event in the turn: {[(e.offset, e.kind, e.source) for e in turn]}")
        check(isinstance(msgs[0].data, dict) and isinstance(msgs[0].data.get("message"), str),
              f"{label}: agent message data {msgs[0].data!r}")
        inner = done.data["data"]
        for k in ("matched_guidelines", "matched_journeys", "matched_journey_states"):
            check(isinstance(inner.get(k), list), f"{label}: completed status lacks list {k}: {inner!r}")
        statuses = [e.data.get("status") for e in turn if e.kind == "status"]
        note(f"{label}: {len(events)} events, statuses {statuses}, {polls} polls")
        return ev, events, done

    s = created["session"]
    with step("events: customer message 1 -> long-poll to ready/completed"):
        m1, ev1, done1 = run_turn(s.id, "Hi, what is your refund policy?", "turn 1")
        eq(m1.offset, 0, "first event offset")
        all_ev = client.sessions.list_events(s.id, min_offset=0, wait_for_data=0)
        eq([e.offset for e in all_ev][: len(ev1)], list(range(len(ev1))), "offsets dense from 0")

    with step("events: customer message 2 -> long-poll to ready/completed"):
        m2, ev2, done2 = run_turn(s.id, "Thanks. And my order 48213?", "turn 2")
        check(m2.offset > done1.offset, "second message offset after the first turn")
        check(done2.trace_id != done1.trace_id, "each turn has its own trace id")
        all_ev = client.sessions.list_events(s.id, min_offset=0, wait_for_data=0)
        offs = [e.offset for e in all_ev]
        eq(offs, list(range(len(offs))), "offsets dense from 0 over both turns")
        check(all(e.correlation_id == e.trace_id for e in all_ev), "correlation_id == trace_id on every event")

    with step("events: read by id; update metadata"):
        r = client.sessions.read_event(s.id, m1.id)
        eq((r.id, r.offset, r.kind, r.source), (m1.id, 0, "message", "customer"), "read event")
        eq(r.data.get("message"), m1.data["message"], "read event data")
        u = client.sessions.update_event(s.id, m1.id,
                                         metadata=SessionMetadataUpdateParams(set_={"rating": 5, "k": "v"}))
        eq(u.metadata, {"rating": 5, "k": "v"}, "event metadata after set")
        u = client.sessions.update_event(s.id, m1.id, metadata=SessionMetadataUpdateParams(unset=["k"]))
        eq(u.metadata, {"rating": 5}, "event metadata after unset")
        eq(client.sessions.read_event(s.id, m1.id).metadata, {"rating": 5}, "event metadata re-read")

    with step("events: list with kinds / source / trace_id / correlation_id filters"):
        all_ev = client.sessions.list_events(s.id, min_offset=0, wait_for_data=0)
        km = client.sessions.list_events(s.id, kinds="message", wait_for_data=0)
        eq(ids(km), [e.id for e in all_ev if e.kind == "message"], "kinds=message")
        kms = client.sessions.list_events(s.id, kinds="message,status", wait_for_data=0)
        eq(ids(kms), [e.id for e in all_ev if e.kind in ("message", "status")], "kinds=message,status")
        sc = client.sessions.list_events(s.id, source="customer", wait_for_data=0)
        eq(ids(sc), [m1.id, m2.id], "source=customer")
        sa = client.sessions.list_events(s.id, source="ai_agent", kinds="message", wait_for_data=0)
        check(sa and all(e.source == "ai_agent" and e.kind == "message" for e in sa), "source=ai_agent&kinds=message")
        tr = client.sessions.list_events(s.id, trace_id=done2.trace_id, wait_for_data=0)
        eq(ids(tr), [e.id for e in all_ev if e.trace_id == done2.trace_id], "trace_id filter")
        cr = client.sessions.list_events(s.id, correlation_id=done2.trace_id, wait_for_data=0)
        quirk(ids(cr) == ids(tr), "correlation-id-filter-ignored",
              f"correlation_id filter returned {len(cr)} events, trace_id filter {len(tr)}")
        mo = client.sessions.list_events(s.id, min_offset=m2.offset, wait_for_data=0)
        eq(ids(mo), [e.id for e in all_ev if e.offset >= m2.offset], "min_offset filter")

    with step("events: delete from the middle of a turn -> 422, nothing deleted"):
        all_ev = client.sessions.list_events(s.id, min_offset=0, wait_for_data=0)
        turn2 = sorted(e.offset for e in all_ev if e.trace_id == done2.trace_id)
        check(len(turn2) >= 2, f"turn 2 has {len(turn2)} event(s)")
        expect_status(lambda: client.sessions.delete_events(s.id, min_offset=turn2[1]), 422,
                      UnprocessableEntityError)
        eq([e.offset for e in client.sessions.list_events(s.id, min_offset=0, wait_for_data=0)],
           [e.offset for e in all_ev], "offsets listed after the refused delete")
        note(f"min_offset={turn2[1]} refused (turn 2 starts at {turn2[0]})")

    with step("events: delete from an offset (soft delete)"):
        all_ev = client.sessions.list_events(s.id, min_offset=0, wait_for_data=0)
        cut = min(e.offset for e in all_ev if e.trace_id == done2.trace_id)  # first event of turn 2's trace
        doomed = [e for e in all_ev if e.offset >= cut]
        client.sessions.delete_events(s.id, min_offset=cut)
        left = client.sessions.list_events(s.id, min_offset=0, wait_for_data=0)
        eq([e.offset for e in left], [e.offset for e in all_ev if e.offset < cut], "offsets listed after delete")
        d = client.sessions.read_event(s.id, doomed[-1].id)
        eq(d.id, doomed[-1].id, "read deleted event by id")
        eq(d.deleted, True, "deleted flag of a deleted event")
        eq(client.sessions.list_events(s.id, min_offset=cut, wait_for_data=0), [], "listing from the cut")
        note(f"deleted offsets {cut}..{doomed[-1].offset}")

    with step("events: long poll with nothing new -> 504"):
        nxt = max(e.offset for e in client.sessions.list_events(s.id, min_offset=0, wait_for_data=0)) + 1
        nxt = max(nxt, done2.offset + 1)
        t0 = time.monotonic()
        expect_status(lambda: client.sessions.list_events(s.id, min_offset=nxt, wait_for_data=1,
                                                          request_options={"timeout_in_seconds": 15}),
                      504, GatewayTimeoutError)
        dt = time.monotonic() - t0
        # A lower bound only: the server waited before giving up (a busy machine can only
        # make the answer later, and the request's own timeout guards against a hang).
        check(0.8 <= dt, f"504 after {dt:.2f}s for wait_for_data=1")
        eq(client.sessions.list_events(s.id, min_offset=nxt, wait_for_data=0), [],
           "wait_for_data=0 with nothing new returns []")
        note(f"504 after {dt:.2f}s")

    with step("sessions: delete"):
        for x in (s, created["guest_session"]):
            client.sessions.delete(x.id)
        expect_status(lambda: client.sessions.retrieve(s.id), 404, NotFoundError)
        expect_status(lambda: client.sessions.list_events(s.id, wait_for_data=0), 404, NotFoundError)

    # ---------------------------------------------------------------- errors
    with step("errors: unknown ids -> 404 for every resource"):
        bogus = f"nope-{RUN}"
        checks: list[tuple[str, Callable[[], Any], Optional[type]]] = [
            ("agent", lambda: client.agents.retrieve(bogus), NotFoundError),
            ("customer", lambda: client.customers.retrieve(bogus), NotFoundError),
            ("tag", lambda: client.tags.retrieve(bogus), NotFoundError),
            ("term", lambda: client.glossary.retrieve_term(bogus), NotFoundError),
            ("capability", lambda: client.capabilities.retrieve(bogus), NotFoundError),
            ("canned response", lambda: client.canned_responses.retrieve(bogus), NotFoundError),
            ("context variable", lambda: client.context_variables.retrieve(bogus), NotFoundError),
            ("guideline", lambda: client.guidelines.retrieve(bogus), NotFoundError),
            # the 3.3.1 client maps no 404 for read_relationship (OpenAPI lists only 200/422),
            # so a plain ApiError with status 404 is what a client sees
            ("relationship", lambda: client.relationships.retrieve(bogus), None),
            ("journey", lambda: client.journeys.retrieve(bogus), NotFoundError),
            ("journey mermaid", lambda: client.journeys.mermaid(bogus), NotFoundError),
            ("session", lambda: client.sessions.retrieve(bogus), NotFoundError),
            ("evaluation", lambda: client.evaluations.retrieve(bogus), NotFoundError),
            ("service", lambda: client.services.retrieve(bogus), NotFoundError),
            ("agent update", lambda: client.agents.update(bogus, name="x"), NotFoundError),
            ("guideline delete", lambda: client.guidelines.delete(bogus), NotFoundError),
            ("session delete", lambda: client.sessions.delete(bogus), NotFoundError),
        ]
        sx = client.sessions.create(agent_id=agent.id)
        undo(lambda: client.sessions.delete(sx.id))
        checks.append(("event", lambda: client.sessions.read_event(sx.id, bogus), NotFoundError))
        checks.append(("event update", lambda: client.sessions.update_event(
            sx.id, bogus, metadata=SessionMetadataUpdateParams(set_={"a": 1})), NotFoundError))
        for what, fn, et in checks:
            try:
                e = expect_status(fn, 404, et)
            except FlowFailure as f:
                raise FlowFailure(f"{what}: {f}")
            check(isinstance(e.body, dict) and isinstance(e.body.get("detail"), str),
                  f"{what}: 404 body should be {{'detail': str}}, got {e.body!r}")
        # unknown tag id in a create body -> 404 (the typed client maps no 404 on create)
        e = expect_status(lambda: client.guidelines.create(condition="c", tags=[bogus]), 404)
        client.sessions.delete(sx.id)
        note(f"{len(checks)} reads/updates/deletes + create with unknown tag")

    with step("errors: wrong-type fields -> 422 with detail[*].loc naming the field"):
        e = expect_status(lambda: client.guidelines.create(condition=123), 422,  # type: ignore[arg-type]
                          UnprocessableEntityError)
        det = e.body.get("detail") if isinstance(e.body, dict) else None
        check(isinstance(det, list) and det, f"422 detail must be a list, got {e.body!r}")
        check(any(list(d.get("loc", []))[-1:] == ["condition"] for d in det), f"no loc naming 'condition': {det!r}")
        check(all(isinstance(d.get("msg"), str) and isinstance(d.get("type"), str) for d in det),
              f"422 detail items need msg and type: {det!r}")
        # a body the typed client would not build: through its raw request facility
        resp = raw.request("guidelines", method="POST", json={"condition": "c", "enabled": "notabool"})
        eq(resp.status_code, 422, "POST /guidelines with enabled='notabool'")
        det = resp.json().get("detail")
        check(isinstance(det, list) and any(list(d.get("loc", [])) == ["body", "enabled"] for d in det),
              f"422 detail should name ['body', 'enabled']: {det!r}")
        resp = raw.request("guidelines", method="POST", json={"action": "x"})
        eq(resp.status_code, 422, "POST /guidelines without condition")
        det = resp.json().get("detail")
        check(isinstance(det, list) and any(list(d.get("loc", [])) == ["body", "condition"]
                                            and d.get("type") == "missing" for d in det),
              f"missing-field 422 should be loc ['body','condition'] type 'missing': {det!r}")
        resp = raw.request("customers", method="GET", params={"limit": "abc"})
        eq(resp.status_code, 422, "GET /customers?limit=abc")
        det = resp.json().get("detail")
        check(isinstance(det, list) and any(list(d.get("loc", [])) == ["query", "limit"] for d in det),
              f"query 422 should name ['query', 'limit']: {det!r}")

    # ---------------------------------------------------------------- cleanup
    with step("cleanup"):
        for gid in (g1.id, g3.id):
            client.guidelines.delete(gid)
        client.customers.delete(c1.id)
        client.agents.delete(agent.id)
        for t in (t1, t2):
            client.tags.delete(t.id)

    if DEVIATIONS:
        print(f"flow passed with {len(DEVIATIONS)} tolerated known reference deviation(s):")
        for d in DEVIATIONS:
            print(f"  - {d}")
    else:
        print("flow passed")


if __name__ == "__main__":
    main()
