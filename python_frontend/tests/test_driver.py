"""par-opt driven from Python: success, mesh override and error surfacing."""
from pathlib import Path

import pytest

import par

ROOT = Path(__file__).resolve().parents[2]
MLP = (ROOT / "examples" / "megatron-mlp" / "mlp.mlir").read_text()

pytestmark = pytest.mark.usefixtures("need_par_opt")


def test_round_trip_keeps_shardings():
    out = par.par_opt(MLP)
    assert 'par.mesh @mesh <["dp"=2, "tp"=4]>' in out
    assert '#par.sharding<@mesh, [{}, {"tp"}]>' in out
    assert out.count("par.dot") == 2


def test_mesh_override_and_summary():
    out = par.par_opt(MLP, ["--mesh=dp=4,tp=2", "--par-summary"])
    assert "mesh @mesh: dp=4 x tp=2 (8 devices)" in out
    # w1 (16x64) split 2 ways on its columns.
    assert "16x64          -> local 16x32" in out


def test_verifier_error_becomes_exception_with_location():
    bad = MLP.replace('[{}, {"tp"}]', '[{}, {"pp"}]')
    with pytest.raises(par.ParError) as info:
        par.par_opt(bad, source_name="mlp.mlir")
    err = info.value
    assert err.returncode == 1
    errors = [d for d in err.diagnostics if d.severity == "error"]
    assert errors, err.stderr
    assert errors[0].file == "mlp.mlir"
    assert errors[0].line == 7
    assert 'unknown axis "pp" in mesh @mesh' in errors[0].message
    assert 'unknown axis "pp"' in str(err)


def test_bad_mesh_option_is_reported():
    with pytest.raises(par.ParError) as info:
        par.par_opt(MLP, ["--mesh=4xx2"])
    assert "invalid --mesh='4xx2'" in info.value.stderr


def test_parse_error_is_reported():
    with pytest.raises(par.ParError) as info:
        par.par_opt("func.func @f( {", source_name="broken.mlir")
    assert any(d.file == "broken.mlir" and d.severity == "error"
               for d in info.value.diagnostics)


def test_parse_diagnostics_extracts_fields():
    diags = par.driver.parse_diagnostics(
        "a.mlir:3:5: error: something broke\nnoise\nb.mlir:1:1: remark: fine\n")
    assert [(d.file, d.line, d.column, d.severity) for d in diags] == [
        ("a.mlir", 3, 5, "error"), ("b.mlir", 1, 1, "remark")]
