"""Built-in experiments; importing this package registers each of them."""

from attnsweep.experiments import (
    causal_clustering,
    cluster_emergence,
    critical_scaling,
    mixture_training,
    sphere_clustering,
)

__all__ = ["causal_clustering", "cluster_emergence", "critical_scaling", "mixture_training", "sphere_clustering"]
