"""The HTML compile report and the compile progress bar (docs/observability.md)."""

import io
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from ir_samples import SOFTMAX

import braze
from braze import progress
from braze.codegen import emit
from braze.errors import BrazeError
from braze.report import graph
from braze.target import require_toolchains

sys.path.insert(0, str(Path(__file__).parent / "frontend"))
from models import PreNormBlock  # noqa: E402


BLOCK = Path(__file__).parent / "report_prenorm_block.mlir"

def need_program(*names: str) -> str:
    """The first of `names` on PATH; skips without one (fails in CI, where
    .ci/run installs them)."""
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    message = f"{' or '.join(names)} is not installed"
    if require_toolchains():
        pytest.fail(message + " (BRAZE_REQUIRE_TOOLCHAINS=1)")
    pytest.skip(message)


def section(html: str, anchor: str) -> str:
    start = html.index(f'id="{anchor}"')
    return html[start:html.index("</svg>", start)]


def chromium(browser: str, page: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--enable-logging=stderr", "--v=0", *flags,
                           page.as_uri()], capture_output=True, text=True, timeout=60)


def test_transformer_block_report_renders_in_chromium(tmp_path):
    """The report of a transformer block opens in headless Chromium without a
    console message, and its after-fusion picture has one box per kernel,
    each labelled with the kernel's name and linked to its source. The
    screenshot stays in the test's tmp dir (pytest keeps the last 3 runs'),
    and is copied with the page to $BRAZE_TEST_ARTIFACTS when it is set."""
    browser = need_program("chromium", "chromium-browser", "google-chrome")
    need_program("dot")
    # The block as captured (a golden file: torch.export takes longer than this test may).
    compiled = braze.compile_mlir(BLOCK.read_text(), parameters=PreNormBlock().state_dict(),
                                  options={"report": str(tmp_path / "block.html")})
    page = compiled.stats["report"]
    assert page == tmp_path / "block.html"
    kernels = [op for op in compiled.module.mlir_module.body.operations[0].regions[0].blocks[0].operations
               if op.operation.name == "braze.kernel"]
    names = list(emit(compiled.module, "cpu")["forward"].kernels)
    assert len(names) == len(kernels) >= 4

    shot = tmp_path / "block.png"
    dom = chromium(browser, page, "--dump-dom", f"--screenshot={shot}", "--window-size=1400,2400")
    assert dom.returncode == 0, dom.stderr
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, console
    boxes = re.findall(r'<g id="kernel-([^"]+)" class="cluster kernel">', section(dom.stdout, "after-fusion"))
    # One box per kernel (braze-combo-kernels may move a kernel to its combo's place).
    assert sorted(boxes) == sorted(names)
    assert "cluster kernel" not in section(dom.stdout, "before-fusion")
    for name in names:
        assert f'<details class="kernel-source" id="source-kernel-{name}">' in dom.stdout
        assert f"{name}(" in dom.stdout
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("BRAZE_TEST_ARTIFACTS"):  # a place that outlives pytest's tmp dirs
        artifacts = Path(os.environ["BRAZE_TEST_ARTIFACTS"])
        artifacts.mkdir(parents=True, exist_ok=True)
        for kept in (page, shot):
            shutil.copy(kept, artifacts / kept.name)


def test_chromium_reports_console_errors(tmp_path):
    """The console check above can fail: a page that logs an error shows it."""
    browser = need_program("chromium", "chromium-browser", "google-chrome")
    page = tmp_path / "broken.html"
    page.write_text("<html><body><script>undefinedFunction()</script></body></html>")
    run = chromium(browser, page, "--dump-dom")
    assert any(":CONSOLE" in line and "undefinedFunction" in line for line in run.stderr.splitlines()), run.stderr


def test_report_shows_refusals_kernels_and_passes(tmp_path):
    need_program("dot")
    compiled = braze.compile_mlir(SOFTMAX, options={"report": str(tmp_path)})
    page = compiled.stats["report"]
    assert page == tmp_path / "compile-000.html"
    html = page.read_text()
    # The neg after a rank-dropping sum was refused: a red edge with the reason.
    assert "braze-fuse-pointwise fused 5 producer/consumer pair(s) and refused 1." in html
    assert "the reduction drops its dims (no keepdim)" in html
    assert 'class="edge refused"' in section(html, "before-fusion")
    assert 'class="edge refused"' in section(html, "after-fusion")  # between the two kernels
    after = section(html, "after-fusion")
    assert re.findall(r'<g id="kernel&#45;(\w+)" class="cluster kernel">', after) == \
        ["braze_kernel_0", "braze_kernel_1"]
    # Kernel 0 reads 4x8 floats and writes 4x8 + 4: 272 bytes; its body has
    # max, sub, exp, sum, div, sum: 6 ops at each of 32 points.
    row = re.search(r'braze_kernel_0</a></td>.*?</tr>', html).group(0)
    assert re.findall(r'<td class="n">([^<]*)</td>', row) == ["272", "192", "0.71"]
    source = re.search(r'id="source-kernel-braze_kernel_1"><summary>braze_kernel_1</summary><pre>(.*?)</pre>',
                       html, re.S).group(1)
    assert "braze_kernel_1(" in source and "braze_kernel_0(" not in source
    passes = re.findall(r"<tr><td>([^<]+)</td><td class=\"n\">\d+\.\d\d</td>", html)
    assert passes == ["braze-simplify", "func.func(braze-verify-collective-order)",
                      "func.func(braze-fuse-pointwise{recompute-limit=2 remarks=true})",
                      "func.func(braze-lower-kernels)", "func.func(braze-channels-last)",
                      "func.func(braze-collapse-dims)", "cse", "func.func(braze-verify-collective-order)",
                      "func.func(braze-overlap{remarks=true})", "func.func(braze-verify-collective-order)",
                      "func.func(braze-combo-kernels{max-arguments=250})", "braze-plan-memory"]
    assert re.search(r"<td>kernel binary</td><td>cache (hit|miss \(compiled now\))</td>", html)


def test_report_without_fusion_boxes_each_op(tmp_path):
    need_program("dot")
    html = braze.compile_mlir(SOFTMAX, options={"fuse": False, "report": str(tmp_path / "r.html")}) \
        .stats["report"].read_text()
    assert 'id="before-fusion"' not in html and "Fusion decisions" not in html
    after = section(html, "after-fusion")
    # Seven lone ops, seven kernels, each op in its kernel's box.
    assert len(re.findall(r'class="cluster kernel"', after)) == 7
    assert "empty_" not in html


def test_report_changes_nothing_compiled(private_cache, tmp_path):
    plain = braze.compile_mlir(SOFTMAX)
    reported = braze.compile_mlir(SOFTMAX, options={"report": str(tmp_path / "r.html")})
    assert not plain.stats["cache_hit"] and reported.stats["cache_hit"]
    assert reported.stats["source"] == plain.stats["source"]
    assert "cache hit" in (tmp_path / "r.html").read_text()
    x = torch.randn(4, 8)
    for got, want in zip(reported(x), plain(x)):
        torch.testing.assert_close(got, want)


def test_torch_compile_writes_a_report_per_graph(tmp_path):
    torch._dynamo.reset()
    function = torch.compile(lambda x: torch.softmax(x, -1) * 2, backend="braze",
                             options={"report": str(tmp_path)})
    function(torch.randn(4, 8))
    pages = list(tmp_path.glob("compile-*.html"))
    assert len(pages) == 1
    assert 'class="cluster kernel"' in pages[0].read_text()
    torch._dynamo.reset()


def test_report_directory_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("BRAZE_REPORT_DIR", str(tmp_path / "reports"))
    first = braze.compile_mlir(SOFTMAX)
    second = braze.compile_mlir(SOFTMAX)
    assert [first.stats["report"].name, second.stats["report"].name] == ["compile-000.html", "compile-001.html"]
    monkeypatch.delenv("BRAZE_REPORT_DIR")
    assert "report" not in braze.compile_mlir(SOFTMAX).stats


def test_report_without_graphviz_keeps_the_rest(monkeypatch, tmp_path):
    monkeypatch.setattr(graph, "DOT", "no-such-dot")
    html = braze.compile_mlir(SOFTMAX, options={"report": str(tmp_path / "r.html")}).stats["report"].read_text()
    assert "No pictures: Graphviz&#x27;s `no-such-dot` is not installed (Debian: apt-get install graphviz)" in html
    assert "<svg" not in html
    assert "subgraph cluster_0" in html  # the DOT text, to render elsewhere
    assert 'id="source-kernel-braze_kernel_0"' in html and "<h2>Passes</h2>" in html


def test_report_to_an_unwritable_place_is_a_clear_error(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(BrazeError, match=r"cannot write the compile report to '.*file/r.html'"):
        braze.compile_mlir(SOFTMAX, options={"report": str(tmp_path / "file" / "r.html")})
    with pytest.raises(BrazeError, match=r"the report option must be a path \(a .html file or a directory\), got int"):
        braze.compile_mlir(SOFTMAX, options={"report": 3})


def test_report_remarks_do_not_turn_on_the_fusion_log(caplog, tmp_path):
    braze.set_logs("")
    try:
        with caplog.at_level(logging.DEBUG):
            braze.compile_mlir(SOFTMAX, options={"report": str(tmp_path / "r.html")})
        assert not [r for r in caplog.records if r.name.startswith("braze.")]
        braze.set_logs("fusion")
        with caplog.at_level(logging.INFO, logger="braze"):
            braze.compile_mlir(SOFTMAX, options={"report": str(tmp_path / "r.html")})
        assert ("<string>:9:8: 'braze.neg' not fused with its producer 'braze.sum': the reduction drops its dims "
                "(no keepdim)") in [r.getMessage() for r in caplog.records if r.name == "braze.fusion"]
    finally:
        braze.set_logs(None)


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_on_a_terminal(monkeypatch):
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(progress, "DELAY", 0.0)
    braze.compile_mlir(SOFTMAX)
    written = terminal.getvalue()
    assert re.search(r"\r\x1b\[Kbraze: compiling for cpu \[[#.]{20}\] [123]/3 (passes|codegen|build) +\d+\.\ds",
                     written), written
    assert written.endswith("\r\x1b[K")  # erased at the end


def test_progress_bar_is_quiet_elsewhere(monkeypatch):
    monkeypatch.setattr(progress, "DELAY", 0.0)
    plain = io.StringIO()
    monkeypatch.setattr(sys, "stderr", plain)
    braze.compile_mlir(SOFTMAX)
    assert plain.getvalue() == ""
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("BRAZE_PROGRESS", "0")
    braze.compile_mlir(SOFTMAX)
    assert terminal.getvalue() == ""
    monkeypatch.delenv("BRAZE_PROGRESS")
    braze.set_logs("codegen")  # log lines and a bar would share the terminal
    try:
        braze.compile_mlir(SOFTMAX)
    finally:
        braze.set_logs(None)
    assert "braze: compiling" not in terminal.getvalue()


def test_short_compiles_show_no_bar(monkeypatch):
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(progress, "DELAY", 60.0)
    braze.compile_mlir(SOFTMAX)
    assert terminal.getvalue() == ""


@pytest.mark.parametrize("language", ["cpu", "cuda", "hip", "opencl", "metal", "triton"])
def test_each_kernel_source_is_cut_from_the_unit(language):
    from braze.report.kernels import kernel_source

    emitted = emit(SOFTMAX, language)["softmax"]
    names = list(emitted.kernels)
    assert len(names) == 2
    for name, other in (names, names[::-1]):
        source = kernel_source(emitted.source, name, emitted.extension)
        assert f"{name}(" in source and f"{other}(" not in source
        assert source.rstrip().endswith("}" if language != "triton" else "mask=xmask)")
    if language == "triton":
        assert kernel_source(emitted.source, names[1], ".py").startswith(f"@triton.jit\ndef {names[1]}(")


def test_report_of_dynamic_dims_leaves_the_estimates_open(tmp_path):
    from ir_samples import SWISH

    html = braze.compile_mlir(SWISH, options={"report": str(tmp_path / "r.html")}).stats["report"].read_text()
    row = re.search(r'braze_kernel_0</a></td>.*?</tr>', html).group(0)
    assert "<td>?</td><td" in row and "?xf32 → ?xf32" in row  # braze-collapse-dims merged ?x64
    assert re.findall(r'<td class="n">([^<]*)</td>', row) == ["dynamic", "dynamic", "-"]
