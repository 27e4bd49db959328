"""`braze-translate --target=T in.mlir [-o DIR]`: prints the kernels of a
module as target T's source, or writes one file per function to DIR with the
target's extension (.cpp, .cu, .hip, .cl, .metal).

The input is captured IR (the target's pipeline runs first, with the
target's compile options and any `--option KEY=VALUE` given) or IR already
in the kernel form. `-` reads standard input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _option(given: str):
    """("key", value) of a `--option KEY=VALUE`."""
    from braze.errors import BrazeError

    key, equals, text = given.partition("=")
    if not equals or not key:
        raise BrazeError(f"--option {given!r}: expected KEY=VALUE")
    if text.lower() in ("true", "false"):
        return key, text.lower() == "true"
    try:
        return key, int(text)
    except ValueError:
        return key, text


def main(argv=None) -> int:
    from braze.codegen import LANGUAGES, emit_kernels, function_operations
    from braze.errors import BrazeError
    from braze.ir import parse
    from braze.passes import run_pipeline
    from braze.target import get

    parser = argparse.ArgumentParser(prog="braze-translate", description=__doc__.splitlines()[0])
    parser.add_argument("input", help="an .mlir file, or - for standard input")
    parser.add_argument("--target", required=True, choices=LANGUAGES)
    parser.add_argument("-o", "--output", type=Path, help="a directory: one file per function")
    parser.add_argument("--threads", type=int, default=None, help="threads per block on GPU targets")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="a compile option for the pipeline (true/false, an int, or text), e.g. "
                             "--option flash_attention=true; repeatable")
    args = parser.parse_args(argv)
    try:
        text = sys.stdin.read() if args.input == "-" else Path(args.input).read_text()
        module = parse(text, source_name=args.input)
        if "braze.kernel" not in text:
            target = get(args.target)
            options = dict(_option(given) for given in args.option)
            if args.threads:
                options["threads"] = args.threads
            run_pipeline(module, target.pipeline(target.options(options)))
        outputs = []
        for func in module.mlir_module.body.operations:
            if func.operation.name != "func.func":
                continue
            name = func.attributes["sym_name"].value
            emitted = emit_kernels(function_operations(func), args.target, args.threads)
            outputs.append((name, emitted))
    except (BrazeError, OSError) as error:
        print(f"braze-translate: {error}", file=sys.stderr)
        return 1
    for name, emitted in outputs:
        if args.output:
            args.output.mkdir(parents=True, exist_ok=True)
            path = args.output / f"{name}{emitted.extension}"
            path.write_text(emitted.source)
            print(path)
        else:
            print(f"// ---- function @{name}: {len(emitted.kernels)} kernel(s), {args.target}")
            print(emitted.source)
    return 0


if __name__ == "__main__":
    sys.exit(main())
