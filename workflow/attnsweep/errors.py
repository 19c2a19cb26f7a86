"""The one exception a user sees for bad input."""


class ConfigError(ValueError):
    """A configuration value is wrong; ``key`` is its dotted path, e.g. ``experiments.critical_scaling.rho``."""

    def __init__(self, key: str, message: str):
        super().__init__(f"{key}: {message}")
        self.key = key

