"""`dragonet serve` checks every variable it reads before gunicorn starts (issue 38): what it
cannot use is one line naming the variable and exit status 2, never a traceback or a
worker's log lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.main import main


def _refused(capsys: pytest.CaptureFixture[str]) -> str:
    code = main(["serve"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    return line


@pytest.mark.parametrize(
    ("env", "said"),
    [
        (
            {"DRAGONET_LOG_LEVEL": "LOUD"},
            "DRAGONET_LOG_LEVEL: 'LOUD' is not a log level (one of debug, info, warning, "
            "error, critical)",
        ),
        (
            {"DRAGONET_TLS_CERT_FILE": "{tmp}/absent.crt", "DRAGONET_TLS_KEY_FILE": "{tmp}/k"},
            "DRAGONET_TLS_CERT_FILE: {tmp}/absent.crt: no such file",
        ),
        (
            {"DRAGONET_SHARED_SECRET_FILE": "{tmp}/absent"},
            "DRAGONET_SHARED_SECRET_FILE: {tmp}/absent: no such file",
        ),
        (
            {"DRAGONET_SHARED_SECRET_FILE": "{tmp}/empty"},
            "DRAGONET_SHARED_SECRET_FILE {tmp}/empty is empty",
        ),
        (
            {"DRAGONET_TLS_CERT_FILE": "{tmp}/empty", "DRAGONET_TLS_KEY_FILE": "{tmp}/empty"},
            "DRAGONET_TLS_CERT_FILE, DRAGONET_TLS_KEY_FILE: not a PEM certificate and its key",
        ),
        (
            {"DRAGONET_WORKRS": "3"},
            "DRAGONET_WORKRS: not a setting of dragonet serve (did you mean DRAGONET_WORKERS?",
        ),
        ({"DRAGONET_PORT": "abc"}, "DRAGONET_PORT: Input should be a valid integer"),
    ],
)
def test_a_variable_serve_cannot_use_is_named_before_it_starts(
    env: dict[str, str],
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "empty").write_text("")
    for name, value in env.items():
        monkeypatch.setenv(name, value.replace("{tmp}", str(tmp_path)))
    assert _refused(capsys).startswith(f"dragonet serve: {said.replace('{tmp}', str(tmp_path))}")


def test_other_processes_variables_are_not_the_webhooks_to_refuse(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The monitor's variables may share a pod template's env; only ours are judged."""
    monkeypatch.setenv("DRAGONET_MONITOR_PORT", "9100")
    monkeypatch.setenv("DRAGONET_LOG_LEVEL", "LOUD")  # so serve stops before it starts
    assert "DRAGONET_LOG_LEVEL" in _refused(capsys)
