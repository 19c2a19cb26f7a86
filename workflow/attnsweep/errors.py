"""The exceptions a user sees, each reported as one line on stderr, never a traceback."""


class ConfigError(ValueError):
    """A configuration value is wrong; ``key`` is its dotted path, e.g. ``experiments.critical_scaling.rho``."""

    def __init__(self, key: str, message: str):
        super().__init__(f"{key}: {message}")
        self.key = key


class SetupError(SystemExit):
    """The install lacks a file the package ships, or ``attnsweep init`` would overwrite one. A
    SystemExit, so that wherever it is raised (the command line, a Snakefile) the process ends
    with status 1 and ``attnsweep: MESSAGE`` as one line on stderr."""

    def __init__(self, message: str):
        super().__init__(f"attnsweep: {message}")
