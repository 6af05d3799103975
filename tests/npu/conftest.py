import pytest


@pytest.fixture(scope="module")
def embedded():
    """The embedded model's integer graph, its default input and the kernels' value of every
    tensor (the golden values every NPU run is checked against)."""
    from qsim.commands.quantized_model import default_input
    from qsim.quant.pipeline import embedded_quantized_model
    from qsim.runtime.executor import execute
    model = embedded_quantized_model()
    feeds = default_input(model)
    return model.graph, feeds, execute(model.graph, feeds, backend="kernels")
