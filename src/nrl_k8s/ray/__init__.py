"""Ray access: the dashboard's Job REST API, the driver's working_dir package and the exec submitter."""
