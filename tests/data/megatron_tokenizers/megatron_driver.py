"""Runs Megatron-LM's own ``tools/preprocess_data.py`` ``main()`` once per variant, in one
interpreter, so torch and megatron are imported once instead of once per variant (a minute each
on a busy 2-core machine). Each run is exactly the command line
``python tools/preprocess_data.py ARGS`` (``sys.argv`` set to it, run from the family folder).

    python megatron_driver.py MEGATRON_LM VARIANTS_TSV OUT_DIR

VARIANTS_TSV: lines ``NAME <TAB> FAMILY_DIR <TAB> ARGS`` (ARGS space-separated, no quoting).
Writes OUT_DIR/NAME/corpus_*; stdout/stderr of each run to OUT_DIR/NAME.log.
"""

import contextlib
import os
import sys


def main() -> None:
    megatron_lm, variants, out_dir = sys.argv[1:4]
    # imported by its own name (the worker pool pickles its Encoder by module name)
    sys.path[:0] = [megatron_lm, os.path.join(megatron_lm, "tools")]
    import preprocess_data as preprocess
    with open(variants, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    for name, family_dir, args in rows:
        os.makedirs(os.path.join(out_dir, name), exist_ok=True)
        argv = ["tools/preprocess_data.py", *args.split(),
                "--output-prefix", os.path.join(out_dir, name, "corpus"),
                "--json-keys", "text", "--workers", "1"]
        cwd = os.getcwd()
        os.chdir(family_dir)
        sys.argv = argv
        try:
            with open(os.path.join(out_dir, name + ".log"), "w") as log, \
                    contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                preprocess.main()
        finally:
            os.chdir(cwd)
        print(f"ran {name}", flush=True)


if __name__ == "__main__":
    main()
