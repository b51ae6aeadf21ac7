"""Every argument an operator can give ``pause`` (pin) and ``resume`` ends in one of two ways: the
command acts (exit 0, the pause stored or cleared in the real table on Azurite), or it says
``error:`` on stderr and exits 2 having written nothing. Never a traceback, never a storage error
after the fact. Explicit cases from issue 49 first, then a property over random arguments
(``CLI_EXAMPLES`` examples, 100 by default, 1000 with ``make test-deep``)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from scaling.__main__ import main
from scaling.domain.policy import policy_to_dict
from scaling.storage.base import TableNames
from scaling.storage.synthetic import policy_of, rules_target
from scaling.storage.tables import TableStorage

CLI_EXAMPLES = int(os.environ.get("CLI_EXAMPLES", "100"))


class Store:
    """Fresh tables on Azurite and a policy file naming one target, ``orders``."""

    def __init__(self, azurite, prefix: str, directory) -> None:
        self.names = TableNames.with_prefix(prefix)
        self.connection = azurite.connection_string
        self.tables = TableStorage.from_connection_string(self.connection, self.names)
        self.tables.ensure_tables()
        self.policy = directory / "policy.json"
        self.policy.write_text(json.dumps(policy_to_dict(policy_of(rules_target("orders")))), encoding="utf-8")

    def rows(self) -> int:
        """Every entity in the state table (state, decision rows, outbox)."""
        return sum(1 for _ in self.tables.state.list_entities())

    def run(self, argv: list[str]) -> tuple[int, str]:
        """``python -m scaling ARGV`` in process: its exit code and stderr; a traceback fails the test."""
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                code = main(argv)
            except SystemExit as exit_:  # argparse's own refusals: "error: ..." and exit 2
                code = exit_.code
        return code, err.getvalue()


@pytest.fixture(scope="module")
def store(azurite, tmp_path_factory):
    made = Store(azurite, "t" + os.urandom(6).hex(), tmp_path_factory.mktemp("cli"))
    yield made
    made.tables.close()


def _common(store: Store) -> list[str]:
    return ["--connection-string", store.connection, "--table", store.names.state]


@pytest.mark.parametrize("arguments", [
    pytest.param(["--for", "999999999d"], id="for-999999999d"),
    pytest.param(["--for", "9" * 5000 + "m"], id="for-5000-digits"),
    pytest.param(["--for", "9" * 13 + "s"], id="for-13-digits"),
    pytest.param(["--at", "9" * 5000], id="at-5000-digits"),
    pytest.param(["--until", "9999-12-31T23:59:59-23:59"], id="until-past-year-9999"),
    pytest.param(["--target", "orders\x01"], id="target-control-character"),
    pytest.param(["--target", "o" * 600], id="target-too-long"),
    pytest.param(["--target", "\ud800"], id="target-lone-surrogate"),
    pytest.param(["--by", "\ud800"], id="by-lone-surrogate"),
    pytest.param(["--by", "b" * 5000], id="by-too-long"),
    pytest.param(["--table", "no-such/table"], id="table-not-a-name"),
    pytest.param(["--connection-string", "garbage=;;"], id="connection-string-malformed"),
])
def test_a_bad_argument_is_an_error_line_and_exit_2_with_nothing_written(store, arguments):
    before = store.rows()
    argv = ["pause", "--target", "orders", "--reason", "x", *_common(store), *arguments]
    code, err = store.run(argv)
    assert code == 2 and "error:" in err and "Traceback" not in err, err
    assert store.rows() == before


_TEXT = st.text(st.characters(exclude_categories=()), max_size=80)  # lone surrogates and controls included
_DIGITS = st.integers(min_value=1, max_value=5000).map(lambda n: "9" * n)
_NAME = st.text("abcdefghijklmnopqrstuvwxyz-0123456789 ", min_size=1, max_size=30).filter(str.strip)


@st.composite
def arguments(draw) -> list[str]:
    """A ``pause``, pin or ``resume`` command line, each argument valid or not."""
    command = draw(st.sampled_from(["pause", "pin", "resume"]))
    # Valid values are drawn as often as invalid ones, so that both outcomes are well exercised.
    target = draw(st.one_of(st.just("orders"), st.just("orders"), st.just("orders/eu#1"), _NAME, _TEXT, st.text(max_size=700)))
    argv = ["resume" if command == "resume" else "pause", f"--target={target}"]
    if draw(st.booleans()):
        argv.append(f"--by={draw(st.one_of(st.just('alice'), _NAME, _NAME, _TEXT, st.text(min_size=100, max_size=300)))}")
    if draw(st.integers(0, 3)) == 0:  # a table that is not a table name (another, valid one would be written to)
        argv.append("--table=" + draw(st.from_regex(r"[A-Za-z0-9_-]{1,70}", fullmatch=True).filter(
            lambda name: not re.fullmatch(r"[A-Za-z][A-Za-z0-9]{2,62}", name))))
    if command != "resume":
        argv.append(f"--reason={draw(st.one_of(st.just('incident 7'), _NAME, _NAME, _TEXT, st.text(min_size=250, max_size=300)))}")
        end = draw(st.sampled_from(["none", "for", "for", "until", "both"]))
        if end in ("for", "both"):
            duration = draw(st.one_of(
                st.integers(1, 7 * 24 * 60).map(lambda minutes: f"{minutes}m"),
                st.from_regex(r"(\d{1,3}d)?(\d{1,4}h)?(\d{1,6}m)?(\d{1,8}s)?", fullmatch=True),
                _DIGITS.map(lambda digits: digits + "d"), _TEXT))
            argv.append(f"--for={duration}")
        if end in ("until", "both"):
            offset = st.timedeltas(min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23, minutes=59))
            moment = st.builds(lambda at, shift: at.replace(tzinfo=timezone(shift)).isoformat(),
                               st.datetimes(), offset)
            soon = st.integers(120, 7 * 86400 - 120).map(lambda seconds: (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat())
            argv.append(f"--until={draw(st.one_of(soon, moment, st.datetimes().map(datetime.isoformat), _TEXT))}")
    if command == "pin":
        argv.append(f"--at={draw(st.one_of(st.integers(1, 8).map(str), st.integers(1, 8).map(str), st.integers(-10, 20).map(str), _DIGITS, _TEXT))}")
    return argv


@settings(max_examples=CLI_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(argv=arguments(), with_policy=st.booleans())
@example(argv=["pause", "--target=orders", "--reason=x", "--for=999999999d"], with_policy=False)
@example(argv=["pause", "--target=orders", "--reason=x", "--for=" + "9" * 5000], with_policy=True)
@example(argv=["pause", "--target=orders", "--reason=x", "--at=4", "--for=2h"], with_policy=True)
@example(argv=["resume", "--target=orders"], with_policy=True)
def test_property_any_arguments_act_or_say_error_and_exit_2(store, argv, with_policy):
    if not any(word.startswith("--table") for word in argv):
        argv = [*argv, f"--table={store.names.state}"]
    argv = [*argv, f"--connection-string={store.connection}"]
    if with_policy:
        argv.append(f"--policy={store.policy}")
    before = store.rows()
    code, err = store.run(argv)
    event(f"{argv[0]}{' --at' if any(word.startswith('--at=') for word in argv) else ''}: exit {code}")
    event("refused: " + (err.split("error: ", 1)[1].split(" ", 1)[0] if "error: " in err else "-"))
    assert "Traceback" not in err
    assert code in (0, 2), (code, err)
    if code == 2:
        assert "error:" in err, err
        assert store.rows() == before, "a refused command wrote"
        return
    target = next(word.split("=", 1)[1] for word in argv if word.startswith("--target="))
    pause = store.tables.load_state(target).pause
    if argv[0] == "resume":
        assert pause is None
    else:
        assert pause is not None and pause.until > datetime.now(UTC)
        pinned = next((word.split("=", 1)[1] for word in argv if word.startswith("--at=")), None)
        assert pause.pinned_at == (None if pinned is None else int(pinned))
