"""The image leaves the local environment out: `dev up` and `demo` there say so and name the
fix (exit code 3, setup needed) instead of an internal error with a ModuleNotFoundError."""

from __future__ import annotations

import sys

import pytest

from controller.cli.main import main


@pytest.mark.parametrize("argv", [["dev", "up"], ["demo", "--once"]])
def test_dev_up_without_the_local_environment_is_a_setup_error(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # As in the image: neither package is importable.
    for name in ("localenv", "localenv.devup", "simulators"):
        monkeypatch.setitem(sys.modules, name, None)
    assert main(argv) == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "local environment" in err and "make dev-up" in err, err
    assert "internal error" not in err and "Traceback" not in err
