# Fails when the graph loads: the import is missing.
import a_module_that_is_not_installed  # noqa: F401


class OvmsPythonModel:
    def execute(self, inputs):
        return []
