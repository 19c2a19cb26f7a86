"""Real images as the classification signals of paper 002 (App. A.5, Fig. 8).

The paper takes the MNIST images of the digits 1 and 2 as the classification signals v_1, v_2 and
two random vectors as the group signals. MNIST cannot be downloaded on every machine, so the
default source is the 8 x 8 digits that scikit-learn ships (1797 images, d = 64); a user's own
MNIST file is accepted in the Keras ``mnist.npz`` layout (``x_train`` (n, 28, 28), ``y_train``
(n,)). Every image is flattened and scaled to unit Euclidean norm, the scale of the unit signals
of Definition 2.1; it is not centred (the images of different classes overlap, which is the
point of the real-data run). Light: numpy only, used at planning to check a file.
"""

from __future__ import annotations

import functools
import hashlib
import zipfile
from pathlib import Path

import numpy as np

KEYS = ("x_train", "y_train")


@functools.lru_cache(maxsize=4)
def _raw(file: str | None) -> tuple[np.ndarray, np.ndarray]:
    """(images (n, d) float64, labels (n,) int) of scikit-learn's digits or of an MNIST ``.npz``."""
    if file is None:
        from sklearn.datasets import load_digits  # heavy (scikit-learn): only without an image file

        digits = load_digits()
        return digits.data.astype(np.float64), digits.target.astype(int)
    try:
        archive = np.load(file, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        raise ValueError(f"{file} is not a readable .npz archive ({error})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"{file} holds one array, not an .npz archive of x_train and y_train")
    with archive:
        missing = [k for k in KEYS if k not in archive.files]
        if missing:
            raise ValueError(f"{file} has no {' or '.join(missing)} (the Keras mnist.npz layout: x_train, y_train)")
        images, labels = archive["x_train"], archive["y_train"]
    if images.ndim < 2 or len(images) != len(labels):
        raise ValueError(f"{file}: x_train {images.shape} and y_train {labels.shape} do not pair one image per label")
    return images.reshape(len(images), -1).astype(np.float64), labels.astype(int).ravel()


def problem(file: str | None, classes: list[int]) -> str | None:
    """Why ``file`` (None: scikit-learn's digits) cannot serve ``classes``, or None if it can."""
    if file is not None and not Path(file).is_file():
        return f"{file} is not a file"
    try:
        images, labels = _raw(file)
    except (OSError, ValueError) as error:
        return str(error)
    absent = [c for c in classes if not (labels == c).any()]
    if absent:
        return f"no images of class {absent} in {file or 'scikit-learn digits'}"
    empty = [c for c in classes if not np.linalg.norm(images[labels == c], axis=1).all()]
    return f"class {empty} has a blank image (zero norm)" if empty else None


def dimension(file: str | None) -> int:
    """d: pixels per image."""
    return _raw(file)[0].shape[1]


def classes(file: str | None, wanted: list[int]) -> list[np.ndarray]:
    """Per wanted class its images (n_c, d), each of unit norm."""
    images, labels = _raw(file)
    picked = [images[labels == c] for c in wanted]
    return [x / np.linalg.norm(x, axis=1, keepdims=True) for x in picked]


def fingerprint(file: str) -> str:
    """SHA-256 of a user's image file: part of the job identity, so a changed file reruns."""
    with open(file, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
