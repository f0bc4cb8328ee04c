from __future__ import annotations

import json
import sys
from pathlib import Path

from star_lib.cli.report import KERNEL_NAME, register_kernel


def test_lab_kernel_runs_this_interpreter(tmp_path):
    folder = Path(register_kernel(prefix=str(tmp_path)))
    assert folder == tmp_path / "share" / "jupyter" / "kernels" / KERNEL_NAME
    spec = json.loads((folder / "kernel.json").read_text())
    assert spec["argv"][0] == sys.executable and "ipykernel_launcher" in spec["argv"]
    assert spec["display_name"] == "STAR lab (Python)"
