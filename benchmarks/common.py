"""Helpers the benchmarks share: a measured run in a fresh interpreter, a command run in this
process, and spreads."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence


def child_run(module: str, args: Sequence[str], out_dir: Optional[str], cwd: str) -> Dict:
  """Runs ``python -m MODULE --child ARGS`` in ``cwd`` in a fresh interpreter (so no state
  carries over from the run before) and returns the JSON its last stdout line holds, plus
  ``wall`` (the process' wall time, start-up included); deletes ``out_dir`` afterwards (None:
  the child writes nothing); exits on failure."""
  t0 = time.perf_counter()
  proc = subprocess.run([sys.executable, "-m", module, "--child", *args],
                        cwd=cwd, capture_output=True, text=True, check=False)
  wall = time.perf_counter() - t0
  if out_dir is not None:
    shutil.rmtree(out_dir, ignore_errors=True)
  if proc.returncode:
    sys.stderr.write(proc.stderr[-4000:])
    raise SystemExit(f"the pipeline run failed ({proc.returncode})")
  result = json.loads(proc.stdout.strip().splitlines()[-1])
  result["wall"] = wall
  return result


class CommandFailed(RuntimeError):
  """A command that :func:`run_main` ran exited non-zero (the message names it and its log)."""


def run_main(cmd: List[str], log_path: str) -> List[str]:
  """Runs ``cmd`` (``["-m", module, *argv]``) in this process as ``python -m`` would (the
  module's ``main(argv)``), its stdout and stderr appended to ``log_path``; its stdout lines.
  Raises :class:`CommandFailed` on a non-zero exit."""
  assert cmd[0] == "-m", cmd
  module, argv = cmd[1], cmd[2:]
  out, err = io.StringIO(), io.StringIO()
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
      status = importlib.import_module(module).main(argv)
    except SystemExit as e:  # a usage error (argparse) or a command that exits
      if e.code is None or isinstance(e.code, int):
        status = e.code or 0
      else:  # sys.exit(message): Python prints the message and exits 1
        err.write(f"{e.code}\n")
        status = 1
  with open(log_path, "a", encoding="utf-8") as f:
    f.write(f"$ python {' '.join(cmd)}\n{out.getvalue()}\n{err.getvalue()}\n")
  if status:
    raise CommandFailed(f"`python {' '.join(cmd[:3])} ...` failed ({status}): "
                        f"{err.getvalue()[-3000:]}\nsee {log_path}")
  return out.getvalue().strip().splitlines()


def spread(values, fmt: str) -> str:
  """``min X  median Y  max Z``."""
  return (f"min {format(min(values), fmt)}  median {format(statistics.median(values), fmt)}  "
          f"max {format(max(values), fmt)}")


def check_pairs(parser, pairs: int, minimum: int) -> None:
  """``--pairs``: at least 1 (else a usage error); fewer than ``minimum`` is only a smoke test."""
  if pairs < 1:
    parser.error("--pairs must be >= 1")
  if pairs < minimum:
    print(f"warning: {pairs} pair(s) < {minimum}: a smoke test, not a figure to trust",
          file=sys.stderr)


def clean_up_inputs(tmp: str, keep: bool, tmp_given: bool, created: Sequence[str]) -> None:
  """End of a benchmark that generates inputs under ``tmp``: ``keep`` keeps everything; a
  temporary ``tmp`` of its own (``tmp_given`` False) is deleted; in a ``--tmp_dir`` the user
  gave, only the files this run ``created`` are."""
  if keep:
    print(f"kept {tmp}")
  elif not tmp_given:
    shutil.rmtree(tmp, ignore_errors=True)
  else:
    for path in created:
      if os.path.exists(path):
        os.remove(path)
