"""Batch inference at demo scale: read a file of inputs, score them in batches with a small
model, write one prediction per input.

The model is a word-weight sentiment classifier (its weights are below), so the example
needs nothing but ``python3``; swap ``load_model``/``predict`` for your own. An array job
splits the inputs: task ``QM_ARRAY_TASK_ID`` of ``QM_ARRAY_TASK_COUNT`` takes every
count-th line from its index and writes its own output file.

    qm submit --file examples/batch_infer.py --file examples/reviews.jsonl --gpus 1 \\
        --walltime 10m --wait -- python3 batch_infer.py --input reviews.jsonl --output predictions

Input: JSON lines with a ``text`` (and any ``id``). Output: ``OUTPUT/predictions-TASK.jsonl``
with ``id``, ``label`` (positive/negative) and ``score``; the job fails on an unreadable input.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

WEIGHTS = {
    "great": 2.0,
    "excellent": 2.5,
    "good": 1.2,
    "love": 2.0,
    "fast": 0.8,
    "reliable": 1.5,
    "clear": 0.8,
    "easy": 1.0,
    "works": 0.8,
    "bad": -1.5,
    "slow": -1.0,
    "broken": -2.0,
    "crash": -2.0,
    "crashes": -2.0,
    "confusing": -1.2,
    "hate": -2.0,
    "terrible": -2.5,
    "fails": -1.5,
    "not": -0.8,
    "never": -0.6,
}
WORD = re.compile(r"[a-z']+")


def load_model() -> dict[str, float]:
    return WEIGHTS


def predict(model: dict[str, float], texts: list[str]) -> list[tuple[str, float]]:
    """One batch: each text's probability of being positive, through a logistic."""
    scored = []
    for text in texts:
        logit = sum(model.get(word, 0.0) for word in WORD.findall(text.lower()))
        probability = 1 / (1 + math.exp(-logit))
        scored.append(("positive" if probability >= 0.5 else "negative", round(probability, 4)))
    return scored


def my_lines(path: Path, task: int, tasks: int) -> Iterator[tuple[int, dict[str, object]]]:
    with path.open(encoding="utf-8") as inputs:
        for number, line in enumerate(inputs, start=1):
            if (number - 1) % tasks != task or not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SystemExit(f"{path}:{number}: not JSON ({exc.msg})") from None
            if not isinstance(record, dict) or not isinstance(record.get("text"), str):
                raise SystemExit(f'{path}:{number}: needs a "text" string')
            yield number, record


def batches(items: Iterator[tuple[int, dict[str, object]]], size: int) -> Iterator[list[tuple[int, dict[str, object]]]]:
    batch: list[tuple[int, dict[str, object]]] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", type=Path, required=True, help="JSON lines with a text field")
    parser.add_argument("--output", type=Path, required=True, help="folder for the predictions")
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    task = int(os.environ.get("QM_ARRAY_TASK_ID", "0"))
    tasks = int(os.environ.get("QM_ARRAY_TASK_COUNT", "1"))
    args.output.mkdir(parents=True, exist_ok=True)
    target = args.output / f"predictions-{task}.jsonl"
    model = load_model()
    started, done, positive = time.monotonic(), 0, 0
    with target.open("w", encoding="utf-8") as out:
        for batch in batches(my_lines(args.input, task, tasks), args.batch_size):
            for (number, record), (label, score) in zip(
                batch, predict(model, [str(r["text"]) for _, r in batch]), strict=True
            ):
                out.write(json.dumps({"id": record.get("id", number), "label": label, "score": score}) + "\n")
                positive += label == "positive"
            done += len(batch)
    seconds = max(time.monotonic() - started, 1e-9)
    print(f"task {task} of {tasks}: {done} inputs -> {target} ({positive} positive), {done / seconds:.0f} inputs/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
