"""Evaluation figures from a confusion matrix: pure numpy, no TensorFlow.

``confusion[t, p]`` counts the labelled pixels (segmentation) or the examples
(classification) of true class ``t`` predicted as ``p``. Pixels with the ignore
label are never counted. Shared by ``trainer.evaluate`` and the whole-image
validation that runs during training, so both report the same definitions.
"""

from typing import List, Optional, Sequence

import numpy as np


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, NaN where the denominator is 0."""
    numerator = numerator.astype(np.float64)
    denominator = denominator.astype(np.float64)
    out = np.full(numerator.shape, np.nan)
    np.divide(numerator, denominator, out=out, where=denominator > 0)
    return out


def _listed(values: np.ndarray) -> List[Optional[float]]:
    """Floats for JSON; NaN (undefined) becomes None."""
    return [None if np.isnan(v) else float(v) for v in values]


def per_class_iou(confusion: np.ndarray) -> np.ndarray:
    """IoU = TP / (TP + FP + FN) per class; NaN for a class neither labelled nor predicted."""
    confusion = np.asarray(confusion, dtype=np.int64)
    true_positive = np.diag(confusion)
    union = confusion.sum(axis=1) + confusion.sum(axis=0) - true_positive
    return _ratio(true_positive, union)


def segmentation_report(confusion: np.ndarray, class_names: Sequence[str]) -> dict:
    """The segmentation figures of a confusion matrix over labelled pixels.

    - ``mean_iou``: mean of the per-class IoU over the classes *present* (with labelled pixels); a class
      that is only predicted has IoU 0 in ``per_class`` but does not enter the mean.
    - ``pixel_accuracy``: correct pixels / labelled pixels.
    - ``frequency_weighted_iou``: sum over classes of (labelled share of the class) x IoU (Long et al. 2015).
    - ``mean_class_accuracy``: mean recall over the classes present.
    """
    confusion = np.asarray(confusion, dtype=np.int64)
    labelled = confusion.sum(axis=1)
    predicted = confusion.sum(axis=0)
    total = int(labelled.sum())
    iou = per_class_iou(confusion)
    recall = _ratio(np.diag(confusion), labelled)
    present = labelled > 0
    frequency = labelled / max(total, 1)
    return {
        "labelled_pixels": total,
        "pixel_accuracy": float(np.trace(confusion) / total) if total else None,
        "mean_iou": float(np.mean(iou[present])) if present.any() else None,
        "frequency_weighted_iou": float(np.sum(frequency[present] * iou[present])) if total else None,
        "mean_class_accuracy": float(np.mean(recall[present])) if present.any() else None,
        "classes_present": int(present.sum()),
        "per_class": [
            {"id": index, "name": name, "labelled_pixels": int(labelled[index]),
             "predicted_pixels": int(predicted[index]), "iou": _listed(iou[index:index + 1])[0],
             "recall": _listed(recall[index:index + 1])[0]}
            for index, name in enumerate(class_names)],
        "confusion_matrix": confusion.tolist(),
    }


def classification_report(confusion: np.ndarray, top5_correct: int, class_names: Sequence[str]) -> dict:
    """Accuracy, top-5 accuracy, per-class recall and the confusion matrix of a classifier."""
    confusion = np.asarray(confusion, dtype=np.int64)
    examples = confusion.sum(axis=1)
    total = int(examples.sum())
    recall = _ratio(np.diag(confusion), examples)
    present = examples > 0
    return {
        "examples": total,
        "accuracy": float(np.trace(confusion) / total) if total else None,
        "top5_accuracy": float(top5_correct / total) if total else None,
        "mean_class_recall": float(np.mean(recall[present])) if present.any() else None,
        "per_class": [
            {"id": index, "name": name, "examples": int(examples[index]),
             "predicted": int(confusion[:, index].sum()), "recall": _listed(recall[index:index + 1])[0]}
            for index, name in enumerate(class_names)],
        "confusion_matrix": confusion.tolist(),
    }


def _figure(value: Optional[float]) -> str:
    return "     -" if value is None else f"{value:6.3f}"


def format_segmentation_table(report: dict) -> str:
    """Per-class lines, rarest class (fewest labelled pixels) first, then the summary figures. Classes with no
    labelled pixel in the split are left out, and counted in a line (the JSON keeps every class)."""
    total = max(report["labelled_pixels"], 1)
    rows = sorted((row for row in report["per_class"] if row["labelled_pixels"]),
                  key=lambda row: (row["labelled_pixels"], row["id"]))
    lines = [f"{'class':<24} {'pixels':>12} {'share':>8} {'IoU':>6} {'recall':>6}"]
    for row in rows:
        label = f"{row['id']:>3} {row['name']}"[:24]
        lines.append(f"{label:<24} {row['labelled_pixels']:>12} {100 * row['labelled_pixels'] / total:>7.3f}% "
                     f"{_figure(row['iou'])} {_figure(row['recall'])}")
    lines += _left_out(len(report["per_class"]) - len(rows), "pixel")
    lines.append(f"mean IoU over the {report['classes_present']} classes present: {_figure(report['mean_iou'])}; "
                 f"pixel accuracy {_figure(report['pixel_accuracy'])}; "
                 f"frequency-weighted IoU {_figure(report['frequency_weighted_iou'])}")
    return "\n".join(lines)


def _left_out(count: int, unit: str) -> list:
    return [f"({count} class{'es' if count != 1 else ''} with no labelled {unit} in this split left out; the JSON "
            "has every class)"] if count else []


def iou_line(report: dict) -> str:
    """``road 0.91, sky 0.88, car -`` for the classes with labelled pixels, then how many were left out."""
    shown = [row for row in report["per_class"] if row["labelled_pixels"]]
    text = ", ".join(f"{row['name']} {_figure(row['iou']).strip()}" for row in shown)
    left = len(report["per_class"]) - len(shown)
    return text + (f" ({left} class{'es' if left != 1 else ''} without val pixels left out)" if left else "")


def format_classification_table(report: dict) -> str:
    """Per-class lines, rarest class (fewest examples) first, then accuracy and top-5."""
    rows = sorted((row for row in report["per_class"] if row["examples"]), key=lambda row: (row["examples"], row["id"]))
    lines = [f"{'class':<24} {'examples':>9} {'predicted':>9} {'recall':>6}"]
    for row in rows:
        label = f"{row['id']:>3} {row['name']}"[:24]
        lines.append(f"{label:<24} {row['examples']:>9} {row['predicted']:>9} {_figure(row['recall'])}")
    lines += _left_out(len(report["per_class"]) - len(rows), "example")
    lines.append(f"accuracy {_figure(report['accuracy'])}; top-5 accuracy {_figure(report['top5_accuracy'])}; "
                 f"mean class recall {_figure(report['mean_class_recall'])}")
    return "\n".join(lines)
