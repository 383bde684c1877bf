"""Bounded CEL conditions: static bounds before compiling, a cost budget before evaluating.

The CEL library recurses once per level of the expression tree and has no budget of its own:
a 20,000-term ``1 + 1 + ...`` condition compiled and then killed the process (SIGSEGV) at
evaluation, 30,000 terms killed it while compiling, and seven nested comprehensions took
seconds per evaluation. Reproducers that could kill the process run in a subprocess.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from txqueue.errors import InvalidArgument
from txqueue.events import cel_limits
from txqueue.events.cel_limits import (
    EVALUATION_BUDGET,
    MAX_COMPREHENSION_NESTING,
    MAX_CONDITION_LENGTH,
    MAX_CONDITION_TOKENS,
    MAX_NESTING_DEPTH,
    MAX_OPERATORS,
    pattern_weight,
    shape,
)
from txqueue.events.matching import compile_condition, prepare
from txqueue.events.resources import stored_condition

ROOT = Path(__file__).resolve().parents[3]
SEVEN_NESTED = (
    "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, "
    "[1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, "
    "[1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, "
    "[1,2,3,4,5,6,7,8,9,10].all(g, a + b + c + d + e + f + g > 0)))))))"
)
EVENT = {"id": "1", "source": "//shop", "type": "com.shop.order.paid", "specversion": "1.0"}


def chain(terms: int) -> str:
    return " + ".join(["1"] * terms) + " > 0"


def run_isolated(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter: a crash kills it, not the test process."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


@pytest.mark.parametrize(("terms", "where"), [(20_000, "evaluation"), (30_000, "compilation")])
def test_a_long_operator_chain_is_refused_and_never_crashes(terms: int, where: str) -> None:
    # Before the bounds, 20,000 terms compiled and crashed at evaluation, 30,000 while compiling.
    result = run_isolated(
        f"""
        from txqueue.errors import InvalidArgument
        from txqueue.events.matching import compile_condition
        expression = " + ".join(["1"] * {terms}) + " > 0"
        try:
            condition = compile_condition(expression)
        except InvalidArgument as error:
            print("refused:", error)
        else:
            print("evaluated:", condition.matches({{"type": "t"}}))
        """
    )
    assert result.returncode == 0, f"{where} crashed: rc {result.returncode} {result.stderr}"
    assert "refused: condition is" in result.stdout
    assert f"characters long: at most {MAX_CONDITION_LENGTH:,} are allowed" in result.stdout


def test_a_stored_long_chain_is_refused_at_evaluation_without_crashing() -> None:
    """A condition stored before the bounds existed is checked when it is loaded."""
    result = run_isolated(
        """
        from txqueue.events.resources import stored_condition
        condition = stored_condition(" + ".join(["1"] * 20000) + " > 0")
        print("matches:", condition.matches({"type": "t"}))
        print("refusal:", condition.refusal({"type": "t"}))
        """
    )
    assert result.returncode == 0, f"crashed: rc {result.returncode} {result.stderr}"
    assert "matches: False" in result.stdout
    assert "refusal: its condition is refused: condition is 80,001 characters long" in result.stdout


def test_seven_nested_comprehensions_are_refused_at_creation() -> None:
    assert len(SEVEN_NESTED) < 300  # the finding's 221-character condition, give or take
    with pytest.raises(InvalidArgument, match=r"nests comprehensions .* more than 2 deep"):
        compile_condition(SEVEN_NESTED)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("true || " * 600 + "true", "characters long: at most 4,096"),
        ("[" + ",".join(["1"] * 600) + "] != []", "more than 1,024 tokens"),
        ("(" * 17 + "true" + ")" * 17, "nests brackets more than 16 deep"),
        ("size(" * 17 + "'a'" + ")" * 17 + " > 0", "nests brackets more than 16 deep"),
        ("message" + ".a" * 300 + " == 1", "more than 256 operators"),
        ("true" + " && true" * 300, "more than 256 operators"),
        ("+".join(["1"] * 400) + ">0", r"more than 256 operators \(line 1, column 514\)"),
        (
            "[1].all(a, [1].all(b, [1].all(c, true)))",
            r"comprehensions \(all inside another\) more than 2 deep \(line 1, column 27\)",
        ),
        (
            "[1].map(x, [x, x]).all(y, y == y)",
            r"all\(\) must range over message, a list or map literal, or a loop variable",
        ),
        ("size([1].filter(x, x > 0)) > 0 && (([1])).exists(x, true)", "must range over"),
        ("message.subject.matches(message.type)", "matches.. takes a string literal pattern"),
        ('message.subject.matches("a" + "b")', "takes a string literal pattern"),
        (r'message.subject.matches("\\w{150}")', "too costly to evaluate: its estimated"),
        ('["ab"]' + ".map(x, x + x)" * 24 + ".size() > 0", "must range over"),
        (
            "message.all(a, message.all(b, a + b + a + b + a + b + a + b + a + b != ''))",
            "too costly to evaluate",
        ),
    ],
)
def test_conditions_over_the_bounds_are_refused_naming_the_bound(
    expression: str, message: str
) -> None:
    started = time.monotonic()
    with pytest.raises(InvalidArgument, match=message):
        compile_condition(expression)
    assert time.monotonic() - started < 5  # refused, not evaluated


def test_the_bounds_are_the_documented_constants() -> None:
    assert (MAX_CONDITION_LENGTH, MAX_CONDITION_TOKENS, MAX_NESTING_DEPTH) == (4096, 1024, 16)
    assert (MAX_OPERATORS, MAX_COMPREHENSION_NESTING, EVALUATION_BUDGET) == (256, 2, 100_000)
    docs = (ROOT / "docs" / "events.md").read_text()
    for name in cel_limits.__all__:
        if name.isupper():
            assert f"`{name}`" in docs, name


@pytest.mark.parametrize(
    "expression",
    [
        "true",
        'message.type == "com.example.order.created"',
        'message.subject.matches("^orders/[0-9]+$")',
        r'message.source.matches("^//[a-z0-9-]+\\.example\\.com/\\w+$")',
        'message.type in ["com.example.order.created", "com.example.order.paid"]',
        'has(message.subject) && message.subject.startsWith("orders/")',
        "message.exists(name, name == 'region')",
        '["eu", "us"].exists(r, r == message.region)',
        'message.exists(k, ["x-", "y-"].exists(p, k.startsWith(p)))',
        "size([1, 2, 3].filter(x, x > 1)) == 2",
        '{"a": 1, "b": 2}.all(k, k != "")',
        "[[1, 2], [3]].all(xs, xs.all(x, x > 0))",
        # twenty clauses: far past any routing condition seen in the wild
        " || ".join(f'(message.type == "t{i}" && message.source == "//s{i}")' for i in range(20)),
        "message.type in [" + ", ".join(f'"com.shop.type{i}"' for i in range(150)) + "]",
    ],
)
def test_realistic_conditions_pass_the_bounds(expression: str) -> None:
    condition = compile_condition(expression)
    assert condition.refusal(prepare(EVENT)) is None


def test_an_event_that_makes_a_condition_over_budget_is_refused_not_evaluated() -> None:
    condition = compile_condition('message.exists(a, ["x1", "x2"].exists(b, a == b))')
    small = {**EVENT, **{f"x{i}": "v" for i in range(10)}}
    assert condition.refusal(prepare(small)) is None
    assert condition.matches(prepare(small)) is True
    large = {**EVENT, **{f"x{i}": "v" for i in range(20_000)}}
    prepared = prepare(large)
    reason = condition.refusal(prepared)
    assert reason is not None
    assert "over the budget of 100,000 for an event with 20004 attributes" in reason
    assert condition.matches(prepared) is False
    assert condition.matches(large) is False


def test_a_huge_attribute_concatenated_is_over_budget() -> None:
    condition = compile_condition("size(message.subject + message.subject + message.subject) > 2")
    assert condition.matches({**EVENT, "subject": "s"}) is True
    huge = {**EVENT, "subject": "s" * (4 << 20)}  # 12 MiB built, and each + copies
    assert "of up to 4,194,304 characters" in str(condition.refusal(huge))
    assert condition.matches(huge) is False
    with pytest.raises(InvalidArgument, match="too costly"):  # even for 1 KiB attributes
        compile_condition("size(" + " + ".join(["message.subject"] * 20) + ") > 0")


def test_attributes_a_condition_does_not_read_do_not_count() -> None:
    condition = compile_condition('message.type == "com.shop.order.paid"')
    event = {**EVENT, "subject": "s" * (4 << 20)}
    assert condition.refusal(prepare(event)) is None
    assert condition.matches(prepare(event)) is True
    assert condition.refusal({**EVENT, "type": "t" * (4 << 20)}) is not None


def test_a_stored_condition_that_fails_the_checks_is_refused_not_raised() -> None:
    condition = stored_condition(SEVEN_NESTED)
    assert condition.matches(EVENT) is False
    assert "nests comprehensions" in str(condition.refusal(EVENT))
    assert stored_condition("message.type == 'x'").refusal(EVENT) is None


@pytest.mark.parametrize(
    ("pattern", "low", "high"),
    [
        ("^orders/[0-9]+$", 10, 40),
        (r"\w", 150, 300),
        (r"\w{150}", 20_000, 40_000),
        (r"(?P<name>\w{30})", 5_000, 8_000),
        (r"(?:\w{10}){10}", 15_000, 25_000),
        (r"(a{100}){100}", 10_000, 11_000),
        ("(?i)k{100}", 1_000, 1_100),
    ],
)
def test_pattern_weight_grows_with_repetitions_and_unicode_classes(
    pattern: str, low: int, high: int
) -> None:
    assert low <= pattern_weight(pattern) <= high


def test_shape_counts_what_the_estimate_needs() -> None:
    counted = shape('message.exists(k, ["a", "b"].exists(p, k + p == "ab"))')
    assert counted.concatenations == 1
    assert counted.loops == ((-1,), (-1, 2))  # message, then a two-element literal inside it
    assert counted.estimate(attributes=10, largest=8) < EVALUATION_BUDGET


WORST = {
    "chain in nested brackets": (
        "size(" * 7 + "[" * 8 + " + ".join(["1"] * 256) + "]" * 8 + ")" * 7 + " > 0"
    ),
    "member chain": "(" * 16 + "message" + ".a" * 255 + ")" * 16 + " == 1",
    "index chain": "message" + "[0]" * 250 + " == 1",
    "nested parentheses": "(" * 16 + "1" + ")" * 16 + " > 0",
}


@pytest.mark.parametrize("name", sorted(WORST))
def test_the_worst_conditions_within_the_bounds_run_on_a_256_kib_thread_stack(
    name: str,
) -> None:
    """The static bounds keep the library's recursion within a small thread stack."""
    result = run_isolated(
        f"""
        import threading
        from txqueue.errors import InvalidArgument
        from txqueue.events.matching import compile_condition
        from txqueue.events.cel_limits import shape
        expression = {WORST[name]!r}
        shape(expression)  # within the bounds
        outcome = []
        def run():
            try:
                outcome.append(compile_condition(expression).matches({{"type": "t"}}))
            except InvalidArgument as error:
                outcome.append(str(error))
        threading.stack_size(256 * 1024)
        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
        print("outcome:", outcome)
        """
    )
    assert result.returncode == 0, f"crashed: rc {result.returncode} {result.stderr}"
    assert "outcome: [" in result.stdout
