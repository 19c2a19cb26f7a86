"""The exceptions a user sees, each reported as one line on stderr, never a traceback."""

import os


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


#: What a command stopped by SIGINT (Ctrl-C, ``timeout -s INT``) says last, on stderr: in a
#: simulate job's log it is how ``attnsweep status`` tells an interrupted job from a failed one.
INTERRUPTED = "attnsweep: interrupted (SIGINT); what finished is kept, and the same command goes on from there"

#: The command that heals a results tree holding a bad store (see :mod:`attnsweep.stores.verify`).
HEAL = "`attnsweep verify {config} --quarantine`, then `snakemake`"


class BadStoreError(ValueError):
    """A step's input store is damaged or not the one it should be. ``str()`` is one line:
    the path, what is wrong, and the command that heals the tree (:data:`HEAL`; the config is
    ``$ATTNSWEEP_CONFIG``, which the workflow sets, else ``CONFIG``)."""

    def __init__(self, path: str, problem: str):
        super().__init__(path, problem)
        self.path, self.problem = str(path), problem

    def __str__(self) -> str:
        heal = HEAL.format(config=os.environ.get("ATTNSWEEP_CONFIG", "CONFIG"))
        return f"bad store {self.path}: {self.problem}; heal the results with {heal}"
