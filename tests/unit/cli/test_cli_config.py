"""Commands report configuration errors cleanly: message, no traceback, exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pricing_ha.cli import app


@pytest.mark.parametrize("command", [["feed"], ["topics", "create"], ["topics", "check"]])
def test_bad_config_file_exits_2_with_message(tmp_path: Path, command: list[str]) -> None:
    """An invalid config file gives its path, key and problem on stderr and exit status 2."""
    path = tmp_path / "bad.toml"
    path.write_text("[neli]\nthreshold_ms = 1000\n")
    result = CliRunner().invoke(app, [*command, "--config", str(path)])
    assert result.exit_code == 2
    assert f"{path}: neli.threshold_ms:" in result.stderr
    assert "Traceback" not in result.output


def test_bad_environment_override_names_the_variable() -> None:
    """A malformed PRICING_HA__ variable is reported by name."""
    result = CliRunner().invoke(
        app, ["topics", "check"], env={"PRICING_HA__NELI__PULSE_INTERVAL_MS": "fast"}
    )
    assert result.exit_code == 2
    assert "environment variable PRICING_HA__NELI__PULSE_INTERVAL_MS" in result.stderr


def test_missing_config_file_exits_2(tmp_path: Path) -> None:
    """A --config path that does not exist is a configuration error, not a traceback."""
    result = CliRunner().invoke(app, ["topics", "check", "--config", str(tmp_path / "x.toml")])
    assert result.exit_code == 2
    assert "cannot read" in result.stderr


def test_feed_option_out_of_range_exits_2() -> None:
    """--instruments 0 is refused as a configuration error naming the option's key."""
    result = CliRunner().invoke(app, ["feed", "--instruments", "0"], env={})
    assert result.exit_code == 2
    assert "command line: feed.instruments" in result.stderr


@pytest.mark.parametrize(
    ("args", "allowed"),
    [
        (["run", "--group", "p3"], "allowed: p1, p2"),
        (["run", "--group", "P1"], "allowed: p1, p2"),
        (["dedupe", "--group", "relay2"], "allowed: relay"),
    ],
)
def test_unconfigured_group_exits_2_naming_option_value_and_allowed(
    args: list[str], allowed: str
) -> None:
    """run/dedupe refuse a --group missing from [groups]: option, value, allowed names; exit 2.

    The broker is never contacted: the check comes before any connection (port 1 is closed).
    """
    result = CliRunner().invoke(app, [*args, "--bootstrap", "127.0.0.1:1"], env={})
    assert result.exit_code == 2, result.output
    assert "--group" in result.stderr
    assert repr(args[-1]) in result.stderr
    assert allowed in result.stderr
    assert "Traceback" not in result.output


def test_groups_come_from_the_configuration(tmp_path: Path) -> None:
    """With [groups] publishing = ["a", "b"], the default p1 is refused and the list shown."""
    path = tmp_path / "groups.toml"
    path.write_text('[groups]\npublishing = ["a", "b"]\n')
    result = CliRunner().invoke(app, ["run", "--group", "p1", "--config", str(path)], env={})
    assert result.exit_code == 2, result.output
    assert "'p1' is not a configured publisher group; allowed: a, b" in result.stderr


def test_version_option_prints_the_package_version() -> None:
    """pricing-ha --version prints pricing_ha.__version__ and exits 0."""
    import pricing_ha

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"pricing-ha {pricing_ha.__version__}"


def test_config_and_bootstrap_take_their_environment_variables_through_typer() -> None:
    """--config and --bootstrap of every configured command declare their variable as envvar.

    The demos' --bootstrap (use this broker instead of starting one) is not a configuration
    override and takes no variable: an exported PRICING_HA_BOOTSTRAP must not redirect a demo.
    """
    import typer.main

    group = typer.main.get_command(app)
    seen = 0
    commands = list(group.commands.values())  # type: ignore[attr-defined]
    while commands:
        command = commands.pop()
        commands.extend(getattr(command, "commands", {}).values())
        if not any(p.name == "config" for p in command.params):
            continue
        for param in command.params:
            expected = {"config": "PRICING_HA_CONFIG", "bootstrap": "PRICING_HA_BOOTSTRAP"}
            if param.name in expected and param.opts[0] in ("--config", "--bootstrap"):
                assert param.envvar == expected[param.name], f"{command.name} {param.opts}"
                seen += 1
    assert seen >= 10
    help_text = CliRunner().invoke(app, ["topics", "check", "--help"]).stdout
    assert "PRICING_HA_CONFIG" in help_text
    assert "PRICING_HA_BOOTSTRAP" in help_text


def test_config_from_the_environment_variable_reaches_the_command(tmp_path: Path) -> None:
    """PRICING_HA_CONFIG naming a bad file fails the command with that file's error."""
    path = tmp_path / "env.toml"
    path.write_text("[neli]\nthreshold_ms = 1000\n")
    result = CliRunner().invoke(app, ["topics", "check"], env={"PRICING_HA_CONFIG": str(path)})
    assert result.exit_code == 2
    assert f"{path}: neli.threshold_ms:" in result.stderr


def test_feed_runs_with_its_start_up_objects_frozen_out_of_the_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The feed command freezes what start-up built (the collector's full passes skip it) and
    collects the young generation less often while it produces, then puts both back."""
    import gc

    from pricing_ha.feed import producer
    from pricing_ha.feed.sources import FeedSummary

    seen: dict[str, object] = {}

    def fake_run(*_args: object, **_kwargs: object) -> FeedSummary:
        seen["frozen"] = gc.get_freeze_count()
        seen["threshold"] = gc.get_threshold()
        return FeedSummary(topic="md.quotes")

    monkeypatch.setattr(producer, "run_configured_feed", fake_run)
    before = gc.get_threshold()
    result = CliRunner().invoke(app, ["feed", "--count", "1"], env={})
    assert result.exit_code == 0, result.output
    assert isinstance(seen["frozen"], int)
    assert seen["frozen"] > 0
    assert seen["threshold"][0] >= 10_000  # type: ignore[index]
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
