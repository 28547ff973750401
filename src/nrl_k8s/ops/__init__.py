"""The commands around runs: status, gc, cluster up/down/list, logs, jobs, check's data and the dev corner."""
