"""Helpers shared by the NNEF 1.0 tests (imported by name: pytest puts this folder on sys.path)."""
import numpy as np

from qsim.nnef1.compose import Composer
from qsim.nnef1.parser import parse_document


def compose_text(text: str, data: dict | None = None, keep=None, filename: str = "test.nnef"):
    """Composes a document; variables come from `data` by label, zeros otherwise."""
    data = data or {}

    def load_variable(label, shape, item, loc):
        if label in data:
            return np.asarray(data[label]).reshape(shape), None
        return None, None

    doc = parse_document(text, filename)
    composer = Composer(doc, load_variable, None if keep is None else frozenset(keep))
    return composer.compose().verify()
