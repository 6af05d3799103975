"""qsim.quant.evaluation.scoring: which outputs the accuracy report scores, and as what."""
import dataclasses

import numpy as np
import onnx
import pytest

import qsim.onnx
from qsim.errors import DataError, UsageError
from qsim.quant.evaluation.scoring import (OutputRole, choose_outputs, class_vector_extent, label_targets,
                                old_rule_warning)

from .scoring_models import classifier, plain_heads, two_heads


def _graph(model, tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    return qsim.onnx.load(str(path))


@pytest.mark.parametrize("shape, k", [((10,), 10), ((10, 1, 1), 10), ((1, 7), 7), ((2,), 2),
                                      ((1,), None), ((), None), ((4, 6, 6), None), ((3, 2), None)])
def test_class_vector_extent(shape, k):
    assert class_vector_extent(shape) == k


def test_the_only_output_of_class_vector_shape_is_a_classification(tmp_path, rng):
    graph = _graph(classifier(rng), tmp_path)
    (out,) = choose_outputs(graph)
    assert (out.name, out.role, out.reason, out.classes) == ("logits", OutputRole.CLASSES, "only output", 10)
    assert old_rule_warning(graph, (out,)) is None


def test_a_single_output_that_is_not_a_class_vector_gets_no_warning(tmp_path, rng):
    graph = _graph(two_heads(rng), tmp_path)
    box, _ = choose_outputs(graph)
    single = dataclasses.replace(graph, outputs=("box",))
    assert old_rule_warning(single, (box,)) is None
    assert old_rule_warning(graph, (box,)) is not None     # the same output first of two: warned


def test_mtcnn_like_heads_box_is_values_softmax_is_classes(tmp_path, rng):
    graph = _graph(two_heads(rng), tmp_path)
    box, prob = choose_outputs(graph)
    assert (box.name, box.role) == ("box", OutputRole.VALUES)
    assert box.reason == "several outputs, no softmax, no labels"
    assert (prob.name, prob.role, prob.reason) == ("prob", OutputRole.CLASSES, "softmax")
    assert label_targets((box, prob)) == ("prob",)
    warning = old_rule_warning(graph, (box, prob))
    assert "outputs[0] 'box'" in warning and "[4]" in warning and "--score-output" in warning


def test_named_labels_make_an_output_a_classification(tmp_path, rng):
    graph = _graph(two_heads(rng), tmp_path)
    box, prob = choose_outputs(graph, labelled=("box",))
    assert (box.role, box.reason) == (OutputRole.CLASSES, "labels")
    assert old_rule_warning(graph, (box, prob)) is None


def test_requested_outputs_keep_the_graph_order(tmp_path, rng):
    graph = _graph(two_heads(rng), tmp_path)
    assert [o.name for o in choose_outputs(graph, ("prob", "box"))] == ["box", "prob"]
    assert [o.name for o in choose_outputs(graph, ("prob",))] == ["prob"]


def test_unknown_score_output_is_a_usage_error_listing_the_outputs(tmp_path, rng):
    graph = _graph(two_heads(rng), tmp_path)
    with pytest.raises(UsageError, match=r"--score-output 'boxes': the model has no output") as err:
        choose_outputs(graph, ("prob", "boxes"))
    assert "'box' [1, 4]" in err.value.hint and "'prob' [1, 2]" in err.value.hint


def test_labels_for_an_unknown_output_are_a_data_error(tmp_path, rng):
    graph = _graph(two_heads(rng), tmp_path)
    with pytest.raises(DataError, match="labels for 'face'") as err:
        choose_outputs(graph, labelled=("face",))
    assert "'prob' [1, 2]" in err.value.hint


def test_labels_for_a_feature_map_are_refused(tmp_path, rng):
    graph = _graph(plain_heads(rng), tmp_path)
    with pytest.raises(DataError, match=r"labels for output 'map': its values per sample \[4, 6, 6\]"):
        choose_outputs(graph, labelled=("map",))


def test_unnamed_labels_go_to_the_first_class_vector_when_no_rule_picks_one(tmp_path, rng):
    graph = _graph(plain_heads(rng), tmp_path)
    a, b, fmap = choose_outputs(graph)
    assert [o.role for o in (a, b, fmap)] == [OutputRole.VALUES] * 3
    assert fmap.reason == "not a class vector"
    a, b, fmap = choose_outputs(graph, unnamed_labels=True)
    assert (a.role, a.reason, b.role) == (OutputRole.CLASSES, "labels", OutputRole.VALUES)
    # only the feature map scored: the labels fit no output
    with pytest.raises(DataError, match="no scored output is a class vector"):
        choose_outputs(graph, ("map",), unnamed_labels=True)


def test_unnamed_labels_with_two_class_counts_must_be_named(tmp_path, rng):
    graph = _graph(plain_heads(rng), tmp_path)
    with pytest.raises(UsageError, match="different class counts \\('a' 3, 'b' 5\\)") as err:
        choose_outputs(graph, labelled=("a", "b"), unnamed_labels=True)
    assert "labels/<output name>" in err.value.hint


def test_logits_beside_their_softmax_are_one_classification(tmp_path, rng):
    """A model outputting logits and their softmax: both class vectors, unnamed labels for both."""
    model = two_heads(rng)
    model.graph.output.insert(0, onnx.helper.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, None))
    graph = _graph(model, tmp_path)
    logits, box, prob = choose_outputs(graph, unnamed_labels=True)
    assert (logits.role, logits.reason) == (OutputRole.CLASSES, "logits of a softmax")
    assert label_targets((logits, box, prob)) == ("logits", "prob")
    assert old_rule_warning(graph, (logits, box, prob)) is None
