#!/usr/bin/env python3
"""Token generation with a KV cache: eager PyTorch vs torch.compile
(Inductor) vs torch.compile(backend="braze"), per generated token.

    .venv/bin/python benchmarks/models/decode.py [--models gpt2,llama,qwen2]
        [--layers 6] [--vocab 32000] [--prompt 128] [--tokens 32] [--batch 1] [--dtype float32]
        [--rounds 5] [--threads 2] [--wait-quiet S] [--json PATH]

The causal language models of `braze.testing.zoo.DECODERS` (transformers
configs at the zoo's `bench` width: hidden 768, 12 heads; --layers layers,
a --vocab vocabulary; random weights, in --dtype), each generating with transformers'
own `DynamicCache`, as `model.generate` does: the prompt's forward pass,
then one token per call. Under torch.compile that is three graphs: the
prompt, the first step, and (when Dynamo recompiles at the next length)
one with the past length symbolic that serves every later step; the first
decode of each engine compiles them all and is reported as its warm-up.

Then --rounds rounds, each decoding the same prompt and tokens once per
engine in turn. Per engine: the median time of the steps from the third
on (the symbolic-length graph), over all rounds, and the prompt's median;
GB/s = the bytes of the weights a step reads over the step time (every
parameter but an input embedding table the LM head does not share, of which
a step reads one row per token). Logits are compared with eager's at every
call: max error relative to the largest logit.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "cpu"))

from machine import machine_info, wait_quiet  # noqa: E402  (benchmarks/cpu/machine.py)

ENGINES = ("eager", "inductor", "braze")


def forward_of(engine: str, model, torch):
    from braze.testing.zoo import causal_forward

    forward = causal_forward(model)
    if engine == "eager":
        return forward
    return torch.compile(forward, backend="braze" if engine == "braze" else "inductor")


def bench_decoder(decoder, args, torch) -> dict:
    from braze.testing.zoo import BENCH, decode

    size = dataclasses.replace(BENCH, batch=args.batch, sequence=args.prompt, layers=args.layers)
    model, prompt = decoder.make(size, vocab_size=args.vocab)
    model = model.to(getattr(torch, args.dtype))
    tokens = torch.randint(1, args.vocab, (args.batch, args.tokens))
    read = {p.data_ptr(): p.numel() * p.element_size() for p in model.parameters()}
    # A step reads one row of an input embedding the LM head does not share.
    embedding, head = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    if embedding.data_ptr() != head.data_ptr():
        del read[embedding.data_ptr()]
    row = {"model": decoder.name, "parameter_mb": sum(read.values()) / 1e6}
    forwards, reference = {}, None
    for engine in args.engines:
        torch._dynamo.reset()
        forwards[engine] = forward_of(engine, model, torch)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            started = time.perf_counter()
            logits = decode(forwards[engine], prompt, tokens)
            row[f"{engine}_warmup_s"] = time.perf_counter() - started
        fallbacks = sorted({str(w.message)[:300] for w in caught if str(w.message).startswith("braze")})
        if fallbacks:
            row[f"{engine}_warnings"] = fallbacks
        if reference is None:
            reference = logits
        else:
            row[f"{engine}_max_rel_err"] = max(
                ((got - want).abs().max() / want.abs().max()).item() for got, want in zip(logits, reference))
    steps = {engine: [] for engine in args.engines}
    prompts = {engine: [] for engine in args.engines}
    for _ in range(args.rounds):
        for engine in args.engines:
            seconds = []
            decode(forwards[engine], prompt, tokens, seconds)
            prompts[engine].append(seconds[0])
            steps[engine].extend(seconds[3:])
    for engine in args.engines:
        step = statistics.median(steps[engine])
        row[f"{engine}_step_ms"] = step * 1e3
        row[f"{engine}_prompt_ms"] = statistics.median(prompts[engine]) * 1e3
        row[f"{engine}_gb_s"] = row["parameter_mb"] / 1e3 / step
    return row


def markdown(rows: list[dict], engines) -> str:
    compiled = [e for e in engines if e != "eager"]
    head = (["model", "weights MB"] + [f"{e} ms/token" for e in engines] + [f"{e} GB/s" for e in engines]
            + [f"{e} / eager" for e in compiled])
    if "inductor" in engines and "braze" in engines:
        head.append("braze / Inductor")
    head += [f"{e} prompt ms" for e in engines] + [f"rel err {e}" for e in compiled]
    head += [f"warm-up s {e}" for e in compiled]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        cells = [r["model"], f"{r['parameter_mb']:.0f}"]
        cells += [f"{r[f'{e}_step_ms']:.2f}" for e in engines] + [f"{r[f'{e}_gb_s']:.1f}" for e in engines]
        cells += [f"{r['eager_step_ms'] / r[f'{e}_step_ms']:.2f}x" for e in compiled]
        if "inductor" in engines and "braze" in engines:
            cells.append(f"{r['inductor_step_ms'] / r['braze_step_ms']:.2f}x")
        cells += [f"{r[f'{e}_prompt_ms']:.1f}" for e in engines]
        cells += [f"{r[f'{e}_max_rel_err']:.0e}" for e in compiled]
        cells += [f"{r[f'{e}_warmup_s']:.1f}" for e in compiled]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="gpt2,llama,qwen2")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--wait-quiet", type=float, default=0.0)
    parser.add_argument("--json", default=os.path.join(HERE, "decode.json"))
    args = parser.parse_args(argv)
    args.engines = args.engines.split(",")
    if args.engines[0] != "eager":
        parser.error("--engines must start with eager (the reference)")
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch

    torch.set_num_threads(args.threads)
    from braze.testing.zoo import DECODERS, import_libraries

    import_libraries()
    by_name = {d.name: d for d in DECODERS}
    rows = []
    for name in args.models.split(","):
        if args.wait_quiet:
            wait_quiet(args.wait_quiet)
        rows.append(bench_decoder(by_name[name], args, torch))
        print(json.dumps(rows[-1]), flush=True)
        with open(args.json, "w") as f:
            json.dump({"machine": machine_info(torch), "arguments": vars(args), "rows": rows}, f, indent=1)
    print(markdown(rows, args.engines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
