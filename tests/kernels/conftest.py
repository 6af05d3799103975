"""Says in the header of every test run which kernel ISA paths the differential tests compare."""


def pytest_report_header(config):
    from qsim.kernels.cpu_features import supported_isas
    return "qsim kernel ISA paths under test: " + ", ".join(isa.value for isa in supported_isas())
