"""braze.export's decomposition step: the cached list of composite ops must
follow the dispatcher, so a composite op registered between two exports is
still decomposed in the second; torch's patch of those ops, replayed, must
decompose as torch's own and leave torch as it does."""

import torch

import braze
from braze.frontend import decompositions


def test_composite_op_registered_after_an_export_is_decomposed():
    braze.export(lambda x: torch.nn.functional.gelu(x) * 2, (torch.randn(3, 4),))
    cached = dict(decompositions._cia_cache)
    assert cached, "the first export fills the cache"

    library = torch.library.Library("braze_test_late", "DEF")
    library.define("double_plus_one(Tensor x) -> Tensor")
    library.impl("double_plus_one", lambda x: x * 2 + 1, "CompositeImplicitAutograd")
    try:
        x = torch.randn(5, 6)
        program = braze.export(lambda x: torch.ops.braze_test_late.double_plus_one(x).exp(), (x,))
        assert decompositions._cia_cache.keys() != cached.keys(), "a new registration changes the key"
        torch.testing.assert_close(program(x), (x * 2 + 1).exp())
    finally:
        library._destroy()


def test_export_leaves_torch_unpatched():
    import torch.export.exported_program as exported_program
    from torch._export import utils

    override = exported_program._override_composite_implicit_decomp
    for _ in range(2):  # torch's patch, then its replay
        braze.export(lambda x: x.sin(), (torch.randn(2),))
        assert exported_program._collect_all_valid_cia_ops is utils._collect_all_valid_cia_ops
        assert exported_program._override_composite_implicit_decomp is override


def _models():
    """Graphs whose decomposition goes through composite ops: a 3-d by 2-d
    matmul (ViT's, which torch's own patch decomposes to expand and bmm),
    linear, GELU, layer norm, dropout; attention, which braze keeps whole
    (the patch gives it a fake-tensor rule)."""
    layer = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                                torch.nn.Dropout(0.1)).eval()
    weight = torch.randn(16, 4)
    return [(lambda x: layer(x) @ weight, (torch.randn(2, 3, 8),)),
            (lambda x: torch.nn.functional.silu(x).matmul(x.transpose(-1, -2)).softmax(-1), (torch.randn(2, 5, 6),)),
            (lambda q, k: torch.nn.functional.scaled_dot_product_attention(q, k, k, is_causal=True),
             (torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)))]


def _kernels() -> dict:
    """Every composite op's Python kernels."""
    return {op: dict(op.py_kernels) for op in torch._export.utils._collect_all_valid_cia_ops()}


def _unpatched(kernels: dict) -> bool:
    """Whether every op of UNPATCHED has the Python kernels it had there."""
    return all(kernels[op].keys() == before.keys() and all(kernels[op][k] is v for k, v in before.items())
               for op, before in UNPATCHED.items())


def _states_while_tracing(monkeypatch, model, inputs) -> list:
    """Which keys of UNPATCHED's ops have Python kernels, and which ops have
    fake-tensor rules, each time braze.export traces the model (once to
    capture, once to decompose)."""
    import torch.export._trace as trace
    from torch._subclasses import fake_impls

    states, original = [], trace._export_to_aten_ir

    def traced(*args, **kwargs):
        states.append(({op: frozenset(op.py_kernels) for op in UNPATCHED},
                       frozenset(fake_impls.op_implementations_dict)))
        return original(*args, **kwargs)

    monkeypatch.setattr(trace, "_export_to_aten_ir", traced)
    try:
        braze.export(model, inputs)
    finally:
        monkeypatch.setattr(trace, "_export_to_aten_ir", original)
    return states


# Before any test of this process exports (more ops may be registered later).
UNPATCHED = _kernels()


def test_replayed_patch_decomposes_as_torch_and_restores_its_state(monkeypatch):
    import torch.export.exported_program as exported_program
    from torch._subclasses import fake_impls

    patches = []
    original = exported_program._override_composite_implicit_decomp

    def counted(cia_to_decomp):
        patches.append(len(cia_to_decomp))
        return original(cia_to_decomp)

    monkeypatch.setattr(exported_program, "_override_composite_implicit_decomp", counted)
    decompositions._recorded.clear()
    replayed = []
    for model, inputs in _models():
        program = braze.export(model, inputs)
        replayed.append(str(program.module))
        torch.testing.assert_close(program(*inputs), model(*inputs))
    assert len(patches) == 1, "the later exports replay the first one's patch"
    assert _unpatched(_kernels()), "a replay unpatches the kernels"
    fake_rules = dict(fake_impls.op_implementations_dict)
    for (model, inputs), text in zip(_models(), replayed):
        decompositions._recorded.clear()  # torch's own patch each time
        assert str(braze.export(model, inputs).module) == text
    assert len(patches) == 1 + len(replayed)
    assert _unpatched(_kernels())
    assert fake_impls.op_implementations_dict == fake_rules, "torch leaves the fake-tensor rules as a replay does"
    decompositions._recorded.clear()
    patched_by_torch = _states_while_tracing(monkeypatch, *_models()[0])
    assert _states_while_tracing(monkeypatch, *_models()[0]) == patched_by_torch, "a replay patches as torch"
    assert len(patches) == 2 + len(replayed)


def test_an_op_changed_between_exports_is_patched_by_torch_again(monkeypatch):
    import torch.export.exported_program as exported_program

    patches = []
    original = exported_program._override_composite_implicit_decomp
    monkeypatch.setattr(exported_program, "_override_composite_implicit_decomp",
                        lambda table: patches.append(1) or original(table))
    decompositions._recorded.clear()
    model, inputs = _models()[0]
    braze.export(model, inputs)
    braze.export(model, inputs)
    # A kernel for a key export never dispatches to: the decomposition is
    # the same, but the op's kernels are not those recorded.
    op, key = torch.ops.aten.linear.default, torch._C.DispatchKey.AutocastCPU
    assert key not in op.py_kernels
    op.py_kernels[key] = lambda *args, **kwargs: op.decompose(*args, **kwargs)
    op._dispatch_cache.clear()
    try:
        braze.export(model, inputs)
    finally:
        del op.py_kernels[key]
        op._dispatch_cache.clear()
    assert len(patches) == 2, "an op whose kernels changed is patched by torch again"
