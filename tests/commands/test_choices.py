"""Commands pass the enum member of a choice on, not the string (`qsim simulate --engine`)."""
import pytest

from qsim import cli
from qsim.commands import simulate
from qsim.npu.engines import Engine


def test_simulate_parses_the_engine_before_the_stage_runs(monkeypatch):
    seen = {}

    def fake_simulate_command(model, config, engine, *args, **kwargs):
        seen["engine"] = engine
        raise SystemExit(0)
    monkeypatch.setattr(simulate, "simulate_command", fake_simulate_command)
    with pytest.raises(SystemExit):
        simulate.run(cli.build_parser().parse_args(["simulate", "--engine", "MODEL"]))
    assert seen["engine"] is Engine.MODEL       # names are case-insensitive (Engine.parse)


def test_an_unknown_engine_is_a_usage_error_naming_the_engines(capsys):
    assert cli.main(["simulate", "--engine", "spice"]) == 2
    err = capsys.readouterr().err
    assert "unknown engine 'spice'" in err
    assert "choose one of " + ", ".join(e.value for e in Engine) in err
