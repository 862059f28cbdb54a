"""The two tasks, and what the commands call one input of each in what they print.

Inside the pipeline every input is a *pair* (``PairRef``: an image and its mask, or an image and its
label); a user counts images when there is no mask. The summary, ``--plan`` and the progress lines say
``images`` for classification and ``pairs`` for segmentation.
"""

SEGMENTATION = "segmentation"
CLASSIFICATION = "classification"


def units(task: str) -> str:
    """``images`` (classification: an image and its label) or ``pairs`` (segmentation: an image and its mask)."""
    return "images" if task == CLASSIFICATION else "pairs"
