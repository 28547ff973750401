"""`nrl-k8s dashboard`: the local relay to a Service through the API server's service proxy."""
