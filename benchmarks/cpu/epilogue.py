#!/usr/bin/env python3
"""GEMMs and attention on the CPU (issue 12): braze fused vs braze unfused
vs eager vs Inductor, in one run, on GEMM-bound models
(benchmarks/cpu/models.py: linear_gelu, linear_residual_layernorm,
bert_layer, decode_mlp, mlp, handwritten_decoder, and a LLaMA-style
layer with grouped-query attention at prefill and decode shapes:
llama_prefill, llama_decode, and both in bfloat16), the zoo's ViT
(braze.testing.zoo, bench size), attention alone (the attention_*
models: SDPA with masks, causal, bf16, a grouped-query decode step) and
quantised GEMMs (int8_linear*: an int8-weight linear layer, f32 or bf16
activations, 128 rows or a decode row; scaled_mm*: torch._scaled_mm of
e4m3 operands with row-wise scales).

*braze unfused* for the quantised GEMMs: the int8 weight dequantised by a
kernel, then the library's product; torch._scaled_mm itself.

*braze unfused* is braze with the model's fusion off: epilogue_fusion for
the GEMM models; for attention, the library's attention (flash_attention
off: PyTorch's fused CPU kernel, what Inductor calls) for the attention_*
models, and the spelled-out products and softmax (form_attention off) for
the models that spell attention out (bert_layer, handwritten_decoder).

    .venv/bin/python benchmarks/cpu/epilogue.py [--models ...] [--rounds 7] [--threads 1]

At 1 thread (torch.set_num_threads and OMP_NUM_THREADS for the generated
code), each round calls every engine `--calls` times in turn, timing thread
CPU time per call (`time.thread_time()`; robust to other processes'
load, which is reported); the median over rounds is kept. Outputs are
checked against eager (max |out - eager| / max |eager|).

decode_mlp also reports the GEMVs' bandwidth: the bytes of its two weights
over braze's time per call, against this machine's read bandwidth measured
in the same run (the faster of torch.sum and torch.mv over a float32
tensor of the weights' size, the same thread count, best of the rounds); attention_decode_gqa the same for
its keys and values, the quantised decode models for their weight as
stored (int8 or fp8), llama_decode for its seven weights and the past
keys and values.

Writes benchmarks/cpu/epilogue.json and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

MODELS = ["linear_gelu", "linear_residual_layernorm", "bert_layer", "decode_mlp", "mlp", "vit", "handwritten_decoder",
          "llama_prefill", "llama_decode", "llama_prefill_bf16", "llama_decode_bf16",
          "attention_additive", "attention_additive_bf16", "attention_boolean", "attention_boolean_bf16",
          "attention_causal_long", "attention_decode_gqa", "int8_linear", "int8_linear_bf16", "int8_linear_decode",
          "int8_linear_decode_bf16", "scaled_mm", "scaled_mm_decode"]
# The options of "braze unfused" per model (see the docstring).
UNFUSED = {"bert_layer": {"epilogue_fusion": False, "form_attention": False},
           "handwritten_decoder": {"epilogue_fusion": False, "form_attention": False}}
UNFUSED.update({name: {"flash_attention": False} for name in MODELS if name.startswith("attention_")})
UNFUSED.update({name: {"epilogue_fusion": False, "flash_attention": False} for name in MODELS
                if name.startswith("llama_")})
ENGINES = ["eager", "inductor", "braze unfused", "braze fused"]


def build(name):
    import models

    if name != "vit":
        return models.build(name)
    from braze.testing import zoo

    zoo.import_libraries()
    entry = next(e for e in zoo.ZOO if e.name.startswith("vit"))
    model, args, kwargs = entry.make(zoo.BENCH)
    assert not kwargs
    return model, args


def engines(name, model, args, torch, braze):
    import torch._dynamo

    torch._dynamo.reset()
    made = {"eager": model}
    made["inductor"] = torch.compile(model)
    made["braze unfused"] = braze.compile(model, args, options=UNFUSED.get(name, {"epilogue_fusion": False}))
    made["braze fused"] = braze.compile(model, args)
    return made


def fused_ops(stats: dict) -> str:
    return f"{stats.get('fused_gemms', '?')}, {stats.get('flash_attentions', '?')}"


def read_bandwidth(torch, nbytes: int, rounds: int) -> float:
    """Bytes per second of the faster read of a float32 tensor of `nbytes`:
    torch.sum, or torch.mv of it as [rows, 4096] (MKL's GEMV, which read
    1.1-1.3x faster than torch.sum at 1 thread: benchmarks/cpu/gemv.py)."""
    x = torch.randn(max(1, nbytes // 4 // 4096), 4096)
    ones = torch.ones(4096)
    reads = [x.sum, lambda: torch.mv(x, ones)]
    best = float("inf")
    for _ in range(rounds):
        for read in reads:
            read()
            started = time.thread_time()
            for _ in range(5):
                read()
            best = min(best, (time.thread_time() - started) / 5)
    return x.numel() * 4 / best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default=os.path.join(HERE, "epilogue.json"))
    args = parser.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-epilogue-"))
    import torch

    import braze
    from machine import CpuLoad, cpu_info

    torch.set_num_threads(args.threads)
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    rows = []
    for name in args.models.split(","):
        model, inputs = build(name)
        with torch.no_grad():
            made = engines(name, model, inputs, torch, braze)
            expected = model(*inputs)
            errors, stats = {}, {}
            for engine, call in made.items():
                out = call(*inputs)
                out = out[0] if isinstance(out, (tuple, list)) else out
                if hasattr(out, "last_hidden_state"):
                    out = out.last_hidden_state
                reference = expected[0] if isinstance(expected, (tuple, list)) else expected
                reference = getattr(reference, "last_hidden_state", reference)
                errors[engine] = ((out - reference).abs().max() / reference.abs().max()).item()
                if hasattr(call, "stats"):
                    stats[engine] = {k: call.stats[k] for k in ("kernels", "gemms", "fused_gemms", "attentions",
                                                                 "flash_attentions")}
            load = CpuLoad()
            samples = {engine: [] for engine in made}
            for _ in range(args.rounds):
                for engine, call in made.items():
                    call(*inputs)
                    started = clock()
                    for _ in range(args.calls):
                        call(*inputs)
                    samples[engine].append((clock() - started) / args.calls)
            times = {engine: statistics.median(v) for engine, v in samples.items()}
            best = {engine: min(v) for engine, v in samples.items()}
        row = {"model": name, "times_s": times, "best_s": best, "rel_err": errors, "stats": stats,
               "load": load.result()}
        if name in ("decode_mlp", "attention_decode_gqa", "int8_linear_decode", "int8_linear_decode_bf16",
                    "scaled_mm_decode", "llama_decode", "llama_decode_bf16"):
            if name == "decode_mlp":
                weight_bytes = sum(p.numel() * p.element_size() for n, p in model.named_parameters()
                                   if "fc" in n and n.endswith("weight"))
            elif name.startswith("llama_decode"):
                weight_bytes = sum(m.weight.numel() * m.weight.element_size() for m in model.modules()
                                   if isinstance(m, torch.nn.Linear))
                weight_bytes += sum(t.numel() * t.element_size() for t in inputs[1:])
            elif name == "attention_decode_gqa":
                weight_bytes = sum(t.numel() * t.element_size() for t in inputs[1:3])
            else:  # the quantised weight, as stored
                weight_bytes = model.weight.numel() * model.weight.element_size()
            bandwidth = read_bandwidth(torch, weight_bytes, args.rounds)
            row["weight_bytes"] = weight_bytes
            row["read_bandwidth_GBs"] = bandwidth / 1e9
            row["gemv_bandwidth_GBs"] = weight_bytes / best["braze fused"] / 1e9
        rows.append(row)
        eager = times["eager"]
        print(f"{name} ({row['load'].get('other_cpu_pct', '?')}% other load): "
              + "  ".join(f"{e} {t * 1e3:.2f} ms ({eager / t:.2f}x eager, err {errors[e]:.1e})"
                          for e, t in times.items()), flush=True)
        if "read_bandwidth_GBs" in row:
            print(f"  {row['weight_bytes'] / 1e6:.1f} MB read per call: braze fused {row['gemv_bandwidth_GBs']:.1f} GB/s, "
                  f"read bandwidth {row['read_bandwidth_GBs']:.1f} GB/s "
                  f"({row['gemv_bandwidth_GBs'] / row['read_bandwidth_GBs']:.0%})", flush=True)
    result = {"command": "python benchmarks/cpu/epilogue.py " + " ".join(sys.argv[1:] if argv is None else argv),
              **cpu_info(), "torch": torch.__version__, "threads": args.threads, "loadavg": list(os.getloadavg()),
              "rows": rows}
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    print()
    print("| model | eager ms | Inductor | braze unfused | braze fused | fused / unfused | fused / eager "
          "| fused / Inductor | braze fused GEMMs, flash attentions | other load |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        t = row["times_s"]
        print(f"| {row['model']} | {t['eager'] * 1e3:.2f} | {t['inductor'] * 1e3:.2f} | {t['braze unfused'] * 1e3:.2f} "
              f"| {t['braze fused'] * 1e3:.2f} | {t['braze unfused'] / t['braze fused']:.2f}x "
              f"| {t['eager'] / t['braze fused']:.2f}x | {t['inductor'] / t['braze fused']:.2f}x "
              f"| {fused_ops(row['stats'].get('braze fused', {}))} "
              f"| {row['load'].get('other_cpu_pct', '?')}% |")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
