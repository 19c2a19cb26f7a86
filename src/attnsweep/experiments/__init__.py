"""The built-in experiments, one package per paper (the table of them: :data:`attnsweep.registry.BUILTIN`)."""
