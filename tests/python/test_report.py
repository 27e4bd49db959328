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
from ir_samples import COLLECTIVE_STEP, SOFTMAX, SWITCH

import braze
from braze import progress
from braze.codegen import emit
from braze.errors import BrazeError
from braze.machine import Machine
from braze.op_kinds import GENERATED_OPS
from braze.report import graph, timeline
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


def rendered(browser: str, page: Path, shot: Path) -> str:
    """The DOM of `page` as headless Chromium renders it, which must log
    nothing to its console; the screenshot `shot` is kept (with the page,
    also in $BRAZE_TEST_ARTIFACTS when it is set)."""
    dom = chromium(browser, page, "--dump-dom", f"--screenshot={shot}", "--window-size=1400,2400")
    assert dom.returncode == 0, dom.stderr
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, console
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if os.environ.get("BRAZE_TEST_ARTIFACTS"):  # a place that outlives pytest's tmp dirs
        artifacts = Path(os.environ["BRAZE_TEST_ARTIFACTS"])
        artifacts.mkdir(parents=True, exist_ok=True)
        for kept in (page, shot):
            shutil.copy(kept, artifacts / kept.name)
    return dom.stdout


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
               if op.operation.name in GENERATED_OPS]
    names = list(emit(compiled.module, "cpu")["forward"].kernels)
    assert len(names) == len(kernels) >= 4

    dom = rendered(browser, page, tmp_path / "block.png")
    after = section(dom, "after-fusion")
    boxes = re.findall(r'<g id="kernel-([^"]+)" class="cluster (kernel|fused-gemm)">', after)
    # One box per kernel (braze-combo-kernels may move a kernel to its combo's
    # place), a fused GEMM's of its own kind; none is empty: the copy kernel
    # braze-fold-layouts makes of a view is boxed around that view.
    assert sorted(name for name, _ in boxes) == sorted(names)
    fused_gemms = sum(op.operation.name == "braze.fused_gemm" for op in kernels)
    assert [kind for _, kind in boxes].count("fused-gemm") == fused_gemms == 3
    assert "empty_" not in after
    # Before fusion is before braze-epilogue-fusion too: no box at all.
    assert "cluster" not in section(dom, "before-fusion")
    for name in names:
        assert f'<details class="kernel-source" id="source-kernel-{name}">' in dom
        assert f"{name}(" in dom


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
    # Whether half attentions are lowered follows the CPU (AMX: no).
    halves = "halves=true " if braze.target.get("cpu").options().flash_attention_halves else ""
    assert passes == ["braze-simplify", "func.func(braze-verify-collective-order)",
                      "func.func(braze-convolution-gemms{max-work=8388608 remarks=true})",
                      "func.func(braze-form-attention{remarks=true})", "func.func(braze-order-attention{remarks=true})",
                      f"func.func(braze-lower-attention{{{halves}group-heads=true remarks=true}})",
                      "func.func(braze-epilogue-fusion{decode-rows=4 half-products=false remarks=true})",
                      "func.func(braze-fuse-pointwise{recompute-limit=2 remarks=true})",
                      "func.func(braze-lower-kernels)", "func.func(braze-fold-layouts{remarks=true})", "func.func(braze-inline-kernels)",
                      "func.func(braze-channels-last)", "func.func(braze-split-dims)",
                      "func.func(braze-collapse-dims)", "cse", "func.func(braze-verify-collective-order)",
                      "func.func(braze-overlap{remarks=true})", "func.func(braze-verify-collective-order)",
                      "func.func(braze-combo-kernels{max-arguments=250 remarks=true})",
                      "braze-plan-memory{remarks=true}"]
    assert re.search(r"<td>kernel binary</td><td>cache (hit|miss \(compiled now\))</td>", html)


def test_report_shows_the_epilogue_fusions(tmp_path):
    """braze-epilogue-fusion's decisions are fusion decisions: counted, its
    refusals listed with the others and drawn as refused edges, even from
    an op that reads the GEMM's product through others."""
    need_program("dot")
    compiled = braze.compile_mlir(BLOCK.read_text(), parameters=PreNormBlock().state_dict(),
                                  options={"report": str(tmp_path / "block.html")})
    html = compiled.stats["report"].read_text()
    decisions = html[html.index("<h2>Fusion decisions</h2>"):html.index("<h2>Kernels</h2>")]
    # Two GEMMs took an op each and one took two (its row statistic and the
    # residual add); the QKV projection has no epilogue.
    assert ("braze-epilogue-fusion made 3 fused GEMM(s) of 4 op(s) besides their products, left 1 GEMM(s) "
            "without an epilogue and refused 2 op(s).") in decisions
    rows = re.findall(r"<tr><td>braze-epilogue-fusion</td><td>([^<]+)</td><td>([^<]+)</td><td>([^<]+)</td>"
                      r"<td>[^<]+</td><td>([^<]+)</td></tr>", decisions)
    assert rows == [("&lt;string&gt;:29:11", "-", "braze.addmm", "-"),
                    ("&lt;string&gt;:49:11", "braze.sub", "braze.addmm", "yes"),
                    ("&lt;string&gt;:67:11", "braze.add", "braze.addmm", "yes")]
    assert "<h3>braze-epilogue-fusion</h3>" not in html  # not under Other decisions
    # Both refused ops read the product through the residual add: the edges
    # carry no value. After fusion the add at 67 is in another GEMM's
    # epilogue, so only the sub's edge is left (from the fused GEMM).
    refused = r'class="edge refused">\s*<title>[^<]*</title>\s*<g [^>]*><a xlink:title="not fused: it needs a row'
    assert len(re.findall(refused, section(html, "before-fusion"))) == 2
    assert len(re.findall(refused, section(html, "after-fusion"))) == 1


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
    need_program("dot")
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


@pytest.fixture(scope="module")
def collective_step(tmp_path_factory):
    """COLLECTIVE_STEP compiled once with its report (no communicator is
    needed to compile: a program finds its groups' at its first call)."""
    need_program("dot")
    page = tmp_path_factory.mktemp("collective") / "step.html"
    compiled = braze.compile_mlir(COLLECTIVE_STEP, options={"report": str(page)})
    return compiled, page.read_text()


def test_report_draws_combos_regions_externs_and_collectives(collective_step):
    compiled, html = collective_step
    emitted = emit(compiled.module, "cpu")["step"]
    after = section(html, "after-fusion")
    # Each combo is a box around its sub-kernels' boxes, each with its schedule.
    assert len(emitted.launches) == 1
    (launch, members), = emitted.launches.items()
    assert len(members) == 3
    assert re.findall(r'<g id="combo&#45;(\w+)" class="cluster combo">', after) == [launch]
    dispatch = compiled.module.mlir_module.body.operations[0].regions[0].blocks[0].operations
    (dispatch,) = [op.attributes["dispatch"].value for op in dispatch if op.operation.name == "braze.combo"]
    assert f">combo {launch}</text>" in after and f">dispatch {dispatch}</text>" in after
    assert sorted(re.findall(r'<g id="kernel&#45;(\w+)" class="cluster kernel">', after)) == sorted(emitted.kernels)
    assert len(re.findall(r">block \d+ · (?:rblock \d+ · )?cost \d+</text>", after)) == 3
    # The switch is a box with a box per branch; the extern call and the
    # collectives are nodes of their own kinds.
    assert len(re.findall(r'class="cluster switch"', after)) == 1
    assert re.findall(r'class="cluster region">.*?<text[^>]*>([^<]+)</text>', after, re.S) == ["branch 0", "branch 1"]
    assert len(re.findall(r'class="node op extern"', after)) == 1 and ">extern aten.cumsum.default</text>" in after
    assert len(re.findall(r'class="node op collective"', after)) == 2
    assert ">group tp</text>" in after
    # The kernels table gives each sub-kernel its launch.
    for member in members:
        assert re.search(rf"{member}</a></td><td>{launch}</td>", html)


def test_report_shows_the_decisions_of_every_pass(collective_step):
    compiled, html = collective_step
    emitted = emit(compiled.module, "cpu")["step"]
    (launch, members), = emitted.launches.items()
    combos = html[html.index("<h2>Combo decisions</h2>"):html.index("<h2>Collective schedule</h2>")]
    assert "braze-combo-kernels made 1 combo(s) of 3 kernels." in combos
    for number, member in enumerate(members):
        assert re.search(rf"<td>{member}</td><td>{launch}</td><td>grouped as sub-kernel #{number} of a combo of 3 "
                         rf"kernels \(dispatch \w+\)", combos), member
    # The pass numbers kernels (a group by its first); the report names them.
    assert re.search(rf"not grouped with {members[0]}: a data path leads from {members[2]} to it", combos)
    assert not re.search(r"(?<!sub-)kernel #\d", combos)
    others = html[html.index("<h2>Other decisions</h2>"):html.index("<h2>Kernels</h2>")]
    assert "<h3>braze-overlap</h3>" in others and "<h3>braze-plan-memory</h3>" in others
    assert "moved down past 4 op(s); stopped by &#x27;braze.extern&#x27;, an op with effects" in others


def test_collective_timeline_before_and_after_overlap(collective_step):
    _, html = collective_step
    schedule = html[html.index("<h2>Collective schedule</h2>"):html.index("<h2>Other decisions</h2>")]
    waits = {}
    for anchor in ("timeline-before", "timeline-after"):
        svg = schedule[schedule.index(f'<svg id="{anchor}"'):]
        svg = svg[:svg.index("</svg>")]
        assert svg.count('class="lane"') == 2 and ">group tp</text>" in svg  # compute, and the group's lane
        assert svg.count('class="span collective"') == 1 and svg.count('class="span library"') == 1
        waits[anchor] = sum(float(width) for width in re.findall(r'class="span wait"[^>]*width="([\d.]+)"', svg))
    # After the pass the three kernels run while the all_reduce is in flight.
    before, after = (float(text.replace(",", "")) for text in
                     re.findall(r"compute waiting ([\d,.]+) µs</h3>", schedule))
    assert before > after > 0 and waits["timeline-before"] > waits["timeline-after"]
    assert "100 GB/s memory, 1 TFLOP/s, links of 12.5 GB/s and 10 µs" in schedule


def test_collective_timeline_without_overlap(tmp_path):
    html = braze.compile_mlir(COLLECTIVE_STEP, options={"report": str(tmp_path / "r.html"), "overlap": False}) \
        .stats["report"].read_text()
    assert "braze-overlap did not run: the order as compiled." in html
    assert re.findall(r'<svg id="(timeline-\w+)"', html) == ["timeline-compiled"]
    assert "<h3>braze-overlap</h3>" not in html
    # No collectives, no schedule.
    plain = braze.compile_mlir(SOFTMAX, options={"report": str(tmp_path / "s.html")}).stats["report"].read_text()
    assert "<h2>Collective schedule</h2>" not in plain and "<svg id=\"timeline" not in plain


def test_timeline_model_from_ir():
    """The timeline's arithmetic on a known machine (1 MB/s, 1 Mflop/s, a
    1 MB/s link with 1 ms latency): a matmul, then an all_reduce over 4
    ranks, waited for after a kernel."""
    text = """
    func.func @f(%a: tensor<2x4xf32>, %b: tensor<4x4xf32>, %x: tensor<16xf32>) -> (tensor<2x4xf32>, tensor<16xf32>) {
      %m = braze.matmul %a, %b : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
      %w = braze.all_reduce_start %x "sum" group "g" ranks [0, 1, 2, 3] : tensor<16xf32> -> !braze.work<tensor<16xf32>>
      %k = braze.neg %m : tensor<2x4xf32>
      %r = braze.wait %w : !braze.work<tensor<16xf32>>
      return %k, %r : tensor<2x4xf32>, tensor<16xf32>
    }
    """
    module = braze.parse(text)
    braze.run_pipeline(module, "func.func(braze-lower-kernels)")
    func = module.mlir_module.body.operations[0]
    machine = Machine(memory_bandwidth=1e6, peak_flops=1e6, link_bandwidth=1e6, link_latency=1e-3)
    plan = timeline.schedule(func, "t", machine, {})
    spans = [(s.lane, s.kind, s.name, round(s.start * 1e6, 3), round(s.end * 1e6, 3)) for s in plan.spans]
    # matmul: 8 + 16 + 8 floats (128 bytes), 2 x 8 x 4 = 64 flops: 128 µs;
    # the collective starts then: 1000 µs + 2 x 3/4 of its 64 bytes (96 µs);
    # the kernel: 32 + 32 bytes, 8 flops: 64 µs; the wait holds the compute
    # lane until the collective ends.
    assert spans == [("compute", "library", "matmul", 0.0, 128.0),
                     ("group g", "collective", "all_reduce", 128.0, 1224.0),
                     ("compute", "kernel", "kernel", 128.0, 192.0),
                     ("compute", "wait", "wait: all_reduce", 192.0, 1224.0)]
    assert plan.seconds == pytest.approx(1224e-6) and plan.waiting == pytest.approx(1032e-6)
    assert plan.lanes == ["compute", "group g"]


def test_timeline_costs_a_switch_as_its_costliest_branch():
    module = braze.parse(SWITCH)
    braze.run_pipeline(module, "func.func(braze-lower-kernels)")
    machine = Machine(memory_bandwidth=1e6, peak_flops=1e6)
    (span,) = timeline.schedule(module.mlir_module.body.operations[0], "t", machine, {}).spans
    # The negation's 32 + 32 bytes at 1 MB/s; the empty branch and the yields cost nothing.
    assert (span.kind, span.name, span.end * 1e6) == ("control", "switch", pytest.approx(64.0))


def test_report_machine_option(tmp_path):
    html = braze.compile_mlir(COLLECTIVE_STEP, options={
        "report": str(tmp_path / "r.html"), "report_machine": {"link_bandwidth": 1e9, "link_latency": 2e-6}}
    ).stats["report"].read_text()
    assert "links of 1 GB/s and 2 µs" in html
    with pytest.raises(BrazeError, match=r"report_machine has no field\(s\) 'flops' \(fields: memory_bandwidth, "
                                         r"peak_flops, link_bandwidth, link_latency\)"):
        braze.compile_mlir(SOFTMAX, options={"report_machine": {"flops": 1}})
    with pytest.raises(BrazeError, match=r"report_machine\['peak_flops'\] must be a positive number, got 0"):
        braze.compile_mlir(SOFTMAX, options={"report_machine": {"peak_flops": 0}})


def test_collective_step_report_renders_in_chromium(tmp_path, collective_step):
    """The page with combos, regions and the collective timeline renders
    without a console message; the DOM holds the combo box and both
    timelines (screenshot kept as for the transformer block)."""
    browser = need_program("chromium", "chromium-browser", "google-chrome")
    compiled, html = collective_step
    page = tmp_path / "collective_step.html"
    page.write_text(html)
    dom = rendered(browser, page, tmp_path / "collective_step.png")
    (launch, _), = emit(compiled.module, "cpu")["step"].launches.items()
    assert f'<g id="combo-{launch}" class="cluster combo">' in dom
    for anchor in ("timeline-before", "timeline-after"):
        assert re.search(rf'<svg id="{anchor}" class="timeline".*?<rect class="span collective"', dom, re.S)


FUSED_GEMM = """
func.func @f(%x: tensor<8x64xf32>, %w: tensor<32x64xf32>, %bias: tensor<32xf32>) -> tensor<8x32xf32> {
  %y = braze.fused_gemm %x, %w extras(%bias : tensor<32xf32>) indexing ["n"] transpose_rhs accumulator f32
      : (tensor<8x64xf32>, tensor<32x64xf32>) -> tensor<8x32xf32> {
  ^bb0(%acc: f32, %b: f32):
    %s = arith.addf %acc, %b : f32
    braze.gemm_yield %s : f32
  }
  %r = braze.relu %y : tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}
"""


def test_graph_draws_a_fused_gemm_as_a_box():
    """A fused GEMM drawn from IR is a box around its product and epilogue,
    fed by its operands, feeding its user."""
    drawn = graph.function_graph(FUSED_GEMM, "f")
    (box,) = drawn.boxes
    assert box.kind == "fused-gemm" and box.label == "fused_gemm"
    inside = {node.op: node for node in drawn.nodes.values() if node.box == 0}
    assert set(inside) == {"braze.fused_gemm", "arith.addf"} and inside["braze.fused_gemm"].kind == "head"
    edges = {(drawn.nodes[e.source].op, drawn.nodes[e.target].op) for e in drawn.edges}
    assert edges == {("input", "braze.fused_gemm"), ("braze.fused_gemm", "arith.addf"), ("input", "arith.addf"),
                     ("arith.addf", "braze.relu"), ("braze.relu", "output")}
    assert 'class="fused-gemm"' in graph.to_dot(drawn, "t")


def test_report_names_a_fused_gemm_as_its_kernel(tmp_path):
    """A compiled fused GEMM's box is labelled with the kernel name its
    source, the timeline and traces use (not an empty kernel box beside an
    unnamed one)."""
    need_program("dot")
    compiled = braze.compile_mlir(FUSED_GEMM, options={"report": str(tmp_path / "r.html")})
    html = compiled.stats["report"].read_text()
    names = list(emit(compiled.module, "cpu")["f"].kernels)
    boxes = re.findall(r'<g id="kernel&#45;(\w+)" class="cluster ([\w&#;]+)">', section(html, "after-fusion"))
    assert boxes == [(names[0], "fused&#45;gemm"), (names[1], "kernel")]
    assert f">{names[0]}</text>" in section(html, "after-fusion")
    assert "empty_" not in html
    x, w, bias = torch.randn(8, 64), torch.randn(32, 64), torch.randn(32)
    with braze.profile() as tracer:
        compiled(x, w, bias)
    traced = [e["name"] for e in tracer.trace()["traceEvents"] if e.get("cat") == "kernel"]
    assert traced == names


def test_timeline_names_a_fused_gemm_as_its_kernel():
    module = braze.parse(FUSED_GEMM)
    braze.run_pipeline(module, "func.func(braze-lower-kernels)")
    func = module.mlir_module.body.operations[0]
    ops = func.regions[0].blocks[0].operations
    names = {str(ops[0].operation.location): ["gemm_kernel"], str(ops[1].operation.location): ["relu_kernel"]}
    spans = timeline.schedule(func, "t", Machine(), names).spans
    assert [(s.kind, s.name) for s in spans] == [("library", "gemm_kernel"), ("kernel", "relu_kernel")]


def test_graph_boxes_a_region_op_it_does_not_know(monkeypatch):
    """An op with regions and no BOX_KINDS entry still gets a box (its name
    as the kind) with a box per region, so a new grouping op shows up."""
    monkeypatch.delitem(graph.BOX_KINDS, "braze.switch")
    drawn = graph.function_graph(COLLECTIVE_STEP, "step")
    switch = next(number for number, box in enumerate(drawn.boxes) if box.kind == "switch")
    regions = [box.label for box in drawn.boxes if box.parent == switch]
    assert regions == ["region 0", "region 1"]
    head = next(node for node in drawn.nodes.values() if node.op == "braze.switch")
    assert head.kind == "head" and head.box == switch
    # The head reads the index and each branch's yield, and feeds the result's user.
    assert {drawn.nodes[e.source].op for e in drawn.edges if e.target == head.id} == {"input", "braze.tanh",
                                                                                       "braze.add"}
    assert [drawn.nodes[e.target].op for e in drawn.edges if e.source == head.id] == ["output"]
