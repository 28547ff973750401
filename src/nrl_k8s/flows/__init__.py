"""The run flows (`run --rayjob`, `--parallel`, `run --raycluster`) and the steps they share: the plan,
bring-up steps, rollback, DGD readiness and run records."""
