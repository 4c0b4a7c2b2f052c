"""What the `@tool` decorator makes of signatures, type hints and docstrings, and how call
arguments are read back."""

import datetime
import enum
import unittest
from typing import Annotated, List, Literal, Optional, Sequence, Tuple, Union

from guidepost import Param, Tool, ToolContext, ToolDefinitionError, tool
from guidepost._schema import ArgumentError, NO_PRECEDENCE, parse_docstring


class Size(enum.Enum):
    SMALL = "small"
    LARGE = "large"


class Floor(enum.Enum):
    GROUND = 0
    FIRST = 1


def descriptors(t: Tool) -> dict:
    return {name: pair[0] for name, pair in t.describe()["parameters"].items()}


def options(t: Tool) -> dict:
    return {name: pair[1] for name, pair in t.describe()["parameters"].items()}


class TypesBecomeDescriptors(unittest.TestCase):
    def test_scalars_dates_and_choices(self) -> None:
        @tool
        async def f(
            text: str,
            count: int,
            ratio: float,
            flag: bool,
            day: datetime.date,
            at: datetime.datetime,
            size: Size,
            floor: Floor,
            mode: Literal["fast", "slow"],
            level: Literal[1, 2, 3],
        ) -> None: ...

        self.assertEqual(
            descriptors(f),
            {
                "text": {"type": "string"},
                "count": {"type": "integer"},
                "ratio": {"type": "number"},
                "flag": {"type": "boolean"},
                "day": {"type": "date"},
                "at": {"type": "datetime"},
                "size": {"type": "string", "enum": ["small", "large"]},
                "floor": {"type": "integer", "enum": [0, 1]},
                "mode": {"type": "string", "enum": ["fast", "slow"]},
                "level": {"type": "integer", "enum": [1, 2, 3]},
            },
        )
        self.assertEqual(f.describe()["required"], list(descriptors(f)))

    def test_lists_of_each_kind(self) -> None:
        @tool
        def f(a: List[int], b: list, c: Sequence[Size], d: Tuple[datetime.date, ...], e: "list[str]") -> None: ...

        self.assertEqual(
            descriptors(f),
            {
                "a": {"type": "array", "item_type": "integer"},
                "b": {"type": "array", "item_type": "string"},
                "c": {"type": "array", "item_type": "string", "enum": ["small", "large"]},
                "d": {"type": "array", "item_type": "date"},
                "e": {"type": "array", "item_type": "string"},
            },
        )

    def test_optional_and_defaults_are_not_required(self) -> None:
        @tool
        def f(a: str, b: Optional[int], c: Union[None, float], d: int = 3, e: Optional[str] = None) -> None: ...

        self.assertEqual(f.describe()["required"], ["a"])
        self.assertEqual(descriptors(f)["b"], {"type": "integer"})
        self.assertEqual(descriptors(f)["c"], {"type": "number"})

    def test_param_options_travel_with_the_parameter(self) -> None:
        @tool
        def f(
            city: Annotated[str, Param(description="The city", source="customer", examples=["Paris"],
                                       display_name="city name", significance="to know where", precedence=1)],
            note: Annotated[Optional[str], "a note"] = None,
            secret: Annotated[str, Param(hidden=True, source="context")] = "",
        ) -> None:
            """Looks up.

            Args:
                city: Overridden by the Param's description.
            """

        d, o = descriptors(f), options(f)
        self.assertEqual(d["city"], {"type": "string", "description": "The city", "examples": ["Paris"]})
        self.assertEqual(
            o["city"],
            {"hidden": False, "source": "customer", "description": "The city", "significance": "to know where",
             "examples": ["Paris"], "precedence": 1, "display_name": "city name"},
        )
        self.assertEqual(d["note"], {"type": "string", "description": "a note"})
        self.assertEqual(o["note"]["precedence"], NO_PRECEDENCE)
        self.assertEqual((o["secret"]["hidden"], o["secret"]["source"]), (True, "context"))

    def test_the_tool_itself(self) -> None:
        @tool(name="cancel", consequential=True, overlap="none", metadata={"team": "orders"}, timeout=5)
        async def cancel_order(context: ToolContext, order_number: str) -> None:
            """Cancels an order.

            Only orders that have not shipped.
            """

        described = cancel_order.describe()
        self.assertEqual(described["name"], "cancel")
        self.assertEqual(described["description"], "Cancels an order.\n\nOnly orders that have not shipped.")
        self.assertEqual((described["consequential"], described["overlap"]), (True, 1))
        self.assertEqual(described["metadata"], {"team": "orders"})
        self.assertEqual(list(described["parameters"]), ["order_number"])
        self.assertTrue(described["creation_utc"].endswith("Z"))
        self.assertEqual(cancel_order.context_parameter, "context")
        self.assertEqual(tool(lambda: None).describe()["overlap"], 2)

    def test_the_context_is_found_by_type_or_by_name(self) -> None:
        @tool
        def by_name(ctx, x: int) -> None: ...

        @tool
        def by_type(x: int, here: Optional[ToolContext] = None) -> None: ...

        self.assertEqual((by_name.context_parameter, by_type.context_parameter), ("ctx", "here"))
        self.assertEqual(list(by_type.describe()["parameters"]), ["x"])

    def test_the_decorated_function_still_runs(self) -> None:
        @tool
        def double(x: int) -> int:
            return 2 * x

        self.assertEqual(double(x=4), 8)
        self.assertEqual(double.__name__, "double")


class UnsupportedSignaturesFailAtDefinition(unittest.TestCase):
    def assert_refused(self, function, *words: str) -> None:
        with self.assertRaises(ToolDefinitionError) as raised:
            tool(function)
        for word in words:
            self.assertIn(word, str(raised.exception))

    def test_each_unsupported_shape_names_the_tool_and_parameter(self) -> None:
        def mapping(x: dict) -> None: ...

        def union(x: Union[int, str]) -> None: ...

        def nested(x: List[List[int]]) -> None: ...

        def bare(x) -> None: ...

        def star(*xs: int) -> None: ...

        def mixed(x: Literal["a", 1]) -> None: ...

        def bad_default(x: int = "many") -> None: ...  # type: ignore[assignment]

        def two_contexts(a: ToolContext, b: ToolContext) -> None: ...

        class Thing:
            pass

        def custom(x: Thing) -> None: ...

        self.assert_refused(mapping, "tool `mapping`", "parameter `x`", "dict")
        self.assert_refused(union, "union")
        self.assert_refused(nested, "lists of lists")
        self.assert_refused(bare, "type annotation")
        self.assert_refused(star, "*args")
        self.assert_refused(mixed, "Literal")
        self.assert_refused(bad_default, "default", "whole number")
        self.assert_refused(two_contexts, "at most one ToolContext")
        self.assert_refused(custom, "Thing")

    def test_options_are_checked(self) -> None:
        with self.assertRaises(ToolDefinitionError):
            tool(overlap="sometimes")(lambda: None)
        with self.assertRaises(ToolDefinitionError):
            tool(timeout=0)(lambda: None)
        with self.assertRaises(ValueError):
            Param(source="anywhere")

    def test_a_forward_reference_that_does_not_resolve(self) -> None:
        def f(x: "Missing") -> None: ...  # type: ignore[name-defined]  # noqa: F821

        self.assert_refused(f, "type hints cannot be read")


class Docstrings(unittest.TestCase):
    def test_google_style(self) -> None:
        text, params = parse_docstring(
            """Books a table.

            Picks the first free one.

            Args:
                restaurant (str): Where to book.
                guests: How many people,
                    children included.

            Returns:
                The booking.
            """
        )
        self.assertEqual(text, "Books a table.\n\nPicks the first free one.")
        self.assertEqual(params, {"restaurant": "Where to book.", "guests": "How many people, children included."})

    def test_rest_style(self) -> None:
        text, params = parse_docstring(
            """Books a table.

            :param restaurant: Where to book.
            :param int guests: How many
                people.
            :returns: the booking
            """
        )
        self.assertEqual(text, "Books a table.")
        self.assertEqual(params, {"restaurant": "Where to book.", "guests": "How many people."})

    def test_numpy_style(self) -> None:
        text, params = parse_docstring(
            """Books a table.

            Parameters
            ----------
            restaurant : str
                Where to book.
            guests : int
                How many people.

            Returns
            -------
            dict
            """
        )
        self.assertEqual(text, "Books a table.")
        self.assertEqual(params, {"restaurant": "Where to book.", "guests": "How many people."})

    def test_no_docstring(self) -> None:
        self.assertEqual(parse_docstring(None), ("", {}))

        @tool
        def f(x: int) -> None: ...

        self.assertEqual(f.describe()["description"], "")


class ArgumentsAreReadAsTheirTypes(unittest.TestCase):
    @staticmethod
    def make() -> Tool:
        @tool
        def f(
            n: int = 0,
            r: float = 0.0,
            b: bool = False,
            s: str = "",
            d: Optional[datetime.date] = None,
            t: Optional[datetime.datetime] = None,
            size: Size = Size.SMALL,
            level: Literal[1, 2] = 1,
            tags: Optional[List[str]] = None,
            days: Optional[List[int]] = None,
            maybe: Optional[int] = None,
        ) -> None: ...

        return f

    def read(self, **arguments) -> dict:
        return self.make().read_arguments(arguments)

    def refused(self, **arguments) -> str:
        with self.assertRaises(ArgumentError) as raised:
            self.make().read_arguments(arguments)
        return str(raised.exception)

    def test_numbers(self) -> None:
        self.assertEqual(self.read(n="3")["n"], 3)
        self.assertEqual(self.read(n=3)["n"], 3)
        self.assertEqual(self.read(n="4.0")["n"], 4)
        self.assertIn("whole number", self.refused(n="3.7"))
        self.assertIn("a number", self.refused(n=True))
        self.assertEqual(self.read(r="2.5")["r"], 2.5)
        self.assertIn("argument `r`", self.refused(r="much"))

    def test_booleans_as_guidepost_and_parlant_send_them(self) -> None:
        for sent, read in [("true", True), ("", False), ("false", False), ("False", False), ("yes", True),
                           (True, True), (False, False), ("0", False)]:
            self.assertIs(self.read(b=sent)["b"], read, sent)
        self.assertIn("true or false", self.refused(b="perhaps"))

    def test_text_dates_and_times(self) -> None:
        self.assertEqual(self.read(s=42)["s"], "42")
        self.assertEqual(self.read(d="2026-12-01")["d"], datetime.date(2026, 12, 1))
        self.assertEqual(self.read(d="2026-12-01T10:00:00Z")["d"], datetime.date(2026, 12, 1))
        at = self.read(t="2026-12-01T10:30:00Z")["t"]
        self.assertEqual((at.hour, at.minute, at.utcoffset()), (10, 30, datetime.timedelta(0)))
        self.assertEqual(self.read(t="2026-12-01")["t"], datetime.datetime(2026, 12, 1))
        self.assertIn("ISO 8601 date", self.refused(d="next Friday"))

    def test_choices(self) -> None:
        self.assertIs(self.read(size="large")["size"], Size.LARGE)
        self.assertIs(self.read(size="Large")["size"], Size.LARGE)
        self.assertEqual(self.read(level="2")["level"], 2)
        self.assertIn('one of "small", "large"', self.refused(size="huge"))

    def test_lists_in_every_form_engines_send(self) -> None:
        self.assertEqual(self.read(tags=["a", "b"])["tags"], ["a", "b"])
        self.assertEqual(self.read(tags='["a", "b"]')["tags"], ["a", "b"])
        self.assertEqual(self.read(tags="['a', 'b']")["tags"], ["a", "b"])
        self.assertEqual(self.read(tags="a, b")["tags"], ["a", "b"])
        self.assertEqual(self.read(days=["1", 2])["days"], [1, 2])
        self.assertEqual(self.read(days="[1, 2]")["days"], [1, 2])
        self.assertIn("argument `days`", self.refused(days=["x"]))

    def test_null_keeps_the_default_and_optional_gets_none(self) -> None:
        read = self.read(n=None, size=None, maybe=None)
        self.assertNotIn("n", read)
        self.assertNotIn("size", read)
        self.assertNotIn("maybe", read)

        @tool
        def g(x: Optional[int], y: str) -> None: ...

        self.assertEqual(g.read_arguments({"x": None, "y": "a"}), {"x": None, "y": "a"})
        with self.assertRaises(ArgumentError) as raised:
            g.read_arguments({"x": None})
        self.assertIn("argument `y` is required", str(raised.exception))

    def test_unknown_arguments_are_refused(self) -> None:
        self.assertIn("unknown argument `color`", self.refused(color="red"))


if __name__ == "__main__":
    unittest.main()
