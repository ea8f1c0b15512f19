"""ctest driver for the MCP SDK test: makes a virtual environment with the
official Python SDK (`pip install mcp` from PyPI), then runs sdk_client.py in it.

    run_sdk_test.py DENSEFEED_EXE PROJECT VENV_DIR   (PROJECT: densefeed's own checkout, holding densefeed.yaml)

Exit 77 (ctest SKIP_RETURN_CODE) only when PyPI cannot be reached; any other
failure to install is a failure. The venv is kept in VENV_DIR between runs.
"""

import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

SKIP = 77


def pypi_reachable() -> str:
    """'' when https://pypi.org answers, else why not."""
    try:
        with urllib.request.urlopen("https://pypi.org/simple/mcp/", timeout=30) as response:
            return "" if response.status == 200 else f"HTTP {response.status}"
    except Exception as e:  # any network failure means: cannot reach it
        return str(e)


def main() -> int:
    exe, root, venv = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    python = venv / "bin" / "python"
    have_sdk = python.exists() and subprocess.run([str(python), "-c", "import mcp"], capture_output=True).returncode == 0
    if not have_sdk:
        why = pypi_reachable()
        if why:
            print(f"SKIPPED: PyPI is unreachable ({why}), so the official MCP SDK cannot be installed; "
                  "tests/e2e/mcp_server_test.cpp still tests the server with raw JSON-RPC", flush=True)
            return SKIP
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        install = subprocess.run([str(venv / "bin" / "pip"), "install", "--disable-pip-version-check", "-q", "mcp"],
                                 capture_output=True, text=True)
        if install.returncode != 0:
            print(install.stdout, install.stderr, sep="\n", flush=True)
            print("FAIL: pip install mcp failed although PyPI answers", flush=True)
            return 1
    version = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('mcp'))"],
                             capture_output=True, text=True).stdout.strip()
    print(f"official MCP Python SDK: mcp {version} in {venv}", flush=True)
    with tempfile.TemporaryDirectory(prefix="densefeed-mcp-sdk-") as work:
        return subprocess.run([str(python), str(Path(__file__).with_name("sdk_client.py")), exe, str(root), work]).returncode


if __name__ == "__main__":
    sys.exit(main())
