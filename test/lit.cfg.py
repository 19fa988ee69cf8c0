# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "par"
# The internal shell provides `not` (Debian does not ship it as a tool).
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.par_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%par_src_root", config.par_src_root))
config.substitutions.append(("%python", config.python_executable or "python3"))
config.substitutions.append(("%par_bin", config.par_tools_dir))
config.substitutions.append(("%llvm_tools_dir", config.llvm_tools_dir))
config.substitutions.append(("%par_obj_root", config.par_obj_root))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

# Features that gate tests needing hardware or launchers.
if config.par_have_mpi:
    config.available_features.add("mpi")
if config.par_have_cuda:
    config.available_features.add("cuda")
    # A GPU to run on (CI has none): nvidia-smi lists one.
    import subprocess
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                                text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        listed = ""
    if "GPU" in listed:
        config.available_features.add("gpu")

tool_dirs = [config.par_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(
    ["par-opt", "par-run", "par-check-program", "par-fuzz-driver"], tool_dirs)
llvm_config.with_environment("PATH", config.par_tools_dir, append_path=True)
