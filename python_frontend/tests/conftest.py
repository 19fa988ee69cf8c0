import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import par  # noqa: E402


def _built(tool: str) -> bool:
    try:
        par.find_tool(tool)
        return True
    except FileNotFoundError:
        return False


HAVE_PAR_OPT = _built("par-opt")
HAVE_PAR_RUN = _built("par-run") and shutil.which("mpirun") is not None


@pytest.fixture
def need_par_opt():
    if not HAVE_PAR_OPT:
        pytest.skip("par-opt is not built (scripts/build.sh, or set PAR_BUILD_DIR)")


@pytest.fixture
def need_par_run():
    if not HAVE_PAR_OPT or not HAVE_PAR_RUN:
        pytest.skip("par-opt/par-run are not built or mpirun is missing")
