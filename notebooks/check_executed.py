#!/usr/bin/env python3
"""Check notebooks, for .ci/run.

    check_executed.py EXECUTED.ipynb ...        executed notebooks (jupyter nbconvert --execute)
    check_executed.py --clean NOTEBOOK.ipynb ... the committed notebooks

Executed: fails unless every notebook has every code cell executed, at least one image/png
output (a figure drawn inline) and no error output. --clean: fails unless every notebook is
valid nbformat 4 with no outputs and no execution counts (outputs are never committed).
Prints one line per notebook; exit status 1 on any failure, 2 on bad usage.
"""

import json
import sys
from pathlib import Path


def problems_executed(nb: dict) -> list[str]:
    out = []
    pngs = 0
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        if cell.get("execution_count") is None:
            out.append(f"cell {i} was not executed")
        for o in cell.get("outputs", []):
            kind = o.get("output_type")
            if kind == "error":
                out.append(f"cell {i}: {o.get('ename')}: {o.get('evalue')}")
            elif kind in ("display_data", "execute_result") and "image/png" in o.get("data", {}):
                pngs += 1
    if pngs == 0:
        out.append("no image/png output (no figure drawn)")
    return out


def problems_clean(nb: dict) -> list[str]:
    out = []
    if nb.get("nbformat") != 4:
        out.append(f"nbformat {nb.get('nbformat')}, not 4")
    cells = nb.get("cells", [])
    if not cells or cells[0].get("cell_type") != "markdown":
        out.append("does not start with a markdown cell")
    for i, cell in enumerate(cells):
        if cell.get("cell_type") != "code":
            continue
        if cell.get("outputs"):
            out.append(f"cell {i} has outputs committed")
        if cell.get("execution_count") is not None:
            out.append(f"cell {i} has an execution count committed")
    return out


def main(argv: list[str]) -> int:
    clean = argv[:1] == ["--clean"]
    files = argv[1:] if clean else argv
    if not files or any(f.startswith("-") for f in files):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    failed = 0
    for f in files:
        path = Path(f)
        try:
            nb = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            problems = [f"unreadable: {e}"]
        else:
            problems = problems_clean(nb) if clean else problems_executed(nb)
        if problems:
            failed += 1
            print(f"FAIL {path}: " + "; ".join(problems))
        elif clean:
            print(f"ok   {path}: clean")
        else:
            pngs = sum(
                1
                for c in nb["cells"]
                for o in c.get("outputs", [])
                if "image/png" in o.get("data", {})
            )
            print(f"ok   {path}: executed, {pngs} figures, no errors")
    what = "clean" if clean else "executed, with figures and no errors"
    if failed:
        print(f"check_executed: {failed} of {len(files)} notebooks are not {what}")
        return 1
    print(f"check_executed: all {len(files)} notebooks {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
