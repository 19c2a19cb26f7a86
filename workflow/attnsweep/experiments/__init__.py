"""Built-in experiments; importing this package registers each of them."""

from attnsweep.experiments import causal_clustering  # noqa: F401
from attnsweep.experiments import cluster_emergence  # noqa: F401
from attnsweep.experiments import critical_scaling  # noqa: F401
from attnsweep.experiments import mixture_training  # noqa: F401
from attnsweep.experiments import sphere_clustering  # noqa: F401
