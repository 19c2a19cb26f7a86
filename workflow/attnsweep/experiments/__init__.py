"""Built-in experiments; importing this package registers each of them."""

from attnsweep.experiments import (
    causal_clustering,  # noqa: F401
    cluster_emergence,  # noqa: F401
    critical_scaling,  # noqa: F401
    mixture_training,  # noqa: F401
    sphere_clustering,  # noqa: F401
)
